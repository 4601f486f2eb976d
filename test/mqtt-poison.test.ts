// MQTT ingest and poison (API guide 15, "Poison and memory"), against a Mosquitto of the file's
// own with the README's settings: the service run as `npm start` runs it (a 128 MB heap) takes a
// 57 MiB message (the broker drops it: the CONNECT's Maximum Packet Size), one just over
// INGEST_MQTT_MAX_MESSAGE_BYTES (refused unread into the error log) and one at it (stored), stays
// up, and neither comes back after a restart; a burst of 60 messages at the limit is stored a byte
// budget at a time under the same heap (before the budget, the whole burst was one batch, parsed at
// once, and the process died). A record that the store cannot take (nested too deep for it) is
// refused alone, and the messages after it are stored.
import assert from 'node:assert/strict';
import { after, before, type TestContext, test } from 'node:test';
import { LANE_PORT_OFFSET, mosquittoBroker, type MosquittoBroker, oemRecords, payloadOf, mqttPublisher } from './brokers.js';
import { createTestDatabase, customer, ok, startApp, TEST_DB, waitFor, connectPg } from './helpers.js';
import { alive, type ServiceProcess, serviceProcess } from './service-process.js';

// This file's broker: 18940-18943 (PGlite lane: +1000).
const PORT_BASE = 18940 + LANE_PORT_OFFSET;
const MiB = 1024 * 1024;
/** INGEST_MQTT_MAX_MESSAGE_BYTES's default. */
const MAX_MESSAGE = 512 * 1024;

let mq: MosquittoBroker;
let brokerUrl: string;
before(async () => {
  mq = await mosquittoBroker(`mqtt-poison-${TEST_DB}`, PORT_BASE, { maxInflight: 1000, maxQueued: 1_000_000 });
  brokerUrl = `mqtt://127.0.0.1:${mq.port}`;
});
after(async () => {
  await mq?.stop();
});

const publisher = (id: string) => mqttPublisher(brokerUrl, id);

/** OEM data records of a run, by tag: how many are stored. */
async function storedTags(databaseUrl: string, run: string): Promise<Record<string, number>> {
  const client = await connectPg(databaseUrl);
  try {
    const { rows } = await client.query<{ tag: string; n: number }>(
      `SELECT data->>'tag' AS tag, count(*)::int AS n FROM oem_data WHERE data->>'run' = $1 GROUP BY 1`,
      [run],
    );
    return Object.fromEntries(rows.map((r) => [r.tag, r.n]));
  } finally {
    await client.end();
  }
}

/** The service as `npm start` runs it (a 128 MB heap), subscribed to this file's broker. */
async function smallHeapService(t: TestContext, run: string): Promise<{ svc: ServiceProcess; databaseUrl: string; uniqueId: string }> {
  const databaseUrl = await createTestDatabase();
  const svc = await serviceProcess(
    databaseUrl,
    { INGEST_MQTT_URL: brokerUrl, INGEST_MQTT_CLIENT_ID: `ingest-${run}`, INGEST_MQTT_SHARE_GROUP: run, DEVICE_RATE_LIMIT_MAX: '1000000' },
    { nodeArgs: ['--max-old-space-size=128'] },
  );
  t.after(() => svc.stop());
  await subscribedChild(svc);
  const owner = await svc.api('POST', '/owners', { name: run });
  const asset = await svc.api('POST', '/assets', { name: `${run}-truck`, ownerId: owner.body.id });
  const device = await svc.api('POST', '/devices', { assetId: asset.body.id, protocol: 'mqtt' });
  assert.equal(device.status, 201);
  return { svc, databaseUrl, uniqueId: device.body.uniqueId };
}

const subscribedChild = (svc: ServiceProcess) =>
  waitFor(
    () => 'the child to subscribe',
    async () => /ingest_mqtt_connected 1/.test(await (await fetch(`${svc.base}/metrics`)).text()),
  );

/** The child's heap in use, sampled every 100 ms until stopped: the highest value seen. */
function heapSampler(svc: ServiceProcess) {
  let peak = 0;
  let running = true;
  const sampling = (async () => {
    while (running) {
      try {
        const m = /^nodejs_heap_size_used_bytes (\d+)/m.exec(await (await fetch(`${svc.base}/metrics`)).text());
        if (m) peak = Math.max(peak, Number(m[1]));
      } catch {
        /* the process is gone: the test's own checks say so */
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  return {
    async stop() {
      running = false;
      await sampling;
      return peak;
    },
  };
}

async function stillUp(svc: ServiceProcess, pid: number, what: string) {
  assert.equal(svc.pid, pid, what);
  assert.ok(alive(pid), `${what}: the process is alive`);
  assert.equal((await fetch(`${svc.base}/healthz`)).status, 200, `${what}: /healthz`);
}

const tooLargeErrors = async (svc: ServiceProcess, uniqueId: string) =>
  ((await svc.api('GET', `/ingest/errors?protocol=mqtt&uniqueId=${uniqueId}&limit=100`)).body as { reason: string }[]).filter((e) =>
    e.reason.startsWith('too large'),
  );

// PostgreSQL only: PGlite answers the same record otherwise (not yet looked into).
test('a record the database cannot take (nested too deep for it) is refused alone; the messages after it are stored', {
  skip: TEST_DB !== 'postgres' && 'PostgreSQL only: PGlite answers the same record otherwise',
}, async (t) => {
  const ta = await startApp(undefined, {
    DB_POOL_SIZE: '3',
    INGEST_MQTT_URL: brokerUrl,
    INGEST_MQTT_CLIENT_ID: `poison-${TEST_DB}-${Math.random().toString(36).slice(2)}`,
    INGEST_MQTT_SHARE_GROUP: `g${Math.random().toString(36).slice(2)}`,
  });
  t.after(() => ta.app.close());
  await waitFor(
    () => 'the MQTT ingest subscription',
    async () => ta.app.services.ingest.mqtt?.connected,
  );
  const c = await customer(ta, 'mqtt-deep');
  const assetId = await c.asset('deep-truck');
  const device = ok(await c.call('POST', '/api/v1/devices', { assetId, protocol: 'mqtt' }), 201);
  // 60 KB, within a record's 64 KiB of data: PostgreSQL's jsonb refuses it (stack depth limit
  // exceeded, SQLSTATE 54001), which was taken for the database being away and retried for ever.
  const depth = 30_000;
  const deep = `{"payloadType":1,"data":{"deep":${'['.repeat(depth)}1${']'.repeat(depth)}}}`;
  const pub = await publisher(`pub-deep-${TEST_DB}`);
  try {
    await pub.publish(`devices/${device.uniqueId}/oemdata`, deep);
    await pub.publish(`devices/${device.uniqueId}/oemdata`, JSON.stringify({ payloadType: 2, data: { after: true } }));
  } finally {
    await pub.end();
  }
  const stored = await waitFor(
    () => 'the message after the deep one',
    async () => {
      const l = ok(await c.call('GET', `/api/v1/oem-data?assetId=${assetId}&from=2000-01-01T00:00:00Z`), 200);
      return l.length && l;
    },
  );
  assert.deepEqual(
    stored.map((o: any) => o.data),
    [{ after: true }],
    'the deep one is not stored',
  );
  const errors = await waitFor(
    () => 'the deep one in the error log',
    async () => {
      const e = ok(await ta.call('GET', `/api/v1/ingest/errors?uniqueId=${device.uniqueId}`, { token: ta.adminToken }), 200);
      return e.length && e;
    },
  );
  t.diagnostic(`refused: ${errors[0].reason}`);
  // PostgreSQL refuses it (stack depth limit exceeded), or on some Node lines the JSON encoding stops first (Maximum call stack size exceeded): either way it is refused alone.
  assert.match(errors[0].reason, /^bad message: (stack depth limit exceeded|Maximum call stack size exceeded)/);
  assert.match(await (await fetch(`${ta.url}/metrics`)).text(), /ingest_refused_total\{protocol="mqtt",reason="bad message"\} 1/);
});

if (TEST_DB === 'postgres') {
  test('a 57 MiB message, one just over the limit and one at it, under a 128 MB heap: the process stays up, neither large one is stored or comes back after a restart', {
    timeout: 300_000,
  }, async (t) => {
    const run = `poison${Math.random().toString(36).slice(2)}`;
    const { svc, databaseUrl, uniqueId } = await smallHeapService(t, run);
    const pid = svc.pid;
    const topic = `devices/${uniqueId}/oemdata`;
    const heap = heapSampler(svc);
    const pub = await publisher(`pub-${run}`);
    try {
      // The probe that killed the service: 1000 records with a 60 KB string each.
      const poison = JSON.stringify(oemRecords(run, 'poison', 1000, 60_000));
      assert.ok(poison.length > 57 * MiB);
      await pub.publish(topic, poison);
      await pub.publish(topic, payloadOf(run, 'over', 1000, MAX_MESSAGE + 1));
      await pub.publish(topic, payloadOf(run, 'at', 1000, MAX_MESSAGE));
      await pub.publish(topic, JSON.stringify(oemRecords(run, 'after', 1, 10)));
    } finally {
      await pub.end();
    }
    await waitFor(
      () => 'the message at the limit and the one after it stored',
      async () => {
        const s = await storedTags(databaseUrl, run);
        return s.at === 1000 && s.after === 1;
      },
    );
    const peak = await heap.stop();
    await stillUp(svc, pid, 'after the large messages');
    const refused = await waitFor(
      () => 'the message over the limit in the error log',
      async () => {
        const e = await tooLargeErrors(svc, uniqueId);
        return e.length > 0 && e;
      },
    );
    assert.equal(refused.length, 1, 'the 57 MiB one never reached the service (the broker drops it)');
    assert.match(refused[0]!.reason, /^too large: The payload is 524289 bytes; INGEST_MQTT_MAX_MESSAGE_BYTES allows 524288/);
    assert.match(await (await fetch(`${svc.base}/metrics`)).text(), /ingest_refused_total\{protocol="mqtt",reason="too large"\} 1/);

    // A restart on the same session: nothing of them comes again.
    svc.kill();
    await svc.start();
    await subscribedChild(svc);
    const pub2 = await publisher(`pub2-${run}`);
    await pub2.publish(topic, JSON.stringify(oemRecords(run, 'restart', 1, 10)));
    await pub2.end();
    await waitFor(
      () => 'the message after the restart stored',
      async () => (await storedTags(databaseUrl, run)).restart === 1,
    );
    await stillUp(svc, svc.pid, 'after the restart');
    const stored = await storedTags(databaseUrl, run);
    assert.equal(stored.poison, undefined, 'the 57 MiB message was never stored');
    assert.equal(stored.over, undefined, 'the message over the limit was never stored');
    assert.equal((await tooLargeErrors(svc, uniqueId)).length, 1, 'nor did it come again');
    t.diagnostic(`heap peak while the large messages came (128 MB heap): ${(peak / MiB).toFixed(1)} MiB`);
  });

  test('a burst of 60 messages at the size limit under a 128 MB heap: read a byte budget at a time, all stored, the process stays up', {
    timeout: 300_000,
  }, async (t) => {
    const run = `burst${Math.random().toString(36).slice(2)}`;
    const { svc, databaseUrl, uniqueId } = await smallHeapService(t, run);
    const pid = svc.pid;
    const N = 60;
    const heap = heapSampler(svc);
    const pub = await publisher(`pub-${run}`);
    try {
      const sends: Promise<unknown>[] = [];
      for (let i = 0; i < N; i++) sends.push(pub.publish(`devices/${uniqueId}/oemdata`, payloadOf(run, `m${i}`, 100, MAX_MESSAGE)));
      await Promise.all(sends);
    } finally {
      await pub.end();
    }
    const stored = await waitFor(
      () => `all ${N} messages stored`,
      async () => {
        const s = await storedTags(databaseUrl, run);
        return Object.keys(s).length === N && s;
      },
      180_000,
    );
    const peak = await heap.stop();
    await stillUp(svc, pid, 'after the burst');
    assert.ok(
      Object.values(stored).every((n) => n === 100),
      'each message whole',
    );
    t.diagnostic(`heap peak during a burst of ${N} MiB (128 MB heap): ${(peak / MiB).toFixed(1)} MiB`);
    // Read as one batch (before the byte budget), the burst peaked at 123.5 MiB of the 128; with it, at 84.
    assert.ok(peak < 110 * MiB, `heap peak ${(peak / MiB).toFixed(1)} MiB`);
  });
} else {
  // Shown as skipped in this lane, with the reason, rather than left out.
  test('a 57 MiB message, one just over the limit and one at it, under a 128 MB heap: the process stays up, neither large one is stored or comes back after a restart', {
    skip: 'PostgreSQL only: a service process SIGKILLed and restarted against one database',
  }, () => {});
  test('a burst of 60 messages at the size limit under a 128 MB heap: read a byte budget at a time, all stored, the process stays up', {
    skip: 'PostgreSQL only: a service process SIGKILLed and restarted against one database',
  }, () => {});
}
