// Issue 4's crash test, on PostgreSQL: a child-process service takes 20,000 records in bulk posts
// for a webhook that answers 500 or 429 to a share of requests and sleeps past the timeout on
// some (a seeded pattern); the service is killed with SIGKILL three times and restarted. Then:
// every record that got a 201 is stored, every stored event reached the receiver, every delivery
// ended SUCCEEDED with a successful attempt row, and duplicates stay within kills x batch x concurrency.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import { test } from 'node:test';
import pg from 'pg';
import { createTestDatabase, freePort, TEST_DB } from './helpers.js';
import { Receiver } from './receiver.js';

const RECORDS = 20_000;
const POST_SIZE = 500;
const BATCH = 50;
const CONCURRENCY = 4;
const KILLS = 3;

/** mulberry32: a seeded fault pattern, the same on every run. */
function rng(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = seed;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

if (TEST_DB === 'postgres') {
  test('SIGKILL three times during ingest and delivery: nothing accepted is lost, every event delivered, duplicates bounded', {
    timeout: 300_000,
  }, async (t) => {
    const databaseUrl = await createTestDatabase();
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const env = {
      ...process.env,
      DATABASE_URL: databaseUrl,
      SECRETS_KEY: crypto.randomBytes(32).toString('hex'),
      PORT: String(port),
      LOG_LEVEL: 'error',
      BOOTSTRAP_CLIENT_SECRET: 'crash-secret',
      BOOTSTRAP_PASSWORD: 'crash-password',
      PUSH_ALLOW_HTTP: 'true',
      PUSH_ALLOWED_NETWORKS: '127.0.0.0/8',
      DELIVERY_LEASE_SECONDS: '2',
      DELIVERY_POLL_MS: '200',
      RATE_LIMIT_MAX: '1000000',
      RATE_LIMIT_CONCURRENT: '100',
    };
    let child: ChildProcess | undefined;
    const startService = async () => {
      child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], { env, stdio: ['ignore', 'ignore', 'inherit'] });
      for (let i = 0; i < 300; i++) {
        try {
          if ((await fetch(`${base}/readyz`)).ok) return;
        } catch {
          /* not yet */
        }
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new Error('service did not start');
    };
    t.after(() => child?.kill('SIGKILL'));

    // The receiver: 10% 500, 5% 429 (Retry-After 1), 5% sleep past the 500 ms timeout, else 200.
    const random = rng(42);
    const delivered = new Map<string, number>(); // event id -> times the receiver processed it
    const rx = await new Receiver().start();
    t.after(() => rx.close());
    rx.on('/hook', (r) => {
      const x = random();
      const events = (JSON.parse(r.body) as { eventId: string }[]).map((o) => o.eventId);
      const ok = () => {
        for (const e of events) delivered.set(e, (delivered.get(e) ?? 0) + 1);
      };
      if (x < 0.1) return { status: 500, body: 'injected failure' };
      if (x < 0.15) return { status: 429, headers: { 'retry-after': '1' } };
      // Processed, but answered after the sender's 500 ms timeout: the sender sends it again.
      ok();
      if (x < 0.2) return { status: 200, delayMs: 800 };
      return { status: 200 };
    });

    await startService();
    const tokenRes = await fetch(`${base}/auth/realms/tracking/protocol/openid-connect/token`, {
      method: 'POST',
      headers: {
        authorization: `Basic ${Buffer.from('tracking-cli:crash-secret').toString('base64')}`,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: 'grant_type=password&username=operator&password=crash-password',
    });
    const token = ((await tokenRes.json()) as { access_token: string }).access_token;
    const api = async (path: string, body: unknown) => {
      const r = await fetch(`${base}/api/v1${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return { status: r.status, body: (await r.json()) as any };
    };
    const owner = (await api('/owners', { name: 'crash-fleet' })).body;
    const assets: string[] = [];
    for (let i = 0; i < 20; i++) assets.push((await api('/assets', { name: `CRASH${i}`, ownerId: owner.id })).body.id);
    const integration = await api('/integrations', {
      name: 'crash-hook',
      channel: 'webhook',
      ownerIds: [owner.id],
      objectTypes: ['location'],
      destination: `${rx.url}/hook`,
      retry: { scheduleSeconds: [0.2, 0.5], maxAttempts: 1000, deadlineHours: 1 },
      webhook: { mode: 'batch', batchSize: BATCH, maxConcurrentRequests: CONCURRENCY, timeoutMs: 500, injectEventId: true },
    });
    assert.equal(integration.status, 201, JSON.stringify(integration.body));

    // Ingest in bulk posts while a killer SIGKILLs the service three times and restarts it.
    const acknowledged: string[] = [];
    let kills = 0;
    let restarting: Promise<void> | undefined;
    const killer = (async () => {
      for (let k = 0; k < KILLS; k++) {
        await new Promise((r) => setTimeout(r, 2500 + k * 1500));
        child!.kill('SIGKILL');
        kills++;
        restarting = startService();
        await restarting;
      }
    })();
    let seq = 0;
    while (acknowledged.length < RECORDS) {
      const items = Array.from({ length: Math.min(POST_SIZE, RECORDS - acknowledged.length) }, () => ({
        assetId: assets[seq % assets.length],
        latitude: (seq++ % 180) - 89.5,
        longitude: 10,
        whenCreated: new Date(Date.now() - 3600_000 + seq).toISOString(),
      }));
      try {
        const r = await api('/locations', items);
        if (r.status === 201) acknowledged.push(...r.body.map((l: { id: string }) => l.id));
      } catch {
        await (restarting ?? new Promise((r) => setTimeout(r, 200))); // killed mid-request: not acknowledged
      }
    }
    await killer;
    assert.equal(kills, KILLS);

    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    t.after(() => db.end());
    // Wait for the backlog to drain.
    const deadline = Date.now() + 180_000;
    for (;;) {
      const { rows } = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM deliveries WHERE status <> 'SUCCEEDED'");
      if (rows[0]!.n === 0) break;
      if (Date.now() > deadline) throw new Error(`${rows[0]!.n} deliveries still not SUCCEEDED`);
      await new Promise((r) => setTimeout(r, 500));
    }

    // 1. Every record that got a 201 is in the database.
    const stored = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM locations WHERE id = ANY($1::int8[])', [acknowledged]);
    assert.equal(stored.rows[0]!.n, acknowledged.length);
    // 2. Every event in the database reached the receiver at least once.
    const events = (await db.query<{ event_id: string }>("SELECT event_id FROM outbox WHERE object_type = 'location'")).rows.map(
      (r) => r.event_id,
    );
    assert.ok(events.length >= RECORDS);
    const missing = events.filter((e) => !delivered.has(e));
    assert.equal(missing.length, 0, `${missing.length} events never reached the receiver`);
    // 3. Every delivery SUCCEEDED with a successful attempt row.
    const unproven = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM deliveries d WHERE d.status <> 'SUCCEEDED'
          OR NOT EXISTS (SELECT 1 FROM delivery_attempts a WHERE a.delivery_id = d.id AND a.success)`,
    );
    assert.equal(unproven.rows[0]!.n, 0);
    const deliveries = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM deliveries');
    assert.equal(deliveries.rows[0]!.n, events.length, 'one delivery per event');
    // 4. Duplicates. A request the sender gave up on (its timeout: the receiver's deliberate
    //    800 ms sleeps, or any answer that came too late) is sent again by design; each such attempt
    //    is in the attempt log. What remains can only come from kills: the results of at most
    //    `concurrency` requests of `batch` events are unwritten when a process dies.
    let duplicates = 0;
    for (const n of delivered.values()) duplicates += n - 1;
    const timedOut = (await db.query<{ n: number }>("SELECT count(*)::int AS n FROM delivery_attempts WHERE error LIKE 'timed out%'"))
      .rows[0]!.n;
    const bound = kills * BATCH * CONCURRENCY;
    const byKills = Math.max(0, duplicates - timedOut);
    console.log(
      `crash test: ${acknowledged.length} records acknowledged, ${events.length} events delivered, ${rx.for('/hook').length} requests, ` +
        `${kills} kills; ${duplicates} duplicate receipts: ${Math.min(duplicates, timedOut)} from timed-out attempts, ${byKills} from kills (bound ${bound})`,
    );
    assert.ok(byKills <= bound, `duplicates from kills ${byKills} exceed ${bound}`);
  });
}
