// Hourly rollups kept up to date as records arrive (README, "Reports and rollups"):
//   - a records hook appends each store's hours to rollup_deltas in the store's own statement, so
//     they commit, or fail, with the records; an insert that waits for no other store;
//   - the fold moves the deltas into the rollups in batches (every second, and before anything
//     reads them, so a reader always sees every committed record);
//   - the repair recomputes, from the raw rows, a row whose distance or longest step a fold could
//     not extend (records that fall between the hour's stored ones: a late record).
// Several instances may fold and repair at once: each takes the rows it works on with SKIP LOCKED.
import type { Db } from '../db/db.js';
import type { WriteStatement } from '../db/statement.js';
import type { RecordHook } from '../records/hooks.js';
import { aggregate, foldStatement, recompute, ROLLUP_COLUMNS, ROLLUP_TABLES, type RollupType } from './sql.js';
import { temperatureValues } from './values.js';

/** Stale rows one repair transaction takes. */
const REPAIR_BATCH = 200;
/** Deltas one fold statement takes. */
const FOLD_BATCH = 20_000;
const TYPES = Object.keys(ROLLUP_TABLES) as RollupType[];

/** The hook for one record type: its rows' hours appended to the deltas in the store's statement. */
export function rollupHook(type: RollupType): RecordHook<void> {
  return {
    name: `rollups:${type}`,
    types: [type],
    write: async (_q, stmt: WriteStatement, rows, _c, records) => {
      let series: string | undefined;
      if (type === 'reeferdata' || type === 'gensetdata') {
        // The temperatures, taken from the records in hand (values.ts), joined to their rows.
        const ids: string[] = [];
        const keys: string[] = [];
        const values: number[] = [];
        for (const r of rows) {
          temperatureValues(r.item.data, (k, v) => {
            ids.push(r.id);
            keys.push(k);
            values.push(v);
          });
        }
        series = `SELECT i.asset_id, i.owner_id, i.when_created, u.k, u.v
                    FROM unnest(${stmt.param(ids, 'int8[]')}, ${stmt.param(keys, 'text[]')}, ${stmt.param(values, 'float8[]')}) AS u(id, k, v)
                    JOIN ${records} i USING (id)`;
      }
      const rolled = series === undefined ? aggregate(type, records) : aggregate(type, records, series);
      stmt.with(`INSERT INTO rollup_deltas (${ROLLUP_COLUMNS}) ${rolled}`);
    },
  };
}

/** Every record type's hook. */
export const rollupHooks = () => TYPES.map(rollupHook);

/** The advisory lock of the fold (one fold at a time: it reads the rows it rewrites). */
const FOLD_LOCK = 'pg_advisory_xact_lock(1919904876, 1)';

/**
 * Folds the deltas committed so far into the rollups, a batch per transaction (the batch's deltas
 * deleted and their hours rewritten together: a crash leaves either), then repairs the rows that
 * came out stale. One fold runs at a time: `wait` (a reader, which must see every committed
 * record) waits for a running one; the background fold skips its turn instead. A delta of an hour
 * past `keepDays` (ROLLUP_RETENTION_DAYS) is dropped, not folded. Returns the deltas folded.
 */
export async function foldRollups(db: Db, keepDays: number, wait = true): Promise<number> {
  let folded = 0;
  let stale = 0;
  // Nothing pending (an idle service, every second): one cheap read, no transaction.
  if (!(await db.query<{ any: boolean }>('SELECT EXISTS (SELECT 1 FROM rollup_deltas) AS any')).rows[0]?.any) return 0;
  for (;;) {
    const done = await db.tx(async (q) => {
      const lock = await q.query<{ ok: boolean }>(
        wait
          ? `SELECT true AS ok FROM ${FOLD_LOCK}`
          : `SELECT ${FOLD_LOCK.replace('pg_advisory_xact_lock', 'pg_try_advisory_xact_lock')} AS ok`,
      );
      if (!lock.rows[0]?.ok) return null;
      return (await q.query<{ n: number; stale: number }>(foldStatement(FOLD_BATCH, keepDays))).rows[0]!;
    });
    if (!done) break;
    folded += done.n;
    stale += done.stale;
    if (done.n < FOLD_BATCH) break;
  }
  if (stale > 0) await repairRollups(db);
  return folded;
}

/**
 * Recomputes what stale rows (of `assetIds`, or of all) could not extend, from the raw rows, until
 * none is left that another repair does not hold. A row whose raw records are no longer all there
 * (retention removed some) keeps what it has: it is as exact as can be known. Returns the rows
 * repaired.
 */
export async function repairRollups(db: Db, assetIds?: string[]): Promise<number> {
  let repaired = 0;
  for (;;) {
    const n = await db.tx(async (q) => {
      const params: unknown[] = [];
      const scope = assetIds ? `AND asset_id = ANY($${params.push(assetIds)}::uuid[])` : '';
      // Locked until the commit: a store of the same hour waits, then adds to the repaired row.
      const { rows } = await q.query<{ asset_id: string; hour: Date; owner_id: string; type: RollupType }>(
        `SELECT asset_id, hour, owner_id, type FROM rollups WHERE stale ${scope}
          ORDER BY asset_id, hour, type, owner_id LIMIT ${REPAIR_BATCH} FOR UPDATE SKIP LOCKED`,
        params,
      );
      for (const type of new Set(rows.map((r) => r.type))) {
        const mine = rows.filter((r) => r.type === type);
        // A statement of its own: its snapshot holds every store committed before the locks.
        await q.query(
          `WITH x AS (${recompute(type, 'unnest($1::uuid[], $2::timestamptz[], $3::uuid[])')})
           UPDATE rollups r SET distance_mm = CASE WHEN x.count = r.count THEN x.distance_mm ELSE r.distance_mm END,
                                max_step_us = CASE WHEN x.count = r.count THEN x.max_step_us ELSE r.max_step_us END, stale = false
             FROM x WHERE r.asset_id = x.asset_id AND r.hour = x.hour AND r.owner_id = x.owner_id AND r.type = $4`,
          [mine.map((r) => r.asset_id), mine.map((r) => r.hour), mine.map((r) => r.owner_id), type],
        );
      }
      return rows.length;
    });
    repaired += n;
    if (n < REPAIR_BATCH) return repaired;
  }
}
