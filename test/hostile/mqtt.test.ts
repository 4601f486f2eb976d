// The hostile-tenant suite, MQTT ingest's way in: tenant A's device publishes, at QoS 1 on its own
// topic, the largest message the service takes (INGEST_MQTT_MAX_MESSAGE_BYTES), one just past it
// and one of 57 MiB (the probe that ran the service out of its heap, for ever: the broker handed it
// back on every restart), then a burst at the bytes-in-flight budget, while tenant B is timed.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import mqtt from 'mqtt';
import { LANE_PORT_OFFSET, mosquittoBroker, payloadOf } from '../brokers.js';
import { TEST_DB, waitFor } from '../helpers.js';
import { hostileService, whileBWorks } from './tenants.js';

// This file's broker: 18960-18963 (PGlite lane: +1000).
const mq = await mosquittoBroker(`hostile-mqtt-${TEST_DB}`, 18960 + LANE_PORT_OFFSET, { maxInflight: 1000, maxQueued: 1_000_000 });
after(() => mq.stop());
const MiB = 1024 * 1024;
const MAX_MESSAGE = 512 * 1024; // INGEST_MQTT_MAX_MESSAGE_BYTES's default
const h = await hostileService({ INGEST_MQTT_URL: `mqtt://127.0.0.1:${mq.port}`, DEVICE_RATE_LIMIT_MAX: '1000000' });
const a = await h.tenant('tenant-a');
const b = await h.tenant('tenant-b');
await waitFor(
  () => 'MQTT ingest subscribed',
  async () => (await h.metric('ingest_mqtt_connected')) === 1,
);

const payload = (tag: string, n: number, bytes: number) => payloadOf('hostile', tag, n, bytes);

/** A's OEM records by tag, page after page (a page of such records ends at pageBytes, API guide 5). */
const storedTags = async () => {
  const tags: Record<string, number> = {};
  let url: string | undefined = `/api/v1/oem-data?limit=1000&assetId=${a.assetIds[0]}`;
  while (url) {
    const r = await h.call('GET', url, { key: a.key });
    assert.equal(r.status, 200, r.text.slice(0, 300));
    for (const x of r.body as { data: { tag: string } }[]) tags[x.data.tag] = (tags[x.data.tag] ?? 0) + 1;
    const next = /<([^>]+)>;\s*rel="next"/.exec(r.headers.get('link') ?? '')?.[1];
    url = next ? new URL(next).pathname + new URL(next).search : undefined;
  }
  return tags;
};
const stored = async (tag: string) => (await storedTags())[tag] ?? 0;
/** Whether the newest of A's records (the last message is stored last) include one of `tag`. */
const storedLast = async (tag: string) => {
  const r = await h.call('GET', `/api/v1/oem-data?limit=5&order=desc&assetId=${a.assetIds[0]}`, { key: a.key });
  return (r.body as { data: { tag: string } }[]).some((x) => x.data.tag === tag);
};

test('the largest MQTT message, one past it, one of 57 MiB and a burst at the byte budget: the service stays up, B is not held', async () => {
  const device = await h.api('POST', '/devices', { assetId: a.assetIds[0], protocol: 'mqtt' });
  assert.equal(device.status, 201);
  const topic = `devices/${device.body.uniqueId}/oemdata`;
  const pub = await mqtt.connectAsync(`mqtt://127.0.0.1:${mq.port}`, { protocolVersion: 5, clean: true, reconnectPeriod: 0 });
  after(() => pub.endAsync());
  // Built before B is timed: what the test process does is not the service's doing.
  const messages = [
    payload('huge', 1000, 57 * MiB),
    payload('over', 50, MAX_MESSAGE + 1),
    payload('at', 50, MAX_MESSAGE),
    ...Array.from({ length: 30 }, (_, i) => payload(`burst-${i % 3}`, 20, MAX_MESSAGE - 1000)),
    payload('after', 1, 1000),
  ].map((m) => Buffer.from(m));
  const seen = await whileBWorks(h, b, async () => {
    for (const m of messages) await pub.publishAsync(topic, m, { qos: 1 });
    await waitFor(
      () => 'the message after the others stored',
      () => storedLast('after'),
      60_000,
    ).catch(async (e) => {
      const tags = await storedTags();
      const errors = await h.api('GET', '/ingest/errors?limit=20');
      throw new Error(`${(e as Error).message}; stored ${JSON.stringify(tags)}; errors ${JSON.stringify(errors.body).slice(0, 2000)}`);
    });
  });
  console.log(`largest MQTT messages: ${JSON.stringify(seen)}`);
  assert.equal(await stored('after'), 1, 'the message after the others is stored');
  assert.equal(await stored('at'), 50, 'the message at the limit is stored');
  assert.equal(await stored('over'), 0, 'past the limit: refused');
  assert.equal(await stored('huge'), 0, 'the 57 MiB message: dropped');
});
