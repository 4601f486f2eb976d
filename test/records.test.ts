// Data records (API guide 1, 4, 5 and 8): every field rule answers a 400
// naming the exact field and stores nothing; bulk is all or nothing; paging is exact while rows
// arrive; another owner's records are invisible; every stored record reaches the event log in its
// push shape, in the same transaction.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BOUNDS } from '../src/bounds.js';
import { ownerWithKey, startApp, type TestApp } from './helpers.js';

async function setup(t: Parameters<typeof startApp>[0]) {
  const ta = await startApp(t);
  const a = await ownerWithKey(ta, 'fleet-a');
  const asset = await ta.call('POST', '/api/v1/assets', { token: a.key, body: { name: 'MSKU0000001' } });
  return { ta, key: a.key, ownerId: a.ownerId, assetId: asset.body.id as string };
}

const TABLES: Record<string, string> = {
  '/api/v1/locations': 'locations',
  '/api/v1/sensor-data': 'sensor_data',
  '/api/v1/reefer-data': 'reefer_data',
  '/api/v1/genset-data': 'genset_data',
  '/api/v1/oem-data': 'oem_data',
};

/** Everything stored: the rows of the path's table (every owner's) and the event log, counted in SQL. */
async function count(ta: TestApp, path: string): Promise<{ rows: number; eventLog: number }> {
  const table = TABLES[path];
  assert.ok(table, `no table for ${path}`);
  const { rows } = await ta.app.services.db.query<{ rows: number; eventLog: number }>(
    `SELECT (SELECT count(*) FROM ${table})::int AS rows, (SELECT count(*) FROM event_log)::int AS "eventLog"`,
  );
  return rows[0]!;
}

/** Posts `body`, expects a 400 naming `field`, and checks nothing was stored. */
async function rejects(ta: TestApp, key: string, path: string, body: unknown, field: string) {
  const before = await count(ta, path);
  const r = await ta.call('POST', path, { token: key, body });
  assert.equal(r.status, 400, `${JSON.stringify(body).slice(0, 200)} -> ${r.raw}`);
  assert.equal(r.body.field, field, r.raw);
  assert.ok(typeof r.body.error === 'string' && typeof r.body.message === 'string');
  assert.deepEqual(await count(ta, path), before, 'nothing stored');
}

const past = (sec: number) => new Date(Date.now() - sec * 1000).toISOString();

test('location field rules: ranges (API guide 8 coordinates), types, sizes, future time, NUL, ownerId; 6 decimals kept', async (t) => {
  const { ta, key, assetId, ownerId } = await setup(t);
  const ok = { assetId, latitude: 53.5, longitude: 9.9 };
  const path = '/api/v1/locations';
  for (const [patch, field] of [
    [{ latitude: 90.000001 }, '/latitude'],
    [{ latitude: -90.1 }, '/latitude'],
    [{ longitude: 180.5 }, '/longitude'],
    [{ longitude: -181 }, '/longitude'],
    [{ altitude: 100000 }, '/altitude'],
    [{ altitude: -99999.991 }, '/altitude'],
    [{ heading: 1000 }, '/heading'],
    [{ heading: -999.91 }, '/heading'],
    [{ speed: 999.9991 }, '/speed'],
    [{ speed: -1000 }, '/speed'],
    [{ latitude: '53.5' }, '/latitude'],
    [{ zoneId: 'x'.repeat(101) }, '/zoneId'],
    [{ zoneId: 'a\u0000b' }, '/zoneId'],
    [{ whenCreated: new Date(Date.now() + 11 * 60_000).toISOString() }, '/whenCreated'],
    [{ whenCreated: 'yesterday' }, '/whenCreated'],
    [{ whenCreated: '2026-11-22T10:00:00' }, '/whenCreated'], // no offset
    [{ ownerId: '00000000-0000-4000-8000-000000000000' }, '/ownerId'],
    [{ assetId: 'not-a-uuid' }, '/assetId'],
  ] as const) {
    await rejects(ta, key, path, { ...ok, ...patch }, field);
  }
  for (const missing of ['latitude', 'longitude', 'assetId']) {
    const body: Record<string, unknown> = { ...ok };
    delete body[missing];
    await rejects(ta, key, path, body, `/${missing}`);
  }
  // Inclusive bounds, rounding, a time just inside the future tolerance, ownerId equal to the asset's.
  const r = await ta.call('POST', path, {
    token: key,
    body: {
      ...ok,
      latitude: 90,
      longitude: -180,
      altitude: 99999.99,
      heading: -999.9,
      speed: 999.999,
      ownerId,
      whenCreated: new Date(Date.now() + 9 * 60_000).toISOString(),
    },
  });
  assert.equal(r.status, 201, r.raw);
  const r2 = await ta.call('POST', path, { token: key, body: { ...ok, latitude: 12.3456789, longitude: 121.4737021234 } });
  assert.equal(r2.body.latitude, 12.345679);
  assert.equal(r2.body.longitude, 121.473702, 'Shanghai is accepted (API guide 8 deviation)');
  assert.match(r2.body.id, /^\d+$/);
  assert.match(r2.headers.location as string, new RegExp(`/api/v1/locations/${r2.body.id}$`));
  assert.equal((await ta.call('GET', `/api/v1/locations/${r2.body.id}`, { token: key })).body.latitude, 12.345679);
});

test('sensor, reefer, genset and OEM data field rules', async (t) => {
  const { ta, key, assetId } = await setup(t);
  const sensor = { assetId, sensorId: 's-1', type: 'TEMPERATURE', value: 4.5 };
  await rejects(ta, key, '/api/v1/sensor-data', { ...sensor, type: 'LOUDNESS' }, '/type');
  await rejects(ta, key, '/api/v1/sensor-data', { ...sensor, sensorId: 'x'.repeat(37) }, '/sensorId');
  await rejects(ta, key, '/api/v1/sensor-data', { ...sensor, sensorType: 'x'.repeat(37) }, '/sensorType');
  await rejects(ta, key, '/api/v1/sensor-data', { ...sensor, value: true }, '/value');
  await rejects(ta, key, '/api/v1/sensor-data', { ...sensor, value: undefined }, '/value');
  await rejects(ta, key, '/api/v1/sensor-data', { ...sensor, whenCreated: new Date(Date.now() + 3600_000).toISOString() }, '/whenCreated');
  for (const type of [
    'TEMPERATURE',
    'HUMIDITY',
    'X_ACCELERATION',
    'Y_ACCELERATION',
    'Z_ACCELERATION',
    'FUEL_LEVEL',
    'X_PEAK_ACCELERATION',
    'Y_PEAK_ACCELERATION',
    'Z_PEAK_ACCELERATION',
    'BATTERY_VOLTAGE',
    'EXTERNAL_POWER_VOLTAGE',
    'PRESSURE',
  ]) {
    assert.equal((await ta.call('POST', '/api/v1/sensor-data', { token: key, body: { ...sensor, type } })).status, 201, type);
  }
  const text = await ta.call('POST', '/api/v1/sensor-data', { token: key, body: { ...sensor, value: 'OPEN' } });
  assert.equal(text.body.value, 'OPEN');
  const filtered = await ta.call('GET', '/api/v1/sensor-data?type=HUMIDITY', { token: key });
  assert.deepEqual(
    filtered.body.map((s: { type: string }) => s.type),
    ['HUMIDITY'],
  );

  const reefer = { assetId, reeferClass: 'MH', data: { supplyAirTemperature: 4.2 } };
  await rejects(ta, key, '/api/v1/reefer-data', { ...reefer, reeferClass: 'XX' }, '/reeferClass');
  await rejects(ta, key, '/api/v1/reefer-data', { ...reefer, data: undefined }, '/data');
  await rejects(ta, key, '/api/v1/reefer-data', { ...reefer, data: [1, 2] }, '/data');
  await rejects(ta, key, '/api/v1/reefer-data', { ...reefer, data: { blob: 'x'.repeat(65 * 1024) } }, '/data');
  await rejects(ta, key, '/api/v1/reefer-data', { ...reefer, data: { nested: { k: 'a\u0000' } } }, '/data/nested/k');
  await rejects(ta, key, '/api/v1/reefer-data', { ...reefer, gensetManufacturer: 'x'.repeat(256) }, '/gensetManufacturer');
  // A lone surrogate (not storable as JSON by PostgreSQL) and absurd nesting are 400s, not 500s.
  await rejects(ta, key, '/api/v1/reefer-data', { ...reefer, data: { label: 'a\ud800b' } }, '/data/label');
  const deep = `${'{"d":'.repeat(20_000)}1${'}'.repeat(20_000)}`;
  const deepRes = await ta.call('POST', '/api/v1/reefer-data', { token: key, body: `{"assetId":"${assetId}","data":${deep}}` });
  assert.equal(deepRes.status, 400, deepRes.raw.slice(0, 200));
  assert.match(deepRes.body.message, /nested more than 64 levels/);
  for (const c of ['CR', 'CR0', 'CRTT', 'DK', 'MH', 'SC', 'LD', 'TK', 'TKTT']) {
    assert.equal((await ta.call('POST', '/api/v1/reefer-data', { token: key, body: { ...reefer, reeferClass: c } })).status, 201, c);
  }
  const noClass = await ta.call('POST', '/api/v1/reefer-data', { token: key, body: { assetId, data: {} } });
  assert.equal(noClass.status, 201);
  assert.equal(noClass.body.reeferClass, null);

  const genset = { assetId, gensetType: 'SG-3000', data: { rpm: 1500 } };
  await rejects(ta, key, '/api/v1/genset-data', { ...genset, gensetType: undefined }, '/gensetType');
  await rejects(ta, key, '/api/v1/genset-data', { ...genset, boxId: 'x'.repeat(37) }, '/boxId');
  assert.equal((await ta.call('POST', '/api/v1/genset-data', { token: key, body: genset })).status, 201);
  const oem = { assetId, payloadType: 7, data: { raw: 'abc' } };
  await rejects(ta, key, '/api/v1/oem-data', { ...oem, payloadType: 2 ** 31 }, '/payloadType');
  await rejects(ta, key, '/api/v1/oem-data', { ...oem, payloadType: 1.5 }, '/payloadType');
  assert.equal((await ta.call('POST', '/api/v1/oem-data', { token: key, body: oem })).status, 201);
});

test('bulk: up to 1000 in one request, all or nothing, the bad index named; 1001 refused', async (t) => {
  const { ta, key, assetId } = await setup(t);
  const items = Array.from({ length: 1000 }, (_, i) => ({
    assetId,
    latitude: (i % 180) - 89.5,
    longitude: 10,
    whenCreated: past(5000 - i),
  }));
  const r = await ta.call('POST', '/api/v1/locations', { token: key, body: items });
  assert.equal(r.status, 201, r.raw.slice(0, 300));
  assert.equal(r.body.length, 1000);
  assert.deepEqual(
    r.body.map((l: { latitude: number }) => l.latitude),
    items.map((i) => i.latitude),
    'stored objects come back in request order',
  );
  const bad = items.slice(0, 10).map((i) => ({ ...i }));
  bad[3] = { ...bad[3]!, latitude: 91 };
  await rejects(ta, key, '/api/v1/locations', bad, '/3/latitude');
  const other = await ownerWithKey(ta, 'fleet-b');
  const otherAsset = await ta.call('POST', '/api/v1/assets', { token: other.key, body: { name: 'B1' } });
  const mixed = [items[0], { ...items[1]!, assetId: otherAsset.body.id }];
  const before = await count(ta, '/api/v1/locations');
  const m = await ta.call('POST', '/api/v1/locations', { token: key, body: mixed });
  assert.equal(m.status, 404, "another owner's asset is not found");
  assert.equal(m.body.field, '/1/assetId');
  assert.deepEqual(await count(ta, '/api/v1/locations'), before, 'nothing stored');
  const tooMany = await ta.call('POST', '/api/v1/locations', { token: key, body: [...items, items[0]] });
  assert.equal(tooMany.status, 400);
  assert.equal((await ta.call('POST', '/api/v1/locations', { token: key, body: [] })).status, 400);
});

test('paging returns every row that existed at the first page exactly once while rows are inserted; from/to are exact', async (t) => {
  const { ta, key, assetId } = await setup(t);
  const base = Date.parse('2026-11-01T00:00:00Z');
  // 250 rows, several sharing one timestamp, so ties are broken by id.
  const items = Array.from({ length: 250 }, (_, i) => ({
    assetId,
    latitude: 1,
    longitude: 1,
    whenCreated: new Date(base + Math.floor(i / 3) * 1000).toISOString(),
  }));
  const stored = await ta.call('POST', '/api/v1/locations', { token: key, body: items });
  const existing = new Set<string>(stored.body.map((l: { id: string }) => l.id));
  for (const order of ['desc', 'asc']) {
    const seen: string[] = [];
    let url: string | undefined = `/api/v1/locations?limit=40&order=${order}&assetId=${assetId}`;
    let pages = 0;
    while (url) {
      const r = await ta.call('GET', url, { token: key });
      assert.equal(r.status, 200, r.raw);
      seen.push(...r.body.map((l: { id: string }) => l.id));
      // Meanwhile, new rows arrive: newer, older and at the same instants as existing ones.
      await ta.call('POST', '/api/v1/locations', {
        token: key,
        body: [
          { assetId, latitude: 2, longitude: 2 },
          { assetId, latitude: 2, longitude: 2, whenCreated: new Date(base + pages * 7000).toISOString() },
        ],
      });
      const link = r.headers.link as string | undefined;
      url = link ? new URL(/<([^>]+)>/.exec(link)![1]!).pathname + new URL(/<([^>]+)>/.exec(link)![1]!).search : undefined;
      pages++;
    }
    const fromExisting = seen.filter((id) => existing.has(id));
    assert.equal(fromExisting.length, existing.size, `${order}: every existing row once`);
    assert.equal(new Set(seen).size, seen.length, `${order}: no row twice`);
  }
  // from inclusive, to exclusive, on the exact instants.
  const from = new Date(base + 10_000).toISOString();
  const to = new Date(base + 20_000).toISOString();
  const r = await ta.call('GET', `/api/v1/locations?limit=1000&assetId=${assetId}&from=${from}&to=${to}`, { token: key });
  const times = r.body.map((l: { whenCreated: string }) => Date.parse(l.whenCreated));
  assert.ok(times.includes(base + 10_000), 'from is inclusive');
  assert.ok(!times.includes(base + 20_000), 'to is exclusive');
  assert.ok(times.every((x: number) => x >= base + 10_000 && x < base + 20_000));
  assert.equal((await ta.call('GET', '/api/v1/locations?cursor=garbage', { token: key })).status, 400);
});

test('a page of large records ends at pageBytes of their data, with fewer than `limit` items and a Link that goes on: every record once; the export too', async (t) => {
  const { ta, key, assetId } = await setup(t);
  // 60 OEM records of about 60 KB each (3.6 MB): a page of limit=1000 holds those that start within 1 MiB.
  const text = 'x'.repeat(60_000);
  const base = Date.parse('2026-11-01T00:00:00Z');
  const items = Array.from({ length: 60 }, (_, i) => ({
    assetId,
    payloadType: 1,
    whenCreated: new Date(base + Math.floor(i / 2) * 1000).toISOString(),
    data: { i, text },
  }));
  const stored = await ta.call('POST', '/api/v1/oem-data', { token: key, body: items });
  assert.equal(stored.status, 201, stored.raw.slice(0, 300));
  const ids = new Set<string>(stored.body.map((r: { id: string }) => r.id));
  const next = (link: string | undefined) => {
    const u = link ? new URL(/<([^>]+)>/.exec(link)![1]!) : undefined;
    return u ? u.pathname + u.search : undefined;
  };
  for (const order of ['desc', 'asc']) {
    const seen: string[] = [];
    const sizes: number[] = [];
    let url: string | undefined = `/api/v1/oem-data?limit=1000&order=${order}&assetId=${assetId}`;
    while (url) {
      const r = await ta.call('GET', url, { token: key });
      assert.equal(r.status, 200, r.raw.slice(0, 300));
      assert.ok(r.raw.length < BOUNDS.pageBytes.value + 70_000, `${order}: a page of ${r.raw.length} bytes`);
      sizes.push(r.body.length);
      seen.push(...r.body.map((x: { id: string }) => x.id));
      url = next(r.headers.link as string | undefined);
    }
    assert.deepEqual(sizes, [18, 18, 18, 6], `${order}: pages of the records that start within 1 MiB`);
    assert.equal(new Set(seen).size, seen.length, `${order}: no record twice`);
    assert.deepEqual(new Set(seen), ids, `${order}: every record`);
  }
  // The NDJSON export reads its pages under the same budget: every record once.
  const exported = await ta.call('GET', `/api/v1/oem-data?format=ndjson&assetId=${assetId}&from=2026-10-31T00:00:00Z`, { token: key });
  assert.equal(exported.status, 200, exported.raw.slice(0, 300));
  const lines = exported.raw
    .trim()
    .split('\n')
    .map((l: string) => JSON.parse(l).id as string);
  assert.equal(lines.length, 60);
  assert.deepEqual(new Set(lines), ids);
});

test("another owner's records are invisible; a parent sees its child's", async (t) => {
  const { ta, key, assetId, ownerId } = await setup(t);
  const child = await ownerWithKey(ta, 'fleet-a-child', { parentId: ownerId });
  const sibling = await ownerWithKey(ta, 'fleet-c');
  const childAsset = await ta.call('POST', '/api/v1/assets', { token: child.key, body: { name: 'CHILD1' } });
  const own = await ta.call('POST', '/api/v1/sensor-data', { token: key, body: { assetId, sensorId: 's', type: 'HUMIDITY', value: 50 } });
  const kid = await ta.call('POST', '/api/v1/sensor-data', {
    token: child.key,
    body: { assetId: childAsset.body.id, sensorId: 's', type: 'HUMIDITY', value: 51 },
  });
  assert.equal((await ta.call('GET', `/api/v1/sensor-data/${own.body.id}`, { token: sibling.key })).status, 404);
  assert.equal((await ta.call('GET', `/api/v1/sensor-data/${own.body.id}`, { token: child.key })).status, 404);
  assert.equal((await ta.call('GET', `/api/v1/sensor-data/${kid.body.id}`, { token: key })).status, 200);
  assert.equal((await ta.call('GET', '/api/v1/sensor-data', { token: sibling.key })).body.length, 0);
  assert.equal((await ta.call('GET', '/api/v1/sensor-data', { token: key })).body.length, 2);
  assert.equal((await ta.call('GET', '/api/v1/sensor-data', { token: child.key })).body.length, 1);
  // A parent may write its child's records (write covers every owner the caller sees).
  assert.equal(
    (await ta.call('POST', '/api/v1/locations', { token: key, body: { assetId: childAsset.body.id, latitude: 1, longitude: 1 } })).status,
    201,
  );
  assert.equal(
    (await ta.call('POST', '/api/v1/locations', { token: sibling.key, body: { assetId, latitude: 1, longitude: 1 } })).status,
    404,
  );
  assert.equal((await ta.call('GET', '/api/v1/sensor-data/99999999999', { token: key })).status, 404);
  assert.equal((await ta.call('GET', '/api/v1/sensor-data/abc', { token: key })).status, 404);
  // Records are append-only, and an asset with records cannot be deleted.
  assert.equal((await ta.call('PATCH', `/api/v1/sensor-data/${own.body.id}`, { token: key, body: { value: 1 } })).status, 405);
  assert.equal((await ta.call('DELETE', `/api/v1/assets/${assetId}`, { token: key })).status, 409);
});

test('every stored record and asset change reaches the event log in its push shape, with an event id', async (t) => {
  const { ta, key, assetId, ownerId } = await setup(t);
  await ta.call('PATCH', `/api/v1/assets/${assetId}`, { token: key, body: { tags: 'reefer, 40ft', boxId: 'BOX-1' } });
  const loc = await ta.call('POST', '/api/v1/locations', {
    token: key,
    body: { assetId, latitude: 1.5, longitude: 2.5, heading: 370, speed: 12.5 },
  });
  const sen = await ta.call('POST', '/api/v1/sensor-data', {
    token: key,
    body: [
      { assetId, sensorId: 's', type: 'TEMPERATURE', value: 4.25 },
      { assetId, sensorId: 's', type: 'PRESSURE', value: 'HIGH' },
    ],
  });
  const ree = await ta.call('POST', '/api/v1/reefer-data', { token: key, body: { assetId, data: { a: 1 } } });
  const gen = await ta.call('POST', '/api/v1/genset-data', { token: key, body: { assetId, gensetType: 'G', data: { b: 2 }, boxId: 'BX' } });
  const oem = await ta.call('POST', '/api/v1/oem-data', { token: key, body: { assetId, payloadType: 3, data: { c: 3 } } });
  for (const r of [loc, sen, ree, gen, oem]) assert.equal(r.status, 201, r.raw);
  const { rows } = await ta.app.services.db.query<{
    event_id: string;
    object_type: string;
    object_id: string;
    owner_id: string;
    payload: any;
  }>('SELECT event_id, object_type, object_id, owner_id, payload FROM event_log ORDER BY id');
  const byType = (type: string) => rows.filter((r) => r.object_type === type);
  assert.equal(byType('asset').length, 2, 'create and patch');
  assert.deepEqual(byType('asset')[1]!.payload.tags, ['reefer', '40ft']);
  assert.equal(byType('asset')[1]!.payload.boxId, 'BOX-1');
  const l = byType('location')[0]!.payload;
  assert.equal(l.id, Number(loc.body.id), 'int64 id as a JSON number');
  assert.equal(l.heading, 10, 'heading modulo 360');
  assert.equal(l.ownerId, ownerId);
  assert.match(l.whenCreated, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  const [s1, s2] = byType('sensordata').map((r) => r.payload);
  assert.deepEqual([s1.value, s1.type, s1.sensorType], ['4.25', 'DECIMAL', 'TEMPERATURE']);
  assert.deepEqual([s2.value, s2.type], ['HIGH', 'TEXT']);
  assert.ok(Number.isInteger(s1.when_received) && Math.abs(s1.when_received - Date.now()) < 60_000);
  assert.equal(byType('reeferdata')[0]!.payload.reeferClass, null);
  assert.deepEqual(byType('gensetdata')[0]!.payload.data, { b: 2 });
  assert.equal(byType('oemdata')[0]!.payload.payloadType, 3);
  assert.equal(new Set(rows.map((r) => r.event_id)).size, rows.length, 'one event id each');
  // A refused bulk leaves no event log rows behind.
  const before = rows.length;
  await ta.call('POST', '/api/v1/locations', {
    token: key,
    body: [
      { assetId, latitude: 1, longitude: 1 },
      { assetId, latitude: 100, longitude: 1 },
    ],
  });
  const after = await ta.app.services.db.query<{ n: number }>('SELECT count(*)::int AS n FROM event_log');
  assert.equal(after.rows[0]!.n, before);
});
