// The crash test, on PostgreSQL: a child-process service takes 20,000 records in bulk posts
// for a webhook that answers 500 or 429 to a share of requests and sleeps past the timeout on
// some (a seeded pattern); the service is killed with SIGKILL three times, each while a post is in
// flight, and restarted on a new port. Then:
// every record that got a 201 is stored, every stored event reached the receiver, every delivery
// ended SUCCEEDED with a successful attempt row, and duplicates stay within kills x batch x concurrency.
// @test-lanes postgres kafka
// (a SIGKILL and restart against one database: PostgreSQL only, API guide 10)
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createTestDatabase, eventsInTimedOutAttempts, TEST_DB, undelivered, connectPg } from './helpers.js';
import { Receiver } from './receiver.js';
import { serviceProcess } from './service-process.js';

const RECORDS = 20_000;
const POST_SIZE = 500;
const BATCH = 50;
const CONCURRENCY = 4;
const KILLS = 3;

/** What a request meets while the service is down or dies under it; anything else is a failure. */
const DOWN_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED']);
function connectionError(e: unknown): boolean {
  const cause = (e as { cause?: { code?: string } }).cause;
  return e instanceof TypeError && DOWN_CODES.has(cause?.code ?? '');
}

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

    // The service as a child process (test/service-process.ts): a new port on each start, one token throughout.
    const svc = await serviceProcess(databaseUrl, {
      PUSH_ALLOW_HTTP: 'true',
      PUSH_ALLOWED_NETWORKS: '127.0.0.0/8',
      DELIVERY_LEASE_SECONDS: '2',
      DELIVERY_POLL_MS: '200',
    });
    t.after(() => svc.kill());
    let up = true; // the current process is listening and not yet killed
    const api = (path: string, body: unknown) => svc.api('POST', path, body);
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

    // Ingest in bulk posts; the service is SIGKILLed while a post is in flight, at points of the
    // ingest the test chooses (not a timer), with delivery running all along, and restarted.
    const killAt = new Set(Array.from({ length: KILLS }, (_, k) => Math.round(((k + 1) * RECORDS) / POST_SIZE / (KILLS + 1))));
    const acknowledged: string[] = [];
    let kills = 0;
    let restarting: Promise<void> | undefined;
    let posts = 0;
    let seq = 0;
    let lost = 0; // posts cut off by a kill: not acknowledged, so not counted
    while (acknowledged.length < RECORDS) {
      const items = Array.from({ length: Math.min(POST_SIZE, RECORDS - acknowledged.length) }, () => ({
        assetId: assets[seq % assets.length],
        latitude: (seq++ % 180) - 89.5,
        longitude: 10,
        whenCreated: new Date(Date.now() - 3600_000 + seq).toISOString(),
      }));
      const killsBefore = kills;
      const post = api('/locations', items);
      if (killAt.has(++posts)) {
        up = false;
        svc.kill();
        kills++;
        restarting = svc.start().then(() => {
          up = true;
        });
      }
      let r;
      try {
        r = await post;
      } catch (e) {
        // Only a kill may break a request: the connection refused or cut while the service is down.
        if (!connectionError(e) || (up && kills === killsBefore)) throw e;
        lost++;
        await restarting;
        continue;
      }
      assert.equal(r.status, 201, JSON.stringify(r.body).slice(0, 300));
      acknowledged.push(...r.body.map((l: { id: string }) => l.id));
    }
    await restarting;
    assert.equal(kills, KILLS);

    const db = await connectPg(databaseUrl);
    t.after(() => db.end());
    // Wait for the backlog to drain.
    const deadline = Date.now() + 180_000;
    for (;;) {
      const n = await undelivered(db);
      if (n === 0) break;
      if (Date.now() > deadline) throw new Error(`${n} deliveries still not SUCCEEDED`);
      await new Promise((r) => setTimeout(r, 500));
    }

    // 1. Every record that got a 201 is in the database.
    const stored = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM locations WHERE id = ANY($1::int8[])', [acknowledged]);
    assert.equal(stored.rows[0]!.n, acknowledged.length);
    // 2. Every event in the database reached the receiver at least once.
    const events = (await db.query<{ event_id: string }>("SELECT event_id FROM event_log WHERE object_type = 'location'")).rows.map(
      (r) => r.event_id,
    );
    assert.ok(events.length >= RECORDS);
    const missing = events.filter((e) => !delivered.has(e));
    assert.equal(missing.length, 0, `${missing.length} events never reached the receiver`);
    // 3. Every event has a successful attempt row, and no delivery ended otherwise.
    const unproven = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM event_log o
        WHERE o.object_type = 'location' AND NOT EXISTS (SELECT 1 FROM delivery_attempts a WHERE a.log_ids && ARRAY[o.id] AND a.success)`,
    );
    assert.equal(unproven.rows[0]!.n, 0, 'every event has a successful attempt');
    const failed = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM deliveries WHERE status <> 'SUCCEEDED'");
    assert.equal(failed.rows[0]!.n, 0);
    // 4. Duplicates. A request the sender gave up on (its timeout: the receiver's deliberate
    //    800 ms sleeps, or any answer that came too late) is sent again by design; each such attempt
    //    is in the attempt log. What remains can only come from kills: the results unwritten when
    //    a process dies, those of the requests in flight (at most `concurrency` of `batch` events)
    //    and those of requests that ended and wait for the next results write (a slot is free
    //    again when its request ends, but a claim starts no request while its ended-unwritten and
    //    in-flight requests reach twice its slots): at most 2 x concurrency requests per kill.
    let duplicates = 0;
    for (const n of delivered.values()) duplicates += n - 1;
    const timedOut = await eventsInTimedOutAttempts(db);
    const bound = 2 * kills * BATCH * CONCURRENCY;
    const byKills = Math.max(0, duplicates - timedOut);
    console.log(
      `crash test: ${acknowledged.length} records acknowledged, ${events.length} events delivered, ${rx.for('/hook').length} requests, ` +
        `${kills} kills, ${lost} posts cut off; ${duplicates} duplicate receipts: ${Math.min(duplicates, timedOut)} from timed-out attempts, ${byKills} from kills (bound ${bound})`,
    );
    assert.ok(byKills <= bound, `duplicates from kills ${byKills} exceed ${bound}`);
  });
}
