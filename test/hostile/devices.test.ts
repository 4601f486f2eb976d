// The hostile-tenant suite, the devices' ways in (OsmAnd, Traccar's forward) and what nobody signed
// in can do: tenant A's devices send times from year 0001 to the far future and the largest Traccar
// message; a stranger guesses device ids and usernames by the thousand. Tenant B's requests are
// timed meanwhile, the partition counts and the rows the strangers wrote are read after.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BOUNDS } from '../../src/bounds.js';
import { hostileService, partitionCounts, whileBWorks } from './tenants.js';

const TOKEN = 'traccar-forward-token-hostile-0123';
const h = await hostileService({ INGEST_TRACCAR_TOKEN: TOKEN });
const a = await h.tenant('tenant-a');
const b = await h.tenant('tenant-b');
const log = (what: string, x: unknown) => console.log(`${what}: ${JSON.stringify(x)}`);
const device = async (protocol: 'osmand' | 'traccar') => {
  const d = await h.api('POST', '/devices', { assetId: a.assetIds[0], protocol });
  assert.equal(d.status, 201, JSON.stringify(d.body));
  return d.body.uniqueId as string;
};
const traccar = (body: unknown) => h.call('POST', '/ingest/traccar', { body, headers: { authorization: `Bearer ${TOKEN}` } });

test('device times from year 0001 to the far future are refused with a 400 naming the field, and make no partition', async () => {
  const osmand = await device('osmand');
  const imei = await device('traccar');
  const before = await partitionCounts(h);
  const week = 7 * 86_400;
  const seen = await whileBWorks(h, b, async () => {
    // 300 OsmAnd messages a week apart from 1902 (seconds since 1970, negative), then the extremes.
    const times = [
      ...Array.from({ length: 300 }, (_, i) => String(-2_145_916_800 + i * week)),
      '0000-01-01T00:00:00Z',
      '0001-01-01T00:00:00Z',
      '99999999999999999999',
      '9999-12-31T00:00:00Z',
      String(Math.floor(Date.now() / 1000) + 400 * 86_400),
    ];
    for (const t of times) {
      const r = await h.call('GET', `/ingest/osmand?id=${osmand}&lat=1&lon=2&timestamp=${encodeURIComponent(t)}`);
      assert.equal(r.status, 400, `timestamp=${t}: ${r.text.slice(0, 300)}`);
      assert.equal(r.body.field, '/timestamp', r.text.slice(0, 300));
    }
    for (const fixTime of ['0000-01-01T00:00:00.000+00:00', '1902-01-01T00:00:00.000+00:00', '2300-01-01T00:00:00.000+00:00']) {
      const r = await traccar({ device: { uniqueId: imei }, position: { fixTime, latitude: 1, longitude: 2, valid: true } });
      assert.equal(r.status, 400, `fixTime=${fixTime}: ${r.text.slice(0, 300)}`);
      assert.equal(r.body.field, '/position/fixTime', r.text.slice(0, 300));
    }
  });
  log('device timestamps', seen);
  assert.deepEqual(await partitionCounts(h), before, 'no partition was made');
});

test('the largest Traccar message stores at most a bulk of records; past it, it is refused whole', async () => {
  const imei = await device('traccar');
  const now = new Date().toISOString();
  const attrs = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`temp${i + 1}`, i % 40]));
  const before = (await h.call('GET', `/api/v1/sensor-data?limit=1000&assetId=${a.assetIds[0]}`, { key: a.key })).body.length;
  const seen = await whileBWorks(h, b, async () => {
    const big = await traccar({
      device: { uniqueId: imei },
      position: { fixTime: now, latitude: 1, longitude: 2, attributes: attrs(20_000) },
    });
    assert.equal(big.status, 400, big.text.slice(0, 300));
    assert.match(big.body.field, /^\/position\/attributes/);
    const most = await traccar({
      device: { uniqueId: imei },
      position: { fixTime: now, latitude: 1, longitude: 2, attributes: attrs(BOUNDS.recordsPerRequest.value - 1) },
    });
    assert.equal(most.status, 204, most.text.slice(0, 300));
  });
  log('largest Traccar message', seen);
  const after = await h.call('GET', `/api/v1/sensor-data?limit=1000&assetId=${a.assetIds[0]}`, { key: a.key });
  assert.equal(after.body.length - before, BOUNDS.recordsPerRequest.value - 1, 'the refused message stored nothing');
});
