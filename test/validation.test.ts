// Asset and owner field limits (API guide 1, 3, 5 and 8): every size is counted
// in Unicode code points; too long, wrong type, missing or NUL-bearing values are a 400 whose `field`
// is the exact JSON pointer, and a refused request stores nothing. Unique names answer 409. PUT
// replaces, PATCH merges (null clears). Lists page by keyset with a Link rel="next" header.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { atEnd, bad, basic, OPERATOR, ok, ownerWithKey, startApp, type Res } from './helpers.js';
import { Receiver } from './receiver.js';

// One service for the whole file (PGlite takes seconds to start); every test makes its own owners.
// Integrations made here point at a local address; this process delivers nothing (DELIVERY_ENABLED).
const ta = await startApp(undefined, {
  RATE_LIMIT_MAX: '100000',
  PUSH_ALLOW_HTTP: 'true',
  PUSH_ALLOWED_NETWORKS: '127.0.0.0/8',
  DELIVERY_ENABLED: 'false',
});
const admin = ta.adminToken;

const SMILE = '\u{1F600}'; // one code point, two UTF-16 units, four UTF-8 bytes
const ascii = (n: number, c = 'a') => c.repeat(n);
const astral = (n: number) => SMILE.repeat(n);

function assertRejected(r: Res, field: string, what: string) {
  assert.equal(r.status, 400, `${what}: expected 400, got ${r.status} ${r.raw}`);
  assert.equal(typeof r.body?.error, 'string', what);
  assert.equal(typeof r.body?.message, 'string', what);
  assert.equal(r.body.code, 'VALIDATION_FAILED', what);
  assert.equal(r.body.field, field, `${what}: field`);
}

/** How many assets and owners exist service-wide (the operator sees all). */
async function counts() {
  const assets = await ta.call('GET', '/api/v1/assets?limit=1000', { token: admin });
  const owners = await ta.call('GET', '/api/v1/owners?limit=1000', { token: admin });
  assert.equal(assets.status, 200);
  assert.equal(owners.status, 200);
  return { assets: assets.body.length as number, owners: owners.body.length as number };
}

/** Sends a request that must be refused with a 400 on `field`, and checks that nothing was stored. */
async function refuses(method: string, path: string, token: string, body: unknown, field: string, what: string) {
  const before = await counts();
  const r = await ta.call(method, path, { token, body });
  assertRejected(r, field, what);
  assert.deepEqual(await counts(), before, `${what}: nothing stored`);
}

interface Limit {
  field: string;
  max: number;
  /** Where the stored value shows in the response, when not under the same name. */
  shownAs?: string;
}

const ASSET_LIMITS: Limit[] = [
  { field: 'name', max: 255 },
  { field: 'note', max: 255 },
  { field: 'tags', max: 255 },
  { field: 'assetTags', max: 255, shownAs: 'tags' },
  { field: 'boxId', max: 36 },
];
const OWNER_LIMITS: Limit[] = [
  { field: 'name', max: 255 },
  { field: 'note', max: 255 },
];

let n = 0;
const uniq = (p: string) => `${p}-${++n}`;

test('asset string fields accept their size in code points (ASCII or astral emoji) and refuse one more, naming the field', async () => {
  const o = await ownerWithKey(ta, 'lim-assets');
  const existing = (await ta.call('POST', '/api/v1/assets', { token: o.key, body: { name: 'lim-existing', note: 'keep' } })).body;
  for (const { field, max, shownAs } of ASSET_LIMITS) {
    for (const [kind, okValue, tooLong] of [
      ['ascii', ascii(max, field === 'name' ? 'n' : 'a'), ascii(max + 1)],
      ['astral', astral(max), astral(max + 1)],
      ['mixed', ascii(max - 1, 'm') + SMILE, ascii(max) + SMILE],
    ] as const) {
      const body = field === 'name' ? { name: okValue } : { name: uniq(`lim-${field}-${kind}`), [field]: okValue };
      const r = await ta.call('POST', '/api/v1/assets', { token: o.key, body });
      assert.equal(r.status, 201, `${field} of ${max} ${kind} code points: ${r.raw}`);
      assert.equal(r.body[shownAs ?? field], okValue, `${field} stored as sent`);
      const got = await ta.call('GET', `/api/v1/assets/${r.body.id}`, { token: o.key });
      assert.equal(got.body[shownAs ?? field], okValue, `${field} read back as sent`);
      const bad = field === 'name' ? { name: tooLong } : { name: uniq('lim-bad'), [field]: tooLong };
      await refuses('POST', '/api/v1/assets', o.key, bad, `/${field}`, `create: ${field} of ${max + 1} ${kind} code points`);
      // The same on update: refused, and the asset unchanged.
      await refuses(
        'PATCH',
        `/api/v1/assets/${existing.id}`,
        o.key,
        { [field]: tooLong },
        `/${field}`,
        `patch: ${field} too long (${kind})`,
      );
      await refuses(
        'PUT',
        `/api/v1/assets/${existing.id}`,
        o.key,
        { name: 'lim-existing', [field]: tooLong },
        `/${field}`,
        `put: ${field} too long (${kind})`,
      );
    }
  }
  assert.deepEqual(
    (await ta.call('GET', `/api/v1/assets/${existing.id}`, { token: o.key })).body,
    existing,
    'refused updates changed nothing',
  );
});

test('asset fields of the wrong type, a missing or empty name, a non-uuid ownerId and a non-object body are 400s naming the field', async () => {
  const o = await ownerWithKey(ta, 'types-assets');
  const existing = (await ta.call('POST', '/api/v1/assets', { token: o.key, body: { name: 'types-existing' } })).body;
  const cases: [unknown, string][] = [
    [{}, '/name'],
    [{ note: 'no name' }, '/name'],
    [{ name: '' }, '/name'],
    [{ name: null }, '/name'],
    [{ name: 42 }, '/name'],
    [{ name: ['a'] }, '/name'],
    [{ name: { x: 1 } }, '/name'],
    [{ name: 'ok', note: 7 }, '/note'],
    [{ name: 'ok', note: true }, '/note'],
    [{ name: 'ok', tags: 1 }, '/tags'],
    [{ name: 'ok', tags: ['a', 'b'] }, '/tags'],
    [{ name: 'ok', assetTags: 2 }, '/assetTags'],
    [{ name: 'ok', boxId: 3 }, '/boxId'],
    [{ name: 'ok', disabled: 'true' }, '/disabled'],
    [{ name: 'ok', disabled: 'false' }, '/disabled'],
    [{ name: 'ok', disabled: 1 }, '/disabled'],
    [{ name: 'ok', disabled: null }, '/disabled'],
    [{ name: 'ok', ownerId: 'not-a-uuid' }, '/ownerId'],
    [{ name: 'ok', ownerId: 12 }, '/ownerId'],
    [[{ name: 'ok' }], ''],
    ['ok', ''],
    [5, ''],
  ];
  for (const [body, field] of cases) {
    await refuses('POST', '/api/v1/assets', o.key, body, field, `create ${JSON.stringify(body)}`);
  }
  // PUT needs the name too; PATCH does not, but checks the types of what it gets.
  await refuses('PUT', `/api/v1/assets/${existing.id}`, o.key, { note: 'x' }, '/name', 'put without name');
  await refuses('PATCH', `/api/v1/assets/${existing.id}`, o.key, { name: null }, '/name', 'patch name null');
  await refuses('PATCH', `/api/v1/assets/${existing.id}`, o.key, { name: '' }, '/name', 'patch name empty');
  await refuses('PATCH', `/api/v1/assets/${existing.id}`, o.key, { disabled: 'yes' }, '/disabled', 'patch disabled string');
  await refuses('PATCH', `/api/v1/assets/${existing.id}`, o.key, { note: 1 }, '/note', 'patch note number');
  assert.deepEqual((await ta.call('GET', `/api/v1/assets/${existing.id}`, { token: o.key })).body, existing);
  // Booleans proper pass.
  for (const disabled of [true, false]) {
    const r = await ta.call('POST', '/api/v1/assets', { token: o.key, body: { name: uniq('types-bool'), disabled } });
    assert.equal(r.status, 201, r.raw);
    assert.equal(r.body.disabled, disabled);
  }
});

test('owner fields: name and note sizes in code points, disabled boolean, ownerId uuid, name required', async () => {
  const parent = (await ta.call('POST', '/api/v1/owners', { token: admin, body: { name: 'olim-parent' } })).body;
  const existing = (
    await ta.call('POST', '/api/v1/owners', { token: admin, body: { name: 'olim-existing', note: 'keep', ownerId: parent.id } })
  ).body;
  for (const { field, max } of OWNER_LIMITS) {
    for (const [kind, okValue, tooLong] of [
      ['ascii', ascii(max, field === 'name' ? 'N' : 'a'), ascii(max + 1)],
      ['astral', astral(max), astral(max + 1)],
    ] as const) {
      const body = field === 'name' ? { name: okValue } : { name: uniq(`olim-${field}-${kind}`), [field]: okValue };
      const r = await ta.call('POST', '/api/v1/owners', { token: admin, body });
      assert.equal(r.status, 201, `${field} of ${max} ${kind} code points: ${r.raw}`);
      assert.equal(r.body[field], okValue);
      assert.equal((await ta.call('GET', `/api/v1/owners/${r.body.id}`, { token: admin })).body[field], okValue);
      const bad = field === 'name' ? { name: tooLong } : { name: uniq('olim-bad'), [field]: tooLong };
      await refuses('POST', '/api/v1/owners', admin, bad, `/${field}`, `create owner: ${field} of ${max + 1} ${kind}`);
      await refuses('PATCH', `/api/v1/owners/${existing.id}`, admin, { [field]: tooLong }, `/${field}`, `patch owner: ${field} too long`);
      await refuses(
        'PUT',
        `/api/v1/owners/${existing.id}`,
        admin,
        { name: 'olim-existing', ownerId: parent.id, [field]: tooLong },
        `/${field}`,
        `put owner: ${field}`,
      );
    }
  }
  const cases: [unknown, string][] = [
    [{}, '/name'],
    [{ note: 'no name' }, '/name'],
    [{ name: '' }, '/name'],
    [{ name: 1 }, '/name'],
    [{ name: 'olim-x', note: 2 }, '/note'],
    [{ name: 'olim-x', disabled: 'true' }, '/disabled'],
    [{ name: 'olim-x', disabled: 0 }, '/disabled'],
    [{ name: 'olim-x', ownerId: 'parent' }, '/ownerId'],
    [{ name: 'olim-x', ownerId: 7 }, '/ownerId'],
    [{ name: 'olim-x', ownerId: `${parent.id}0` }, '/ownerId'],
  ];
  for (const [body, field] of cases) await refuses('POST', '/api/v1/owners', admin, body, field, `create owner ${JSON.stringify(body)}`);
  await refuses('PUT', `/api/v1/owners/${existing.id}`, admin, { note: 'x' }, '/name', 'put owner without name');
  await refuses('PATCH', `/api/v1/owners/${existing.id}`, admin, { disabled: 'no' }, '/disabled', 'patch owner disabled string');
  await refuses('PATCH', `/api/v1/owners/${existing.id}`, admin, { ownerId: 'x' }, '/ownerId', 'patch owner ownerId not a uuid');
  assert.deepEqual(
    (await ta.call('GET', `/api/v1/owners/${existing.id}`, { token: admin })).body,
    existing,
    'refused updates changed nothing',
  );
  // A well-formed but unknown parent is a 404 naming /ownerId, and nothing is stored.
  const before = await counts();
  const ghost = await ta.call('POST', '/api/v1/owners', {
    token: admin,
    body: { name: 'olim-orphan', ownerId: '00000000-0000-4000-8000-000000000000' },
  });
  assert.equal(ghost.status, 404, ghost.raw);
  assert.equal(ghost.body.field, '/ownerId');
  assert.deepEqual(await counts(), before);
  // disabled defaults to false when absent (API guide 3) and takes a boolean.
  const d = await ta.call('POST', '/api/v1/owners', { token: admin, body: { name: 'olim-default' } });
  assert.equal(d.body.disabled, false);
  assert.equal((await ta.call('PATCH', `/api/v1/owners/${d.body.id}`, { token: admin, body: { disabled: true } })).body.disabled, true);
});

test('a NUL character anywhere in a body or query string is a 400 naming where, and nothing is stored', async () => {
  const o = await ownerWithKey(ta, 'nul-assets');
  const existing = (await ta.call('POST', '/api/v1/assets', { token: o.key, body: { name: 'nul-existing' } })).body;
  const NUL = '\u0000';
  const assetCases: [unknown, string][] = [
    [{ name: `a${NUL}b` }, '/name'],
    [{ name: NUL }, '/name'],
    [{ name: 'nul-1', note: `${NUL}` }, '/note'],
    [{ name: 'nul-2', tags: `a,${NUL}` }, '/tags'],
    [{ name: 'nul-3', assetTags: `x${NUL}` }, '/assetTags'],
    [{ name: 'nul-4', boxId: `B${NUL}` }, '/boxId'],
    [{ name: 'nul-5', unknownExtra: `ignored but ${NUL}` }, '/unknownExtra'],
    [{ name: 'nul-6', nested: { deep: ['ok', `x${NUL}`] } }, '/nested/deep/1'],
    [{ name: 'nul-7', [`key${NUL}`]: 'v' }, `/key${NUL}`],
  ];
  for (const [body, field] of assetCases) {
    await refuses('POST', '/api/v1/assets', o.key, body, field, `create with NUL at ${JSON.stringify(field)}`);
  }
  await refuses('PATCH', `/api/v1/assets/${existing.id}`, o.key, { note: `x${NUL}` }, '/note', 'patch note with NUL');
  await refuses('PUT', `/api/v1/assets/${existing.id}`, o.key, { name: `nul${NUL}` }, '/name', 'put name with NUL');
  await refuses('POST', '/api/v1/owners', admin, { name: `own${NUL}er` }, '/name', 'owner name with NUL');
  await refuses('POST', '/api/v1/owners', admin, { name: 'nul-owner', note: NUL }, '/note', 'owner note with NUL');
  const q = await ta.call('GET', '/api/v1/assets?name=a%00b', { token: o.key });
  assertRejected(q, '/name', 'NUL in a query string');
  assert.deepEqual((await ta.call('GET', `/api/v1/assets/${existing.id}`, { token: o.key })).body, existing);
});

test('asset names are unique within their owner (409 NAME_TAKEN on /name), free across owners; owner names are unique service-wide', async () => {
  const o1 = await ownerWithKey(ta, 'uniq-1');
  const o2 = await ownerWithKey(ta, 'uniq-2');
  const first = await ta.call('POST', '/api/v1/assets', { token: o1.key, body: { name: 'Reefer 7' } });
  assert.equal(first.status, 201);
  const other = (await ta.call('POST', '/api/v1/assets', { token: o1.key, body: { name: 'Reefer 8' } })).body;
  let before = await counts();
  const dup = await ta.call('POST', '/api/v1/assets', { token: o1.key, body: { name: 'Reefer 7', note: 'second' } });
  assert.equal(dup.status, 409, dup.raw);
  assert.equal(dup.body.code, 'NAME_TAKEN');
  assert.equal(dup.body.field, '/name');
  assert.equal(typeof dup.body.error, 'string');
  assert.equal(typeof dup.body.message, 'string');
  assert.deepEqual(await counts(), before, 'nothing stored');
  // Renaming onto a taken name is the same 409; the asset keeps its name.
  for (const method of ['PATCH', 'PUT']) {
    const r = await ta.call(method, `/api/v1/assets/${other.id}`, { token: o1.key, body: { name: 'Reefer 7' } });
    assert.equal(r.status, 409, `${method}: ${r.raw}`);
    assert.equal(r.body.code, 'NAME_TAKEN');
    assert.equal(r.body.field, '/name');
  }
  assert.equal((await ta.call('GET', `/api/v1/assets/${other.id}`, { token: o1.key })).body.name, 'Reefer 8');
  // Another owner may use the same name, also when its parent's key creates it there.
  assert.equal((await ta.call('POST', '/api/v1/assets', { token: o2.key, body: { name: 'Reefer 7' } })).status, 201);
  // Owners: one name in the whole service, whatever the parent.
  const p = (await ta.call('POST', '/api/v1/owners', { token: admin, body: { name: 'uniq-parent' } })).body;
  const taken = (await ta.call('POST', '/api/v1/owners', { token: admin, body: { name: 'Acme Logistics' } })).body;
  before = await counts();
  for (const body of [{ name: 'Acme Logistics' }, { name: 'Acme Logistics', ownerId: p.id }]) {
    const r = await ta.call('POST', '/api/v1/owners', { token: admin, body });
    assert.equal(r.status, 409, r.raw);
    assert.equal(r.body.code, 'NAME_TAKEN');
    assert.equal(r.body.field, '/name');
  }
  assert.deepEqual(await counts(), before, 'nothing stored');
  const r = await ta.call('PATCH', `/api/v1/owners/${p.id}`, { token: admin, body: { name: 'Acme Logistics' } });
  assert.equal(r.status, 409, r.raw);
  assert.equal(r.body.code, 'NAME_TAKEN');
  assert.equal(r.body.field, '/name');
  assert.equal((await ta.call('GET', `/api/v1/owners/${taken.id}`, { token: admin })).body.name, 'Acme Logistics');
});

test('PATCH merges (null clears an optional field, absent keeps it); PUT replaces (absent optional fields are cleared); assetTags is an alias of tags', async () => {
  const o = await ownerWithKey(ta, 'merge-assets');
  const full = { name: 'merge-1', note: 'a note', tags: 'cold,fast', boxId: 'BOX-1', disabled: true };
  const a = (await ta.call('POST', '/api/v1/assets', { token: o.key, body: full })).body;
  assert.deepEqual([a.note, a.tags, a.boxId, a.disabled], ['a note', 'cold,fast', 'BOX-1', true]);

  let r = await ta.call('PATCH', `/api/v1/assets/${a.id}`, { token: o.key, body: { note: null } });
  assert.equal(r.status, 200, r.raw);
  assert.deepEqual([r.body.name, r.body.note, r.body.tags, r.body.boxId, r.body.disabled], ['merge-1', null, 'cold,fast', 'BOX-1', true]);
  r = await ta.call('PATCH', `/api/v1/assets/${a.id}`, { token: o.key, body: {} });
  assert.deepEqual(
    [r.body.name, r.body.note, r.body.tags, r.body.boxId, r.body.disabled],
    ['merge-1', null, 'cold,fast', 'BOX-1', true],
    'empty patch keeps all',
  );
  r = await ta.call('PATCH', `/api/v1/assets/${a.id}`, { token: o.key, body: { tags: null, boxId: null } });
  assert.deepEqual([r.body.tags, r.body.boxId, r.body.disabled], [null, null, true]);

  // PUT: every writable field replaced; what is left out is cleared or back to its default.
  r = await ta.call('PUT', `/api/v1/assets/${a.id}`, { token: o.key, body: full });
  assert.deepEqual([r.body.note, r.body.tags, r.body.boxId, r.body.disabled], ['a note', 'cold,fast', 'BOX-1', true]);
  r = await ta.call('PUT', `/api/v1/assets/${a.id}`, { token: o.key, body: { name: 'merge-1b' } });
  assert.equal(r.status, 200, r.raw);
  assert.deepEqual([r.body.name, r.body.note, r.body.tags, r.body.boxId, r.body.disabled], ['merge-1b', null, null, null, false]);
  assert.deepEqual((await ta.call('GET', `/api/v1/assets/${a.id}`, { token: o.key })).body, r.body, 'stored as answered');

  // assetTags (the key published sample payloads use) on create and on patch, shown as tags.
  const t = await ta.call('POST', '/api/v1/assets', { token: o.key, body: { name: 'merge-2', assetTags: 'reefer,40ft' } });
  assert.equal(t.status, 201, t.raw);
  assert.equal(t.body.tags, 'reefer,40ft');
  r = await ta.call('PATCH', `/api/v1/assets/${t.body.id}`, { token: o.key, body: { assetTags: 'dry' } });
  assert.equal(r.body.tags, 'dry');
  r = await ta.call('PATCH', `/api/v1/assets/${t.body.id}`, { token: o.key, body: { note: 'keeps tags' } });
  assert.equal(r.body.tags, 'dry');
  r = await ta.call('PATCH', `/api/v1/assets/${t.body.id}`, { token: o.key, body: { assetTags: null } });
  assert.equal(r.body.tags, null);
  assert.equal((await ta.call('GET', `/api/v1/assets/${t.body.id}`, { token: o.key })).body.tags, null);

  // Owners: the same rules (by the operator).
  const ow = (await ta.call('POST', '/api/v1/owners', { token: admin, body: { name: 'merge-owner', note: 'n', disabled: true } })).body;
  r = await ta.call('PATCH', `/api/v1/owners/${ow.id}`, { token: admin, body: { note: null } });
  assert.deepEqual([r.body.name, r.body.note, r.body.disabled], ['merge-owner', null, true]);
  r = await ta.call('PATCH', `/api/v1/owners/${ow.id}`, { token: admin, body: { note: 'again' } });
  r = await ta.call('PUT', `/api/v1/owners/${ow.id}`, { token: admin, body: { name: 'merge-owner' } });
  assert.deepEqual([r.body.name, r.body.note, r.body.disabled], ['merge-owner', null, false]);
});

// ---- lists ---------------------------------------------------------------------------------------

const BASE_US = BigInt(Date.parse('2025-03-01T00:00:00Z')) * 1000n;
/** Microsecond offset of asset i: groups of three, two sharing a time exactly, the third 1 µs later. */
const offsetUs = (i: number) => BigInt(Math.floor(i / 3)) * 1_000_000n + (i % 3 === 2 ? 1n : 0n);
const isoUs = (us: bigint) => {
  const ms = us / 1000n;
  const micro = (us % 1_000_000n).toString().padStart(6, '0');
  return new Date(Number(ms)).toISOString().replace(/\.\d{3}Z$/, `.${micro}Z`);
};

test('paging with limit follows Link rel="next" to the end: every asset once, ascending by default, descending on request', async () => {
  const o = await ownerWithKey(ta, 'paging');
  const made: { id: string; us: bigint }[] = [];
  for (let i = 0; i < 25; i++) {
    const r = await ta.call('POST', '/api/v1/assets', { token: o.key, body: { name: `page-${String(i).padStart(2, '0')}` } });
    assert.equal(r.status, 201);
    made.push({ id: r.body.id, us: offsetUs(i) });
  }
  // Exact creation times with ties and 1 µs steps, so the keyset must use the full precision and the id.
  for (const m of made) {
    await ta.app.services.db.query(
      `UPDATE assets SET when_created = timestamptz 'epoch' + $2::int8 * interval '1 microsecond' WHERE id = $1`,
      [m.id, (BASE_US + m.us).toString()],
    );
  }
  const asc = [...made].sort((x, y) => (x.us === y.us ? (x.id < y.id ? -1 : 1) : x.us < y.us ? -1 : 1)).map((m) => m.id);

  async function walk(first: string) {
    const seen: string[] = [];
    const sizes: number[] = [];
    let next: string | undefined = first;
    while (next) {
      const r = await ta.call('GET', next, { token: o.key });
      assert.equal(r.status, 200, `${next}: ${r.raw}`);
      seen.push(...r.body.map((a: { id: string }) => a.id));
      sizes.push(r.body.length);
      const link = r.headers.link as string | undefined;
      if (!link) break;
      const m = /^<([^>]+)>; rel="next"$/.exec(link);
      assert.ok(m, `Link header shape: ${link}`);
      assert.ok(m[1]!.startsWith(`${ta.url}/api/v1/assets?`), `absolute Link to the same list: ${m[1]}`);
      const u = new URL(m[1]!);
      assert.equal(u.searchParams.get('limit'), new URL(first, ta.url).searchParams.get('limit'), 'the next link keeps the query');
      next = u.pathname + u.search;
      assert.ok(sizes.length < 10, 'paging terminates');
    }
    return { seen, sizes };
  }
  const up = await walk('/api/v1/assets?limit=10');
  assert.deepEqual(up.sizes, [10, 10, 5]);
  assert.deepEqual(up.seen, asc, 'ascending (whenCreated, id), each exactly once');
  assert.deepEqual((await walk('/api/v1/assets?limit=10&order=asc')).seen, asc);
  const down = await walk('/api/v1/assets?limit=10&order=desc');
  assert.deepEqual(down.sizes, [10, 10, 5]);
  assert.deepEqual(down.seen, [...asc].reverse(), 'descending, each exactly once');
  // A page size that divides the total: the last full page has no next link.
  assert.deepEqual((await walk('/api/v1/assets?limit=5')).sizes, [5, 5, 5, 5, 5]);
  assert.deepEqual((await walk('/api/v1/assets?limit=1000')).sizes, [25]);

  // from is inclusive, to exclusive, to the microsecond; offsets in the input are honoured.
  const between = (from: bigint | null, to: bigint | null) =>
    asc.filter((id) => {
      const us = made.find((m) => m.id === id)!.us;
      return (from === null || us >= from) && (to === null || us < to);
    });
  const q = (from: bigint | null, to: bigint | null, extra = '') =>
    `/api/v1/assets?limit=4${from === null ? '' : `&from=${encodeURIComponent(isoUs(BASE_US + from))}`}${to === null ? '' : `&to=${encodeURIComponent(isoUs(BASE_US + to))}`}${extra}`;
  for (const [from, to] of [
    [3_000_000n, 6_000_000n], // whole seconds: group 3 and 4 (and their +1 µs members)
    [3_000_001n, 6_000_001n], // starts at a +1 µs member, ends just after group 6's tie
    [0n, 1n],
    [null, 2_000_000n],
    [7_000_000n, null],
    [5_000_000n, 5_000_000n], // empty
  ] as [bigint | null, bigint | null][]) {
    const want = between(from, to);
    assert.deepEqual((await walk(q(from, to))).seen, want, `from ${from} to ${to}`);
    assert.deepEqual((await walk(q(from, to, '&order=desc'))).seen, [...want].reverse(), `from ${from} to ${to} desc`);
  }
  // Same instant written with an offset.
  const plus2 = (
    await ta.call(
      'GET',
      `/api/v1/assets?from=${encodeURIComponent('2025-03-01T02:00:04+02:00')}&to=${encodeURIComponent('2025-03-01T02:00:05+02:00')}`,
      { token: o.key },
    )
  ).body;
  assert.deepEqual(
    plus2.map((a: { id: string }) => a.id),
    between(4_000_000n, 5_000_000n),
  );
});

test('bad paging parameters and bad or tampered cursors are 400s', async () => {
  const o = await ownerWithKey(ta, 'badcursor');
  for (let i = 0; i < 3; i++) await ta.call('POST', '/api/v1/assets', { token: o.key, body: { name: `bc-${i}` } });
  const first = await ta.call('GET', '/api/v1/assets?limit=1', { token: o.key });
  const good = new URL(/<([^>]+)>/.exec(String(first.headers.link))![1]!).searchParams.get('cursor')!;
  assert.equal((await ta.call('GET', `/api/v1/assets?limit=1&cursor=${good}`, { token: o.key })).status, 200, 'a real cursor works');

  const b64 = (v: unknown) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');
  const decoded = JSON.parse(Buffer.from(good, 'base64url').toString());
  for (const [what, cursor] of [
    ['garbage', 'not a cursor!'],
    ['not JSON', b64('hello')],
    ['empty object', b64({})],
    ['truncated', good.slice(0, -4)],
    ['id not a uuid', b64({ ...decoded, i: "x' OR 1=1 --" })],
    ['time not digits', b64({ ...decoded, t: '1e9' })],
    ['time out of range', b64({ ...decoded, t: '99999999999999999999' })],
    ['bad order', b64({ ...decoded, o: 'sideways' })],
  ] as const) {
    const r = await ta.call('GET', `/api/v1/assets?limit=1&cursor=${encodeURIComponent(cursor)}`, { token: o.key });
    assert.equal(r.status, 400, `${what}: ${r.raw}`);
    assert.equal(r.body.code, 'BAD_CURSOR', what);
    assert.equal(r.body.field, '/cursor', what);
  }
  for (const [query, field] of [
    ['limit=0', '/limit'],
    ['limit=1001', '/limit'],
    ['limit=ten', '/limit'],
    ['order=up', '/order'],
    ['from=yesterday', '/from'],
    ['to=2025-13-01T00:00:00Z', '/to'],
  ] as const) {
    assertRejected(await ta.call('GET', `/api/v1/assets?${query}`, { token: o.key }), field, query);
  }
});

// ---- unknown fields, ignored response fields, enum messages (API guide 1) ----------------------

/** A 400 naming `field` whose message names the unknown member. */
function assertUnknown(r: Res, field: string, what: string) {
  assertRejected(r, field, what);
  const name = field.slice(field.lastIndexOf('/') + 1);
  assert.match(r.body.message, new RegExp(`${name} is not a known field`), `${what}: message names the field`);
}

const integrationBody = (ownerId: string, extra: Record<string, unknown> = {}) => ({
  name: uniq('val-int'),
  channel: 'webhook',
  ownerIds: [ownerId],
  destination: 'http://127.0.0.1:9/hook',
  ...extra,
});

test('an unknown top-level field is a 400 naming it, on create, PUT and PATCH of several resources, and nothing is stored', async () => {
  const o = await ownerWithKey(ta, 'unk-top');
  const asset = ok(await ta.call('POST', '/api/v1/assets', { token: o.key, body: { name: 'unk-asset', note: 'kept' } }), 201);

  // Assets and owners: create, replace and patch; nothing stored, nothing changed.
  await refuses('POST', '/api/v1/assets', o.key, { name: 'unk-2', lat: 3 }, '/lat', 'asset create with lat');
  await refuses('PUT', `/api/v1/assets/${asset.id}`, o.key, { name: 'unk-asset', notes: 'typo' }, '/notes', 'asset put with notes');
  await refuses('PATCH', `/api/v1/assets/${asset.id}`, o.key, { tag: 'x' }, '/tag', 'asset patch with tag');
  await refuses('POST', '/api/v1/owners', admin, { name: 'unk-owner', parentId: o.ownerId }, '/parentId', 'owner create with parentId');
  await refuses('PATCH', `/api/v1/owners/${o.ownerId}`, admin, { Name: 'x' }, '/Name', 'owner patch with Name');
  assert.deepEqual(ok(await ta.call('GET', `/api/v1/assets/${asset.id}`, { token: o.key }), 200), asset, 'asset unchanged');
  const r = await ta.call('POST', '/api/v1/assets', { token: o.key, body: { name: 'unk-3', lat: 3 } });
  assertUnknown(r, '/lat', 'asset lat');
  assert.match(
    r.body.message,
    /known fields here: name, disabled, note, tags, assetTags, boxId, ownerId, silentAlertMinutes, equipmentReference, isoEquipmentCode\./,
    r.body.message,
  );

  // A data record: the message suggests the field meant; nothing stored.
  const loc = { assetId: asset.id, latitude: 1, longitude: 2 };
  const l = await ta.call('POST', '/api/v1/locations', { token: o.key, body: { ...loc, lat: 3 } });
  assertUnknown(l, '/lat', 'location lat');
  assert.match(l.body.message, /did you mean latitude\?/, l.body.message);
  const s = await ta.call('POST', '/api/v1/sensor-data', {
    token: o.key,
    body: { assetId: asset.id, sensorId: 's1', type: 'TEMPERATURE', value: 4, unit: 'C' },
  });
  assertUnknown(s, '/unit', 'sensor data unit');
  assert.deepEqual(ok(await ta.call('GET', `/api/v1/locations?assetId=${asset.id}`, { token: o.key }), 200), [], 'no location stored');
  assert.deepEqual(ok(await ta.call('GET', `/api/v1/sensor-data?assetId=${asset.id}`, { token: o.key }), 200), [], 'no sensor data stored');

  // Zones, commands, booking data, API keys, users, integrations.
  assertUnknown(await ta.call('POST', '/api/v1/zones', { token: o.key, body: { name: 'unk-z', radius: 5 } }), '/radius', 'zone radius');
  assertUnknown(
    await ta.call('POST', '/api/v1/commands', { token: o.key, body: { assetId: asset.id, type: 'POWER_ON', ttl: 60 } }),
    '/ttl',
    'command ttl',
  );
  assertUnknown(
    await ta.call('POST', '/api/v1/booking-data', { token: o.key, body: { type: 'MAERSK_V1', data: { a: 1 } } }),
    '/data',
    'booking data (jsonData misspelt)',
  );
  assertUnknown(
    await ta.call('POST', '/api/v1/api-keys', { token: admin, body: { name: 'k', ownerId: o.ownerId, scopes: ['read'], scope: 'read' } }),
    '/scope',
    'api key scope',
  );
  assertUnknown(
    await ta.call('POST', '/api/v1/users', {
      token: admin,
      body: { username: uniq('unk-user'), password: 'long enough 1', ownerId: o.ownerId, scopes: ['read'], role: 'x' },
    }),
    '/role',
    'user role',
  );
  assertUnknown(
    await ta.call('POST', '/api/v1/integrations', { token: admin, body: integrationBody(o.ownerId, { url: 'http://127.0.0.1:9/x' }) }),
    '/url',
    'integration url',
  );
  for (const [what, list] of [
    ['zones', '/api/v1/zones'],
    ['commands', `/api/v1/commands?assetId=${asset.id}`],
    ['booking data', `/api/v1/booking-data?ownerId=${o.ownerId}`],
    ['users', `/api/v1/users?ownerId=${o.ownerId}`],
  ] as const) {
    assert.deepEqual(ok(await ta.call('GET', list, { token: what === 'users' ? admin : o.key }), 200), [], `no ${what} stored`);
  }
  const ints = ok(await ta.call('GET', '/api/v1/integrations?limit=1000', { token: admin }), 200) as { ownerIds: string[] }[];
  assert.equal(ints.filter((i) => i.ownerIds.includes(o.ownerId)).length, 0, 'no integration stored');
});

test('an unknown nested field (zone circle, integration webhook, retry and auth) is a 400 with its full pointer', async () => {
  const o = await ownerWithKey(ta, 'unk-nested');
  const circle = { latitude: 1, longitude: 2, radiusMeters: 100 };
  assertUnknown(
    await ta.call('POST', '/api/v1/zones', { token: o.key, body: { name: 'unk-c', circle: { ...circle, radius: 5 } } }),
    '/circle/radius',
    'circle radius',
  );
  const square = [
    [
      [0, 0],
      [1, 0],
      [1, 1],
      [0, 0],
    ],
  ];
  assertUnknown(
    await ta.call('POST', '/api/v1/zones', {
      token: o.key,
      body: { name: 'unk-g', geometry: { type: 'Polygon', coordinates: square, crs: 'x' } },
    }),
    '/geometry/crs',
    'geometry crs',
  );
  const zone = ok(await ta.call('POST', '/api/v1/zones', { token: o.key, body: { name: 'unk-z', circle } }), 201);
  assertUnknown(
    await ta.call('PATCH', `/api/v1/zones/${zone.id}`, { token: o.key, body: { circle: { radius: 5 } } }),
    '/circle/radius',
    'patch circle radius',
  );
  assert.deepEqual(ok(await ta.call('GET', `/api/v1/zones/${zone.id}`, { token: o.key }), 200), zone, 'zone unchanged');

  const cases: [Record<string, unknown>, string][] = [
    [{ webhook: { timeoutMS: 1000 } }, '/webhook/timeoutMS'],
    [{ retry: { maxAttempt: 3 } }, '/retry/maxAttempt'],
    [{ webhook: { auth: { type: 'basic', username: 'u', password: 'p', realm: 'x' } } }, '/webhook/auth/realm'],
    // A member another kind of auth takes is not ignored here: it is not this kind's.
    [{ webhook: { auth: { type: 'apiKey', token: 't', username: 'u' } } }, '/webhook/auth/username'],
  ];
  for (const [extra, field] of cases) {
    assertUnknown(await ta.call('POST', '/api/v1/integrations', { token: admin, body: integrationBody(o.ownerId, extra) }), field, field);
  }
  const made = ok(await ta.call('POST', '/api/v1/integrations', { token: admin, body: integrationBody(o.ownerId) }), 201);
  const int = ok(await ta.call('GET', `/api/v1/integrations/${made.id}`, { token: admin }), 200);
  for (const [extra, field] of cases) {
    for (const method of ['PUT', 'PATCH']) {
      const body = method === 'PUT' ? integrationBody(o.ownerId, { ...extra, name: int.name }) : extra;
      assertUnknown(await ta.call(method, `/api/v1/integrations/${int.id}`, { token: admin, body }), field, `${method} ${field}`);
    }
  }
  assert.deepEqual(ok(await ta.call('GET', `/api/v1/integrations/${int.id}`, { token: admin }), 200), int, 'integration unchanged');
});

test('free JSON objects (data, jsonData, parameters) keep accepting any member', async () => {
  const o = await ownerWithKey(ta, 'unk-free');
  const asset = ok(await ta.call('POST', '/api/v1/assets', { token: o.key, body: { name: 'free-asset' } }), 201);
  const data = { anything: { deep: [1, { x: 'y' }] }, lat: 3 };
  const reefer = ok(await ta.call('POST', '/api/v1/reefer-data', { token: o.key, body: { assetId: asset.id, data } }), 201);
  assert.deepEqual(reefer.data, data);
  const booking = ok(
    await ta.call('POST', '/api/v1/booking-data', {
      token: o.key,
      body: { type: 'MAERSK_V1', jsonData: { lat: 3, nested: { any: true } } },
    }),
    201,
  );
  assert.deepEqual(booking.jsonData, { lat: 3, nested: { any: true } });
  const cmd = ok(
    await ta.call('POST', '/api/v1/commands', {
      token: o.key,
      body: { assetId: asset.id, type: 'SET_TEMPERATURE', parameters: { value: 4, unit: 'C', extra: { a: 1 } } },
    }),
    201,
  );
  assert.deepEqual(cmd.parameters, { value: 4, unit: 'C', extra: { a: 1 } });
});

test('in a bulk body the unknown field is named with its index, and nothing is stored', async () => {
  const o = await ownerWithKey(ta, 'unk-bulk');
  const asset = ok(await ta.call('POST', '/api/v1/assets', { token: o.key, body: { name: 'bulk-asset' } }), 201);
  const items: Record<string, unknown>[] = Array.from({ length: 5 }, (_, i) => ({ assetId: asset.id, latitude: i, longitude: i }));
  items[3] = { ...items[3], lat: 3 };
  assertUnknown(await ta.call('POST', '/api/v1/locations', { token: o.key, body: items }), '/3/lat', 'bulk item 3');
  const sensors = [0, 1, 2].map((i) => ({ assetId: asset.id, sensorId: 's', type: 'HUMIDITY', value: i }));
  sensors[2] = { ...sensors[2]!, type: 'TEMP' };
  const r = await ta.call('POST', '/api/v1/sensor-data', { token: o.key, body: sensors });
  assertRejected(r, '/2/type', 'bulk item 2 type');
  assert.match(r.body.message, /must be one of TEMPERATURE, HUMIDITY,/, r.body.message);
  assert.deepEqual(ok(await ta.call('GET', `/api/v1/locations?assetId=${asset.id}`, { token: o.key }), 200), [], 'no location stored');
  assert.deepEqual(ok(await ta.call('GET', `/api/v1/sensor-data?assetId=${asset.id}`, { token: o.key }), 200), [], 'no sensor data stored');
});

/**
 * GET a resource, PUT (or PATCH) the very body back: 200, nothing but whenUpdated changes.
 * `stats` and `healthLog` (an integration's live delivery counts and health changes, GET only) are
 * state, not stored: left out.
 */
async function putsBack(path: string, token: string, method = 'PUT', change: Record<string, unknown> = {}) {
  const got = ok(await ta.call('GET', path, { token }), 200, `GET ${path}`);
  const put = ok(await ta.call(method, path, { token, body: { ...got, ...change } }), 200, `${method} ${path} of its GET body`);
  const { whenUpdated: _a, stats: _s, healthLog: _h, ...before } = { ...got, ...change };
  const { whenUpdated: _b, ...after } = put;
  assert.deepEqual(after, before, `${method} ${path}: the body put back is what is stored`);
  const { stats: _t, healthLog: _g, ...again } = ok(await ta.call('GET', path, { token }), 200);
  assert.deepEqual(again, put, `${path} stored as answered`);
  return got;
}

test('a GET body can be PUT back unchanged: read-only and response-only fields are ignored, on every writable resource', async () => {
  const o = await ownerWithKey(ta, 'putback');
  const child = await ownerWithKey(ta, 'putback-child', { parentId: o.ownerId });
  const asset = ok(
    await ta.call('POST', '/api/v1/assets', {
      token: o.key,
      body: { name: 'pb-asset', note: 'n', tags: 'a,b', boxId: 'B1', disabled: true },
    }),
    201,
  );
  await putsBack(`/api/v1/assets/${asset.id}`, o.key);
  // The owner's GET body carries childIds (derived, read-only) and its parent (admin only to change).
  const owner = await putsBack(`/api/v1/owners/${o.ownerId}`, o.key);
  assert.deepEqual(owner.childIds, [child.ownerId]);
  await putsBack(`/api/v1/owners/${child.ownerId}`, o.key);
  const circle = { latitude: 10, longitude: 20, radiusMeters: 500 };
  const zc = ok(
    await ta.call('POST', '/api/v1/zones', { token: o.key, body: { name: 'pb-circle', type: 'DEPOT', note: 'n', circle } }),
    201,
  );
  await putsBack(`/api/v1/zones/${zc.id}`, o.key);
  const square = [
    [
      [0, 0],
      [1, 0],
      [1, 1],
      [0, 0],
    ],
  ];
  const zg = ok(
    await ta.call('POST', '/api/v1/zones', { token: o.key, body: { name: 'pb-poly', geometry: { type: 'Polygon', coordinates: square } } }),
    201,
  );
  await putsBack(`/api/v1/zones/${zg.id}`, o.key);
  const bd = ok(
    await ta.call('POST', '/api/v1/booking-data', { token: o.key, body: { name: 'pb-b', type: 'MAERSK_V1', jsonData: { a: [1] } } }),
    201,
  );
  const gotBooking = await putsBack(`/api/v1/booking-data/${bd.id}`, o.key);
  assert.equal(typeof gotBooking.whoCreated, 'string');
  const spec = ok(
    await ta.call('POST', '/api/v1/specifications', {
      token: o.key,
      body: {
        assetId: asset.id,
        type: 'REEFER',
        name: 'pb-spec',
        settings: { cargo: { settings: { temperatureSetpoint: -18 } } },
        ranges: { cargo: { sensors: { co2: [null, 5, 10, 30] } }, hardware: { sensors: { condenserFanLevel: ['LOW'] } } },
        notification: { controller: { power: { default: { duration: 5, frequency: 0 } } } },
      },
    }),
    201,
  );
  const gotSpec = await putsBack(`/api/v1/specifications/${spec.id}`, o.key);
  assert.equal(gotSpec.assetName, 'pb-asset');
  // Integrations: the webhook settings come back with signingSecretSet, which is ignored; secrets left out are kept.
  const int = ok(
    await ta.call('POST', '/api/v1/integrations', {
      token: admin,
      body: integrationBody(o.ownerId, {
        retry: { maxAttempts: 3 },
        webhook: { mode: 'batch', batchSize: 10, signingSecret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' },
      }),
    }),
    201,
  );
  const gotInt = await putsBack(`/api/v1/integrations/${int.id}`, admin);
  assert.equal(gotInt.webhook.signingSecretSet, true);
  // Auth comes back without its secret (write-only): put back unchanged, the stored secret is kept;
  // with another username or tokenUrl the secret must be given again (it never follows a change).
  // The receiver shows that the kept secret is still the one sent (the test endpoint, to the integration's own URL).
  const rx = await new Receiver().start();
  atEnd(() => rx.close());
  const sent: [Record<string, string>, string, string][] = [
    [{ type: 'basic', username: 'u', password: 'p' }, 'authorization', `Basic ${Buffer.from('u:p').toString('base64')}`],
    [{ type: 'apiKey', token: 't1' }, 'authorization', 'Bearer t1'],
    [{ type: 'header', name: 'X-Key', value: 'v' }, 'x-key', 'v'],
    [{ type: 'oauth2', token: 't2' }, 'authorization', 'Bearer t2'],
    [{ type: 'oauth2', tokenUrl: 'http://127.0.0.1:9/token', clientId: 'c', clientSecret: 's', scope: 'push' }, '', ''],
  ];
  for (const [auth, header, value] of sent) {
    const destination = `${rx.url}/pb-${uniq(auth.type!)}`;
    const withAuth = ok(
      await ta.call('POST', '/api/v1/integrations', { token: admin, body: integrationBody(o.ownerId, { destination, webhook: { auth } }) }),
      201,
    );
    const got = await putsBack(`/api/v1/integrations/${withAuth.id}`, admin);
    if (header) {
      const t = ok(
        await ta.call('POST', '/api/v1/webhooks/test', { token: admin, body: { url: destination, integrationId: withAuth.id } }),
        200,
        `test ${auth.type}`,
      );
      assert.equal(t.success, true, JSON.stringify(t));
      assert.equal(rx.for(new URL(destination).pathname).at(-1)?.headers[header], value, `${auth.type}: the stored secret is still sent`);
    }
    const secret = Object.keys(auth).find((k) => !(k in got.webhook.auth))!;
    assert.ok(['password', 'token', 'value', 'clientSecret'].includes(secret), `${auth.type}: ${secret} not shown`);
    const changed = { ...got.webhook.auth, ...(auth.type === 'basic' ? { username: 'other' } : {}) };
    if (auth.type === 'header') changed.name = 'X-Other';
    if ('tokenUrl' in auth) changed.tokenUrl = 'http://127.0.0.1:9/elsewhere';
    if (auth.type === 'apiKey' || (auth.type === 'oauth2' && !('tokenUrl' in auth))) continue; // nothing else to change
    const r = await ta.call('PUT', `/api/v1/integrations/${withAuth.id}`, {
      token: admin,
      body: { ...got, webhook: { ...got.webhook, auth: changed } },
    });
    assertRejected(r, `/webhook/auth/${secret}`, `${auth.type}: changed without the secret`);
  }
  assertRejected(
    await ta.call('POST', '/api/v1/integrations', {
      token: admin,
      body: integrationBody(o.ownerId, { webhook: { auth: { type: 'apiKey' } } }),
    }),
    '/webhook/auth/token',
    'a new auth needs its secret',
  );
  // PATCH-only resources take their GET body too: a user (username is fixed), a command (status moves on).
  const user = ok(
    await ta.call('POST', '/api/v1/users', {
      token: admin,
      body: { username: uniq('pb-user'), password: 'long enough 1', ownerId: o.ownerId, scopes: ['read'] },
    }),
    201,
  );
  await putsBack(`/api/v1/users/${user.id}`, admin, 'PATCH');
  ok(await ta.call('POST', '/api/v1/reefer-data', { token: o.key, body: { assetId: asset.id, data: {} } }), 201); // makes it take commands
  const cmd = ok(await ta.call('POST', '/api/v1/commands', { token: o.key, body: { assetId: asset.id, type: 'POWER_ON' } }), 201);
  await putsBack(`/api/v1/commands/${cmd.id}`, o.key, 'PATCH', { status: 'SENT' });

  // On create, too: a client's id, times and derived fields are not taken.
  const copy = ok(await ta.call('POST', '/api/v1/assets', { token: o.key, body: { ...asset, name: 'pb-copy' } }), 201);
  assert.notEqual(copy.id, asset.id);
  assert.deepEqual([copy.note, copy.tags, copy.boxId, copy.disabled, copy.ownerId], [asset.note, asset.tags, asset.boxId, true, o.ownerId]);
  const ancient = { id: '00000000-0000-4000-8000-000000000000', whenCreated: '2001-01-01T00:00:00Z', whenUpdated: '2001-01-01T00:00:00Z' };
  const own = ok(
    await ta.call('POST', '/api/v1/owners', { token: admin, body: { name: uniq('pb-owner'), childIds: [o.ownerId], ...ancient } }),
    201,
  );
  assert.notEqual(own.id, ancient.id);
  assert.notEqual(own.whenCreated, ancient.whenCreated);
  assert.deepEqual(own.childIds, []);
  assert.equal(ok(await ta.call('GET', `/api/v1/owners/${o.ownerId}`, { token: admin }), 200).ownerId, null, 'parent unchanged');
});

test('enum errors list the allowed values; a single allowed literal is named', async () => {
  const o = await ownerWithKey(ta, 'enum-msg');
  const asset = ok(await ta.call('POST', '/api/v1/assets', { token: o.key, body: { name: 'enum-asset' } }), 201);
  let r = await ta.call('POST', '/api/v1/sensor-data', {
    token: o.key,
    body: { assetId: asset.id, sensorId: 's', type: 'TEMP', value: 4 },
  });
  assertRejected(r, '/type', 'sensor type TEMP');
  assert.match(r.body.message, /\/type must be one of TEMPERATURE, HUMIDITY, X_ACCELERATION, .*PRESSURE\./, r.body.message);
  r = await ta.call('GET', '/api/v1/sensor-data?type=TEMP', { token: o.key });
  assertRejected(r, '/type', 'sensor type TEMP in the query');
  assert.match(r.body.message, /must be one of TEMPERATURE, HUMIDITY,/, r.body.message);
  // Nullable enums: the null branch does not hide the list.
  r = await ta.call('POST', '/api/v1/reefer-data', { token: o.key, body: { assetId: asset.id, data: {}, reeferClass: 'XX' } });
  assertRejected(r, '/reeferClass', 'reefer class');
  assert.match(r.body.message, /must be one of CR, CR0, CRTT,/, r.body.message);
  r = await ta.call('POST', '/api/v1/commands', { token: o.key, body: { assetId: asset.id, type: 'REBOOT' } });
  assertRejected(r, '/type', 'command type');
  assert.match(r.body.message, /must be one of SET_TEMPERATURE, .*POWER_OFF, SET_MODE, CLEAR_ALARMS\./, r.body.message);
  r = await ta.call('POST', '/api/v1/booking-data', { token: o.key, body: { type: 'OTHER' } });
  assertRejected(r, '/type', 'booking type');
  assert.match(r.body.message, /\/type must be MAERSK_V1\./, r.body.message);
  r = await ta.call('POST', '/api/v1/integrations', {
    token: admin,
    body: integrationBody(o.ownerId, { webhook: { auth: { type: 'bearer', token: 't' } } }),
  });
  assertRejected(r, '/webhook/auth/type', 'auth type');
  assert.match(r.body.message, /must be one of apiKey, oauth2, header, basic\./, r.body.message);
  // A union that is not of literals: the branch meant is reported (a missing password, not a wrong type).
  r = await ta.call('POST', '/api/v1/integrations', {
    token: admin,
    body: integrationBody(o.ownerId, { webhook: { auth: { type: 'basic', username: 'u' } } }),
  });
  assertRejected(r, '/webhook/auth/password', 'basic auth without password');
  r = await ta.call('POST', '/api/v1/integrations', {
    token: admin,
    body: integrationBody(o.ownerId, {
      webhook: { auth: { type: 'oauth2', tokenUrl: 'http://127.0.0.1:9/t', clientId: 5, clientSecret: 's' } },
    }),
  });
  assertRejected(r, '/webhook/auth/clientId', 'oauth2 client credentials with a numeric clientId (the branch it fits best)');
  r = await ta.call('PATCH', `/api/v1/assets/${asset.id}`, { token: o.key, body: { note: 5 } });
  assertRejected(r, '/note', 'nullable string given a number');
  assert.match(r.body.message, /must be string or null/, r.body.message);
});

test('decisions: unknown query parameters are ignored; the token endpoint ignores unknown form parameters (RFC 6749 3.1)', async () => {
  const o = await ownerWithKey(ta, 'lenient');
  ok(await ta.call('POST', '/api/v1/assets', { token: o.key, body: { name: 'lenient-1' } }), 201);
  const r = ok(await ta.call('GET', '/api/v1/assets?_=1700000000&utm_source=x', { token: o.key }), 200);
  assert.equal(r.length, 1);
  const t = await ta.call('POST', '/auth/realms/tracking/protocol/openid-connect/token', {
    headers: { authorization: basic(OPERATOR.clientId, OPERATOR.clientSecret), 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'password',
      username: OPERATOR.username,
      password: OPERATOR.password,
      nonce: 'n',
      audience: 'x',
    }).toString(),
  });
  assert.equal(t.status, 200, t.raw);
});

test('a body missing several required members names them all in one answer (redeliver without a range)', async () => {
  const int = ok(
    await ta.call('POST', '/api/v1/integrations', { token: admin, body: integrationBody(ta.app.services.bootstrap!.ownerId) }),
    201,
  );
  const r = await ta.call('POST', `/api/v1/integrations/${int.id}/deliveries/redeliver`, { token: admin, body: {} });
  bad(r, 400, '/from');
  assert.match(r.body.message, /\/from, \/to are required/);
  const one = await ta.call('POST', `/api/v1/integrations/${int.id}/deliveries/redeliver`, {
    token: admin,
    body: { to: new Date().toISOString() },
  });
  bad(one, 400, '/from');
  assert.match(one.body.message, /\/from is required/);
});

test('bytes that are not UTF-8 are a 400 naming where, never stored as U+FFFD; JSON merge patches too', async () => {
  const o = await ownerWithKey(ta, 'utf8');
  const before = await counts();
  const raw = (method: string, path: string, bytes: Buffer, type = 'application/json') =>
    ta.call(method, path, { token: o.key, body: bytes, headers: { 'content-type': type } });
  // {"name":"MSKU<ff>1"}: one byte that is never UTF-8, at offset 13.
  const bad1 = Buffer.concat([Buffer.from('{"name":"MSKU'), Buffer.from([0xff]), Buffer.from('1"}')]);
  const r = await raw('POST', '/api/v1/assets', bad1);
  assertRejected(r, '', 'a 0xFF byte');
  assert.match(r.body.message, /not valid UTF-8 \(byte 13 of 17\)/);
  // A lone surrogate encoded as UTF-8 (ED A0 80) and an overlong "/" (C0 AF) are not UTF-8 either.
  for (const bytes of [
    [0xed, 0xa0, 0x80],
    [0xc0, 0xaf],
  ]) {
    const body = Buffer.concat([Buffer.from('{"name":"A'), Buffer.from(bytes), Buffer.from('"}')]);
    assertRejected(await raw('POST', '/api/v1/assets', body), '', `bytes ${bytes}`);
  }
  assert.deepEqual(await counts(), before, 'nothing stored');
  const asset = ok(await ta.call('POST', '/api/v1/assets', { token: o.key, body: { name: 'UTF8-1' } }), 201);
  const patch = Buffer.concat([Buffer.from('{"note":"x'), Buffer.from([0xfe]), Buffer.from('"}')]);
  assertRejected(await raw('PATCH', `/api/v1/assets/${asset.id}`, patch, 'application/merge-patch+json'), '', 'a merge patch');
  assert.equal(ok(await ta.call('GET', `/api/v1/assets/${asset.id}`, { token: o.key }), 200).note ?? null, null);
  // Valid UTF-8, astral characters included, goes through as it was sent.
  const good = ok(await raw('POST', '/api/v1/assets', Buffer.from(`{"name":"caf\u00e9 ${SMILE}"}`)), 201);
  assert.equal(good.name, `caf\u00e9 ${SMILE}`);
});
