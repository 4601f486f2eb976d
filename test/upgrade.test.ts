// @test-lanes postgres
// Upgrading a database made before time partitioning (migrations 0001-0012) in place: its tables
// become the first partitions without a copy and without an exclusive lock held for a second, and
// nothing stored is lost or delivered twice: a retrying delivery, a failed one (redeliverable),
// unread events of a live integration and of a paused one, an open alert state.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { test } from 'node:test';

import { createPostgres } from '../src/db/db.js';
import { migrate } from '../src/db/migrate.js';
import { atEnd, connectPg, createTestDatabase, customer, ok, startApp, waitFor } from './helpers.js';
import { Receiver } from './receiver.js';

// Small pools: this file runs beside others on the shared server (max_connections 100).
const LOCAL = { PUSH_ALLOW_HTTP: 'true', PUSH_ALLOWED_NETWORKS: '127.0.0.0/8', RATE_LIMIT_MAX: '100000', DB_POOL_SIZE: '4' };
const ROWS = 1_000_000;

test('a database of the unpartitioned layout upgrades in place: no copy, no long lock, nothing lost or sent twice', async () => {
  const rx = await new Receiver().start();
  atEnd(() => rx.close());
  rx.on('/live', () => ({ status: 200 }));
  rx.on('/paused', () => ({ status: 200 }));

  // Integrations and a specification as the service writes them (their tables do not change):
  // made by today's service on a scratch database, copied into the old one.
  const scratch = await startApp(undefined, LOCAL);
  const sc = await customer(scratch, 'scratch');
  const scratchAsset = await sc.asset('reefer');
  const mk = async (name: string, path: string, enabled: boolean) =>
    ok(
      await scratch.call('POST', '/api/v1/integrations', {
        token: scratch.adminToken,
        body: {
          name,
          ownerIds: [sc.ownerId],
          objectTypes: ['location'],
          channel: 'webhook',
          destination: `${rx.url}${path}`,
          enabled,
          webhook: { mode: 'single' },
        },
      }),
      201,
    ).id as string;
  const liveId = await mk('live', '/live', true);
  const pausedId = await mk('paused', '/paused', false);
  await scratch.app.close();
  const sdb = await connectPg(scratch.databaseUrl!);
  atEnd(() => sdb.end());
  const integrations = (await sdb.query('SELECT * FROM integrations WHERE id = ANY($1::uuid[])', [[liveId, pausedId]])).rows;

  // The old database: migrations 0001-0012, and data.
  const url = await createTestDatabase({ empty: true });
  const old = createPostgres(url, 2);
  assert.deepEqual((await migrate(old, { upTo: 12 })).length, 12);
  await old.close();
  const c = await connectPg(url);
  atEnd(() => c.end());
  const owner = sc.ownerId;
  await c.query(`INSERT INTO owners (id, name) VALUES ($1, 'scratch-owner')`, [owner]);
  await c.query(`INSERT INTO assets (id, owner_id, name) VALUES ($1, $2, 'reefer')`, [scratchAsset, owner]);
  await c.query(
    `INSERT INTO locations (asset_id, owner_id, latitude, longitude, when_created)
     SELECT $1, $2, g % 90, g % 180, now() - make_interval(secs => g) FROM generate_series(1, ${ROWS}) g`,
    [scratchAsset, owner],
  );
  await c.query(
    `INSERT INTO sensor_data (asset_id, owner_id, sensor_id, type, value_number, when_created)
     SELECT $1, $2, 's', 'TEMPERATURE', g, now() - make_interval(secs => g) FROM generate_series(1, 1000) g`,
    [scratchAsset, owner],
  );
  await c.query(
    `INSERT INTO events (owner_id, asset_id, subject, severity, current_data) SELECT $2, $1, 'e' || g, 'INFO', '{}' FROM generate_series(1, 100) g`,
    [scratchAsset, owner],
  );
  // Twelve events in the log, the newest locations'.
  await c.query(
    `INSERT INTO event_log (object_type, object_id, owner_id, owner_path, payload)
     SELECT 'location', id::text, owner_id, ARRAY[owner_id], jsonb_build_object('id', id, 'assetId', asset_id)
       FROM (SELECT * FROM locations ORDER BY id DESC LIMIT 12) l ORDER BY id`,
  );
  for (const i of integrations) {
    await c.query(
      `INSERT INTO integrations (id, name, channel, enabled, owner_ids, object_types, destination, destinations, retry, settings, secrets, max_backlog_hours)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
      [
        i.id,
        i.name,
        i.channel,
        i.enabled,
        i.owner_ids,
        i.object_types,
        i.destination,
        i.destinations,
        i.retry,
        i.settings,
        i.secrets,
        i.max_backlog_hours,
      ],
    );
  }
  const log = (await c.query<{ id: string; tx_id: string; event_id: string }>('SELECT id, tx_id, event_id FROM event_log ORDER BY id'))
    .rows;
  // The live integration has read the first two: the first waits for a retry, the second failed.
  await c.query(`INSERT INTO integration_state (integration_id, log_tx, log_id) VALUES ($1, $2, $3), ($4, 0, 0)`, [
    liveId,
    log[1]!.tx_id,
    log[1]!.id,
    pausedId,
  ]);
  await c.query(
    `INSERT INTO deliveries (integration_id, log_id, event_id, object_type, object_id, status, attempts, next_attempt_at, when_created, completed_at, last_error)
     SELECT $1, o.id, o.event_id, 'location', o.object_id, s.status, 1, now(), o.when_created, s.done, 'HTTP 503'
       FROM event_log o JOIN (VALUES ($2::int8, 'PENDING', NULL::timestamptz), ($3::int8, 'FAILED', now())) AS s(id, status, done) ON s.id = o.id`,
    [liveId, log[0]!.id, log[1]!.id],
  );
  const spec = crypto.randomUUID();
  const alertState = { '0': { since: '2026-11-25T00:00:00Z', value: 12.5, next: '2026-11-25T01:00:00Z' } };
  await c.query(
    `INSERT INTO specifications (id, asset_id, type, name, who_created, alert_state, next_due) VALUES ($1, $2, 'REEFER', 'cold', 'test', $3, now() + interval '1 day')`,
    [spec, scratchAsset, JSON.stringify(alertState)],
  );
  const counts = async () => {
    const out: Record<string, number> = {};
    for (const t of ['locations', 'sensor_data', 'events', 'event_log', 'deliveries', 'specifications']) {
      out[t] = Number((await c.query(`SELECT count(*) AS n FROM ${t}`)).rows[0].n);
    }
    return out;
  };
  const before = await counts();
  const maxId = (await c.query('SELECT max(id)::text AS m FROM locations')).rows[0].m as string;

  // A writer and a reader that never wait more than a second for a lock while the upgrade runs.
  const probe = await connectPg(url);
  atEnd(() => probe.end());
  await probe.query("SET lock_timeout = '1s'");
  let upgrading = true;
  let probes = 0;
  let probeError: unknown = null;
  const probing = (async () => {
    while (upgrading && !probeError) {
      try {
        await probe.query(`INSERT INTO locations (asset_id, owner_id, latitude, longitude, when_created) VALUES ($1, $2, 1, 1, now())`, [
          scratchAsset,
          owner,
        ]);
        await probe.query('SELECT id FROM locations WHERE asset_id = $1 ORDER BY when_created DESC LIMIT 1', [scratchAsset]);
        probes++;
      } catch (e) {
        probeError = e;
      }
    }
  })();

  const started = Date.now();
  const ta = await startApp(undefined, LOCAL, { databaseUrl: url });
  const took = Date.now() - started;
  upgrading = false;
  await probing;
  assert.equal(probeError, null, `a probe waited for a lock: ${probeError}`);
  assert.ok(probes > 0);

  // Partitioned, the old table attached as the first partition, ids and rows as they were.
  const after = await counts();
  assert.deepEqual({ ...after, locations: after.locations! - probes }, before);
  const kinds = (
    await c.query(
      `SELECT relname, relkind::text AS k FROM pg_class WHERE relname IN ('locations', 'sensor_data', 'reefer_data', 'genset_data', 'oem_data', 'events', 'notifications', 'event_log', 'delivery_attempts')`,
    )
  ).rows;
  assert.equal(kinds.length, 9);
  assert.ok(
    kinds.every((k) => k.k === 'p'),
    JSON.stringify(kinds),
  );
  // The rows stored before are summed into hourly rollups (migration 0021), the same as the store keeps them.
  const rolled = (
    await c.query(`SELECT type, sum(count)::int AS n, sum((SELECT sum((v ->> 0)::int) FROM jsonb_each(stats) e(k, v)))::int AS values
                     FROM rollups GROUP BY type ORDER BY type`)
  ).rows;
  assert.deepEqual(rolled[1], { type: 'sensordata', n: 1000, values: 1000 });
  assert.equal(rolled[0].type, 'location');
  assert.ok(
    rolled[0].n >= ROWS && rolled[0].n <= ROWS + probes,
    `${rolled[0].n} locations summed: the seeded ones, and probes stored meanwhile`,
  );
  const parts = (await c.query(`SELECT pg_get_expr(c.relpartbound, c.oid) AS b FROM pg_class c WHERE relname = 'locations_legacy'`)).rows;
  assert.match(parts[0].b, /FROM \(MINVALUE\) TO/);
  assert.equal((await c.query('SELECT max(id)::text AS m FROM locations_legacy')).rows[0].m !== null, true);
  const fresh = ok(
    await ta.call('POST', '/api/v1/locations', { token: ta.adminToken, body: { assetId: scratchAsset, latitude: 1, longitude: 1 } }),
    201,
  );
  assert.ok(BigInt(fresh.id) > BigInt(maxId), 'new ids continue the old sequence');
  const spec2 = (await c.query('SELECT alert_state, next_due FROM specifications WHERE id = $1', [spec])).rows[0];
  assert.deepEqual(spec2.alert_state, alertState, 'the open alert state is kept');

  // Delivery goes on: the retry and the ten unread events, each once; the failed one waits for a
  // redelivery; the paused integration sends nothing until resumed, then its twelve.
  const ids = (path: string) => rx.for(path).map((r) => r.headers['webhook-id']);
  // (And the location stored above, after the upgrade.)
  const freshEvent = (await c.query('SELECT event_id FROM event_log WHERE object_id = $1', [String(fresh.id)])).rows[0].event_id as string;
  const all = new Set([...log.map((l) => l.event_id), freshEvent]);
  await rx.waitFor(() => rx.for('/live').length >= 12, 120_000, 'the live integration catching up');
  ok(await ta.call('POST', `/api/v1/integrations/${liveId}/deliveries/${log[1]!.id}/redeliver`, { token: ta.adminToken }), 202);
  await rx.waitFor(() => rx.for('/live').length >= 13, 120_000, 'the redelivery');
  assert.equal(rx.for('/paused').length, 0);
  ok(await ta.call('PATCH', `/api/v1/integrations/${pausedId}`, { token: ta.adminToken, body: { enabled: true } }), 200);
  await rx.waitFor(() => rx.for('/paused').length >= 13, 120_000, 'the paused integration, resumed');
  // Nothing more arrives: every event once.
  await waitFor(
    () => 'no pending delivery',
    async () => (await c.query(`SELECT NOT EXISTS (SELECT 1 FROM deliveries WHERE status = 'PENDING') AS done`)).rows[0].done,
  );
  const live = ids('/live');
  assert.equal(live.length, 13, `live: ${live.length}`);
  assert.deepEqual(new Set(live), all, 'each event once');
  assert.equal(ids('/paused').length, 13);
  assert.deepEqual(new Set(ids('/paused')), all);
  // How long the upgrade took is reported, not asserted: the design promises no exclusive lock held
  // (the probe above) and no delivery lost or sent twice, not a duration on a busy machine.
  console.log(`upgrade: ${took} ms`);
});
