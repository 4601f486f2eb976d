// API guide 8: the zone geometry core (src/zones/geo.ts). Pure unit tests, no database.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { bbox, contains, haversineMeters, validateCircle, validateGeometry, EARTH_RADIUS_M, type Geometry } from '../../src/zones/geo.js';

const poly = (...rings: number[][][]): Geometry => ({ type: 'Polygon', coordinates: rings });
const ring = (...pts: [number, number][]): number[][] => [...pts, pts[0] as [number, number]];
const zone = (geometry: Geometry) => ({ geometry });

// Square lon 10..11, lat 50..51.
const square = poly(ring([10, 50], [11, 50], [11, 51], [10, 51]));

test('square: inside, outside, each edge and a vertex', () => {
  const z = zone(square);
  assert.equal(contains(z, 50.5, 10.5), true, 'centre');
  assert.equal(contains(z, 52, 10.5), false, 'north of it');
  assert.equal(contains(z, 50.5, 9.99), false, 'west of it');
  assert.equal(contains(z, 50.5, 11.0000001), false, 'just east of it');
  assert.equal(contains(z, 50, 10.5), true, 'south edge');
  assert.equal(contains(z, 51, 10.5), true, 'north edge');
  assert.equal(contains(z, 50.5, 10), true, 'west edge');
  assert.equal(contains(z, 50.5, 11), true, 'east edge');
  assert.equal(contains(z, 50, 10), true, 'south-west vertex');
  assert.equal(contains(z, 51, 11), true, 'north-east vertex');
});

// Exterior lon 0..10, lat 0..10 with a hole lon 4..6, lat 4..6.
const holed = poly(ring([0, 0], [10, 0], [10, 10], [0, 10]), ring([4, 4], [6, 4], [6, 6], [4, 6]));

test('polygon with a hole: the hole is outside, its edge is inside', () => {
  const z = zone(holed);
  assert.equal(contains(z, 5, 5), false, 'inside the hole');
  assert.equal(contains(z, 4, 5), true, "on the hole's south edge");
  assert.equal(contains(z, 5, 6), true, "on the hole's east edge");
  assert.equal(contains(z, 6, 6), true, "on the hole's vertex");
  assert.equal(contains(z, 2, 2), true, 'between exterior and hole');
  assert.equal(contains(z, 8, 5), true, 'between exterior and hole, north');
  assert.equal(contains(z, 11, 5), false, 'outside the exterior');
});

test('concave polygon: the notch is outside', () => {
  // A "U": lon 0..3, lat 0..3 with a notch lon 1..2, lat 1..3 cut from the top.
  const u = zone(poly(ring([0, 0], [3, 0], [3, 3], [2, 3], [2, 1], [1, 1], [1, 3], [0, 3])));
  assert.equal(contains(u, 2, 1.5), false, 'in the notch');
  assert.equal(contains(u, 1, 1.5), true, 'on the notch floor');
  assert.equal(contains(u, 2, 1), true, 'on the notch wall');
  assert.equal(contains(u, 2, 0.5), true, 'left arm');
  assert.equal(contains(u, 2, 2.5), true, 'right arm');
  assert.equal(contains(u, 0.5, 1.5), true, 'base');
  assert.equal(contains(u, 3, 1.5), false, 'the notch mouth: on the line of the top edges but on no edge');
  assert.equal(contains(u, 3, 2.5), true, 'top edge of the right arm');
});

test('MultiPolygon with two parts, one with a hole', () => {
  const m: Geometry = {
    type: 'MultiPolygon',
    coordinates: [holed.coordinates as number[][][], square.coordinates as number[][][]],
  };
  const z = zone(m);
  assert.equal(contains(z, 2, 2), true, 'first part');
  assert.equal(contains(z, 5, 5), false, "first part's hole");
  assert.equal(contains(z, 4, 4), true, "first part's hole vertex");
  assert.equal(contains(z, 50.5, 10.5), true, 'second part');
  assert.equal(contains(z, 51, 10.2), true, "second part's edge");
  assert.equal(contains(z, 30, 30), false, 'between the parts');
});

test('zone split at the antimeridian (Fiji)', () => {
  const fiji: Geometry = {
    type: 'MultiPolygon',
    coordinates: [[ring([177, -19], [180, -19], [180, -16], [177, -16])], [ring([-180, -19], [-178, -19], [-178, -16], [-180, -16])]],
  };
  const z = zone(fiji);
  assert.equal(contains(z, -17.5, 179.5), true);
  assert.equal(contains(z, -17.5, -179.5), true);
  assert.equal(contains(z, -17.5, 180), true);
  assert.equal(contains(z, -17.5, -180), true);
  assert.equal(contains(z, -19, 180), true, 'corner on the split line');
  assert.equal(contains(z, -17.5, 176.9), false);
  assert.equal(contains(z, -17.5, -177.9), false);
  assert.equal(contains(z, -15.9, 180), false, 'north of it on the split line');
  // Only one side given: a point at -180 still counts through the part ending at 180.
  const east = zone(poly(ring([177, -19], [180, -19], [180, -16], [177, -16])));
  assert.equal(contains(east, -17.5, -180), true);
});

test('circle: centre, just inside, exactly at the radius, just outside', () => {
  const circle = { latitude: 53.5511, longitude: 9.9937, radiusMeters: 1000 };
  const z = { circle };
  const northBy = (m: number) => circle.latitude + ((m / EARTH_RADIUS_M) * 180) / Math.PI;
  assert.equal(contains(z, circle.latitude, circle.longitude), true, 'centre');
  assert.equal(contains(z, northBy(999), circle.longitude), true, 'just inside');
  const edgeLat = northBy(1000);
  assert.ok(Math.abs(haversineMeters(circle.latitude, circle.longitude, edgeLat, circle.longitude) - 1000) < 1e-6);
  assert.equal(contains(z, edgeLat, circle.longitude), true, 'exactly at the radius');
  assert.equal(contains(z, northBy(1001), circle.longitude), false, 'radius + 1 m');
});

test('haversine: Hamburg to Rotterdam is about 410 km', () => {
  const d = haversineMeters(53.5511, 9.9937, 51.9244, 4.4777);
  assert.ok(Math.abs(d - 410_000) / 410_000 < 0.01, `got ${d}`);
  assert.equal(haversineMeters(1, 2, 1, 2), 0);
  assert.ok(Math.abs(haversineMeters(0, 180, 0, -180)) < 1e-6, '180 and -180 are the same meridian');
});

test('validateGeometry accepts good geometries and ignores altitude', () => {
  assert.deepEqual(validateGeometry(square), { ok: true, value: square });
  const r = validateGeometry({
    type: 'MultiPolygon',
    coordinates: [
      [
        [
          [0, 0, 5],
          [1, 0, 5],
          [1, 1, 5],
          [0, 0, 5],
        ],
      ],
    ],
  });
  assert.equal(r.ok, true);
});

test('validateGeometry names the offending field', () => {
  const fieldOf = (g: unknown) => {
    const r = validateGeometry(g);
    assert.equal(r.ok, false);
    return r.ok ? undefined : r.field;
  };
  // Unclosed ring.
  assert.equal(
    fieldOf(
      poly([
        [0, 0],
        [1, 0],
        [1, 1],
        [0, 1],
      ]),
    ),
    '/coordinates/0',
  );
  // Ring of only 3 positions (closed triangle without a middle point).
  assert.equal(
    fieldOf(
      poly([
        [0, 0],
        [1, 0],
        [0, 0],
      ]),
    ),
    '/coordinates/0',
  );
  // Hole unclosed in the second polygon of a MultiPolygon.
  assert.equal(
    fieldOf({
      type: 'MultiPolygon',
      coordinates: [
        square.coordinates,
        [
          ring([0, 0], [1, 0], [1, 1]),
          [
            [0, 0],
            [1, 0],
            [1, 1],
            [0, 1],
          ],
        ],
      ],
    }),
    '/coordinates/1/1',
  );
  // Longitude 181 at position 2.
  assert.equal(
    fieldOf(
      poly([
        [0, 0],
        [1, 0],
        [181, 1],
        [0, 0],
      ]),
    ),
    '/coordinates/0/2/0',
  );
  // Latitude -90.5 in a hole.
  assert.equal(
    fieldOf(
      poly(ring([0, 0], [10, 0], [10, 10]), [
        [1, 1],
        [2, 1],
        [2, -90.5],
        [1, 1],
      ]),
    ),
    '/coordinates/1/2/1',
  );
  // NaN, and a non-number.
  assert.equal(
    fieldOf(
      poly([
        [0, 0],
        [1, NaN],
        [1, 1],
        [0, 0],
      ]),
    ),
    '/coordinates/0/1/1',
  );
  assert.equal(
    fieldOf(
      poly([
        [0, 0],
        [1, 0],
        ['1', 1],
        [0, 0],
      ] as unknown as number[][]),
    ),
    '/coordinates/0/2/0',
  );
  // Position with 1 or 4 elements.
  assert.equal(fieldOf(poly([[0, 0], [1], [1, 1], [0, 0]])), '/coordinates/0/1');
  assert.equal(
    fieldOf(
      poly([
        [0, 0],
        [1, 0, 0, 0],
        [1, 1],
        [0, 0],
      ]),
    ),
    '/coordinates/0/1',
  );
  // Wrong type, missing coordinates, not an object, empty MultiPolygon.
  assert.equal(fieldOf({ type: 'Point', coordinates: [0, 0] }), '/type');
  assert.equal(
    fieldOf({
      type: 'LineString',
      coordinates: [
        [0, 0],
        [1, 1],
      ],
    }),
    '/type',
  );
  assert.equal(fieldOf({ type: 'Polygon' }), '/coordinates');
  assert.equal(fieldOf('Polygon'), '');
  assert.equal(fieldOf({ type: 'MultiPolygon', coordinates: [] }), '/coordinates');
  assert.equal(fieldOf({ type: 'Polygon', coordinates: [] }), '/coordinates');
  // Too many positions: 10,001 in total.
  const big: number[][] = [];
  for (let i = 0; i < 10_000; i++) big.push([(i / 10_000) * 10, i % 2]);
  big.push(big[0] as number[]);
  assert.equal(big.length, 10_001);
  assert.equal(fieldOf(poly(big)), '/coordinates');
  // Exactly 10,000 positions is fine.
  assert.equal(validateGeometry(poly([...big.slice(0, 9_999), big[0] as number[]])).ok, true);
  // The bound is over the whole geometry, not per ring.
  const half = [...big.slice(0, 5_000), big[0] as number[]];
  assert.equal(fieldOf({ type: 'MultiPolygon', coordinates: [[half], [half]] }), '/coordinates');
});

test('validateCircle names the offending field', () => {
  const fieldOf = (c: unknown) => {
    const r = validateCircle(c);
    assert.equal(r.ok, false);
    return r.ok ? undefined : r.field;
  };
  const good = { latitude: 10, longitude: 20, radiusMeters: 500 };
  assert.deepEqual(validateCircle(good), { ok: true, value: good });
  assert.equal(validateCircle({ ...good, radiusMeters: 20_037_509 }).ok, true);
  assert.equal(fieldOf({ ...good, latitude: 90.1 }), '/latitude');
  assert.equal(fieldOf({ ...good, latitude: NaN }), '/latitude');
  assert.equal(fieldOf({ ...good, longitude: -180.5 }), '/longitude');
  assert.equal(fieldOf({ ...good, longitude: '20' }), '/longitude');
  assert.equal(fieldOf({ ...good, radiusMeters: 0 }), '/radiusMeters');
  assert.equal(fieldOf({ ...good, radiusMeters: -1 }), '/radiusMeters');
  assert.equal(fieldOf({ ...good, radiusMeters: 20_037_510 }), '/radiusMeters');
  assert.equal(fieldOf({ latitude: 10, longitude: 20 }), '/radiusMeters');
  assert.equal(fieldOf(null), '');
});

test('bbox: polygons, and circles near a pole or the antimeridian', () => {
  const b = bbox(zone(square));
  assert.ok(b.minLat <= 50 && b.maxLat >= 51 && b.minLon <= 10 && b.maxLon >= 11);
  assert.ok(b.minLat > 49.99 && b.maxLat < 51.01 && b.minLon > 9.99 && b.maxLon < 11.01);

  const nearPole = bbox({ circle: { latitude: 89.9, longitude: 30, radiusMeters: 20_000 } });
  assert.equal(nearPole.minLon, -180);
  assert.equal(nearPole.maxLon, 180);
  assert.equal(nearPole.maxLat, 90);

  const nearAntimeridian = bbox({ circle: { latitude: -17, longitude: 179.9, radiusMeters: 50_000 } });
  assert.equal(nearAntimeridian.minLon, -180);
  assert.equal(nearAntimeridian.maxLon, 180);
  assert.ok(nearAntimeridian.minLat < -17.4 && nearAntimeridian.maxLat > -16.6 && nearAntimeridian.maxLat < -16.5);
  // And contains still finds points across the antimeridian.
  assert.equal(contains({ circle: { latitude: -17, longitude: 179.9, radiusMeters: 50_000 } }, -17, -179.9), true);

  // An ordinary circle gets a tight box that still holds every point on it.
  const c = { latitude: 60, longitude: 10, radiusMeters: 100_000 };
  const cb = bbox({ circle: c });
  assert.ok(cb.minLon > -180 && cb.maxLon < 180);
  for (let deg = 0; deg < 360; deg += 5) {
    // Destination point at distance r, bearing deg.
    const d = c.radiusMeters / EARTH_RADIUS_M;
    const th = (deg * Math.PI) / 180;
    const p1 = (c.latitude * Math.PI) / 180;
    const p2 = Math.asin(Math.sin(p1) * Math.cos(d) + Math.cos(p1) * Math.sin(d) * Math.cos(th));
    const l2 =
      (c.longitude * Math.PI) / 180 + Math.atan2(Math.sin(th) * Math.sin(d) * Math.cos(p1), Math.cos(d) - Math.sin(p1) * Math.sin(p2));
    const lat = (p2 * 180) / Math.PI;
    const lon = (l2 * 180) / Math.PI;
    assert.ok(lat >= cb.minLat && lat <= cb.maxLat && lon >= cb.minLon && lon <= cb.maxLon, `bearing ${deg}`);
    assert.equal(contains({ circle: c }, lat, lon), true, `boundary at bearing ${deg}`);
  }
});

test('a zone with neither geometry nor circle contains nothing', () => {
  assert.equal(contains({}, 0, 0), false);
  assert.equal(contains({ geometry: null, circle: null }, 0, 0), false);
});
