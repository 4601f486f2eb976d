// Operations endpoints (API guide 4): health, readiness, Prometheus metrics, docs page; the
// dashboard's land files (gzip, caching, ETag: the map itself is test/dashboard-map.test.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fs from 'node:fs';
import { DASHBOARD_CSP } from '../src/dashboard/dashboard.js';
import { compileSchemasNow } from '../src/http/envelope.js';
import { startApp } from './helpers.js';

test("healthz, readyz, metrics, the docs page and the map's land files answer without credentials", async (t) => {
  const ta = await startApp(t);
  const health = await ta.call('GET', '/healthz');
  assert.equal(health.status, 200);
  assert.equal(health.body.status, 'ok');
  const ready = await ta.call('GET', '/readyz');
  assert.equal(ready.status, 200);
  assert.equal(ready.body.database, ta.databaseUrl ? 'postgres' : 'pglite');
  await ta.call('GET', '/api/v1/owners', { token: ta.adminToken });
  const metrics = await fetch(`${ta.url}/metrics`);
  assert.equal(metrics.status, 200);
  assert.match(metrics.headers.get('content-type') ?? '', /text\/plain/);
  const text = await metrics.text();
  assert.match(text, /http_requests_total\{method="GET",route="\/api\/v1\/owners",status="200"\} 1/);
  assert.match(text, /http_request_duration_seconds_bucket/);
  assert.match(text, /process_cpu_user_seconds_total/);
  assert.match(text, /delivery_requests_sent_total \d+/);
  assert.match(text, /deliveries_pending 0/);
  // Statements sent to PostgreSQL (the scale benchmark reads them); PGlite has none to count.
  if (ta.databaseUrl) assert.ok(Number(/^db_statements_total (\d+)/m.exec(text)?.[1]) > 0, 'db_statements_total');
  else assert.doesNotMatch(text, /db_statements_total/);
  const docs = await fetch(`${ta.url}/docs`);
  assert.equal(docs.status, 200);
  assert.match(await docs.text(), /swagger-ui-bundle\.js/);
  for (const asset of ['/docs/swagger-ui-bundle.js', '/docs/swagger-ui.css', '/docs/init.js']) {
    const r = await fetch(`${ta.url}${asset}`);
    assert.equal(r.status, 200, asset);
    assert.ok((await r.arrayBuffer()).byteLength > 0, asset);
  }
  // The land files: from node_modules, gzipped when asked, cacheable, revalidated by their ETag.
  for (const level of ['110m', '50m', '10m']) {
    const r = await fetch(`${ta.url}/dashboard/land-${level}.json`, { headers: { 'accept-encoding': 'gzip' } });
    assert.equal(r.status, 200, level);
    assert.equal(r.headers.get('content-encoding'), 'gzip', level);
    assert.equal(r.headers.get('content-security-policy'), DASHBOARD_CSP);
    assert.match(r.headers.get('cache-control')!, /public, max-age=\d+, immutable/);
    const topo = (await r.json()) as { type: string; objects: { land: unknown } };
    assert.equal(topo.type, 'Topology');
    assert.ok(topo.objects.land, level);
    const again = await fetch(`${ta.url}/dashboard/land-${level}.json`, { headers: { 'if-none-match': r.headers.get('etag')! } });
    assert.equal(again.status, 304, `${level} revalidated`);
  }
  const plain = await fetch(`${ta.url}/dashboard/land-10m.json`, { headers: { 'accept-encoding': 'identity' } });
  assert.equal(plain.headers.get('content-encoding'), null);
  assert.equal((await plain.arrayBuffer()).byteLength, fs.statSync('node_modules/world-atlas/land-10m.json').size);
  // Route schemas compile on their route's first use (src/http/envelope.ts): every one the app has
  // registered and not used yet compiles here, so a schema that cannot compile fails this test, not
  // a route's first request in production.
  assert.ok(compileSchemasNow() > 50, 'the schemas this test did not use were still waiting');
  assert.equal(compileSchemasNow(), 0, 'and are all compiled now');
});

test('probes and scrapes are not logged at info; API requests are', async () => {
  const { buildApp } = await import('../src/app.js');
  const { testConfig } = await import('./helpers.js');
  const lines: { url?: string; req?: { url?: string }; msg?: string }[] = [];
  const stream = { write: (line: string) => void lines.push(JSON.parse(line)) };
  const app = await buildApp(testConfig({ DELIVERY_ENABLED: 'false' }), { logger: { level: 'info', stream } });
  try {
    await app.ready();
    for (const url of ['/healthz', '/readyz', '/metrics']) assert.equal((await app.inject({ url })).statusCode, 200, url);
    const logged = (url: string) => lines.filter((l) => l.req?.url === url || l.url === url).length;
    for (const url of ['/healthz', '/readyz', '/metrics']) assert.equal(logged(url), 0, `${url} logged`);
    await app.inject({ url: '/api/v1/owners' }); // a 401, logged as any API request is
    assert.ok(logged('/api/v1/owners') > 0, 'an API request is logged at info');
  } finally {
    await app.close();
  }
});
