// The hostile-tenant suite, the asset overview (GET /assets/overview; the bound overviewAssets):
// tenant A has more assets than one answer covers, with readings spread over weeks, positions and
// open alarms, and asks for its overview ten at a time in every sort, filtered and as CSV, while
// tenant B works: B is not held, every answer of A covers at most OVERVIEW_MAX_ASSETS assets and
// says it left some out, and nothing of B's shows in A's answers. The bound is set low here (the
// default is 1,000) so that A's fleet is quick to make on the embedded database too.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { hostileService, whileBWorks } from './tenants.js';

const MAX = 40;
const h = await hostileService({ OVERVIEW_MAX_ASSETS: String(MAX) });
const a = await h.tenant('overview-a', MAX + 10);
const b = await h.tenant('overview-b');

test('a tenant over the bound asks for its overview in every way at once: B is not held, each answer covers the bound', async () => {
  // A's data: readings over six weeks (several partitions), a specification on a few reefers whose
  // readings are out of range (open alarms), and a position for each asset.
  const now = Date.now();
  for (const [n, assetId] of a.assetIds.slice(0, 5).entries()) {
    const spec = await h.call('POST', '/api/v1/specifications', {
      key: a.key,
      body: { assetId, type: 'REEFER', name: `spec-${n}`, ranges: { cargo: { sensors: { supplyAirTemperature: [-30, -10] } } } },
    });
    assert.equal(spec.status, 201, spec.text);
  }
  const readings = Array.from({ length: 1000 }, (_, i) => ({
    assetId: a.assetIds[i % a.assetIds.length],
    whenCreated: new Date(now - 60_000 - ((i * 7919) % (42 * 1440)) * 60_000).toISOString(),
    data: { supplyAirTemperature: (i % 30) - 25 },
  }));
  const stored = await h.call('POST', '/api/v1/reefer-data', { key: a.key, body: readings });
  assert.equal(stored.status, 201, stored.text.slice(0, 300));
  const positions = a.assetIds.map((assetId, i) => ({
    assetId,
    latitude: (i % 80) - 40,
    longitude: i % 170,
    whenCreated: new Date(now - i * 1000).toISOString(),
  }));
  assert.equal((await h.call('POST', '/api/v1/locations', { key: a.key, body: positions })).status, 201);

  const queries = [
    '',
    '?sort=temperature',
    '?sort=openAlarms&order=asc',
    '?sort=lastSeen',
    '?sort=attention&attention=true',
    '?q=asset-1',
    '?disabled=false&sort=name&order=desc',
    '?limit=7&sort=temperature',
    '?format=csv&sort=temperature',
    '?cursor=forged',
  ];
  const answers: { query: string; status: number; rows: number; truncated: string | null; text: string }[] = [];
  const seen = await whileBWorks(h, b, async () => {
    for (let round = 0; round < 3; round++) {
      const batch = await Promise.all(queries.map((query) => h.call('GET', `/api/v1/assets/overview${query}`, { key: a.key })));
      batch.forEach((r, i) =>
        answers.push({
          query: queries[i]!,
          status: r.status,
          rows: Array.isArray(r.body) ? r.body.length : r.text.trimEnd().split('\n').length - 1,
          truncated: r.headers.get('overview-truncated'),
          text: r.text,
        }),
      );
    }
  });
  console.log(`asset overview: ${JSON.stringify(seen)}`);
  for (const x of answers) {
    if (x.query === '?cursor=forged') {
      assert.equal(x.status, 400, x.text.slice(0, 300));
      continue;
    }
    // A rate limit's 429 would be A's own (10 in flight per credential): every answer here is within it.
    assert.equal(x.status, 200, `${x.query}: ${x.text.slice(0, 300)}`);
    assert.ok(x.rows <= MAX, `${x.query}: ${x.rows} rows, past the bound`);
    assert.ok(!x.text.includes(b.assetIds[0]!), `${x.query}: B's asset in A's answer`);
    if (!x.query.startsWith('?q=')) assert.equal(x.truncated, 'true', `${x.query}: says it left some out`);
  }
  const full = answers.find((x) => x.query === '')!;
  assert.equal(full.rows, MAX, 'a default page of 100 holds the whole bound');
  assert.equal(answers.find((x) => x.query.startsWith('?format=csv'))!.rows, MAX, 'the CSV covers the bound');
  // B's own overview: its one asset.
  const mine = await h.call('GET', '/api/v1/assets/overview', { key: b.key });
  assert.deepEqual(
    (mine.body as { id: string }[]).map((r) => r.id),
    b.assetIds,
  );
  assert.equal(mine.headers.get('overview-truncated'), null);
});
