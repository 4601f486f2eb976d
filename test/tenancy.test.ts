// API guide 3 (tenancy): a caller sees its own owner and every descendant, nothing else; a record
// of an owner the caller cannot see answers 404 (never 403), admin-only routes answer 403. The id-route
// sweep is driven by the OpenAPI document, so a new route with a path parameter fails this file until
// someone teaches it how to supply a foreign record's id (nobody can add an unchecked route).
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { test } from 'node:test';
import { authenticate } from '../src/auth/authenticate.js';
import type { Db } from '../src/db/db.js';
import { Tenancy } from '../src/tenancy/tenancy.js';
import { ownerWithKey, passwordToken, startApp, type Res } from './helpers.js';

// One service for the whole file (PGlite takes seconds to start); every test makes its own owners.
// Push to a closed local port: deliveries exist (and keep failing) without any network beyond loopback.
const ta = await startApp(undefined, { RATE_LIMIT_MAX: '100000', PUSH_ALLOW_HTTP: 'true', PUSH_ALLOWED_NETWORKS: '127.0.0.0/8' });
const admin = ta.adminToken;

function assertEnvelope(r: Res, status: number, code?: string, what = '') {
  assert.equal(r.status, status, `${what}: expected ${status}, got ${r.status} ${r.raw}`);
  assert.equal(typeof r.body?.error, 'string', `${what}: error member`);
  assert.equal(typeof r.body?.message, 'string', `${what}: message member`);
  assert.equal(typeof r.body?.requestId, 'string', `${what}: requestId member`);
  if (code) assert.equal(r.body.code, code, `${what}: code`);
}

async function created(r: Promise<Res>, what: string): Promise<any> {
  const res = await r;
  assert.equal(res.status, 201, `${what}: ${res.raw}`);
  return res.body;
}

const ids = (rows: { id: string }[]) => rows.map((r) => r.id).sort();

/** Every row of a list, following Link rel="next". */
async function listAll(path: string, token: string): Promise<any[]> {
  const out: any[] = [];
  let next: string | undefined = path;
  for (let i = 0; next && i < 100; i++) {
    const r = await ta.call('GET', next, { token });
    assert.equal(r.status, 200, `${next}: ${r.raw}`);
    out.push(...r.body);
    const link = /<([^>]+)>;\s*rel="next"/.exec(String(r.headers.link ?? ''));
    next = link ? new URL(link[1]!).pathname + new URL(link[1]!).search : undefined;
  }
  return out;
}

// ---- a minimal valid request body from an OpenAPI (JSON Schema) body schema ----------------------

let seq = 0;
function sample(schema: any, ctx: { ownerId: string }): unknown {
  if (!schema || typeof schema !== 'object') return null;
  if (schema.const !== undefined) return schema.const;
  if (Array.isArray(schema.enum)) return schema.enum[0];
  // A text with a rule of its own (an ISO 6346 container number): the schema's example keeps it.
  if (Array.isArray(schema.examples)) return schema.examples[0];
  for (const k of ['anyOf', 'oneOf'] as const) {
    if (Array.isArray(schema[k])) return sample(schema[k].find((s: any) => s.type !== 'null') ?? schema[k][0], ctx);
  }
  if (Array.isArray(schema.allOf)) return Object.assign({}, ...schema.allOf.map((s: any) => sample(s, ctx)));
  switch (schema.type) {
    case 'object': {
      // Every member, so that a write tries to change everything it can (ownerId: the caller's own).
      const o: Record<string, unknown> = {};
      for (const [k, s] of Object.entries<any>(schema.properties ?? {})) o[k] = sample(s, ctx);
      return o;
    }
    case 'array':
      return [sample(schema.items, ctx)];
    case 'boolean':
      return false;
    case 'integer':
    case 'number':
      return schema.minimum ?? 1;
    case 'string': {
      if (schema.format === 'uuid') return ctx.ownerId;
      if (schema.format === 'date-time') return new Date().toISOString();
      const s = `probe${++seq}`;
      return s.padEnd(schema.minLength ?? 0, 'x').slice(0, schema.maxLength ?? 1000);
    }
    default:
      return null;
  }
}

test("every /api/v1 route with a path parameter refuses a sibling owner's record: 404, or 403 where admin-only", async () => {
  // A and B are siblings under one parent: neither sees the other.
  const parent = await ownerWithKey(ta, 'sweep-parent');
  const A = await ownerWithKey(ta, 'sweep-A', { parentId: parent.ownerId });
  const B = await ownerWithKey(ta, 'sweep-B', { parentId: parent.ownerId });
  // B's own integration, made with B's key (managedBy customer): its parent may manage it too.
  const bIntegration = await created(
    ta.call('POST', '/api/v1/integrations', {
      token: B.key,
      body: {
        name: 'sweep-b-push',
        channel: 'webhook',
        ownerIds: [B.ownerId],
        destination: 'http://127.0.0.1:9/hook',
        retry: { scheduleSeconds: [3600] },
      },
    }),
    'integration for B',
  );
  const bAsset = await created(ta.call('POST', '/api/v1/assets', { token: B.key, body: { name: 'b-asset', note: 'b' } }), 'asset of B');
  const bKey = await created(
    ta.call('POST', '/api/v1/api-keys', { token: admin, body: { name: 'b-key2', ownerId: B.ownerId, scopes: ['read'] } }),
    'key of B',
  );
  const bUser = await created(
    ta.call('POST', '/api/v1/users', {
      token: admin,
      body: { username: 'sweep-b-user', password: 'b-password-1', ownerId: B.ownerId, scopes: ['read'] },
    }),
    'user of B',
  );
  const bClient = await created(
    ta.call('POST', '/api/v1/clients', {
      token: admin,
      body: { clientId: 'sweep-b-client', grants: ['client_credentials'], ownerId: B.ownerId },
    }),
    'client of B',
  );
  // B's data records, zone, event, command and booking data, each made the way a client would.
  const post = (path: string, body: unknown) => created(ta.call('POST', path, { token: B.key, body }), `B: POST ${path}`);
  const assetId = bAsset.id;
  const bZone = await post('/api/v1/zones', { name: 'b-zone', circle: { latitude: 10, longitude: 10, radiusMeters: 1000 } });
  await post('/api/v1/locations', { assetId, latitude: 0, longitude: 0, whenCreated: new Date(Date.now() - 60_000).toISOString() });
  const bLocation = await post('/api/v1/locations', { assetId, latitude: 10, longitude: 10 }); // enters b-zone: an event
  const bSensor = await post('/api/v1/sensor-data', { assetId, sensorId: 'b-sensor', type: 'TEMPERATURE', value: 4.5 });
  const bReefer = await post('/api/v1/reefer-data', { assetId, reeferClass: 'CR', data: { supplyAirTemperature: 4 } });
  const bGenset = await post('/api/v1/genset-data', { assetId, gensetType: 'b-genset', data: { rpm: 1500 } });
  const bOem = await post('/api/v1/oem-data', { assetId, payloadType: 7, data: { raw: 'x' } });
  const bCommand = await post('/api/v1/commands', { assetId, type: 'START_DEFROST' });
  const bDevice = await post('/api/v1/devices', { assetId, protocol: 'osmand' });
  const bBooking = await post('/api/v1/booking-data', { name: 'b-booking', type: 'MAERSK_V1', jsonData: { vessel: 'b' } });
  const bLink = await post(`/api/v1/booking-data/${bBooking.id}/assets`, {
    assetId,
    from: '2026-01-01T00:00:00Z',
    to: '2026-02-01T00:00:00Z',
  });
  const bSpec = await post('/api/v1/specifications', { assetId, type: 'REEFER', ranges: { cargo: { sensors: { co2: [null, 5] } } } });
  const bShare = await post('/api/v1/share-links', {
    assetIds: [assetId],
    expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
    show: ['position'],
  });
  await post('/api/v1/reefer-data', { assetId, data: { co2: 9 } }); // out of range at once: a notification
  const bNotifications = (await ta.call('GET', `/api/v1/notifications?assetId=${assetId}`, { token: B.key })).body;
  assert.equal(bNotifications.length, 1, `B has a notification: ${JSON.stringify(bNotifications)}`);
  const bEvents = (await ta.call('GET', `/api/v1/events?assetId=${assetId}`, { token: B.key })).body;
  const bAudit = (await ta.call('GET', `/api/v1/audit?ownerId=${B.ownerId}&limit=1`, { token: admin })).body;
  assert.equal(bAudit.length, 1, "B's changes are in the audit log");
  const bDeliveries = (await ta.call('GET', `/api/v1/integrations/${bIntegration.id}/deliveries`, { token: admin })).body;
  assert.ok(Array.isArray(bDeliveries) && bDeliveries.length >= 1, `B's records have deliveries: ${JSON.stringify(bDeliveries)}`);
  assert.ok(Array.isArray(bEvents) && bEvents.length >= 1, `B has an event: ${JSON.stringify(bEvents)}`);
  // A's credentials: an API key (read+write) and a password-grant JWT of a read+write user of A.
  await created(
    ta.call('POST', '/api/v1/users', {
      token: admin,
      body: { username: 'sweep-a-user', password: 'a-password-1', ownerId: A.ownerId, scopes: ['read', 'write'] },
    }),
    'user of A',
  );
  const aJwt = (await passwordToken(ta.call, 'sweep-a-user', 'a-password-1')).access_token;
  const aAsset = await created(ta.call('POST', '/api/v1/assets', { token: A.key, body: { name: 'a-asset' } }), 'asset of A');

  // How to name B's record for each path parameter of each route. A route whose path parameters are
  // not all known here makes this test fail: add the new resource (and a record of B) above.
  const suppliers: Record<string, Record<string, string>> = {
    '/api/v1/owners/{id}': { id: B.ownerId },
    '/api/v1/assets/{id}': { id: bAsset.id },
    '/api/v1/devices/{id}': { id: bDevice.id },
    '/api/v1/api-keys/{id}': { id: bKey.id },
    '/api/v1/users/{id}': { id: bUser.id },
    '/api/v1/clients/{id}': { id: bClient.id },
    '/api/v1/locations/{id}': { id: bLocation.id },
    '/api/v1/sensor-data/{id}': { id: bSensor.id },
    '/api/v1/reefer-data/{id}': { id: bReefer.id },
    '/api/v1/genset-data/{id}': { id: bGenset.id },
    '/api/v1/oem-data/{id}': { id: bOem.id },
    '/api/v1/zones/{id}': { id: bZone.id },
    '/api/v1/events/{id}': { id: bEvents[0].id },
    '/api/v1/events/{id}/acknowledge': { id: bEvents[0].id },
    '/api/v1/commands/{id}': { id: bCommand.id },
    '/api/v1/booking-data/{id}': { id: bBooking.id },
    '/api/v1/booking-data/{id}/assets': { id: bBooking.id },
    '/api/v1/booking-data/{id}/assets/{linkId}': { id: bBooking.id, linkId: bLink.id },
    '/api/v1/specifications/{id}': { id: bSpec.id },
    '/api/v1/share-links/{id}': { id: bShare.id },
    '/api/v1/notifications/{id}': { id: bNotifications[0].id },
    '/api/v1/notifications/{id}/acknowledge': { id: bNotifications[0].id },
    '/api/v1/audit/{id}': { id: bAudit[0].id },
    '/api/v1/integrations/{id}': { id: bIntegration.id },
    '/api/v1/integrations/{id}/deliveries': { id: bIntegration.id },
    '/api/v1/integrations/{id}/rotate-signing-secret': { id: bIntegration.id },
    '/api/v1/integrations/{id}/deliveries/redeliver': { id: bIntegration.id },
    '/api/v1/integrations/{id}/deliveries/{deliveryId}/redeliver': { id: bIntegration.id, deliveryId: bDeliveries[0].id },
  };
  // Bodies the schema sampler cannot make valid on its own (a zone needs a real shape).
  const bodies: Record<string, () => unknown> = {
    'put /api/v1/zones/{id}': () => ({
      name: `probe${++seq}`,
      ownerId: A.ownerId,
      circle: { latitude: 1, longitude: 1, radiusMeters: 10 },
    }),
    'patch /api/v1/zones/{id}': () => ({
      name: `probe${++seq}`,
      ownerId: A.ownerId,
      circle: { latitude: 1, longitude: 1, radiusMeters: 10 },
    }),
    'put /api/v1/integrations/{id}': () => ({
      name: `probe${++seq}`,
      channel: 'webhook',
      ownerIds: [B.ownerId],
      destination: 'http://127.0.0.1:9/hook',
    }),
    'patch /api/v1/integrations/{id}': () => ({ name: `probe${++seq}` }),
    // An asset A sees, so the only thing wrong is the specification's owner.
    'put /api/v1/specifications/{id}': () => ({ assetId: aAsset.id, type: 'GENSET' }),
    'patch /api/v1/specifications/{id}': () => ({ name: `probe${++seq}` }),
    // The sampler's first status (PENDING) is a well-formed but illegal move (409): use a legal one.
    'patch /api/v1/commands/{id}': () => ({ status: 'SENT' }),
    // The sampler's assetId is no asset: move nothing.
    'patch /api/v1/devices/{id}': () => ({ disabled: true }),
    // An asset A sees and a range B's asset link does not cover, so the only thing wrong is the booking's owner.
    'post /api/v1/booking-data/{id}/assets': () => ({ assetId: aAsset.id, from: '2030-01-01T00:00:00Z', to: '2030-01-02T00:00:00Z' }),
    'post /api/v1/integrations/{id}/rotate-signing-secret': () => ({}),
    'post /api/v1/integrations/{id}/deliveries/redeliver': () => ({
      from: new Date(Date.now() - 3600_000).toISOString(),
      to: new Date().toISOString(),
    }),
  };
  // Operator-only routes: a non-admin gets 403 before any lookup. Everything else: 404.
  const adminOnly = (path: string, method: string) =>
    path.startsWith('/api/v1/users/') || path.startsWith('/api/v1/clients/') || (path === '/api/v1/owners/{id}' && method === 'delete');

  const doc = (await ta.call('GET', '/api/v1/openapi.json')).body;
  const routes: { path: string; method: string; op: any }[] = [];
  const unknown: string[] = [];
  for (const [path, item] of Object.entries<any>(doc.paths)) {
    if (!path.startsWith('/api/v1/')) continue;
    const params = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!);
    if (params.length === 0) continue;
    for (const [method, op] of Object.entries<any>(item)) {
      if (!['get', 'put', 'patch', 'post', 'delete'].includes(method)) continue;
      const supplied = suppliers[path];
      const missing = params.filter((p) => supplied?.[p] === undefined);
      if (missing.length) unknown.push(`${method.toUpperCase()} ${path} (no id for ${missing.join(', ')})`);
      else routes.push({ path, method, op });
    }
  }
  assert.deepEqual(unknown, [], 'routes this tenancy sweep does not know how to attack; teach it before adding them');
  assert.ok(routes.length >= 12, `the sweep saw only ${routes.length} routes`);

  const snapshot = async () => ({
    owner: (await ta.call('GET', `/api/v1/owners/${B.ownerId}`, { token: admin })).body,
    asset: (await ta.call('GET', `/api/v1/assets/${bAsset.id}`, { token: admin })).body,
    user: (await ta.call('GET', `/api/v1/users/${bUser.id}`, { token: admin })).body,
    keys: (await ta.call('GET', `/api/v1/api-keys?ownerId=${B.ownerId}`, { token: admin })).body,
    clients: (await ta.call('GET', `/api/v1/clients?ownerId=${B.ownerId}`, { token: admin })).body,
    zone: (await ta.call('GET', `/api/v1/zones/${bZone.id}`, { token: admin })).body,
    command: (await ta.call('GET', `/api/v1/commands/${bCommand.id}`, { token: admin })).body,
    booking: (await ta.call('GET', `/api/v1/booking-data/${bBooking.id}`, { token: admin })).body,
    bookingAssets: (await ta.call('GET', `/api/v1/booking-data/${bBooking.id}/assets`, { token: admin })).body,
    spec: (await ta.call('GET', `/api/v1/specifications/${bSpec.id}`, { token: admin })).body,
    share: (await ta.call('GET', `/api/v1/share-links/${bShare.id}`, { token: admin })).body,
  });
  // B's child sees less than B: B's integration (whose owner it cannot see) is a 404 to it as well.
  const bChild = await ownerWithKey(ta, 'sweep-B-child', { parentId: B.ownerId });
  const before = await snapshot();
  assert.equal(before.keys.length, 2);
  assert.equal(before.clients.length, 1);

  const build = (r: (typeof routes)[number], values: Record<string, string>) => {
    const url = r.path.replace(/\{([^}]+)\}/g, (_m, p: string) => values[p]!);
    const schema = r.op.requestBody?.content?.['application/json']?.schema;
    const special = bodies[`${r.method} ${r.path}`];
    return { url, body: special ? special() : schema ? sample(schema, { ownerId: A.ownerId }) : undefined };
  };

  for (const [credName, token, only] of [
    ['API key of A', A.key, null],
    ['JWT of a user of A', aJwt, null],
    ["API key of B's child", bChild.key, '/api/v1/integrations/'],
  ] as const) {
    for (const r of routes.filter((x) => only === null || x.path.startsWith(only))) {
      const what = `${credName}: ${r.method.toUpperCase()} ${r.path}`;
      const { url, body } = build(r, suppliers[r.path]!);
      const res = await ta.call(r.method.toUpperCase(), url, { token, ...(body === undefined ? {} : { body }) });
      const status = adminOnly(r.path, r.method) ? 403 : 404;
      assertEnvelope(res, status, status === 403 ? 'FORBIDDEN' : 'NOT_FOUND', what);
      // Existence does not leak: the answer is the one for an id that exists nowhere.
      const ghost = Object.fromEntries(
        Object.entries(suppliers[r.path]!).map(([k, v]) => [k, /^\d+$/.test(v) ? '9123456789012345678' : crypto.randomUUID()]),
      );
      const g = build(r, ghost);
      const none = await ta.call(r.method.toUpperCase(), g.url, { token, ...(g.body === undefined ? {} : { body: g.body }) });
      const strip = (b: any) => ({ ...b, requestId: undefined });
      assert.deepEqual([none.status, strip(none.body)], [res.status, strip(res.body)], `${what}: differs from a nonexistent id`);
    }
  }
  assert.deepEqual(await snapshot(), before, "B's records are unchanged");

  // The parent sees B: every integration route reaches B's customer-made integration with the parent's key.
  for (const r of routes.filter((x) => x.path.startsWith('/api/v1/integrations/') && x.method !== 'delete')) {
    const { url, body } = build(r, suppliers[r.path]!);
    const res = await ta.call(r.method.toUpperCase(), url, { token: parent.key, ...(body === undefined ? {} : { body }) });
    assert.ok(res.status >= 200 && res.status < 300, `parent ${r.method.toUpperCase()} ${r.path}: ${res.status} ${res.raw}`);
  }

  // Control: the very same requests from a caller who sees B's records reach them (2xx, or a 409 of
  // a domain rule such as an owner that still has assets, or a command no longer PENDING), so each
  // 404 above came from tenancy, not from a bad id or body. Deletes last, a nested one (a booking's
  // asset link) before the rest, the owner's after them.
  const nested = (path: string) => (path.match(/\{/g)?.length ?? 0) > 1;
  const rank = (r: (typeof routes)[number]) => (r.method !== 'delete' ? 0 : r.path === '/api/v1/owners/{id}' ? 3 : nested(r.path) ? 1 : 2);
  for (const r of [...routes].sort((x, y) => rank(x) - rank(y))) {
    const { url, body } = build(r, suppliers[r.path]!);
    const res = await ta.call(r.method.toUpperCase(), url, { token: admin, ...(body === undefined ? {} : { body }) });
    const reached = (res.status >= 200 && res.status < 300) || (r.method === 'delete' && res.status === 409);
    assert.ok(reached, `admin control ${r.method.toUpperCase()} ${r.path}: ${res.status} ${res.raw}`);
  }
});

test('a parent sees its whole subtree; a child sees itself and its descendants, never its parent or siblings', async () => {
  const P = await ownerWithKey(ta, 'tree-P');
  const C = await ownerWithKey(ta, 'tree-C', { parentId: P.ownerId });
  const S = await ownerWithKey(ta, 'tree-S', { parentId: P.ownerId }); // C's sibling
  const G = await ownerWithKey(ta, 'tree-G', { parentId: C.ownerId });
  const outsider = await ownerWithKey(ta, 'tree-outsider');
  const asset: Record<string, any> = {};
  for (const [n, o] of Object.entries({ P, C, S, G, outsider })) {
    asset[n] = await created(ta.call('POST', '/api/v1/assets', { token: o.key, body: { name: `tree-${n}-asset` } }), `asset of ${n}`);
  }

  // childIds is derived from the children.
  const p = (await ta.call('GET', `/api/v1/owners/${P.ownerId}`, { token: P.key })).body;
  assert.deepEqual(p.childIds, [C.ownerId, S.ownerId]);
  assert.equal(p.ownerId, null);
  const c = (await ta.call('GET', `/api/v1/owners/${C.ownerId}`, { token: P.key })).body;
  assert.deepEqual(c.childIds, [G.ownerId]);
  assert.equal(c.ownerId, P.ownerId);

  // Lists: exactly the subtree, never another owner's rows.
  const sees = {
    P: ['P', 'C', 'S', 'G'],
    C: ['C', 'G'],
    S: ['S'],
    G: ['G'],
    outsider: ['outsider'],
  } as const;
  const who = { P, C, S, G, outsider };
  for (const [n, visible] of Object.entries(sees)) {
    const cred = who[n as keyof typeof who];
    const owners = await listAll('/api/v1/owners?limit=2', cred.key);
    assert.deepEqual(ids(owners), visible.map((v) => who[v].ownerId).sort(), `owners listed for ${n}`);
    const assets = await listAll('/api/v1/assets?limit=2', cred.key);
    assert.deepEqual(ids(assets), visible.map((v) => asset[v].id).sort(), `assets listed for ${n}`);
    const keys = await listAll('/api/v1/api-keys', cred.key);
    assert.ok(keys.length >= visible.length, `keys listed for ${n}`);
    assert.ok(
      keys.every((k) => visible.some((v) => who[v].ownerId === k.ownerId)),
      `only visible owners' keys for ${n}`,
    );
    // Filtering by an invisible owner gives nothing, not that owner's rows.
    for (const other of Object.keys(who).filter((x) => !(visible as readonly string[]).includes(x))) {
      const o = who[other as keyof typeof who].ownerId;
      assert.deepEqual((await ta.call('GET', `/api/v1/assets?ownerId=${o}`, { token: cred.key })).body, [], `${n} filtering on ${other}`);
      // (owners filtered by parent: only visible children, e.g. C itself when C filters on P)
      const kids = (await ta.call('GET', `/api/v1/owners?ownerId=${o}`, { token: cred.key })).body as any[];
      assert.ok(
        kids.every((k) => visible.some((v) => who[v].ownerId === k.id)),
        `${n} children of ${other}`,
      );
      assert.deepEqual((await ta.call('GET', `/api/v1/api-keys?ownerId=${o}`, { token: cred.key })).body, [], `${n} keys of ${other}`);
      assertEnvelope(await ta.call('GET', `/api/v1/owners/${o}`, { token: cred.key }), 404, 'NOT_FOUND', `${n} reads owner ${other}`);
      assertEnvelope(
        await ta.call('GET', `/api/v1/assets/${asset[other].id}`, { token: cred.key }),
        404,
        'NOT_FOUND',
        `${n} reads asset of ${other}`,
      );
    }
    // Reads by id of everything visible work.
    for (const v of visible) {
      assert.equal((await ta.call('GET', `/api/v1/owners/${who[v].ownerId}`, { token: cred.key })).status, 200, `${n} reads owner ${v}`);
      assert.equal((await ta.call('GET', `/api/v1/assets/${asset[v].id}`, { token: cred.key })).status, 200, `${n} reads asset of ${v}`);
    }
  }

  // write covers descendants: P manages G's fleet; C cannot touch P's or S's.
  const made = await created(
    ta.call('POST', '/api/v1/assets', { token: P.key, body: { name: 'made-by-P', ownerId: G.ownerId } }),
    'P creates for G',
  );
  assert.equal(made.ownerId, G.ownerId);
  assert.equal((await ta.call('PATCH', `/api/v1/assets/${asset.G.id}`, { token: P.key, body: { note: 'by P' } })).status, 200);
  assertEnvelope(await ta.call('PATCH', `/api/v1/assets/${asset.P.id}`, { token: C.key, body: { note: 'by C' } }), 404, 'NOT_FOUND');
  assertEnvelope(await ta.call('DELETE', `/api/v1/assets/${asset.S.id}`, { token: C.key }), 404, 'NOT_FOUND');
  // Moving one's own asset to an invisible owner is refused too, and the asset stays put.
  assertEnvelope(await ta.call('PATCH', `/api/v1/assets/${asset.C.id}`, { token: C.key, body: { ownerId: S.ownerId } }), 404, 'NOT_FOUND');
  assert.equal((await ta.call('GET', `/api/v1/assets/${asset.C.id}`, { token: admin })).body.ownerId, C.ownerId);
  // Keys: only for visible owners.
  assertEnvelope(
    await ta.call('POST', '/api/v1/api-keys', { token: C.key, body: { name: 'up', ownerId: P.ownerId, scopes: ['read'] } }),
    404,
    'NOT_FOUND',
  );
  assert.equal(
    (await ta.call('POST', '/api/v1/api-keys', { token: C.key, body: { name: 'down', ownerId: G.ownerId, scopes: ['read'] } })).status,
    201,
  );
});

test("an API key's lookup reads the owners it sees in the same statement (one statement, not two, before every handler)", async () => {
  const P = await ownerWithKey(ta, 'one-P');
  const C = await ownerWithKey(ta, 'one-C', { parentId: P.ownerId });
  const G = await ownerWithKey(ta, 'one-G', { parentId: C.ownerId });
  const operatorKey = await ownerWithKey(ta, 'one-op', { scopes: ['read', 'write', 'admin'] });
  const { db, tokens } = ta.app.services;
  const texts: string[] = [];
  const counting = {
    query: (text: string, params?: unknown[], name?: string) => {
      texts.push(text);
      return db.query(text, params, name);
    },
  } as Db;
  const seen = async (key: string) => {
    texts.length = 0;
    const visible = await new Tenancy(counting, await authenticate(counting, tokens, `Bearer ${key}`)).visibleOwners();
    return { visible: visible === 'all' ? visible : [...visible].sort(), statements: texts.length };
  };
  assert.deepEqual(await seen(P.key), { visible: [P.ownerId, C.ownerId, G.ownerId].sort(), statements: 1 });
  assert.deepEqual(await seen(G.key), { visible: [G.ownerId], statements: 1 });
  assert.deepEqual(await seen(operatorKey.key), { visible: 'all', statements: 1 });
  await assert.rejects(authenticate(counting, tokens, 'Bearer atk_not-a-key'), /not valid/);
});

test('creating an asset for an invisible owner answers 404 and stores nothing', async () => {
  const P = await ownerWithKey(ta, 'inv-P');
  const C = await ownerWithKey(ta, 'inv-C', { parentId: P.ownerId });
  const other = await ownerWithKey(ta, 'inv-other');
  for (const target of [P.ownerId, other.ownerId, crypto.randomUUID()]) {
    const r = await ta.call('POST', '/api/v1/assets', { token: C.key, body: { name: 'smuggled', ownerId: target } });
    assertEnvelope(r, 404, 'NOT_FOUND', `create under ${target}`);
    assert.equal(r.body.field, '/ownerId');
  }
  assert.deepEqual((await ta.call('GET', '/api/v1/assets?name=smuggled', { token: admin })).body, [], 'nothing stored');
});

test("only an operator changes an owner's parent; an operator's cycle is a 400 on /ownerId", async () => {
  const P = await ownerWithKey(ta, 'par-P');
  const C = await ownerWithKey(ta, 'par-C', { parentId: P.ownerId });
  const G = await ownerWithKey(ta, 'par-G', { parentId: C.ownerId });
  const S = await ownerWithKey(ta, 'par-S', { parentId: P.ownerId });
  const orig = (await ta.call('GET', `/api/v1/owners/${C.ownerId}`, { token: admin })).body;

  // A non-admin (even the parent, which may edit C's other fields) cannot re-parent.
  for (const [token, body] of [
    [P.key, { ownerId: S.ownerId }],
    [P.key, { ownerId: null }],
    [C.key, { ownerId: G.ownerId }],
    [C.key, { ownerId: null }],
  ] as const) {
    const r = await ta.call('PATCH', `/api/v1/owners/${C.ownerId}`, { token, body });
    assertEnvelope(r, 403, 'FORBIDDEN', `re-parent with ${JSON.stringify(body)}`);
  }
  assertEnvelope(
    await ta.call('PUT', `/api/v1/owners/${C.ownerId}`, { token: P.key, body: { name: 'par-C', ownerId: S.ownerId } }),
    403,
    'FORBIDDEN',
  );
  assertEnvelope(
    await ta.call('POST', '/api/v1/owners', { token: P.key, body: { name: 'par-new', ownerId: P.ownerId } }),
    403,
    'FORBIDDEN',
  );
  assert.deepEqual((await ta.call('GET', `/api/v1/owners/${C.ownerId}`, { token: admin })).body, orig, 'C unchanged');
  // Keeping the same parent is not a change: the parent edits C's note.
  const ok = await ta.call('PATCH', `/api/v1/owners/${C.ownerId}`, { token: P.key, body: { note: 'edited by P', ownerId: P.ownerId } });
  assert.equal(ok.status, 200, ok.raw);
  assert.equal(ok.body.note, 'edited by P');

  // Operator: a cycle (P under its grandchild G, or under itself) is a 400 naming /ownerId.
  for (const [self, parent] of [
    [P.ownerId, G.ownerId],
    [P.ownerId, C.ownerId],
    [C.ownerId, C.ownerId],
  ] as const) {
    const r = await ta.call('PATCH', `/api/v1/owners/${self}`, { token: admin, body: { ownerId: parent } });
    assertEnvelope(r, 400, 'VALIDATION_FAILED', 'cycle');
    assert.equal(r.body.field, '/ownerId');
  }
  assertEnvelope(
    await ta.call('PUT', `/api/v1/owners/${P.ownerId}`, { token: admin, body: { name: 'par-P', ownerId: G.ownerId } }),
    400,
    'VALIDATION_FAILED',
  );
  assert.equal((await ta.call('GET', `/api/v1/owners/${P.ownerId}`, { token: admin })).body.ownerId, null, 'P still a root');
  // A legal move by the operator works and changes visibility at once: S under G.
  const moved = await ta.call('PATCH', `/api/v1/owners/${S.ownerId}`, { token: admin, body: { ownerId: G.ownerId } });
  assert.equal(moved.status, 200, moved.raw);
  assert.equal((await ta.call('GET', `/api/v1/owners/${S.ownerId}`, { token: C.key })).status, 200, 'C now sees S');
  // Unknown parent: 404 naming /ownerId.
  const ghost = await ta.call('PATCH', `/api/v1/owners/${S.ownerId}`, { token: admin, body: { ownerId: crypto.randomUUID() } });
  assertEnvelope(ghost, 404, 'NOT_FOUND');
  assert.equal(ghost.body.field, '/ownerId');
});

test('deleting an owner that still has assets or child owners answers 409 and keeps it', async () => {
  const D = await ownerWithKey(ta, 'del-D');
  const D1 = await ownerWithKey(ta, 'del-D1', { parentId: D.ownerId });
  const a = await created(ta.call('POST', '/api/v1/assets', { token: D1.key, body: { name: 'del-asset' } }), 'asset');
  assertEnvelope(await ta.call('DELETE', `/api/v1/owners/${D.ownerId}`, { token: admin }), 409, 'CONFLICT', 'with children');
  assertEnvelope(await ta.call('DELETE', `/api/v1/owners/${D1.ownerId}`, { token: admin }), 409, 'CONFLICT', 'with assets');
  assert.equal((await ta.call('GET', `/api/v1/owners/${D.ownerId}`, { token: admin })).status, 200);
  assert.equal((await ta.call('GET', `/api/v1/owners/${D1.ownerId}`, { token: admin })).status, 200);
  // Emptied, they go (children first); their keys go with them.
  assert.equal((await ta.call('DELETE', `/api/v1/assets/${a.id}`, { token: D1.key })).status, 204);
  assert.equal((await ta.call('DELETE', `/api/v1/owners/${D1.ownerId}`, { token: admin })).status, 204);
  assert.equal((await ta.call('DELETE', `/api/v1/owners/${D.ownerId}`, { token: admin })).status, 204);
  assert.equal((await ta.call('GET', `/api/v1/owners/${D.ownerId}`, { token: admin })).status, 404);
  assert.equal((await ta.call('GET', '/api/v1/assets', { token: D.key })).status, 401, "a deleted owner's key no longer works");
});
