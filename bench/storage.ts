// The storage benchmark and capacity model (`BENCH_ONLY=storage`, PostgreSQL; docs/SCALING.md):
//   1. bytes on disk (table + indexes) and WAL bytes per stored record of each type, and the event
//      log's share;
//   2. rows written per stored record, and per delivered event for each channel and mode;
//   3. REST bulk ingest, partitioned next to unpartitioned: two services side by side, alternating
//      rounds, the median of each;
//   4. list latency at >= 10 million locations in both layouts ("one asset, last day" and an
//      owner-wide keyset page), with the plan's pruning;
//   5. removing one expired partition of >= 5 million rows: how long, and REST ingest p99 while it
//      runs next to the same ingest without it.
// Databases: tracking_bench_part and tracking_bench_flat keep their 10 million rows between runs;
// tracking_bench_drop is made afresh. The unpartitioned layout is the migrations with the
// partitioning program skipped (the service leaves a plain table as it is).
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { createPostgres } from '../src/db/db.js';
import { migrate } from '../src/db/migrate.js';
import { Partitions } from '../src/storage/partitions.js';
import { Retention } from '../src/storage/retention.js';
import { migrationPrograms } from '../src/storage/storage.js';
import { Api, dbUrl, freshDatabase, knob, percentile, Receiver, retire, round, sleep, startService, ADMIN_URL } from './lib.js';

const TARGET_ROWS = knob('BENCH_STORAGE_ROWS', 10_000_000);
const DROP_ROWS = knob('BENCH_DROP_ROWS', 5_000_000);
const ROUNDS = knob('BENCH_STORAGE_ROUNDS', 3);
const ASSETS = 1000;
const DAY = 86_400_000;

async function ensureDatabase(name: string): Promise<{ url: string; made: boolean }> {
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
  if (!exists.rowCount) await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  return { url: dbUrl(name), made: !exists.rowCount };
}

/** Migrates `url`; `flat`: the partitioning program is skipped (the layout before issue 19). */
async function migrated(url: string, flat: boolean) {
  const db = createPostgres(url, 2);
  try {
    await migrate(db, { programs: flat ? { 'partition-by-time': async () => {} } : migrationPrograms('postgres', 'week') });
  } finally {
    await db.close();
  }
}

/** An owner with ASSETS assets (made once per database), and an API key for it. */
async function fleetOf(api: Api, pool: pg.Pool, name: string) {
  let ownerId: string | undefined = (await pool.query('SELECT id FROM owners WHERE name = $1', [name])).rows[0]?.id;
  ownerId ??= (await api.call('POST', '/owners', { name })).id as string;
  await pool.query(
    `INSERT INTO assets (id, owner_id, name) SELECT gen_random_uuid(), $1, $2 || lpad(g::text, 6, '0')
       FROM generate_series(1, ${ASSETS}) g ON CONFLICT DO NOTHING`,
    [ownerId, `${name}-`],
  );
  const assets: string[] = (await pool.query('SELECT id FROM assets WHERE owner_id = $1 ORDER BY name', [ownerId])).rows.map((r) => r.id);
  const key = (await api.call('POST', '/api-keys', { name: `${name}-${Date.now()}`, ownerId, scopes: ['read', 'write'] })).key as string;
  const keyed = new Api(api.base);
  keyed.token = key;
  return { ownerId, assets, api: keyed };
}

/** Fills locations up to `target` rows: every asset one every 10 minutes, going back from 2 hours ago. */
async function fill(pool: pg.Pool, url: string, ownerId: string, target: number, partitioned: boolean): Promise<number> {
  const have = Number((await pool.query('SELECT count(*) AS n FROM locations WHERE owner_id = $1', [ownerId])).rows[0].n);
  if (have >= target) return 0;
  const perAsset = Math.ceil((target - have) / ASSETS);
  const first = Date.now() - 2 * 3600_000 - perAsset * 600_000 - 3600_000;
  if (partitioned) {
    const db = createPostgres(url, 2);
    const times: number[] = [];
    for (let t = first; t < Date.now() + DAY; t += DAY) times.push(t);
    await new Partitions(db, 'week').ensure('locations', times);
    await db.close();
  }
  const t0 = performance.now();
  const chunk = 200;
  for (let from = 0; from < perAsset; from += chunk) {
    await pool.query(
      `INSERT INTO locations (asset_id, owner_id, latitude, longitude, speed, heading, when_created)
       SELECT a.id, $1, random() * 170 - 85, random() * 350 - 175, random() * 80, random() * 360,
              now() - interval '2 hours' - ((g + $4::int) * interval '10 minutes') - (a.n * interval '1 second')
         FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM assets WHERE owner_id = $1) a,
              generate_series($2::int, $3::int) g`,
      [ownerId, from, Math.min(perAsset, from + chunk) - 1, Math.ceil(have / ASSETS)],
    );
  }
  await pool.query('VACUUM ANALYZE locations');
  return (performance.now() - t0) / 1000;
}

function locations(assets: string[], n: number, offset: number, at = Date.now() - 60_000) {
  return JSON.stringify(
    Array.from({ length: n }, (_, i) => ({
      assetId: assets[(offset + i) % assets.length],
      latitude: round(Math.random() * 170 - 85, 6),
      longitude: round(Math.random() * 350 - 175, 6),
      speed: 12.5,
      heading: 90,
      whenCreated: new Date(at + i).toISOString(),
    })),
  );
}

/** `posts` bulks of 1000 locations, 4 in flight: records/s. */
async function ingestRound(api: Api, assets: string[], posts: number): Promise<number> {
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (next < posts) {
        const p = next++;
        await api.postLocations(locations(assets, 1000, p * 1000));
      }
    }),
  );
  return Math.round((posts * 1000) / ((performance.now() - t0) / 1000));
}

/** Paced ingest: a bulk of 100 every 50 ms (2000 records/s) for `seconds`; each post's latency. */
async function pacedIngest(api: Api, assets: string[], seconds: number, stop?: () => boolean): Promise<number[]> {
  const lat: number[] = [];
  const inFlight: Promise<void>[] = [];
  const t0 = performance.now();
  for (let k = 0; performance.now() - t0 < seconds * 1000 && !stop?.(); k++) {
    const due = t0 + k * 50;
    await sleep(due - performance.now());
    const s = performance.now();
    inFlight.push(api.postLocations(locations(assets, 100, k * 100)).then(() => void lat.push(performance.now() - s)));
  }
  await Promise.all(inFlight);
  return lat.sort((a, b) => a - b);
}

/** "One asset, last day" through the API, and an owner-wide list's second page: p50 / p99 ms. */
async function lists(api: Api, assets: string[], queries: number) {
  const since = new Date(Date.now() - DAY).toISOString();
  const one: number[] = [];
  const paged: number[] = [];
  for (let i = 0; i < queries; i++) {
    const asset = assets[Math.floor(Math.random() * assets.length)]!;
    let s = performance.now();
    const a = await api.send('GET', `/locations?assetId=${asset}&from=${encodeURIComponent(since)}&limit=1000`);
    one.push(performance.now() - s);
    if (a.status !== 200) throw new Error(`list: ${a.status}`);
    const first = await api.send('GET', '/locations?limit=100');
    const next = /<[^>]*\/api\/v1([^>]+)>/.exec(String(first.headers?.link ?? ''))?.[1];
    if (!next) throw new Error('no next page');
    s = performance.now();
    const b = await api.send('GET', next);
    paged.push(performance.now() - s);
    if (b.status !== 200) throw new Error(`page: ${b.status}`);
  }
  one.sort((x, y) => x - y);
  paged.sort((x, y) => x - y);
  return {
    lastDayP50Ms: round(percentile(one, 50), 2),
    lastDayP99Ms: round(percentile(one, 99), 2),
    pageTwoP50Ms: round(percentile(paged, 50), 2),
    pageTwoP99Ms: round(percentile(paged, 99), 2),
  };
}

/** The plan of "one asset, last day": partitions scanned, of how many. */
async function plan(pool: pg.Pool, asset: string): Promise<string> {
  const { rows } = await pool.query(
    `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT * FROM locations WHERE asset_id = $1
       AND when_created >= now() - interval '1 day' ORDER BY when_created DESC, id DESC LIMIT 1000`,
    [asset],
  );
  const lines = rows.map((r) => r['QUERY PLAN'] as string);
  const scans = lines.filter((l) => /Index (Only )?Scan/.test(l)).map((l) => /on (\S+)/.exec(l)?.[1]);
  const removed = lines.map((l) => /Subplans Removed: (\d+)/.exec(l)?.[1]).find(Boolean);
  return `${scans.length} index scan(s) on ${scans.join(', ')}${removed ? `; ${removed} partitions pruned` : ''}`;
}

interface TableStat {
  ins: number;
  upd: number;
  del: number;
}

/** Rows inserted, updated and deleted in every table (the statistics, once flushed). */
async function tupleCounts(pool: pg.Pool): Promise<Map<string, TableStat>> {
  await sleep(11_000); // backends flush their table statistics at most every 10 s while busy
  const { rows } = await pool.query(
    'SELECT relname, n_tup_ins::int8 AS ins, n_tup_upd::int8 AS upd, n_tup_del::int8 AS del FROM pg_stat_user_tables',
  );
  return new Map(rows.map((r) => [r.relname as string, { ins: Number(r.ins), upd: Number(r.upd), del: Number(r.del) }]));
}

/** Rows written between two counts, per unit, by table (partitions added up under their table). */
function written(a: Map<string, TableStat>, b: Map<string, TableStat>, per: number): string {
  const by = new Map<string, number>();
  for (const [name, s] of b) {
    const before = a.get(name) ?? { ins: 0, upd: 0, del: 0 };
    const n = s.ins - before.ins + (s.upd - before.upd) + (s.del - before.del);
    if (n <= 0) continue;
    const table = name.replace(/_(p\d{8}(_\d{4})?(_\d+)?|legacy)$/, '');
    by.set(table, (by.get(table) ?? 0) + n);
  }
  const total = [...by.values()].reduce((x, y) => x + y, 0);
  return `${round(total / per, 2)} (${[...by.entries()]
    .sort((x, y) => y[1] - x[1])
    .map(([t, n]) => `${t} ${round(n / per, 2)}`)
    .join(', ')})`;
}

const size = async (pool: pg.Pool, table: string) =>
  Number(
    (
      await pool.query(
        `SELECT COALESCE(sum(pg_total_relation_size(relid)), 0)::int8 AS b FROM pg_partition_tree(to_regclass($1)) WHERE isleaf`,
        [table],
      )
    ).rows[0].b,
  );
const wal = async (pool: pg.Pool) => BigInt((await pool.query(`SELECT (pg_current_wal_lsn() - '0/0')::int8::text AS l`)).rows[0].l);

const BODIES: Record<string, (asset: string, i: number) => unknown> = {
  locations: (a, i) => ({ assetId: a, latitude: 55.1 + i * 1e-6, longitude: 12.6, altitude: 10, speed: 12.5, heading: 90 }),
  'sensor-data': (a, i) => ({ assetId: a, sensorId: `s${i % 3}`, type: 'TEMPERATURE', value: 4.5 }),
  'reefer-data': (a) => ({
    assetId: a,
    reeferClass: 'CR',
    data: { supplyAir: 4.1, returnAir: 5.2, setpoint: 4, humidity: 85, co2: 0.3, o2: 20.8, mode: 'CHILL', alarms: [] },
  }),
  'genset-data': (a) => ({ assetId: a, gensetType: 'SG+', data: { fuelLevel: 71, rpm: 1800, voltage: 460, engineHours: 12345.6 } }),
  'oem-data': (a) => ({ assetId: a, payloadType: 7, data: { raw: 'AQIDBAUGBwgJCgsMDQ4PEA==', fw: '3.2.1' } }),
};
const TABLES: Record<string, string> = {
  locations: 'locations',
  'sensor-data': 'sensor_data',
  'reefer-data': 'reefer_data',
  'genset-data': 'genset_data',
  'oem-data': 'oem_data',
};

/**
 * What the partition count costs a query, to choose PARTITION_INTERVAL: a copy of the locations
 * table with N partitions of one asset-day each, and per N the p50 (planning + execution, from the
 * server) of an owner-wide first page with no time bound (every partition in the plan) and of "one
 * asset, last day" (pruned to one). Retention of a year: day = 365, week = 53, month = 13.
 */
export async function partitionCounts(): Promise<Record<string, unknown>[]> {
  const url = await freshDatabase('tracking_bench_widths');
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  const out: Record<string, unknown>[] = [];
  try {
    for (const n of [13, 53, 365, 730]) {
      await pool.query('DROP TABLE IF EXISTS w');
      await pool.query(
        `CREATE TABLE w (id bigint NOT NULL, asset_id uuid NOT NULL, owner_id uuid NOT NULL, latitude float8, longitude float8,
           when_created timestamptz NOT NULL, PRIMARY KEY (id, when_created)) PARTITION BY RANGE (when_created)`,
      );
      await pool.query('CREATE INDEX ON w (asset_id, when_created, id)');
      await pool.query('CREATE INDEX ON w (owner_id, when_created, id)');
      const start = Date.UTC(2026, 0, 1);
      for (let i = 0; i < n; i++) {
        await pool.query(
          `CREATE TABLE w_${i} PARTITION OF w FOR VALUES FROM ('${new Date(start + i * DAY).toISOString()}') TO ('${new Date(start + (i + 1) * DAY).toISOString()}')`,
        );
      }
      await pool.query(
        `INSERT INTO w SELECT g, 'a0000000-0000-4000-8000-000000000001', 'b0000000-0000-4000-8000-000000000001', 1, 2,
           '${new Date(start).toISOString()}'::timestamptz + (g * interval '1 minute') FROM generate_series(0, ${n * 1440 - 1}) g`,
      );
      await pool.query('ANALYZE w');
      const last = new Date(start + (n - 1) * DAY).toISOString();
      const time = async (sql: string) => {
        const t: number[] = [];
        for (let k = 0; k < 60; k++) {
          const { rows } = await pool.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`);
          const p = rows[0]['QUERY PLAN'][0];
          t.push(p['Planning Time'] + p['Execution Time']);
        }
        return round(
          percentile(
            t.sort((a, b) => a - b),
            50,
          ),
          3,
        );
      };
      out.push({
        partitions: n,
        rows: n * 1440,
        ownerFirstPageP50Ms: await time(
          `SELECT * FROM w WHERE owner_id = 'b0000000-0000-4000-8000-000000000001' ORDER BY when_created DESC, id DESC LIMIT 100`,
        ),
        assetLastDayP50Ms: await time(
          `SELECT * FROM w WHERE asset_id = 'a0000000-0000-4000-8000-000000000001' AND when_created >= '${last}' ORDER BY when_created DESC, id DESC LIMIT 1000`,
        ),
      });
    }
  } finally {
    await pool.end();
  }
  return out;
}

export async function runStorageBench(): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = { widths: await partitionCounts() };
  const part = await ensureDatabase('tracking_bench_part');
  const flat = await ensureDatabase('tracking_bench_flat');
  await migrated(part.url, false);
  await migrated(flat.url, true);
  const env = { DB_POOL_SIZE: '8', PUSH_ALLOW_PLAINTEXT_BROKERS: 'true' };
  const sPart = await startService({ ...env, DATABASE_URL: part.url });
  const sFlat = await startService({ ...env, DATABASE_URL: flat.url });
  const pPart = new pg.Pool({ connectionString: part.url, max: 4 });
  const pFlat = new pg.Pool({ connectionString: flat.url, max: 4 });
  const admin = { part: new Api(sPart.base), flat: new Api(sFlat.base) };
  try {
    await admin.part.login();
    await admin.flat.login();
    const fp = await fleetOf(admin.part, pPart, 'bench-storage');
    const ff = await fleetOf(admin.flat, pFlat, 'bench-storage');

    // 1 and 2. Bytes and WAL per record of each type; rows written per record (partitioned layout).
    console.error('[storage] bytes, WAL and rows written per record');
    const perType: Record<string, unknown>[] = [];
    const N = 20_000;
    for (const [path, make] of Object.entries(BODIES)) {
      const table = TABLES[path]!;
      const before = {
        t: await size(pPart, table),
        log: await size(pPart, 'event_log'),
        wal: await wal(pPart),
        rows: await tupleCounts(pPart),
      };
      for (let k = 0; k < N / 1000; k++) {
        const body = JSON.stringify(Array.from({ length: 1000 }, (_, i) => make(fp.assets[(k * 1000 + i) % ASSETS]!, i)));
        const a = await fp.api.send('POST', `/${path}`, body);
        if (a.status !== 201) throw new Error(`POST /${path}: ${a.status} ${a.text.slice(0, 200)}`);
      }
      const after = {
        t: await size(pPart, table),
        log: await size(pPart, 'event_log'),
        wal: await wal(pPart),
        rows: await tupleCounts(pPart),
      };
      perType.push({
        type: table,
        bytesPerRecord: round((after.t - before.t) / N),
        eventLogBytesPerRecord: round((after.log - before.log) / N),
        walBytesPerRecord: round(Number(after.wal - before.wal) / N),
        rowsWrittenPerRecord: written(before.rows, after.rows, N),
      });
    }
    out.perType = perType;

    // Rows written per delivered event, per channel and mode.
    console.error('[storage] rows written per delivered event');
    const rx = new Receiver(false);
    await rx.listen();
    const channels: Record<string, unknown>[] = [];
    const targets: [string, Record<string, unknown>][] = [
      ['webhook single', { channel: 'webhook', webhook: { mode: 'single' } }],
      ['webhook batch of 100', { channel: 'webhook', webhook: { mode: 'batch', batchSize: 100 } }],
      ['MQTT QoS 1, batch of 100', { channel: 'mqtt', destination: 'bench/storage', mqtt: { url: 'mqtt://127.0.0.1:1883', qos: 1 } }],
    ];
    const E = 10_000;
    for (const [label, settings] of targets) {
      const sink = rx.sink(`storage-${channels.length}`);
      const made = await admin.part.call('POST', '/integrations', {
        name: `bench-storage-${Date.now()}`,
        ownerIds: [fp.ownerId],
        objectTypes: ['location'],
        destination: rx.url(sink),
        enabled: false,
        ...settings,
      });
      // Stored while the integration is paused, then delivered: the two costs apart.
      const a = await tupleCounts(pPart);
      for (let k = 0; k < E / 1000; k++) await fp.api.postLocations(locations(fp.assets, 1000, k * 1000));
      const stored = await tupleCounts(pPart);
      await admin.part.call('PATCH', `/integrations/${made.id}`, { enabled: true });
      // Delivered: every attempt of the integration recorded, none pending.
      const t0 = Date.now();
      for (;;) {
        const { rows } = await pPart.query(
          `SELECT COALESCE(sum(cardinality(log_ids)) FILTER (WHERE success), 0)::int AS ok FROM delivery_attempts WHERE integration_id = $1`,
          [made.id],
        );
        if (rows[0].ok >= E || Date.now() - t0 > 300_000) break;
        await sleep(500);
      }
      const b = await tupleCounts(pPart);
      channels.push({
        channel: label,
        rowsWrittenPerDeliveredEvent: written(stored, b, E),
        rowsWrittenPerStoredRecord: written(a, stored, E),
      });
      await retire(admin.part, made.id);
    }
    await rx.close();
    out.channels = channels;

    // 3. REST bulk ingest, alternating rounds.
    console.error('[storage] REST ingest, partitioned and unpartitioned, alternating');
    const rounds: { part: number; flat: number }[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const p = await ingestRound(fp.api, fp.assets, 60);
      const f = await ingestRound(ff.api, ff.assets, 60);
      rounds.push({ part: p, flat: f });
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const mp = median(rounds.map((r) => r.part));
    const mf = median(rounds.map((r) => r.flat));
    out.ingest = {
      rounds: rounds.map((r) => `${r.part} / ${r.flat}`).join(', '),
      partitionedPerSecond: mp,
      unpartitionedPerSecond: mf,
      ratio: `${Math.round((mp / mf) * 100)}%`,
    };

    // 4. Lists at >= 10 million rows, both layouts.
    console.error('[storage] filling both layouts to', TARGET_ROWS);
    const fillPart = await fill(pPart, part.url, fp.ownerId, TARGET_ROWS, true);
    const fillFlat = await fill(pFlat, flat.url, ff.ownerId, TARGET_ROWS, false);
    const count = async (pool: pg.Pool) => Number((await pool.query('SELECT count(*) AS n FROM locations')).rows[0].n);
    const partitions = Number(
      (await pPart.query(`SELECT count(*) AS n FROM pg_inherits WHERE inhparent = 'locations'::regclass`)).rows[0].n,
    );
    const lp = await lists(fp.api, fp.assets, 200);
    const lf = await lists(ff.api, ff.assets, 200);
    out.lists = [
      {
        layout: `partitioned (${partitions} partitions)`,
        rows: await count(pPart),
        fillSeconds: round(fillPart),
        ...lp,
        plan: await plan(pPart, fp.assets[0]!),
      },
      { layout: 'unpartitioned', rows: await count(pFlat), fillSeconds: round(fillFlat), ...lf, plan: await plan(pFlat, ff.assets[0]!) },
    ];
  } finally {
    await sPart.stop();
    await sFlat.stop();
    await pPart.end();
    await pFlat.end();
    admin.part.close();
    admin.flat.close();
  }

  // 5. Dropping one expired partition of DROP_ROWS rows while ingesting.
  console.error(`[storage] removing an expired partition of ${DROP_ROWS} rows while ingesting`);
  const dropUrl = await freshDatabase('tracking_bench_drop');
  await migrated(dropUrl, false);
  const sDrop = await startService({ DB_POOL_SIZE: '8', DATABASE_URL: dropUrl });
  const pDrop = new pg.Pool({ connectionString: dropUrl, max: 4 });
  const api = new Api(sDrop.base);
  try {
    await api.login();
    const fd = await fleetOf(api, pDrop, 'bench-drop');
    const db = createPostgres(dropUrl, 4);
    const partitions = new Partitions(db, 'week');
    const old = Date.now() - 60 * DAY;
    await partitions.ensure('locations', [old]);
    const t0 = performance.now();
    await pDrop.query(
      `INSERT INTO locations (asset_id, owner_id, latitude, longitude, when_created)
       SELECT a.id, $1, 1, 2, $2::timestamptz + (g * interval '1 millisecond')
         FROM (SELECT id FROM assets WHERE owner_id = $1) a, generate_series(1, $3::int) g`,
      [fd.ownerId, new Date(old - (old % (7 * DAY)) + DAY).toISOString(), Math.ceil(DROP_ROWS / ASSETS)],
    );
    await pDrop.query('VACUUM ANALYZE locations');
    const fillSeconds = (performance.now() - t0) / 1000;
    const rows = Number((await pDrop.query('SELECT count(*) AS n FROM locations')).rows[0].n);
    await pacedIngest(fd.api, fd.assets, 5); // warm-up
    const without = await pacedIngest(fd.api, fd.assets, 20);
    let dropSeconds = 0;
    let dropped: string[] = [];
    const during = await (async () => {
      const retention = new Retention(db, partitions, { systemDays: 30, succeededDays: 7, failedDays: 30, rollupDays: 1095 });
      const ingest = pacedIngest(fd.api, fd.assets, 20);
      await sleep(3000);
      const s = performance.now();
      dropped = (await retention.run()).dropped;
      dropSeconds = (performance.now() - s) / 1000;
      return ingest;
    })();
    await db.close();
    out.drop = {
      partitionRows: rows,
      fillSeconds: round(fillSeconds),
      dropped: dropped.join(', '),
      removeSeconds: round(dropSeconds, 2),
      ingestP99WithoutMs: round(percentile(without, 99), 1),
      ingestP99DuringMs: round(percentile(during, 99), 1),
      ratio: `${round(percentile(during, 99) / percentile(without, 99), 2)}x`,
      settings: 'REST bulks of 100 locations every 50 ms (2000/s) for 20 s; the removal starts 3 s in',
    };
  } finally {
    await sDrop.stop();
    await pDrop.end();
    api.close();
  }
  return out;
}
