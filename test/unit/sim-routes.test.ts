// The fleet simulator's sea lanes and road legs (sim/routes.ts): continuous, on the globe, ending
// where they say. Pure unit test, no service.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { distanceKm, LEGS, Track, wrapLon } from '../../sim/routes.js';

test('lanes: every leg is continuous, never jumps across the globe, and positions along it are real coordinates', () => {
  for (const leg of LEGS) {
    const track = new Track(leg);
    assert.ok(track.lengthKm > 20, `${leg.from} -> ${leg.to}`);
    for (let i = 1; i < leg.path.length; i++) {
      const hop = distanceKm(leg.path[i - 1]!, leg.path[i]!);
      assert.ok(hop < 3500, `${leg.from} -> ${leg.to}: a ${Math.round(hop)} km hop at point ${i}`);
      assert.ok(Math.abs(leg.path[i]![1] - leg.path[i - 1]![1]) < 180, 'unwrapped longitudes');
    }
    for (let f = 0; f <= 1; f += 0.05) {
      const p = track.at(f * track.lengthKm);
      assert.ok(p.lat >= -90 && p.lat <= 90 && p.lon >= -180 && p.lon <= 180, `${p.lat},${p.lon}`);
      assert.ok(p.heading >= 0 && p.heading < 360);
    }
    const end = track.at(track.lengthKm);
    const last = leg.path[leg.path.length - 1]!;
    assert.ok(Math.abs(end.lat - last[0]) < 1e-9 && Math.abs(end.lon - wrapLon(last[1])) < 1e-9, 'ends at its destination');
  }
  const pacific = LEGS.find((l) => l.from === 'shanghai' && l.to === 'losAngeles')!;
  assert.ok(
    pacific.path.some(([, lon]) => lon > 180),
    'the transpacific lane crosses the antimeridian unwrapped',
  );
});
