// Hourly rollups kept up to date as records arrive (docs/DESIGN.md, "Reports and rollups"):
//   - a store adds what its records add up to (parts.ts, computed from the records in hand) to
//     rollup_batches: one row per store, in the store's own statement, so it commits with the
//     records or not at all;
//   - the fold, every 10 seconds and before anything reads the rollups, combines the parts of
//     hours summed already (late records) into their rows;
//   - every minute (materializeRollups) the hours that closed are summed: rollup_state.materialized
//     moves past them and the fold writes their rows, once; the parts of hours still open are
//     combined per asset and hour on the way (they go back as one batch);
//   - a read folds what is late, and sums the hours not summed yet from the raw rows as it reads
//     (routes.ts readRollups).
// Parts whose records interleave in time (a late record inside another part's span, stores
// committing out of order) combine exactly but for the distance or longest step, which is then
// summed from the hour's raw rows when its row is written. One fold or summing at a time.
import type { Db, Queryable } from '../db/db.js';
import { WriteStatement } from '../db/statement.js';
import { setAside } from '../ops/poison.js';
import { Slices } from '../zones/slices.js';
import type { RecordHook } from '../records/hooks.js';
import { combine, decodeParts, decParse, encodeParts, encodeStore, type Part, partKey, statsJson } from './parts.js';
import { orderMembers, ROLLUP_TABLES, type RollupType, upsert } from './sql.js';

/** Batches one fold transaction takes at most. */
const FOLD_BATCH = 2_000;
/**
 * Stored bytes of parts one fold transaction takes (beyond its first batch): a store of 1,000
 * records for 1,000 assets leaves a batch of about 60 kB (110 kB as text), whose decoded parts
 * are several times that; 2,000 such batches at once exhausted a 128 MB heap.
 */
const FOLD_BYTES = 2 * 1024 * 1024;
/** What one fold transaction takes at most (the tests take less, to fold in several reads). */
export interface FoldLimits {
  batches: number;
  bytes: number;
}
const TYPES = Object.keys(ROLLUP_TABLES) as RollupType[];
const HOUR = 3_600_000;

/** The first and last hour of some times (epoch ms), as a batch row's min_hour and max_hour. */
function hourSpan(times: number[]): [Date, Date] {
  let lo = Number.POSITIVE_INFINITY;
  let hi = Number.NEGATIVE_INFINITY;
  for (const t of times) {
    if (t < lo) lo = t;
    if (t > hi) hi = t;
  }
  return [new Date(Math.floor(lo / HOUR) * HOUR), new Date(Math.floor(hi / HOUR) * HOUR)];
}

/** The hook for one record type: its records' parts appended to rollup_batches in the store's statement. */
export function rollupHook(type: RollupType): RecordHook<void> {
  return {
    name: `rollups:${type}`,
    types: [type],
    write: async (_q, stmt: WriteStatement, rows) => {
      if (!rows.length) return;
      const [lo, hi] = hourSpan(rows.map((r) => r.time.getTime()));
      stmt.with(
        `INSERT INTO rollup_batches (min_hour, max_hour, parts)
         VALUES (${stmt.param(lo, 'timestamptz')}, ${stmt.param(hi, 'timestamptz')}, ${stmt.param(encodeStore(type, rows), 'text')})`,
      );
    },
  };
}

/** Every record type's hook. */
export const rollupHooks = () => TYPES.map(rollupHook);

/** The fold running on an embedded database, if any (its one fold at a time; see consume). */
const embeddedFolds = new WeakMap<Db, Promise<Consumed>>();

/** The advisory lock of the rollups' writers (one fold or summing at a time: they rewrite the same rows). */
const LOCK = '(1919904876, 1)';

/** A rollup_batches row as the fold takes it. */
interface Batch {
  id: string;
  min_hour: Date;
  max_hour: Date;
  parts: string;
  compacted: boolean;
}
const BATCH_COLUMNS = 'id::text AS id, min_hour, max_hour, parts, compacted';

/** What one fold transaction did: the batches taken, whether more wait, those set aside (poison). */
interface Consumed {
  taken: number;
  more: boolean;
  bad: { id: string; reason: string; detail: string }[];
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Epoch ms of 0001-01-01 and 9999-12-31: every time a rollup row may hold lies between. */
const MIN_MS = -62_135_596_800_000;
const MAX_MS = 253_402_300_800_000;
const int = (v: unknown, lo = Number.MIN_SAFE_INTEGER) => Number.isSafeInteger(v) && (v as number) >= lo;
const real = (v: unknown) => v === null || Number.isFinite(v);
const micros = (v: unknown) => int(v) && (v as number) >= MIN_MS * 1000 && (v as number) < MAX_MS * 1000;

/** Why a decoded part cannot be a rollup row (a value the database would refuse, or none), or null. */
function partProblem(p: Part): string | null {
  if (!TYPES.includes(p.type)) return 'unknown type';
  if (typeof p.asset !== 'string' || !UUID.test(p.asset) || typeof p.owner !== 'string' || !UUID.test(p.owner)) return 'bad id';
  if (!int(p.hour) || p.hour % HOUR !== 0 || p.hour < MIN_MS || p.hour >= MAX_MS) return 'bad hour';
  if (!int(p.n, 1) || !micros(p.first) || !micros(p.last) || p.first > p.last) return 'bad count or times';
  if (![p.firstLat, p.firstLon, p.lastLat, p.lastLon].every(real)) return 'bad position';
  if ((p.mm !== null && !int(p.mm, 0)) || (p.step !== null && !int(p.step, 0))) return 'bad distance or step';
  for (const [k, st] of p.stats ?? []) {
    // jsonb refuses a NUL and a lone surrogate in a key.
    if (typeof k !== 'string' || k.includes('\u0000') || !k.isWellFormed()) return 'bad stats key';
    if (!int(st.n, 1) || !Number.isFinite(st.min) || !Number.isFinite(st.max)) return 'bad stats';
    if (st.sum !== null && (!(typeof st.sum.m === 'bigint' || int(st.sum.m)) || !int(st.sum.s, 0))) return 'bad stats sum';
  }
  return null;
}

/**
 * A batch's parts, or why it cannot be folded: `reason` the metric's (undecodable, invalid-part),
 * `detail` what the set-aside row keeps.
 */
function partsOf(b: Batch): Part[] | { reason: string; detail: string } {
  let parts: Part[];
  try {
    parts = decodeParts(b.parts);
  } catch (e) {
    return { reason: 'undecodable', detail: `undecodable: ${String((e as Error)?.message ?? e).slice(0, 200)}` };
  }
  for (const [i, p] of parts.entries()) {
    const problem = partProblem(p);
    if (problem) return { reason: 'invalid-part', detail: `invalid-part: part ${i}: ${problem}` };
  }
  return parts;
}

/** The stored rows of `keys`, as parts (sums exact: read as text). */
async function storedParts(q: Queryable, keys: Part[]): Promise<Map<string, Part>> {
  const out = new Map<string, Part>();
  if (!keys.length) return out;
  const { rows } = await q.query<any>(
    `SELECT r.type, r.asset_id, r.owner_id, (extract(epoch FROM r.hour) * 1000)::float8 AS hour, r.count::float8 AS n,
            (extract(epoch FROM r.first_at) * 1000000)::int8::text AS first, (extract(epoch FROM r.last_at) * 1000000)::int8::text AS last,
            r.first_id::text, r.last_id::text, r.first_lat, r.first_lon, r.last_lat, r.last_lon, r.distance_mm::float8 AS mm,
            r.max_step_us::float8 AS step,
            (SELECT json_agg(json_build_array(e.key, (e.value ->> 0)::float8, (e.value ->> 1)::float8, (e.value ->> 2)::float8, e.value ->> 3))
               FROM jsonb_each(r.stats) e) AS stats
       FROM unnest($1::text[], $2::uuid[], $3::uuid[], $4::timestamptz[]) AS k(type, asset_id, owner_id, hour)
       JOIN rollups r USING (type, asset_id, owner_id, hour)`,
    [keys.map((k) => k.type), keys.map((k) => k.asset), keys.map((k) => k.owner), keys.map((k) => new Date(k.hour))],
  );
  for (const r of rows) {
    const p: Part = {
      type: r.type,
      asset: r.asset_id,
      owner: r.owner_id,
      hour: r.hour,
      n: r.n,
      first: Number(r.first),
      last: Number(r.last),
      firstId: r.first_id === null ? null : BigInt(r.first_id),
      lastId: r.last_id === null ? null : BigInt(r.last_id),
      firstLat: r.first_lat,
      firstLon: r.first_lon,
      lastLat: r.last_lat,
      lastLon: r.last_lon,
      mm: r.mm,
      step: r.step,
      stats: r.stats === null ? null : new Map(r.stats.map((s: any[]) => [s[0], { n: s[1], min: s[2], max: s[3], sum: decParse(s[4]) }])),
      loose: false,
    };
    out.set(partKey(p), p);
  }
  return out;
}

/**
 * One turn of the fold under the lock, its reads in one REPEATABLE READ snapshot (the raw rows it
 * may sum are then exactly those of the batches it saw) and its writes in one statement after them
 * (on the embedded database, see below): takes the batches; the parts of hours summed
 * already (before rollup_state.materialized) are combined with each other and with the stored rows
 * and written; with `compact`, the parts of hours still open are combined per asset and hour and
 * go back as one batch (so pending parts stay one per asset and hour, not one per store). A row
 * whose parts interleave (loose) has its distance or longest step summed from the raw rows. Parts
 * of hours past `keepDays` are let go. Returns the batches taken, or null when another fold runs
 * and `wait` is false.
 */
async function consume(db: Db, keepDays: number, wait: boolean, compact: boolean, limits: FoldLimits): Promise<Consumed | null> {
  const done = (n: Consumed) => {
    for (const b of n.bad) {
      setAside('rollups', b.reason, { rollupBatchId: b.id, detail: b.detail }, undefined, 'moved to rollup_batches_set_aside');
    }
    return n;
  };
  // The embedded database has one connection, shared: a BEGIN on it would take in every other
  // caller's statements, and a transaction holds it exclusively. So the fold reads without one
  // (one fold at a time in the process, which is the database's only one: nothing else deletes
  // batches or writes rows), and writes in one statement; only a fold with loose rows holds the
  // database, to take the batches that came meanwhile and sum their raw rows consistently.
  if (db.kind === 'pglite') {
    const before = embeddedFolds.get(db);
    if (before && !wait) return null;
    const turn = (async () => {
      await before?.catch(() => {});
      const { consumed, write } = await consumeIn(db, keepDays, compact, limits, (fn) => db.tx(fn));
      await write?.run(db);
      return done(consumed);
    })();
    embeddedFolds.set(db, turn);
    try {
      return await turn;
    } finally {
      if (embeddedFolds.get(db) === turn) embeddedFolds.delete(db);
    }
  }
  return db.session(async (s) => {
    const got = await s.query<{ ok: boolean }>(
      wait ? `SELECT true AS ok FROM pg_advisory_lock${LOCK}` : `SELECT pg_try_advisory_lock${LOCK} AS ok`,
    );
    if (!got.rows[0]?.ok) return null;
    try {
      // The reads in a REPEATABLE READ transaction, which takes no transaction id; the writes
      // after it, as one statement of its own (under the lock, nothing else writes what the reads
      // saw). So the fold holds a transaction id, and with it the event log's horizon, only while
      // that statement runs in the database: never for its sums, nor for a turn of a busy event
      // loop between a write's answer and a COMMIT.
      await s.exec('BEGIN ISOLATION LEVEL REPEATABLE READ');
      let out: Awaited<ReturnType<typeof consumeIn>>;
      try {
        out = await consumeIn(s, keepDays, compact, limits);
        await s.exec('COMMIT');
      } catch (e) {
        await s.exec('ROLLBACK');
        throw e;
      }
      await out.write?.run(s);
      return done(out.consumed);
    } finally {
      await s.query(`SELECT pg_advisory_unlock${LOCK}`);
    }
  });
}

/**
 * One turn's reads (the batches, the stored rows, a loose row's raw rows, all in one snapshot) and
 * sums; returns what it took (`more`: it took what the limits allow, so more may wait) and the one
 * statement that writes the result, which the caller runs after the reads.
 */
async function consumeIn(
  q: Queryable,
  keepDays: number,
  compact: boolean,
  limits: FoldLimits,
  exclusive?: <T>(fn: (t: Queryable) => Promise<T>) => Promise<T>,
): Promise<{ consumed: Consumed; write: { run: (on: Queryable) => Promise<unknown> } | null }> {
  const bad: (Consumed['bad'][number] & { row: Batch })[] = [];
  const end = (await q.query<{ m: Date }>('SELECT materialized AS m FROM rollup_state')).rows[0]!.m.getTime();
  // Every batch when compacting; else those with parts of summed hours. Taken in id order, up to
  // FOLD_BATCH of them and FOLD_BYTES (at least one) a read, each read past the last; `more`: some
  // were left. Deleted at the end (by id: a batch committed after this snapshot stays).
  const cond = compact ? '' : 'AND min_hour < $2';
  let last = '0';
  let more = false;
  const ids: string[] = [];
  const take = async (q: Queryable): Promise<Batch[]> => {
    const params: unknown[] = compact ? [last] : [last, new Date(end)];
    // In the column's order, not its text alias's ('10' sorts before '8').
    const { rows } = await q.query<{ id: string; size: number }>(
      `SELECT id::text AS id, pg_column_size(parts) AS size FROM rollup_batches WHERE id > $1::int8 ${cond} ORDER BY rollup_batches.id LIMIT ${limits.batches + 1}`,
      params,
    );
    const some: string[] = [];
    let bytes = 0;
    for (const r of rows) {
      bytes += r.size;
      if (some.length && (some.length === limits.batches || bytes > limits.bytes)) break;
      some.push(r.id);
    }
    more = some.length < rows.length;
    if (!some.length) return [];
    last = some[some.length - 1]!;
    for (const id of some) ids.push(id);
    return (await q.query<Batch>(`SELECT ${BATCH_COLUMNS} FROM rollup_batches WHERE id = ANY($1::int8[])`, [some])).rows;
  };
  const keep = Date.now() - keepDays * 86_400_000;
  // One part per key, combined as batches are read (memory grows with the keys, not the batches).
  // Combining in steps can only find more overlap than combining all at once: a part it calls
  // loose has its distance and longest step summed from the raw rows below, so nothing is lost.
  const summed = new Map<string, Part>();
  const open = new Map<string, Part>();
  // A batch that cannot be folded (poison) is moved aside whole, with its reason; the rest go on.
  // Decoding is the fold's CPU (a minute's batches at a few thousand records a second take
  // hundreds of milliseconds): done in slices, so the event loop runs between them.
  const slices = new Slices();
  const add = async (rows: Batch[]) => {
    for (const r of rows) {
      await slices.tick();
      const parts = partsOf(r);
      if (!Array.isArray(parts)) {
        bad.push({ id: r.id, ...parts, row: r });
        continue;
      }
      for (const p of parts) {
        if (p.hour + HOUR <= keep) continue;
        const into = p.hour < end ? summed : open;
        const k = partKey(p);
        const had = into.get(k);
        into.set(k, had ? combine([had, p]) : p);
      }
    }
  };
  const rows = await take(q);
  if (!rows.length) return { consumed: { taken: 0, more: false, bad: [] }, write: null };
  await add(rows);
  rows.length = 0;
  const stored = await storedParts(q, [...summed.values()]);
  let write: Part[] = [];
  const combineSummed = () => {
    write = [];
    for (const [k, p] of summed) {
      const s = stored.get(k);
      write.push(s ? combine([s, p]) : p);
    }
  };
  combineSummed();
  const writeStatement = () => {
    // The writes, one statement: the batches taken go (poison ones aside), the open hours' parts
    // come back as one batch, and the rows of summed hours are written.
    const stmt = new WriteStatement();
    stmt.with(`DELETE FROM rollup_batches WHERE id = ANY(${stmt.param(ids, 'int8[]')})`);
    if (bad.length) {
      stmt.with(
        `INSERT INTO rollup_batches_set_aside (id, min_hour, max_hour, parts, compacted, reason)
         SELECT * FROM unnest(${stmt.arrays(bad, [
           [(b) => b.row.id, 'int8'],
           [(b) => b.row.min_hour, 'timestamptz'],
           [(b) => b.row.max_hour, 'timestamptz'],
           [(b) => b.row.parts, 'text'],
           [(b) => b.row.compacted, 'boolean'],
           [(b) => b.detail, 'text'],
         ])})
         ON CONFLICT (id) DO NOTHING`,
      );
    }
    const back = [...open.values()];
    if (back.length) {
      const [lo, hi] = hourSpan(back.map((p) => p.hour));
      stmt.with(
        `INSERT INTO rollup_batches (min_hour, max_hour, parts, compacted)
         VALUES (${stmt.param(lo, 'timestamptz')}, ${stmt.param(hi, 'timestamptz')}, ${stmt.param(encodeParts(back), 'text')}, true)`,
      );
    }
    const rowsOf = write.length
      ? upsert(
          `SELECT a, h, t, o, n, timestamptz 'epoch' + f * interval '1 microsecond', timestamptz 'epoch' + l * interval '1 microsecond',
                  fi, li, fla, flo, lla, llo, mm, st, s::jsonb
             FROM unnest(${stmt.arrays(write, [
               [(p) => p.asset, 'uuid'],
               [(p) => new Date(p.hour), 'timestamptz'],
               [(p) => p.type, 'text'],
               [(p) => p.owner, 'uuid'],
               [(p) => p.n, 'int8'],
               [(p) => p.first, 'int8'],
               [(p) => p.last, 'int8'],
               [(p) => p.firstId?.toString() ?? null, 'int8'],
               [(p) => p.lastId?.toString() ?? null, 'int8'],
               [(p) => p.firstLat, 'float8'],
               [(p) => p.firstLon, 'float8'],
               [(p) => p.lastLat, 'float8'],
               [(p) => p.lastLon, 'float8'],
               [(p) => p.mm, 'int8'],
               [(p) => p.step, 'int8'],
               [(p) => statsJson(p.stats), 'text'],
             ])})
                  AS u(a, h, t, o, n, f, l, fi, li, fla, flo, lla, llo, mm, st, s)`,
        )
      : undefined;
    return { run: (on: Queryable) => stmt.run(on, rowsOf) };
  };
  // The rest reads the raw rows of loose rows, then builds the write, on `t`. A loose row's
  // distance or longest step is summed from the raw rows `t` sees: every batch of summed hours it
  // sees must be taken with it, or the records of one left behind would count twice (taken in
  // steps of FOLD_BYTES, combined as they come). `catchUp`: take them all first.
  const rest = async (t: Queryable, catchUp: boolean) => {
    if (catchUp) {
      do await add(await take(t));
      while (more);
      for (const [k, p] of await storedParts(
        t,
        [...summed.values()].filter((p) => !stored.has(partKey(p))),
      ))
        stored.set(k, p);
      combineSummed();
    }
    // A loose row's distance or longest step from the raw rows; a count that differs: retention
    // deleted some of the hour's raw rows, and the row keeps what the parts give.
    const loose = write.filter((p) => p.loose);
    for (const type of new Set(loose.map((p) => p.type))) {
      const mine = new Map(
        loose.filter((p) => p.type === type).map((p) => [`${p.asset.toLowerCase()}/${p.hour}/${p.owner.toLowerCase()}`, p]),
      );
      const { rows: sums } = await t.query<{
        asset_id: string;
        hour: Date;
        owner_id: string;
        count: string;
        mm: string | null;
        step: string | null;
      }>(
        `SELECT asset_id, hour, owner_id, count::text AS count, distance_mm::text AS mm, max_step_us::text AS step
           FROM (${orderMembers(type, 'unnest($1::uuid[], $2::timestamptz[], $3::uuid[])')}) x`,
        [[...mine.values()].map((p) => p.asset), [...mine.values()].map((p) => new Date(p.hour)), [...mine.values()].map((p) => p.owner)],
      );
      for (const x of sums) {
        const p = mine.get(`${x.asset_id}/${x.hour.getTime()}/${x.owner_id}`);
        if (!p || Number(x.count) !== p.n) continue;
        p.mm = x.mm === null ? null : Number(x.mm);
        p.step = x.step === null ? null : Number(x.step);
      }
    }
    return writeStatement();
  };
  const consumed = () => ({ taken: ids.length, more, bad: bad.map(({ id, reason, detail }) => ({ id, reason, detail })) });
  const loose = write.some((p) => p.loose);
  // Without a snapshot of its own (the embedded database), a fold with loose rows reads their
  // raw rows holding the database (`exclusive`), after taking every batch that came meanwhile.
  if (loose && exclusive) {
    await exclusive(async (t) => (await rest(t, true)).run(t));
    return { consumed: consumed(), write: null };
  }
  const w = await rest(q, loose && more);
  return { consumed: consumed(), write: w };
}

/**
 * Folds the parts of hours summed already (late records) into their rows; with `compact`, also
 * combines the parts of open hours per asset and hour (every minute: what waits for an hour to
 * close stays one part per asset and hour, not one per store). `wait` (a reader, which must see
 * every committed record) waits for a running fold; the background fold (every 10 seconds) skips its
 * turn when another runs. Returns the batches taken.
 */
export async function foldRollups(
  db: Db,
  keepDays: number,
  wait = true,
  compact = false,
  limits: FoldLimits = { batches: FOLD_BATCH, bytes: FOLD_BYTES },
): Promise<number> {
  let folded = 0;
  // Nothing to do (an idle service; a live one between its minutes): one cheap read.
  const pending = async () =>
    (
      await db.query<{ any: boolean }>(
        `SELECT EXISTS (SELECT 1 FROM rollup_batches
                         WHERE min_hour < (SELECT materialized FROM rollup_state) ${compact ? 'OR NOT compacted' : ''}) AS any`,
      )
    ).rows[0]?.any;
  while (await pending()) {
    const n = await consume(db, keepDays, wait, compact, limits);
    if (n === null) break;
    folded += n.taken;
    if (!n.more) break;
  }
  return folded;
}

/**
 * Sums the hours that have ended by `until` (now less ROLLUP_CLOSE_AFTER_SECONDS: records a little
 * late are not late yet): moves rollup_state.materialized past them, and folds their parts into
 * their rows (compacting the open hours' parts on the way). Until the fold, a reader folds first
 * (every reader does). Returns the hours summed.
 */
export async function materializeRollups(db: Db, until: number, keepDays: number): Promise<number> {
  const target = new Date(Math.floor(until / HOUR) * HOUR);
  const { rows } = await db.query<{ hours: number }>(
    `WITH before AS (SELECT materialized FROM rollup_state),
     moved AS (UPDATE rollup_state SET materialized = $1 WHERE materialized < $1 RETURNING 1)
     SELECT COALESCE((SELECT floor(extract(epoch FROM $1 - materialized) / 3600)::int FROM before WHERE EXISTS (SELECT 1 FROM moved)), 0) AS hours`,
    [target],
  );
  await foldRollups(db, keepDays, true, true);
  return rows[0]!.hours;
}
