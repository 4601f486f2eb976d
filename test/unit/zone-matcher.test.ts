// API guide 8: matching locations to zones (src/zones/matcher.ts, slices.ts) gives geo.ts
// contains()'s answer point for point, with the banded edge index and the stored boxes, and gives
// the event loop back while it works. Pure unit tests, no database.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setImmediate } from 'node:timers/promises';
import { bbox, contains, type Circle, type Geometry } from '../../src/zones/geo.js';
import { type MatchZone, PolygonIndex, ZoneMatcher } from '../../src/zones/matcher.js';
import { Slices } from '../../src/zones/slices.js';

/** A deterministic pseudo-random sequence (mulberry32). */
function random(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A star-shaped ring of n positions (closed) around (lon, lat), radii between r/3 and r. */
function star(rnd: () => number, n: number, lon: number, lat: number, r: number): number[][] {
  const pts: number[][] = [];
  for (let i = 0; i < n - 1; i++) {
    const t = (2 * Math.PI * i) / (n - 1);
    const d = r * (1 / 3 + (2 / 3) * rnd());
    pts.push([Math.round((lon + d * Math.cos(t)) * 1e6) / 1e6, Math.round((lat + d * Math.sin(t)) * 1e6) / 1e6]);
  }
  pts.push(pts[0]!);
  return pts;
}

const rect = (lon0: number, lat0: number, lon1: number, lat1: number) => [
  [lon0, lat0],
  [lon1, lat0],
  [lon1, lat1],
  [lon0, lat1],
  [lon0, lat0],
];

test('the banded index answers as contains() on random stars, holes, multipolygons, vertices and edges', () => {
  const rnd = random(42);
  const shapes: Geometry[] = [
    { type: 'Polygon', coordinates: [star(rnd, 9999, 10, 50, 1)] },
    { type: 'Polygon', coordinates: [star(rnd, 40, 10, 50, 1)] },
    { type: 'Polygon', coordinates: [rect(9, 49, 11, 51), rect(9.5, 49.5, 10, 50), rect(10.2, 50.2, 10.8, 50.8)] },
    {
      type: 'MultiPolygon',
      coordinates: [[rect(9, 49, 10, 50)], [rect(10, 50, 11, 51), rect(10.4, 50.4, 10.6, 50.6)], [star(rnd, 300, 10.5, 49.5, 0.4)]],
    },
    // Every edge spans all of the zone's height: the index falls back to fewer bands.
    {
      type: 'Polygon',
      coordinates: [[...Array.from({ length: 200 }, (_, i) => [9 + i / 100, i % 2 ? 51 : 49]), [11, 48], [9, 48], [9, 49]]],
    },
  ];
  for (const [s, g] of shapes.entries()) {
    const index = new PolygonIndex(g);
    const vertices = (g.type === 'Polygon' ? [g.coordinates] : g.coordinates).flat(2);
    const points: [number, number][] = [];
    for (let i = 0; i < 3000; i++) points.push([48.5 + 3 * rnd(), 8.5 + 3 * rnd()]);
    for (const v of vertices.slice(0, 500)) points.push([v[1]!, v[0]!]); // on vertices
    for (let i = 0; i + 1 < Math.min(vertices.length, 500); i++) {
      const [a, b] = [vertices[i]!, vertices[i + 1]!];
      points.push([(a[1]! + b[1]!) / 2, (a[0]! + b[0]!) / 2]); // on (or by) edges
    }
    let inside = 0;
    for (const [lat, lon] of points) {
      const want = contains({ geometry: g }, lat, lon);
      assert.equal(index.contains(lat, lon), want, `shape ${s} at ${lat},${lon}`);
      if (want) inside++;
    }
    assert.ok(inside > 100 && inside < points.length, `shape ${s}: a mix of inside (${inside}) and outside`);
  }
});

test('ZoneMatcher: the stored box is used as stored, circles and the antimeridian as contains() has them', async () => {
  const zone = (id: string, geometry: Geometry | null, circle: Circle | null, box = true): MatchZone => {
    const b = box && (geometry || circle) ? bbox({ geometry, circle }) : null;
    return {
      id,
      geometry,
      circle,
      min_lat: b?.minLat ?? null,
      max_lat: b?.maxLat ?? null,
      min_lon: b?.minLon ?? null,
      max_lon: b?.maxLon ?? null,
    };
  };
  const east = { type: 'Polygon', coordinates: [rect(170, -10, 180, 10)] } as Geometry;
  const west = { type: 'Polygon', coordinates: [rect(-180, -10, -170, 10)] } as Geometry;
  const m = new ZoneMatcher([
    zone('1', east, null),
    zone('2', west, null, false),
    zone('3', null, { latitude: 0, longitude: 179.9, radiusMeters: 50_000 }),
    zone('4', null, null),
  ]);
  const s = new Slices();
  assert.deepEqual(await m.inside(0, 180, s), ['1', '2', '3']);
  assert.deepEqual(await m.inside(0, -180, s), ['1', '2', '3']);
  assert.deepEqual(await m.inside(0, 175, s), ['1']);
  assert.deepEqual(await m.inside(20, 175, s), []);
  // A stored box is trusted: one that (wrongly) leaves the point out means "not in it", unlike recomputing.
  const narrow = { ...zone('5', east, null), max_lat: -5 };
  assert.deepEqual(await new ZoneMatcher([narrow]).inside(0, 175, s), []);
  assert.equal(contains({ geometry: east, box: { minLat: -10, maxLat: -5, minLon: 170, maxLon: 180 } }, 0, 175), false);
});

test('Slices give the event loop back once a slice has run its budget, and only then', async () => {
  const fresh = new Slices(60_000);
  await fresh.tick();
  assert.equal(fresh.yields, 0, 'within its budget a tick does not yield');
  const s = new Slices(5);
  let other = false;
  void setImmediate().then(() => {
    other = true;
  });
  const start = performance.now();
  // Busy work in slices: the other task runs in between (without yielding, this would spin until the guard).
  while (!other) {
    await s.tick();
    assert.ok(performance.now() - start < 10_000, 'the other task never ran');
  }
  assert.ok(s.yields >= 1);
});
