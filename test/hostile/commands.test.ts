// The hostile-tenant suite, the commands' ways in: tenant A floods commands for one asset over REST
// and floods its device's answer topic with bogus answers while tenant B is timed, then B's own
// command still makes its round trip; and on a broker with the access control list of DESIGN.md,
// A's device cannot answer B's commands on B's topic, read B's commands or write a command, while
// an answer on its own topic to B's command is refused by the service (ingest error log).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, test } from 'node:test';
import mqtt, { type MqttClient } from 'mqtt';
import { LANE_PORT_OFFSET, mosquittoBroker } from '../brokers.js';
import { TEST_DB, waitFor } from '../helpers.js';
import { hostileService, whileBWorks } from './tenants.js';

const rand = () => Math.random().toString(36).slice(2, 10);
const SERVICE = { username: 'tracking-service', password: `svc-${rand()}` };
const DEVICE_A = { username: `hostile-a-${rand()}`, password: `a-${rand()}` };
const DEVICE_B = { username: `hostile-b-${rand()}`, password: `b-${rand()}` };

/** The access control list as DESIGN.md gives it: the test proves the example, not a copy of it. */
function designAcl(): string {
  const design = fs.readFileSync('docs/DESIGN.md', 'utf8');
  const block = /```\n\s*# the service \(INGEST_MQTT_USERNAME\)[^\n]*\n([\s\S]*?)```/.exec(design);
  assert.ok(block, "DESIGN.md's Mosquitto ACL example");
  return `${block[0]
    .split('\n')
    .slice(1, -1)
    .map((l) => l.trim())
    .join('\n')}\n`;
}

// This file's broker: 18970-18973 (PGlite lane: +1000); the ACL on the password listener.
const mq = await mosquittoBroker(`hostile-cmd-${TEST_DB}`, 18970 + LANE_PORT_OFFSET, {
  acl: { users: [SERVICE, DEVICE_A, DEVICE_B], text: designAcl() },
});
after(() => mq.stop());
const h = await hostileService({
  INGEST_MQTT_URL: `mqtt://127.0.0.1:${mq.authPort}`,
  INGEST_MQTT_USERNAME: SERVICE.username,
  INGEST_MQTT_PASSWORD: SERVICE.password,
  DEVICE_RATE_LIMIT_MAX: '1000000',
});
const a = await h.tenant('tenant-a');
const b = await h.tenant('tenant-b');
await waitFor(
  () => 'MQTT ingest subscribed',
  async () => (await h.metric('ingest_mqtt_connected')) === 1,
);

/** A reefer-connected asset of `t` with an MQTT device named `user` (the operator chooses the id). */
async function reeferDevice(t: { key: string; assetIds: string[] }, user: { username: string; password: string }) {
  const assetId = t.assetIds[0]!;
  assert.equal((await h.call('POST', '/api/v1/reefer-data', { key: t.key, body: { assetId, data: {} } })).status, 201);
  const d = await h.api('POST', '/devices', { assetId, protocol: 'mqtt', uniqueId: user.username });
  assert.equal(d.status, 201, JSON.stringify(d.body));
  const received: { id: string }[] = [];
  const client: MqttClient = mqtt.connect(`mqtt://127.0.0.1:${mq.authPort}`, {
    protocolVersion: 5,
    clientId: user.username,
    username: user.username,
    password: user.password,
    clean: true,
    reconnectPeriod: 0,
  });
  client.on('message', (_t, payload) => received.push(JSON.parse(payload.toString('utf8'))));
  await new Promise<void>((resolve, reject) => {
    client.once('connect', () => resolve());
    client.once('error', reject);
  });
  after(() => client.endAsync());
  const granted = await client.subscribeAsync(`devices/${user.username}/commands`, { qos: 1 });
  assert.equal(granted[0]?.qos, 1, 'a device reads its own commands');
  return { assetId, client, received, uniqueId: user.username };
}

const devA = await reeferDevice(a, DEVICE_A);
const devB = await reeferDevice(b, DEVICE_B);
const command = async (t: { key: string }, assetId: string, type = 'START_DEFROST') =>
  h.call('POST', '/api/v1/commands', { key: t.key, body: { assetId, type } });
const get = async (t: { key: string }, id: string) => (await h.call('GET', `/api/v1/commands/${id}`, { key: t.key })).body;

test("A's device cannot answer, read or write B's commands: the broker refuses on B's topics, the service on A's own", async () => {
  const cmd = await command(b, devB.assetId);
  assert.equal(cmd.status, 201);
  await waitFor(
    () => "B's command at B's device",
    async () => devB.received.some((m) => m.id === cmd.body.id),
  );
  // On B's topics: the broker's list refuses A (MQTT 5: PUBACK and SUBACK 0x87, not authorised).
  await assert.rejects(
    devA.client.publishAsync(`devices/${devB.uniqueId}/commandstatus`, JSON.stringify({ id: cmd.body.id, status: 'FAILED' }), { qos: 1 }),
    /not authori[sz]ed/i,
    "an answer on B's topic",
  );
  // Mosquitto grants the subscription and checks the list at each delivery: nothing of B's reaches A.
  await devA.client.subscribeAsync(`devices/${devB.uniqueId}/commands`, { qos: 1 });
  const next = await command(b, devB.assetId, 'CLEAR_ALARMS');
  await waitFor(
    () => "B's second command at B's device",
    async () => devB.received.some((m) => m.id === next.body.id),
  );
  await assert.rejects(
    devA.client.publishAsync(
      `devices/${devB.uniqueId}/commands`,
      JSON.stringify({ id: '987654321', type: 'POWER_OFF', parameters: null, whenCreated: '', expiresAt: '' }),
      { qos: 1 },
    ),
    /not authori[sz]ed/i,
    'a forged command',
  );
  // On A's own topic: the service refuses an answer to a command of another asset.
  await devA.client.publishAsync(`devices/${devA.uniqueId}/commandstatus`, JSON.stringify({ id: cmd.body.id, status: 'ACKNOWLEDGED' }), {
    qos: 1,
  });
  await waitFor(
    () => "the refusal in A's device's error log",
    async () => {
      const e = await h.api('GET', `/ingest/errors?uniqueId=${devA.uniqueId}`);
      return (e.body as { reason: string }[]).some((x) =>
        x.reason.includes(`Command ${cmd.body.id} is not a command of this device's asset`),
      );
    },
  );
  const still = await get(b, cmd.body.id);
  assert.equal(still.status, 'SENT', "B's command unchanged");
  assert.deepEqual(
    still.attempts.map((x: { kind: string }) => x.kind),
    ['publish'],
  );
  assert.ok(!devB.received.some((m) => m.id === '987654321'), 'no forged command reached B');
  assert.ok(!devA.received.some((m) => m.id === cmd.body.id || m.id === next.body.id), "no command of B's reached A");
});

test('A floods commands for one asset and bogus answers from its device: bounded, and B is not held; B’s command goes round', async () => {
  const max = 100; // COMMAND_MAX_OPEN_PER_ASSET's default
  const seen = await whileBWorks(h, b, async () => {
    const statuses: number[] = [];
    const answers = (async () => {
      for (let i = 0; i < 2000; i++) {
        const body = i % 3 === 0 ? 'not json' : JSON.stringify({ id: String(1_000_000 + i), status: 'ACKNOWLEDGED' });
        await devA.client.publishAsync(`devices/${devA.uniqueId}/commandstatus`, body, { qos: 1 });
      }
    })();
    for (let round = 0; round < 10; round++) {
      const batch = await Promise.all(Array.from({ length: 30 }, () => command(a, devA.assetId)));
      statuses.push(...batch.map((r) => r.status));
    }
    await answers;
    return statuses;
  });
  const statuses = seen.result as number[];
  const created = statuses.filter((s) => s === 201).length;
  console.log(`command flood: ${created} created, ${statuses.filter((s) => s === 409).length} refused; B: ${JSON.stringify(seen.during)}`);
  assert.ok(created <= max, `at most ${max} open commands: ${created}`);
  assert.ok(
    statuses.every((s) => s === 201 || s === 409 || s === 429),
    `only 201, 409 and 429: ${[...new Set(statuses)]}`,
  );
  // B's command still reaches B's device and its answer comes back.
  const mine = await command(b, devB.assetId, 'START_PTI');
  assert.equal(mine.status, 201);
  await waitFor(
    () => "B's command at B's device after the flood",
    async () => devB.received.some((m) => m.id === mine.body.id),
  );
  await devB.client.publishAsync(`devices/${devB.uniqueId}/commandstatus`, JSON.stringify({ id: mine.body.id, status: 'ACKNOWLEDGED' }), {
    qos: 1,
  });
  await waitFor(
    () => "B's command ACKNOWLEDGED",
    async () => (await get(b, mine.body.id)).status === 'ACKNOWLEDGED',
  );
});
