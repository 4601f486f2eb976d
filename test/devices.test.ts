// Devices and the HTTP adapters (API guide 15), on both databases: devices with the asset's
// tenancy, a generated uniqueId (choosing one needs admin), 409 for a taken one; the OsmAnd
// protocol in the Traccar Client's three forms (query, form, JSON) with samples from Traccar's own
// decoder test; Traccar's JSON forwarding of a position and of an event; refusals (unknown,
// disabled, bad values, no token) stored nowhere and in the ingest error log; and the one store
// path: a position from a device gets its zone like a REST one.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { bad, customer, ok, startApp } from './helpers.js';

const TOKEN = 'traccar-forward-token-0123456789';
// The samples are Traccar's own (2016..2025): a window wide enough for them (record-time.test.ts tests the default).
const ta = await startApp(undefined, { INGEST_TRACCAR_TOKEN: TOKEN, RECORD_MAX_AGE_DAYS: '36500' });
const admin = (method: string, path: string, body?: unknown) =>
  ta.call(method, `/api/v1${path}`, { token: ta.adminToken, ...(body === undefined ? {} : { body }) });
const raw = (method: string, path: string, body?: string, headers: Record<string, string> = {}) =>
  ta.call(method, path, { ...(body === undefined ? {} : { body }), headers });

async function fleet(label: string, protocol: 'osmand' | 'traccar' = 'osmand') {
  const c = await customer(ta, label);
  const assetId = await c.asset(`${label}-truck`);
  const device = ok(await c.call('POST', '/api/v1/devices', { assetId, protocol }), 201, 'device');
  const records = async (path: string) =>
    ok(await c.call('GET', `/api/v1${path}?assetId=${assetId}&from=2000-01-01T00:00:00Z&order=asc`), 200);
  return { c, assetId, device, records };
}

test('devices: tenancy as the asset’s, a generated uniqueId, choosing one needs admin, a taken one is a 409', async () => {
  const { c, assetId, device } = await fleet('dev-crud');
  assert.match(device.uniqueId, /^[a-z2-9]{24}$/, 'generated: 24 characters');
  assert.equal(device.assetId, assetId);
  assert.equal(device.disabled, false);
  assert.equal(device.lastSeenAt, null);
  const other = await customer(ta, 'dev-stranger');
  assert.equal((await other.call('GET', `/api/v1/devices/${device.id}`)).status, 404);
  bad(await other.call('POST', '/api/v1/devices', { assetId, protocol: 'osmand' }), 404, '/assetId');
  assert.equal(ok(await other.call('GET', '/api/v1/devices'), 200).length, 0);
  // A customer may not choose a uniqueId (an IMEI of another fleet's tracker); an operator may.
  bad(await c.call('POST', '/api/v1/devices', { assetId, protocol: 'traccar', uniqueId: '353861053849681' }), 403, undefined);
  const imei = ok(await admin('POST', '/devices', { assetId, protocol: 'traccar', uniqueId: '353861053849681' }), 201);
  assert.equal(imei.uniqueId, '353861053849681');
  bad(await admin('POST', '/devices', { assetId, protocol: 'osmand', uniqueId: '353861053849681' }), 409, '/uniqueId');
  bad(await admin('POST', '/devices', { assetId, protocol: 'osmand', uniqueId: 'a/b' }), 400, '/uniqueId');
  bad(await c.call('POST', '/api/v1/devices', { assetId, protocol: 'gt06' }), 400, '/protocol');
  assert.deepEqual(
    ok(await c.call('GET', `/api/v1/devices?protocol=traccar`), 200).map((d: any) => d.id),
    [imei.id],
  );
  const off = ok(await c.call('PATCH', `/api/v1/devices/${device.id}`, { disabled: true }), 200);
  assert.equal(off.disabled, true);
  bad(await c.call('PATCH', `/api/v1/devices/${device.id}`, { uniqueId: 'mine' }), 403, undefined);
  assert.equal((await c.call('DELETE', `/api/v1/devices/${imei.id}`)).status, 204);
  assert.equal((await c.call('GET', `/api/v1/devices/${imei.id}`)).status, 404);
  // The audit log has the changes, never the uniqueId (for OsmAnd, the device's credential).
  const log = ok(await admin('GET', `/audit?resourceType=device`), 200);
  assert.ok(log.length >= 3);
  assert.ok(!JSON.stringify(log).includes(device.uniqueId), 'no uniqueId in the audit log');
});

test('OsmAnd: the query of the legacy apps, the form of the current client and the JSON of Traccar Client 9', async () => {
  const { device, records } = await fleet('dev-osmand');
  const id = device.uniqueId;
  // OsmAndProtocolDecoderTest's first sample (speed 0 knots), as a GET.
  const a = await raw(
    'GET',
    `/ingest/osmand?id=${id}&lat=42.06288&lon=-88.23412&timestamp=2016-01-27T18%3A55%3A47Z&hdop=6.0&altitude=224.0&speed=0.0`,
  );
  assert.equal(a.status, 200);
  assert.equal(a.raw, '', 'an empty 200, as Traccar answers');
  // The legacy Android app: POST with everything in the query; Unix seconds, knots, batt in percent.
  ok(
    await raw(
      'POST',
      `/ingest/osmand?id=${id}&timestamp=1504763810&lat=40.7232948571&lon=-74.0061408571&bearing=7.19889788244&speed=40&ignition=true&rpm=933&fuel=24&batt=87`,
    ),
    200,
  );
  // The current client (traccar_client_sdk): a form body.
  ok(
    await raw(
      'POST',
      '/ingest/osmand',
      `id=${id}&lat=37.4219983&lon=-122.084&timestamp=1749995112&accuracy=5.0&altitude=5.0&speed=10.0&bearing=90.0&batt=87&charge=true`,
      {
        'content-type': 'application/x-www-form-urlencoded',
      },
    ),
    200,
  );
  // Traccar Client 9's JSON (OsmAndProtocolDecoderTest), speed in m/s, battery 0..1.
  const json = {
    location: {
      event: 'motionchange',
      is_moving: false,
      uuid: '0e9a2473-a9a7-4c00-997b-fb97d2154e75',
      timestamp: '2021-07-21T08:06:34.444Z',
      odometer: 0,
      coords: {
        latitude: -6.1148096,
        longitude: 106.6837015,
        accuracy: 3.8,
        speed: 18.67,
        speed_accuracy: 0.26,
        heading: 63,
        altitude: 35.7,
      },
      activity: { type: 'still', confidence: 100 },
      battery: { is_charging: false, level: 0.79 },
      extras: {},
    },
    device_id: id,
  };
  ok(await raw('POST', '/ingest/osmand', JSON.stringify(json), { 'content-type': 'application/json' }), 200);

  const locs = await records('/locations');
  assert.deepEqual(
    locs.map((l: any) => [l.whenCreated, l.latitude, l.longitude, l.altitude, l.heading, l.speed]),
    [
      ['2016-01-27T18:55:47Z', 42.06288, -88.23412, 224, null, 0],
      ['2017-09-07T05:56:50Z', 40.723295, -74.006141, null, 7.2, 74.08],
      ['2021-07-21T08:06:34Z', -6.11481, 106.683702, 35.7, 63, 67.212],
      ['2025-06-15T13:45:12Z', 37.421998, -122.084, 5, 90, 18.52],
    ],
  );
  const oem = await records('/oem-data');
  assert.deepEqual(
    oem.map((o: any) => [o.payloadType, o.data]),
    [
      [5055, { hdop: 6 }],
      [5055, { ignition: true, rpm: 933, fuel: 24, batteryLevel: 87 }],
      [5055, { odometer: 0, event: 'motionchange', accuracy: 3.8, batteryLevel: 79, charge: false, motion: false, activity: 'still' }],
      [5055, { accuracy: 5, batteryLevel: 87, charge: true }],
    ],
  );
  const seen = ok(await admin('GET', `/devices/${device.id}`), 200);
  assert.ok(seen.lastSeenAt, 'last seen');
});

test('OsmAnd refusals: a bad value stores nothing (400), an unknown or disabled id is a 404 and never an asset; all in the error log', async () => {
  const { c, device, records } = await fleet('dev-refuse');
  const id = device.uniqueId;
  bad(await raw('GET', `/ingest/osmand?id=${id}&lat=north&lon=5`), 400, '/lat');
  bad(await raw('GET', `/ingest/osmand?id=${id}&lat=95&lon=5`), 400, '/latitude');
  bad(await raw('GET', `/ingest/osmand?id=${id}&lat=1&lon=5&timestamp=yesterday`), 400, '/timestamp');
  bad(await raw('GET', `/ingest/osmand?lat=1&lon=5`), 400, '/id');
  bad(
    await raw('POST', '/ingest/osmand', '{"location": {"timestamp": "2021-07-21T08:06:34.444Z"}}', { 'content-type': 'application/json' }),
    400,
    '/device_id',
  );
  const assetsBefore = ok(await admin('GET', '/assets?limit=1000'), 200).length;
  bad(await raw('GET', `/ingest/osmand?id=no-such-device-000000&lat=1&lon=5`), 404, undefined);
  ok(await c.call('PATCH', `/api/v1/devices/${device.id}`, { disabled: true }), 200);
  bad(await raw('GET', `/ingest/osmand?id=${id}&lat=1&lon=5`), 404, undefined);
  assert.equal(ok(await admin('GET', '/assets?limit=1000'), 200).length, assetsBefore, 'no asset made');
  assert.equal((await records('/locations')).length, 0, 'nothing stored');
  // A Traccar device's id on the OsmAnd port is refused too.
  const imei = ok(await admin('POST', '/devices', { assetId: device.assetId, protocol: 'traccar', uniqueId: 'imei-000000000000001' }), 201);
  bad(await raw('GET', `/ingest/osmand?id=${imei.uniqueId}&lat=1&lon=5`), 404, undefined);

  const errors = ok(await admin('GET', '/ingest/errors?protocol=osmand&limit=100'), 200);
  const reasons = errors.map((e: any) => e.reason.split(':')[0]);
  for (const r of ['bad message', 'unknown device', 'disabled device', 'wrong protocol'])
    assert.ok(reasons.includes(r), `${r} logged: ${reasons}`);
  const unknown = errors.find((e: any) => e.uniqueId === 'no-such-device-000000');
  assert.match(unknown.sample, /lat=1&lon=5/);
  assert.equal(unknown.deviceId, null);
  assert.equal((await c.call('GET', '/api/v1/ingest/errors')).status, 403, 'admin only');
  assert.match(ok(await admin('GET', `/devices/${device.id}`), 200).lastError, /^disabled device/);
  const metrics = (await ta.call('GET', '/metrics')).raw;
  assert.match(metrics, /ingest_refused_total\{protocol="osmand",reason="unknown device"\} [1-9]/);
});

test('Traccar forwarding: a position with its attributes, an event; the bearer token is required', async () => {
  const { assetId, records } = await fleet('dev-traccar');
  const device = ok(await admin('POST', '/devices', { assetId, protocol: 'traccar', uniqueId: '861001000719969' }), 201);
  const dev = {
    id: 7,
    attributes: {},
    groupId: 0,
    name: 'Truck',
    uniqueId: device.uniqueId,
    status: 'online',
    lastUpdate: '2025-06-15T13:44:13.000+00:00',
    positionId: 41,
    phone: null,
    model: null,
    contact: null,
    category: null,
    disabled: false,
    expirationTime: null,
  };
  // PositionForwarderJson's body (PositionData), as Traccar's Jackson writes it.
  const position = {
    position: {
      id: 0,
      attributes: {
        event: 'motionchange',
        motion: false,
        odometer: 1200,
        batteryLevel: 100,
        battery: 12.6,
        temp1: -18.5,
        fuel: 41.2,
        ignition: true,
        distance: 0.0,
        totalDistance: 5200.5,
      },
      deviceId: 7,
      protocol: 'teltonika',
      serverTime: '2025-06-15T13:45:13.120+00:00',
      deviceTime: '2025-06-15T13:45:12.862+00:00',
      fixTime: '2025-06-15T13:45:12.862+00:00',
      valid: true,
      latitude: 51.9225,
      longitude: 4.47917,
      altitude: 5.0,
      speed: 10.0,
      course: 270.0,
      address: null,
      accuracy: 0.0,
      network: null,
      geofenceIds: null,
    },
    device: dev,
  };
  const post = (body: unknown, token = TOKEN) =>
    raw('POST', '/ingest/traccar', JSON.stringify(body), { 'content-type': 'application/json', authorization: `Bearer ${token}` });
  bad(await raw('POST', '/ingest/traccar', JSON.stringify(position), { 'content-type': 'application/json' }), 401, undefined);
  bad(await post(position, 'wrong-token-000000000000'), 401, undefined);
  assert.equal((await post(position)).status, 204);
  const [loc] = await records('/locations');
  assert.deepEqual(
    [loc.whenCreated, loc.latitude, loc.longitude, loc.altitude, loc.heading, loc.speed],
    ['2025-06-15T13:45:12Z', 51.9225, 4.47917, 5, 270, 18.52],
  );
  const sensors = await records('/sensor-data');
  assert.deepEqual(sensors.map((s: any) => [s.sensorId, s.type, s.value]).sort(), [
    ['battery', 'BATTERY_VOLTAGE', 12.6],
    ['fuel', 'FUEL_LEVEL', 41.2],
    ['temp1', 'TEMPERATURE', -18.5],
  ]);
  const [rest] = await records('/oem-data');
  assert.equal(rest.payloadType, 8082);
  assert.deepEqual(rest.data, {
    event: 'motionchange',
    motion: false,
    odometer: 1200,
    batteryLevel: 100,
    ignition: true,
    distance: 0,
    totalDistance: 5200.5,
  });
  // EventForwarderJson's body (EventData): stored as OEM data; its position came on its own.
  const event = {
    event: {
      id: 99,
      attributes: { alarm: 'sos' },
      deviceId: 7,
      type: 'alarm',
      eventTime: '2025-06-15T13:46:40.000+00:00',
      positionId: 42,
      geofenceId: 0,
      maintenanceId: 0,
    },
    position: position.position,
    device: dev,
  };
  assert.equal((await post(event)).status, 204);
  const oem = await records('/oem-data');
  assert.deepEqual(oem[1].payloadType, 8083);
  assert.deepEqual(oem[1].data, { type: 'alarm', eventTime: '2025-06-15T13:46:40.000+00:00', attributes: { alarm: 'sos' } });
  assert.equal((await records('/locations')).length, 1, 'the event’s position is not stored twice');
  // Bad ones: stored nowhere.
  bad(await post({ ...position, position: { ...position.position, latitude: 'north' } }), 400, '/position/latitude');
  bad(await post({ ...position, device: { ...dev, uniqueId: 'unknown-000000000' } }), 404, undefined);
  bad(await post({ position: position.position }), 400, '/device/uniqueId');
});

test('one store path: a device’s position gets its zone and its owner’s tenancy like a REST one', async () => {
  const { c, device, records } = await fleet('dev-zone');
  const zone = ok(
    await c.call('POST', '/api/v1/zones', { name: 'Depot', circle: { latitude: 51.8, longitude: 4.6, radiusMeters: 500 } }),
    201,
  );
  ok(await raw('GET', `/ingest/osmand?id=${device.uniqueId}&lat=51.8&lon=4.6`), 200);
  const [loc] = await records('/locations');
  assert.equal(loc.zoneId, zone.id);
  assert.equal(loc.ownerId, (ok(await c.call('GET', `/api/v1/assets/${device.assetId}`), 200) as any).ownerId);
});

test('a device has a limit of its own: past DEVICE_RATE_LIMIT_MAX a minute, 429 with Retry-After, counted; other devices go on', async () => {
  const t = await startApp(undefined, { DEVICE_RATE_LIMIT_MAX: '3' });
  const c = await customer(t, 'dev-limit');
  const assetId = await c.asset('dev-limit-truck');
  const [a, b] = [
    ok(await c.call('POST', '/api/v1/devices', { assetId, protocol: 'osmand' }), 201),
    ok(await c.call('POST', '/api/v1/devices', { assetId, protocol: 'osmand' }), 201),
  ];
  for (let i = 0; i < 3; i++) ok(await t.call('GET', `/ingest/osmand?id=${a.uniqueId}&lat=1&lon=${i}`), 200);
  const refused = await t.call('GET', `/ingest/osmand?id=${a.uniqueId}&lat=1&lon=9`);
  bad(refused, 429, undefined);
  assert.ok(Number(refused.headers['retry-after']) >= 1, 'Retry-After');
  ok(await t.call('GET', `/ingest/osmand?id=${b.uniqueId}&lat=1&lon=9`), 200);
  const stored = ok(await c.call('GET', `/api/v1/locations?assetId=${assetId}&from=2000-01-01T00:00:00Z`), 200);
  assert.equal(stored.length, 4, 'the refused message stored nothing');
  assert.match((await t.call('GET', '/metrics')).raw, /ingest_refused_total\{protocol="osmand",reason="rate limited"\} 1/);
});

test('guessed device ids write a bounded number of error log rows (INGEST_UNKNOWN_ERRORS_PER_ADDRESS a minute); a real device’s error in the flood is logged', async (t) => {
  const app = await startApp(t);
  const c = await customer(app, 'dev-flood');
  const assetId = await c.asset('dev-flood-truck');
  const device = ok(await c.call('POST', '/api/v1/devices', { assetId, protocol: 'osmand' }), 201);
  const db = app.app.services.db;
  const rows = async (like: string) =>
    Number((await db.query<{ n: number }>('SELECT count(*)::int AS n FROM ingest_errors WHERE unique_id LIKE $1', [like])).rows[0]!.n);
  const guesses = 2000;
  const minute = () => Math.floor(Date.now() / 60_000);
  const first = minute();
  let next = 0;
  const one = async () => {
    for (let i = next++; i < guesses; i = next++) {
      bad(await app.call('GET', `/ingest/osmand?id=guess-${i}&lat=1&lon=5`), 404, undefined);
      // Halfway, the real device sends a bad position: its error is logged whatever the flood.
      if (i === guesses / 2) bad(await app.call('GET', `/ingest/osmand?id=${device.uniqueId}&lat=95&lon=5`), 400, '/latitude');
    }
  };
  await Promise.all(Array.from({ length: 8 }, one));
  const minutes = minute() - first + 1;
  const logged = await rows('guess-%');
  assert.ok(
    logged >= 1 && logged <= 10 * minutes,
    `${logged} rows for ${guesses} guesses over ${minutes} minute(s) (the old code: up to 100 a second)`,
  );
  assert.equal(await rows(device.uniqueId), 1, 'the real device’s error is in the log');
  assert.match(ok(await app.call('GET', `/api/v1/devices/${device.id}`, { token: app.adminToken }), 200).lastError, /^bad message/);
  const metrics = (await app.call('GET', '/metrics')).raw;
  assert.match(metrics, new RegExp(`ingest_errors_unlogged_total\\{protocol="osmand",device="unknown"\\} ${guesses - logged}\\b`));
  assert.match(metrics, new RegExp(`ingest_refused_total\\{protocol="osmand",reason="unknown device"\\} ${guesses}\\b`));
});
