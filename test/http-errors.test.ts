// API guide 1, 4 and 6 (API guide 6): every status >= 400 carries {error, message} as strings plus
// code and requestId, for unknown routes, wrong verbs, oversized, mistyped and malformed bodies too.
// Idempotency-Key on a create: a repeat replays the first answer, another body is a 422, a repeat
// while the first runs is a 409. The OpenAPI document is valid OpenAPI 3.1 and lists every route.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Validator } from '@seriousme/openapi-schema-validator';
import { BOUNDS } from '../src/bounds.js';
import { ok, ownerWithKey, startApp, TEST_DB, type Res, connectPg } from './helpers.js';

// One service for the whole file (PGlite takes seconds to start); every test makes its own owners.
const ta = await startApp(undefined, { RATE_LIMIT_MAX: '100000' });
const admin = ta.adminToken;
const MiB = 1024 * 1024;

function assertEnvelope(r: Res, status: number, code: string, what: string) {
  assert.equal(r.status, status, `${what}: expected ${status}, got ${r.status} ${r.raw.slice(0, 500)}`);
  assert.match(String(r.headers['content-type']), /^application\/json/, `${what}: JSON`);
  assert.equal(typeof r.body?.error, 'string', `${what}: error`);
  assert.ok(r.body.error.length > 0, `${what}: error not empty`);
  assert.equal(typeof r.body.message, 'string', `${what}: message`);
  assert.ok(r.body.message.length > 0, `${what}: message not empty`);
  assert.equal(r.body.code, code, `${what}: code`);
  assert.equal(typeof r.body.requestId, 'string', `${what}: requestId`);
  assert.ok(r.body.requestId.length > 0, `${what}: requestId not empty`);
  assert.doesNotMatch(r.raw, /\bat .+\.(ts|js):\d+|node_modules/, `${what}: no internals`);
}

const assetCount = async (token: string) => {
  const r = await ta.call('GET', '/api/v1/assets?limit=1000', { token });
  assert.equal(r.status, 200);
  return r.body.length as number;
};

test('an unknown route answers 404 in the error envelope, inside and outside /api/v1, with or without credentials', async () => {
  for (const [method, path, token] of [
    ['GET', '/api/v1/nope', undefined],
    ['GET', '/api/v1/nope', admin],
    ['POST', '/api/v1/assets/1/2/3', admin],
    ['GET', '/nope', undefined],
    ['DELETE', '/', undefined],
    ['GET', '/api/v2/assets', admin],
  ] as const) {
    const r = await ta.call(method, path, token ? { token } : {});
    assertEnvelope(r, 404, 'NOT_FOUND', `${method} ${path}`);
  }
  // Two requests, two request ids.
  const a = await ta.call('GET', '/api/v1/nope');
  const b = await ta.call('GET', '/api/v1/nope');
  assert.notEqual(a.body.requestId, b.body.requestId);
});

test('a known path with another verb answers 405 with an Allow header listing the verbs it takes', async () => {
  const id = '00000000-0000-4000-8000-000000000000';
  for (const [method, path, allowed] of [
    ['DELETE', '/api/v1/assets', ['GET', 'POST']],
    ['PUT', '/api/v1/owners', ['GET', 'POST']],
    ['POST', `/api/v1/assets/${id}`, ['DELETE', 'GET', 'PATCH', 'PUT']],
    ['PUT', `/api/v1/api-keys/${id}`, ['DELETE']],
    ['GET', `/api/v1/clients/${id}`, ['DELETE', 'PATCH']],
    ['PATCH', '/api/v1/locations', ['GET', 'POST']],
  ] as const) {
    for (const token of [admin, undefined]) {
      const r = await ta.call(method, path, token ? { token, body: {} } : { body: {} });
      assertEnvelope(r, 405, 'METHOD_NOT_ALLOWED', `${method} ${path}`);
      const allow = String(r.headers.allow ?? '')
        .split(',')
        .map((m) => m.trim())
        .filter((m) => m && m !== 'HEAD' && m !== 'OPTIONS')
        .sort();
      assert.deepEqual(allow, [...allowed], `${method} ${path}: Allow`);
    }
  }
});

test('a body over 1 MiB answers 413 (8 MiB on data-record routes), and nothing is stored', async () => {
  const o = await ownerWithKey(ta, 'big-bodies');
  const before = await assetCount(o.key);
  const big = JSON.stringify({ name: 'too-big', note: 'x'.repeat(MiB) });
  let r = await ta.call('POST', '/api/v1/assets', { token: o.key, body: big });
  assertEnvelope(r, 413, 'PAYLOAD_TOO_LARGE', 'asset over 1 MiB');
  r = await ta.call('POST', '/api/v1/owners', { token: admin, body: JSON.stringify({ name: 'too-big', note: 'x'.repeat(MiB) }) });
  assertEnvelope(r, 413, 'PAYLOAD_TOO_LARGE', 'owner over 1 MiB');
  // Just under the limit is not a 413 (the note is then too long for its field: a 400).
  r = await ta.call('POST', '/api/v1/assets', { token: o.key, body: JSON.stringify({ name: 'almost', note: 'x'.repeat(MiB - 100) }) });
  assertEnvelope(r, 400, 'VALIDATION_FAILED', 'asset just under 1 MiB');
  assert.equal(await assetCount(o.key), before, 'nothing stored');
  assert.equal((await ta.call('GET', '/api/v1/owners?name=too-big', { token: admin })).body.length, 0);

  // Data-record routes take bulk bodies up to 8 MiB (the catalogue's recordBodyBytes).
  const asset = (await ta.call('POST', '/api/v1/assets', { token: o.key, body: { name: 'big-loc' } })).body;
  const loc = { assetId: asset.id, latitude: 1, longitude: 2 };
  // Padded with JSON whitespace (an unknown member would be a 400, API guide 1).
  const padded = (bytes: number) => `${' '.repeat(bytes)}${JSON.stringify(loc)}`;
  r = await ta.call('POST', '/api/v1/locations', { token: o.key, body: padded(2 * MiB) });
  assert.equal(r.status, 201, `2 MiB location body: ${r.raw.slice(0, 300)}`);
  r = await ta.call('POST', '/api/v1/locations', { token: o.key, body: padded(BOUNDS.recordBodyBytes.value) });
  assertEnvelope(r, 413, 'PAYLOAD_TOO_LARGE', 'location over 8 MiB');
  assert.equal((await ta.call('GET', `/api/v1/locations?assetId=${asset.id}`, { token: o.key })).body.length, 1);
});

test('a body that is not application/json answers 415, malformed or empty JSON answers 400, both in the envelope', async () => {
  const o = await ownerWithKey(ta, 'media-types');
  const before = await assetCount(o.key);
  for (const type of [
    'text/plain',
    'application/xml',
    'application/x-www-form-urlencoded',
    'multipart/form-data; boundary=x',
    'application/octet-stream',
  ]) {
    const r = await ta.call('POST', '/api/v1/assets', { token: o.key, body: 'name=plain', headers: { 'content-type': type } });
    assertEnvelope(r, 415, 'UNSUPPORTED_MEDIA_TYPE', type);
  }
  for (const method of ['PUT', 'PATCH']) {
    const a = (await ta.call('POST', '/api/v1/assets', { token: o.key, body: { name: `mt-${method}` } })).body;
    const r = await ta.call(method, `/api/v1/assets/${a.id}`, {
      token: o.key,
      body: '{"name":"x"}',
      headers: { 'content-type': 'text/plain' },
    });
    assertEnvelope(r, 415, 'UNSUPPORTED_MEDIA_TYPE', `${method} text/plain`);
  }
  for (const [what, raw] of [
    ['truncated', '{"name": "broken"'],
    ['trailing comma', '{"name": "x",}'],
    ['single quotes', "{'name': 'x'}"],
    ['not JSON at all', 'name=x'],
    ['empty', ''],
  ] as const) {
    const r = await ta.call('POST', '/api/v1/assets', { token: o.key, body: raw, headers: { 'content-type': 'application/json' } });
    assertEnvelope(r, 400, 'VALIDATION_FAILED', what);
  }
  assert.equal(await assetCount(o.key), before + 2, 'only the two PUT/PATCH targets were stored');
  // application/json with a charset is JSON.
  const ok = await ta.call('POST', '/api/v1/assets', {
    token: o.key,
    body: '{"name":"charset"}',
    headers: { 'content-type': 'application/json; charset=utf-8' },
  });
  assert.equal(ok.status, 201, ok.raw);
});

test('Idempotency-Key: a repeat replays the first response, another body is a 422, another path or credential is independent', async () => {
  const o = await ownerWithKey(ta, 'idem');
  const o2 = await ownerWithKey(ta, 'idem-2');
  const key = { 'idempotency-key': 'create-reefer-0001' };
  const body = { name: 'idem-asset', note: 'first' };
  const first = await ta.call('POST', '/api/v1/assets', { token: o.key, body, headers: key });
  assert.equal(first.status, 201, first.raw);
  assert.equal(first.headers['idempotent-replayed'], undefined);
  for (let i = 0; i < 2; i++) {
    const again = await ta.call('POST', '/api/v1/assets', { token: o.key, body, headers: key });
    assert.equal(again.status, 201, again.raw);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.deepEqual(again.body, first.body, 'the first response, same id');
    assert.equal(again.headers.location, first.headers.location);
  }
  const named = (await ta.call('GET', '/api/v1/assets?name=idem-asset', { token: o.key })).body;
  assert.equal(named.length, 1, 'one asset stored');
  // Same key, other body: 422, nothing stored.
  const other = await ta.call('POST', '/api/v1/assets', { token: o.key, body: { name: 'idem-other' }, headers: key });
  assertEnvelope(other, 422, 'IDEMPOTENCY_KEY_REUSED', 'same key, other body');
  assert.equal((await ta.call('GET', '/api/v1/assets?name=idem-other', { token: o.key })).body.length, 0);
  // The key is per path: on another route it starts afresh.
  const zone = await ta.call('POST', '/api/v1/zones', { token: o.key, body: { name: 'idem-zone' }, headers: key });
  assert.equal(zone.status, 201, zone.raw);
  assert.equal(zone.headers['idempotent-replayed'], undefined);
  // ...and per credential: another key using the same Idempotency-Key and body gets its own asset.
  const theirs = await ta.call('POST', '/api/v1/assets', { token: o2.key, body, headers: key });
  assert.equal(theirs.status, 201, theirs.raw);
  assert.equal(theirs.headers['idempotent-replayed'], undefined);
  assert.notEqual(theirs.body.id, first.body.id);
  // Without the header, a repeat is a new request (here a 409: the name is taken).
  assert.equal((await ta.call('POST', '/api/v1/assets', { token: o.key, body })).status, 409);
  // A key longer than 255 characters is refused.
  const long = await ta.call('POST', '/api/v1/assets', {
    token: o.key,
    body: { name: 'idem-long' },
    headers: { 'idempotency-key': 'k'.repeat(256) },
  });
  assertEnvelope(long, 400, 'VALIDATION_FAILED', 'key too long');
});

test('Idempotency-Key: a repeat while the first request is still in flight answers 409 and stores nothing', async () => {
  const o = await ownerWithKey(ta, 'idem-flight');
  const db = ta.app.services.db;
  const count = async () => (await ta.call('GET', '/api/v1/assets?name=flight', { token: o.key })).body.length as number;

  // Any engine: the first request's record, put back into its in-flight state (no response yet).
  const key = { 'idempotency-key': 'flight-1' };
  const first = await ta.call('POST', '/api/v1/assets', { token: o.key, body: { name: 'flight' }, headers: key });
  assert.equal(first.status, 201, first.raw);
  const reset = await db.query(
    `UPDATE idempotency_keys SET response_status = NULL, response_headers = NULL, response_body = NULL WHERE key = $1`,
    ['flight-1'],
  );
  assert.equal(reset.rowCount, 1, 'the service keeps one idempotency record for the key');
  const during = await ta.call('POST', '/api/v1/assets', { token: o.key, body: { name: 'flight' }, headers: key });
  assertEnvelope(during, 409, 'IDEMPOTENCY_IN_PROGRESS', 'repeat in flight');
  assert.equal(during.headers['idempotent-replayed'], undefined);
  assert.equal(await count(), 1, 'the repeat stored nothing');

  if (TEST_DB !== 'postgres') return; // PGlite has one connection: a request cannot be held open from outside
  // PostgreSQL: hold a real first request inside its handler with a table lock, repeat it, let it go.
  const c = await connectPg(ta.databaseUrl);
  try {
    await c.query('BEGIN');
    await c.query('LOCK TABLE assets IN EXCLUSIVE MODE');
    const held = { 'idempotency-key': 'flight-2' };
    const firstReq = ta.call('POST', '/api/v1/assets', { token: o.key, body: { name: 'flight-held' }, headers: held });
    // Wait until the first request has claimed the key (it then blocks on the assets table).
    const claimBy = Date.now() + 30_000;
    for (;;) {
      const { rows } = await c.query(`SELECT response_status FROM idempotency_keys WHERE key = 'flight-2'`);
      if (rows.length) {
        assert.equal(rows[0].response_status, null);
        break;
      }
      assert.ok(Date.now() < claimBy, 'the first request claimed the key within 30 s');
      await new Promise((r) => setTimeout(r, 10));
    }
    const repeat = await ta.call('POST', '/api/v1/assets', { token: o.key, body: { name: 'flight-held' }, headers: held });
    assertEnvelope(repeat, 409, 'IDEMPOTENCY_IN_PROGRESS', 'repeat while the first is held');
    await c.query('COMMIT');
    const done = await firstReq;
    assert.equal(done.status, 201, done.raw);
    const replay = await ta.call('POST', '/api/v1/assets', { token: o.key, body: { name: 'flight-held' }, headers: held });
    assert.equal(replay.status, 201);
    assert.equal(replay.headers['idempotent-replayed'], 'true');
    assert.equal(replay.body.id, done.body.id);
    assert.equal((await ta.call('GET', '/api/v1/assets?name=flight-held', { token: o.key })).body.length, 1);
  } finally {
    await c.query('ROLLBACK').catch(() => {});
    await c.end();
  }
});

/** The routes Fastify has, from its route tree (commonPrefix off: each line a path segment chain). */
function registeredRoutes(): { path: string; method: string }[] {
  const out: { path: string; method: string }[] = [];
  const stack: string[] = [];
  for (const line of ta.app.printRoutes({ commonPrefix: false }).split('\n')) {
    const m = /^((?:│ {3}| {4})*)(?:├── |└── )(.+?)(?: \(([^)]*)\))?$/.exec(line);
    if (!m) continue;
    const depth = m[1]!.length / 4;
    stack.length = depth;
    stack.push(m[2]!);
    const path = stack.join('');
    for (const method of (m[3] ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean))
      out.push({ path, method });
  }
  return out;
}

test('the OpenAPI document is valid OpenAPI 3.1 and documents every /api/v1 route with the error envelope', async () => {
  const r = await ta.call('GET', '/api/v1/openapi.json');
  assert.equal(r.status, 200);
  const doc = r.body;
  assert.match(doc.openapi, /^3\.1\./);
  const result = await new Validator().validate(doc);
  assert.equal(result.valid, true, `OpenAPI 3.1 validation: ${JSON.stringify(result.errors, null, 1)}`);

  const routes = registeredRoutes().filter((x) => x.path.startsWith('/api/v1/') && x.method !== 'HEAD' && x.method !== 'OPTIONS');
  assert.ok(routes.length >= 20, `found only ${routes.length} routes: the route tree format changed?`);
  // The document itself is the one route it does not describe.
  const exempt = new Set(['GET /api/v1/openapi.json']);
  const missing: string[] = [];
  for (const { path, method } of routes) {
    if (exempt.has(`${method} ${path}`)) continue;
    const oaPath = path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
    const op = doc.paths?.[oaPath]?.[method.toLowerCase()];
    if (!op) {
      missing.push(`${method} ${path}`);
      continue;
    }
    assert.ok(op.responses?.['4XX'] ?? op.responses?.['4xx'], `${method} ${path}: documents the 4xx envelope`);
  }
  assert.deepEqual(missing, [], 'routes missing from the OpenAPI document');
  // And the reverse: everything documented exists.
  for (const [p, item] of Object.entries<Record<string, unknown>>(doc.paths)) {
    for (const method of Object.keys(item)) {
      const fastifyPath = p.replace(/\{([^}]+)\}/g, ':$1');
      assert.ok(ta.app.hasRoute({ method: method.toUpperCase() as 'GET', url: fastifyPath }), `${method} ${p} documented but not routed`);
    }
  }
});

test('every text and list a request may carry has a bound, within the catalogue of bounds (API guide 7)', async () => {
  const doc = ok(await ta.call('GET', '/api/v1/openapi.json'), 200);
  const unbounded: string[] = [];
  const seen = new Set<unknown>();
  const walk = (s: any, at: string): void => {
    if (!s || typeof s !== 'object' || seen.has(s)) return;
    seen.add(s);
    if (s.$ref) {
      walk(resolveRef(doc, s.$ref), at);
      return;
    }
    const types = [s.type].flat();
    if (types.includes('string') && s.enum === undefined && s.const === undefined) {
      const bounded = typeof s.maxLength === 'number' || ['uuid', 'date-time', 'date'].includes(s.format);
      if (!bounded) unbounded.push(`${at}: text without maxLength`);
      else if (s.maxLength > BOUNDS.textLength.value) unbounded.push(`${at}: maxLength ${s.maxLength} past textLength`);
    }
    if (types.includes('array')) {
      const most = Math.max(BOUNDS.arrayItems.value, BOUNDS.recordsPerRequest.value);
      if (typeof s.maxItems !== 'number') unbounded.push(`${at}: list without maxItems`);
      else if (s.maxItems > most) unbounded.push(`${at}: maxItems ${s.maxItems} past arrayItems`);
    }
    for (const k of ['anyOf', 'oneOf', 'allOf']) for (const [i, x] of (s[k] ?? []).entries()) walk(x, `${at}/${k}${i}`);
    for (const [k, x] of Object.entries<any>(s.properties ?? {})) walk(x, `${at}/${k}`);
    if (s.items) walk(s.items, `${at}/items`);
    if (s.additionalProperties && typeof s.additionalProperties === 'object') walk(s.additionalProperties, `${at}/*`);
  };
  for (const [p, item] of Object.entries<any>(doc.paths)) {
    for (const [method, op] of Object.entries<any>(item)) {
      for (const param of op.parameters ?? []) walk(param.schema, `${method.toUpperCase()} ${p} ${param.in}:${param.name}`);
      for (const [type, media] of Object.entries<any>(op.requestBody?.content ?? {}))
        walk(media.schema, `${method.toUpperCase()} ${p} body(${type})`);
    }
  }
  assert.deepEqual(unbounded, [], 'every text and list of a request is bounded');
});

function resolveRef(doc: any, ref: string): unknown {
  return ref
    .replace(/^#\//, '')
    .split('/')
    .reduce((o, k) => o?.[k.replaceAll('~1', '/').replaceAll('~0', '~')], doc);
}
