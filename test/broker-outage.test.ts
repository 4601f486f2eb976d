// Broker outages, on PostgreSQL (the crash guarantees need it: API guide 10): MQTT at QoS 1
// and 2, Kafka at acks 1 and all. Records flow through a child-process service into the test's own
// broker; the broker is stopped while they flow, the service is SIGKILLed and restarted while the
// broker is down, records keep coming, and the broker is started again. Then every event id stored
// has arrived at an independent consumer (a persistent MQTT session; kcat reading the topic), and
// the duplicates are counted and printed.
// @test-lanes postgres kafka
// (a SIGKILL and restart against one database: PostgreSQL only, API guide 10)
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import mqtt from 'mqtt';
import { kafkaBroker, kcatConsume, LANE_PORT_OFFSET, mosquittoBroker, TEST_LANE } from './brokers.js';
import { createTestDatabase, TEST_DB, undelivered, waitFor, connectPg } from './helpers.js';
import { serviceProcess } from './service-process.js';

const MQTT_PORT_BASE = 18870 + LANE_PORT_OFFSET; // 18870-18873 (the kafka lane's 20870-20873)
const KAFKA_PORT_BASE = 19192 + LANE_PORT_OFFSET; // 19192-19197 (the kafka lane's 21192-21197)
const POSTS = 24;
const POST_SIZE = 50;
const BROKER_DOWN_AT = 8;
const SERVICE_KILLED_AT = 12;
const BROKER_UP_AT = 16;

type Case = { channel: 'mqtt'; qos: 1 | 2 } | { channel: 'kafka'; acks: 1 | 'all' };
const CASES: Case[] = [
  { channel: 'mqtt', qos: 1 },
  { channel: 'mqtt', qos: 2 },
  { channel: 'kafka', acks: 1 },
  { channel: 'kafka', acks: 'all' },
];

if (TEST_DB === 'postgres') {
  for (const c of CASES) {
    const label = c.channel === 'mqtt' ? `MQTT QoS ${c.qos}` : `Kafka acks=${c.acks}`;
    test(`${label}: the broker stops while records flow and the service is SIGKILLed meanwhile; every event arrives`, {
      timeout: 400_000,
    }, async () => {
      const stamp = Date.now();
      const topicPrefix = c.channel === 'mqtt' ? `outage/${stamp}` : `outage-${stamp}`;
      const arrived = new Map<string, number>(); // event id -> arrivals
      let broker: { start(): Promise<void>; stop(): Promise<void> };
      let settings: Record<string, unknown>;
      let collect: (expected: number) => Promise<void>;
      let sub: mqtt.MqttClient | undefined;

      if (c.channel === 'mqtt') {
        const mq = await mosquittoBroker(`outage-mqtt-${TEST_LANE}`, MQTT_PORT_BASE, { persistence: true });
        await mq.start();
        broker = mq;
        // The consumer: a persistent session (clean start off, an hour's expiry), so what the broker
        // accepted while the consumer was away is kept for it, across the broker's restart too.
        sub = await mqtt.connectAsync(`mqtt://127.0.0.1:${mq.port}`, {
          clientId: `outage-consumer-${stamp}`,
          clean: false,
          protocolVersion: 5,
          properties: { sessionExpiryInterval: 3600 },
          reconnectPeriod: 300,
        });
        const s = sub;
        s.on('message', (_t, payload) => {
          const id = JSON.parse(payload.toString()).eventId as string;
          arrived.set(id, (arrived.get(id) ?? 0) + 1);
        });
        await s.subscribeAsync(`${topicPrefix}/#`, { qos: 2 });
        after(async () => {
          await s.endAsync(true);
          await mq.stop();
        });
        settings = { mqtt: { url: `mqtt://127.0.0.1:${mq.port}`, qos: c.qos, setEventId: true, timeoutMs: 3000 } };
        collect = async (expected) => {
          await waitFor(
            () => `${expected} event ids at the consumer (${arrived.size} so far)`,
            async () => arrived.size >= expected,
            120_000,
          );
        };
      } else {
        const kb = await kafkaBroker(TEST_LANE === 'postgres' ? 'outage' : `outage-${TEST_LANE}`, KAFKA_PORT_BASE);
        broker = kb;
        after(() => kb.stop());
        settings = { kafka: { brokers: [kb.plaintext], acks: c.acks, timeoutMs: 3000 } };
        collect = async (expected) => {
          const records = await kcatConsume(kb.plaintext, `${topicPrefix}.events`, { minCount: expected, timeoutMs: 120_000 });
          for (const r of records) {
            const id = r.headers['event-id']!;
            arrived.set(id, (arrived.get(id) ?? 0) + 1);
          }
        };
      }

      const databaseUrl = await createTestDatabase();
      const svc = await serviceProcess(databaseUrl, {
        PUSH_ALLOWED_NETWORKS: '127.0.0.0/8',
        DELIVERY_POLL_MS: '100',
        DELIVERY_LEASE_SECONDS: '2',
      });
      after(() => svc.stop());
      const owner = (await svc.api('POST', '/owners', { name: `outage-${stamp}` })).body;
      const assets: string[] = [];
      for (let i = 0; i < 5; i++) assets.push((await svc.api('POST', '/assets', { name: `OUT${i}`, ownerId: owner.id })).body.id);
      const made = await svc.api('POST', '/integrations', {
        name: `outage-${c.channel}`,
        channel: c.channel,
        ownerIds: [owner.id],
        objectTypes: ['location'],
        destination: topicPrefix,
        retry: { scheduleSeconds: [0.5, 1, 2], maxAttempts: 10_000, deadlineHours: 1 },
        ...settings,
      });
      assert.equal(made.status, 201, JSON.stringify(made.body));

      const db = await connectPg(databaseUrl);
      after(() => db.end());
      const failedSends = async () =>
        (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM delivery_attempts WHERE NOT success')).rows[0]!.n;
      let seq = 0;
      for (let p = 0; p < POSTS; p++) {
        if (p === BROKER_DOWN_AT) await broker.stop();
        if (p === SERVICE_KILLED_AT) {
          // The outage is seen (a send failed and its result was written) before the service dies:
          // on a busy machine a send may take its whole timeout to fail.
          await waitFor(
            () => 'a failed send while the broker is down',
            async () => (await failedSends()) > 0,
            120_000,
          ).catch(async (e) => {
            // What the delivery side was doing meanwhile, for the one who reads the failure.
            const state = await db.query(
              `SELECT (SELECT json_agg(x) FROM (SELECT status, attempts, count(*)::int AS n FROM deliveries GROUP BY 1, 2) x) AS deliveries,
                      (SELECT json_agg(x) FROM (SELECT success, error, count(*)::int AS n FROM delivery_attempts GROUP BY 1, 2) x) AS attempts,
                      (SELECT count(*)::int FROM event_log WHERE object_type = 'location') AS events`,
            );
            const health = await svc.api('GET', `/integrations/${made.body.id}`);
            throw new Error(
              `${(e as Error).message}: ${JSON.stringify(state.rows[0])}; integration ${JSON.stringify(health.body).slice(0, 1500)}`,
            );
          });
          svc.kill();
          await svc.start();
        }
        if (p === BROKER_UP_AT) await broker.start();
        const items = Array.from({ length: POST_SIZE }, () => ({
          assetId: assets[seq % assets.length],
          latitude: (seq++ % 160) - 80,
          longitude: 5,
        }));
        const r = await svc.api('POST', '/locations', items);
        assert.equal(r.status, 201, JSON.stringify(r.body).slice(0, 300));
      }

      let left = -1;
      await waitFor(
        () => `the service to deliver everything (${left} left)`,
        async () => {
          left = await undelivered(db);
          return left === 0;
        },
        240_000,
      );
      const stored = (await db.query<{ event_id: string }>("SELECT event_id::text FROM event_log WHERE object_type = 'location'")).rows.map(
        (r) => r.event_id,
      );
      assert.equal(stored.length, POSTS * POST_SIZE);
      await collect(stored.length);
      const missing = stored.filter((id) => !arrived.has(id));
      const duplicates = [...arrived.values()].reduce((s, x) => s + x - 1, 0);
      const attempts = await db.query<{ failed: number; ok: number }>(
        'SELECT count(*) FILTER (WHERE NOT success)::int AS failed, count(*) FILTER (WHERE success)::int AS ok FROM delivery_attempts',
      );
      console.log(
        `${label}: ${stored.length} stored, ${arrived.size} arrived, ${missing.length} missing, ${duplicates} duplicates; ` +
          `requests: ${attempts.rows[0]!.ok} succeeded, ${attempts.rows[0]!.failed} failed`,
      );
      assert.deepEqual(missing, [], 'every stored event arrived');
      assert.ok(attempts.rows[0]!.failed > 0, 'the outage was seen: some sends failed and were retried');
      for (const id of arrived.keys()) assert.ok(stored.includes(id), `only stored events arrive (${id})`);
    });
  }
}
