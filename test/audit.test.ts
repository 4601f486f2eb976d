// The audit log (API guide 14): a walk over the OpenAPI document's write operations, each called
// once with a valid request, shows that every audited one writes exactly one entry (data records
// none), with the right action, resource, actor and address, and that no entry carries a secret
// sent or shown. Then who sees which entries, the filters and paging, sign-in, failed sign-in and
// sign-out, and the retention.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, test } from 'node:test';
import { MASK, pruneAudit, redactedUrl } from '../src/audit/audit.js';
import { customer, frozenSpecification, OPERATOR, ok, type Res, startApp, storeLocations } from './helpers.js';
import { Receiver } from './receiver.js';

const TRACCAR_TOKEN = 'audit-traccar-token-0123456789';
const ta = await startApp(undefined, {
  INGEST_TRACCAR_TOKEN: TRACCAR_TOKEN,
  PUSH_ALLOW_HTTP: 'true',
  PUSH_ALLOWED_NETWORKS: '127.0.0.0/8',
  DELIVERY_POLL_MS: '100',
  RATE_LIMIT_MAX: '100000',
  AUTH_THROTTLE_FAILURES: '100',
  DB_POOL_SIZE: '4',
});
const rx = await new Receiver().start();
after(() => rx.close());
const db = ta.app.services.db;

interface Entry {
  id: string;
  at: string;
  actor: { type: string; id: string | null };
  ownerId: string | null;
  address: string | null;
  action: string;
  resource: { type: string; id: string | null };
  changes: Record<string, { from?: unknown; to?: unknown }> | null;
}

const lastId = async () => (await db.query<{ n: string }>('SELECT COALESCE(max(id), 0)::text AS n FROM audit_log')).rows[0]!.n;
const entriesSince = async (id: string) =>
  ok(await ta.call('GET', `/api/v1/audit?order=asc&limit=1000&from=2000-01-01T00:00:00Z`, { token: ta.adminToken }), 200).filter(
    (e: Entry) => BigInt(e.id) > BigInt(id),
  ) as Entry[];

/** Every secret a request sent or an answer showed: none may appear in any entry. */
const secrets: string[] = [];
const secret = (label: string) => {
  const s = `${label}-${crypto.randomBytes(12).toString('hex')}`;
  secrets.push(s);
  return s;
};

const operatorId = async () =>
  (ok(await ta.call('GET', '/api/v1/users?limit=1000', { token: ta.adminToken }), 200) as { id: string; username: string }[]).find(
    (u) => u.username === OPERATOR.username,
  )!.id;

test('every audited write operation of the OpenAPI document writes exactly one entry, data records none, and no secret', async () => {
  const c = await customer(ta, 'audited', { base: '/api/v1' });
  const keyId = (ok(await c.call('GET', '/api-keys'), 200) as { id: string }[])[0]!.id;
  const asCustomer = { type: 'apiKey', id: keyId };
  const asOperator = { type: 'user', id: await operatorId() };
  const st: Record<string, string> = {};
  const call = (who: 'c' | 'op', method: string, path: string, body?: unknown): Promise<Res> =>
    ta.call(method, `/api/v1${path}`, { token: who === 'c' ? c.key : ta.adminToken, ...(body === undefined ? {} : { body }) });
  const asset = async () => c.asset(`a-${crypto.randomUUID().slice(0, 8)}`);
  const integration = async (extra: Record<string, unknown> = {}) =>
    ok(
      await call('c', 'POST', '/integrations', {
        name: `i-${crypto.randomUUID().slice(0, 8)}`,
        channel: 'webhook',
        ownerIds: [c.ownerId],
        destination: `${rx.url}/audit`,
        objectTypes: ['location'],
        retry: { scheduleSeconds: [0.2] },
        ...extra,
      }),
      201,
    ).id as string;

  /** An asset whose specification has just raised an alert: its ALERT event's and notification's ids. */
  const alertOf = async () => {
    const assetId = await asset();
    await frozenSpecification((m, p, b) => call('c', m, p, b), assetId);
    ok(await call('c', 'POST', '/reefer-data', { assetId, data: { supplyAirTemperature: 5 } }), 201);
    const [event] = ok(await call('c', 'GET', `/events?assetId=${assetId}`), 200);
    const [notification] = ok(await call('c', 'GET', `/notifications?assetId=${assetId}`), 200);
    return { event: event.id as string, notification: notification.id as string };
  };
  const alertSetup = (which: 'event' | 'notification') => async () => {
    st.alert = (await alertOf())[which];
  };
  type Actor = { type: string; id: string | null };
  type Expect = { action: string; type: string; actor: Actor } | null;
  type Recipe = { expect: Expect; setup?: () => Promise<void>; run: () => Promise<Res> };
  const audited = (action: string, type: string, actor: Actor) => ({ action, type, actor });
  const cu = (action: string, type: string) => audited(action, type, asCustomer);
  const op = (action: string, type: string) => audited(action, type, asOperator);
  const record = (path: string, body: () => Record<string, unknown>): Recipe => ({
    expect: null,
    run: () => call('c', 'POST', path, body()),
  });

  const recipes: Record<string, Recipe> = {
    'POST /auth/realms/{realm}/protocol/openid-connect/token': {
      expect: op('signIn', 'user'),
      run: () =>
        ta.call('POST', '/auth/realms/tracking/protocol/openid-connect/token', {
          headers: {
            authorization: `Basic ${Buffer.from(`${OPERATOR.clientId}:${OPERATOR.clientSecret}`).toString('base64')}`,
            'content-type': 'application/x-www-form-urlencoded',
          },
          body: new URLSearchParams({ grant_type: 'password', username: OPERATOR.username, password: OPERATOR.password }).toString(),
        }),
    },
    'POST /api/v1/owners': {
      expect: op('create', 'owner'),
      run: async () => {
        const r = await call('op', 'POST', '/owners', { name: 'audited child', ownerId: c.ownerId });
        st.owner = r.body.id;
        return r;
      },
    },
    'PUT /api/v1/owners/{id}': {
      expect: cu('update', 'owner'),
      run: () => call('c', 'PUT', `/owners/${st.owner}`, { name: 'renamed', ownerId: c.ownerId }),
    },
    'PATCH /api/v1/owners/{id}': {
      expect: cu('update', 'owner'),
      run: () => call('c', 'PATCH', `/owners/${st.owner}`, { note: 'patched' }),
    },
    'DELETE /api/v1/owners/{id}': { expect: op('delete', 'owner'), run: () => call('op', 'DELETE', `/owners/${st.owner}`) },
    'POST /api/v1/assets': {
      expect: cu('create', 'asset'),
      run: async () => {
        const r = await call('c', 'POST', '/assets', { name: 'audited asset' });
        st.asset = r.body.id;
        return r;
      },
    },
    'PUT /api/v1/assets/{id}': { expect: cu('update', 'asset'), run: () => call('c', 'PUT', `/assets/${st.asset}`, { name: 'put asset' }) },
    'PATCH /api/v1/assets/{id}': { expect: cu('update', 'asset'), run: () => call('c', 'PATCH', `/assets/${st.asset}`, { note: 'n' }) },
    'DELETE /api/v1/assets/{id}': {
      expect: cu('delete', 'asset'),
      setup: async () => {
        st.spare = await asset();
      },
      run: () => call('c', 'DELETE', `/assets/${st.spare}`),
    },
    'POST /api/v1/users': {
      expect: op('create', 'user'),
      run: async () => {
        const r = await call('op', 'POST', '/users', {
          username: `audited-${crypto.randomUUID().slice(0, 8)}`,
          password: secret('pw'),
          ownerId: c.ownerId,
          scopes: ['read'],
        });
        st.user = r.body.id;
        return r;
      },
    },
    'PATCH /api/v1/users/{id}': {
      expect: op('update', 'user'),
      run: () => call('op', 'PATCH', `/users/${st.user}`, { password: secret('pw2') }),
    },
    'DELETE /api/v1/users/{id}': { expect: op('delete', 'user'), run: () => call('op', 'DELETE', `/users/${st.user}`) },
    'POST /api/v1/clients': {
      expect: op('create', 'client'),
      run: async () => {
        const r = await call('op', 'POST', '/clients', {
          clientId: `audited-${crypto.randomUUID().slice(0, 8)}`,
          grants: ['client_credentials'],
          ownerId: c.ownerId,
          scopes: ['read'],
        });
        st.client = r.body.id;
        secrets.push(r.body.clientSecret);
        return r;
      },
    },
    'DELETE /api/v1/clients/{id}': {
      expect: op('delete', 'client'),
      setup: async () => {
        const r = await call('op', 'POST', '/clients', {
          clientId: `spare-${crypto.randomUUID().slice(0, 8)}`,
          grants: ['client_credentials'],
        });
        st.spareClient = ok(r, 201).id;
        secrets.push(r.body.clientSecret);
      },
      run: () => call('op', 'DELETE', `/clients/${st.spareClient}`),
    },
    'PATCH /api/v1/clients/{id}': {
      expect: op('update', 'client'),
      run: () => call('op', 'PATCH', `/clients/${st.client}`, { name: 'named' }),
    },
    'POST /api/v1/api-keys': {
      expect: cu('create', 'apiKey'),
      run: async () => {
        const r = await call('c', 'POST', '/api-keys', { name: 'audited key', scopes: ['read'] });
        st.key = r.body.id;
        secrets.push(r.body.key);
        return r;
      },
    },
    'DELETE /api/v1/api-keys/{id}': { expect: cu('delete', 'apiKey'), run: () => call('c', 'DELETE', `/api-keys/${st.key}`) },
    'POST /api/v1/locations': record('/locations', () => ({ assetId: st.asset, latitude: 53.5, longitude: 9.9 })),
    'POST /api/v1/devices': {
      expect: cu('create', 'device'),
      setup: async () => {
        st.deviceAsset = await asset();
      },
      run: async () => {
        const r = await call('c', 'POST', '/devices', { assetId: st.deviceAsset, protocol: 'osmand' });
        st.device = r.body.id;
        secrets.push(r.body.uniqueId);
        return r;
      },
    },
    'PATCH /api/v1/devices/{id}': {
      expect: cu('update', 'device'),
      run: () => call('c', 'PATCH', `/devices/${st.device}`, { disabled: true }),
    },
    'DELETE /api/v1/devices/{id}': { expect: cu('delete', 'device'), run: () => call('c', 'DELETE', `/devices/${st.device}`) },
    // What devices send is data: no entry.
    'POST /ingest/osmand': {
      expect: null,
      setup: async () => {
        const d = ok(await call('c', 'POST', '/devices', { assetId: await asset(), protocol: 'osmand' }), 201);
        st.osmand = d.uniqueId;
      },
      run: () => ta.call('POST', `/ingest/osmand?id=${st.osmand}&lat=53.5&lon=9.9`),
    },
    'POST /ingest/traccar': {
      expect: null,
      setup: async () => {
        ok(await call('op', 'POST', '/devices', { assetId: await asset(), protocol: 'traccar', uniqueId: 'audit-imei-0000001' }), 201);
      },
      run: () =>
        ta.call('POST', '/ingest/traccar', {
          headers: { authorization: `Bearer ${TRACCAR_TOKEN}` },
          body: {
            position: { fixTime: new Date().toISOString(), valid: true, latitude: 53.5, longitude: 9.9, attributes: {} },
            device: { uniqueId: 'audit-imei-0000001' },
          },
        }),
    },
    'POST /api/v1/sensor-data': record('/sensor-data', () => ({ assetId: st.asset, sensorId: 's-1', type: 'TEMPERATURE', value: 4.5 })),
    'POST /api/v1/reefer-data': record('/reefer-data', () => ({ assetId: st.asset, data: { supplyAirTemperature: 4.5 } })),
    'POST /api/v1/genset-data': record('/genset-data', () => ({ assetId: st.asset, gensetType: 'SG-3000', data: { rpm: 1500 } })),
    'POST /api/v1/oem-data': record('/oem-data', () => ({ assetId: st.asset, payloadType: 7, data: { raw: 'abc' } })),
    'POST /api/v1/zones': {
      expect: cu('create', 'zone'),
      run: async () => {
        const r = await call('c', 'POST', '/zones', { name: 'Z', circle: { latitude: 10, longitude: 10, radiusMeters: 1000 } });
        st.zone = String(r.body.id);
        return r;
      },
    },
    'PUT /api/v1/zones/{id}': {
      expect: cu('update', 'zone'),
      run: () => call('c', 'PUT', `/zones/${st.zone}`, { name: 'Z2', circle: { latitude: 11, longitude: 10, radiusMeters: 1000 } }),
    },
    'PATCH /api/v1/zones/{id}': { expect: cu('update', 'zone'), run: () => call('c', 'PATCH', `/zones/${st.zone}`, { note: 'n' }) },
    'DELETE /api/v1/zones/{id}': { expect: cu('delete', 'zone'), run: () => call('c', 'DELETE', `/zones/${st.zone}`) },
    // An alert each (its asset, specification and reading are the setup's entries, not the run's).
    'POST /api/v1/events/{id}/acknowledge': {
      expect: cu('acknowledge', 'event'),
      setup: alertSetup('event'),
      run: () => call('c', 'POST', `/events/${st.alert}/acknowledge`),
    },
    'POST /api/v1/events/acknowledge': {
      expect: cu('acknowledge', 'event'),
      setup: alertSetup('event'),
      run: () => call('c', 'POST', '/events/acknowledge', { ids: [st.alert] }),
    },
    'POST /api/v1/notifications/{id}/acknowledge': {
      expect: cu('acknowledge', 'event'),
      setup: alertSetup('notification'),
      run: () => call('c', 'POST', `/notifications/${st.alert}/acknowledge`),
    },
    'POST /api/v1/specifications': {
      expect: cu('create', 'specification'),
      run: async () => {
        const r = await call('c', 'POST', '/specifications', { assetId: st.asset, type: 'REEFER' });
        st.spec = r.body.id;
        return r;
      },
    },
    'PUT /api/v1/specifications/{id}': {
      expect: cu('update', 'specification'),
      run: () => call('c', 'PUT', `/specifications/${st.spec}`, { assetId: st.asset, type: 'REEFER', name: 'put' }),
    },
    'PATCH /api/v1/specifications/{id}': {
      expect: cu('update', 'specification'),
      run: () => call('c', 'PATCH', `/specifications/${st.spec}`, { name: 'patched' }),
    },
    'DELETE /api/v1/specifications/{id}': {
      expect: cu('delete', 'specification'),
      run: () => call('c', 'DELETE', `/specifications/${st.spec}`),
    },
    'POST /api/v1/commands': {
      expect: cu('create', 'command'),
      run: async () => {
        const r = await call('c', 'POST', '/commands', { assetId: st.asset, type: 'SET_TEMPERATURE', parameters: { value: 5 } });
        st.command = r.body.id;
        return r;
      },
    },
    'PATCH /api/v1/commands/{id}': {
      expect: cu('update', 'command'),
      run: () => call('c', 'PATCH', `/commands/${st.command}`, { status: 'SENT' }),
    },
    'DELETE /api/v1/commands/{id}': {
      expect: cu('cancel', 'command'),
      setup: async () => {
        st.pending = ok(
          await call('c', 'POST', '/commands', { assetId: st.asset, type: 'SET_TEMPERATURE', parameters: { value: 6 } }),
          201,
        ).id;
      },
      run: () => call('c', 'DELETE', `/commands/${st.pending}`),
    },
    'POST /api/v1/booking-data': {
      expect: cu('create', 'bookingData'),
      run: async () => {
        const r = await call('c', 'POST', '/booking-data', { type: 'MAERSK_V1', name: 'B-1', jsonData: { booking: 'X1' } });
        st.booking = r.body.id;
        return r;
      },
    },
    'PUT /api/v1/booking-data/{id}': {
      expect: cu('update', 'bookingData'),
      run: () => call('c', 'PUT', `/booking-data/${st.booking}`, { type: 'MAERSK_V1', jsonData: { booking: 'X2' } }),
    },
    'PATCH /api/v1/booking-data/{id}': {
      expect: cu('update', 'bookingData'),
      run: () => call('c', 'PATCH', `/booking-data/${st.booking}`, { name: 'B-2' }),
    },
    'DELETE /api/v1/booking-data/{id}': {
      expect: cu('delete', 'bookingData'),
      run: () => call('c', 'DELETE', `/booking-data/${st.booking}`),
    },
    'POST /api/v1/booking-data/{id}/assets': {
      expect: cu('create', 'bookingAsset'),
      setup: async () => {
        st.linkBooking = ok(await call('c', 'POST', '/booking-data', { type: 'MAERSK_V1', name: 'B-links' }), 201).id;
        st.linkAsset = await asset();
      },
      run: async () => {
        const r = await call('c', 'POST', `/booking-data/${st.linkBooking}/assets`, {
          assetId: st.linkAsset,
          from: '2026-11-01T00:00:00Z',
          to: '2026-11-30T00:00:00Z',
        });
        st.link = r.body.id;
        return r;
      },
    },
    'DELETE /api/v1/booking-data/{id}/assets/{linkId}': {
      expect: cu('delete', 'bookingAsset'),
      run: () => call('c', 'DELETE', `/booking-data/${st.linkBooking}/assets/${st.link}`),
    },
    'POST /api/v1/integrations': {
      expect: cu('create', 'integration'),
      run: async () => {
        const r = await call('c', 'POST', '/integrations', {
          name: 'audited',
          channel: 'webhook',
          ownerIds: [c.ownerId],
          destination: `${rx.url}/audited`,
          objectTypes: ['location'],
          webhook: {
            signingSecret: `whsec_${Buffer.from(secret('sign')).toString('base64')}`,
            auth: { type: 'basic', username: 'u', password: secret('basic') },
          },
        });
        st.integration = r.body.id;
        return r;
      },
    },
    'PUT /api/v1/integrations/{id}': {
      expect: cu('update', 'integration'),
      run: () =>
        call('c', 'PUT', `/integrations/${st.integration}`, {
          name: 'audited-put',
          channel: 'webhook',
          ownerIds: [c.ownerId],
          destination: `${rx.url}/audited`,
          objectTypes: ['location'],
          webhook: { auth: { type: 'apiKey', token: secret('token') } },
        }),
    },
    'PATCH /api/v1/integrations/{id}': {
      expect: cu('disable', 'integration'),
      run: () => call('c', 'PATCH', `/integrations/${st.integration}`, { enabled: false }),
    },
    'DELETE /api/v1/integrations/{id}': {
      expect: cu('delete', 'integration'),
      setup: async () => {
        st.spareIntegration = await integration();
      },
      run: () => call('c', 'DELETE', `/integrations/${st.spareIntegration}`),
    },
    'POST /api/v1/integrations/{id}/rotate-signing-secret': {
      expect: cu('rotate', 'integration'),
      run: async () => {
        const r = await call('c', 'POST', `/integrations/${st.integration}/rotate-signing-secret`, {});
        secrets.push(r.body.webhook.signingSecret);
        return r;
      },
    },
    'POST /api/v1/integrations/{id}/deliveries/{deliveryId}/redeliver': {
      expect: cu('redeliver', 'delivery'),
      setup: async () => {
        st.live = await integration();
        await storeLocations(ta, c.key, st.asset!, [1]);
        await rx.waitFor(() => rx.for('/audit').length >= 1, 60_000, 'the delivery');
        st.delivery = ok(await call('c', 'GET', `/integrations/${st.live}/deliveries`), 200)[0].id;
      },
      run: () => call('c', 'POST', `/integrations/${st.live}/deliveries/${st.delivery}/redeliver`),
    },
    'POST /api/v1/integrations/{id}/deliveries/redeliver': {
      expect: cu('redeliver', 'integration'),
      run: () =>
        call('c', 'POST', `/integrations/${st.live}/deliveries/redeliver`, {
          status: 'SUCCEEDED',
          from: '2000-01-01T00:00:00Z',
          to: new Date(Date.now() + 60_000).toISOString(),
        }),
    },
    'POST /api/v1/webhooks/test': {
      expect: cu('test', 'integration'),
      run: () => call('c', 'POST', '/webhooks/test', { url: `${rx.url}/audit`, integrationId: st.live }),
    },
    // A share link's token is in its url only, once: never in the entry (which lists its settings).
    'POST /api/v1/share-links': {
      expect: cu('create', 'shareLink'),
      run: async () => {
        const r = await call('c', 'POST', '/share-links', {
          assetIds: [st.asset],
          show: ['position'],
          expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
        });
        st.share = r.body.id;
        secrets.push(String(r.body.url).split('/share/')[1]!);
        return r;
      },
    },
    'DELETE /api/v1/share-links/{id}': { expect: cu('revoke', 'shareLink'), run: () => call('c', 'DELETE', `/share-links/${st.share}`) },
  };

  const doc = ok(await ta.call('GET', '/api/v1/openapi.json'), 200);
  const operations: string[] = [];
  for (const [path, ops] of Object.entries(doc.paths as Record<string, object>)) {
    for (const method of Object.keys(ops))
      if (['post', 'put', 'patch', 'delete'].includes(method)) operations.push(`${method.toUpperCase()} ${path}`);
  }
  const unknown = operations.filter((o) => !recipes[o]);
  assert.deepEqual(unknown, [], 'a write operation without a recipe here: say whether it is audited');
  assert.equal(operations.length, Object.keys(recipes).length, 'every recipe is an operation of the document');

  const all: Entry[] = [];
  for (const operation of operations) {
    const recipe = recipes[operation]!;
    await recipe.setup?.();
    const mark = await lastId();
    const r = await recipe.run();
    assert.ok(r.status >= 200 && r.status < 300, `${operation}: ${r.status} ${r.raw.slice(0, 300)}`);
    const written = await entriesSince(mark);
    if (!recipe.expect) {
      assert.deepEqual(written, [], `${operation} is data, not a change: no entry`);
      continue;
    }
    assert.equal(written.length, 1, `${operation}: exactly one entry, got ${JSON.stringify(written)}`);
    const e = written[0]!;
    assert.equal(e.action, recipe.expect.action, operation);
    assert.equal(e.resource.type, recipe.expect.type, operation);
    assert.deepEqual(e.actor, recipe.expect.actor, operation);
    assert.ok(e.address, `${operation}: the client's address`);
    assert.ok(e.ownerId, `${operation}: an owner`);
    all.push(e);
  }

  // What the entries say, secrets masked.
  const find = (action: string, type: string) => all.find((e) => e.action === action && e.resource.type === type)!;
  assert.deepEqual(find('create', 'user').changes!.password, { to: MASK });
  assert.deepEqual(find('update', 'user').changes!.password, { from: MASK, to: MASK });
  assert.deepEqual(find('create', 'client').changes!.clientSecret, { to: MASK });
  assert.deepEqual(find('create', 'apiKey').changes!.key, { to: MASK });
  const made = find('create', 'integration').changes!;
  assert.deepEqual(made['webhook.signingSecret'], { to: MASK });
  assert.deepEqual(made['webhook.auth.password'], { to: MASK });
  assert.equal(made.name!.to, 'audited');
  const put = find('update', 'integration').changes!;
  assert.deepEqual(put.name, { from: 'audited', to: 'audited-put' }, 'an update lists what changed, from and to');
  assert.deepEqual(put['webhook.auth.token'], { from: MASK, to: MASK });
  assert.equal(put.destination, undefined, 'what did not change is not listed');
  assert.deepEqual(find('disable', 'integration').changes!.enabled, { from: true, to: false });
  assert.deepEqual(find('rotate', 'integration').changes!['webhook.signingSecret'], { from: MASK, to: MASK });
  assert.deepEqual(find('update', 'owner').changes!.name, { from: 'audited child', to: 'renamed' });
  assert.deepEqual(all.findLast((e) => e.action === 'update' && e.resource.type === 'owner')!.changes!.note, { from: null, to: 'patched' });
  assert.equal(find('create', 'owner').ownerId, find('create', 'owner').resource.id);
  assert.deepEqual(find('create', 'shareLink').changes!.show, { to: ['position'] });
  assert.equal(find('create', 'shareLink').changes!.url, undefined, "a share link's url is never in the log");
  assert.deepEqual(find('revoke', 'shareLink').changes!.status, { from: 'active', to: 'revoked' });

  // No secret anywhere, in any form it was sent or shown.
  const everything = JSON.stringify(ok(await ta.call('GET', '/api/v1/audit?limit=1000', { token: ta.adminToken }), 200));
  for (const s of [...secrets, OPERATOR.password, OPERATOR.clientSecret, c.key]) {
    assert.ok(!everything.includes(s), `a secret in the audit log: ${s.slice(0, 6)}...`);
  }
});

test('who sees which entries; filters and keyset paging; sign-in, failed sign-in and sign-out', async () => {
  const a = await customer(ta, 'seer', { base: '/api/v1' });
  const child = await customer(ta, 'seer-child', { base: '/api/v1', parentId: a.ownerId });
  const b = await customer(ta, 'stranger', { base: '/api/v1' });
  for (const n of [1, 2, 3]) await a.asset(`mine-${n}`);
  await child.asset('childs');
  await b.asset('theirs');
  const list = async (token: string, query: string) => ok(await ta.call('GET', `/api/v1/audit?${query}`, { token }), 200) as Entry[];

  const mine = await list(a.key, 'resourceType=asset&limit=1000');
  assert.deepEqual(
    new Set(mine.map((e) => e.ownerId)),
    new Set([a.ownerId, child.ownerId]),
    'a customer sees its own and its descendants’ entries, nobody else’s',
  );
  assert.equal((await list(child.key, 'resourceType=asset')).length, 1, 'a child sees its own only');
  assert.deepEqual(await list(a.key, `ownerId=${b.ownerId}`), [], "another owner's entries are not there");
  const theirs = (await list(ta.adminToken, `ownerId=${b.ownerId}&resourceType=asset`))[0]!;
  assert.equal((await ta.call('GET', `/api/v1/audit/${theirs.id}`, { token: a.key })).status, 404);
  assert.equal(ok(await ta.call('GET', `/api/v1/audit/${theirs.id}`, { token: b.key }), 200).id, theirs.id);

  // Newest first; a page of two and the Link to the next, which continues exactly.
  const first = await ta.call('GET', `/api/v1/audit?ownerId=${a.ownerId}&action=create&resourceType=asset&limit=2`, { token: a.key });
  assert.equal(first.body.length, 2);
  assert.ok(first.body[0].id > first.body[1].id || BigInt(first.body[0].id) > BigInt(first.body[1].id));
  const next = /<([^>]+)>; rel="next"/.exec(String(first.headers.link))![1]!;
  const second = ok(await ta.call('GET', new URL(next).pathname + new URL(next).search, { token: a.key }), 200) as Entry[];
  assert.equal(second.length, 1);
  assert.equal(second[0]!.resource.type, 'asset');
  assert.equal(
    (await list(a.key, `from=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`)).length,
    0,
    'from bounds `at`',
  );
  bad400(await ta.call('GET', '/api/v1/audit?ownerId=nope', { token: a.key }));

  // Sign-in, a failed one, and sign-out through the dashboard's sign-in page.
  const username = `signer-${crypto.randomUUID().slice(0, 8)}`;
  const password = secret('signer');
  ok(
    await ta.call('POST', '/api/v1/users', { token: ta.adminToken, body: { username, password, ownerId: a.ownerId, scopes: ['read'] } }),
    201,
  );
  const base = '/auth/realms/tracking/protocol/openid-connect';
  const challenge = crypto.createHash('sha256').update(crypto.randomBytes(32).toString('base64url')).digest('base64url');
  const signIn = (pw: string) =>
    fetch(`${ta.url}${base}/auth`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: ta.url },
      body: new URLSearchParams({
        response_type: 'code',
        client_id: 'dashboard',
        redirect_uri: `${ta.url}/dashboard/`,
        code_challenge: challenge,
        code_challenge_method: 'S256',
        username,
        password: pw,
      }).toString(),
      redirect: 'manual',
    });
  assert.equal((await signIn('wrong-password')).status, 401);
  const signedIn = await signIn(password);
  assert.equal(signedIn.status, 303);
  const cookie = signedIn.headers.get('set-cookie')!.split(';')[0]!;
  assert.equal((await fetch(`${ta.url}${base}/logout`, { method: 'POST', headers: { cookie, origin: ta.url } })).status, 204);
  const trail = (await list(a.key, 'resourceType=user&limit=10')).filter((e) => e.actor.type === 'user' && e.resource.id !== null);
  assert.deepEqual(
    trail.slice(0, 3).map((e) => e.action),
    ['signOut', 'signIn', 'signInFailed'],
  );
  assert.equal(trail[2]!.changes!.username!.to, username);
  assert.ok(!JSON.stringify(trail).includes(password));
});

test('entries older than AUDIT_RETENTION_DAYS go; newer ones stay', async () => {
  await db.query(
    `INSERT INTO audit_log (at, actor_type, actor_id, action, resource_type, resource_id)
     VALUES (now() - interval '400 days', 'system', 'test', 'update', 'retention', 'old'),
            (now() - interval '300 days', 'system', 'test', 'update', 'retention', 'kept')`,
  );
  const before = Number((await db.query<{ n: string }>('SELECT count(*)::text AS n FROM audit_log')).rows[0]!.n);
  assert.equal(await pruneAudit(db, 365), 1);
  const ids = (await db.query<{ resource_id: string }>("SELECT resource_id FROM audit_log WHERE actor_id = 'test'")).rows.map(
    (r) => r.resource_id,
  );
  assert.deepEqual(ids, ['kept']);
  assert.equal(Number((await db.query<{ n: string }>('SELECT count(*)::text AS n FROM audit_log')).rows[0]!.n), before - 1);
});

function bad400(r: Res) {
  assert.equal(r.status, 400, r.raw);
  assert.equal(typeof r.body.error, 'string');
}

test('a URL in an entry keeps no secret: query values and userinfo are masked (an ?api_key= in a webhook destination)', async () => {
  const c = await customer(ta, 'url-audited', { base: '/api/v1' });
  const since = await lastId();
  const key1 = secret('q');
  const key2 = secret('q');
  const made = ok(
    await c.call('POST', '/integrations', {
      name: 'url-secret',
      channel: 'webhook',
      ownerIds: [c.ownerId],
      destination: `${rx.url}/hook?api_key=${key1}&region=eu`,
      objectTypes: ['location'],
    }),
    201,
  );
  ok(await c.call('PATCH', `/integrations/${made.id}`, { destination: `${rx.url}/hook?api_key=${key2}&region=eu` }), 200);
  const entries = (await entriesSince(since)).filter((e) => e.resource.id === made.id);
  assert.deepEqual(
    entries.map((e) => e.action),
    ['create', 'update'],
  );
  const masked = `${rx.url}/hook?api_key=${MASK}&region=${MASK}`;
  assert.equal(entries[0]!.changes!.destination!.to, masked);
  assert.deepEqual(entries[1]!.changes!.destination, { from: masked, to: masked }, 'the change is listed, its secret is not');
  const text = JSON.stringify(entries);
  assert.ok(!text.includes(key1) && !text.includes(key2), text);
  assert.equal(redactedUrl('https://alice:s3cret@h.example/x?token=abc'), `https://${MASK}:${MASK}@h.example/x?token=${MASK}`);
  assert.equal(redactedUrl('https://h.example/x'), 'https://h.example/x', 'nothing to mask: as it was');
  assert.equal(redactedUrl('not a url ?a=b'), 'not a url ?a=b');
});
