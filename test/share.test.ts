// Share links (API guide 8, "Share links"): made, listed, read and revoked through the API, the
// token only in the create answer's url (stored as its SHA-256); every refusal of a create saves
// nothing; the page (server-side HTML, no script) and its data show only what the link names, of
// only its assets, and stop at DELETE and at expiresAt (410), a guessed token a 404; every answered
// use counted; a link's uses a minute and an address's requests a minute bounded; the audit log.
// The browser's view of the page is test/share-page.test.ts.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { test } from 'node:test';
import { BOUNDS } from '../src/bounds.js';
import { SHARE_CSP } from '../src/share/page.js';
import { bad, customer, ok, type Res, startApp, waitFor } from './helpers.js';

const USES_PER_MINUTE = 20;
const REQUESTS_PER_ADDRESS = 40;
const LINKS_PER_OWNER = 3;
// X-Forwarded-For names the client's address (from the loopback, a trusted proxy): each test asks
// from addresses of its own, so one test's requests never use another's budget.
const ta = await startApp(undefined, {
  RATE_LIMIT_MAX: '100000',
  TRUST_PROXY: '127.0.0.0/8',
  SHARE_MAX_USES_PER_MINUTE: String(USES_PER_MINUTE),
  SHARE_MAX_REQUESTS_PER_ADDRESS: String(REQUESTS_PER_ADDRESS),
  SHARE_MAX_LINKS_PER_OWNER: String(LINKS_PER_OWNER),
});
const db = ta.app.services.db;
let addresses = 0;
const address = () => `203.0.113.${++addresses % 250}`;
const DAY = 86_400_000;
const inDays = (d: number) => new Date(Date.now() + d * DAY).toISOString();

/** A GET of a share URL (absolute, as the API answers it, or a path), from `ip`. */
const visit = (url: string, ip: string): Promise<Res> => {
  const u = new URL(url, ta.url);
  return ta.call('GET', u.pathname + u.search, { headers: { 'x-forwarded-for': ip } });
};
const tokenOf = (url: string) => /\/share\/([A-Za-z0-9_-]{43})$/.exec(url)?.[1] ?? '';

test('create, list, get and revoke a link; its token only in the url, stored as its digest; each change audited once', async () => {
  const c = await customer(ta, 'share-crud', { base: '/api/v1' });
  const a1 = await c.asset('SHARE-CRUD-1');
  const a2 = await c.asset('SHARE-CRUD-2');
  const r = await c.call('POST', '/share-links', {
    assetIds: [a1],
    show: ['track', 'position'],
    expiresAt: inDays(7),
    note: 'for the consignee',
  });
  const link = ok(r, 201);
  assert.equal(r.headers.location, `${ta.url}/api/v1/share-links/${link.id}`);
  assert.match(link.url, new RegExp(`^${ta.url}/share/[A-Za-z0-9_-]{43}$`));
  const token = tokenOf(link.url);
  assert.deepEqual(link.show, ['position', 'track'], 'the parts in their one order');
  assert.equal(link.ownerId, c.ownerId);
  assert.deepEqual(link.assetIds, [a1]);
  assert.equal(link.windowHours, 24);
  assert.equal(link.status, 'active');
  assert.equal(link.uses, 0);
  assert.equal(link.lastUsedAt, null);
  assert.equal(link.note, 'for the consignee');
  assert.match(link.whoCreated, /^apikey:/);

  // Stored as its SHA-256, never as itself; never shown again.
  const { rows } = await db.query<{ digest: string; whole: string }>(
    'SELECT digest, row_to_json(s)::text AS whole FROM share_links s WHERE id = $1',
    [link.id],
  );
  assert.equal(rows[0]!.digest, crypto.createHash('sha256').update(token).digest('hex'));
  assert.ok(!rows[0]!.whole.includes(token), 'the token is not stored');
  const other = ok(await c.call('POST', '/share-links', { assetIds: [a2], show: ['temperature'], expiresAt: inDays(1) }), 201);
  const list = await c.call('GET', '/share-links');
  assert.deepEqual(
    ok(list, 200).map((l: { id: string }) => l.id),
    [other.id, link.id],
    'newest first',
  );
  assert.ok(!list.raw.includes(token) && !list.raw.includes('/share/'), 'a list shows no token or url');
  const one = await c.call('GET', `/share-links/${link.id}`);
  assert.equal(ok(one, 200).url, undefined);
  assert.ok(!one.raw.includes(token));
  assert.deepEqual(
    ok(await c.call('GET', `/share-links?assetId=${a1}`), 200).map((l: { id: string }) => l.id),
    [link.id],
    'filtered by asset',
  );

  // Another customer sees none of it.
  const stranger = await customer(ta, 'share-stranger', { base: '/api/v1' });
  bad(await stranger.call('GET', `/share-links/${link.id}`), 404, undefined, 'get');
  bad(await stranger.call('DELETE', `/share-links/${link.id}`), 404, undefined, 'delete');
  assert.deepEqual(ok(await stranger.call('GET', '/share-links'), 200), []);

  // Revoked: listed so, once.
  const before = ok(await ta.call('GET', '/api/v1/audit?resourceType=shareLink&limit=1000', { token: ta.adminToken }), 200).length;
  assert.equal(ok(await c.call('DELETE', `/share-links/${link.id}`), 204), undefined);
  const revoked = ok(await c.call('GET', `/share-links/${link.id}`), 200);
  assert.equal(revoked.status, 'revoked');
  assert.ok(revoked.revokedAt);
  ok(await c.call('DELETE', `/share-links/${link.id}`), 204, 'a second revocation');
  assert.deepEqual(
    ok(await c.call('GET', '/share-links?status=revoked'), 200).map((l: { id: string }) => l.id),
    [link.id],
  );
  assert.deepEqual(
    ok(await c.call('GET', '/share-links?status=active'), 200).map((l: { id: string }) => l.id),
    [other.id],
  );

  // The audit log: one create each and one revoke, the customer's, no token anywhere.
  const entries = ok(await c.call('GET', `/audit?resourceType=shareLink&limit=1000`), 200) as {
    action: string;
    resource: { id: string };
    actor: { type: string };
    ownerId: string;
  }[];
  assert.deepEqual(
    entries.map((e) => `${e.action} ${e.resource.id}`).sort(),
    [`create ${link.id}`, `create ${other.id}`, `revoke ${link.id}`].sort(),
  );
  assert.ok(entries.every((e) => e.actor.type === 'apiKey' && e.ownerId === c.ownerId));
  const all = ok(await ta.call('GET', '/api/v1/audit?resourceType=shareLink&limit=1000', { token: ta.adminToken }), 200);
  assert.equal(all.length, before + 1, 'the second DELETE wrote nothing');
  assert.ok(!JSON.stringify(all).includes(token), 'no token in the audit log');
});

test('refused creates save nothing: an unknown part, a past or too distant expiry, too many assets, another owner’s asset (404 naming /assetIds/<i>)', async () => {
  const c = await customer(ta, 'share-refused', { base: '/api/v1' });
  const mine = await c.asset('SHARE-MINE');
  const theirs = await (await customer(ta, 'share-theirs')).asset('SHARE-THEIRS');
  const post = (body: Record<string, unknown>) =>
    c.call('POST', '/share-links', { assetIds: [mine], show: ['position'], expiresAt: inDays(1), ...body });
  const unknown = await post({ show: ['position', 'weather'] });
  bad(unknown, 400, '/show/1', 'an unknown part');
  assert.match(unknown.body.message, /position.*track.*temperature/, 'the message lists the allowed values');
  bad(await post({ show: [] }), 400, '/show', 'nothing to show');
  bad(await post({ expiresAt: new Date(Date.now() - 1000).toISOString() }), 400, '/expiresAt', 'in the past');
  bad(await post({ expiresAt: inDays(BOUNDS.shareExpiryDays.value + 1) }), 400, '/expiresAt', 'too far ahead');
  bad(await post({ expiresAt: 'tomorrow' }), 400, '/expiresAt', 'not a time');
  bad(await post({ windowHours: BOUNDS.shareWindowHours.value + 1 }), 400, '/windowHours', 'too long a window');
  bad(await post({ note: 'n'.repeat(256) }), 400, '/note', 'too long a note');
  const many = Array.from({ length: BOUNDS.shareAssetsPerLink.value + 1 }, () => crypto.randomUUID());
  bad(await post({ assetIds: many }), 400, '/assetIds', 'too many assets');
  bad(await post({ assetIds: [] }), 400, '/assetIds', 'no asset');
  bad(await post({ assetIds: [mine, mine] }), 400, '/assetIds', 'an asset twice');
  bad(await post({ assetIds: [theirs] }), 404, '/assetIds/0', "another owner's asset");
  bad(await post({ assetIds: [mine, theirs] }), 404, '/assetIds/1', "another owner's asset, second");
  bad(await post({ assetIds: [mine, crypto.randomUUID()] }), 404, '/assetIds/1', 'no such asset');
  assert.deepEqual(ok(await c.call('GET', '/share-links'), 200), [], 'nothing saved');
  const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM share_links WHERE owner_id = $1', [c.ownerId]);
  assert.equal(rows[0]!.n, 0);
});

test("the link's owner: the lowest owner holding its assets; the operator shares any, the customer sees it; one tree per link", async () => {
  const parent = await customer(ta, 'share-parent', { base: '/api/v1' });
  const child = await customer(ta, 'share-child', { base: '/api/v1', parentId: parent.ownerId });
  const inChild = await child.asset('SHARE-CHILD-ASSET');
  const inParent = await parent.asset('SHARE-PARENT-ASSET');
  const a = ok(await parent.call('POST', '/share-links', { assetIds: [inChild], show: ['position'], expiresAt: inDays(1) }), 201);
  assert.equal(a.ownerId, child.ownerId, "the child's link: the child sees it too");
  ok(await child.call('GET', `/share-links/${a.id}`), 200);
  const b = ok(await parent.call('POST', '/share-links', { assetIds: [inChild, inParent], show: ['position'], expiresAt: inDays(1) }), 201);
  assert.equal(b.ownerId, parent.ownerId);
  bad(await child.call('GET', `/share-links/${b.id}`), 404, undefined, "the parent's link is not the child's");
  // The operator: any asset, the link the customer's.
  const elsewhere = await customer(ta, 'share-elsewhere', { base: '/api/v1' });
  const far = await elsewhere.asset('SHARE-FAR');
  const op = (body: unknown) => ta.call('POST', '/api/v1/share-links', { token: ta.adminToken, body });
  const byOperator = ok(await op({ assetIds: [far], show: ['track'], expiresAt: inDays(1) }), 201);
  assert.equal(byOperator.ownerId, elsewhere.ownerId);
  assert.match(byOperator.whoCreated, /^user:/);
  ok(await elsewhere.call('GET', `/share-links/${byOperator.id}`), 200);
  bad(await op({ assetIds: [far, inParent], show: ['track'], expiresAt: inDays(1) }), 400, '/assetIds', 'two top-level owners');
});

test('at most SHARE_MAX_LINKS_PER_OWNER links in effect per tree; as many ended ones kept (410), older ones removed (404)', async () => {
  const c = await customer(ta, 'share-count', { base: '/api/v1' });
  const asset = await c.asset('SHARE-COUNT');
  const make = () => c.call('POST', '/share-links', { assetIds: [asset], show: ['position'], expiresAt: inDays(1) });
  const made = [];
  for (let i = 0; i < LINKS_PER_OWNER; i++) made.push(ok(await make(), 201));
  const refused = await make();
  bad(refused, 409, undefined, 'one link too many');
  assert.match(refused.body.message, /SHARE_MAX_LINKS_PER_OWNER/);
  assert.equal(ok(await c.call('GET', '/share-links'), 200).length, LINKS_PER_OWNER, 'nothing saved');
  // A sub-owner's links count in the same tree.
  const sub = await customer(ta, 'share-count-sub', { base: '/api/v1', parentId: c.ownerId });
  const subAsset = await sub.asset('SHARE-COUNT-SUB');
  bad(
    await sub.call('POST', '/share-links', { assetIds: [subAsset], show: ['position'], expiresAt: inDays(1) }),
    409,
    undefined,
    'sub-owner',
  );
  // Revoked ones make room; the ended ones past the newest LINKS_PER_OWNER go when a link is made.
  for (const l of made) ok(await c.call('DELETE', `/share-links/${l.id}`), 204);
  made.push(ok(await make(), 201));
  ok(await c.call('DELETE', `/share-links/${made[3]!.id}`), 204);
  made.push(ok(await make(), 201));
  const ip = address();
  assert.equal((await visit(made[0]!.url, ip)).status, 404, 'the oldest ended link is gone');
  assert.equal((await visit(made[1]!.url, ip)).status, 410, 'a newer ended link says so');
  assert.equal((await visit(made[4]!.url, ip)).status, 200);
});

/** A customer with a reefer (positions, reefer data, a temperature sensor) and a second asset of its own. */
async function fleetWithData(label: string) {
  const c = await customer(ta, label, { base: '/api/v1' });
  const reefer = await c.asset(`${label.toUpperCase()}-REEFER`);
  const truck = await c.asset(`${label.toUpperCase()}-TRUCK`);
  const now = Date.now();
  const at = (minutesAgo: number) => new Date(now - minutesAgo * 60_000).toISOString();
  ok(
    await c.call(
      'POST',
      '/locations',
      Array.from({ length: 30 }, (_, i) => ({
        assetId: reefer,
        latitude: 51.9 + i * 0.001,
        longitude: 4.1 + i * 0.002,
        speed: 40,
        whenCreated: at(30 - i),
      })),
    ),
    201,
  );
  ok(await c.call('POST', '/locations', { assetId: truck, latitude: -33.861234, longitude: 151.209876, whenCreated: at(5) }), 201);
  ok(
    await c.call(
      'POST',
      '/reefer-data',
      Array.from({ length: 20 }, (_, i) => ({
        assetId: reefer,
        whenCreated: at(20 - i),
        data:
          i % 2
            ? { supplyAirTemperature: -18 + i / 10, returnAirTemperature: -16 }
            : { cargo: { sensors: { supplyAirTemperature: -18.5 } } },
      })),
    ),
    201,
  );
  ok(await c.call('POST', '/sensor-data', [{ assetId: reefer, sensorId: 't1', type: 'TEMPERATURE', value: 3.5, whenCreated: at(2) }]), 201);
  ok(await c.call('POST', '/sensor-data', [{ assetId: reefer, sensorId: 'h1', type: 'HUMIDITY', value: 80, whenCreated: at(2) }]), 201);
  return { c, reefer, truck };
}

test('the page and its data show only what the link names, only of its assets, and nothing else (no ids)', async () => {
  const { c, reefer, truck } = await fleetWithData('share-view');
  const make = async (body: Record<string, unknown>) =>
    ok(await c.call('POST', '/share-links', { assetIds: [reefer], expiresAt: inDays(1), ...body }), 201) as { id: string; url: string };
  const ip = address();

  // Position only: the reefer's latest position, nothing of the truck, no track, no temperatures.
  const position = await make({ show: ['position'] });
  const page = await visit(position.url, ip);
  assert.equal(page.status, 200, page.raw.slice(0, 300));
  assert.match(String(page.headers['content-type']), /^text\/html/);
  assert.equal(page.headers['content-security-policy'], SHARE_CSP);
  assert.equal(page.headers['referrer-policy'], 'no-referrer');
  assert.equal(page.headers['cache-control'], 'no-store');
  assert.doesNotMatch(page.raw, /<script|\son[a-z]+=|style=/i, 'no script, no inline handler or style');
  assert.ok(page.raw.includes('SHARE-VIEW-REEFER'), 'the asset by name');
  assert.ok(page.raw.includes('51.92900, 4.15800'), 'the latest position as coordinates');
  assert.ok(page.raw.includes('class="map"'), 'on a map');
  assert.ok(!page.raw.includes('TRUCK') && !page.raw.includes('-33.86'), 'nothing of the other asset');
  assert.ok(!page.raw.includes('class="track') && !page.raw.includes('class="chart"'), 'no track, no chart');
  for (const id of [reefer, truck, c.ownerId, position.id]) assert.ok(!page.raw.includes(id), `no id in the page (${id})`);
  const data = await visit(`${position.url}/data`, ip);
  const body = ok(data, 200);
  assert.deepEqual(Object.keys(body).sort(), ['assets', 'expiresAt', 'show', 'windowHours']);
  assert.deepEqual(body.assets.length, 1);
  assert.deepEqual(Object.keys(body.assets[0]).sort(), ['index', 'name', 'position']);
  assert.deepEqual(
    { latitude: body.assets[0].position.latitude, longitude: body.assets[0].position.longitude },
    { latitude: 51.929, longitude: 4.158 },
  );
  for (const id of [reefer, truck, c.ownerId, position.id]) assert.ok(!data.raw.includes(id), `no id in the data (${id})`);

  // Temperature only: the chart, no coordinates, no map.
  const temperature = await make({ show: ['temperature'] });
  const tPage = await visit(temperature.url, ip);
  assert.equal(tPage.status, 200);
  assert.ok(tPage.raw.includes('class="chart"'));
  assert.ok(!tPage.raw.includes('51.9') && !tPage.raw.includes('class="map"'), 'no position anywhere');
  const tData = ok(await visit(`${temperature.url}/data`, ip), 200);
  assert.deepEqual(Object.keys(tData).sort(), ['asset', 'assets', 'expiresAt', 'show', 'temperature', 'windowHours']);
  assert.deepEqual(Object.keys(tData.assets[0]).sort(), ['index', 'name']);
  const series = Object.fromEntries(tData.temperature.series.map((s: { name: string; points: unknown[] }) => [s.name, s.points.length]));
  assert.deepEqual(
    series,
    { 'Supply air': 20, 'Return air': 10, 'Sensor t1': 1 },
    'flat and grouped reefer readings, the TEMPERATURE sensor, no humidity',
  );
  assert.ok(!JSON.stringify(tData).includes('51.9'));

  // Track and position of two assets: one at a time, by its place in the list.
  const both = ok(
    await c.call('POST', '/share-links', { assetIds: [reefer, truck], show: ['position', 'track'], expiresAt: inDays(1) }),
    201,
  ) as { url: string };
  const first = ok(await visit(`${both.url}/data`, ip), 200);
  assert.equal(first.asset, 0);
  assert.equal(first.track.points.length, 30);
  assert.deepEqual(first.track.points.at(-1), { time: first.assets[0].position.time, latitude: 51.929, longitude: 4.158 });
  const second = ok(await visit(`${both.url}/data?asset=1`, ip), 200);
  assert.equal(second.asset, 1);
  assert.equal(second.track.points.length, 1);
  bad(await visit(`${both.url}/data?asset=2`, ip), 404, '/asset', 'no third asset');
  const bothPage = await visit(`${both.url}?asset=1`, ip);
  assert.ok(bothPage.raw.includes('TRUCK') && bothPage.raw.includes('-33.86123'));

  // A moved asset drops out: its new owner's records are not the link's to show.
  const buyer = await customer(ta, 'share-buyer', { base: '/api/v1' });
  ok(await ta.call('PATCH', `/api/v1/assets/${truck}`, { token: ta.adminToken, body: { ownerId: buyer.ownerId } }), 200);
  const after = ok(await visit(`${both.url}/data`, ip), 200);
  assert.deepEqual(
    after.assets.map((a: { index: number }) => a.index),
    [0],
    'the moved truck is no longer shown',
  );
});

test('a track of more than sharePoints positions is thinned evenly, the newest kept', async () => {
  const c = await customer(ta, 'share-thin', { base: '/api/v1' });
  const asset = await c.asset('SHARE-THIN');
  const start = Date.now() - 3 * 3_600_000;
  const n = BOUNDS.sharePoints.value + 500;
  for (let i = 0; i < n; i += 1000) {
    const bulk = [];
    for (let k = i; k < Math.min(n, i + 1000); k++) {
      bulk.push({ assetId: asset, latitude: 10 + k / 10_000, longitude: 20, whenCreated: new Date(start + k * 5000).toISOString() });
    }
    ok(await c.call('POST', '/locations', bulk), 201);
  }
  const link = ok(await c.call('POST', '/share-links', { assetIds: [asset], show: ['track'], expiresAt: inDays(1) }), 201);
  const data = ok(await visit(`${link.url}/data`, address()), 200);
  const pts = data.track.points as { latitude: number }[];
  assert.ok(pts.length <= BOUNDS.sharePoints.value && pts.length > BOUNDS.sharePoints.value / 2, `${pts.length} points`);
  assert.equal(pts[0]!.latitude, 10);
  assert.equal(pts.at(-1)!.latitude, 10 + (n - 1) / 10_000, 'the newest kept');
});

test('a guessed or forged token is a 404, a revoked or expired link a 410; every answered use counted', async () => {
  const c = await customer(ta, 'share-uses', { base: '/api/v1' });
  const asset = await c.asset('SHARE-USES');
  const ip = address();
  for (const path of ['/share/abc', `/share/${crypto.randomBytes(32).toString('base64url')}`, '/share/x'.padEnd(60, 'x')]) {
    const r = await visit(path, ip);
    assert.equal(r.status, 404, path);
    assert.match(r.raw, /This link does not work/);
    const d = await visit(`${path}/data`, ip);
    bad(d, 404, undefined, `${path}/data`);
    assert.equal(d.body.code, 'NOT_FOUND');
  }
  const link = ok(await c.call('POST', '/share-links', { assetIds: [asset], show: ['position'], expiresAt: inDays(1) }), 201);
  for (let i = 0; i < 3; i++) assert.equal((await visit(link.url, ip)).status, 200);
  for (let i = 0; i < 2; i++) assert.equal((await visit(`${link.url}/data`, ip)).status, 200);
  const used = ok(await c.call('GET', `/share-links/${link.id}`), 200);
  assert.equal(used.uses, 5);
  assert.ok(Date.parse(used.lastUsedAt) > Date.now() - 60_000);

  ok(await c.call('DELETE', `/share-links/${link.id}`), 204);
  const gone = await visit(link.url, ip);
  assert.equal(gone.status, 410);
  assert.match(gone.raw, /This link no longer works/);
  assert.match(gone.raw, /revoked/);
  const goneData = await visit(`${link.url}/data`, ip);
  bad(goneData, 410, undefined, 'data of a revoked link');
  assert.equal(goneData.body.code, 'GONE');
  assert.equal(ok(await c.call('GET', `/share-links/${link.id}`), 200).uses, 5, 'a refused use counts nothing');

  // Expiring in 2 s: works until then, then 410, waited for (not slept).
  const brief = ok(
    await c.call('POST', '/share-links', { assetIds: [asset], show: ['position'], expiresAt: new Date(Date.now() + 2000).toISOString() }),
    201,
  );
  assert.equal((await visit(brief.url, ip)).status, 200);
  const expired = await waitFor(
    () => 'the link to expire',
    async () => {
      await new Promise((r) => setTimeout(r, 200));
      const r = await visit(brief.url, ip);
      assert.ok(r.status === 200 || r.status === 410, `${r.status}`);
      return r.status === 410 ? r : undefined;
    },
    15_000,
  );
  assert.match(expired.raw, /expired/);
  const after = ok(await c.call('GET', `/share-links/${brief.id}`), 200);
  assert.equal(after.status, 'expired');
});

test('a link answers SHARE_MAX_USES_PER_MINUTE uses a minute, whoever asks; an address SHARE_MAX_REQUESTS_PER_ADDRESS requests, whatever the token', async () => {
  const c = await customer(ta, 'share-limits', { base: '/api/v1' });
  const asset = await c.asset('SHARE-LIMITS');
  const link = ok(await c.call('POST', '/share-links', { assetIds: [asset], show: ['position'], expiresAt: inDays(1) }), 201);
  // A leaked link from many addresses.
  const statuses: number[] = [];
  let retry = '';
  for (let i = 0; i < USES_PER_MINUTE + 10; i++) {
    const r = await visit(link.url, address());
    statuses.push(r.status);
    if (r.status === 429) retry = String(r.headers['retry-after'] ?? '');
  }
  assert.equal(statuses.filter((s) => s === 200).length, USES_PER_MINUTE, statuses.join(','));
  assert.equal(statuses.filter((s) => s === 429).length, 10);
  assert.ok(Number(retry) >= 1 && Number(retry) <= 60, `Retry-After ${retry}`);
  assert.equal(ok(await c.call('GET', `/share-links/${link.id}`), 200).uses, USES_PER_MINUTE, 'refused uses not counted');

  // One address guessing: its budget, then 429 before any token is looked up.
  const ip = address();
  const seen: number[] = [];
  for (let i = 0; i < REQUESTS_PER_ADDRESS + 5; i++)
    seen.push((await visit(`/share/${crypto.randomBytes(32).toString('base64url')}`, ip)).status);
  assert.equal(seen.filter((s) => s === 404).length, REQUESTS_PER_ADDRESS);
  assert.deepEqual(seen.slice(REQUESTS_PER_ADDRESS), [429, 429, 429, 429, 429]);
  const json = await visit(`${link.url}/data`, ip);
  bad(json, 429, undefined, 'the data route too');
  assert.equal(json.body.code, 'RATE_LIMITED');
  assert.ok(json.headers['retry-after']);
});
