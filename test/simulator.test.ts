// The fleet simulator (sim/): it signs in with a real credential, makes its fleet through
// the API, and what it reports as stored is what the service holds (its lanes: test/unit/sim-routes.test.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { simulate } from '../sim/simulator.js';
import { OPERATOR, ok, ownerWithKey, startApp } from './helpers.js';

const ta = await startApp(undefined, { RATE_LIMIT_MAX: '100000', RATE_LIMIT_CONCURRENT: '1000' });

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
