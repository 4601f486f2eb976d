// @test-lanes postgres pglite kafka
// The MQTT channel (API guide 9) against a real Mosquitto of the test's
// own (test/brokers.ts): each QoS with what the broker acknowledged (read from the broker's own
// log), one topic or one per type, the event id field and the MQTT 5 user properties (seen by
// mosquitto_sub, an independent client), each auth method of API guide 9 (anonymous, password over
// TLS, a customer CA, a client certificate) with a wrong password or a missing certificate failing
// clearly and the delivery kept for retry, the broker's Receive Maximum respected, and the settings'
// bad input refused with 400.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { LANE_PORT_OFFSET, mosquittoBroker, type MosquittoBroker, mosquittoSub, TEST_LANE } from './brokers.js';
import { bad, deliveryHistory, fleet, ok, ownerWithKey, startApp, streamLines, type TestApp, waitFor } from './helpers.js';

// This file's broker: 18850-18853, and one announcing Receive Maximum 10: 18860-18863 (PGlite lane: +1000).
const PORT_BASE = 18850 + LANE_PORT_OFFSET;
const RM_PORT_BASE = 18860 + LANE_PORT_OFFSET;

let ta: TestApp;
let mq: MosquittoBroker;
before(async () => {
  mq = await mosquittoBroker(`mqtt-test-${TEST_LANE}`, PORT_BASE, { debugLog: true });
  await mq.start();
  ta = await startApp(undefined, { PUSH_ALLOWED_NETWORKS: '127.0.0.0/8', DELIVERY_POLL_MS: '100', RATE_LIMIT_MAX: '100000' });
});
after(async () => {
  await mq?.stop();
});

let n = 0;
/** An owner with one asset and an MQTT integration for its locations, to a topic prefix of its own. */
async function mqttFleet(mqtt: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  const prefix = `t${Date.now()}-${++n}`;
  const f = await fleet(ta, `mqtt-${n}`, {
    channel: 'mqtt',
    destination: prefix,
    retry: { scheduleSeconds: [0.3], maxAttempts: 1000 },
    mqtt: { url: `mqtt://127.0.0.1:${mq.port}`, clientId: `ats-test-${n}-${Date.now()}`, ...mqtt },
    ...extra,
  });
  return { ...f, prefix };
}

const { allSucceeded, firstAttempted, reached } = deliveryHistory(() => ta);

/** What the broker logged about a client: how many of each acknowledgement it sent or received. */
function ackCounts(clientId: string) {
  const log = fs.readFileSync(path.join(mq.dir, 'mosquitto.log'), 'utf8');
  const count = (re: RegExp) => log.split('\n').filter((l) => l.includes(clientId) && re.test(l)).length;
  return {
    publish: count(/Received PUBLISH from/),
    puback: count(/Sending PUBACK to/),
    pubrec: count(/Sending PUBREC to/),
    pubrel: count(/Received PUBREL from/),
    pubcomp: count(/Sending PUBCOMP to/),
  };
}

for (const qos of [0, 1, 2] as const) {
  test(`QoS ${qos}: every event published at QoS ${qos}, with the broker's acknowledgements, event-id and schema version as MQTT 5 user properties`, async () => {
    const f = await mqttFleet({ qos });
    const clientId = f.integration.mqtt.clientId as string;
    const sub = mosquittoSub({ port: mq.port, topic: `${f.prefix}/#`, qos: 2, v5: true });
    try {
      await sub.ready;
      const ids = await f.store(20);
      const done = await allSucceeded(f.integration.id, 20);
      await sub.waitFor(20);
      assert.deepEqual(new Set(sub.messages.map((m) => JSON.parse(m.payload).id)), new Set(ids.map(Number)));
      for (const m of sub.messages) {
        assert.equal(m.topic, `${f.prefix}/events`);
        assert.equal(m.qos, qos, 'delivered to a QoS 2 subscriber at the publish QoS');
        assert.equal(m.userPropertyMap?.['webhook-schema-version'], '1');
        assert.match(m.userPropertyMap?.['event-id'] ?? '', /^[0-9a-f-]{36}$/);
        assert.equal(JSON.parse(m.payload).eventId, undefined, 'no event id field unless asked for');
      }
      const eventIds = new Set(done.map((d) => d.eventId));
      assert.deepEqual(new Set(sub.messages.map((m) => m.userPropertyMap?.['event-id'])), eventIds);
      for (const d of done) {
        const a = d.attemptsLog.at(-1);
        assert.equal(a.success, true);
        assert.equal(a.qos, qos);
        assert.equal(a.topic, `${f.prefix}/events`);
      }
      // The broker's side of each QoS: what it received and acknowledged for this client.
      const acks = await waitFor(
        () => `the broker log of ${clientId}: ${JSON.stringify(ackCounts(clientId))}`,
        async () => {
          const c = ackCounts(clientId);
          return c.publish >= 20 && (qos !== 2 || c.pubcomp >= 20) ? c : undefined;
        },
        10_000,
      );
      assert.equal(acks.publish, 20);
      assert.deepEqual(
        [acks.puback, acks.pubrec, acks.pubrel, acks.pubcomp],
        qos === 0 ? [0, 0, 0, 0] : qos === 1 ? [20, 0, 0, 0] : [0, 20, 20, 20],
        `acknowledgements at QoS ${qos}`,
      );
    } finally {
      await sub.stop();
    }
  });
}

test('one topic per type, a per-type topic override, and the event id under a configured field name', async () => {
  const f = await mqttFleet(
    { qos: 1, topicPerType: true, setEventId: true, eventIdField: 'evt' },
    { objectTypes: ['asset', 'location', 'sensordata'], destinations: { sensordata: 'custom/sensors' } },
  );
  const sub = mosquittoSub({ port: mq.port, topic: `${f.prefix}/#`, qos: 1, v5: true });
  const custom = mosquittoSub({ port: mq.port, topic: 'custom/sensors', qos: 1, v5: true });
  try {
    await Promise.all([sub.ready, custom.ready]);
    ok(await ta.call('PATCH', `/api/v1/assets/${f.assetId}`, { token: f.key, body: { note: 'moved' } }), 200);
    await f.store(3);
    ok(
      await ta.call('POST', '/api/v1/sensor-data', {
        token: f.key,
        body: [{ assetId: f.assetId, sensorId: 's1', type: 'TEMPERATURE', value: 4.5 }],
      }),
      201,
    );
    await sub.waitFor(4);
    await custom.waitFor(1);
    const byTopic = new Map<string, number>();
    for (const m of sub.messages) byTopic.set(m.topic, (byTopic.get(m.topic) ?? 0) + 1);
    assert.deepEqual(Object.fromEntries(byTopic), { [`${f.prefix}/events/asset`]: 1, [`${f.prefix}/events/location`]: 3 });
    for (const m of [...sub.messages, ...custom.messages]) {
      const obj = JSON.parse(m.payload);
      assert.equal(obj.evt, m.userPropertyMap?.['event-id'], 'the event id at the top level under the configured name');
      assert.equal(obj.eventId, undefined);
    }
  } finally {
    await Promise.all([sub.stop(), custom.stop()]);
  }
});

test('auth: password over TLS with the customer CA, a client certificate, anonymous; a wrong password and a missing certificate fail clearly and the delivery is kept for retry', async () => {
  const tlsUrl = `mqtts://localhost:${mq.tlsPort}`;
  // Password over TLS, the broker's certificate checked against the CA the customer gave.
  const pw = await mqttFleet({ url: tlsUrl, qos: 1, username: mq.user.username, password: mq.user.password, ca: mq.ca });
  const sub = mosquittoSub({ port: mq.port, topic: '#', qos: 1 });
  try {
    await sub.ready;
    await pw.store(2);
    await allSucceeded(pw.integration.id, 2);
    assert.equal(pw.integration.mqtt.passwordSet, true);
    assert.equal(pw.integration.mqtt.password, undefined, 'write-only');

    // A client certificate (the broker requires one on this listener).
    const cert = await mqttFleet({ url: `mqtts://localhost:${mq.mtlsPort}`, qos: 1, ca: mq.ca, cert: mq.clientCert, key: mq.clientKey });
    await cert.store(2);
    await allSucceeded(cert.integration.id, 2);
    assert.equal(cert.integration.mqtt.keySet, true);

    // A wrong password: the attempt says why, the delivery stays PENDING and goes once corrected.
    const wrong = await mqttFleet({ url: tlsUrl, qos: 1, username: mq.user.username, password: 'wrong-password', ca: mq.ca });
    await wrong.store(1);
    const failed = await firstAttempted(wrong.integration.id);
    assert.equal(failed.status, 'PENDING', 'kept for retry');
    assert.match(failed.attemptsLog[0].error, /Bad username or password|Not authorized/i);
    assert.equal(failed.attemptsLog[0].success, false);
    ok(
      await ta.call('PATCH', `/api/v1/integrations/${wrong.integration.id}`, {
        token: ta.adminToken,
        body: { mqtt: { password: mq.user.password } },
      }),
      200,
    );
    await allSucceeded(wrong.integration.id, 1);

    // No client certificate where one is required.
    const nocert = await mqttFleet({ url: `mqtts://localhost:${mq.mtlsPort}`, qos: 1, ca: mq.ca });
    await nocert.store(1);
    const refused = await firstAttempted(nocert.integration.id);
    assert.equal(refused.status, 'PENDING');
    assert.match(refused.attemptsLog[0].error, /certificate|handshake|closed|alert|socket/i);

    // A CA that did not sign the broker's certificate.
    const otherCa = await mqttFleet({ url: tlsUrl, qos: 1, username: mq.user.username, password: mq.user.password, ca: mq.otherCa });
    await otherCa.store(1);
    const untrusted = await firstAttempted(otherCa.integration.id);
    assert.equal(untrusted.status, 'PENDING');
    assert.match(untrusted.attemptsLog[0].error, /certificate/i);
  } finally {
    await sub.stop();
  }
});

test("never more in flight than the broker's Receive Maximum: 600 events at QoS 2 through a broker that allows 10", async () => {
  const rm = await mosquittoBroker(`mqtt-rm-${process.env.TEST_DB ?? 'postgres'}`, RM_PORT_BASE, { maxInflight: 10 });
  await rm.start();
  try {
    const f = await mqttFleet({ url: `mqtt://127.0.0.1:${rm.port}`, qos: 2, maxInFlight: 1000, batchSize: 200 });
    const sub = mosquittoSub({ port: rm.port, topic: `${f.prefix}/#`, qos: 2 });
    try {
      await sub.ready;
      await f.store(600);
      const done = await allSucceeded(f.integration.id, 600);
      // Had the service sent more than 10 unacknowledged, Mosquitto would refuse with "Quota exceeded".
      for (const d of done) assert.equal(d.attemptsLog.length, 1, `one attempt each (${JSON.stringify(d.attemptsLog)})`);
      await sub.waitFor(600);
      assert.equal(new Set(sub.messages.map((m) => JSON.parse(m.payload).id)).size, 600);
    } finally {
      await sub.stop();
    }
  } finally {
    await rm.stop();
  }
});

test('stats, the result stream (channel=mqtt) and redelivery work as for webhooks', async () => {
  const f = await mqttFleet({ qos: 1 });
  await f.store(3);
  const done = await allSucceeded(f.integration.id, 3);
  const got = ok(await ta.call('GET', `/api/v1/integrations/${f.integration.id}`, { token: ta.adminToken }), 200);
  assert.equal(got.stats.delivered.lastHour, 3);
  const lines = await streamLines(ta, 'mqtt', f.integration.id);
  assert.equal(lines.length, 3);
  for (const l of lines) {
    assert.equal(l.channel, 'mqtt');
    assert.equal(l.qos, 1);
    assert.equal(l.topic, `${f.prefix}/events`);
  }
  const sub = mosquittoSub({ port: mq.port, topic: `${f.prefix}/#`, qos: 1 });
  try {
    await sub.ready;
    ok(await ta.call('POST', `/api/v1/integrations/${f.integration.id}/deliveries/${done[0].id}/redeliver`, { token: ta.adminToken }), 202);
    await sub.waitFor(1);
    assert.equal(JSON.parse(sub.messages[0]!.payload).id, Number(done[0].objectId));
  } finally {
    await sub.stop();
  }
});

test('bad MQTT settings: 400 naming the field, nothing saved; credentials only over TLS; write-only secrets kept only for the same broker', async () => {
  const o = await ownerWithKey(ta, `mqtt-bad-${Date.now()}`);
  const base = { name: 'bad', channel: 'mqtt', ownerIds: [o.ownerId], destination: 'acme' };
  const post = (body: Record<string, unknown>) =>
    ta.call('POST', '/api/v1/integrations', { token: ta.adminToken, body: { ...base, ...body } });
  const url = `mqtt://127.0.0.1:${mq.port}`;
  bad(await post({}), 400, '/mqtt/url', 'no mqtt settings');
  bad(await post({ mqtt: { url: 'http://127.0.0.1:1883' } }), 400, '/mqtt/url', 'scheme');
  bad(await post({ mqtt: { url: 'mqtt://user:pw@127.0.0.1:1883' } }), 400, '/mqtt/url', 'credentials in the URL');
  bad(await post({ mqtt: { url, qos: 3 } }), 400, '/mqtt/qos', 'qos');
  bad(await post({ mqtt: { url, username: 'u', password: 'p' } }), 400, '/mqtt/url', 'password without TLS');
  bad(await post({ mqtt: { url, ca: mq.ca } }), 400, '/mqtt/url', 'a CA without TLS');
  bad(
    await post({ mqtt: { url: `mqtts://localhost:${mq.mtlsPort}`, cert: mq.clientCert } }),
    400,
    '/mqtt/key',
    'a certificate without its key',
  );
  bad(await post({ mqtt: { url: `mqtts://localhost:${mq.mtlsPort}`, ca: 'not a pem' } }), 400, '/mqtt/ca', 'not a PEM');
  bad(await post({ mqtt: { url, setEventId: true, eventIdField: 'id' } }), 400, '/mqtt/eventIdField', 'a field of the object');
  bad(await post({ mqtt: { url, setEventId: true, eventIdField: '__proto__' } }), 400, '/mqtt/eventIdField', 'a prototype name');
  bad(await post({ destination: 'acme/+', mqtt: { url } }), 400, '/destination', 'a wildcard topic');
  // Characters a broker refuses at every publish are refused at save, named.
  for (const [topic, named] of [
    ['acme/\u0001x', 'U+0001'],
    ['acme/\u007Fx', 'U+007F'],
    ['acme/\u0085x', 'U+0085'],
    ['acme/\uFFFEx', 'U+FFFE'],
    ['acme/\uFDD0x', 'U+FDD0'],
    ['acme/\u{1FFFF}x', 'U+1FFFF'],
  ] as const) {
    const r = await post({ destination: topic, mqtt: { url } });
    bad(r, 400, '/destination', named);
    assert.match(r.body.message, new RegExp(named.replace('+', '\\+')));
  }
  bad(await post({ destinations: { location: 'a/\u001Fb' }, mqtt: { url } }), 400, '/destinations/location', 'a control character');
  // An event id field named while setEventId is false would be ignored: refused instead.
  bad(await post({ mqtt: { url, setEventId: false, eventIdField: 'evtId' } }), 400, '/mqtt/eventIdField', 'a field named while off');
  // IPv4-compatible IPv6 (deprecated; routes to the default gateway, not to 127.0.0.1) and site-local.
  bad(await post({ mqtt: { url: `mqtt://[::127.0.0.1]:${mq.port}` } }), 400, '/mqtt/url', 'IPv4-compatible IPv6');
  bad(await post({ mqtt: { url: 'mqtt://[fec0::1]:1883' } }), 400, '/mqtt/url', 'site-local IPv6');
  bad(await post({ destinations: { location: 'a/#' }, mqtt: { url } }), 400, '/destinations/location', 'a wildcard topic');
  bad(await post({ mqtt: { url }, webhook: { mode: 'batch' } }), 400, '/webhook', "another channel's settings");
  // The address rules of webhooks: loopback refused unless allowed.
  const strict = await startApp(undefined, {});
  bad(
    await strict.call('POST', '/api/v1/integrations', {
      token: strict.adminToken,
      body: { ...base, ownerIds: [(await ownerWithKey(strict, 'strict')).ownerId], mqtt: { url } },
    }),
    400,
    '/mqtt/url',
    'a loopback broker',
  );
  const none = ok(await ta.call('GET', `/api/v1/integrations?name=bad`, { token: ta.adminToken }), 200);
  assert.equal(none.length, 0, 'nothing saved');

  // Write-only secrets: a GET body put back keeps them; a new broker needs them again.
  const tls = `mqtts://localhost:${mq.tlsPort}`;
  const made = ok(await post({ name: 'keeps', mqtt: { url: tls, ca: mq.ca, username: 'tracker', password: 'pw' } }), 201);
  const { id, whenCreated: _w, whenUpdated: _u, ...back } = made;
  const put = ok(await ta.call('PUT', `/api/v1/integrations/${id}`, { token: ta.adminToken, body: back }), 200);
  assert.equal(put.mqtt.passwordSet, true, 'kept when put back unchanged');
  bad(
    await ta.call('PATCH', `/api/v1/integrations/${id}`, {
      token: ta.adminToken,
      body: { mqtt: { url: `mqtts://127.0.0.1:${mq.tlsPort}` } },
    }),
    400,
    '/mqtt/password',
    'a stored password does not follow a new broker',
  );
  bad(
    await ta.call('PATCH', `/api/v1/integrations/${id}`, { token: ta.adminToken, body: { channel: 'kafka' } }),
    400,
    '/channel',
    'the channel is fixed',
  );
});

test('a broker that cannot be reached: each send recorded with its error, FAILED after maxAttempts, kept for redelivery; MQTT 3.1.1 works too', async () => {
  // Next to this file's broker (18850-18853), where nothing listens.
  const f = await mqttFleet(
    { url: `mqtt://127.0.0.1:${PORT_BASE + 4}`, timeoutMs: 1000 },
    { retry: { scheduleSeconds: [0.2], maxAttempts: 2 } },
  );
  await f.store(2);
  const failed = await reached(f.integration.id, 2, 'FAILED');
  for (const d of failed) {
    assert.equal(d.attempts, 2);
    for (const a of d.attemptsLog) assert.match(a.error, /ECONNREFUSED|connection/i);
  }
  const r = ok(
    await ta.call('POST', `/api/v1/integrations/${f.integration.id}/deliveries/redeliver`, {
      token: ta.adminToken,
      body: { from: new Date(Date.now() - 3600_000).toISOString(), to: new Date(Date.now() + 60_000).toISOString() },
    }),
    202,
  );
  assert.equal(r.count, 2, 'kept for redelivery');

  // MQTT 3.1.1 (protocolVersion 4): no user properties, the event id only where asked for.
  const v4 = await mqttFleet({ protocolVersion: 4, qos: 1, setEventId: true });
  const sub = mosquittoSub({ port: mq.port, topic: `${v4.prefix}/#`, qos: 1 });
  try {
    await sub.ready;
    await v4.store(2);
    await allSucceeded(v4.integration.id, 2);
    await sub.waitFor(2);
    for (const m of sub.messages) assert.match(JSON.parse(m.payload).eventId, /^[0-9a-f-]{36}$/);
  } finally {
    await sub.stop();
  }
});

test('naming eventIdField alone turns the event id on; setEventId alone uses eventId; a patch turning it off drops the field', async () => {
  const f = await mqttFleet({ qos: 1, eventIdField: 'evtId' });
  assert.equal(f.integration.mqtt.setEventId, true);
  assert.equal(f.integration.mqtt.eventIdField, 'evtId');
  const sub = mosquittoSub({ port: mq.port, topic: `${f.prefix}/#`, qos: 1, v5: true });
  try {
    await sub.ready;
    await f.store(2);
    await sub.waitFor(2);
    for (const m of sub.messages) {
      const o = JSON.parse(m.payload);
      assert.match(o.evtId ?? '', /^[0-9a-f-]{36}$/, 'the old code sent no evtId: the field alone did nothing');
      assert.equal(o.evtId, m.userPropertyMap?.['event-id']);
    }
  } finally {
    await sub.stop();
  }
  const path = `/api/v1/integrations/${f.integration.id}`;
  const off = ok(await ta.call('PATCH', path, { token: ta.adminToken, body: { mqtt: { setEventId: false } } }), 200);
  assert.deepEqual([off.mqtt.setEventId, off.mqtt.eventIdField], [false, null]);
  const on = ok(await ta.call('PATCH', path, { token: ta.adminToken, body: { mqtt: { setEventId: true } } }), 200);
  assert.deepEqual([on.mqtt.setEventId, on.mqtt.eventIdField], [true, 'eventId']);
  const named = ok(await ta.call('PATCH', path, { token: ta.adminToken, body: { mqtt: { eventIdField: 'trace' } } }), 200);
  assert.deepEqual([named.mqtt.setEventId, named.mqtt.eventIdField], [true, 'trace']);
  // The GET body goes back unchanged.
  const got = ok(await ta.call('GET', path, { token: ta.adminToken }), 200);
  const put = ok(await ta.call('PUT', path, { token: ta.adminToken, body: got }), 200);
  assert.deepEqual([put.mqtt.setEventId, put.mqtt.eventIdField], [true, 'trace']);
});
