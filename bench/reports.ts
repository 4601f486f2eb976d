// The reports benchmark (`BENCH_ONLY=reports`, PostgreSQL; API guide 5, "Reports" and "Rollups"):
//   1. `trips` for one asset over 30 days of one-minute positions (43,200, a stop every two hours):
//      latency percentiles of BENCH_REPORT_QUERIES requests, next to the raw read of the same rows
//      by `pg` in the same run (target p99 < 300 ms);
//   2. `temperature` for an owner's 100 reefers over 30 days of one-minute reefer data (4.32
//      million records, two ranged sensors each): its time and the service's memory growth, next to
//      psql's raw COPY of the same two values of the same rows (target < 5 s, memory flat);
//   3. REST ingest with rollups kept up to date next to the same ingest without them (the rollups'
//      record hooks taken out), two services in this process on two databases, alternating
//      rounds; two shapes of bulk: 100 assets x 10 readings, and 1000 assets x 1 reading (target
//      >= 90%); records of hours still open (then summed, counted) and late ones (summed again).
// tracking_bench_reports keeps its 4.36 million rows between runs; the ingest databases are made afresh.
import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { createPostgres } from '../src/db/db.js';
import { Partitions } from '../src/storage/partitions.js';
import { aggregate, ROLLUP_COLUMNS } from '../src/rollups/sql.js';
import { reading } from './alerts.js';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { foldRollups, materializeRollups } from '../src/rollups/rollups.js';
import { ADMIN_URL, Api, freshDatabase, keptDatabase, knob, percentile, round, rssGrowth, SECRETS_KEY, startService } from './lib.js';

const NAME = 'tracking_bench_reports';
const DAYS = 30;
const MINUTES = DAYS * 1440;
const REEFERS = knob('BENCH_REPORT_REEFERS', 100);
const QUERIES = knob('BENCH_REPORT_QUERIES', 100);
const INGEST_ROUNDS = knob('BENCH_ROLLUP_ROUNDS', 4);
const SPEC = {
  type: 'REEFER',
  settings: { cargo: { settings: { temperatureSetpoint: 2.5 } } },
  ranges: { cargo: { sensors: { supplyAirTemperature: [1.5, 3.5, 30, 0], returnAirTemperature: [1.5, 4.5, 30, 0] } } },
};

/**
 * The fixture, written by SQL once (it is not what is measured): the owner, a truck with 30 days of
 * one-minute positions (90 minutes at 60 km/h, 30 minutes stopped, around the world), and REEFERS
 * reefers with a specification and 30 days of one-minute reefer data each (the alerts bench's
 * payload, supply air out of range now and then), ending an hour ago.
 */
async function fill(pool: pg.Pool, url: string, api: Api) {
  let ownerId: string | undefined = (await pool.query("SELECT id FROM owners WHERE name = 'report-bench'")).rows[0]?.id;
  ownerId ??= (await api.call('POST', '/owners', { name: 'report-bench' })).id as string;
  let truck: string | undefined = (await pool.query("SELECT id FROM assets WHERE name = 'RB-TRUCK'")).rows[0]?.id;
  truck ??= (await api.call('POST', '/assets', { name: 'RB-TRUCK', ownerId })).id as string;
  const reefers: string[] = (
    await pool.query("SELECT id FROM assets WHERE owner_id = $1 AND name LIKE 'RB-R%' ORDER BY name", [ownerId])
  ).rows.map((r) => r.id);
  for (let i = reefers.length; i < REEFERS; i++) {
    const a = (await api.call('POST', '/assets', { name: `RB-R${String(i).padStart(4, '0')}`, ownerId })).id as string;
    await api.call('POST', '/specifications', { ...SPEC, assetId: a });
    reefers.push(a);
  }
  const end = Math.floor((Date.now() - 3600_000) / 60_000) * 60_000;
  const start = end - MINUTES * 60_000;
  const db = createPostgres(url, 2);
  const times: number[] = [];
  for (let t = start - 86_400_000; t < end + 86_400_000; t += 86_400_000) times.push(t);
  for (const t of ['locations', 'reefer_data', 'rollups']) await new Partitions(db, 'week').ensure(t, times);
  await db.close();
  const have = async (table: string, ids: string[]) =>
    Number((await pool.query(`SELECT count(*) AS n FROM ${table} WHERE asset_id = ANY($1::uuid[])`, [ids])).rows[0].n);
  if ((await have('locations', [truck])) !== MINUTES) {
    console.error('[reports] writing the truck positions');
    await pool.query('DELETE FROM locations WHERE asset_id = $1', [truck]);
    await pool.query(
      `INSERT INTO locations (asset_id, owner_id, latitude, longitude, speed, when_created)
       SELECT $1, $2, 20 + 0.5 * sin(moved / 3000.0), ((-170 + moved * 0.009 + 180)::numeric % 360)::float8 - 180,
              CASE WHEN g % 120 < 90 THEN 60 ELSE 0 END, to_timestamp($3::float8 / 1000) + g * interval '1 minute'
         FROM (SELECT g, (g / 120) * 90 + least(g % 120, 90) AS moved FROM generate_series(0, ${MINUTES - 1}) g) x`,
      [truck, ownerId, start],
    );
  }
  if ((await have('reefer_data', reefers)) !== MINUTES * reefers.length) {
    console.error(`[reports] writing ${MINUTES * reefers.length} reefer records`);
    await pool.query('DELETE FROM reefer_data WHERE asset_id = ANY($1::uuid[])', [reefers]);
    const sample = JSON.stringify(reading(1));
    for (const [n, a] of reefers.entries()) {
      // The alerts bench's payload; supply and return air drift, out of range for 20 minutes in 700.
      await pool.query(
        `INSERT INTO reefer_data (asset_id, owner_id, reefer_class, data, when_created)
         SELECT $1, $2, 'SC',
                jsonb_set(jsonb_set($3::jsonb, '{cargo,sensors,supplyAirTemperature}',
                  to_jsonb(round((CASE WHEN (g + $5) % 700 < 20 THEN 4.1 ELSE 2.5 + sin(g / 37.0) * 0.6 END)::numeric, 2))),
                  '{cargo,sensors,returnAirTemperature}', to_jsonb(round((3.4 + sin(g / 53.0) * 0.7)::numeric, 2))),
                to_timestamp($4::float8 / 1000) + g * interval '1 minute' + $5 * interval '1 millisecond'
           FROM generate_series(0, ${MINUTES - 1}) g`,
        [a, ownerId, sample, start, n],
      );
    }
    await pool.query('VACUUM ANALYZE reefer_data');
  }
  // Their hourly rollups, as the store would have kept them (the same SQL as an upgrade's fill).
  const rolled = Number(
    (await pool.query("SELECT count(*) AS n FROM rollups WHERE type = 'reeferdata' AND asset_id = ANY($1::uuid[])", [reefers])).rows[0].n,
  );
  if (rolled === 0) {
    console.error('[reports] summing their rollups');
    await pool.query(
      `INSERT INTO rollups (${ROLLUP_COLUMNS}) ${aggregate('reeferdata', `(SELECT * FROM reefer_data WHERE owner_id = '${ownerId}') AS src`)}`,
    );
  }
  await pool.query('VACUUM ANALYZE locations');
  // The ranges the rows cover (kept from an earlier run, they end where that run's clock put them).
  const span = async (table: string, ids: string[]) => {
    const { rows } = await pool.query(
      `SELECT min(when_created) AS a, max(when_created) AS b FROM ${table} WHERE asset_id = ANY($1::uuid[])`,
      [ids],
    );
    return `from=${encodeURIComponent(new Date(rows[0].a).toISOString())}&to=${encodeURIComponent(new Date(new Date(rows[0].b).getTime() + 1000).toISOString())}`;
  };
  return { ownerId, truck, reefers, truckRange: await span('locations', [truck]), reeferRange: await span('reefer_data', reefers) };
}

/** psql's COPY of a query's rows to nowhere: seconds. */
function psqlCopy(url: string, sql: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const p = spawn('psql', [url, '-Atc', `COPY (${sql}) TO STDOUT`], { stdio: ['ignore', 'ignore', 'inherit'] });
    p.on('error', reject);
    p.on('close', (code) => (code === 0 ? resolve((performance.now() - t0) / 1000) : reject(new Error(`psql ${code}`))));
  });
}

export interface ReportBenchResult {
  trips: Record<string, number | string | null>[];
  temperature: Record<string, number | string | null>[];
  ingest: Record<string, number | string | null>[];
}

async function reportFigures(): Promise<Omit<ReportBenchResult, 'ingest'>> {
  const { url } = await keptDatabase(NAME);
  const service = await startService({ DATABASE_URL: url, DELIVERY_ENABLED: 'false', REPORT_MAX_DAYS: '92' });
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  const api = new Api(service.base);
  try {
    await api.login();
    const f = await fill(pool, url, api);

    // 1. trips, next to the raw read of the same positions.
    const timed = async (n: number, fn: () => Promise<unknown>) => {
      const ms: number[] = [];
      for (let i = 0; i < n; i++) {
        const t0 = performance.now();
        await fn();
        ms.push(performance.now() - t0);
      }
      return ms.sort((a, b) => a - b);
    };
    let trips = 0;
    await api.call('GET', `/reports/trips?assetId=${f.truck}&${f.truckRange}`); // warm-up
    const service_ = await timed(QUERIES, async () => {
      const r = await api.call('GET', `/reports/trips?assetId=${f.truck}&${f.truckRange}`);
      trips = r.items.length;
    });
    const raw = await timed(QUERIES, () =>
      pool.query(
        `SELECT extract(epoch FROM when_created) * 1000 AS t, latitude, longitude, speed FROM locations
          WHERE asset_id = $1 ORDER BY when_created, id`,
        [f.truck],
      ),
    );
    const row = (what: string, ms: number[]) => ({
      what,
      positions: MINUTES,
      p50Ms: round(percentile(ms, 50), 1),
      p95Ms: round(percentile(ms, 95), 1),
      p99Ms: round(percentile(ms, 99), 1),
    });

    // 2. temperature for the owner's reefers, the service's memory sampled; next to psql's COPY.
    const temperature: Record<string, number | string | null>[] = [];
    const copySql = `SELECT asset_id, when_created,
        COALESCE(data -> 'supplyAirTemperature', data -> 'cargo' -> 'sensors' -> 'supplyAirTemperature') #>> '{}',
        COALESCE(data -> 'returnAirTemperature', data -> 'cargo' -> 'sensors' -> 'returnAirTemperature') #>> '{}'
        FROM reefer_data WHERE owner_id = '${f.ownerId}' ORDER BY asset_id, when_created, id`;
    for (let run = 1; run <= 2; run++) {
      const copy = await psqlCopy(url, copySql);
      const memory = rssGrowth(service.proc.pid!);
      const t0 = performance.now();
      const r = await api.call('GET', `/reports/temperature?ownerId=${f.ownerId}&${f.reeferRange}`);
      const seconds = (performance.now() - t0) / 1000;
      const grown = memory.stop();
      const excursions = (r.items as { excursions: unknown[] }[]).reduce((n, x) => n + x.excursions.length, 0);
      temperature.push({
        what: `run ${run}: service, ${r.items.length} rows, ${excursions} excursions`,
        records: MINUTES * f.reefers.length,
        seconds: round(seconds, 2),
        rawCopySeconds: round(copy, 2),
        rssGrowthMiB: grown,
      });
    }
    return {
      trips: [
        { ...row('service: GET /reports/trips', service_), trips },
        { ...row('raw: the same positions read by pg', raw), trips: null },
      ],
      temperature,
    };
  } finally {
    await pool.end();
    api.close();
    await service.stop();
  }
}

/**
 * 3. Ingest with and without rollups, alternating rounds; both bulk shapes, each in two modes:
 * live (records of hours not summed yet, each run in an hour of its own, which is then summed as
 * the service sums an hour that has closed: that work is counted in the run) and late (records of
 * hours summed already, which their stores note and the fold sums again).
 */
async function ingestFigures(): Promise<Record<string, number | string | null>[]> {
  const sides = [] as {
    label: string;
    api: Api;
    stop: () => Promise<void>;
    assets: string[];
    seconds: Record<string, number>;
    wal: Record<string, number>;
    /** What is still owed when a run's requests are answered: its hour summed, or the late hours summed again. */
    settle: (mode: 'live' | 'late', hourEnd: number) => Promise<unknown>;
  }[];
  const wal = new pg.Pool({ connectionString: ADMIN_URL, max: 1 });
  const lsn = async () => (await wal.query('SELECT pg_current_wal_lsn()::text AS l')).rows[0].l as string;
  const walBytes = async (from: string) =>
    Number((await wal.query('SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1) AS d', [from])).rows[0].d);
  const HOUR = 3_600_000;
  // The live runs' hours start 7 days ago (the services' own clock sums no hour here: their
  // closing wait is 60 days); the late runs' hours lie 30 days before them, summed already.
  const liveStart = Math.floor((Date.now() - 7 * 86_400_000) / HOUR) * HOUR;
  const lateStart = liveStart - 30 * 86_400_000;
  try {
    for (const [label, rollups] of [
      ['with rollups', true],
      ['without rollups', false],
    ] as const) {
      const url = await freshDatabase(`tracking_bench_rollups_${rollups ? 'on' : 'off'}`);
      const cfg = loadConfig({
        DATABASE_URL: url,
        SECRETS_KEY,
        LOG_LEVEL: 'error',
        PORT: '0',
        DB_POOL_SIZE: '8',
        DELIVERY_ENABLED: 'false',
        RATE_LIMIT_MAX: '10000000',
        RATE_LIMIT_CONCURRENT: '1000',
        BOOTSTRAP_CLIENT_SECRET: 'bench-secret',
        BOOTSTRAP_PASSWORD: 'bench-password',
        ROLLUP_CLOSE_AFTER_SECONDS: String(60 * 86_400),
      });
      const app = await buildApp(cfg, { logger: false });
      if (!rollups && app.services.hooks.remove('rollups:') !== 5) throw new Error('the rollup hooks were not found');
      const db = app.services.db;
      await db.query('UPDATE rollup_state SET materialized = $1', [new Date(liveStart)]);
      await app.listen({ port: 0, host: '127.0.0.1' });
      const api = new Api(`http://127.0.0.1:${(app.server.address() as { port: number }).port}`);
      await api.login();
      const owner = (await api.call('POST', '/owners', { name: 'rollup-bench' })).id as string;
      const assets: string[] = [];
      for (let i = 0; i < 1000; i++) assets.push((await api.call('POST', '/assets', { name: `RB-${i}`, ownerId: owner })).id);
      const settle = async (mode: 'live' | 'late', hourEnd: number) => {
        if (!rollups) return;
        if (mode === 'live') await materializeRollups(db, hourEnd, 1095);
        else await foldRollups(db, 1095);
      };
      sides.push({ label, api, stop: () => app.close(), assets, seconds: {}, wal: {}, settle });
    }
    // Reefer data and locations alternately; each asset's readings a minute apart, in order, within
    // the run's hour.
    const bodies = (assets: string[], perAsset: number, post: number, hour: number) => {
      const n = 1000 / perAsset;
      const reefer = new Array(1000);
      const loc = new Array(1000);
      for (let i = 0; i < 1000; i++) {
        const a = assets[i % n]!;
        const at = new Date(hour + (post * perAsset + Math.floor(i / n)) * 60_000 + (i % n)).toISOString();
        reefer[i] = { assetId: a, whenCreated: at, reeferClass: 'SC', data: reading(hour / 60_000 + post * 1000 + i) };
        loc[i] = { assetId: a, whenCreated: at, latitude: 10 + (post % 100) * 0.01, longitude: 20 + (i % n) * 0.001, speed: 30 };
      }
      return [
        ['/reefer-data', JSON.stringify(reefer)],
        ['/locations', JSON.stringify(loc)],
      ] as const;
    };
    const run = async (side: (typeof sides)[number], work: (readonly [string, string])[], mode: 'live' | 'late', hourEnd: number) => {
      const api = side.api;
      let next = 0;
      const t0 = performance.now();
      await Promise.all(
        Array.from({ length: 4 }, async () => {
          while (next < work.length) {
            const [path, body] = work[next++]!;
            const a = await api.send('POST', path, body);
            if (a.status !== 201) throw new Error(`POST ${path}: ${a.status} ${a.text.slice(0, 300)}`);
          }
        }),
      );
      await side.settle(mode, hourEnd);
      return (performance.now() - t0) / 1000;
    };
    const shapes = [
      ['100 assets x 10 readings', 10],
      ['1000 assets x 1 reading', 1],
    ] as const;
    const modes = ['live', 'late'] as const;
    let block = 0;
    const runBlock = async (shape: string | null, perAsset: number, mode: 'live' | 'late', r: number) => {
      const hour = (mode === 'live' ? liveStart : lateStart) + block++ * HOUR;
      // One hour of minute data: 60 readings of each asset, in bulks of 1000.
      const work = Array.from({ length: 60 / perAsset }, (_, k) => bodies(sides[0]!.assets, perAsset, k, hour)).flat();
      const order = r % 2 === 0 ? sides : [...sides].reverse();
      for (const s of order) {
        const mine = s === sides[0] ? work : remap(work, sides[0]!.assets, s.assets);
        const from = await lsn();
        const seconds = await run(s, mine, mode, hour + HOUR);
        if (!shape) continue;
        const key = `${shape}|${mode}`;
        s.seconds[key] = (s.seconds[key] ?? 0) + seconds;
        s.wal[key] = (s.wal[key] ?? 0) + (await walBytes(from));
      }
    };
    // Late: a tracker's backlog, sent once it is back in reach, for hours in which nothing came.
    await runBlock(null, 10, 'live', 0); // warm-up
    for (let r = 0; r < INGEST_ROUNDS; r++) {
      for (const [shape, perAsset] of shapes) {
        for (const mode of modes) await runBlock(shape, perAsset, mode, r);
      }
      console.error(`[reports] ingest round ${r + 1}/${INGEST_ROUNDS}`);
    }
    return shapes.flatMap(([shape, perAsset]) =>
      modes.map((mode) => {
        const records = INGEST_ROUNDS * (60 / perAsset) * 2000;
        const key = `${shape}|${mode}`;
        const [on, off] = sides.map((s) => records / s.seconds[key]!);
        const [walOn, walOff] = sides.map((s) => Math.round(s.wal[key]! / records));
        return {
          bulk: shape,
          hours: mode === 'live' ? 'live (summed when closed)' : 'late (summed again)',
          records: records * 2,
          withRollupsPerSecond: Math.round(on!),
          withoutRollupsPerSecond: Math.round(off!),
          withVsWithout: `${Math.round((on! / off!) * 100)}%`,
          walBytesPerRecordWith: walOn!,
          walBytesPerRecordWithout: walOff!,
        };
      }),
    );
  } finally {
    await wal.end();
    for (const s of sides) {
      s.api.close();
      await s.stop();
    }
  }
}

function remap(work: (readonly [string, string])[], from: string[], to: string[]) {
  const ids = new Map(from.map((id, n) => [id, to[n]!]));
  return work.map(
    ([path, body]) =>
      [path, body.replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, (m) => ids.get(m) ?? m)] as const,
  );
}

/** BENCH_REPORT_PARTS: the parts to run (default both: "reports,ingest"). */
export async function runReportsBench(): Promise<ReportBenchResult> {
  const parts = (process.env.BENCH_REPORT_PARTS ?? 'reports,ingest').split(',');
  const figures = parts.includes('reports') ? await reportFigures() : { trips: [], temperature: [] };
  return { ...figures, ingest: parts.includes('ingest') ? await ingestFigures() : [] };
}
