// Two service instances on one PostgreSQL deliver a backlog together: no event lost, none sent
// twice, and the per-webhook limits (requests in flight, items per minute) still held, as a
// receiver counting requests in flight and per second measures them.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ownerWithKey, startApp, TEST_DB } from './helpers.js';
import { Receiver } from './receiver.js';

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

    const a = await startApp(undefined, env, { databaseUrl: one.databaseUrl! });
    const b = await startApp(undefined, env, { databaseUrl: one.databaseUrl! });
    const started = Date.now();
    const db = one.app.services.db;
    for (;;) {
      const { rows } = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM deliveries WHERE status <> 'SUCCEEDED'");
      if (rows[0]!.n === 0) break;
      assert.ok(Date.now() - started < 60_000, 'backlog not delivered in 60 s');
      await new Promise((r) => setTimeout(r, 100));
    }
    const took = Date.now() - started;
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
    // 1200/min: a bucket of 20 refilled at (1200 - 20) / 60 per second, so 200 items need >= 9 s
    // and no second sees more than 20 + 20.
    assert.ok(took >= 8_500, `200 items at 1200/min took ${took} ms`);
    const times = rx.for('/hook').map((r) => r.at);
    for (const t0 of times) assert.ok(times.filter((t) => t >= t0 && t < t0 + 1000).length <= 40);
    console.log(`two instances: 200 events in ${took} ms, ${sentA} + ${sentB} requests, max ${rx.maxInFlight} in flight`);
  });
}
