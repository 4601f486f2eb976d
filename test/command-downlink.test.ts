// Commands to MQTT devices (API guide 8, "Commands to MQTT devices"), against a real Mosquitto of
// the test's own, on both databases: a command reaches its subscribed device at QoS 1 with its
// message expiry, the broker's PUBACK makes it SENT, the device's answer ACKNOWLEDGED or FAILED
// (with its message), each in the command's history and pushed; a device cannot answer another's
// command; the service's own downlink messages write no ingest error; an offline device with a kept
// session gets what waited, in order and never past expiresAt; one without gets what it missed
// published again when it shows itself; the service SIGKILLed between publish and PUBACK, and
// between PUBACK and answer, loses no command.
import assert from 'node:assert/strict';
import net from 'node:net';
import fs from 'node:fs';
import { after, before, type TestContext, test } from 'node:test';
import mqtt, { type MqttClient } from 'mqtt';
import { LANE_PORT_OFFSET, mosquittoBroker, type MosquittoBroker } from './brokers.js';
import { createTestDatabase, customer, ok, startApp, TEST_DB, type TestApp, waitFor } from './helpers.js';
import { Receiver } from './receiver.js';
import { embeddedDataDir, serviceProcess } from './service-process.js';

// This file's broker: 18990-18993 (PGlite lane: +1000).
const PORT_BASE = 18990 + LANE_PORT_OFFSET;
let mq: MosquittoBroker;
let brokerUrl: string;
let rx: Receiver;
before(async () => {
  mq = await mosquittoBroker(`downlink-${TEST_DB}`, PORT_BASE, { maxInflight: 1000, maxQueued: 10_000 });
  brokerUrl = `mqtt://127.0.0.1:${mq.port}`;
  rx = await new Receiver().start();
});
after(async () => {
  await rx?.close();
  await mq?.stop();
});

const rand = () => Math.random().toString(36).slice(2);

/** An app whose MQTT ingest (and so its downlink) is on the test broker, closed when its test ends. */
async function downlinkApp(t: TestContext, env: Record<string, string> = {}): Promise<TestApp> {
  const ta = await startApp(undefined, {
    DB_POOL_SIZE: '3',
    INGEST_MQTT_URL: brokerUrl,
    INGEST_MQTT_CLIENT_ID: `downlink-${TEST_DB}-${rand()}`,
    INGEST_MQTT_SHARE_GROUP: `g${rand()}`,
    PUSH_ALLOWED_NETWORKS: '127.0.0.0/8,::1/128',
    PUSH_ALLOW_HTTP: 'true',
    DELIVERY_POLL_MS: '100',
    RATE_LIMIT_MAX: '100000',
    ...env,
  });
  t.after(() => ta.app.close());
  await waitFor(
    () => 'the MQTT ingest subscription',
    async () => ta.app.services.ingest.mqtt?.connected,
  );
  return ta;
}

interface DeviceMessage {
  id: string;
  type: string;
  parameters: unknown;
  whenCreated: string;
  expiresAt: string;
  /** The MQTT 5 message expiry interval the broker handed over (what was left of it). */
  expiry: number | undefined;
}

/** A device on the broker: its commands topic at QoS 1, a kept session unless `clean`. */
async function device(uniqueId: string, opts: { clean?: boolean; url?: string } = {}) {
  const received: DeviceMessage[] = [];
  const connect = async () => {
    const c = mqtt.connect(opts.url ?? brokerUrl, {
      protocolVersion: 5,
      clientId: `dev-${uniqueId}`,
      clean: opts.clean ?? false,
      properties: { sessionExpiryInterval: 3600 },
      reconnectPeriod: 0,
    });
    // Before the CONNACK: what a kept session holds may come in the same read as it.
    c.on('message', (_topic, payload, packet) => {
      received.push({ ...JSON.parse(payload.toString('utf8')), expiry: packet.properties?.messageExpiryInterval });
    });
    await new Promise<void>((resolve, reject) => {
      c.once('connect', () => resolve());
      c.once('error', reject);
    });
    return c;
  };
  let client: MqttClient = await connect();
  await client.subscribeAsync(`devices/${uniqueId}/commands`, { qos: 1 });
  return {
    received,
    get client() {
      return client;
    },
    /** Answers on this device's topic (or another's: `topicOf`). */
    answer: (body: unknown, topicOf = uniqueId) =>
      client.publishAsync(`devices/${topicOf}/commandstatus`, typeof body === 'string' ? body : JSON.stringify(body), { qos: 1 }),
    publish: (type: string, body: unknown) => client.publishAsync(`devices/${uniqueId}/${type}`, JSON.stringify(body), { qos: 1 }),
    offline: () => client.endAsync(),
    /** Back with its session (the broker hands over what it kept; no new subscription). */
    online: async () => {
      client = await connect();
    },
    end: () => client.endAsync(),
  };
}

/** Waits until the command reads `status`, and answers it as read. */
const reads = (get: (id: string) => Promise<any>, id: string, status: string) =>
  waitFor(
    () => `command ${id} ${status}`,
    async () => {
      const x = await get(id);
      return x.status === status && x;
    },
  );

/** A customer with a reefer-connected asset and an MQTT device on it. */
async function reefer(ta: TestApp, label: string) {
  const c = await customer(ta, label);
  const assetId = await c.asset(`${label}-reefer`);
  ok(await c.call('POST', '/api/v1/reefer-data', { assetId, data: { supplyAirTemperature: 4 } }), 201, 'reefer data');
  const dev = ok(await c.call('POST', '/api/v1/devices', { assetId, protocol: 'mqtt' }), 201, 'device');
  const command = async (body: Record<string, unknown>): Promise<any> =>
    ok(await c.call('POST', '/api/v1/commands', { assetId, ...body }), 201, `command ${JSON.stringify(body)}`);
  const get = async (id: string): Promise<any> => ok(await c.call('GET', `/api/v1/commands/${id}`), 200, `command ${id}`);
  const statusIs = (id: string, status: string) => reads(get, id, status);
  return { ...c, assetId, uniqueId: dev.uniqueId as string, command, get, statusIs };
}

/** The ingest error log's entries for a device (the log is the operator's). */
const errorsOf = async (ta: TestApp, uniqueId: string) =>
  ok(await ta.call('GET', `/api/v1/ingest/errors?limit=100&uniqueId=${uniqueId}`, { token: ta.adminToken }), 200, 'ingest errors') as any[];

test('a command reaches its device, whose answers make it ACKNOWLEDGED or FAILED: history, pushes, no error row for the downlink', async (t) => {
  const ta = await downlinkApp(t);
  const r = await reefer(ta, 'dl-basic');
  ok(
    await ta.call('POST', '/api/v1/integrations', {
      token: ta.adminToken,
      body: {
        name: `dl-${rand()}`,
        ownerIds: [r.ownerId],
        channel: 'webhook',
        destination: `${rx.url}/dl-${r.ownerId}`,
        objectTypes: ['command'],
        retry: { scheduleSeconds: [0.3] },
      },
    }),
    201,
    'integration',
  );
  const dev = await device(r.uniqueId);
  t.after(() => dev.end());
  const set = await r.command({ type: 'SET_TEMPERATURE', parameters: { value: -18 }, ttlSeconds: 600 });
  assert.equal(set.status, 'PENDING');
  await waitFor(
    () => 'the command at the device',
    async () => dev.received.length >= 1,
  );
  const got = dev.received[0]!;
  assert.deepEqual(
    { id: got.id, type: got.type, parameters: got.parameters, whenCreated: got.whenCreated, expiresAt: got.expiresAt },
    { id: set.id, type: 'SET_TEMPERATURE', parameters: { value: -18 }, whenCreated: set.whenCreated, expiresAt: set.expiresAt },
  );
  assert.ok(got.expiry !== undefined && got.expiry > 0 && got.expiry <= 600, `message expiry ${got.expiry}`);
  assert.equal(Date.parse(set.expiresAt) - Date.parse(set.whenCreated), 600_000);
  await r.statusIs(set.id, 'SENT');
  await dev.answer({ id: set.id, status: 'ACKNOWLEDGED', message: 'set point -18.0' });
  const done = await r.statusIs(set.id, 'ACKNOWLEDGED');
  assert.equal(done.message, 'set point -18.0');
  assert.deepEqual(
    done.attempts.map((a: any) => [a.kind, a.device, a.status, a.message]),
    [
      ['publish', r.uniqueId, 'PUBACK', null],
      ['answer', r.uniqueId, 'ACKNOWLEDGED', 'set point -18.0'],
    ],
  );
  // A repeated answer changes nothing; its history says it came.
  await dev.answer({ id: set.id, status: 'FAILED', message: 'late' });
  await waitFor(
    () => 'the repeated answer in the history',
    async () => (await r.get(set.id)).attempts.length === 3,
  );
  assert.equal((await r.get(set.id)).status, 'ACKNOWLEDGED');

  // FAILED with the device's reason; an answer to a command not yet SENT moves it through SENT.
  const mode = await r.command({ type: 'SET_MODE', parameters: { mode: 'sleep' } });
  await waitFor(
    () => 'SET_MODE at the device',
    async () => dev.received.some((m) => m.id === mode.id),
  );
  await dev.answer({ id: mode.id, status: 'FAILED', message: 'sleep mode not supported by this controller' });
  const failed = await r.statusIs(mode.id, 'FAILED');
  assert.equal(failed.message, 'sleep mode not supported by this controller');

  // Pushed: each change of each command, in its whenUpdated order.
  const pushedOf = (id: string) =>
    rx
      .for(`/dl-${r.ownerId}`)
      .map((x) => JSON.parse(x.body))
      .filter((c) => c.id === id)
      .sort((a, b) => Date.parse(a.whenUpdated) - Date.parse(b.whenUpdated))
      .map((c) => c.status);
  await rx.waitFor(() => pushedOf(set.id).length >= 3 && pushedOf(mode.id).length >= 3, 60_000, 'the pushed changes');
  assert.deepEqual(pushedOf(set.id), ['PENDING', 'SENT', 'ACKNOWLEDGED']);
  assert.deepEqual(pushedOf(mode.id), ['PENDING', 'SENT', 'FAILED']);

  // The service's own messages on devices/<id>/commands wrote nothing to the ingest error log.
  assert.deepEqual(await errorsOf(ta, r.uniqueId), []);
});

test('a device cannot answer another device’s command: refused into the error log, the command unchanged; a bad answer likewise', async (t) => {
  const ta = await downlinkApp(t);
  const a = await reefer(ta, 'dl-victim');
  const b = await reefer(ta, 'dl-thief');
  const devA = await device(a.uniqueId);
  const devB = await device(b.uniqueId);
  t.after(() => Promise.all([devA.end(), devB.end()]));
  const cmd = await a.command({ type: 'START_DEFROST' });
  await a.statusIs(cmd.id, 'SENT');
  // B answers A's command on its own topic (the broker lets it), and as A on A's topic is the broker's to refuse (ACL).
  await devB.answer({ id: cmd.id, status: 'FAILED', message: 'hijack' });
  await devB.answer('not json');
  await devB.answer({ id: cmd.id, status: 'DONE' });
  const errors = await waitFor(
    () => "B's three refusals in its error log",
    async () => {
      const e = await errorsOf(ta, b.uniqueId);
      return e.length >= 3 && e;
    },
  );
  const reasons = errors.map((e: any) => e.reason).join(' | ');
  assert.match(reasons, new RegExp(`Command ${cmd.id} is not a command of this device's asset`));
  assert.match(reasons, /not JSON/);
  assert.match(reasons, /status must be ACKNOWLEDGED or FAILED/);
  const still = await a.get(cmd.id);
  assert.equal(still.status, 'SENT');
  assert.deepEqual(
    still.attempts.map((x: any) => x.kind),
    ['publish'],
  );
  assert.deepEqual(await errorsOf(ta, a.uniqueId), [], "nothing in A's log");
  // A's own answer still works.
  await devA.answer({ id: cmd.id, status: 'ACKNOWLEDGED' });
  await a.statusIs(cmd.id, 'ACKNOWLEDGED');
});

test('an offline device with a kept session gets its commands in order when it comes back, never one past expiresAt', async (t) => {
  const ta = await downlinkApp(t);
  const r = await reefer(ta, 'dl-offline');
  const dev = await device(r.uniqueId);
  t.after(() => dev.end());
  await dev.offline();
  const short = await r.command({ type: 'START_PTI', ttlSeconds: 2 });
  const first = await r.command({ type: 'SET_TEMPERATURE', parameters: { value: -20 } });
  const second = await r.command({ type: 'SET_MODE', parameters: { mode: 'continuous' } });
  const third = await r.command({ type: 'CLEAR_ALARMS' });
  // The broker took all four for the device's session: SENT.
  for (const c of [first, second, third]) await r.statusIs(c.id, 'SENT');
  // The short one's time to live runs out while the device is away.
  await r.statusIs(short.id, 'EXPIRED');
  await dev.online();
  await waitFor(
    () => 'the three commands at the device',
    async () => dev.received.length >= 3,
  );
  assert.deepEqual(
    dev.received.map((m) => m.id),
    [first.id, second.id, third.id],
    'in order, the expired one not at all',
  );
});

test('a device without a kept session gets what it missed when it next sends something; an asset without an MQTT device is not published to', async (t) => {
  const ta = await downlinkApp(t, { COMMAND_REPUBLISH_SECONDS: '1' });
  const r = await reefer(ta, 'dl-clean');
  // No device connected at all: the broker PUBACKs (the service's own subscription matches), SENT.
  const missed = await r.command({ type: 'START_DEFROST' });
  await r.statusIs(missed.id, 'SENT');
  const dev = await device(r.uniqueId, { clean: true });
  t.after(() => dev.end());
  // It shows itself with its records, one a second; the unanswered command is published again.
  await waitFor(
    () => 'the missed command at the device',
    async () => {
      if (dev.received.some((m) => m.id === missed.id)) return true;
      await dev.publish('reeferdata', { data: { supplyAirTemperature: 3 } });
      await new Promise((r) => setTimeout(r, 1000));
      return false;
    },
  );
  await dev.answer({ id: missed.id, status: 'ACKNOWLEDGED' });
  const done = await r.statusIs(missed.id, 'ACKNOWLEDGED');
  assert.deepEqual(
    done.attempts.map((a: any) => `${a.kind}:${a.status}`),
    ['publish:PUBACK', 'publish:PUBACK', 'answer:ACKNOWLEDGED'],
  );

  // An asset with no MQTT device: the command stays for the REST device side.
  const c = await customer(ta, 'dl-rest');
  const assetId = await c.asset('rest-reefer');
  ok(await c.call('POST', '/api/v1/reefer-data', { assetId, data: {} }), 201);
  const rest = ok(await c.call('POST', '/api/v1/commands', { assetId, type: 'POWER_ON' }), 201);
  // One more command through the MQTT device, so that the downlink has looked since.
  const later = await r.command({ type: 'POWER_ON' });
  await r.statusIs(later.id, 'SENT');
  const still = ok(await c.call('GET', `/api/v1/commands/${rest.id}`), 200);
  assert.equal(still.status, 'PENDING');
  assert.deepEqual(still.attempts, []);
  ok(await c.call('PATCH', `/api/v1/commands/${rest.id}`, { status: 'SENT' }), 200);
});

/**
 * A TCP relay between the service and the broker that can hold what the broker sends the service
 * (its PUBACKs among it), so that a kill lands between a publish and its PUBACK.
 */
async function relay(target: number) {
  let holding = false;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(target, '127.0.0.1');
    sockets.add(client).add(upstream);
    client.pipe(upstream);
    upstream.on('data', (d) => {
      if (!holding) client.write(d);
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as net.AddressInfo).port,
    hold: (on: boolean) => {
      holding = on;
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}

test('SIGKILL between publish and PUBACK, and between PUBACK and answer: each command delivered at least once, answered once', {
  timeout: 300_000,
}, async (t) => {
  const proxy = await relay(mq.port);
  t.after(() => proxy.close());
  const run = `kill${rand()}`;
  const database = TEST_DB === 'pglite' ? { dataDir: embeddedDataDir('downlink-kill-') } : await createTestDatabase();
  const svc = await serviceProcess(database, {
    INGEST_MQTT_URL: `mqtt://127.0.0.1:${proxy.port}`,
    INGEST_MQTT_CLIENT_ID: `ingest-${run}`,
    INGEST_MQTT_SHARE_GROUP: run,
    // Long: only the restart's own take-back (not a lease running out) publishes again.
    COMMAND_LEASE_SECONDS: '3600',
  });
  t.after(async () => {
    await svc.stop();
    if (typeof database !== 'string') fs.rmSync(database.dataDir, { recursive: true, force: true });
  });
  const connected = async () => /ingest_mqtt_connected 1/.test(await (await fetch(`${svc.base}/metrics`)).text());
  await waitFor(() => 'the child to subscribe', connected);
  const owner = await svc.api('POST', '/owners', { name: `kill-${run}` });
  const asset = await svc.api('POST', '/assets', { name: `kill-${run}`, ownerId: owner.body.id });
  assert.equal((await svc.api('POST', '/reefer-data', { assetId: asset.body.id, data: {} })).status, 201);
  const dev0 = await svc.api('POST', '/devices', { assetId: asset.body.id, protocol: 'mqtt' });
  assert.equal(dev0.status, 201);
  const uniqueId = dev0.body.uniqueId as string;
  const get = async (id: string) => (await svc.api('GET', `/commands/${id}`)).body;
  const statusIs = (id: string, status: string) => reads(get, id, status);
  const dev = await device(uniqueId);
  t.after(() => dev.end());
  // The device answers each command once, however often it comes.
  const answered = new Set<string>();
  const answerNew = async () => {
    for (const m of dev.received) {
      if (answered.has(m.id)) continue;
      answered.add(m.id);
      await dev.answer({ id: m.id, status: 'ACKNOWLEDGED' });
    }
  };

  // 1. Killed between publish and PUBACK: the broker's PUBACK is held; the device has it; kill.
  proxy.hold(true);
  const one = (await svc.api('POST', '/commands', { assetId: asset.body.id, type: 'SET_TEMPERATURE', parameters: { value: -5 } })).body;
  await waitFor(
    () => 'the first command at the device',
    async () => dev.received.some((m) => m.id === one.id),
  );
  assert.equal((await get(one.id)).status, 'PENDING', 'no PUBACK yet');
  svc.kill();
  proxy.hold(false);
  await svc.start();
  await waitFor(() => 'the restarted child to subscribe', connected);
  // The restart publishes it again (it took back its lease): the device gets it twice.
  await waitFor(
    () => 'the first command at the device again',
    async () => dev.received.filter((m) => m.id === one.id).length >= 2,
  );
  await answerNew();
  const oneDone = await statusIs(one.id, 'ACKNOWLEDGED');
  assert.equal(oneDone.attempts.filter((a: any) => a.kind === 'answer').length, 1, 'answered once');

  // 2. Killed between PUBACK and answer: SENT, then the device answers while the service is down.
  const two = (await svc.api('POST', '/commands', { assetId: asset.body.id, type: 'START_DEFROST' })).body;
  await statusIs(two.id, 'SENT');
  await waitFor(
    () => 'the second command at the device',
    async () => dev.received.some((m) => m.id === two.id),
  );
  svc.kill();
  await answerNew(); // the broker keeps it for the service's session
  await svc.start();
  await waitFor(() => 'the restarted child to subscribe', connected);
  const twoDone = await statusIs(two.id, 'ACKNOWLEDGED');
  assert.deepEqual(
    twoDone.attempts.map((a: any) => `${a.kind}:${a.status}`),
    ['publish:PUBACK', 'answer:ACKNOWLEDGED'],
    'published once, answered once',
  );
  t.diagnostic(`deliveries at the device: ${dev.received.map((m) => m.id).join(', ')}`);
});
