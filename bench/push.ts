// Benchmark (issue 4): end-to-end ingest -> webhook delivery rate in single and batch mode, with
// p50/p99 latency from store (the record's commit) to arrival at the receiver, next to a raw HTTP
// client posting the same bodies to the same receiver in the same run.
import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { percentile } from './ingest.js';

const ADMIN_URL = process.env.BENCH_PG_URL ?? process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const DB_NAME = 'tracking_bench_push';
const EVENTS = Number(process.env.BENCH_PUSH_EVENTS ?? 20_000);

interface Mode {
  name: 'single' | 'batch';
  batchSize: number;
  concurrency: number;
}
const MODES: Mode[] = [
  { name: 'single', batchSize: 1, concurrency: 32 },
  { name: 'batch', batchSize: 100, concurrency: 8 },
];

/** The receiver: answers 200 at once, records when each event (by `id`) arrived. */
function receiver() {
  const arrivals = new Map<number, number>();
  let requests = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      requests++;
      const now = Date.now();
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      for (const o of Array.isArray(body) ? body : [body]) if (!arrivals.has(o.id)) arrivals.set(o.id, now);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"success":true}');
    });
  });
  server.keepAliveTimeout = 60_000;
  return { server, arrivals, requests: () => requests };
}

async function rawClient(url: string, bodies: string[], concurrency: number): Promise<number> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < bodies.length) {
        const body = bodies[next++]!;
        await new Promise<void>((resolve, reject) => {
          const req = http.request(
            url,
            { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
            (res) => {
              res.resume();
              res.on('end', resolve);
            },
          );
          req.on('error', reject);
          req.end(body);
        });
      }
    }),
  );
  agent.destroy();
  return (performance.now() - t0) / 1000;
}

export async function runPushBench(): Promise<Record<string, unknown>[]> {
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${DB_NAME} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${DB_NAME}`);
  await admin.end();
  const u = new URL(ADMIN_URL);
  u.pathname = `/${DB_NAME}`;
  const cfg = loadConfig({
    DATABASE_URL: u.toString(),
    SECRETS_KEY: crypto.createHash('sha256').update('bench').digest('hex'),
    LOG_LEVEL: 'error',
    PORT: '0',
    DB_POOL_SIZE: '12',
    RATE_LIMIT_MAX: '10000000',
    RATE_LIMIT_CONCURRENT: '1000',
    BOOTSTRAP_CLIENT_SECRET: 'bench-secret',
    BOOTSTRAP_PASSWORD: 'bench-password',
    PUSH_ALLOW_HTTP: 'true',
    PUSH_ALLOWED_NETWORKS: '127.0.0.0/8',
    DELIVERY_POLL_MS: '100',
    DELIVERY_MAX_IN_FLIGHT: '64',
  });
  const app = await buildApp(cfg, { logger: false });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const rx = receiver();
  await new Promise<void>((r) => rx.server.listen(0, '127.0.0.1', r));
  const rxUrl = `http://127.0.0.1:${(rx.server.address() as AddressInfo).port}`;
  const db = new pg.Pool({ connectionString: u.toString(), max: 2 });
  const results: Record<string, unknown>[] = [];
  try {
    const token = await fetch(`${base}/auth/realms/tracking/protocol/openid-connect/token`, {
      method: 'POST',
      headers: {
        authorization: `Basic ${Buffer.from('tracking-cli:bench-secret').toString('base64')}`,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: 'grant_type=password&username=operator&password=bench-password',
    }).then(async (r) => ((await r.json()) as { access_token: string }).access_token);
    const call = async (path: string, body: unknown) => {
      const r = await fetch(`${base}/api/v1${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      const text = await r.text();
      if (r.status !== 201) throw new Error(`${path}: ${r.status} ${text.slice(0, 200)}`);
      return JSON.parse(text);
    };
    for (const mode of MODES) {
      const owner = await call('/owners', { name: `push-${mode.name}` });
      const assets: string[] = [];
      for (let i = 0; i < 50; i++) assets.push((await call('/assets', { name: `P${i}`, ownerId: owner.id })).id);
      const integration = await call('/integrations', {
        name: `bench-${mode.name}`,
        channel: 'webhook',
        ownerIds: [owner.id],
        objectTypes: ['location'],
        destination: `${rxUrl}/${mode.name}`,
        webhook: { mode: mode.name, batchSize: mode.batchSize, maxConcurrentRequests: mode.concurrency, timeoutMs: 10_000 },
      });
      rx.arrivals.clear();
      // Ingest EVENTS locations in posts of 1000, 2 in flight, and wait until all have arrived.
      const posts = Array.from({ length: EVENTS / 1000 }, (_, p) =>
        Array.from({ length: 1000 }, (_, i) => ({
          assetId: assets[(p * 1000 + i) % assets.length],
          latitude: 1,
          longitude: 2,
          speed: 10,
          whenCreated: new Date(Date.now() - 60_000 + i).toISOString(),
        })),
      );
      const t0 = performance.now();
      let nextPost = 0;
      await Promise.all(
        [0, 1].map(async () => {
          while (nextPost < posts.length) await call('/locations', posts[nextPost++]);
        }),
      );
      const ingestSeconds = (performance.now() - t0) / 1000;
      while (rx.arrivals.size < EVENTS) await new Promise((r) => setTimeout(r, 20));
      const endToEnd = (performance.now() - t0) / 1000;
      // Store -> delivery latency: the outbox row's commit time to the first arrival at the receiver.
      const { rows } = await db.query<{ id: string; at: string }>(
        `SELECT (payload->>'id') AS id, (extract(epoch FROM o.when_created) * 1000)::float8 AS at
           FROM outbox o JOIN deliveries d ON d.outbox_id = o.id WHERE d.integration_id = $1`,
        [integration.id],
      );
      const lat = rows.map((r) => rx.arrivals.get(Number(r.id))! - Number(r.at)).sort((a, b) => a - b);
      // The raw client: the same number of bodies of the same size, same receiver, same concurrency.
      const { rows: sample } = await db.query<{ payload: unknown }>(
        'SELECT o.payload FROM outbox o JOIN deliveries d ON d.outbox_id = o.id WHERE d.integration_id = $1 LIMIT $2',
        [integration.id, mode.batchSize],
      );
      const one = JSON.stringify(mode.name === 'single' ? sample[0]!.payload : sample.map((s) => s.payload));
      const bodies = Array.from({ length: EVENTS / mode.batchSize }, () => one);
      rx.arrivals.clear();
      const rawSeconds = await rawClient(`${rxUrl}/raw`, bodies, mode.concurrency);
      results.push({
        mode: mode.name,
        events: EVENTS,
        requests: EVENTS / mode.batchSize,
        ingestPerSecond: Math.round(EVENTS / ingestSeconds),
        deliveredPerSecond: Math.round(EVENTS / endToEnd),
        rawClientPerSecond: Math.round(EVENTS / rawSeconds),
        serviceVsRaw: `${Math.round((rawSeconds / endToEnd) * 100)}%`,
        storeToDeliveryP50Ms: Math.round(percentile(lat, 50)),
        storeToDeliveryP99Ms: Math.round(percentile(lat, 99)),
      });
    }
  } finally {
    await db.end();
    await app.close();
    rx.server.closeAllConnections();
    await new Promise((r) => rx.server.close(r));
  }
  return results;
}
