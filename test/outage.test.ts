// A database outage: the service runs against a PostgreSQL this test starts itself on a
// Unix socket in its own private folder (no TCP port another process could take while it is down), which is stopped for some seconds and started again. Ingest during the outage fails
// with a clear 503 and stores nothing; nothing accepted before or after is lost; delivery resumes
// by itself.
// @test-lanes postgres kafka
// (a database that stops and starts again: PostgreSQL only)
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { IN_CI, ownerWithKey, startApp, TEST_DB, undelivered, waitFor } from './helpers.js';
import { privatePostgres, serverBinaries } from './pg-server.js';
import { Receiver } from './receiver.js';

if (TEST_DB === 'postgres') {
  test('ingest answers 503 while the database is down, nothing accepted is lost, and delivery resumes by itself', async (t) => {
    if (!serverBinaries(t, IN_CI)) return;
    const pgs = privatePostgres('tracking-outage-');
    const { start, stop } = pgs;
    t.after(() => pgs.remove());

    const ta = await startApp(
      t,
      { PUSH_ALLOW_HTTP: 'true', PUSH_ALLOWED_NETWORKS: '127.0.0.0/8', DELIVERY_POLL_MS: '100' },
      { databaseUrl: pgs.url },
    );
    const rx = await new Receiver().start();
    t.after(() => rx.close());
    const o = await ownerWithKey(ta, 'outage-fleet');
    const asset = await ta.call('POST', '/api/v1/assets', { token: o.key, body: { name: 'OUT1' } });
    const integ = await ta.call('POST', '/api/v1/integrations', {
      token: ta.adminToken,
      body: {
        name: 'outage-hook',
        channel: 'webhook',
        ownerIds: [o.ownerId],
        objectTypes: ['location'],
        destination: `${rx.url}/hook`,
        retry: { scheduleSeconds: [0.2] },
      },
    });
    assert.equal(integ.status, 201);
    const post = (n: number) =>
      ta.call('POST', '/api/v1/locations', {
        token: o.key,
        body: Array.from({ length: n }, () => ({ assetId: asset.body.id, latitude: 5, longitude: 5 })),
      });
    const accepted: string[] = [];
    const before = await post(50);
    assert.equal(before.status, 201);
    accepted.push(...before.body.map((l: { id: string }) => l.id));

    stop();
    for (let i = 0; i < 5; i++) {
      const r = await post(10);
      assert.equal(r.status, 503, r.raw);
      assert.equal(r.body.code, 'DATABASE_UNAVAILABLE');
      assert.ok(r.body.error && r.body.message);
      assert.ok(r.headers['retry-after']);
      await new Promise((x) => setTimeout(x, 500));
    }
    assert.equal((await ta.call('GET', '/readyz')).status, 503);
    start();

    // The pool reconnects by itself; the first requests may still meet a dead connection.
    let after;
    const back = Date.now() + 60_000;
    for (;;) {
      after = await post(50);
      if (after.status === 201) break;
      assert.equal(after.status, 503, after.raw);
      assert.ok(Date.now() < back, 'ingest still refused 60 s after the database came back');
      await new Promise((x) => setTimeout(x, 250));
    }
    accepted.push(...after!.body.map((l: { id: string }) => l.id));

    const db = ta.app.services.db;
    // Delivery resumes by itself: every accepted record reaches the receiver. (Counting what is
    // undelivered can read 0 a moment early with the event log on Kafka: the group commits a
    // message once the engine has it, before its result is written.)
    const delivered = () => new Set(rx.for('/hook').map((r) => String(JSON.parse(r.body).id)));
    await rx.waitFor(() => accepted.every((id) => delivered().has(id)), 120_000, 'every accepted record delivered');
    await waitFor(
      () => 'the results written',
      async () => (await undelivered(db)) === 0,
    );
    const stored = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM locations');
    assert.equal(stored.rows[0]!.n, accepted.length, 'every accepted record stored, nothing from the refused requests');
  });
}
