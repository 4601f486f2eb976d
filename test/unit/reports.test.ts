// The reports' computations without a database (src/reports/movement.ts, excursions.ts), against
// fixtures computed by hand: stops and the trips between them (one across the antimeridian), and
// a reefer sensor's excursions, gaps and time in range.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ExcursionTracker } from '../../src/reports/excursions.js';
import { MovementDetector, type Stop, type Trip } from '../../src/reports/movement.js';
import { haversineMeters } from '../../src/zones/geo.js';

const MIN = 60_000;
const T0 = Date.UTC(2026, 10, 1);

function detect(points: [number, number, number, number?][], radius = 200, minutes = 10, paths = false) {
  const stops: Stop[] = [];
  const trips: Trip[] = [];
  const d = new MovementDetector(radius, minutes * MIN, { stop: (s) => stops.push(s), trip: (t) => trips.push(t) }, paths);
  for (const [m, latitude, longitude, speed] of points) d.push({ t: T0 + m * MIN, latitude, longitude, speed: speed ?? null });
  d.finish();
  return { stops, trips };
}

test('a route with two stops: the trip between them, and the trips into the first and out of the last', () => {
  // Moving east along the equator 0.01° a minute (1,113 m), stopped 15 minutes at 0.05, moving
  // again, stopped 12 minutes at 0.10 (jittering 50 m), then off again.
  const route: [number, number, number, number?][] = [];
  for (let m = 0; m <= 5; m++) route.push([m, 0, m * 0.01, 60]);
  for (let m = 6; m <= 20; m++) route.push([m, 0, 0.05, 0]); // stop 1: minutes 5..20
  for (let m = 21; m <= 25; m++) route.push([m, 0, 0.05 + (m - 20) * 0.01, m === 23 ? 72 : 60]);
  for (let m = 26; m <= 37; m++) route.push([m, m % 2 ? 0.00045 : 0, 0.1, 0]); // stop 2: minutes 25..37
  for (let m = 38; m <= 40; m++) route.push([m, 0, 0.1 + (m - 37) * 0.01, 60]);
  const { stops, trips } = detect(route);
  assert.deepEqual(
    stops.map((s) => [(s.start - T0) / MIN, (s.end - T0) / MIN]),
    [
      [5, 20],
      [25, 37],
    ],
  );
  assert.ok(Math.abs(stops[0]!.longitude - 0.05) < 1e-9 && Math.abs(stops[0]!.latitude) < 1e-9);
  // Stop 2 is the mean of 13 positions, 6 of them 50 m north.
  assert.ok(Math.abs(stops[1]!.latitude - (0.00045 * 6) / 13) < 1e-7, String(stops[1]!.latitude));
  assert.deepEqual(
    trips.map((t) => [(t.start.t - T0) / MIN, (t.end.t - T0) / MIN]),
    [
      [0, 5],
      [20, 25],
      [37, 40],
    ],
  );
  const step = haversineMeters(0, 0, 0, 0.01);
  assert.ok(Math.abs(trips[0]!.distanceMeters - 5 * step) < 1e-6);
  assert.ok(Math.abs(trips[1]!.distanceMeters - 5 * step) < 1e-6);
  assert.equal(trips[1]!.maxSpeed, 72);
  // The last trip starts at stop 2's last position (50 m north of the line, minute 37).
  assert.ok(Math.abs(trips[2]!.distanceMeters - (haversineMeters(0.00045, 0.1, 0, 0.11) + 2 * step)) < 1e-6);
});

test('a trip across the antimeridian is a few kilometres, not the world; its path keeps every position', () => {
  const route: [number, number, number][] = [];
  for (let m = 0; m <= 12; m++) route.push([m, -17, 179.98]); // a stop at Fiji's longitude
  for (let m = 13; m <= 17; m++) route.push([m, -17, 179.98 + (m - 12) * 0.01 - (179.98 + (m - 12) * 0.01 > 180 ? 360 : 0)]);
  for (let m = 18; m <= 30; m++) route.push([m, -17, -179.97]);
  const { stops, trips } = detect(route, 200, 10, true);
  assert.equal(stops.length, 2);
  assert.ok(Math.abs(stops[1]!.longitude + 179.97) < 1e-9, String(stops[1]!.longitude));
  assert.equal(trips.length, 1);
  const expected = haversineMeters(-17, 179.98, -17, -179.97);
  // Steps along a parallel, next to the great circle between the ends: the same to the centimetre over 5 km.
  assert.ok(Math.abs(trips[0]!.distanceMeters - expected) < 0.01, `${trips[0]!.distanceMeters} vs ${expected}`);
  assert.ok(trips[0]!.distanceMeters < 6000);
  assert.equal(trips[0]!.path!.length, 6, "the first stop's last position, four under way, the next stop's first");
  // A stop centred on the antimeridian: its mean is on it, not at longitude 0.
  const around = detect(Array.from({ length: 12 }, (_, m) => [m, 10, m % 2 ? 179.9995 : -179.9995] as [number, number, number]));
  assert.equal(around.stops.length, 1);
  assert.ok(Math.abs(Math.abs(around.stops[0]!.longitude) - 180) < 1e-6, String(around.stops[0]!.longitude));
});

test('a pause shorter than stopMinutes is no stop; positions that never stop are one trip; one position is nothing', () => {
  const route: [number, number, number][] = [];
  for (let m = 0; m <= 4; m++) route.push([m, 0, m * 0.01]);
  for (let m = 5; m <= 12; m++) route.push([m, 0, 0.05]); // 7 minutes
  for (let m = 13; m <= 15; m++) route.push([m, 0, 0.05 + (m - 12) * 0.01]);
  const { stops, trips } = detect(route);
  assert.equal(stops.length, 0);
  assert.equal(trips.length, 1);
  assert.deepEqual([(trips[0]!.start.t - T0) / MIN, (trips[0]!.end.t - T0) / MIN], [0, 15]);
  assert.ok(Math.abs(trips[0]!.distanceMeters - 8 * haversineMeters(0, 0, 0, 0.01)) < 1e-6);
  assert.equal(trips[0]!.maxSpeed, null, 'no speed reported');
  assert.deepEqual(detect([[0, 1, 1]]), { stops: [], trips: [] });
  // A stop from the first position to the last: one stop, no trip.
  const still = detect(Array.from({ length: 30 }, (_, m) => [m, 1, 1] as [number, number, number]));
  assert.equal(still.stops.length, 1);
  assert.equal(still.trips.length, 0);
});

function track(min: number | null, max: number | null, readings: [number, number][], fromMin: number, endMin: number, gapMin = 30) {
  const t = new ExcursionTracker(min, max, gapMin * MIN, T0 + fromMin * MIN, T0 + endMin * MIN);
  for (const [m, v] of readings) t.push(T0 + m * MIN, v);
  const r = t.finish();
  const m = (x: number) => (x - T0) / MIN;
  return {
    excursions: r.excursions.map((e) => [m(e.start), m(e.end), e.min, e.max]),
    gaps: r.gaps.map((g) => [m(g.start), m(g.end)]),
    inMin: r.inMs / MIN,
    outMin: r.outMs / MIN,
  };
}

test('excursions are time weighted: from the first reading out to the first back in; a short one counts as well', () => {
  // Range 2..8, a reading every 10 minutes from minute 0 to 120; out at 30 (9.5), 40 (10.1), back at 50;
  // a 5-minute blip at 80 (1.2) read again at 85 (3.0).
  const readings: [number, number][] = [
    [0, 5],
    [10, 5],
    [20, 6],
    [30, 9.5],
    [40, 10.1],
    [50, 7],
    [60, 5],
    [70, 5],
    [80, 1.2],
    [85, 3],
    [90, 4],
    [100, 4],
    [110, 4],
    [120, 4],
  ];
  const r = track(2, 8, readings, 0, 120);
  assert.deepEqual(r.excursions, [
    [30, 50, 9.5, 10.1],
    [80, 85, 1.2, 1.2],
  ]);
  assert.deepEqual(r.gaps, []);
  assert.equal(r.outMin, 25);
  assert.equal(r.inMin, 95);
});

test('a data gap is counted neither in nor out and ends an excursion; the range clips readings around it', () => {
  const readings: [number, number][] = [
    [-20, 9], // before the range, out: holds from minute 0
    [5, 9],
    [10, 4],
    [20, 4],
    [25, 12], // out, then nothing for 45 minutes
    [70, 12],
    [80, 5],
    [95, 5], // the last reading: the range ends at 110, within the gap of 30
  ];
  const r = track(null, 8, readings, 0, 110);
  assert.deepEqual(r.excursions, [
    [0, 10, 9, 9],
    [25, 25, 12, 12],
    [70, 80, 12, 12],
  ]);
  assert.deepEqual(r.gaps, [[25, 70]]);
  assert.equal(r.outMin, 10 + 10);
  assert.equal(r.inMin, 15 + 30);
  // The same data to 130: the last reading is 35 minutes before the end, a gap.
  const later = track(null, 8, readings, 0, 130);
  assert.deepEqual(later.gaps, [
    [25, 70],
    [95, 130],
  ]);
  assert.equal(later.inMin, 15 + 15);
  // An excursion still open at the end ends with the range; a reading after it only closes the one before.
  const open = track(
    2,
    8,
    [
      [0, 5],
      [50, 9],
      [65, 9.5],
      [75, 4],
    ],
    0,
    60,
  );
  assert.deepEqual(open.excursions, [[50, 60, 9, 9]]);
  assert.deepEqual(open.gaps, [[0, 50]]);
  assert.equal(open.outMin, 10);
});

test('a span of readings in range, close together, counts as the readings it stands for', () => {
  const readings: [number, number][] = [
    [-10, 9],
    [5, 9],
    [20, 4],
  ];
  const after: [number, number][] = [
    [95, 4.5],
    [100, 12],
    [140, 5],
  ];
  const full = new ExcursionTracker(2, 8, 30 * MIN, T0, T0 + 150 * MIN);
  const spanned = new ExcursionTracker(2, 8, 30 * MIN, T0, T0 + 150 * MIN);
  for (const t of [full, spanned]) for (const [m, v] of readings) t.push(T0 + m * MIN, v);
  // Minutes 30..90 every 10 minutes, all at 5; the other gets them as one span.
  for (let m = 30; m <= 90; m += 10) full.push(T0 + m * MIN, 5);
  spanned.pushSpan(T0 + 30 * MIN, T0 + 90 * MIN, 5);
  for (const t of [full, spanned]) for (const [m, v] of after) t.push(T0 + m * MIN, v);
  assert.deepEqual(spanned.finish(), full.finish());
});
