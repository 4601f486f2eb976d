// @test-lanes postgres
// The store path (src/records/hooks.ts) keeps no transaction open while the service's event loop
// works: its reads run outside any transaction, a hook that keeps per-asset state waits for the
// asset's advisory lock without a transaction id, and everything is written by one statement. So a
// slow or waiting store never holds the event log's horizon back for the other stores.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ASSET_LOCK_SPACE } from '../src/db/db.js';
import { atEnd, customer, ok, startApp, waitFor, connectPg } from './helpers.js';

const ta = await startApp(undefined, { RATE_LIMIT_MAX: '100000', RATE_LIMIT_CONCURRENT: '1000' });
const HORIZON = 'pg_snapshot_xmin(pg_current_snapshot())::text::bigint';

test('a store waiting for its asset holds no transaction: the horizon passes it, and it goes on once the asset is free', async () => {
  const c = await customer(ta, 'store');
  // A zone makes the locations hook keep per-asset state, so stores of this asset are serialised.
  ok(await c.call('POST', '/api/v1/zones', { name: 'yard', circle: { latitude: 10, longitude: 10, radiusMeters: 5000 } }), 201);
  const held = await c.asset('held');
  const free = await c.asset('free');

  const other = await connectPg(ta.databaseUrl);
  atEnd(() => other.end());
  // Another store of `held` in progress, as far as the lock goes.
  await other.query('SELECT pg_advisory_lock($1, hashtext($2))', [ASSET_LOCK_SPACE, held]);
  const waiting = c.call('POST', '/api/v1/locations', { assetId: held, latitude: 10, longitude: 10 });
  const waiter = await waitFor(
    () => 'the store of the held asset to wait for its lock',
    async () =>
      (
        await other.query<{ pid: number; xid: string | null }>(
          `SELECT pid, backend_xid::text AS xid FROM pg_stat_activity
            WHERE wait_event_type = 'Lock' AND wait_event = 'advisory' AND pid <> pg_backend_pid() AND datname = current_database()`,
        )
      ).rows[0],
  );
  assert.equal(waiter.xid, null, 'the waiting store has no transaction id');

  // Meanwhile another asset's store commits, and its event comes below the horizon (delivery may
  // read it) while the waiting store still waits: nothing it holds keeps the horizon back. (The
  // server is shared: other databases' transactions may hold the horizon a moment, never for good.)
  const stored = ok(await c.call('POST', '/api/v1/locations', { assetId: free, latitude: 10, longitude: 10 }), 201);
  await waitFor(
    () => "the free asset's event below the horizon",
    async () =>
      (
        await other.query<{ below: boolean }>(
          `SELECT tx_id < ${HORIZON} AS below FROM event_log WHERE object_type = 'location' AND object_id = $1`,
          [stored.id],
        )
      ).rows[0]?.below,
  );
  const still = await other.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event = $2', [waiter.pid, 'advisory']);
  assert.equal(still.rowCount, 1, 'the held store was still waiting all along');

  await other.query('SELECT pg_advisory_unlock($1, hashtext($2))', [ASSET_LOCK_SPACE, held]);
  const done = ok(await waiting, 201);
  assert.equal(done.zoneId, ok(await c.call('GET', '/api/v1/zones'), 200)[0].id, 'stored with its zone');
  const events = ok(await c.call('GET', `/api/v1/events?assetId=${held}`), 200);
  assert.deepEqual(
    events.map((e: { subject: string }) => e.subject),
    ['Entered zone yard'],
    'the zone event was written by the same statement',
  );
  // The lock was given back with the connection: the asset is free for the next store.
  ok(await c.call('POST', '/api/v1/locations', { assetId: held, latitude: 30, longitude: 30 }), 201);
  const after = ok(await c.call('GET', `/api/v1/events?assetId=${held}&order=asc`), 200);
  assert.deepEqual(
    after.map((e: { subject: string }) => e.subject),
    ['Entered zone yard', 'Left zone yard'],
  );
});

test('no store leaves a session idle in a transaction, even with its statement refused', async () => {
  const c = await customer(ta, 'store-refused');
  const assetId = await c.asset('one');
  ok(await c.call('POST', '/api/v1/zones', { name: 'dock', circle: { latitude: 0, longitude: 0, radiusMeters: 1000 } }), 201);
  // The asset goes away between the read that found it and the write: the statement fails whole.
  const other = await connectPg(ta.databaseUrl);
  atEnd(() => other.end());
  await other.query('SELECT pg_advisory_lock($1, hashtext($2))', [ASSET_LOCK_SPACE, assetId]);
  const waiting = c.call('POST', '/api/v1/locations', { assetId, latitude: 0, longitude: 0 });
  await waitFor(
    () => 'the store to wait',
    async () => (await other.query(`SELECT 1 FROM pg_stat_activity WHERE wait_event = 'advisory' AND pid <> pg_backend_pid()`)).rows[0],
  );
  await other.query('DELETE FROM asset_positions WHERE asset_id = $1', [assetId]);
  await other.query('DELETE FROM assets WHERE id = $1', [assetId]);
  await other.query('SELECT pg_advisory_unlock($1, hashtext($2))', [ASSET_LOCK_SPACE, assetId]);
  const r = await waiting;
  assert.ok(r.status >= 400, `refused: ${r.status}`);
  // The asset went away: the same 404 as for an asset that never was, naming the field.
  assert.equal(r.status, 404, r.raw);
  assert.equal(r.body.field, '/assetId');
  const { rows } = await other.query(
    `SELECT count(*)::int AS n FROM locations WHERE asset_id = $1
     UNION ALL SELECT count(*)::int FROM pg_stat_activity WHERE state LIKE 'idle in transaction%' AND datname = current_database()
     UNION ALL SELECT count(*)::int FROM pg_locks
      WHERE locktype = 'advisory' AND classid::bigint = $2 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
    [assetId, ASSET_LOCK_SPACE],
  );
  assert.deepEqual(
    rows.map((x) => x.n),
    [0, 0, 0],
    'nothing stored, no session idle in a transaction, no asset lock left held',
  );
});
