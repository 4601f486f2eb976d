// API guide 1, 3, 5 and 8: zone CRUD, and geofencing through the API:
// a location stored without zoneId gets the ascending ids of its owner's containing zones; a location
// newer than the asset's latest that enters or leaves a zone creates an INFO event; late ones never do.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { customer, startApp, ok, bad } from './helpers.js';

// One service for the whole file (PGlite takes seconds to start); every test makes its own owners.
const ta = await startApp(undefined, { RATE_LIMIT_MAX: '100000', RATE_LIMIT_CONCURRENT: '1000' });

const EARTH_RADIUS_M = 6_371_008.8;
const DEG = Math.PI / 180;
/** Whole-second times well in the past, increasing with n (minutes). */
const BASE = Math.floor(Date.now() / 1000) * 1000 - 3 * 86400_000;
const at = (minutes: number) => new Date(BASE + minutes * 60_000).toISOString().replace(/\.\d{3}Z$/, 'Z');

async function tenant(label: string, opts: { parentId?: string } = {}) {
  const c = await customer(ta, label, opts);
  const { call } = c;
  const zone = async (body: Record<string, unknown>): Promise<any> =>
    ok(await call('POST', '/api/v1/zones', body), 201, `zone ${JSON.stringify(body).slice(0, 80)}`);
  const locate = async (
    assetId: string,
    latitude: number,
    longitude: number,
    minute: number,
    extra: Record<string, unknown> = {},
  ): Promise<any> =>
    ok(
      await call('POST', '/api/v1/locations', { assetId, latitude, longitude, whenCreated: at(minute), ...extra }),
      201,
      `location ${latitude},${longitude}@${minute}`,
    );
  const events = async (query: string): Promise<any[]> => ok(await call('GET', `/api/v1/events?${query}`), 200, `events ?${query}`);
  return { ...c, zone, locate, events };
}

const polygon = (...rings: [number, number][][]) => ({ type: 'Polygon', coordinates: rings.map((r) => [...r, r[0]]) });
const box = (lon0: number, lat0: number, lon1: number, lat1: number): [number, number][] => [
  [lon0, lat0],
  [lon1, lat0],
  [lon1, lat1],
  [lon0, lat1],
];
const numeric = (a: string, b: string) => (BigInt(a) < BigInt(b) ? -1 : BigInt(a) > BigInt(b) ? 1 : 0);
/** The zone events of one asset, oldest first, as compact "subject@minute" strings. */
const brief = (evs: any[]) => evs.map((e) => `${e.subject}@${(Date.parse(e.currentData.whenCreated) - BASE) / 60_000}`);

// Runs first, while zone ids are still one digit: ascending means numeric order ("9,10", not "10,9").
test("zoneId lists the owner's containing zones in ascending numeric order; another owner's zones never count", async () => {
  const a = await tenant('asc');
  const b = await tenant('other');
  const first = await a.zone({ name: 'First', geometry: polygon(box(30, 30, 32, 32)) });
  // Fill up ids until the next one has more digits than `first`.
  let filler = 0;
  for (let probe = first.id; String(BigInt(probe) + 1n).length === String(first.id).length; ) {
    probe = (await a.zone({ name: `filler-${++filler}` })).id;
  }
  const second = await a.zone({ name: 'Second', circle: { latitude: 31, longitude: 31, radiusMeters: 50_000 } });
  assert.ok(String(second.id).length > String(first.id).length, `ids ${first.id} < ${second.id} cross a digit boundary`);
  const foreign = await b.zone({ name: 'Foreign', geometry: polygon(box(29, 29, 33, 33)) });
  assert.equal((await a.zone({ name: 'Foreign', geometry: polygon(box(29, 29, 33, 33)) })).name, 'Foreign', 'names are per owner');
  const sameName = (await a.call('GET', '/api/v1/zones?name=Foreign')).body[0];

  const asset = await a.asset('asc-1');
  const loc = await a.locate(asset, 31, 31, 1);
  const expected = [first.id, second.id, sameName.id].sort(numeric);
  assert.equal(loc.zoneId, expected.join(','));
  assert.ok(!loc.zoneId.split(',').includes(foreign.id), "another owner's zone never counts");
  // Entering several zones at once: one event per zone, in ascending id order.
  const evs = await a.events(`assetId=${asset}&order=asc`);
  assert.deepEqual(
    evs.map((e) => e.currentData.value),
    expected,
  );
  assert.deepEqual(
    evs.map((e) => e.subject),
    expected.map((id) => `Entered zone ${[first, second, sameName].find((z) => z.id === id)!.name}`),
  );
  // The other owner's asset at the same point sees only its own zone, and no event names A's zones.
  const bAsset = await b.asset('b-1');
  assert.equal((await b.locate(bAsset, 31, 31, 1)).zoneId, foreign.id);
  assert.deepEqual(
    (await b.events(`assetId=${bAsset}`)).map((e) => e.subject),
    ['Entered zone Foreign'],
  );
  // Neither owner sees the other's events.
  assert.equal((await a.events(`assetId=${bAsset}`)).length, 0);
  assert.equal((await a.call('GET', `/api/v1/events/${(await b.events('')).at(0).id}`)).status, 404);
});

test('zoneId keeps as many ascending ids as fit in 100 characters', async () => {
  const a = await tenant('many');
  const ids: string[] = [];
  for (let i = 0; i < 40; i++)
    ids.push((await a.zone({ name: `z${i}`, circle: { latitude: -40, longitude: -60, radiusMeters: 1000 + i } })).id);
  ids.sort(numeric);
  let text = '';
  for (const id of ids) {
    const next = text ? `${text},${id}` : id;
    if (next.length > 100) break;
    text = next;
  }
  const loc = await a.locate(await a.asset('many-1'), -40, -60, 1);
  assert.equal(loc.zoneId, text);
  assert.ok(loc.zoneId.length <= 100 && loc.zoneId.length > 90, loc.zoneId);
});

test('zone CRUD: validation with exact fields, size limits, unique names, tenancy, merge patch, delete', async () => {
  const a = await tenant('crud');
  const b = await tenant('crud-other');
  const square = polygon(box(10, 50, 11, 51));

  const r = await a.call('POST', '/api/v1/zones', { name: 'Harbour', type: 'port', note: 'main gate', geometry: square });
  const z = ok(r, 201, 'create');
  assert.match(z.id, /^[1-9]\d*$/);
  assert.equal(r.headers.location, `${ta.url}/api/v1/zones/${z.id}`);
  assert.deepEqual(
    { ...z, id: undefined, whenCreated: undefined, whenUpdated: undefined },
    {
      id: undefined,
      ownerId: a.ownerId,
      name: 'Harbour',
      type: 'port',
      note: 'main gate',
      geometry: square,
      circle: null,
      enterAfterSeconds: 0,
      leaveAfterSeconds: 0,
      dwellAlertMinutes: null,
      whenCreated: undefined,
      whenUpdated: undefined,
    },
  );
  assert.match(z.whenCreated, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  const circle = { latitude: 1.5, longitude: 2.5, radiusMeters: 250 };
  const c = ok(await a.call('POST', '/api/v1/zones', { name: 'Depot', circle }), 201, 'circle');
  assert.deepEqual(c.circle, circle);
  assert.equal(c.geometry, null);
  assert.equal(c.type, null);
  assert.equal(c.note, null);
  const nowhere = ok(await a.call('POST', '/api/v1/zones', { name: 'Nowhere' }), 201, 'a zone without a shape');
  assert.deepEqual([nowhere.geometry, nowhere.circle], [null, null]);

  // Shape errors.
  bad(await a.call('POST', '/api/v1/zones', { name: 'Both', geometry: square, circle }), 400, '/circle', 'both');
  bad(
    await a.call('POST', '/api/v1/zones', {
      name: 'Open',
      geometry: {
        type: 'Polygon',
        coordinates: [
          [
            [0, 0],
            [1, 0],
            [1, 1],
            [0, 1],
          ],
        ],
      },
    }),
    400,
    '/geometry/coordinates/0',
    'unclosed ring',
  );
  bad(
    await a.call('POST', '/api/v1/zones', {
      name: 'Short',
      geometry: {
        type: 'Polygon',
        coordinates: [
          [
            [0, 0],
            [1, 0],
            [0, 0],
          ],
        ],
      },
    }),
    400,
    '/geometry/coordinates/0',
    'ring of 3',
  );
  bad(
    await a.call('POST', '/api/v1/zones', {
      name: 'Far',
      geometry: polygon([
        [0, 0],
        [200, 0],
        [0, 1],
      ]),
    }),
    400,
    '/geometry/coordinates/0/1/0',
    'longitude 200',
  );
  bad(
    await a.call('POST', '/api/v1/zones', {
      name: 'High',
      geometry: polygon([
        [0, 0],
        [1, 0],
        [0, 91],
      ]),
    }),
    400,
    '/geometry/coordinates/0/2/1',
    'latitude 91',
  );
  bad(
    await a.call('POST', '/api/v1/zones', {
      name: 'Text',
      geometry: polygon([
        [0, 0],
        [1, 0],
        [0, '1' as unknown as number],
      ]),
    }),
    400,
    '/geometry/coordinates/0/2/1',
    'a string coordinate',
  );
  bad(
    await a.call('POST', '/api/v1/zones', {
      name: 'Multi',
      geometry: {
        type: 'MultiPolygon',
        coordinates: [
          square.coordinates,
          [
            [
              [0, 0],
              [1, 0],
              [1, 1],
              [0, 1],
            ],
          ],
        ],
      },
    }),
    400,
    '/geometry/coordinates/1/0',
    'second polygon unclosed',
  );
  bad(
    await a.call('POST', '/api/v1/zones', { name: 'Point', geometry: { type: 'Point', coordinates: [1, 2] } }),
    400,
    '/geometry/type',
    'Point',
  );
  bad(
    await a.call('POST', '/api/v1/zones', { name: 'Zero', circle: { ...circle, radiusMeters: 0 } }),
    400,
    '/circle/radiusMeters',
    'radius 0',
  );
  bad(
    await a.call('POST', '/api/v1/zones', { name: 'North', circle: { ...circle, latitude: 90.5 } }),
    400,
    '/circle/latitude',
    'latitude 90.5',
  );
  bad(
    await a.call('POST', '/api/v1/zones', { name: 'NoLon', circle: { latitude: 1, radiusMeters: 5 } }),
    400,
    '/circle/longitude',
    'longitude missing',
  );

  // Sizes count code points (API guide 1): 32 astral characters are 64 UTF-16 units.
  const astral = (k: number) => '\u{1F6A2}'.repeat(k);
  ok(await a.call('POST', '/api/v1/zones', { name: astral(32) }), 201, 'name of 32 code points');
  bad(await a.call('POST', '/api/v1/zones', { name: 'n'.repeat(33) }), 400, '/name', 'name 33');
  bad(await a.call('POST', '/api/v1/zones', { name: '' }), 400, '/name', 'empty name');
  bad(await a.call('POST', '/api/v1/zones', {}), 400, '/name', 'name missing');
  ok(await a.call('POST', '/api/v1/zones', { name: 'T32', type: astral(32) }), 201, 'type 32');
  bad(await a.call('POST', '/api/v1/zones', { name: 'T33', type: 't'.repeat(33) }), 400, '/type', 'type 33');
  ok(await a.call('POST', '/api/v1/zones', { name: 'N254', note: `${'x'.repeat(253)}\u{1F6A2}` }), 201, 'note 254');
  bad(await a.call('POST', '/api/v1/zones', { name: 'N255', note: 'x'.repeat(255) }), 400, '/note', 'note 255');
  bad(await a.call('POST', '/api/v1/zones', { name: 'Nul\u0000' }), 400, '/name', 'NUL');

  // Unique within the owner; the same name is fine under another owner.
  const dup = await a.call('POST', '/api/v1/zones', { name: 'Harbour' });
  bad(dup, 409, '/name', 'duplicate');
  assert.equal(dup.body.code, 'NAME_TAKEN');
  const bz = ok(await b.call('POST', '/api/v1/zones', { name: 'Harbour', circle }), 201, 'same name, other owner');
  bad(await a.call('PATCH', `/api/v1/zones/${c.id}`, { name: 'Harbour' }), 409, '/name', 'rename onto a taken name');

  // Another owner's zone is 404 for every verb, and absent from lists.
  for (const [m, body] of [['GET'], ['PATCH', { note: 'x' }], ['PUT', { name: 'x' }], ['DELETE']] as [string, unknown?][]) {
    bad(await a.call(m, `/api/v1/zones/${bz.id}`, body), 404, undefined, `${m} foreign zone`);
  }
  bad(await a.call('GET', '/api/v1/zones/not-a-number'), 404, undefined, 'bad id');
  bad(await a.call('GET', '/api/v1/zones/99999999999'), 404, undefined, 'unknown id');
  const listed = ok(await a.call('GET', '/api/v1/zones?limit=1000'), 200, 'list') as any[];
  assert.ok(listed.every((x) => x.ownerId === a.ownerId));
  assert.ok(listed.some((x) => x.id === z.id) && !listed.some((x) => x.id === bz.id));
  assert.deepEqual(
    (ok(await a.call('GET', '/api/v1/zones?name=Harbour'), 200) as any[]).map((x) => x.id),
    [z.id],
  );
  assert.deepEqual(
    (ok(await a.call('GET', '/api/v1/zones?type=port'), 200) as any[]).map((x) => x.id),
    [z.id],
  );

  // PATCH is a merge patch: absent keeps, null clears.
  let p = ok(await a.call('PATCH', `/api/v1/zones/${z.id}`, { type: 'terminal' }), 200, 'patch type');
  assert.equal(p.type, 'terminal');
  assert.equal(p.note, 'main gate');
  assert.deepEqual(p.geometry, square);
  p = ok(await a.call('PATCH', `/api/v1/zones/${z.id}`, { note: null }), 200, 'patch note null');
  assert.equal(p.note, null);
  assert.equal(p.type, 'terminal');
  assert.equal(ok(await a.call('GET', `/api/v1/zones/${z.id}`), 200).note, null);
  bad(await a.call('PATCH', `/api/v1/zones/${z.id}`, { note: 'y'.repeat(255) }), 400, '/note', 'patch note 255');
  bad(await a.call('PATCH', `/api/v1/zones/${z.id}`, { circle }), 400, '/circle', 'patch adds a circle to a polygon zone');
  // Swapping the shape: geometry null plus a circle.
  p = ok(await a.call('PATCH', `/api/v1/zones/${z.id}`, { geometry: null, circle }), 200, 'swap shape');
  assert.equal(p.geometry, null);
  assert.deepEqual(p.circle, circle);
  // A merge patch merges into the shape objects too: only the radius changes.
  p = ok(await a.call('PATCH', `/api/v1/zones/${z.id}`, { circle: { radiusMeters: 500 } }), 200, 'patch the radius only');
  assert.deepEqual(p.circle, { ...circle, radiusMeters: 500 });
  bad(
    await a.call('PATCH', `/api/v1/zones/${z.id}`, { circle: { latitude: null } }),
    400,
    '/circle/latitude',
    'patch removes the latitude',
  );
  bad(
    await a.call('PATCH', `/api/v1/zones/${z.id}`, { circle: { radiusMeters: -1 } }),
    400,
    '/circle/radiusMeters',
    'patch a negative radius',
  );
  bad(
    await a.call('PATCH', `/api/v1/zones/${nowhere.id}`, { geometry: { type: 'Polygon' } }),
    400,
    '/geometry/coordinates',
    'patch half a geometry onto nothing',
  );
  assert.deepEqual(
    ok(await a.call('PATCH', `/api/v1/zones/${nowhere.id}`, { geometry: square }), 200).geometry,
    square,
    'a whole geometry onto nothing',
  );
  const sq2 = polygon(box(12, 50, 13, 51));
  assert.deepEqual(
    ok(await a.call('PATCH', `/api/v1/zones/${nowhere.id}`, { geometry: { coordinates: sq2.coordinates } }), 200).geometry,
    sq2,
    'new coordinates keep the type',
  );
  assert.deepEqual(
    ok(await a.call('GET', `/api/v1/zones/${z.id}`), 200).circle,
    { ...circle, radiusMeters: 500 },
    'refused patches change nothing',
  );
  // PUT replaces every writable field: what is left out is cleared.
  p = ok(await a.call('PUT', `/api/v1/zones/${z.id}`, { name: 'Harbour 2', geometry: square }), 200, 'put');
  assert.deepEqual([p.name, p.type, p.note, p.circle], ['Harbour 2', null, null, null]);
  assert.deepEqual(p.geometry, square);
  bad(await a.call('PUT', `/api/v1/zones/${z.id}`, { type: 'x' }), 400, '/name', 'put without name');

  // Delete: 204, then gone.
  const del = await a.call('DELETE', `/api/v1/zones/${z.id}`);
  assert.equal(del.status, 204, del.raw);
  assert.equal(del.raw, '');
  bad(await a.call('GET', `/api/v1/zones/${z.id}`), 404, undefined, 'deleted');
  bad(await a.call('DELETE', `/api/v1/zones/${z.id}`), 404, undefined, 'deleted twice');
  // A read-only key cannot write zones.
  const reader = await ta.call('POST', '/api/v1/api-keys', {
    token: ta.adminToken,
    body: { name: 'ro', ownerId: a.ownerId, scopes: ['read'] },
  });
  assert.equal((await ta.call('POST', '/api/v1/zones', { token: reader.body.key, body: { name: 'ro' } })).status, 403);
  assert.equal((await ta.call('GET', `/api/v1/zones/${c.id}`, { token: reader.body.key })).status, 200);
});

test('polygon: enter and leave events, edges and vertices inside, late locations create no event, client zoneId kept', async () => {
  const a = await tenant('poly');
  const z = await a.zone({ name: 'Harbour', geometry: polygon(box(10, 50, 11, 51)) });
  const asset = await a.asset('truck');
  const other = await a.asset('idle');
  await a.locate(other, 0, 0, 0);

  const seen: [number, number, number, string | null][] = [
    [52, 10.5, 1, null], // outside
    [50.5, 10.5, 2, z.id], // inside: Entered
    [51, 10.5, 3, z.id], // on the north edge
    [51, 11, 4, z.id], // on the north-east vertex
    [50, 10, 5, z.id], // on the south-west vertex
    [50.7, 10, 6, z.id], // on the west edge
    [51.000001, 10.5, 7, null], // just outside: Left
  ];
  for (const [lat, lon, minute, zoneId] of seen) {
    assert.equal((await a.locate(asset, lat, lon, minute)).zoneId, zoneId, `${lat},${lon}`);
  }
  // Late (older than the latest): zoneId is still computed, but no event either way.
  assert.equal((await a.locate(asset, 50.5, 10.5, 6.5)).zoneId, z.id, 'late inside');
  assert.equal((await a.locate(asset, 50.5, 10.5, 7)).zoneId, z.id, 'as old as the latest counts as late');
  assert.equal((await a.locate(asset, 50.2, 10.2, 8)).zoneId, z.id, 'inside again: Entered');
  assert.equal((await a.locate(asset, 40, 10.5, 7.5)).zoneId, null, 'late outside');
  // A zoneId the client gives is kept as given (and events still follow the geometry).
  assert.equal((await a.locate(asset, 50.3, 10.3, 9, { zoneId: 'gate-7,42' })).zoneId, 'gate-7,42');
  assert.equal((await a.locate(asset, 60, 10.3, 10, { zoneId: String(z.id) })).zoneId, String(z.id), 'client zoneId outside: Left');

  const evs = await a.events(`assetId=${asset}&order=asc`);
  assert.deepEqual(brief(evs), ['Entered zone Harbour@2', 'Left zone Harbour@7', 'Entered zone Harbour@8', 'Left zone Harbour@10']);
  for (const e of evs) {
    assert.equal(e.severity, 'INFO');
    assert.equal(e.assetId, asset);
    assert.equal(e.ownerId, a.ownerId);
    assert.deepEqual(Object.keys(e.currentData).sort(), ['value', 'whenCreated']);
    assert.equal(e.currentData.value, z.id);
    assert.equal(e.whenCreated, e.currentData.whenCreated);
    assert.equal(e.prevData, null);
    assert.match(e.id, /^[1-9]\d*$/);
  }
  assert.deepEqual(ok(await a.call('GET', `/api/v1/events/${evs[1].id}`), 200, 'get event'), evs[1]);
  bad(await a.call('GET', '/api/v1/events/nope'), 404, undefined, 'bad event id');
  bad(await a.call('GET', '/api/v1/events/999999999'), 404, undefined, 'unknown event id');

  // Filters: default newest first; severity; from inclusive, to exclusive; assetId.
  assert.deepEqual(brief(await a.events(`assetId=${asset}`)), brief(evs).reverse());
  assert.equal((await a.events(`assetId=${asset}&severity=ALERT`)).length, 0);
  assert.equal((await a.events(`assetId=${asset}&severity=INFO`)).length, 4);
  assert.deepEqual(brief(await a.events(`assetId=${asset}&order=asc&from=${at(7)}`)), [
    'Left zone Harbour@7',
    'Entered zone Harbour@8',
    'Left zone Harbour@10',
  ]);
  assert.deepEqual(brief(await a.events(`assetId=${asset}&order=asc&to=${at(7)}`)), ['Entered zone Harbour@2']);
  assert.deepEqual(brief(await a.events(`assetId=${asset}&order=asc&from=${at(2)}&to=${at(8)}`)), [
    'Entered zone Harbour@2',
    'Left zone Harbour@7',
  ]);
  assert.equal((await a.events(`assetId=${other}`)).length, 0);
  assert.deepEqual(brief(await a.events('order=asc')), brief(evs), "only this owner's events");
  bad(await a.call('GET', '/api/v1/events?severity=LOUD'), 400, '/severity', 'bad severity');
  // Paging over events.
  const p1 = await a.call('GET', `/api/v1/events?assetId=${asset}&order=asc&limit=3`);
  assert.equal(p1.body.length, 3);
  const next = /<([^>]+)>;\s*rel="next"/.exec(String(p1.headers.link))?.[1];
  assert.ok(next, 'Link rel=next');
  const p2 = await a.call('GET', new URL(next).pathname + new URL(next).search);
  assert.deepEqual(brief(p2.body), ['Left zone Harbour@10']);
});

test('multipolygon with a hole: the hole is outside, its edge and vertices are inside', async () => {
  const a = await tenant('hole');
  const outer = box(0, 0, 10, 10);
  const hole = box(4, 4, 6, 6);
  const z = await a.zone({
    name: 'Ring',
    geometry: {
      type: 'MultiPolygon',
      coordinates: [
        [
          [...outer, outer[0]],
          [...hole, hole[0]],
        ],
        [[...box(20, 0, 21, 1), [20, 0]]],
      ],
    },
  });
  const asset = await a.asset('ring-1');
  const pts: [number, number, boolean, string][] = [
    [2, 2, true, 'in the outer ring'],
    [5, 5, false, 'in the hole'],
    [4, 5, true, "on the hole's south edge"],
    [5.5, 6, true, "on the hole's east edge"],
    [4.999999, 4.999999, false, 'just inside the hole'],
    [6, 6, true, 'on a hole vertex'],
    [15, 5, false, 'north of everything'],
    [0.5, 20.5, true, 'in the second polygon'],
    [1, 21, true, "on the second polygon's corner"],
    [0.5, 15, false, 'between the polygons'],
    [0, 0, true, 'outer vertex'],
  ];
  const rows = ok(
    await a.call(
      'POST',
      '/api/v1/locations',
      pts.map(([lat, lon], i) => ({ assetId: asset, latitude: lat, longitude: lon, whenCreated: at(i + 1) })),
    ),
    201,
    'bulk',
  ) as any[];
  pts.forEach(([, , inside, what], i) => assert.equal(rows[i].zoneId, inside ? z.id : null, what));
  // Entering and leaving follow the points in time order.
  const expected: string[] = [];
  let was = false;
  pts.forEach(([, , inside], i) => {
    if (inside !== was) expected.push(`${inside ? 'Entered' : 'Left'} zone Ring@${i + 1}`);
    was = inside;
  });
  assert.deepEqual(brief(await a.events(`assetId=${asset}&order=asc`)), expected);
});

test('a zone split at the antimeridian, and a circle across it', async () => {
  const a = await tenant('fiji');
  const z = await a.zone({
    name: 'Fiji',
    geometry: {
      type: 'MultiPolygon',
      coordinates: [[[...box(177, -19, 180, -16), [177, -19]]], [[...box(-180, -19, -178, -16), [-180, -19]]]],
    },
  });
  const asset = await a.asset('fiji-1');
  const pts: [number, number, boolean, string][] = [
    [-17.5, 176.5, false, 'west of it'],
    [-17.5, 179.5, true, '179.5'],
    [-17.5, 180, true, 'exactly 180'],
    [-17.5, -179.5, true, '-179.5'],
    [-17.5, -180, true, 'exactly -180'],
    [-16, -179, true, 'north edge, east part'],
    [-15.9, 179.5, false, 'north of it'],
    [-17.5, -177.9, false, 'east of it'],
  ];
  for (const [i, [lat, lon, inside, what]] of pts.entries()) {
    assert.equal((await a.locate(asset, lat, lon, i + 1)).zoneId, inside ? z.id : null, what);
  }
  // Crossing the antimeridian inside the zone is no leaving.
  assert.deepEqual(brief(await a.events(`assetId=${asset}&order=asc`)), ['Entered zone Fiji@2', 'Left zone Fiji@7']);

  const c = await a.zone({ name: 'Dateline', circle: { latitude: 0, longitude: 179.9999, radiusMeters: 50_000 } });
  const ship = await a.asset('fiji-2');
  assert.equal((await a.locate(ship, 0, -179.9, 1)).zoneId, c.id, 'across the antimeridian, 11 km away');
  assert.equal((await a.locate(ship, 0, 180, 2)).zoneId, c.id, 'on the antimeridian');
  assert.equal((await a.locate(ship, 0, -179.4, 3)).zoneId, null, '66 km away');
});

test('circle: a point exactly at the radius is inside, one metre further is outside', async () => {
  const a = await tenant('circle');
  // A radius whose due-north offset is exactly 0.001 degrees, so the stored (6-decimal) point is the sent one.
  const radiusMeters = 0.001 * DEG * EARTH_RADIUS_M;
  const centre = { latitude: 10, longitude: 20 };
  const z = await a.zone({ name: 'Yard', circle: { ...centre, radiusMeters } });
  const north = (metres: number) => centre.latitude + metres / EARTH_RADIUS_M / DEG;
  const asset = await a.asset('yard-1');
  const onRadius = await a.locate(asset, north(radiusMeters), 20, 1);
  assert.equal(onRadius.latitude, 10.001);
  assert.equal(onRadius.zoneId, z.id, 'exactly at the radius');
  assert.equal((await a.locate(asset, north(radiusMeters + 1), 20, 2)).zoneId, null, 'radius + 1 m');
  assert.equal((await a.locate(asset, 10, 20, 3)).zoneId, z.id, 'the centre');
  // South and at another radius too.
  const z2 = await a.zone({ name: 'Big', circle: { latitude: -33.9, longitude: 18.4, radiusMeters: 2500 } });
  const south = (metres: number) => -33.9 - metres / EARTH_RADIUS_M / DEG;
  const b2 = await a.asset('yard-2');
  assert.equal((await a.locate(b2, south(2499), 18.4, 1)).zoneId, z2.id, 'a metre inside');
  assert.equal((await a.locate(b2, south(2501), 18.4, 2)).zoneId, null, 'a metre outside');
  assert.deepEqual(brief(await a.events(`assetId=${asset}&order=asc`)), ['Entered zone Yard@1', 'Left zone Yard@2', 'Entered zone Yard@3']);
  // A cap over the North Pole: the far side of the pole is inside, whatever its longitude.
  const pole = await a.zone({ name: 'Pole', circle: { latitude: 89.9, longitude: 0, radiusMeters: 50_000 } });
  const b3 = await a.asset('yard-3');
  assert.equal((await a.locate(b3, 89.9, 180, 1)).zoneId, pole.id, 'across the pole, 22 km away');
  assert.equal((await a.locate(b3, 90, -123, 2)).zoneId, pole.id, 'the pole itself');
  assert.equal((await a.locate(b3, 89.4, 0, 3)).zoneId, null, '55 km south');
});

test('concurrent single stores for one asset: events for a zone strictly alternate Entered / Left, starting with Entered', async () => {
  const a = await tenant('race');
  const z = await a.zone({ name: 'Gate', geometry: polygon(box(0, 0, 1, 1)) });
  const asset = await a.asset('race-1');
  // Minute m is inside unless m % 3 == 1 (so the newest, 24, is inside); sent all at once, scrambled.
  const minutes = Array.from({ length: 24 }, (_, i) => i + 1).sort((p, q) => ((p * 7) % 24) - ((q * 7) % 24));
  const inside = (m: number) => m % 3 !== 1;
  const stored = await Promise.all(minutes.map((m) => a.locate(asset, inside(m) ? 0.5 : 5, 0.5, m)));
  stored.forEach((l, i) => assert.equal(l.zoneId, inside(minutes[i]!) ? z.id : null));
  const subjects = (await a.events(`assetId=${asset}&order=asc&limit=1000`)).map((e) => e.subject);
  assert.equal(subjects.length % 2, 1, `ends inside, so an odd number of events: ${subjects.join(' | ')}`);
  subjects.forEach((s, i) => assert.equal(s, i % 2 ? 'Left zone Gate' : 'Entered zone Gate', `event ${i} of ${subjects.join(' | ')}`));
  const latest = ok(await a.call('GET', `/api/v1/locations/latest?assetId=${asset}`), 200) as any[];
  assert.equal(latest[0].whenCreated, at(24), 'the newest location is the latest, whatever the arrival order');
});

test('a bulk array with several assets in mixed time order produces events in time order; late items none', async () => {
  const a = await tenant('bulk');
  const z = await a.zone({ name: 'Dock', geometry: polygon(box(0, 0, 1, 1)) });
  const [x, y] = [await a.asset('bulk-x'), await a.asset('bulk-y')];
  const IN = [0.5, 0.5];
  const OUT = [5, 5];
  const item = (assetId: string, [lat, lon]: number[], minute: number) => ({
    assetId,
    latitude: lat,
    longitude: lon,
    whenCreated: at(minute),
  });
  const body = [item(x, OUT, 3), item(y, IN, 2), item(x, IN, 1), item(x, IN, 4), item(y, OUT, 1), item(x, OUT, 2), item(y, OUT, 5)];
  const rows = ok(await a.call('POST', '/api/v1/locations', body), 201, 'bulk') as any[];
  assert.deepEqual(
    rows.map((r) => r.whenCreated),
    body.map((b) => b.whenCreated),
    'answered in input order',
  );
  assert.deepEqual(
    rows.map((r) => r.zoneId),
    [null, z.id, z.id, z.id, null, null, null],
  );
  const ex = await a.events(`assetId=${x}&order=asc`);
  assert.deepEqual(brief(ex), ['Entered zone Dock@1', 'Left zone Dock@2', 'Entered zone Dock@4']);
  assert.deepEqual(brief(await a.events(`assetId=${y}&order=asc`)), ['Entered zone Dock@2', 'Left zone Dock@5']);
  // Stored in time order too: ids ascend with time.
  const all = await a.events('order=asc');
  const byTime = [...all].sort((p, q) => Date.parse(p.whenCreated) - Date.parse(q.whenCreated) || numeric(p.id, q.id));
  for (const asset of [x, y]) {
    const mine = byTime.filter((e) => e.assetId === asset).map((e) => e.id);
    assert.deepEqual(mine, [...mine].sort(numeric), 'event ids ascend in time order');
  }
  // A second bulk: items older than x's latest (minute 4, inside) are late; the newer one counts.
  const rows2 = ok(await a.call('POST', '/api/v1/locations', [item(x, OUT, 6), item(x, OUT, 3.5), item(x, IN, 5)]), 201) as any[];
  assert.deepEqual(
    rows2.map((r) => r.zoneId),
    [null, null, z.id],
  );
  assert.deepEqual(brief(await a.events(`assetId=${x}&order=asc`)), [
    'Entered zone Dock@1',
    'Left zone Dock@2',
    'Entered zone Dock@4',
    'Left zone Dock@6',
  ]);
  // An invalid item stores nothing and creates no event.
  const badBulk = await a.call('POST', '/api/v1/locations', [item(x, IN, 7), { ...item(x, IN, 8), latitude: 91 }]);
  bad(badBulk, 400, '/1/latitude', 'bad item');
  assert.equal((await a.events(`assetId=${x}`)).length, 4);
});

test('a deleted zone stops counting, without a Left event', async () => {
  const a = await tenant('del');
  const z = await a.zone({ name: 'Gone', geometry: polygon(box(0, 0, 1, 1)) });
  const asset = await a.asset('del-1');
  assert.equal((await a.locate(asset, 0.5, 0.5, 1)).zoneId, z.id);
  assert.equal((await a.call('DELETE', `/api/v1/zones/${z.id}`)).status, 204);
  assert.equal((await a.locate(asset, 0.6, 0.6, 2)).zoneId, null);
  assert.equal((await a.locate(asset, 5, 5, 3)).zoneId, null);
  assert.deepEqual(brief(await a.events(`assetId=${asset}&order=asc`)), ['Entered zone Gone@1']);
});

test("a zone or an asset moving to another owner: the old owner's zone stops counting, with no Left event naming it", async () => {
  const a = await tenant('move');
  const child = await tenant('move-child', { parentId: a.ownerId });
  const z = await a.zone({ name: 'Parent yard', geometry: polygon(box(0, 0, 1, 1)) });
  const y = await child.zone({ name: 'Child yard', geometry: polygon(box(0, 0, 1, 1)) });
  await a.zone({ name: 'Elsewhere', geometry: polygon(box(40, 40, 41, 41)) }); // the parent still has zones after the move
  const mine = await a.asset('move-1');
  assert.equal((await a.locate(mine, 0.5, 0.5, 1)).zoneId, z.id);
  // The zone goes to the child: the parent's asset is no longer in one of its owner's zones.
  assert.equal(
    ok(await a.call('PATCH', `/api/v1/zones/${z.id}`, { ownerId: child.ownerId, name: 'Moved yard' }), 200).ownerId,
    child.ownerId,
  );
  assert.equal((await a.locate(mine, 0.5, 0.5, 2)).zoneId, null);
  assert.deepEqual(brief(await a.events(`assetId=${mine}&order=asc`)), ['Entered zone Parent yard@1']);
  // The zone comes back: entering it again is an event.
  ok(await a.call('PATCH', `/api/v1/zones/${z.id}`, { ownerId: a.ownerId, name: 'Parent yard' }), 200);
  assert.equal((await a.locate(mine, 0.5, 0.5, 3)).zoneId, z.id);
  assert.deepEqual(brief(await a.events(`assetId=${mine}&order=asc`)), ['Entered zone Parent yard@1', 'Entered zone Parent yard@3']);
  // The asset goes to the child: from then on only the child's zones count, and nothing names the parent's.
  ok(await a.call('PATCH', `/api/v1/assets/${mine}`, { ownerId: child.ownerId }), 200, 'move the asset');
  assert.equal((await a.locate(mine, 0.5, 0.5, 4)).zoneId, y.id);
  assert.deepEqual(brief(await child.events(`assetId=${mine}&order=asc&from=${at(4)}`)), ['Entered zone Child yard@4']);
  assert.equal((await child.locate(mine, 5, 5, 5)).zoneId, null);
  assert.deepEqual(brief(await child.events(`assetId=${mine}&order=asc&from=${at(4)}`)), [
    'Entered zone Child yard@4',
    'Left zone Child yard@5',
  ]);
});

test("GET /locations/latest: the newest location of each visible asset, never another owner's", async () => {
  const a = await tenant('latest');
  const b = await tenant('latest-other');
  const [x, y] = [await a.asset('lx'), await a.asset('ly')];
  const bx = await b.asset('lbx');
  const x2 = await a.locate(x, 1, 1, 2);
  await a.locate(x, 2, 2, 1); // late
  await a.locate(y, 3, 3, 1);
  const y2 = await a.locate(y, 4, 4, 3);
  await a.locate(y, 5, 5, 2.5); // late
  await b.locate(bx, 6, 6, 9);
  const latest = ok(await a.call('GET', '/api/v1/locations/latest'), 200, 'latest') as any[];
  assert.deepEqual(latest, [y2, x2], 'newest first, one per asset');
  assert.deepEqual(ok(await a.call('GET', `/api/v1/locations/latest?assetId=${x}`), 200), [x2]);
  assert.deepEqual(ok(await a.call('GET', `/api/v1/locations/latest?assetId=${bx}`), 200), [], "another owner's asset");
  assert.deepEqual(
    (ok(await b.call('GET', '/api/v1/locations/latest'), 200) as any[]).map((l) => l.assetId),
    [bx],
  );
  const all = ok(await ta.call('GET', `/api/v1/locations/latest?assetId=${x}&assetId=${bx}`, { token: ta.adminToken }), 200) as any[];
  assert.deepEqual(all.map((l) => l.assetId).sort(), [x, bx].sort(), 'the operator sees every owner');
  // A parent sees its child's latest locations.
  const child = await tenant('latest-child', { parentId: a.ownerId });
  const cx = await child.asset('lcx');
  const c1 = await child.locate(cx, 7, 7, 4);
  assert.deepEqual(ok(await a.call('GET', `/api/v1/locations/latest?assetId=${cx}`), 200), [c1]);
  assert.deepEqual(ok(await child.call('GET', `/api/v1/locations/latest?assetId=${x}`), 200), [], "not the parent's");
});
