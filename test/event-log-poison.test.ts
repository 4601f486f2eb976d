// @test-lanes kafka
// Poison on the event log's topic (EVENT_LOG=kafka; API guide 4, "Poison"): a message that is no
// event the relay publishes (a payload that is not JSON, headers the database would refuse, no
// headers at all) is set aside by the delivery processes' consumer, logged and counted in /metrics
// (poison_total{consumer="eventlog"}), its offset committed; every event after it is delivered. Runs
// in the kafka lane only (scripts/test.mjs).
import crypto from 'node:crypto';
import { after, test } from 'node:test';
import { clientOptions, ensureTopic, kafkaLib } from '../src/eventlog/kafka.js';
import { deliveryHistory, fleet, startApp, type TestApp, waitFor } from './helpers.js';
import { Receiver } from './receiver.js';

const ta: TestApp = await startApp(undefined, {
  PUSH_ALLOW_HTTP: 'true',
  PUSH_ALLOWED_NETWORKS: '127.0.0.0/8',
  DELIVERY_POLL_MS: '100',
  RATE_LIMIT_MAX: '100000',
});
const rx = await new Receiver().start();
after(() => rx.close());
const { reached } = deliveryHistory(() => ta);

/** poison_total{consumer, reason} as /metrics shows it (0 while absent). */
async function poisonCount(consumer: string, reason: string): Promise<number> {
  const text = (await ta.call('GET', '/metrics')).raw;
  const m = new RegExp(`^poison_total\\{consumer="${consumer}",reason="${reason}"\\} (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

test('messages on the event log that are no events are set aside and counted; the events after them are delivered', async () => {
  rx.on('/healthy', () => ({ status: 200 }));
  const healthy = await fleet(ta, 'eventlog-poison', { channel: 'webhook', destination: `${rx.url}/healthy` });
  const cfg = ta.app.services.cfg;
  const { Producer, ProduceAcks, stringSerializers } = await kafkaLib();
  await ensureTopic(cfg);
  const producer = new Producer<string, string, string, string>({
    ...clientOptions(cfg, 'test-poison'),
    serializers: stringSerializers,
    acks: ProduceAcks.ALL,
  });
  // Headers as the relay sends them, for an event the healthy integration covers.
  const headers = (h: Record<string, string> = {}) => ({
    id: '9000000000000',
    tx: '9000000000000',
    'event-id': crypto.randomUUID(),
    type: 'location',
    'object-id': '1',
    'owner-path': `{${healthy.ownerId}}`,
    at: new Date().toISOString(),
    ...h,
  });
  try {
    await producer.send({
      messages: [
        // Each key on a partition of its own, most likely: every partition meets poison.
        ...['a', 'b', 'c', 'd'].map((key) => ({ topic: cfg.EVENT_LOG_TOPIC, key, value: 'not json {', headers: headers() })),
        // Before, a tx that is no number threw out of the consumer's loop (an unhandled rejection: the process exited).
        { topic: cfg.EVENT_LOG_TOPIC, key: 'e', value: '{}', headers: headers({ tx: 'garbage' }) },
        { topic: cfg.EVENT_LOG_TOPIC, key: 'f', value: '{}', headers: {} },
      ],
    });
  } finally {
    await producer.close();
  }
  await waitFor(
    () => 'the poison counted',
    async () =>
      (await poisonCount('eventlog', 'bad-payload')) >= 4 &&
      (await poisonCount('eventlog', 'bad-headers')) >= 1 &&
      (await poisonCount('eventlog', 'missing-headers')) >= 1,
  );
  // The events stored after them are delivered (their partitions' offsets went on past the poison).
  await healthy.store(8);
  await reached(healthy.integrationId, 8, 'SUCCEEDED');
});
