// Two service instances on one PostgreSQL deliver a backlog together: no event lost, none sent
// twice, and the per-webhook limits (requests in flight, items per minute) still held, as a
// receiver counting requests in flight and per second measures them.
// @test-lanes postgres kafka
// (several instances on one database: PostgreSQL only, API guide 10)
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ownerWithKey, startApp, TEST_DB, undelivered } from './helpers.js';
import { assertBucket, Receiver } from './receiver.js';

if (TEST_DB === 'postgres') {
  test('two instances share one backlog with maxConcurrentRequests and maxItemsPerMinute held across both', async () => {
    const env = { PUSH_ALLOW_HTTP: 'true', PUSH_ALLOWED_NETWORKS: '127.0.0.0/8', DELIVERY_POLL_MS: '50', RATE_LIMIT_MAX: '100000' };
    // Instance one stores the backlog while delivery is off everywhere, so both start with all of it.
    const one = await startApp(undefined, { ...env, DELIVERY_ENABLED: 'false' });
    const rx = await new Receiver().start();
    const seen = new Map<string, number>();
    rx.on('/hook', (r) => {
      const id = JSON.parse(r.body).id as number;
      seen.set(String(id), (seen.get(String(id)) ?? 0) + 1);
      return { status: 200, delayMs: 60 };
    });
    const o = await ownerWithKey(one, 'two-instances');
    const asset = await one.call('POST', '/api/v1/assets', { token: o.key, body: { name: 'TWIN1' } });
    const created = await one.call('POST', '/api/v1/integrations', {
      token: one.adminToken,
      body: {
        name: 'twin-hook',
        channel: 'webhook',
        ownerIds: [o.ownerId],
        objectTypes: ['location'],
        destination: `${rx.url}/hook`,
        webhook: { maxConcurrentRequests: 3, maxItemsPerMinute: 1200 },
      },
    });
    assert.equal(created.status, 201, created.raw);
    const items = Array.from({ length: 200 }, (_, i) => ({
      assetId: asset.body.id,
      latitude: 1,
      longitude: 1,
      whenCreated: new Date(Date.now() - 10_000 + i).toISOString(),
    }));
    const stored = await one.call('POST', '/api/v1/locations', { token: o.key, body: items });
    assert.equal(stored.status, 201);

    // The integration is off while the two start (one may start long before the other on a busy
    // machine), then on: both find the whole backlog.
    const integration = `/api/v1/integrations/${created.body.id}`;
    assert.equal((await one.call('PATCH', integration, { token: one.adminToken, body: { enabled: false } })).status, 200);
    const a = await startApp(undefined, env, { databaseUrl: one.databaseUrl! });
    const b = await startApp(undefined, env, { databaseUrl: one.databaseUrl! });
    assert.equal((await one.call('PATCH', integration, { token: one.adminToken, body: { enabled: true } })).status, 200);
    const db = one.app.services.db;
    const deadline = Date.now() + 120_000; // a bound for a hung test only; the rate is measured below
    for (;;) {
      const n = await undelivered(db);
      if (n === 0) break;
      assert.ok(Date.now() < deadline, `${n} deliveries still pending after 120 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
    await rx.close();
    const ids = (stored.body as { id: string }[]).map((l) => l.id);
    assert.ok(
      ids.every((id) => seen.has(id)),
      'every event delivered',
    );
    assert.equal([...seen.values()].filter((n) => n > 1).length, 0, 'none twice');
    const sentA = a.app.services.engine!.requestsSent;
    const sentB = b.app.services.engine!.requestsSent;
    assert.ok(sentA > 0 && sentB > 0, `both instances worked (${sentA} + ${sentB})`);
    assert.ok(rx.maxInFlight <= 3, `in flight ${rx.maxInFlight}`);
    // 1200/min is a token bucket of 20 refilled at (1200 - 20) / 60 per second, shared by both
    // instances (API guide 9): measured on the receiver's clock, never the test's.
    const times = rx.for('/hook').map((r) => r.at);
    assertBucket(times, { perMinute: 1200, maxConcurrent: 3 });
    const span = times.at(-1)! - times[0]!;
    console.log(`two instances: 200 events over ${span} ms at the receiver, ${sentA} + ${sentB} requests, max ${rx.maxInFlight} in flight`);
  });
}
