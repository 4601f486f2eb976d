// Benchmark: bulk ingest through the REST API against PostgreSQL, next to a raw `pg`
// insert of the same rows in the same run, the same ingest again with 3 webhook integrations matching
// the owner (push follow-up, figure 8), and list-query latency for one asset's last day in a table
// of at least 10 million locations. Run with `npm run bench` (PostgreSQL at BENCH_PG_URL).
import crypto from 'node:crypto';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { Api, percentile, Receiver, retire } from './lib.js';

const ADMIN_URL = process.env.BENCH_PG_URL ?? process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const DB_NAME = process.env.BENCH_DB ?? 'tracking_bench';
const TARGET_ROWS = Number(process.env.BENCH_ROWS ?? 10_000_000);
const ASSETS = 1000;
const BATCH = 1000;
const INGEST_BATCHES = Number(process.env.BENCH_INGEST_BATCHES ?? 60);
const CONCURRENCY = 4;
const QUERIES = Number(process.env.BENCH_QUERIES ?? 400);

const dbUrl = (() => {
  const u = new URL(ADMIN_URL);
  u.pathname = `/${DB_NAME}`;
  return u.toString();
})();

async function ensureDatabase(): Promise<void> {
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [DB_NAME]);
  if (!exists.rowCount) await admin.query(`CREATE DATABASE ${DB_NAME}`);
  await admin.end();
}

/** Runs `jobs` with at most `n` at a time. */
async function pool<T>(n: number, jobs: (() => Promise<T>)[]): Promise<T[]> {
  const out: T[] = new Array(jobs.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < jobs.length) {
        const i = next++;
        out[i] = await jobs[i]!();
      }
    }),
  );
  return out;
}

function batchOf(assets: string[], start: number) {
  const now = Date.now();
  return Array.from({ length: BATCH }, (_, i) => ({
    assetId: assets[(start + i) % assets.length]!,
    latitude: Math.round((Math.random() * 170 - 85) * 1e6) / 1e6,
    longitude: Math.round((Math.random() * 350 - 175) * 1e6) / 1e6,
    speed: Math.round(Math.random() * 80 * 1000) / 1000,
    heading: Math.round(Math.random() * 3600) / 10,
    whenCreated: new Date(now - 3600_000 + i).toISOString(),
  }));
}

export async function runIngestBench(): Promise<Record<string, unknown>> {
  await ensureDatabase();
  const cfg = loadConfig({
    DATABASE_URL: dbUrl,
    SECRETS_KEY: crypto.createHash('sha256').update('bench').digest('hex'),
    LOG_LEVEL: 'error',
    PORT: '0',
    DB_POOL_SIZE: '8',
    RATE_LIMIT_MAX: '10000000',
    RATE_LIMIT_CONCURRENT: '1000',
    BOOTSTRAP_CLIENT_SECRET: 'bench-secret',
    BOOTSTRAP_PASSWORD: 'bench-password',
    PUSH_ALLOW_HTTP: 'true',
    PUSH_ALLOWED_NETWORKS: '127.0.0.0/8',
  });
  const app = await buildApp(cfg, { logger: false });
  // BENCH_WITHOUT_ROLLUPS=1: the same ingest with the rollups' record hooks taken out (their cost).
  if (process.env.BENCH_WITHOUT_ROLLUPS === '1') app.services.hooks.remove('rollups:');
  await app.listen({ port: 0, host: '127.0.0.1' });
  const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  const db = new pg.Pool({ connectionString: dbUrl, max: CONCURRENCY + 1 });
  try {
    // An owner, its API key and 1000 assets (reused across runs).
    const { rows: owners } = await db.query(`SELECT id FROM owners WHERE name = 'bench-fleet'`);
    let ownerId: string = owners[0]?.id;
    const token = await tokenFor(base);
    if (!ownerId) {
      const r = await post(base, token, '/api/v1/owners', { name: 'bench-fleet' });
      ownerId = r.id;
    }
    const key = (await post(base, token, '/api/v1/api-keys', { name: `bench-${Date.now()}`, ownerId, scopes: ['read', 'write'] }))
      .key as string;
    const { rows: have } = await db.query('SELECT id FROM assets WHERE owner_id = $1 ORDER BY name', [ownerId]);
    if (have.length < ASSETS) {
      await db.query(
        `INSERT INTO assets (id, owner_id, name) SELECT gen_random_uuid(), $1, 'BENCH' || lpad(g::text, 6, '0')
           FROM generate_series($2::int, $3::int) g ON CONFLICT DO NOTHING`,
        [ownerId, have.length + 1, ASSETS],
      );
    }
    const assets: string[] = (await db.query('SELECT id FROM assets WHERE owner_id = $1 ORDER BY name', [ownerId])).rows.map((r) => r.id);

    // 1. Bulk ingest through the API: INGEST_BATCHES posts of 1000 locations, 4 in flight.
    const batches = Array.from({ length: INGEST_BATCHES }, (_, b) => batchOf(assets, b * BATCH));
    const bodies = batches.map((b) => JSON.stringify(b));
    await post(base, key, '/api/v1/locations', batches[0]!.slice(0, 10)); // warm-up
    let t0 = performance.now();
    await pool(
      CONCURRENCY,
      bodies.map((body) => () => postRaw(base, key, '/api/v1/locations', body)),
    );
    const apiSeconds = (performance.now() - t0) / 1000;

    // 2. The same rows with raw pg: one INSERT ... SELECT unnest per batch, 4 connections, no API.
    t0 = performance.now();
    await pool(
      CONCURRENCY,
      batches.map(
        (b) => () =>
          db.query(
            `INSERT INTO locations (asset_id, owner_id, latitude, longitude, speed, heading, when_created)
           SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::float8[], $4::float8[], $5::float8[], $6::float8[], $7::timestamptz[])`,
            [
              b.map((r) => r.assetId),
              b.map(() => ownerId),
              b.map((r) => r.latitude),
              b.map((r) => r.longitude),
              b.map((r) => r.speed),
              b.map((r) => r.heading),
              b.map((r) => r.whenCreated),
            ],
          ),
      ),
    );
    const rawSeconds = (performance.now() - t0) / 1000;
    const rows = INGEST_BATCHES * BATCH;

    // 2b. The API again, with 3 webhook integrations (engine defaults) covering the owner, their
    // receiver (this process) answering 200: the cost of matching and handing records to push.
    const with3 = await ingestWithIntegrations(base, assets, ownerId, 3);

    // 3. A table of >= TARGET_ROWS locations: 1000 assets, one every 5 minutes going back in time.
    let n = (await db.query<{ n: string }>('SELECT count(*)::int8 AS n FROM locations')).rows[0]!.n;
    let fillSeconds = 0;
    if (Number(n) < TARGET_ROWS) {
      const missing = TARGET_ROWS - Number(n);
      const perAsset = Math.ceil(missing / assets.length);
      t0 = performance.now();
      // The partitions of the times written (the service makes them for what it stores; this is SQL).
      const times: number[] = [];
      for (let t = Date.now() - (perAsset + 1) * 300_000 - 86_400_000; t < Date.now() + 86_400_000; t += 86_400_000) times.push(t);
      await app.services.storage.partitions.ensure('locations', times);
      const chunk = 200;
      for (let from = 0; from < perAsset; from += chunk) {
        await db.query(
          `INSERT INTO locations (asset_id, owner_id, latitude, longitude, speed, heading, when_created)
           SELECT a.id, $1, random() * 170 - 85, random() * 350 - 175, random() * 80, random() * 360,
                  now() - interval '2 hours' - (g * interval '5 minutes') - (a.n * interval '1 second')
             FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM assets WHERE owner_id = $1) a,
                  generate_series($2::int, $3::int) g`,
          [ownerId, from, Math.min(perAsset, from + chunk) - 1],
        );
      }
      await db.query('ANALYZE locations');
      fillSeconds = (performance.now() - t0) / 1000;
      n = String((await db.query<{ n: string }>('SELECT count(*)::int8 AS n FROM locations')).rows[0]!.n);
    }

    // 4. List latency: one asset's last day, newest first, through the API (1 in flight).
    const since = new Date(Date.now() - 86400_000).toISOString();
    const lat: number[] = [];
    let returned = 0;
    for (let i = 0; i < QUERIES; i++) {
      const asset = assets[Math.floor(Math.random() * assets.length)]!;
      const s = performance.now();
      const res = await fetch(`${base}/api/v1/locations?assetId=${asset}&from=${encodeURIComponent(since)}&limit=1000`, {
        headers: { authorization: `Bearer ${key}` },
      });
      const body = (await res.json()) as unknown[];
      lat.push(performance.now() - s);
      if (res.status !== 200) throw new Error(`list answered ${res.status}`);
      returned += body.length;
    }
    lat.sort((a, b) => a - b);
    return {
      ingestRows: rows,
      apiRecordsPerSecond: Math.round(rows / apiSeconds),
      rawPgRecordsPerSecond: Math.round(rows / rawSeconds),
      apiVsRaw: `${Math.round((rawSeconds / apiSeconds) * 100)}%`,
      api3IntegrationsRecordsPerSecond: Math.round(rows / with3.seconds),
      api3IntegrationsVsRaw: `${Math.round((rawSeconds / with3.seconds) * 100)}%`,
      api3IntegrationsWebhookRequestsDuringIngest: with3.requests,
      tableRows: Number(n),
      fillSeconds: Math.round(fillSeconds),
      listQueries: QUERIES,
      listRowsPerQueryAvg: Math.round(returned / QUERIES),
      listP50Ms: +percentile(lat, 50).toFixed(2),
      listP99Ms: +percentile(lat, 99).toFixed(2),
    };
  } finally {
    await db.end();
    await app.close();
  }
}

/** INGEST_BATCHES posts again (4 in flight) while `n` webhook integrations match the owner. */
async function ingestWithIntegrations(base: string, assets: string[], ownerId: string, n: number) {
  const api = new Api(base);
  const rx = new Receiver(false);
  await rx.listen();
  try {
    await api.login();
    // Integrations left by an interrupted run.
    for (const i of (await api.call('GET', '/integrations?limit=1000')) as { id: string; name: string }[]) {
      if (i.name.startsWith('bench-ingest-')) await retire(api, i.id);
    }
    const ids: string[] = [];
    const sinks = Array.from({ length: n }, (_, k) => rx.sink(`ingest-${k}`));
    for (const sink of sinks) {
      const made = await api.call('POST', '/integrations', {
        name: `bench-ingest-${sink.name}`,
        channel: 'webhook',
        ownerIds: [ownerId],
        objectTypes: ['location'],
        destination: rx.url(sink),
      });
      ids.push(made.id);
    }
    const bodies = Array.from({ length: INGEST_BATCHES }, (_, b) => JSON.stringify(batchOf(assets, b * BATCH)));
    const t0 = performance.now();
    await pool(
      CONCURRENCY,
      bodies.map((body) => async () => {
        const a = await api.send('POST', '/locations', body);
        if (a.status !== 201) throw new Error(`POST /locations: ${a.status} ${a.text.slice(0, 300)}`);
      }),
    );
    const seconds = (performance.now() - t0) / 1000;
    const requests = sinks.reduce((sum, s) => sum + s.requests, 0);
    for (const id of ids) await retire(api, id);
    return { seconds, requests };
  } finally {
    api.close();
    await rx.close();
  }
}

async function tokenFor(base: string): Promise<string> {
  const res = await fetch(`${base}/auth/realms/tracking/protocol/openid-connect/token`, {
    method: 'POST',
    headers: {
      authorization: `Basic ${Buffer.from('tracking-cli:bench-secret').toString('base64')}`,
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: 'grant_type=password&username=operator&password=bench-password',
  });
  if (!res.ok) throw new Error(`token: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { access_token: string }).access_token;
}

async function postRaw(base: string, token: string, path: string, body: string): Promise<any> {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body,
  });
  const text = await res.text();
  if (res.status !== 201) throw new Error(`${path}: ${res.status} ${text.slice(0, 300)}`);
  return JSON.parse(text);
}

const post = (base: string, token: string, path: string, body: unknown) => postRaw(base, token, path, JSON.stringify(body));
