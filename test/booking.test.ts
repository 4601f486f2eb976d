// API guide 1, 3, 4 and 8: booking data. `type` is exactly the configured literal
// (BOOKING_DATA_TYPE, default MAERSK_V1); jsonData is any JSON up to 64 KiB; name at most 50 code
// points and unique within the owner; ownerId defaults to the caller's; parents see their children's.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { customer, startApp, type TestApp, ok, bad } from './helpers.js';

const ta = await startApp(undefined, { RATE_LIMIT_MAX: '100000', RATE_LIMIT_CONCURRENT: '1000' });
const TYPE = 'MAERSK_V1';

async function tenant(app: TestApp, label: string, opts: { parentId?: string; scopes?: ('read' | 'write')[] } = {}) {
  const c = await customer(app, label, opts);
  const { call } = c;
  const create = async (body: Record<string, unknown>): Promise<any> =>
    ok(await call('POST', '/api/v1/booking-data', body), 201, `create ${JSON.stringify(body).slice(0, 100)}`);
  const get = async (id: string): Promise<any> => ok(await call('GET', `/api/v1/booking-data/${id}`), 200, `get ${id}`);
  return { ...c, create, get };
}

test('type must be exactly the configured literal (default MAERSK_V1)', async () => {
  const a = await tenant(ta, 'type');
  const r = await a.call('POST', '/api/v1/booking-data', { type: TYPE, name: 'B-1', jsonData: { booking: 'MAEU123' } });
  const b = ok(r, 201, 'MAERSK_V1');
  assert.equal(r.headers.location, `${ta.url}/api/v1/booking-data/${b.id}`);
  assert.equal(b.type, TYPE);
  for (const type of ['HAPAG_V1', 'maersk_v1', 'MAERSK_V2', ' MAERSK_V1', 'MAERSK', '']) {
    bad(await a.call('POST', '/api/v1/booking-data', { type, name: `t-${type}` }), 400, '/type', `type ${JSON.stringify(type)}`);
  }
  bad(await a.call('POST', '/api/v1/booking-data', { name: 'no type' }), 400, '/type', 'type missing');
  bad(await a.call('POST', '/api/v1/booking-data', { type: 1 }), 400, '/type', 'type a number');
  bad(await a.call('PATCH', `/api/v1/booking-data/${b.id}`, { type: 'HAPAG_V1' }), 400, '/type', 'patch to another type');
  bad(await a.call('PUT', `/api/v1/booking-data/${b.id}`, { name: 'B-1' }), 400, '/type', 'put without type');

  // Another configured literal: it alone is accepted.
  const hapag = await startApp(undefined, { BOOKING_DATA_TYPE: 'HAPAG_V1' });
  const h = await tenant(hapag, 'hapag');
  assert.equal((await h.create({ type: 'HAPAG_V1', jsonData: [1] })).type, 'HAPAG_V1');
  bad(await h.call('POST', '/api/v1/booking-data', { type: 'MAERSK_V1' }), 400, '/type', 'MAERSK_V1 under HAPAG_V1');
  // The OpenAPI document names the one literal.
  const doc = ok(await hapag.call('GET', '/api/v1/openapi.json'), 200, 'openapi');
  assert.ok(JSON.stringify(doc).includes('"HAPAG_V1"') && !JSON.stringify(doc).includes('"MAERSK_V1"'));
});

test('jsonData: any JSON value round-trips; at most 64 KiB; NUL refused', async () => {
  const a = await tenant(ta, 'json');
  const values: unknown[] = [
    {
      booking: 'MAEU123',
      legs: [{ from: 'CNSHA', to: 'NLRTM', eta: '2026-11-22T06:04:15Z' }],
      reefer: true,
      setpoint: -18.5,
      seal: null,
      nested: { deep: { deeper: [1, 'two', false] } },
    },
    [1, 'two', { three: 3 }, null, [true]],
    'just a string with ümlauts and \u{1F6A2}',
    42,
    -0.5,
    0,
    true,
    false,
    '',
    {},
    [],
  ];
  for (const [i, jsonData] of values.entries()) {
    const b = await a.create({ type: TYPE, name: `v${i}`, jsonData });
    assert.deepEqual(b.jsonData, jsonData, `created ${JSON.stringify(jsonData)}`);
    assert.deepEqual((await a.get(b.id)).jsonData, jsonData, `read back ${JSON.stringify(jsonData)}`);
  }
  assert.equal((await a.create({ type: TYPE, name: 'absent' })).jsonData, null, 'absent reads null');
  assert.equal((await a.create({ type: TYPE, name: 'null', jsonData: null })).jsonData, null);
  // Key order and member names with odd characters survive.
  const odd = { 'a/b': 1, 'c~d': 2, '': 3, ' ': { ü: 4 } };
  assert.deepEqual((await a.create({ type: TYPE, jsonData: odd })).jsonData, odd);

  // 64 KiB of JSON: a string of 65,534 characters is exactly 65,536 bytes with its quotes.
  const exact = 'x'.repeat(64 * 1024 - 2);
  assert.equal((await a.create({ type: TYPE, name: 'exact', jsonData: exact })).jsonData.length, exact.length);
  bad(
    await a.call('POST', '/api/v1/booking-data', { type: TYPE, name: 'over', jsonData: `${exact}x` }),
    400,
    '/jsonData',
    '64 KiB + 1 byte',
  );
  // Bytes, not characters: 32,768 two-byte characters are over.
  bad(
    await a.call('POST', '/api/v1/booking-data', { type: TYPE, name: 'wide', jsonData: 'é'.repeat(32 * 1024) }),
    400,
    '/jsonData',
    'two-byte characters',
  );
  const big = { rows: Array.from({ length: 4000 }, (_, i) => ({ i, v: 'abcdefghij' })) };
  bad(await a.call('POST', '/api/v1/booking-data', { type: TYPE, name: 'big', jsonData: big }), 400, '/jsonData', 'a large object');
  const keep = await a.create({ type: TYPE, name: 'keep', jsonData: { a: 1 } });
  bad(await a.call('PATCH', `/api/v1/booking-data/${keep.id}`, { jsonData: `${exact}x` }), 400, '/jsonData', 'patch over 64 KiB');
  bad(await a.call('PUT', `/api/v1/booking-data/${keep.id}`, { type: TYPE, jsonData: [exact] }), 400, '/jsonData', 'put over 64 KiB');
  assert.deepEqual((await a.get(keep.id)).jsonData, { a: 1 }, 'unchanged');
  assert.equal((ok(await a.call('GET', '/api/v1/booking-data?name=over'), 200) as any[]).length, 0, 'nothing stored');

  // NUL anywhere inside jsonData (value or key) is a 400 naming where.
  bad(
    await a.call('POST', '/api/v1/booking-data', { type: TYPE, jsonData: { a: { b: ['ok', 'n\u0000l'] } } }),
    400,
    '/jsonData/a/b/1',
    'NUL in a value',
  );
  bad(await a.call('POST', '/api/v1/booking-data', { type: TYPE, jsonData: { 'k\u0000': 1 } }), 400, '/jsonData/k\u0000', 'NUL in a key');
  bad(await a.call('POST', '/api/v1/booking-data', { type: TYPE, jsonData: '\u0000' }), 400, '/jsonData', 'NUL string');
  bad(await a.call('POST', '/api/v1/booking-data', { type: TYPE, name: 'n\u0000' }), 400, '/name', 'NUL in name');
  bad(await a.call('PATCH', `/api/v1/booking-data/${keep.id}`, { jsonData: ['\u0000'] }), 400, '/jsonData/0', 'NUL in a patch');
  // Escaped text that is not NUL stays as it is.
  assert.deepEqual((await a.create({ type: TYPE, jsonData: { s: '\\u0000 is six characters' } })).jsonData, {
    s: '\\u0000 is six characters',
  });
});

test('name: at most 50 code points, unique within the owner, free across owners', async () => {
  const a = await tenant(ta, 'name');
  const b = await tenant(ta, 'name-other');
  const fifty = '\u{1F6A2}'.repeat(50); // 100 UTF-16 units
  assert.equal((await a.create({ type: TYPE, name: fifty })).name, fifty);
  bad(await a.call('POST', '/api/v1/booking-data', { type: TYPE, name: 'n'.repeat(51) }), 400, '/name', 'name 51');
  bad(await a.call('POST', '/api/v1/booking-data', { type: TYPE, name: '\u{1F6A2}'.repeat(51) }), 400, '/name', 'name 51 astral');
  bad(await a.call('POST', '/api/v1/booking-data', { type: TYPE, name: 5 }), 400, '/name', 'name a number');

  const first = await a.create({ type: TYPE, name: 'BKG-1', jsonData: { v: 1 } });
  const dup = await a.call('POST', '/api/v1/booking-data', { type: TYPE, name: 'BKG-1', jsonData: { v: 2 } });
  bad(dup, 409, '/name', 'same name, same owner');
  assert.equal(dup.body.code, 'NAME_TAKEN');
  assert.equal((await b.create({ type: TYPE, name: 'BKG-1' })).name, 'BKG-1', 'same name, another owner');
  assert.equal((await a.create({ type: TYPE, name: 'bkg-1' })).name, 'bkg-1', 'names are case-sensitive');
  // Unnamed records never collide.
  await a.create({ type: TYPE });
  await a.create({ type: TYPE, name: null });
  const second = await a.create({ type: TYPE, name: 'BKG-2' });
  bad(await a.call('PATCH', `/api/v1/booking-data/${second.id}`, { name: 'BKG-1' }), 409, '/name', 'rename onto a taken name');
  bad(await a.call('PUT', `/api/v1/booking-data/${second.id}`, { type: TYPE, name: 'BKG-1' }), 409, '/name', 'put onto a taken name');
  bad(await a.call('PATCH', `/api/v1/booking-data/${second.id}`, { name: 'x'.repeat(51) }), 400, '/name', 'patch name 51');
  assert.equal((await a.get(second.id)).name, 'BKG-2');
  assert.deepEqual(
    (ok(await a.call('GET', '/api/v1/booking-data?name=BKG-1'), 200) as any[]).map((x) => x.id),
    [first.id],
    'name filter',
  );
  // A name freed by a rename can be taken again.
  ok(await a.call('PATCH', `/api/v1/booking-data/${first.id}`, { name: 'BKG-1-old' }), 200);
  assert.equal((await a.create({ type: TYPE, name: 'BKG-1' })).name, 'BKG-1');
});

test("ownerId defaults to the caller's; a child's record is visible to the parent's key, not the other way; whoCreated set", async () => {
  const parent = await tenant(ta, 'parent');
  const child = await tenant(ta, 'child', { parentId: parent.ownerId });
  const stranger = await tenant(ta, 'stranger');
  const keyId = async (ownerId: string) =>
    (ok(await ta.call('GET', '/api/v1/api-keys', { token: ta.adminToken }), 200) as any[]).find((k) => k.ownerId === ownerId).id;

  const mine = await parent.create({ type: TYPE, name: 'P' });
  assert.equal(mine.ownerId, parent.ownerId, "defaults to the caller's owner");
  assert.equal(mine.whoCreated, `apikey:${await keyId(parent.ownerId)}`);
  assert.match(mine.id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
  assert.match(mine.whenCreated, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  assert.equal(mine.whenUpdated, mine.whenCreated);
  const childs = await child.create({ type: TYPE, name: 'P', jsonData: { c: 1 } });
  assert.equal(childs.ownerId, child.ownerId, 'same name under the child is fine');
  assert.equal(childs.whoCreated, `apikey:${await keyId(child.ownerId)}`);

  // The parent sees the child's record; the child never sees the parent's.
  assert.deepEqual(await parent.get(childs.id), childs);
  const listed = (ok(await parent.call('GET', '/api/v1/booking-data'), 200) as any[]).map((x) => x.id).sort();
  assert.deepEqual(listed, [mine.id, childs.id].sort());
  assert.deepEqual(
    (ok(await parent.call('GET', `/api/v1/booking-data?ownerId=${child.ownerId}`), 200) as any[]).map((x) => x.id),
    [childs.id],
  );
  bad(await child.call('GET', `/api/v1/booking-data/${mine.id}`), 404, undefined, 'child reads parent');
  bad(await child.call('PATCH', `/api/v1/booking-data/${mine.id}`, { name: 'x' }), 404, undefined, 'child patches parent');
  bad(await child.call('DELETE', `/api/v1/booking-data/${mine.id}`), 404, undefined, 'child deletes parent');
  assert.deepEqual(
    (ok(await child.call('GET', '/api/v1/booking-data'), 200) as any[]).map((x) => x.id),
    [childs.id],
  );
  for (const [m, body] of [['GET'], ['PATCH', { name: 'x' }], ['PUT', { type: TYPE }], ['DELETE']] as [string, unknown?][]) {
    bad(await stranger.call(m, `/api/v1/booking-data/${mine.id}`, body), 404, undefined, `stranger ${m}`);
  }
  bad(await stranger.call('GET', '/api/v1/booking-data/not-a-uuid'), 404, undefined, 'bad id');

  // The parent writes for its child; nobody writes for an owner it cannot see.
  const forChild = await parent.create({ type: TYPE, name: 'for-child', ownerId: child.ownerId });
  assert.equal(forChild.ownerId, child.ownerId);
  assert.equal(forChild.whoCreated, mine.whoCreated, 'whoCreated is the actor, not the owner');
  assert.equal((await child.get(forChild.id)).name, 'for-child');
  bad(
    await child.call('POST', '/api/v1/booking-data', { type: TYPE, ownerId: parent.ownerId }),
    404,
    '/ownerId',
    'child writes for parent',
  );
  bad(await child.call('POST', '/api/v1/booking-data', { type: TYPE, ownerId: 'nope' }), 400, '/ownerId', 'ownerId not a uuid');
  bad(
    await child.call('PATCH', `/api/v1/booking-data/${childs.id}`, { ownerId: parent.ownerId }),
    404,
    '/ownerId',
    'child moves a record to its parent',
  );
  const moved = ok(
    await parent.call('PATCH', `/api/v1/booking-data/${forChild.id}`, { ownerId: parent.ownerId }),
    200,
    'parent takes it over',
  );
  assert.equal(moved.ownerId, parent.ownerId);
  bad(await child.call('GET', `/api/v1/booking-data/${forChild.id}`), 404, undefined, 'gone from the child');
  // whoCreated and other read-only fields in a body are ignored.
  const ro = await parent.create({
    type: TYPE,
    name: 'ro',
    whoCreated: 'mallory',
    id: '00000000-0000-4000-8000-000000000000',
    whenCreated: '2000-01-01T00:00:00Z',
  });
  assert.equal(ro.whoCreated, mine.whoCreated);
  assert.notEqual(ro.id, '00000000-0000-4000-8000-000000000000');
  assert.notEqual(ro.whenCreated, '2000-01-01T00:00:00Z');
  // The operator's JWT is a user actor.
  const op = ok(await ta.call('POST', '/api/v1/booking-data', { token: ta.adminToken, body: { type: TYPE, ownerId: child.ownerId } }), 201);
  assert.match(op.whoCreated, /^user:/);
  // A read-only key reads but cannot write.
  const reader = await tenant(ta, 'reader', { parentId: parent.ownerId, scopes: ['read'] });
  bad(await reader.call('POST', '/api/v1/booking-data', { type: TYPE }), 403, undefined, 'read-only create');
  assert.equal((ok(await reader.call('GET', '/api/v1/booking-data'), 200) as any[]).length, 0);
});

test('PUT replaces, PATCH merges (RFC 7396, into jsonData too), DELETE removes', async () => {
  const a = await tenant(ta, 'verbs');
  const b = await a.create({
    type: TYPE,
    name: 'BKG',
    jsonData: { vessel: 'Emma', voyage: '123W', legs: [1, 2], cargo: { kind: 'reefer', setpoint: -18 } },
  });

  // PATCH: absent members are kept, null clears, objects merge recursively, arrays and scalars replace.
  let p = ok(
    await a.call('PATCH', `/api/v1/booking-data/${b.id}`, {
      jsonData: { voyage: '124E', legs: [3], cargo: { setpoint: -20, kind: null }, port: 'NLRTM' },
    }),
    200,
    'patch',
  );
  assert.deepEqual(p.jsonData, { vessel: 'Emma', voyage: '124E', legs: [3], cargo: { setpoint: -20 }, port: 'NLRTM' });
  assert.equal(p.name, 'BKG');
  assert.equal(p.type, TYPE);
  assert.equal(p.whoCreated, b.whoCreated);
  assert.equal(p.whenCreated, b.whenCreated);
  p = ok(await a.call('PATCH', `/api/v1/booking-data/${b.id}`, { name: 'BKG renamed' }), 200, 'patch name');
  assert.equal(p.name, 'BKG renamed');
  assert.deepEqual(p.jsonData, { vessel: 'Emma', voyage: '124E', legs: [3], cargo: { setpoint: -20 }, port: 'NLRTM' }, 'jsonData kept');
  p = ok(await a.call('PATCH', `/api/v1/booking-data/${b.id}`, { jsonData: ['now', 'an', 'array'] }), 200, 'patch with an array');
  assert.deepEqual(p.jsonData, ['now', 'an', 'array']);
  p = ok(
    await a.call('PATCH', `/api/v1/booking-data/${b.id}`, { jsonData: { back: 'to an object' } }),
    200,
    'patch an array with an object',
  );
  assert.deepEqual(p.jsonData, { back: 'to an object' });
  p = ok(await a.call('PATCH', `/api/v1/booking-data/${b.id}`, { name: null, jsonData: null }), 200, 'patch nulls');
  assert.equal(p.name, null);
  assert.equal(p.jsonData, null);
  p = ok(await a.call('PATCH', `/api/v1/booking-data/${b.id}`, { jsonData: { x: { y: null }, z: 1 } }), 200, 'patch onto null');
  assert.deepEqual(p.jsonData, { x: {}, z: 1 }, 'nulls inside a patch onto nothing are dropped');
  p = ok(await a.call('PATCH', `/api/v1/booking-data/${b.id}`, {}), 200, 'empty patch');
  assert.deepEqual([p.name, p.jsonData], [null, { x: {}, z: 1 }]);
  assert.deepEqual(await a.get(b.id), p);

  // PUT: every writable field replaced; left out means cleared.
  p = ok(await a.call('PUT', `/api/v1/booking-data/${b.id}`, { type: TYPE, name: 'PUT', jsonData: 'text' }), 200, 'put');
  assert.deepEqual([p.name, p.jsonData, p.ownerId], ['PUT', 'text', a.ownerId]);
  p = ok(await a.call('PUT', `/api/v1/booking-data/${b.id}`, { type: TYPE }), 200, 'put minimal');
  assert.deepEqual([p.name, p.jsonData], [null, null]);
  assert.ok(Date.parse(p.whenUpdated) >= Date.parse(b.whenUpdated));

  const del = await a.call('DELETE', `/api/v1/booking-data/${b.id}`);
  assert.equal(del.status, 204, del.raw);
  assert.equal(del.raw, '');
  bad(await a.call('GET', `/api/v1/booking-data/${b.id}`), 404, undefined, 'deleted');
  bad(await a.call('DELETE', `/api/v1/booking-data/${b.id}`), 404, undefined, 'deleted twice');
  bad(await a.call('PATCH', `/api/v1/booking-data/${b.id}`, { name: 'x' }), 404, undefined, 'patch deleted');
});

test('a page of booking data ends at pageBytes of its jsonData (fewer than limit), and its Link goes on: every item once', async () => {
  const a = await tenant(ta, 'pages');
  const ids = new Set<string>();
  for (let i = 0; i < 20; i++) ids.add((await a.create({ type: TYPE, name: `P-${i}`, jsonData: { i, text: 'z'.repeat(60_000) } })).id);
  const sizes: number[] = [];
  const seen: string[] = [];
  let url: string | undefined = '/api/v1/booking-data?limit=1000';
  while (url) {
    const r = await a.call('GET', url);
    const items = ok(r, 200, url) as { id: string }[];
    sizes.push(items.length);
    seen.push(...items.map((x) => x.id));
    const link = /<([^>]+)>;\s*rel="next"/.exec(String(r.headers.link ?? ''))?.[1];
    url = link ? new URL(link).pathname + new URL(link).search : undefined;
  }
  // Items that start within 1 MiB of jsonData: 18 of about 60 KB each, then the other 2.
  assert.deepEqual(sizes, [18, 2]);
  assert.equal(new Set(seen).size, seen.length, 'no item twice');
  assert.deepEqual(new Set(seen), ids);
});
