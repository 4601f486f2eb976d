// Spec 2.1 (asset) and 2.4 (owner) field limits, API.md sections 1, 3 and 5: every size is counted
// in Unicode code points; too long, wrong type, missing or NUL-bearing values are a 400 whose `field`
// is the exact JSON pointer, and a refused request stores nothing. Unique names answer 409. PUT
// replaces, PATCH merges (null clears). Lists page by keyset with a Link rel="next" header.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ownerWithKey, startApp, type Res } from './helpers.js';

// One service for the whole file (PGlite takes seconds to start); every test makes its own owners.
const ta = await startApp(undefined, { RATE_LIMIT_MAX: '100000' });
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
  // disabled defaults to false when absent (spec 2.4) and takes a boolean.
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

  // assetTags (the spec sample's key) on create and on patch, shown as tags.
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
