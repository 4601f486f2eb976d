// The fleet simulator (sim/): it signs in with a real credential, makes its fleet through
// the API, and what it reports as stored is what the service holds (its lanes: test/unit/sim-routes.test.ts).
// Its reefers take commands: through the REST device side, and as MQTT devices on the shared
// Mosquitto (1883) with the service's MQTT ingest and its command downlink.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import mqtt from 'mqtt';
import { type FleetAsset, simulate } from '../sim/simulator.js';
import { OPERATOR, ok, ownerWithKey, startApp, TEST_DB, waitFor } from './helpers.js';

/** The shared Mosquitto, the MQTT ingest's broker in the MQTT devices' test. */
const BROKER = 'mqtt://127.0.0.1:1883';

const ta = await startApp(undefined, { RATE_LIMIT_MAX: '100000', RATE_LIMIT_CONCURRENT: '1000' });

test('the simulator with an API key: its fleet is made once, every record it counts is stored, none fails', async () => {
  const o = await ownerWithKey(ta, 'sim-key');
  const first = await simulate({ url: ta.url, auth: { apiKey: o.key }, assets: 6, rate: 150, durationSeconds: 3, prefix: 'T', seed: 7 });
  assert.equal(first.errors, 0, first.lastError);
  assert.equal(first.backlog, 0);
  assert.deepEqual(first.ownerIds, [o.ownerId]);
  assert.ok(first.sent >= 150, `sent ${first.sent}`);
  const count = async (path: string) =>
    ok(await ta.call('GET', `/api/v1${path}?ownerId=${o.ownerId}&limit=1000`, { token: o.key }), 200).length;
  assert.equal(await count('/locations'), first.byType.location);
  assert.equal(await count('/sensor-data'), first.byType.sensordata);
  assert.equal(await count('/reefer-data'), first.byType.reeferdata);
  assert.equal(await count('/genset-data'), first.byType.gensetdata);
  assert.ok(first.byType.location > 0 && first.byType.reeferdata > 0 && first.byType.sensordata > 0);
  const assets = ok(await ta.call('GET', `/api/v1/assets?ownerId=${o.ownerId}`, { token: o.key }), 200);
  assert.equal(assets.length, 6);
  assert.deepEqual(assets.map((a: any) => a.name).sort(), ['TC00001', 'TC00004', 'TR00002', 'TR00003', 'TR00005', 'TR00006']);
  // A reefer record has the shape the alert engine reads.
  const [reefer] = ok(await ta.call('GET', `/api/v1/reefer-data?ownerId=${o.ownerId}&limit=1`, { token: o.key }), 200);
  assert.equal(typeof reefer.data.cargo.sensors.supplyAirTemperature, 'number');
  assert.equal(typeof reefer.data.powerOn, 'boolean');

  // A second run with the same prefix finds the fleet instead of making another.
  const second = await simulate({ url: ta.url, auth: { apiKey: o.key }, assets: 6, rate: 100, durationSeconds: 1, prefix: 'T', seed: 7 });
  assert.deepEqual(second.assetIds.sort(), first.assetIds.sort());
  assert.equal(ok(await ta.call('GET', `/api/v1/assets?ownerId=${o.ownerId}`, { token: o.key }), 200).length, 6);
});

test('the simulator moves at the speeds it reports: the trips report’s average is at most its maximum, and distance over time agrees with the speeds', async () => {
  const o = await ownerWithKey(ta, 'sim-speeds');
  const from = new Date(Date.now() - 1000).toISOString();
  // The default time scale (120): a reefer's life runs faster, its movement does not.
  const s = await simulate({ url: ta.url, auth: { apiKey: o.key }, assets: 6, rate: 150, durationSeconds: 5, prefix: 'SPD', seed: 11 });
  assert.equal(s.errors, 0, s.lastError);
  const report = ok(
    await ta.call('GET', `/api/v1/reports/trips?ownerId=${o.ownerId}&from=${encodeURIComponent(from)}`, { token: o.key }),
    200,
  );
  const trips = (report.items as any[]).filter((t) => t.distanceMeters > 0);
  assert.equal(new Set(trips.map((t) => t.assetId)).size, 6, `every asset moved: ${JSON.stringify(report.items)}`);
  for (const t of trips) {
    const what = JSON.stringify(t);
    // Ships 30-42 km/h, trucks 60-85 km/h, a km/h or two either way: never the time scale's 120 times that.
    assert.ok(t.maxSpeed > 20 && t.maxSpeed < 100, `a real speed: ${what}`);
    assert.ok(t.averageSpeed <= t.maxSpeed, `the average at most the maximum: ${what}`);
    // Distance over time is the speed the positions reported, within a few per cent.
    assert.ok(t.averageSpeed >= 0.9 * t.maxSpeed, `the distance and the time agree with the reported speeds: ${what}`);
  }
  // The mean of the speeds each asset's positions reported is the distance it covered over the time.
  for (const t of trips) {
    const points = ok(await ta.call('GET', `/api/v1/locations?assetId=${t.assetId}&limit=1000`, { token: o.key }), 200) as any[];
    const mean = points.reduce((sum, p) => sum + p.speed, 0) / points.length;
    assert.ok(Math.abs(t.averageSpeed - mean) / mean < 0.05, `${t.averageSpeed} km/h over the trip, ${mean} km/h reported on average`);
  }
});

test('the simulator signs in with the password grant, makes owners by name (admin) and stops on its signal', async () => {
  const controller = new AbortController();
  const run = simulate({
    url: ta.url,
    auth: { clientId: OPERATOR.clientId, clientSecret: OPERATOR.clientSecret, username: OPERATOR.username, password: OPERATOR.password },
    assets: 4,
    owners: 2,
    rate: 50,
    prefix: 'PW',
    signal: controller.signal,
    onProgress: (p) => {
      if (p.sent > 0) controller.abort();
    },
  });
  const s = await run;
  assert.equal(s.errors, 0, s.lastError);
  assert.equal(s.ownerIds.length, 2);
  const names = await Promise.all(
    s.ownerIds.map(async (id) => ok(await ta.call('GET', `/api/v1/owners/${id}`, { token: ta.adminToken }), 200).name),
  );
  assert.deepEqual(names, ['PW Fleet 1', 'PW Fleet 2']);
  assert.ok(s.sent > 0);
});

test('the REST device side: the simulator’s reefers take their PENDING commands, obey or refuse them, and report the new set point', async () => {
  const o = await ownerWithKey(ta, 'sim-commands');
  const call = (method: string, p: string, body?: unknown) => ta.call(method, `/api/v1${p}`, { token: o.key, body });
  // A reefer of the same owner that is not the simulator's: its command is not the simulator's to take.
  const stranger = ok(await call('POST', '/assets', { name: 'not-simulated' }), 201);
  ok(await call('POST', '/reefer-data', { assetId: stranger.id, whenCreated: new Date().toISOString(), data: { powerOn: true } }), 201);
  const foreign = ok(await call('POST', '/commands', { assetId: stranger.id, type: 'START_DEFROST' }), 201);

  const controller = new AbortController();
  let fleet: FleetAsset[] = [];
  const obeyed: string[] = [];
  const run = simulate({
    url: ta.url,
    auth: { apiKey: o.key },
    assets: 3,
    rate: 60,
    prefix: 'CMD',
    seed: 3,
    // Fast, so the test does not wait: a new set point is reached in about a second and a half.
    timeScale: 1200,
    commandPollMs: 300,
    signal: controller.signal,
    onFleet: async (f) => {
      fleet = f;
    },
    onCommand: (c) => obeyed.push(`${c.name} ${c.type} ${c.status}${c.message ? `: ${c.message}` : ''} ${c.via}`),
  });
  try {
    await waitFor(
      () => 'the fleet',
      async () => fleet.length === 3,
    );
    // The first reefer starts at the wrong set point: frozen cargo, the unit at 4 °C.
    const wrong = fleet.find((a) => a.kind === 'reefer')!;
    assert.equal(wrong.name, 'CMDR00002');
    assert.deepEqual([wrong.setpoint, wrong.unitSetpoint], [-18, 4]);
    assert.ok(
      fleet.filter((a) => a.kind === 'reefer' && a !== wrong).every((a) => a.setpoint === a.unitSetpoint),
      'the others at their cargo’s',
    );
    const latest = async () => (ok(await call('GET', `/reefer-data?assetId=${wrong.id}&limit=1`), 200) as any[])[0];
    const first = await waitFor(() => 'reefer data of the first reefer', latest);
    assert.equal(first.data.temperatureSetpoint, 4, 'it reports the set point it runs at');

    // Made through the API, taken by the REST device side: SENT, then ACKNOWLEDGED.
    const command = ok(await call('POST', '/commands', { assetId: wrong.id, type: 'SET_TEMPERATURE', parameters: { value: -18 } }), 201);
    const o2 = ok(await call('POST', '/commands', { assetId: wrong.id, type: 'SET_O2', parameters: { value: 5 } }), 201);
    const mode = ok(await call('POST', '/commands', { assetId: wrong.id, type: 'SET_MODE', parameters: { mode: 'cycle' } }), 201);
    const statusOf = async (id: string) => ok(await call('GET', `/commands/${id}`), 200).status;
    await waitFor(
      () => `the set point acknowledged (${obeyed.join('; ')})`,
      async () => (await statusOf(command.id)) === 'ACKNOWLEDGED',
      30_000,
    );
    await waitFor(
      () => 'SET_O2 refused',
      async () => (await statusOf(o2.id)) === 'FAILED',
      30_000,
    );
    await waitFor(
      () => 'SET_MODE acknowledged',
      async () => (await statusOf(mode.id)) === 'ACKNOWLEDGED',
      30_000,
    );
    // The reported set point follows, and the supply air moves to it.
    const followed = await waitFor(
      () => 'the new set point reported and the supply air near it',
      async () => {
        const r = await latest();
        return r?.data.temperatureSetpoint === -18 && r.data.cargo.sensors.supplyAirTemperature < -15 ? r : undefined;
      },
      30_000,
    );
    assert.equal(followed.data.mode, 'cycle');
    assert.equal(await statusOf(foreign.id), 'PENDING', 'another asset’s command is left alone');
  } finally {
    controller.abort();
  }
  const s = await run;
  assert.equal(s.errors, 0, s.lastError);
  assert.equal(s.backlog, 0);
  assert.deepEqual(s.commands, { acknowledged: 2, failed: 1 });
  assert.ok(
    obeyed.includes('CMDR00002 SET_O2 FAILED: This unit has no controlled atmosphere (CA): it cannot take SET_O2. rest'),
    obeyed.join('; '),
  );
});

test('MQTT devices: a reefer registered as an MQTT device publishes on the ingest broker, answers its commands once each, and the others keep the REST side', async (t) => {
  // The shared Mosquitto (1883), with a topic prefix, client id and share group of this test's own.
  const run = `sim-${TEST_DB}-${Date.now()}`;
  const mq = await startApp(undefined, {
    RATE_LIMIT_MAX: '100000',
    DB_POOL_SIZE: '4',
    INGEST_MQTT_URL: BROKER,
    INGEST_MQTT_TOPIC_PREFIX: run,
    INGEST_MQTT_CLIENT_ID: `ingest-${run}`,
    INGEST_MQTT_SHARE_GROUP: `g-${run}`,
  });
  t.after(() => mq.app.close());
  await waitFor(
    () => 'the MQTT ingest subscription',
    async () => mq.app.services.ingest.mqtt?.connected,
  );
  const o = await ownerWithKey(mq, 'sim-mqtt');
  const call = (method: string, p: string, body?: unknown) => mq.call(method, `/api/v1${p}`, { token: o.key, body });
  const controller = new AbortController();
  let fleet: FleetAsset[] = [];
  const obeyed: { id: string; name: string; status: string; via: string }[] = [];
  const sim = simulate({
    url: mq.url,
    auth: { apiKey: o.key },
    assets: 3,
    rate: 30,
    prefix: 'MQ',
    seed: 5,
    timeScale: 1200,
    commandPollMs: 300,
    mqtt: { url: BROKER, devices: 1, topicPrefix: run },
    signal: controller.signal,
    onFleet: async (f) => {
      fleet = f;
    },
    onCommand: (c) => obeyed.push(c),
  });
  // Another client on the broker: what the device answers, and a command published twice.
  const watcher = await mqtt.connectAsync(BROKER, { protocolVersion: 5, clientId: `watch-${run}`, clean: true, reconnectPeriod: 0 });
  const answers: { id: string; status: string; message?: string }[] = [];
  watcher.on('message', (_topic, payload) => answers.push(JSON.parse(payload.toString())));
  await watcher.subscribeAsync(`${run}/+/commandstatus`, { qos: 1 });
  try {
    await waitFor(
      () => 'the fleet',
      async () => fleet.length === 3,
    );
    const [device, rest] = fleet.filter((a) => a.kind === 'reefer');
    assert.ok(device?.mqttUniqueId && rest && !rest.mqttUniqueId, JSON.stringify(fleet));
    const registered = ok(await call('GET', `/devices?assetId=${device.id}`), 200);
    assert.deepEqual(
      registered.map((d: any) => [d.protocol, d.uniqueId]),
      [['mqtt', device.mqttUniqueId]],
      'registered with the uniqueId the service gave',
    );
    const latest = async (assetId: string) => (ok(await call('GET', `/reefer-data?assetId=${assetId}&limit=1`), 200) as any[])[0];
    await waitFor(
      () => 'reefer data over MQTT',
      () => latest(device.id),
    );
    await waitFor(
      () => 'reefer data over REST',
      () => latest(rest.id),
    );
    const statusOf = async (id: string) => ok(await call('GET', `/commands/${id}`), 200);

    const setpoint = ok(await call('POST', '/commands', { assetId: device.id, type: 'SET_TEMPERATURE', parameters: { value: -18 } }), 201);
    const o2 = ok(await call('POST', '/commands', { assetId: device.id, type: 'SET_O2', parameters: { value: 5 } }), 201);
    const other = ok(await call('POST', '/commands', { assetId: rest.id, type: 'START_DEFROST' }), 201);
    await waitFor(
      () => `the MQTT device's answers (${JSON.stringify(answers)})`,
      async () => (await statusOf(setpoint.id)).status === 'ACKNOWLEDGED' && (await statusOf(o2.id)).status === 'FAILED',
      60_000,
    );
    await waitFor(
      () => 'the FAILED answer seen on the broker',
      async () => answers.some((a) => a.id === o2.id),
    );
    assert.deepEqual(
      answers.filter((a) => a.id === o2.id),
      [{ id: o2.id, status: 'FAILED', message: 'This unit has no controlled atmosphere (CA): it cannot take SET_O2.' }],
    );
    await waitFor(
      () => 'the REST reefer’s defrost',
      async () => (await statusOf(other.id)).status === 'ACKNOWLEDGED',
      30_000,
    );
    // The simulator hears of an answer once the service has taken it (its request answered): on a
    // busy machine that can come after the status read above.
    await waitFor(
      () => `the simulator told of three commands (${JSON.stringify(obeyed)})`,
      async () => obeyed.length >= 3,
    );
    assert.deepEqual(
      obeyed.map((c) => [c.id, c.via]).sort(),
      [
        [setpoint.id, 'mqtt'],
        [o2.id, 'mqtt'],
        [other.id, 'rest'],
      ].sort(),
    );
    // The reported set point follows, over MQTT.
    await waitFor(
      () => 'the new set point reported over MQTT',
      async () => (await latest(device.id))?.data.temperatureSetpoint === -18,
      30_000,
    );

    // The same command published again (as after a lost PUBACK): answered again, not applied again.
    const again = {
      id: setpoint.id,
      type: 'SET_TEMPERATURE',
      parameters: { value: -18 },
      whenCreated: setpoint.whenCreated,
      expiresAt: null,
    };
    await watcher.publishAsync(`${run}/${device.mqttUniqueId}/commands`, JSON.stringify(again), { qos: 1 });
    await waitFor(
      () => 'the answer repeated',
      async () => answers.filter((a) => a.id === setpoint.id).length >= 2,
      30_000,
    );
    assert.equal(obeyed.filter((c) => c.id === setpoint.id).length, 1, 'obeyed once');
    assert.equal((await statusOf(setpoint.id)).status, 'ACKNOWLEDGED');
  } finally {
    controller.abort();
    await watcher.endAsync();
  }
  const s = await sim;
  assert.equal(s.errors, 0, s.lastError);
  assert.equal(s.backlog, 0);
  assert.deepEqual(s.mqttDevices, [{ assetId: fleet[1]!.id, uniqueId: fleet[1]!.mqttUniqueId }]);
  assert.deepEqual(s.commands, { acknowledged: 2, failed: 1 });
});
