// Test harness: every test file gets its own database (a fresh PostgreSQL database, or an
// in-memory PGlite), so files never collide. TEST_DB=postgres|pglite picks the engine; npm test
// runs the suite on both. A test whose external service is absent skips with how to start it on a
// developer's machine; under CI=true it fails instead.
import { dropEventLog, eventLogEnv, TEST_EVENT_LOG, TEST_KAFKA_BROKERS } from './event-log.js';
import { TEST_PASSWORD_COST } from './service-process.js';
import { consumerLag, type EventLogConfig } from '../src/eventlog/kafka.js';
import crypto from 'node:crypto';
import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import { after, type TestContext, test } from 'node:test';
import pg from 'pg';
import assert from 'node:assert/strict';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../src/app.js';
import { loadConfig, type Config } from '../src/config.js';
import { createPglite, type Queryable } from '../src/db/db.js';
import { pendingTotal } from '../src/delivery/queue/index.js';
import { listPartitions } from '../src/storage/partitions.js';
import { PARTITIONED } from '../src/storage/tables.js';

export const TEST_DB = (process.env.TEST_DB ?? 'postgres') as 'postgres' | 'pglite';
/**
 * A test that runs on PostgreSQL only: on PGlite it shows as skipped, with the reason, so the
 * PGlite lane's summary counts it (`# skipped N`) instead of losing it.
 */
export function postgresOnly(reason: string, name: string, fn: (t: TestContext) => Promise<void>): void {
  if (TEST_DB === 'postgres') void test(name, fn);
  else void test(name, { skip: `PostgreSQL only: ${reason}` }, fn);
}
export const ADMIN_PG_URL = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
export const IN_CI = process.env.CI === 'true';
/** The object types the service pushes, as the API guide (section 8) lists them, sorted. */
export const PUSHED_TYPES = [
  'asset',
  'command',
  'event',
  'gensetdata',
  'integrationStatus',
  'location',
  'notification',
  'oemdata',
  'reeferdata',
  'sensordata',
];

// Cleanups run when the file ends, last registered first: apps close before their database is dropped.
const cleanups: (() => Promise<unknown>)[] = [];
after(async () => {
  for (const c of cleanups.reverse()) await c();
});
export const atEnd = (fn: () => Promise<unknown>) => void cleanups.push(fn);

export const OPERATOR = {
  clientId: 'test-cli',
  clientSecret: 'test-secret-0123456789',
  username: 'operator',
  password: 'operator-password',
};

/**
 * Skips the test when a service is missing on a developer's machine; fails under CI=true.
 * Returns false when the caller should return early.
 */
export function requireService(t: TestContext, ok: boolean, what: string, howToStart: string): boolean {
  if (ok) return true;
  if (IN_CI) throw new Error(`${what} is not available (CI=true, nothing may skip). Start it: ${howToStart}`);
  t.skip(`${what} is not available; start it with: ${howToStart}`);
  return false;
}

/**
 * A connection of the test's own to a server (the shared one by default). A server at
 * max_connections ("too many clients already", 53300: CI runs four files at once, each with its
 * services' pools) is busy, not absent: the connection is tried again for up to a minute.
 */
export async function connectPg(url = ADMIN_PG_URL, timeoutMs?: number): Promise<pg.Client> {
  const until = Date.now() + 60_000;
  for (;;) {
    const c = new pg.Client({ connectionString: url, ...(timeoutMs ? { connectionTimeoutMillis: timeoutMs } : {}) });
    try {
      await c.connect();
      return c;
    } catch (e) {
      if ((e as { code?: string }).code !== '53300' || Date.now() > until) throw e;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}
const adminClient = (timeoutMs?: number) => connectPg(ADMIN_PG_URL, timeoutMs);

export async function postgresAvailable(): Promise<boolean> {
  try {
    const c = await adminClient(2000);
    await c.end();
    return true;
  } catch {
    return false;
  }
}

/**
 * A fresh PostgreSQL database for this test file, dropped when the file ends: a copy of the run's
 * migrated template (test/templates.ts) when the runner made one, else (or when `empty`) an empty one.
 */
export async function createTestDatabase(opts: { empty?: boolean } = {}): Promise<string> {
  const name = `t_${crypto.randomBytes(6).toString('hex')}`;
  const template = opts.empty ? 'template0' : process.env.TEST_PG_TEMPLATE;
  const admin = await adminClient();
  await admin.query(`CREATE DATABASE ${name}${template ? ` TEMPLATE ${template}` : ''}`);
  // A commit here waits for no disk flush (2.6 ms of flush a commit on CI's disk, 0.25 ms without):
  // the shared server is not what any test crashes (the tests that stop a database start their own,
  // test/pg-server.ts, with fsync off), so what is committed is never lost to the tests, and a file
  // that commits thousands of times is not timed by the disk.
  await admin.query(`ALTER DATABASE ${name} SET synchronous_commit = off`);
  await admin.end();
  const u = new URL(ADMIN_PG_URL);
  u.pathname = `/${name}`;
  atEnd(async () => {
    const c = await adminClient();
    await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await c.end();
    await dropEventLog(u.toString());
  });
  return u.toString();
}

const TEST_SECRETS_KEY = crypto.randomBytes(32).toString('hex');

let pgliteBytes: Buffer | undefined;
/** The run's saved PGlite data folder (TEST_PGLITE_TEMPLATE), read once per process. */
function pgliteTemplate(): Blob | undefined {
  const file = process.env.TEST_PGLITE_TEMPLATE;
  if (!file) return undefined;
  pgliteBytes ??= fs.readFileSync(file);
  return new Blob([pgliteBytes as Uint8Array<ArrayBuffer>]);
}

/** Configuration for a test app; on PostgreSQL pass the database URL from createTestDatabase. */
export function testConfig(env: Record<string, string> = {}, databaseUrl?: string): Config {
  return loadConfig({
    LOG_LEVEL: 'warn',
    PORT: '0',
    DATA_DIR: 'memory://',
    BOOTSTRAP_CLIENT_ID: OPERATOR.clientId,
    BOOTSTRAP_CLIENT_SECRET: OPERATOR.clientSecret,
    BOOTSTRAP_USERNAME: OPERATOR.username,
    BOOTSTRAP_PASSWORD: OPERATOR.password,
    SECRETS_KEY: TEST_SECRETS_KEY,
    // Four test files run at once against the shared server's 100 connections, some with several
    // services each: a small pool per service (a file may ask for more).
    DB_POOL_SIZE: '6',
    PASSWORD_HASH_COST: TEST_PASSWORD_COST,
    ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
    ...eventLogEnv(databaseUrl),
    ...env,
  });
}

export interface TestApp {
  app: FastifyInstance;
  url: string;
  cfg: Config;
  databaseUrl?: string;
  /** An operator token (read, write, admin). */
  adminToken: string;
  /** Calls the API over app.inject with a bearer; returns status, headers and parsed body. */
  call(method: string, path: string, opts?: { token?: string; body?: unknown; headers?: Record<string, string> }): Promise<Res>;
}

export interface Res {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: any;
  raw: string;
}

/** Drops every partition of the partitioned tables (each is empty in a new test database). */
async function dropPartitions(q: Queryable): Promise<void> {
  for (const t of PARTITIONED) for (const p of await listPartitions(q, t.name)) await q.query(`DROP TABLE ${p.name}`);
}

/** Starts the whole service for this test file on the engine TEST_DB selects, listening on a port the system gives. */
export async function startApp(
  _t: TestContext | undefined,
  env: Record<string, string> = {},
  opts: { databaseUrl?: string } = {},
): Promise<TestApp> {
  let databaseUrl = opts.databaseUrl;
  if (TEST_DB === 'postgres' && !databaseUrl) {
    if (!(await postgresAvailable())) {
      // Every test needs its database: fail with how to start it (or run TEST_DB=pglite).
      throw new Error(`PostgreSQL is not reachable at ${ADMIN_PG_URL}; start it with bash scripts/services.sh, or run npm run test:pglite`);
    }
    databaseUrl = await createTestDatabase();
  }
  // Port 0: the system gives a port nobody else holds (a port picked and released could be taken
  // meanwhile). The app's public URL (token issuer, Location headers) names it once bound.
  const cfg0 = testConfig({ ...env, PORT: '0' }, databaseUrl);
  // On PGlite, the run's migrated template when there is one (closed after the app, which leaves a
  // database it was given open).
  const template = TEST_DB === 'pglite' && !databaseUrl ? pgliteTemplate() : undefined;
  const db = template ? await createPglite(undefined, template, { sharedBuffersMb: cfg0.EMBEDDED_SHARED_BUFFERS_MB }) : undefined;
  if (db) atEnd(() => db.close());
  // The templates hold the default interval's partitions (test/templates.ts): an app on another
  // starts without them, as it would from a fresh database.
  if ((env.PARTITION_INTERVAL ?? 'week') !== 'week' && !opts.databaseUrl) {
    if (db) await dropPartitions(db);
    else if (databaseUrl) {
      const c = new pg.Client({ connectionString: databaseUrl });
      await c.connect();
      try {
        await dropPartitions(c as unknown as Queryable);
      } finally {
        await c.end();
      }
    }
  }
  const app = await buildApp(cfg0, { logger: { level: env.LOG_LEVEL ?? 'error' }, ...(db ? { db } : {}) });
  atEnd(() => app.close());
  await app.listen({ port: 0, host: '127.0.0.1' });
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  if (!env.PUBLIC_URL) assert.equal(cfg0.publicUrl, url, 'the public URL names the bound port');
  const call: TestApp['call'] = async (method, path, o = {}) => {
    const headers: Record<string, string> = { ...(o.headers ?? {}) };
    if (o.token) headers.authorization = `Bearer ${o.token}`;
    let payload: string | Buffer | undefined;
    if (o.body !== undefined) {
      // Text and bytes go as they are (a test of what the service does with invalid UTF-8), anything else as JSON.
      payload = typeof o.body === 'string' || Buffer.isBuffer(o.body) ? o.body : JSON.stringify(o.body);
      headers['content-type'] ??= 'application/json';
    }
    const r = await app.inject({ method: method as any, url: path, headers, ...(payload === undefined ? {} : { payload }) });
    let body: unknown = r.body;
    try {
      body = r.body ? JSON.parse(r.body) : undefined;
    } catch {
      /* not JSON */
    }
    return { status: r.statusCode, headers: r.headers as Res['headers'], body, raw: r.body };
  };
  const tok = await passwordToken(call, OPERATOR.username, OPERATOR.password);
  return { app, url, cfg: cfg0, ...(databaseUrl ? { databaseUrl } : {}), adminToken: tok.access_token, call };
}

export const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;

export async function passwordToken(call: TestApp['call'], username: string, password: string, client = OPERATOR) {
  const r = await call('POST', '/auth/realms/tracking/protocol/openid-connect/token', {
    headers: { authorization: basic(client.clientId, client.clientSecret), 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'password', scope: 'openid profile read', username, password }).toString(),
  });
  if (r.status !== 200) throw new Error(`token request failed: ${r.status} ${r.raw}`);
  return r.body as { access_token: string; refresh_token: string; expires_in: number };
}

/** Creates an owner (optionally under a parent) and an API key for it with the given scopes. */
export async function ownerWithKey(
  ta: TestApp,
  name: string,
  opts: { parentId?: string; scopes?: ('read' | 'write' | 'admin')[] } = {},
): Promise<{ ownerId: string; key: string }> {
  const o = await ta.call('POST', '/api/v1/owners', {
    token: ta.adminToken,
    body: { name, ...(opts.parentId ? { ownerId: opts.parentId } : {}) },
  });
  if (o.status !== 201) throw new Error(`owner create failed: ${o.status} ${o.raw}`);
  const k = await ta.call('POST', '/api/v1/api-keys', {
    token: ta.adminToken,
    body: { name: `${name}-key`, ownerId: o.body.id, scopes: opts.scopes ?? ['read', 'write'] },
  });
  if (k.status !== 201) throw new Error(`key create failed: ${k.status} ${k.raw}`);
  return { ownerId: o.body.id, key: k.body.key };
}

let customers = 0;

/**
 * A customer of the service as tests use one: an owner (named `label` and a number, under
 * `parentId` when given) with an API key, `call` with that key (paths start with `base`, so a file
 * may write '/zones' for '/api/v1/zones'), and `asset` to create one of its assets.
 */
export async function customer(
  ta: TestApp,
  label: string,
  opts: { parentId?: string; scopes?: ('read' | 'write' | 'admin')[]; base?: string } = {},
) {
  const { base = '', ...keyOpts } = opts;
  const name = `${label}-${++customers}`;
  const o = await ownerWithKey(ta, name, keyOpts);
  const call = (method: string, path: string, body?: unknown) =>
    ta.call(method, `${base}${path}`, { token: o.key, ...(body === undefined ? {} : { body }) });
  const asset = async (name: string): Promise<string> =>
    ok(await ta.call('POST', '/api/v1/assets', { token: o.key, body: { name } }), 201, `asset ${name}`).id;
  return { ...o, name, call, asset };
}

/**
 * A customer with `assets` assets (one by default) and an integration, created by the operator,
 * that pushes its locations: `integration` is laid over {name, ownerIds: [the owner], objectTypes:
 * ['location']} and must name the channel and destination. `store` stores locations of its assets.
 */
export async function fleet(
  ta: TestApp,
  label: string,
  integration: Record<string, unknown>,
  opts: { parentId?: string; assets?: number } = {},
) {
  const c = await customer(ta, label, opts.parentId ? { parentId: opts.parentId } : {});
  const assetIds: string[] = [];
  for (let a = 1; a <= (opts.assets ?? 1); a++) assetIds.push(await c.asset(`${c.name}-A${a}`));
  const created = ok(
    await ta.call('POST', '/api/v1/integrations', {
      token: ta.adminToken,
      body: { name: `${c.name}-integration`, ownerIds: [c.ownerId], objectTypes: ['location'], ...integration },
    }),
    201,
    'integration',
  );
  return {
    ...c,
    assetId: assetIds[0]!,
    assetIds,
    integration: created,
    integrationId: created.id as string,
    store: (latitudes: number | number[]) => storeLocations(ta, c.key, assetIds, latitudes),
  };
}

/**
 * Stores locations in one bulk (one transaction): one per latitude, or `count` of them at latitudes
 * 0, 1, 2, ..., spread over the assets in turn, a millisecond apart from a minute ago. Returns the
 * stored ids in order.
 */
export async function storeLocations(
  ta: TestApp,
  key: string,
  assetIds: string | string[],
  latitudes: number | number[],
): Promise<string[]> {
  const assets = typeof assetIds === 'string' ? [assetIds] : assetIds;
  const lats = typeof latitudes === 'number' ? Array.from({ length: latitudes }, (_, i) => i % 90) : latitudes;
  const body = lats.map((latitude, i) => ({
    assetId: assets[i % assets.length],
    latitude,
    longitude: 1,
    whenCreated: new Date(Date.now() - 60_000 + i).toISOString(),
  }));
  return (ok(await ta.call('POST', '/api/v1/locations', { token: key, body }), 201, 'locations') as { id: string }[]).map((x) =>
    String(x.id),
  );
}

/** The REEFER specification the alert tests share: supply air -30 to -10 °C, so a reading above -10 alerts at once. */
export async function frozenSpecification(
  call: (method: string, path: string, body?: unknown) => Promise<Res>,
  assetId: string,
  name = 'Frozen',
) {
  return ok(
    await call('POST', '/specifications', {
      assetId,
      type: 'REEFER',
      name,
      ranges: { cargo: { sensors: { supplyAirTemperature: [-30, -10] } } },
    }),
    201,
    'specification',
  );
}

/**
 * A customer (paths under /api/v1) with a reefer (`assetName`, default `<label>-reefer`) under the
 * frozen specification (named `specName`); `reefer(minutesAgo, supplyAirTemperature)` stores a reading.
 */
export async function alertingReefer(ta: TestApp, label: string, opts: { assetName?: string; specName?: string } = {}) {
  const c = await customer(ta, label, { base: '/api/v1' });
  const assetId = await c.asset(opts.assetName ?? `${label}-reefer`);
  const spec = await frozenSpecification(c.call, assetId, opts.specName);
  const reefer = async (minutesAgo: number, supplyAirTemperature: number) =>
    ok(
      await c.call('POST', '/reefer-data', {
        assetId,
        whenCreated: new Date(Date.now() - minutesAgo * 60_000).toISOString(),
        data: { supplyAirTemperature },
      }),
      201,
      'reefer data',
    );
  return { ...c, assetId, spec, reefer };
}

/** Asserts a status and returns the body. */
export function ok(r: Res, status: number, what = ''): any {
  assert.equal(r.status, status, `${what}: expected ${status}, got ${r.status} ${r.raw.slice(0, 500)}`);
  return r.body;
}

/** Asserts an error status in the envelope, and the offending field when given. */
export function bad(r: Res, status: number, field: string | undefined, what = ''): void {
  assert.equal(r.status, status, `${what}: expected ${status}, got ${r.status} ${r.raw.slice(0, 500)}`);
  assert.equal(typeof r.body?.error, 'string', `${what}: error member`);
  assert.equal(typeof r.body?.message, 'string', `${what}: message member`);
  if (field !== undefined) assert.equal(r.body.field, field, `${what}: field (${r.raw.slice(0, 500)})`);
}

/**
 * Events not yet delivered: the engine's pending count (retries, claims, the unread log) plus
 * deliveries that ended other than SUCCEEDED. Zero once everything stored has arrived.
 */
export async function undelivered(q: Pick<pg.ClientBase, 'query'> | Queryable): Promise<number> {
  const db: Queryable = { query: async (text, params) => (q as Queryable).query(text, params) as any };
  const { rows } = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM deliveries WHERE status <> 'SUCCEEDED'");
  return rows[0]!.n + (await pendingTotal(db)) + (await topicLag(db));
}

/**
 * The events carried by attempts the sender gave up on (its timeout): sent again by design, so
 * duplicates a receiver may count (an attempt row is one request: a batch of events).
 */
export async function eventsInTimedOutAttempts(q: Pick<pg.ClientBase, 'query'>): Promise<number> {
  const { rows } = await q.query<{ n: number }>(
    "SELECT COALESCE(sum(cardinality(log_ids)), 0)::int AS n FROM delivery_attempts WHERE error LIKE 'timed out%'",
  );
  return rows[0]!.n;
}

/**
 * With the event log on Kafka (the kafka lane): the events on this database's topic that the
 * consumer group has not handed over yet (0 in the PostgreSQL mode, or when the topic is not there).
 */
async function topicLag(db: Queryable): Promise<number> {
  if (TEST_EVENT_LOG !== 'kafka') return 0;
  const { rows } = await db.query<{ d: string }>('SELECT current_database() AS d');
  const env = eventLogEnv(`postgres://localhost/${rows[0]!.d}`);
  const cfg = {
    EVENT_LOG_KAFKA_BROKERS: [TEST_KAFKA_BROKERS],
    EVENT_LOG_KAFKA_TLS: false,
    EVENT_LOG_KAFKA_CLIENT_ID: 'tracking-test',
    EVENT_LOG_TOPIC: env.EVENT_LOG_TOPIC!,
    EVENT_LOG_GROUP: env.EVENT_LOG_GROUP!,
    EVENT_LOG_PARTITIONS: 4,
  } as EventLogConfig;
  return consumerLag(cfg);
}

/** Polls fn (every 100 ms) until it returns something truthy; a timeout names what it waited for. */
export async function waitFor<T>(what: () => string, fn: () => Promise<T | undefined | false>, ms = 90_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** An integration's deliveries through the API, and waits on them (the operator's token; `app` may be set later). */
export function deliveryHistory(app: () => TestApp) {
  const deliveries = async (id: string, status?: string): Promise<any[]> =>
    ok(
      await app().call('GET', `/api/v1/integrations/${id}/deliveries?limit=1000${status ? `&status=${status}` : ''}`, {
        token: app().adminToken,
      }),
      200,
    );
  /** Resolves with the deliveries once `cond` holds for them; a timeout shows the last ones seen. */
  const until = (id: string, cond: (d: any[]) => boolean, ms = 120_000): Promise<any[]> => {
    let last: any[] = [];
    return waitFor(
      () => `the deliveries of ${id} to settle (last: ${JSON.stringify(last.map((x) => [x.id, x.status, x.attempts]))})`,
      async () => {
        last = await deliveries(id);
        return cond(last) ? last : undefined;
      },
      ms,
    );
  };
  /**
   * Resolves with the deliveries in `status` once there are at least `count` (within `ms`); a timeout
   * says how many there were in each status.
   */
  const reached = (id: string, count: number, status: string, ms = 90_000) =>
    waitFor(
      () => `${count} deliveries of ${id} to be ${status}`,
      async () => {
        const d = await deliveries(id, status);
        return d.length >= count ? d : undefined;
      },
      ms,
    ).catch(async (e: Error) => {
      const byStatus: Record<string, number> = {};
      for (const x of await deliveries(id).catch(() => [])) byStatus[x.status] = (byStatus[x.status] ?? 0) + 1;
      throw new Error(`${e.message}; by status: ${JSON.stringify(byStatus)}`);
    });
  return {
    deliveries,
    until,
    reached,
    allSucceeded: (id: string, count: number, ms?: number) => reached(id, count, 'SUCCEEDED', ms),
    /** Resolves with the first delivery that has an attempt (a test expecting it to have failed checks). */
    firstAttempted: (id: string) =>
      waitFor(
        () => `an attempt of ${id}`,
        async () => (await deliveries(id)).find((d) => d.attemptsLog.length > 0),
      ),
  };
}

/** The result stream's lines (NDJSON, the default window) of one integration, for one channel. */
export async function streamLines(ta: TestApp, channel: string, integrationId: string): Promise<any[]> {
  const stream = await ta.call('GET', `/api/v1/deliveries/stream?channel=${channel}`, { token: ta.adminToken });
  assert.equal(stream.status, 200, stream.raw.slice(0, 300));
  return stream.raw
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l))
    .filter((l) => l.integrationId === integrationId);
}
