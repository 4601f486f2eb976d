// Issue 11's fleet simulator (sim/): it signs in with a real credential, makes its fleet through
// the API, and what it reports as stored is what the service holds; positions stay on the lanes.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { distanceKm, LEGS, Track, wrapLon } from '../sim/routes.js';
import { simulate } from '../sim/simulator.js';
import { OPERATOR, ok, ownerWithKey, startApp } from './helpers.js';

const ta = await startApp(undefined, { RATE_LIMIT_MAX: '100000', RATE_LIMIT_CONCURRENT: '1000' });

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

test('the simulator with an API key: its fleet is made once, every record it counts is stored, none fails', async () => {
  const o = await ownerWithKey(ta, 'sim-key');
  const first = await simulate({ url: ta.url, auth: { apiKey: o.key }, assets: 6, rate: 150, durationSeconds: 3, prefix: 'T', seed: 7 });
  assert.equal(first.errors, 0, first.lastError);
  assert.equal(first.backlog, 0);
  assert.deepEqual(first.ownerIds, [o.ownerId]);
  assert.ok(first.sent >= 150, `sent ${first.sent}`);
  const count = async (path: string) =>
    ok(await ta.call('GET', `/api/v1${path}?ownerId=${o.ownerId}&limit=1000`, { token: o.key }), 200).length;
  assert.equal(await count('/locations'), first.byType.location);
  assert.equal(await count('/sensor-data'), first.byType.sensordata);
  assert.equal(await count('/reefer-data'), first.byType.reeferdata);
  assert.equal(await count('/genset-data'), first.byType.gensetdata);
  assert.ok(first.byType.location > 0 && first.byType.reeferdata > 0 && first.byType.sensordata > 0);
  const assets = ok(await ta.call('GET', `/api/v1/assets?ownerId=${o.ownerId}`, { token: o.key }), 200);
  assert.equal(assets.length, 6);
  assert.deepEqual(assets.map((a: any) => a.name).sort(), ['TC00001', 'TC00004', 'TR00002', 'TR00003', 'TR00005', 'TR00006']);
  // A reefer record has the shape the alert engine reads.
  const [reefer] = ok(await ta.call('GET', `/api/v1/reefer-data?ownerId=${o.ownerId}&limit=1`, { token: o.key }), 200);
  assert.equal(typeof reefer.data.cargo.sensors.supplyAirTemperature, 'number');
  assert.equal(typeof reefer.data.powerOn, 'boolean');

  // A second run with the same prefix finds the fleet instead of making another.
  const second = await simulate({ url: ta.url, auth: { apiKey: o.key }, assets: 6, rate: 100, durationSeconds: 1, prefix: 'T', seed: 7 });
  assert.deepEqual(second.assetIds.sort(), first.assetIds.sort());
  assert.equal(ok(await ta.call('GET', `/api/v1/assets?ownerId=${o.ownerId}`, { token: o.key }), 200).length, 6);
});

test('the simulator signs in with the password grant, makes owners by name (admin) and stops on its signal', async () => {
  const controller = new AbortController();
  const run = simulate({
    url: ta.url,
    auth: { clientId: OPERATOR.clientId, clientSecret: OPERATOR.clientSecret, username: OPERATOR.username, password: OPERATOR.password },
    assets: 4,
    owners: 2,
    rate: 50,
    prefix: 'PW',
    signal: controller.signal,
    onProgress: (p) => {
      if (p.sent > 0) controller.abort();
    },
  });
  const s = await run;
  assert.equal(s.errors, 0, s.lastError);
  assert.equal(s.ownerIds.length, 2);
  const names = await Promise.all(
    s.ownerIds.map(async (id) => ok(await ta.call('GET', `/api/v1/owners/${id}`, { token: ta.adminToken }), 200).name),
  );
  assert.deepEqual(names, ['PW Fleet 1', 'PW Fleet 2']);
  assert.ok(s.sent > 0);
});
