// Reports (API guide 5, "Reports"), on both databases, against fixtures computed by hand: a route
// with two stops and a trip across the antimeridian; a zone visit still open at the end; a reefer
// excursion shorter than its specification's duration (an excursion, not an alert) and a data
// gap; CSV that a CSV parser reads back to the JSON values (quotes, commas and line breaks in
// names); GeoJSON that a GeoJSON validator accepts; a summary whose range reaches before the raw
// records' expiry, from the rollups; tenancy, formats and the range limit.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { check } from '@placemarkio/check-geojson';
import { parse } from 'csv-parse/sync';
import { haversineMeters } from '../src/zones/geo.js';
import { bad, customer, ok, startApp } from './helpers.js';

const MIN = 60_000;
const HOUR = 3_600_000;
const ta = await startApp(undefined, { RATE_LIMIT_MAX: '100000', DB_POOL_SIZE: '4', REPORT_MAX_DAYS: '10' });
const c = await customer(ta, 'reporter', { base: '/api/v1' });
const stranger = await customer(ta, 'report-stranger', { base: '/api/v1' });
/** Minute 0 of the fixtures: a whole hour two days ago. */
const T0 = Math.floor((Date.now() - 2 * 86_400_000) / HOUR) * HOUR;
const at = (m: number) => new Date(T0 + m * MIN).toISOString();
const range = `from=${at(-60)}&to=${at(180)}`;
const get = (path: string, headers: Record<string, string> = {}) => ta.call('GET', `/api/v1${path}`, { token: c.key, headers });

// The ship (a name a CSV must quote): stopped 15 minutes at Fiji's longitude, sailing east across
// the antimeridian 0.01° a minute, stopped 12 minutes, sailing on.
const shipName = 'MV "Pacific", Voyage 7\nLeg 2';
const ship = await c.asset(shipName);
const route: [number, number, number, number?][] = [];
for (let m = 0; m <= 15; m++) route.push([m, -17, 179.95, 0]); // stop 1: 0..15
for (let m = 16; m <= 25; m++) route.push([m, -17, 179.95 + (m - 15) * 0.01, m === 20 ? 22.5 : 20]); // crosses 180 at minute 20
for (let m = 26; m <= 37; m++) route.push([m, -17, -179.95, 0]); // stop 2: 25..37 (minute 25 is already there)
for (let m = 38; m <= 40; m++) route.push([m, -17, -179.95 + (m - 37) * 0.01, 20]);
const lon = (x: number) => (x > 180 ? x - 360 : x);
ok(
  await c.call(
    'POST',
    '/locations',
    route.map(([m, latitude, longitude, speed]) => ({ assetId: ship, latitude, longitude: lon(longitude), speed, whenCreated: at(m) })),
  ),
  201,
);

test('stops and trips: two stops, the trip between them across the antimeridian, and the trips before and after', async () => {
  const stops = ok(await get(`/reports/stops?assetId=${ship}&${range}`), 200);
  assert.equal(stops.kind, 'stops');
  assert.equal(stops.rawDataFrom, null);
  assert.deepEqual(stops.sources, ['raw']);
  assert.deepEqual(
    stops.items.map((s: any) => [s.start, s.end, s.durationSeconds, s.latitude, s.longitude]),
    [
      [at(0).replace('.000', ''), at(15).replace('.000', ''), 900, -17, 179.95],
      [at(25).replace('.000', ''), at(37).replace('.000', ''), 720, -17, -179.95],
    ],
  );
  const trips = ok(await get(`/reports/trips?assetId=${ship}&${range}`), 200).items;
  assert.equal(trips.length, 2, 'between the stops, and after the last (the first stop starts with the data)');
  const [between, after] = trips;
  assert.deepEqual(between.start, { time: at(15).replace('.000', ''), latitude: -17, longitude: 179.95 });
  assert.deepEqual(between.end, { time: at(25).replace('.000', ''), latitude: -17, longitude: -179.95 });
  assert.equal(between.durationSeconds, 600);
  // Ten steps of 0.01° along the parallel at 17° S: about 10.6 km, not around the world.
  let d = 0;
  for (let m = 16; m <= 25; m++) d += haversineMeters(-17, lon(179.95 + (m - 16) * 0.01), -17, lon(179.95 + (m - 15) * 0.01));
  assert.ok(Math.abs(between.distanceMeters - d) < 0.01, `${between.distanceMeters} vs ${d}`);
  assert.ok(between.distanceMeters > 10_000 && between.distanceMeters < 11_000);
  assert.ok(Math.abs(between.averageSpeed - (d / 600) * 3.6) < 0.01);
  assert.equal(between.maxSpeed, 22.5);
  assert.equal(after.start.time, at(37).replace('.000', ''));
  assert.equal(after.end.time, at(40).replace('.000', ''));

  // GeoJSON: valid, the trip cut at the antimeridian into a MultiLineString, the stops as Points.
  const geo = await get(`/reports/trips?assetId=${ship}&${range}&format=geojson`);
  assert.equal(geo.status, 200);
  assert.match(String(geo.headers['content-type']), /^application\/geo\+json/);
  const doc = check(geo.raw) as any;
  assert.equal(doc.features.length, 2);
  assert.equal(doc.features[0].geometry.type, 'MultiLineString');
  const [west, east] = doc.features[0].geometry.coordinates;
  assert.deepEqual(
    west.at(-1).map((x: number) => Math.round(x * 1e6) / 1e6),
    [180, -17],
  );
  assert.deepEqual(
    east[0].map((x: number) => Math.round(x * 1e6) / 1e6),
    [-180, -17],
  );
  assert.equal(doc.features[0].properties.distanceMeters, between.distanceMeters);
  const points = check((await get(`/reports/stops?assetId=${ship}&${range}`, { accept: 'application/geo+json' })).raw) as any;
  assert.deepEqual(
    points.features.map((f: any) => [f.geometry.type, ...f.geometry.coordinates]),
    [
      ['Point', 179.95, -17],
      ['Point', -179.95, -17],
    ],
  );

  // CSV: a row per trip, nested members as dotted columns, read back to the same values.
  const csv = await get(`/reports/trips?assetId=${ship}&${range}&format=csv`);
  assert.match(String(csv.headers['content-type']), /^text\/csv/);
  assert.equal(csv.headers['report-sources'], 'raw');
  const rows = parse(csv.raw, { columns: true }) as Record<string, string>[];
  assert.deepEqual(Object.keys(rows[0]!), [
    'assetId',
    'start.time',
    'start.latitude',
    'start.longitude',
    'end.time',
    'end.latitude',
    'end.longitude',
    'durationSeconds',
    'distanceMeters',
    'averageSpeed',
    'maxSpeed',
  ]);
  assert.equal(Number(rows[0]!.distanceMeters), between.distanceMeters);
  assert.equal(rows[1]!['end.time'], after.end.time);
});

test('zones: each visit with enter, leave and dwell; one still open at `to` says so', async () => {
  const zoneName = 'Berth "7", North\nQuay';
  const zone = ok(
    await c.call('POST', '/zones', {
      name: zoneName,
      circle: { latitude: 10, longitude: 10, radiusMeters: 1000 },
      enterAfterSeconds: 0,
      leaveAfterSeconds: 0,
    }),
    201,
  );
  const truck = await c.asset('TRUCK-1');
  const visit = [
    [0, 9.9],
    [10, 10], // in: 10..30
    [20, 10],
    [30, 9.9], // out
    [40, 10], // in again from 40, still in at the end
    [50, 10],
  ];
  for (const [m, la] of visit)
    ok(await c.call('POST', '/locations', { assetId: truck, latitude: la, longitude: 10, whenCreated: at(m!) }), 201);
  const r = ok(await get(`/reports/zones?assetId=${truck}&from=${at(0)}&to=${at(45)}`), 200);
  assert.deepEqual(
    r.items.map((v: any) => [v.zoneId, v.zoneName, v.enteredAt, v.leftAt, v.durationSeconds, v.open]),
    [
      [zone.id, zoneName, at(10).replace('.000', ''), at(30).replace('.000', ''), 1200, false],
      [zone.id, zoneName, at(40).replace('.000', ''), null, 300, true],
    ],
  );
  const csv = parse((await get(`/reports/zones?assetId=${truck}&from=${at(0)}&to=${at(45)}`, { accept: 'text/csv' })).raw, {
    columns: true,
  }) as Record<string, string>[];
  assert.equal(csv[0]!.zoneName, zoneName, 'quotes, a comma and a line break survive');
  assert.deepEqual(
    csv.map((x) => [x.leftAt, x.open]),
    [
      [at(30).replace('.000', ''), 'false'],
      ['', 'true'],
    ],
  );
  bad(await get(`/reports/zones?assetId=${truck}&format=geojson`), 400, '/format');
});

test('temperature: an excursion shorter than the specification’s duration is reported, not alerted; a gap counts neither way', async () => {
  const reefer = await c.asset('REEFER-1');
  ok(
    await c.call('POST', '/specifications', {
      assetId: reefer,
      type: 'REEFER',
      settings: { cargo: { settings: { temperatureSetpoint: 5 } } },
      // An alert only after 30 minutes out of range.
      ranges: { cargo: { sensors: { supplyAirTemperature: [2, 8, 30, 0], humidity: [60, 95] } } },
    }),
    201,
  );
  // Every 10 minutes from 0 to 120, no reading between 60 and 100 (a 40-minute gap); supply air out
  // of range from 20 to 40 (20 minutes, under the 30 the specification waits before an alert).
  // In range again from 120 on: a whole hour (120..180) the rollups show was in range throughout.
  const supply: Record<number, number> = { 0: 5, 10: 5.5, 20: 9.1, 30: 10.4, 40: 6, 50: 5, 60: 4, 100: 4.5, 110: 1.5 };
  for (let m = 120; m <= 180; m += 10) supply[m] = 5 + (m % 20) / 10;
  const readings = (assetId: string) =>
    Object.entries(supply).map(([m, v]) => ({
      assetId,
      whenCreated: at(Number(m)),
      data: { supplyAirTemperature: v, cargo: { sensors: { humidity: 80 } } },
    }));
  ok(await c.call('POST', '/reefer-data', readings(reefer)), 201);
  const r = ok(await get(`/reports/temperature?assetId=${reefer}&from=${at(0)}&to=${at(185)}`), 200);
  const supplyRow = r.items.find((x: any) => x.sensor === 'supplyAirTemperature');
  assert.deepEqual(supplyRow.range, [2, 8]);
  assert.equal(supplyRow.setpoint, 5);
  assert.deepEqual(supplyRow.excursions, [
    { start: at(20).replace('.000', ''), end: at(40).replace('.000', ''), durationSeconds: 1200, min: 9.1, max: 10.4 },
    { start: at(110).replace('.000', ''), end: at(120).replace('.000', ''), durationSeconds: 600, min: 1.5, max: 1.5 },
  ]);
  assert.deepEqual(supplyRow.gaps, [{ start: at(60).replace('.000', ''), end: at(100).replace('.000', ''), durationSeconds: 2400 }]);
  // Covered: 0..60 and 100..185 (the last reading holds to `to`): 145 minutes, 30 of them out.
  assert.equal(supplyRow.minutesOutOfRange, 30);
  assert.equal(supplyRow.shareInRange, Math.round((115 / 145) * 1e6) / 1e6);
  // A specification of temperatures only: the hour 120..180 comes from its rollup, not its ten
  // readings (humidity above is not rolled up, so every hour was read raw): the same row.
  const chilled = await c.asset('REEFER-2');
  ok(
    await c.call('POST', '/specifications', {
      assetId: chilled,
      type: 'REEFER',
      ranges: { cargo: { sensors: { supplyAirTemperature: [2, 8] } } },
    }),
    201,
  );
  ok(await c.call('POST', '/reefer-data', readings(chilled)), 201);
  const fast = ok(await get(`/reports/temperature?assetId=${chilled}&from=${at(0)}&to=${at(185)}`), 200).items;
  assert.deepEqual(fast, [{ ...supplyRow, assetId: chilled, setpoint: null }]);
  // The owner's report: its assets in name order (computed a few at a time, answered in order).
  const owners = ok(await get(`/reports/temperature?ownerId=${c.ownerId}&from=${at(0)}&to=${at(185)}`), 200).items;
  assert.deepEqual(
    owners.map((x: any) => [x.assetId, x.sensor]),
    [
      [reefer, 'humidity'], // a specification's keys as stored (JSON objects keep no order)
      [reefer, 'supplyAirTemperature'],
      [chilled, 'supplyAirTemperature'],
    ],
  );
  assert.deepEqual(owners[2], fast[0]);
  assert.equal(supplyRow.rollupHoursOutOfRange, null);
  const humidity = r.items.find((x: any) => x.sensor === 'humidity');
  assert.deepEqual([humidity.excursions, humidity.shareInRange, humidity.setpoint], [[], 1, null]);
  const alerts = ok(await c.call('GET', `/events?assetId=${reefer}&severity=ALERT`), 200);
  assert.equal(alerts.length, 0, 'no alert: the excursions were shorter than the specification’s 30 minutes');
  // CSV: the nested lists as JSON text.
  const csv = parse((await get(`/reports/temperature?assetId=${reefer}&from=${at(0)}&to=${at(185)}&format=csv`)).raw, {
    columns: true,
  }) as Record<string, string>[];
  assert.deepEqual(JSON.parse(csv.find((x) => x.sensor === 'supplyAirTemperature')!.excursions!), supplyRow.excursions);
});

test('summary: distance, records by type, first and last, alerts; before the raw records expired, from the rollups, saying so', async () => {
  // Daily partitions: retention drops a whole partition once it expired.
  const t = await startApp(undefined, { RETENTION_DAYS: '1', RETENTION_GRACE_SECONDS: '0', PARTITION_INTERVAL: 'day', DB_POOL_SIZE: '4' });
  const o = await customer(t, 'summary-owner', { base: '/api/v1' });
  const name = 'Genset "G-1", spare';
  const a = await o.asset(name);
  const now = Date.now();
  const old = Math.floor((now - 3 * 86_400_000) / HOUR) * HOUR; // expired under the 1-day retention
  const recent = Math.floor((now - 3 * HOUR) / HOUR) * HOUR;
  const positions = (t0: number) =>
    [0, 1, 2].map((k) => ({ assetId: a, latitude: 0, longitude: k * 0.01, whenCreated: new Date(t0 + k * MIN).toISOString() }));
  ok(await o.call('POST', '/locations', [...positions(old), ...positions(recent)]), 201);
  ok(await o.call('POST', '/oem-data', { assetId: a, payloadType: 1, data: {}, whenCreated: new Date(old + 5 * MIN).toISOString() }), 201);
  await t.app.services.storage.runRetention(now);
  const step = haversineMeters(0, 0, 0, 0.01);
  const r = ok(
    await t.call('GET', `/api/v1/reports/summary?ownerId=${o.ownerId}&from=${new Date(old - HOUR).toISOString()}`, { token: o.key }),
    200,
  );
  assert.deepEqual(r.sources, ['rollups', 'raw']);
  assert.ok(r.rawDataFrom > new Date(old).toISOString() && r.rawDataFrom < new Date(recent).toISOString(), r.rawDataFrom);
  assert.match(r.notes[0], /expired/);
  assert.equal(r.items.length, 1);
  const s = r.items[0];
  assert.equal(s.assetName, name);
  assert.deepEqual(s.records, { location: 6, sensordata: 0, reeferdata: 0, gensetdata: 0, oemdata: 1 });
  assert.equal(s.firstRecord, new Date(old).toISOString().replace('.000', ''));
  assert.equal(s.lastRecord, new Date(recent + 2 * MIN).toISOString().replace('.000', ''));
  assert.ok(Math.abs(s.distanceMeters - 4 * step) < 0.01, `two steps in each part: ${s.distanceMeters}`);
  const csv = parse((await t.call('GET', `/api/v1/reports/summary?assetId=${a}&format=csv`, { token: o.key })).raw, {
    columns: true,
  }) as Record<string, string>[];
  assert.equal(csv[0]!.assetName, name);
  assert.equal(csv[0]!['records.location'], '6', 'the last 7 days by default: from the rollups and the raw rows');
  assert.equal(
    (await t.call('GET', `/api/v1/reports/summary?assetId=${a}&format=csv`, { token: o.key })).headers['report-sources'],
    'rollups, raw',
  );
});

test('refusals: another owner’s asset or owner is a 404; assetId and ownerId together, a long range, ndjson are 400s', async () => {
  assert.equal((await stranger.call('GET', `/reports/trips?assetId=${ship}`)).status, 404);
  assert.equal((await stranger.call('GET', `/reports/summary?ownerId=${c.ownerId}`)).status, 404);
  bad(await get(`/reports/trips?assetId=${ship}&ownerId=${c.ownerId}`), 400, '/assetId');
  bad(await get('/reports/trips'), 400, '/assetId');
  bad(await get(`/reports/trips?assetId=${ship}&from=${at(-11 * 24 * 60)}&to=${at(0)}`), 400, '/from');
  bad(await get(`/reports/trips?assetId=${ship}&format=ndjson`), 400, '/format');
  bad(await get(`/reports/summary?assetId=${ship}&format=geojson`), 400, '/format');
  bad(await get(`/reports/stops?assetId=${ship}&stopRadiusMeters=0`), 400, '/stopRadiusMeters');
  // The owner's report lists each of its assets.
  const all = ok(await get(`/reports/summary?ownerId=${c.ownerId}&${range}`), 200);
  assert.ok(all.items.some((x: any) => x.assetId === ship && x.records.location === route.length));
});
