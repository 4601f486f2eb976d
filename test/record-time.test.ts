// The record time window (README "Storage", API guide 1), on both databases: a record time older
// than RECORD_MAX_AGE_DAYS or further ahead than FUTURE_TOLERANCE_SECONDS is a 400 naming its field
// on every way in (REST creates, OsmAnd's timestamp, Traccar's fixTime and eventTime; MQTT in
// mqtt-ingest.test.ts), stores nothing and makes no partition; a time JavaScript cannot hold, or
// year 0000, is such a 400 too (it was a 500); a Traccar position carries at most MAX_BULK sensor
// values. And the invariant: whatever is sent, each partitioned table's partition count stays within
// ceil((RECORD_MAX_AGE_DAYS + max(FUTURE_TOLERANCE_SECONDS, 1 day)) / PARTITION_INTERVAL) + 1.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MAX_BULK } from '../src/records/records.js';
import { listPartitions } from '../src/storage/partitions.js';
import { PARTITIONED } from '../src/storage/tables.js';
import { bad, customer, ok, startApp } from './helpers.js';

const DAY = 86_400_000;
const TOKEN = 'traccar-forward-token-0123456789';
// The defaults (RECORD_MAX_AGE_DAYS 366, FUTURE_TOLERANCE_SECONDS 600, weekly partitions).
const ta = await startApp(undefined, { INGEST_TRACCAR_TOKEN: TOKEN, DB_POOL_SIZE: '4' });
const db = () => ta.app.services.db;
const raw = (method: string, path: string, body?: string, headers: Record<string, string> = {}) =>
  ta.call(method, path, { ...(body === undefined ? {} : { body }), headers });

/** Each partitioned table's partition count. */
async function partitionCounts(): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const t of PARTITIONED) out[t.name] = (await listPartitions(db(), t.name)).length;
  return out;
}
const atStart = await partitionCounts();

/** Rows of `table` for `assetId`, counted in the database (every partition). */
async function rows(table: string, assetId: string): Promise<number> {
  const { rows } = await db().query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE asset_id = $1`, [assetId]);
  return rows[0]!.n;
}

const iso = (ms: number) => new Date(ms).toISOString();
const MAX_AGE_DAYS = ta.cfg.RECORD_MAX_AGE_DAYS;

test('REST: a record time past the window (1970, 9999, too far ahead) is a 400 naming the record; nothing stored, no partition made', async () => {
  assert.equal(MAX_AGE_DAYS, 366, 'the default');
  const c = await customer(ta, 'rt-rest');
  const assetId = await c.asset('rt-truck');
  const before = await partitionCounts();
  // The probe: 300 locations a week apart from 1970 (it made 300 partitions per table).
  const weekly = Array.from({ length: 300 }, (_, i) => ({ assetId, latitude: 1, longitude: 1, whenCreated: iso(i * 7 * DAY) }));
  bad(await c.call('POST', '/api/v1/locations', weekly), 400, '/0/whenCreated', '1970 bulk');
  // One bad time among good ones: the bulk is refused whole, naming its index.
  const now = Date.now();
  const mixed = [
    { assetId, latitude: 1, longitude: 1, whenCreated: iso(now - 60_000) },
    { assetId, latitude: 1, longitude: 1, whenCreated: iso(now - (MAX_AGE_DAYS + 1) * DAY) },
  ];
  const refused = await c.call('POST', '/api/v1/locations', mixed);
  bad(refused, 400, '/1/whenCreated', 'a day past the window');
  assert.match(refused.body.message, /RECORD_MAX_AGE_DAYS/);
  for (const whenCreated of ['9999-12-31T23:59:59Z', '2999-01-01T00:00:00Z', iso(now + 3600_000)]) {
    const r = await c.call('POST', '/api/v1/locations', { assetId, latitude: 1, longitude: 1, whenCreated });
    bad(r, 400, '/whenCreated', whenCreated);
    assert.match(r.body.message, /FUTURE_TOLERANCE_SECONDS/);
  }
  bad(
    await c.call('POST', '/api/v1/sensor-data', [
      { assetId, sensorId: 't', type: 'TEMPERATURE', value: 1, whenCreated: iso(now) },
      { assetId, sensorId: 't', type: 'TEMPERATURE', value: 1, whenCreated: '1971-03-04T10:00:00Z' },
    ]),
    400,
    '/1/whenCreated',
  );
  assert.equal(await rows('locations', assetId), 0);
  assert.equal(await rows('sensor_data', assetId), 0);
  assert.deepEqual(await partitionCounts(), before, 'no partition made');
  // Inside the window: a device's year-old backlog is stored.
  ok(
    await c.call('POST', '/api/v1/locations', [
      { assetId, latitude: 1, longitude: 1, whenCreated: iso(now - (MAX_AGE_DAYS - 1) * DAY) },
      { assetId, latitude: 1, longitude: 1, whenCreated: iso(now + 60_000) },
    ]),
    201,
  );
  assert.equal(await rows('locations', assetId), 2);
});

test('OsmAnd: a timestamp past the window, beyond a JavaScript date or of year 0000 is a 400 naming it (not a 500); nothing stored', async () => {
  const c = await customer(ta, 'rt-osmand');
  const assetId = await c.asset('rt-phone');
  const device = ok(await c.call('POST', '/api/v1/devices', { assetId, protocol: 'osmand' }), 201);
  const before = await partitionCounts();
  const q = (timestamp: string) => `/ingest/osmand?id=${device.uniqueId}&lat=52&lon=4&batt=80&timestamp=${encodeURIComponent(timestamp)}`;
  for (const timestamp of [
    '99999999999999999999', // was a 500 (RangeError)
    '9999999999999999', // past 8.64e15 ms
    '0000-01-01 00:00:00', // was a 500 (the partition's DDL)
    '0000-01-01T00:00:00Z',
    '1902-01-01 00:00:00',
    '1902-01-01T00:00:00Z',
    '0', // 1970
    String(Math.floor((Date.now() - (MAX_AGE_DAYS + 1) * DAY) / 1000)),
    '9999-12-31T23:59:59Z',
    String(Date.now() + 3600_000), // ms, an hour ahead
  ]) {
    bad(await raw('GET', q(timestamp)), 400, '/timestamp', timestamp);
  }
  // The JSON of Traccar Client 9.
  const json = (timestamp: string) =>
    raw(
      'POST',
      '/ingest/osmand',
      JSON.stringify({ device_id: device.uniqueId, location: { timestamp, coords: { latitude: 52, longitude: 4 } } }),
      { 'content-type': 'application/json' },
    );
  bad(await json('0000-01-01T00:00:00Z'), 400, '/location/timestamp');
  bad(await json('1902-06-01T00:00:00+01:00'), 400, '/location/timestamp');
  assert.equal(await rows('locations', assetId), 0);
  assert.equal(await rows('oem_data', assetId), 0);
  assert.deepEqual(await partitionCounts(), before, 'no partition made');
  const errors = ok(await ta.call('GET', `/api/v1/ingest/errors?uniqueId=${device.uniqueId}&limit=100`, { token: ta.adminToken }), 200);
  assert.ok(
    errors.some((e: any) => /RECORD_MAX_AGE_DAYS/.test(e.reason)),
    'in the error log with its reason',
  );
  // Inside the window it is stored.
  assert.equal((await raw('GET', q(String(Math.floor(Date.now() / 1000) - 30 * 86_400)))).status, 200);
  assert.equal(await rows('locations', assetId), 1);
});

test(`Traccar: a fixTime or eventTime past the window is a 400 naming it; more than ${MAX_BULK} sensor values is a 400 storing nothing`, async () => {
  const c = await customer(ta, 'rt-traccar');
  const assetId = await c.asset('rt-reefer');
  const uniqueId = 'rt-imei-000000000001';
  ok(await ta.call('POST', '/api/v1/devices', { token: ta.adminToken, body: { assetId, protocol: 'traccar', uniqueId } }), 201);
  const post = (body: unknown) =>
    raw('POST', '/ingest/traccar', JSON.stringify(body), { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` });
  const position = (fixTime: string, attributes: Record<string, unknown> = { temp1: 4.5, door: 'open' }) => ({
    position: { fixTime, valid: true, latitude: 53.5, longitude: 9.9, attributes },
    device: { uniqueId },
  });
  const before = await partitionCounts();
  for (const fixTime of ['0000-01-01T00:00:00Z', '1902-01-01T00:00:00+00:00', '9999-12-31T00:00:00Z']) {
    bad(await post(position(fixTime)), 400, '/position/fixTime', fixTime);
  }
  bad(
    await post({ event: { type: 'alarm', eventTime: '1950-01-01T00:00:00Z', attributes: {} }, device: { uniqueId } }),
    400,
    '/event/eventTime',
  );
  // The probe: 20,000 temperatures in one forward (it stored 20,000 sensor records).
  const many = Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`temp${i + 1}`, i / 10]));
  bad(await post(position(iso(Date.now()), many)), 400, '/position/attributes', '20,000 attributes');
  bad(
    await post(position(iso(Date.now()), Object.fromEntries(Object.entries(many).slice(0, MAX_BULK + 1)))),
    400,
    '/position/attributes',
    'one past the bound',
  );
  for (const table of ['locations', 'sensor_data', 'oem_data']) assert.equal(await rows(table, assetId), 0, `nothing in ${table}`);
  assert.deepEqual(await partitionCounts(), before, 'no partition made');
  // At the bound, the whole position is stored.
  assert.equal((await post(position(iso(Date.now()), Object.fromEntries(Object.entries(many).slice(0, MAX_BULK))))).status, 204);
  assert.equal(await rows('sensor_data', assetId), MAX_BULK);
  assert.equal(await rows('locations', assetId), 1);
});

test('the invariant: with the window filled a week apart, and everything above refused, each table stays within its bound', async () => {
  const c = await customer(ta, 'rt-fill');
  const assetId = await c.asset('rt-ship');
  const now = Date.now();
  // A voyage's backlog: one location a week across the whole window, alerts' tables and rollups with it.
  const weeks = Math.floor(MAX_AGE_DAYS / 7);
  const backlog = Array.from({ length: weeks + 1 }, (_, i) => ({
    assetId,
    latitude: 1,
    longitude: 1,
    whenCreated: iso(now - (MAX_AGE_DAYS - 1) * DAY + i * 7 * DAY),
  }));
  ok(await c.call('POST', '/api/v1/locations', backlog), 201);
  bad(
    await c.call('POST', '/api/v1/locations', [{ assetId, latitude: 1, longitude: 1, whenCreated: iso(now - (MAX_AGE_DAYS + 7) * DAY) }]),
    400,
    '/0/whenCreated',
  );
  const ahead = Math.max(ta.cfg.FUTURE_TOLERANCE_SECONDS * 1000, DAY);
  const bound = Math.ceil((MAX_AGE_DAYS * DAY + ahead) / (7 * DAY)) + 1;
  const counts = await partitionCounts();
  for (const t of PARTITIONED) {
    assert.ok(counts[t.name]! <= bound, `${t.name}: ${counts[t.name]} partitions, at most ${bound} (at start ${atStart[t.name]})`);
  }
  assert.ok(counts.locations! > atStart.locations!, 'the backlog made its partitions');
  // Every partition lies (at least partly) in the window.
  for (const t of PARTITIONED) {
    for (const p of await listPartitions(db(), t.name)) {
      assert.ok(p.hi > now - MAX_AGE_DAYS * DAY - 7 * DAY && p.lo <= now + ahead, `${t.name}: ${p.name} outside the window`);
    }
  }
});
