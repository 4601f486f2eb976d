// @test-lanes kafka
// Retention of the event log on Kafka (EVENT_LOG=kafka, API guide 17, "Retention"): the
// integrations' positions follow the relay, so they say what was published, not what the consumer
// group handed over. A group that lags across a retention pass must find every event it has not
// handed over still in the event log: an event it parks (its integration disabled) is read back
// from the log's row by the retry queue. Messages Kafka deleted before the group read them (its
// committed offset below the partition's earliest; made at once with DeleteRecords, as the topic's
// retention would) are reported in /metrics and in integration health, and their rows kept. Kafka
// lane only (scripts/test.mjs).
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { clientOptions, groupOffsets, kafkaLib } from '../src/eventlog/kafka.js';
import { EventLogRelay } from '../src/eventlog/relay.js';
import { fleet, ok, startApp, type TestApp, waitFor } from './helpers.js';
import { Receiver } from './receiver.js';

const env = {
  PUSH_ALLOW_HTTP: 'true',
  PUSH_ALLOWED_NETWORKS: '127.0.0.0/8',
  DELIVERY_POLL_MS: '100',
  RATE_LIMIT_MAX: '100000',
  RETENTION_GRACE_SECONDS: '0',
  RETENTION_CHECK_SECONDS: '604800',
};
const DAY = 86_400_000;
const rx = await new Receiver().start();
after(() => rx.close());

/** The ids of the locations the receiver got on `path` (each at least once). */
const delivered = (path: string) => new Set(rx.for(path).map((r) => String(JSON.parse(r.body).id)));

test('a consumer group lagging across a retention pass loses nothing: every event is delivered, parked ones too', async () => {
  const ta: TestApp = await startApp(undefined, env);
  const { db, cfg } = ta.app.services;
  rx.on('/lag', () => ({ status: 200 }));
  const f = await fleet(ta, 'lagging', { channel: 'webhook', destination: `${rx.url}/lag` });
  const before = await f.store(3);
  await rx.waitFor(() => before.every((id) => delivered('/lag').has(id)), 90_000, 'the first events delivered');

  // The delivery side stops (the group lags); a relay alone goes on publishing, and the
  // integration's position follows it as it does in the service.
  await ta.app.services.engine!.stop();
  const relay = new EventLogRelay(db, cfg, 50, ta.app.log);
  relay.start();
  let lagging: string[] = [];
  try {
    lagging = await f.store(5);
    await waitFor(
      () => 'the relay to publish the events and the position to follow it',
      async () =>
        relay.published >= lagging.length &&
        (
          await db.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM event_log o, integration_state s
              WHERE s.integration_id = $1 AND (o.tx_id, o.id) > (s.log_tx, s.log_id)`,
            [f.integrationId],
          )
        ).rows[0]!.n === 0,
    );
  } finally {
    await relay.stop();
  }

  // Retention runs as the service runs it, on a clock moved past every result's retention.
  const logParts = async () =>
    (
      await db.query<{ name: string }>(
        "SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'event_log'::regclass ORDER BY 1",
      )
    ).rows.map((r) => r.name);
  const partsBefore = await logParts();
  // The partitions holding events: an empty one made ahead of time may go on a clock moved 90 days on.
  const holding = (await db.query<{ name: string }>('SELECT DISTINCT tableoid::regclass::text AS name FROM event_log')).rows.map(
    (r) => r.name,
  );
  const result = await ta.app.services.storage.runRetention(Date.now() + 90 * DAY);
  const kept = (await db.query<{ id: string }>('SELECT id::text FROM event_log WHERE object_id = ANY($1::text[])', [lagging])).rows.map(
    (r) => r.id,
  );
  const dropped = result?.dropped.filter((p) => holding.includes(p)) ?? [];

  // The integration is disabled before the group goes on: its events are parked (read back from
  // the event log), then sent once it is enabled again.
  ok(await ta.call('PATCH', `/api/v1/integrations/${f.integrationId}`, { token: ta.adminToken, body: { enabled: false } }), 200);
  const tb = await startApp(undefined, env, { databaseUrl: ta.databaseUrl! });
  await waitFor(
    () => 'the lagging events parked',
    async () =>
      (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM deliveries WHERE integration_id = $1', [f.integrationId])).rows[0]!
        .n >= lagging.length || undefined,
    60_000,
  ).catch(() => undefined); // on the old code nothing is parked: the delivery check below says what went missing
  ok(await tb.call('PATCH', `/api/v1/integrations/${f.integrationId}`, { token: tb.adminToken, body: { enabled: true } }), 200);
  await rx
    .waitFor(() => [...before, ...lagging].every((id) => delivered('/lag').has(id)), 90_000, 'every event delivered')
    .catch(() => undefined);
  const got = delivered('/lag');
  assert.deepEqual(
    { keptByRetention: kept.length, partsBefore, missing: [...before, ...lagging].filter((id) => !got.has(id)), dropped },
    { keptByRetention: lagging.length, partsBefore, missing: [], dropped: [] },
    'the events the group had not handed over are kept, and every event stored is delivered at least once',
  );
  // Each as it was stored (the test stored latitudes 0, 1, 2, ... in order).
  const latitude = new Map([...before.map((id, i) => [id, i] as const), ...lagging.map((id, i) => [id, i] as const)]);
  for (const r of rx.for('/lag')) {
    const body = JSON.parse(r.body);
    assert.equal(body.latitude, latitude.get(String(body.id)), `location ${body.id} as stored`);
  }
});

test('messages Kafka deleted before the group read them are reported in /metrics and integration health, their rows kept, the offsets never reset', async () => {
  const ta: TestApp = await startApp(undefined, env);
  const { db, cfg } = ta.app.services;
  rx.on('/lost', () => ({ status: 200 }));
  const f = await fleet(ta, 'lost', { channel: 'webhook', destination: `${rx.url}/lost` });
  const before = await f.store(2);
  await rx.waitFor(() => before.every((id) => delivered('/lost').has(id)), 90_000, 'the first events delivered');
  const lostGauge = async () => {
    const m = /^event_log_consumer_offsets_lost (-?\d+)$/m.exec((await ta.call('GET', '/metrics')).raw);
    return m ? Number(m[1]) : undefined;
  };
  assert.equal(await lostGauge(), 0);

  // The group stops; the relay publishes; Kafka deletes every message up to each partition's end
  // (as the topic's retention would), so the group's committed offsets fall below the earliest.
  await ta.app.services.engine!.stop();
  const relay = new EventLogRelay(db, cfg, 50, ta.app.log);
  relay.start();
  let lagging: string[] = [];
  try {
    lagging = await f.store(4);
    await waitFor(
      () => 'the relay to publish the events',
      async () => relay.published >= lagging.length,
    );
  } finally {
    await relay.stop();
  }
  const parts = await groupOffsets(cfg);
  const { Admin } = await kafkaLib();
  const admin = new Admin(clientOptions(cfg, 'test-delete-records'));
  try {
    await admin.deleteRecords({
      topics: [{ name: cfg.EVENT_LOG_TOPIC, partitions: parts.map((p) => ({ partition: p.partition, offset: p.latest })) }],
    });
  } finally {
    await admin.close();
  }
  const behind = parts.filter((p) => (p.committed ?? 0n) < p.latest).length;
  assert.ok(behind >= 1, 'the group is behind on a partition');
  assert.equal(await lostGauge(), behind, 'each partition whose unread messages were deleted counts');

  // Retention keeps their rows: the events are still in the event log for an operator to act on.
  const result = await ta.app.services.storage.runRetention(Date.now() + 90 * DAY);
  const kept = await db.query('SELECT 1 FROM event_log WHERE object_id = ANY($1::text[])', [lagging]);
  assert.equal(kept.rows.length, lagging.length, JSON.stringify(result));
  // Reporting it moved no offset of the group.
  const again = await groupOffsets(cfg);
  assert.deepEqual(
    again.map((p) => p.committed),
    parts.map((p) => p.committed),
  );

  // Integration health (API guide 9): the delivery sweep finds the lost partitions and makes the
  // integration failing, saying which; it stays so until an operator moves the group's offsets
  // (here to the earliest, as `kafka-consumer-groups --reset-offsets --to-earliest` would).
  const lost = again.filter((p) => (p.committed ?? 0n) < p.earliest).map((p) => p.partition);
  assert.equal(lost.length, behind);
  const integration = async () => ok(await ta.call('GET', `/api/v1/integrations/${f.integrationId}`, { token: ta.adminToken }), 200);
  assert.equal((await integration()).health, 'ok');
  await ta.app.services.engine!.sweep();
  const failing = await integration();
  assert.equal(failing.health, 'failing', JSON.stringify(failing.healthLog));
  assert.equal(failing.healthLog[0].status, 'failing');
  assert.match(failing.healthLog[0].detail, /lost messages Kafka deleted before they were read \(partitions? [\d, ]+\)/);
  for (const p of lost) assert.match(failing.healthLog[0].detail, new RegExp(`\\b${p}\\b`));
  await ta.app.services.engine!.sweep(); // recorded once
  assert.equal((await integration()).healthLog.length, failing.healthLog.length);
  const operator = new Admin(clientOptions(cfg, 'test-reset-offsets'));
  try {
    await operator.alterConsumerGroupOffsets({
      groupId: cfg.EVENT_LOG_GROUP,
      topics: [{ name: cfg.EVENT_LOG_TOPIC, partitionOffsets: again.map((p) => ({ partition: p.partition, offset: p.earliest })) }],
    });
  } finally {
    await operator.close();
  }
  assert.equal(await lostGauge(), 0);
  await ta.app.services.engine!.sweep();
  const recovered = await integration();
  assert.equal(recovered.health, 'ok', JSON.stringify(recovered.healthLog));
  assert.deepEqual(
    recovered.healthLog.slice(0, 2).map((h: { status: string }) => h.status),
    ['recovered', 'failing'],
  );
});
