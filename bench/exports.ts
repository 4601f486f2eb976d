// The export benchmark (`BENCH_ONLY=exports`, PostgreSQL; API guide 5, "Exports"): one owner's
// locations (BENCH_EXPORT_ROWS, default 10 million, 100 assets, one a minute each; kept in
// tracking_bench_exports between runs) exported through the service as CSV and NDJSON, next to a raw
// `COPY (SELECT ...) TO STDOUT` of the same rows by psql in the same run; the service's resident
// memory is sampled every 100 ms while it streams (growth = the highest sample minus the one before).
import { spawn } from 'node:child_process';
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { createPostgres } from '../src/db/db.js';
import { Partitions } from '../src/storage/partitions.js';
import { Api, keptDatabase, knob, round, rssGrowth, startService } from './lib.js';

const ROWS = knob('BENCH_EXPORT_ROWS', 10_000_000);
const ASSETS = 100;
const NAME = 'tracking_bench_exports';

/** The owner and its assets, and its locations up to ROWS (one a minute per asset, ending an hour ago). */
async function fill(pool: pg.Pool, url: string, ownerId: string): Promise<{ from: string; to: string }> {
  await pool.query(
    `INSERT INTO assets (id, owner_id, name) SELECT gen_random_uuid(), $1, 'EXP' || lpad(g::text, 5, '0')
       FROM generate_series(1, ${ASSETS}) g ON CONFLICT DO NOTHING`,
    [ownerId],
  );
  const perAsset = Math.ceil(ROWS / ASSETS);
  const end = Date.now() - 3600_000;
  const start = end - perAsset * 60_000;
  const have = Number((await pool.query('SELECT count(*) AS n FROM locations WHERE owner_id = $1', [ownerId])).rows[0].n);
  if (have < ROWS) {
    await pool.query('DELETE FROM locations WHERE owner_id = $1', [ownerId]);
    const db = createPostgres(url, 2);
    const times: number[] = [];
    for (let t = start - 86_400_000; t < Date.now() + 86_400_000; t += 86_400_000) times.push(t);
    await new Partitions(db, 'week').ensure('locations', times);
    await db.close();
    console.error(`[exports] writing ${ROWS} locations`);
    const chunk = 5000;
    for (let g = 0; g < perAsset; g += chunk) {
      await pool.query(
        `INSERT INTO locations (asset_id, owner_id, latitude, longitude, speed, heading, zone_id, when_created)
         SELECT a.id, $1, random() * 170 - 85, random() * 350 - 175, random() * 80, random() * 360,
                CASE WHEN g % 50 = 0 THEN 'quay "A", berth 7' END,
                to_timestamp($2::float8 / 1000) + (g * interval '1 minute') + (a.n * interval '1 millisecond')
           FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM assets WHERE owner_id = $1) a,
                generate_series($3::int, $4::int) g`,
        [ownerId, start, g, Math.min(perAsset, g + chunk) - 1],
      );
    }
    await pool.query('VACUUM ANALYZE locations');
  }
  const { rows } = await pool.query('SELECT min(when_created) AS a, max(when_created) AS b FROM locations WHERE owner_id = $1', [ownerId]);
  return { from: new Date(rows[0].a).toISOString(), to: new Date(new Date(rows[0].b).getTime() + 1).toISOString() };
}

/** Reads a whole export, counting its lines; the service's memory sampled meanwhile. */
function download(
  url: string,
  token: string,
  pid: number,
): Promise<{ seconds: number; lines: number; bytes: number; rssGrowthMiB: number | null }> {
  return new Promise((resolve, reject) => {
    const memory = rssGrowth(pid);
    const t0 = performance.now();
    let lines = 0;
    let bytes = 0;
    http
      .get(url, { headers: { authorization: `Bearer ${token}` } }, (res) => {
        if (res.statusCode !== 200) reject(new Error(`export: ${res.statusCode}`));
        res.on('data', (chunk: Buffer) => {
          bytes += chunk.length;
          for (let i = chunk.indexOf(10); i >= 0; i = chunk.indexOf(10, i + 1)) lines++;
        });
        res.on('end', () => {
          resolve({ seconds: (performance.now() - t0) / 1000, lines, bytes, rssGrowthMiB: memory.stop() });
        });
        res.on('error', reject);
      })
      .on('error', reject);
  });
}

/** psql's COPY of the same rows to /dev/null: the raw baseline. */
function rawCopy(url: string, ownerId: string, from: string, to: string): Promise<{ seconds: number; bytes: number }> {
  return new Promise((resolve, reject) => {
    const sql = `COPY (SELECT * FROM locations WHERE owner_id = '${ownerId}' AND when_created >= '${from}' AND when_created < '${to}'
                       ORDER BY when_created, id) TO STDOUT WITH (FORMAT csv, HEADER)`;
    const t0 = performance.now();
    let bytes = 0;
    const p = spawn('psql', [url, '-Atc', sql], { stdio: ['ignore', 'pipe', 'inherit'] });
    p.stdout.on('data', (c: Buffer) => {
      bytes += c.length;
    });
    p.on('error', reject);
    p.on('close', (code) =>
      code === 0 ? resolve({ seconds: (performance.now() - t0) / 1000, bytes }) : reject(new Error(`psql ${code}`)),
    );
  });
}

export interface ExportBenchRow {
  what: string;
  rows: number;
  seconds: number | null;
  rowsPerSecond: number;
  MiB: number | null;
  shareOfRawCopy: string;
  rssGrowthMiB: number | string | null;
}

export async function runExportsBench(): Promise<ExportBenchRow[]> {
  const { url } = await keptDatabase(NAME);
  const service = await startService({ DATABASE_URL: url, DELIVERY_WORKERS: '0', DELIVERY_ENABLED: 'false', EXPORT_MAX_DAYS: '366' });
  const out: ExportBenchRow[] = [];
  try {
    const api = new Api(service.base);
    await api.login();
    const pool = new pg.Pool({ connectionString: url, max: 2 });
    let ownerId: string | undefined = (await pool.query("SELECT id FROM owners WHERE name = 'export-bench'")).rows[0]?.id;
    ownerId ??= (await api.call('POST', '/owners', { name: 'export-bench' })).id as string;
    const range = await fill(pool, url, ownerId!);
    await pool.end();
    const key = (await api.call('POST', '/api-keys', { name: `export-${Date.now()}`, ownerId, scopes: ['read'] })).key as string;
    const q = `from=${encodeURIComponent(range.from)}&to=${encodeURIComponent(range.to)}`;
    const copy = await rawCopy(url, ownerId!, range.from, range.to);
    const copyRate = ROWS / copy.seconds;
    out.push({
      what: 'raw COPY (psql, CSV)',
      rows: ROWS,
      seconds: round(copy.seconds, 1),
      rowsPerSecond: Math.round(copyRate),
      MiB: round(copy.bytes / 1048576, 0),
      shareOfRawCopy: '100%',
      rssGrowthMiB: '–',
    });
    // A first, small export of each format: what the process allocates once (its first large
    // responses) is not counted as growth of the measured ones.
    const firstDay = `from=${encodeURIComponent(range.from)}&to=${encodeURIComponent(new Date(Date.parse(range.from) + 86_400_000).toISOString())}`;
    for (const format of ['csv', 'ndjson'] as const)
      await download(`${service.base}/api/v1/locations?format=${format}&${firstDay}`, key, service.proc.pid!);
    for (const format of ['csv', 'ndjson'] as const) {
      console.error(`[exports] ${format}`);
      const r = await download(`${service.base}/api/v1/locations?format=${format}&${q}`, key, service.proc.pid!);
      const rows = format === 'csv' ? r.lines - 1 : r.lines;
      out.push({
        what: `service export, ${format}`,
        rows,
        seconds: round(r.seconds, 1),
        rowsPerSecond: Math.round(rows / r.seconds),
        MiB: round(r.bytes / 1048576, 0),
        shareOfRawCopy: `${Math.round((100 * rows) / r.seconds / copyRate)}%`,
        rssGrowthMiB: r.rssGrowthMiB,
      });
    }
  } finally {
    await service.stop();
  }
  return out;
}
