// API guide 8, "Assets: equipment identity", "Booking data" and "Booking asset links" (DCSA Track &
// Trace, migration 0034): an asset's ISO 6346 container number (check digit verified, unique within
// its top-level owner's tree) and size-type code; a booking's carrier booking and transport document
// references; which box carries a booking when, one booking per box at a time, at most
// bookingAssetLinks per booking, audited, reached only through a booking the caller sees.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BOUNDS } from '../src/bounds.js';
import { bad, customer, ok, type Res, startApp, type TestApp } from './helpers.js';

const ta = await startApp(undefined, { RATE_LIMIT_MAX: '100000', RATE_LIMIT_CONCURRENT: '1000' });
const db = ta.app.services.db;
const TYPE = 'MAERSK_V1';

async function tenant(app: TestApp, label: string, opts: { parentId?: string; scopes?: ('read' | 'write')[] } = {}) {
  const c = await customer(app, label, { base: '/api/v1', ...opts });
  const asset = async (body: Record<string, unknown>): Promise<any> =>
    ok(await c.call('POST', '/assets', { name: `a-${crypto.randomUUID().slice(0, 8)}`, ...body }), 201, `asset ${JSON.stringify(body)}`);
  const booking = async (body: Record<string, unknown> = {}): Promise<any> =>
    ok(await c.call('POST', '/booking-data', { type: TYPE, ...body }), 201, `booking ${JSON.stringify(body)}`);
  const link = (bookingId: string, body: Record<string, unknown>): Promise<Res> =>
    c.call('POST', `/booking-data/${bookingId}/assets`, body);
  return { ...c, asset, booking, link };
}

const day = (n: number) => new Date(Date.UTC(2026, 10, 1 + n)).toISOString().replace('.000Z', 'Z');

test('equipmentReference: ISO 6346 numbers with their check digit are stored and read; anything else is a 400 naming the field', async () => {
  const a = await tenant(ta, 'ref');
  for (const ref of ['MSKU1234565', 'CSQU3054383', 'APZU4812090']) {
    const made = await a.asset({ equipmentReference: ref, isoEquipmentCode: '45R1' });
    assert.equal(made.equipmentReference, ref);
    assert.equal(made.isoEquipmentCode, '45R1');
    const got = ok(await a.call('GET', `/assets/${made.id}`), 200);
    assert.deepEqual([got.equipmentReference, got.isoEquipmentCode], [ref, '45R1']);
  }
  const plain = await a.asset({});
  assert.deepEqual([plain.equipmentReference, plain.isoEquipmentCode], [null, null], 'absent reads null');

  const refused: [unknown, RegExp][] = [
    ['MSKU1234561', /check digit is 1, expected 5/],
    ['msku1234565', /lower-case letters; ISO 6346 writes capitals \(MSKU1234565\)/],
    ['MSKX1234565', /category/],
    ['MSKU12A4565', /serial number/],
    ['MSK1234565', /10 characters, expected 11/],
    ['', /0 characters/],
    ['MSKU12345655', /11/],
    [42, /string/],
  ];
  for (const [equipmentReference, says] of refused) {
    const r = await a.call('POST', '/assets', { name: `bad-${String(equipmentReference)}`, equipmentReference });
    bad(r, 400, '/equipmentReference', `create ${JSON.stringify(equipmentReference)}`);
    assert.equal(r.body.code, 'VALIDATION_FAILED');
    assert.match(r.body.message, says, `create ${JSON.stringify(equipmentReference)}`);
  }
  const r = await a.call('POST', '/assets', { name: 'bad-digit', equipmentReference: 'MSKU1234561' });
  assert.equal(r.body.message, '/equipmentReference is not an ISO 6346 container number: check digit is 1, expected 5.');
  // The same on a replace and a merge; nothing changed.
  bad(await a.call('PATCH', `/assets/${plain.id}`, { equipmentReference: 'CSQU3054384' }), 400, '/equipmentReference', 'patch');
  bad(
    await a.call('PUT', `/assets/${plain.id}`, { name: plain.name, equipmentReference: 'csqu3054383' }),
    400,
    '/equipmentReference',
    'put',
  );
  assert.equal(ok(await a.call('GET', `/assets/${plain.id}`), 200).equipmentReference, null);
  assert.equal((ok(await a.call('GET', '/assets?name=bad-digit'), 200) as any[]).length, 0, 'nothing stored');

  // PATCH sets, keeps when absent, clears with null; PUT clears what it leaves out.
  let p = ok(await a.call('PATCH', `/assets/${plain.id}`, { equipmentReference: 'HLXU8111403', isoEquipmentCode: '22GP' }), 200);
  assert.deepEqual([p.equipmentReference, p.isoEquipmentCode], ['HLXU8111403', '22GP']);
  p = ok(await a.call('PATCH', `/assets/${plain.id}`, { note: 'n' }), 200);
  assert.deepEqual([p.equipmentReference, p.isoEquipmentCode], ['HLXU8111403', '22GP'], 'kept');
  p = ok(await a.call('PATCH', `/assets/${plain.id}`, { equipmentReference: null }), 200);
  assert.deepEqual([p.equipmentReference, p.isoEquipmentCode], [null, '22GP']);
  p = ok(await a.call('PUT', `/assets/${plain.id}`, { name: plain.name, equipmentReference: 'HLXU8111403' }), 200);
  assert.deepEqual([p.equipmentReference, p.isoEquipmentCode], ['HLXU8111403', null], 'put clears what it leaves out');
  // A body read back is accepted as it is.
  const back = ok(await a.call('GET', `/assets/${plain.id}`), 200);
  assert.deepEqual(ok(await a.call('PUT', `/assets/${plain.id}`, back), 200).equipmentReference, 'HLXU8111403');

  // The list filter.
  const found = ok(await a.call('GET', '/assets?equipmentReference=CSQU3054383'), 200) as any[];
  assert.deepEqual(
    found.map((x) => x.equipmentReference),
    ['CSQU3054383'],
  );
  assert.deepEqual(ok(await a.call('GET', '/assets?equipmentReference=TGHU9999995'), 200), []);
});

test('isoEquipmentCode: 4 characters, size, type group and type, capitals; else a 400 naming it', async () => {
  const a = await tenant(ta, 'code');
  for (const code of ['45R1', '22G1', '22GP', 'L5G1']) assert.equal((await a.asset({ isoEquipmentCode: code })).isoEquipmentCode, code);
  for (const [code, says] of [
    ['45r1', /lower-case/],
    ['45R', /3 characters, expected 4/],
    ['4511', /type group/],
    ['45R-', /4th character/],
    ['', /0 characters/],
  ] as const) {
    const r = await a.call('POST', '/assets', { name: `bad-code-${code}`, isoEquipmentCode: code });
    bad(r, 400, '/isoEquipmentCode', code);
    assert.match(r.body.message, /^\/isoEquipmentCode is not an ISO 6346 size-type code: /);
    assert.match(r.body.message, says, code);
  }
  bad(await a.call('POST', '/assets', { name: 'long', isoEquipmentCode: '45R10' }), 400, '/isoEquipmentCode', 'five characters');
  const x = await a.asset({});
  bad(await a.call('PATCH', `/assets/${x.id}`, { isoEquipmentCode: '45R' }), 400, '/isoEquipmentCode', 'patch');
});

test('equipmentReference is unique within a top-level owner tree (parent and child, siblings, moves), free across trees', async () => {
  const parent = await tenant(ta, 'tree-p');
  const child = await tenant(ta, 'tree-c', { parentId: parent.ownerId });
  const sibling = await tenant(ta, 'tree-s', { parentId: parent.ownerId });
  const stranger = await tenant(ta, 'tree-x');
  const ref = 'MSKU1234565';
  const first = await parent.asset({ equipmentReference: ref });

  const dup = async (who: typeof parent, body: Record<string, unknown>, what: string) => {
    const r = await who.call('POST', '/assets', { name: `dup-${crypto.randomUUID().slice(0, 8)}`, ...body });
    bad(r, 409, '/equipmentReference', what);
    assert.equal(r.body.code, 'CONFLICT');
    assert.ok(r.body.message.includes(`equipmentReference ${body.equipmentReference}`), r.body.message);
  };
  await dup(parent, { equipmentReference: ref }, 'same owner');
  await dup(child, { equipmentReference: ref }, 'the child, of its parent’s number');
  await dup(parent, { equipmentReference: ref, ownerId: child.ownerId }, 'the parent, for its child');
  // The stranger's tree is another: the same number is fine there.
  const theirs = await stranger.asset({ equipmentReference: ref });
  assert.equal(theirs.equipmentReference, ref);

  // A child's number blocks its sibling and its parent as well.
  const c = await child.asset({ equipmentReference: 'CSQU3054383' });
  await dup(sibling, { equipmentReference: 'CSQU3054383' }, 'sibling');
  bad(
    await parent.call('PATCH', `/assets/${first.id}`, { equipmentReference: 'CSQU3054383' }),
    409,
    '/equipmentReference',
    'patch onto it',
  );
  bad(
    await parent.call('PUT', `/assets/${first.id}`, { name: first.name, equipmentReference: 'CSQU3054383' }),
    409,
    '/equipmentReference',
    'put onto it',
  );
  // An asset keeps its own number through changes; the number is free again once cleared or deleted.
  assert.equal(ok(await child.call('PATCH', `/assets/${c.id}`, { note: 'x', equipmentReference: 'CSQU3054383' }), 200).note, 'x');
  ok(await child.call('PATCH', `/assets/${c.id}`, { equipmentReference: null }), 200);
  const s = await sibling.asset({ equipmentReference: 'CSQU3054383' });
  ok(await sibling.call('DELETE', `/assets/${s.id}`), 204);
  ok(await child.call('PATCH', `/assets/${c.id}`, { equipmentReference: 'CSQU3054383' }), 200);

  // A move is checked again: into a tree that has the number, 409; the stranger's asset may not come over.
  const other = await stranger.asset({ equipmentReference: 'APZU4812090' });
  const mine = await parent.asset({ equipmentReference: 'APZU4812090' });
  assert.notEqual(other.ownerId, mine.ownerId);
  const op = (method: string, path: string, body?: unknown) =>
    ta.call(method, `/api/v1${path}`, { token: ta.adminToken, ...(body === undefined ? {} : { body }) });
  bad(await op('PATCH', `/assets/${other.id}`, { ownerId: child.ownerId }), 409, '/equipmentReference', 'operator moves it into the tree');
  ok(await op('PATCH', `/assets/${mine.id}`, { equipmentReference: null }), 200);
  const moved = ok(await op('PATCH', `/assets/${other.id}`, { ownerId: child.ownerId }), 200, 'once the number is free');
  assert.equal(moved.ownerId, child.ownerId);
  // Within the tree, a move keeps it (it is still the only one).
  assert.equal(ok(await parent.call('PATCH', `/assets/${moved.id}`, { ownerId: sibling.ownerId }), 200).ownerId, sibling.ownerId);

  // Two creates of one number at once: one is stored, the other is a 409.
  const both = await Promise.all(
    [parent, child].map((who, i) => who.call('POST', '/assets', { name: `race-${i}`, equipmentReference: 'ABCJ1234563' })),
  );
  assert.deepEqual(both.map((r) => r.status).sort(), [201, 409], both.map((r) => r.raw).join(' | '));
  // The filter finds it across the tree for the parent, only its own for the child.
  const seen = ok(await parent.call('GET', '/assets?equipmentReference=ABCJ1234563'), 200) as any[];
  assert.equal(seen.length, 1);
});

test('the audit log records the equipment identity; the push shape does not carry it', async () => {
  const a = await tenant(ta, 'audit');
  const x = await a.asset({ equipmentReference: 'TGHU9999995', isoEquipmentCode: '45R1' });
  ok(await a.call('PATCH', `/assets/${x.id}`, { isoEquipmentCode: '22G1' }), 200);
  const entries = ok(
    await ta.call('GET', `/api/v1/audit?ownerId=${a.ownerId}&resourceType=asset&order=asc`, { token: ta.adminToken }),
    200,
  );
  assert.deepEqual(
    entries.map((e: any) => [e.action, e.changes.equipmentReference, e.changes.isoEquipmentCode]),
    [
      ['create', { to: 'TGHU9999995' }, { to: '45R1' }],
      ['update', undefined, { from: '45R1', to: '22G1' }],
    ],
  );
  const { rows } = await db.query<{ payload: Record<string, unknown> }>(
    `SELECT payload FROM event_log WHERE object_type = 'asset' AND object_id = $1::text ORDER BY id`,
    [x.id],
  );
  assert.ok(rows.length >= 1, 'pushed');
  for (const r of rows) assert.ok(!('equipmentReference' in r.payload) && !('isoEquipmentCode' in r.payload), JSON.stringify(r.payload));
});

test('booking references: optional, 1 to 35 and 1 to 20 characters, no white space at either end; list filters', async () => {
  const a = await tenant(ta, 'refs');
  const b = await a.booking({ carrierBookingReference: 'ABC123456', transportDocumentReference: 'HHL71800000' });
  assert.deepEqual([b.carrierBookingReference, b.transportDocumentReference], ['ABC123456', 'HHL71800000']);
  const none = await a.booking({});
  assert.deepEqual([none.carrierBookingReference, none.transportDocumentReference], [null, null]);
  assert.equal(
    (await a.booking({ carrierBookingReference: 'x'.repeat(35), transportDocumentReference: 'y'.repeat(20) })).carrierBookingReference
      .length,
    35,
  );
  assert.equal((await a.booking({ carrierBookingReference: 'A B' })).carrierBookingReference, 'A B', 'inner spaces are fine');
  for (const [field, value] of [
    ['carrierBookingReference', 'x'.repeat(36)],
    ['carrierBookingReference', ''],
    ['carrierBookingReference', ' ABC'],
    ['carrierBookingReference', 'ABC '],
    ['carrierBookingReference', 'ABC\t'],
    ['transportDocumentReference', 'y'.repeat(21)],
    ['transportDocumentReference', ''],
    ['transportDocumentReference', ' HHL'],
    ['carrierBookingReference', 7],
  ] as const) {
    const r = await a.call('POST', '/booking-data', { type: TYPE, [field]: value });
    bad(r, 400, `/${field}`, `${field} ${JSON.stringify(value)}`);
  }
  const r = await a.call('POST', '/booking-data', { type: TYPE, carrierBookingReference: ' ABC' });
  assert.equal(r.body.message, '/carrierBookingReference must not start or end with white space.');
  bad(await a.call('PATCH', `/booking-data/${b.id}`, { transportDocumentReference: 'X ' }), 400, '/transportDocumentReference', 'patch');

  // PATCH keeps what it leaves out; PUT clears it.
  let p = ok(await a.call('PATCH', `/booking-data/${b.id}`, { carrierBookingReference: 'DEF654321' }), 200);
  assert.deepEqual([p.carrierBookingReference, p.transportDocumentReference], ['DEF654321', 'HHL71800000']);
  p = ok(await a.call('PUT', `/booking-data/${b.id}`, { type: TYPE, transportDocumentReference: 'BL-1' }), 200);
  assert.deepEqual([p.carrierBookingReference, p.transportDocumentReference], [null, 'BL-1']);
  p = ok(await a.call('PATCH', `/booking-data/${b.id}`, { carrierBookingReference: 'DEF654321', transportDocumentReference: null }), 200);
  assert.deepEqual([p.carrierBookingReference, p.transportDocumentReference], ['DEF654321', null]);

  const ids = (list: any[]) => list.map((x) => x.id);
  assert.deepEqual(ids(ok(await a.call('GET', '/booking-data?carrierBookingReference=DEF654321'), 200)), [b.id]);
  const bl = await a.booking({ transportDocumentReference: 'BL-2' });
  assert.deepEqual(ids(ok(await a.call('GET', '/booking-data?transportDocumentReference=BL-2'), 200)), [bl.id]);
  assert.deepEqual(ok(await a.call('GET', '/booking-data?carrierBookingReference=nothing'), 200), []);
  // Another owner's references stay out of the list.
  const other = await tenant(ta, 'refs-other');
  await other.booking({ transportDocumentReference: 'BL-2' });
  assert.deepEqual(ids(ok(await a.call('GET', '/booking-data?transportDocumentReference=BL-2'), 200)), [bl.id]);
});

test('booking asset links: create, read, list by from, delete; audited; from before to', async () => {
  const a = await tenant(ta, 'links');
  const b = await a.booking({ carrierBookingReference: 'LINK1' });
  const box = (await a.asset({ equipmentReference: 'MSKU1234565', isoEquipmentCode: '45R1' })).id;
  const box2 = (await a.asset({})).id;

  const r = await a.link(b.id, { assetId: box, from: day(10), to: day(20) });
  const l1 = ok(r, 201, 'link');
  assert.equal(r.headers.location, `${ta.url}/api/v1/booking-data/${b.id}/assets/${l1.id}`);
  assert.deepEqual(Object.keys(l1).sort(), ['assetId', 'bookingId', 'from', 'id', 'to', 'whenCreated', 'whoCreated']);
  assert.deepEqual([l1.bookingId, l1.assetId, l1.from, l1.to], [b.id, box, day(10), day(20)]);
  assert.match(l1.whoCreated, /^apikey:/);
  assert.deepEqual(ok(await a.call('GET', `/booking-data/${b.id}/assets/${l1.id}`), 200), l1);
  // Another box in the same range, and the first box again right after (ranges that touch do not overlap).
  const l2 = ok(await a.link(b.id, { assetId: box2, from: day(5), to: day(15) }), 201);
  const l3 = ok(await a.link(b.id, { assetId: box, from: day(20), to: '2026-12-31T00:00:00+01:00' }), 201);
  assert.equal(l3.to, '2026-12-30T23:00:00Z', 'offsets are kept as UTC');
  // Fractions of a second are dropped, as every time the API answers.
  const l4 = ok(await a.link(b.id, { assetId: box, from: day(0), to: '2026-11-02T00:00:00.999Z' }), 201);
  assert.equal(l4.to, day(1));
  assert.deepEqual(
    (ok(await a.call('GET', `/booking-data/${b.id}/assets`), 200) as any[]).map((x) => x.id),
    [l4.id, l2.id, l1.id, l3.id],
    'by from, then id',
  );

  // from >= to: a 400 naming /to.
  for (const [from, to] of [
    [day(30), day(30)],
    [day(31), day(30)],
    ['2026-11-02T00:00:00.2Z', '2026-11-02T00:00:00.7Z'],
  ]) {
    const bad1 = await a.link(b.id, { assetId: box2, from, to });
    bad(bad1, 400, '/to', `${from}..${to}`);
    assert.match(bad1.body.message, /^\/to must be after \/from/);
  }
  bad(await a.link(b.id, { assetId: box2, from: 'yesterday', to: day(30) }), 400, '/from', 'not a date-time');
  bad(await a.link(b.id, { assetId: box2, from: day(30) }), 400, '/to', 'to missing');
  bad(await a.link(b.id, { assetId: 'nope', from: day(30), to: day(31) }), 400, '/assetId', 'assetId not a uuid');

  // Delete: 204, then 404; the list no longer has it.
  const del = await a.call('DELETE', `/booking-data/${b.id}/assets/${l2.id}`);
  assert.equal(del.status, 204, del.raw);
  assert.equal(del.raw, '');
  bad(await a.call('DELETE', `/booking-data/${b.id}/assets/${l2.id}`), 404, undefined, 'deleted twice');
  bad(await a.call('GET', `/booking-data/${b.id}/assets/${l2.id}`), 404, undefined, 'deleted');
  bad(await a.call('DELETE', `/booking-data/${b.id}/assets/not-a-uuid`), 404, undefined, 'bad link id');
  assert.deepEqual(
    (ok(await a.call('GET', `/booking-data/${b.id}/assets`), 200) as any[]).map((x) => x.id),
    [l4.id, l1.id, l3.id],
  );
  // A link of another booking is not this booking's.
  const b2 = await a.booking({});
  bad(await a.call('DELETE', `/booking-data/${b2.id}/assets/${l1.id}`), 404, undefined, "another booking's link");
  assert.deepEqual(ok(await a.call('GET', `/booking-data/${b2.id}/assets`), 200), []);

  // Audited: create and delete, as bookingAsset, under the booking's owner.
  const entries = ok(
    await ta.call('GET', `/api/v1/audit?ownerId=${a.ownerId}&resourceType=bookingAsset&order=asc&limit=1000`, { token: ta.adminToken }),
    200,
  ) as any[];
  assert.deepEqual(
    entries.map((e) => [e.action, e.resource.id]),
    [
      ['create', l1.id],
      ['create', l2.id],
      ['create', l3.id],
      ['create', l4.id],
      ['delete', l2.id],
    ],
  );
  assert.deepEqual(entries[0].changes.from, { to: day(10) });
  assert.deepEqual(entries[0].changes.assetId, { to: box });

  // Deleting the booking takes its links; deleting an asset takes its links too.
  const gone = await a.booking({});
  const spare = (await a.asset({})).id;
  ok(await a.link(gone.id, { assetId: spare, from: day(1), to: day(2) }), 201);
  ok(await a.call('DELETE', `/booking-data/${gone.id}`), 204);
  const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM booking_assets WHERE booking_id = $1', [gone.id]);
  assert.equal(rows[0]!.n, 0);
});

test('an asset carries one booking at a time: an overlapping range is a 409 naming the other booking', async () => {
  const a = await tenant(ta, 'overlap');
  const b1 = await a.booking({ name: 'first' });
  const b2 = await a.booking({ name: 'second' });
  const box = (await a.asset({})).id;
  ok(await a.link(b1.id, { assetId: box, from: day(10), to: day(20) }), 201);
  for (const [from, to] of [
    [day(10), day(20)],
    [day(5), day(11)],
    [day(19), day(25)],
    [day(12), day(13)],
    [day(1), day(40)],
  ]) {
    const r = await a.link(b2.id, { assetId: box, from, to });
    bad(r, 409, '/from', `${from}..${to}`);
    assert.equal(r.body.code, 'CONFLICT');
    assert.match(
      r.body.message,
      new RegExp(`carries booking data ${b1.id} from ${day(10)} to ${day(20)}, which overlaps ${from}\\.\\.${to}`),
    );
  }
  // The same booking twice over one range is refused too.
  const again = await a.link(b1.id, { assetId: box, from: day(15), to: day(16) });
  bad(again, 409, '/from', 'same booking');
  assert.match(again.body.message, /carries this booking/);
  // Touching ranges are fine, before and after.
  ok(await a.link(b2.id, { assetId: box, from: day(5), to: day(10) }), 201);
  ok(await a.link(b2.id, { assetId: box, from: day(20), to: day(21) }), 201);

  // A booking of an owner the caller does not see stays unnamed: the parent links its child's box.
  const child = await tenant(ta, 'overlap-child', { parentId: a.ownerId });
  const childBox = (await child.asset({})).id;
  const parentsBooking = await a.booking({ name: 'parent-held' });
  ok(await a.link(parentsBooking.id, { assetId: childBox, from: day(1), to: day(3) }), 201);
  const cb = await child.booking({});
  const hidden = await child.link(cb.id, { assetId: childBox, from: day(2), to: day(4) });
  bad(hidden, 409, '/from', "the child meets its parent's booking");
  assert.match(hidden.body.message, /booking data you do not see/);
  assert.ok(!hidden.body.message.includes(parentsBooking.id));

  // Two links of one box at once, over one range: one is stored.
  const box2 = (await a.asset({})).id;
  const both = await Promise.all([b1, b2].map((b) => a.link(b.id, { assetId: box2, from: day(50), to: day(60) })));
  assert.deepEqual(both.map((r) => r.status).sort(), [201, 409], both.map((r) => r.raw).join(' | '));
});

test("another tenant's booking or asset is a 404; a read-only key reads links but cannot write them", async () => {
  const a = await tenant(ta, 'ten-a');
  const b = await tenant(ta, 'ten-b');
  const aBooking = await a.booking({});
  const aBox = (await a.asset({})).id;
  const bBooking = await b.booking({});
  const bBox = (await b.asset({})).id;
  const aLink = ok(await a.link(aBooking.id, { assetId: aBox, from: day(1), to: day(2) }), 201);

  // B's asset on A's booking: 404 naming /assetId, as for an asset that exists nowhere.
  const theirs = await a.link(aBooking.id, { assetId: bBox, from: day(3), to: day(4) });
  bad(theirs, 404, '/assetId', "another tenant's asset");
  const nowhere = await a.link(aBooking.id, { assetId: crypto.randomUUID(), from: day(3), to: day(4) });
  bad(nowhere, 404, '/assetId', 'no such asset');
  assert.equal(theirs.body.message.replace(bBox, 'X'), nowhere.body.message.replace(/asset \S+ not found/, 'asset X not found'));
  // A's booking, seen from B: 404 for every route, the answer for a booking that exists nowhere.
  const ghost = crypto.randomUUID();
  for (const [method, path, body] of [
    ['GET', `/booking-data/${aBooking.id}/assets`],
    ['POST', `/booking-data/${aBooking.id}/assets`, { assetId: bBox, from: day(5), to: day(6) }],
    ['GET', `/booking-data/${aBooking.id}/assets/${aLink.id}`],
    ['DELETE', `/booking-data/${aBooking.id}/assets/${aLink.id}`],
  ] as [string, string, unknown?][]) {
    const r = await b.call(method, path, body);
    bad(r, 404, undefined, `B ${method} ${path}`);
    const g = await b.call(method, path.replace(aBooking.id, ghost), body);
    assert.deepEqual([g.status, g.body.message], [r.status, r.body.message], `${method}: as for a booking nowhere`);
  }
  // B's own booking with A's link id: not there either.
  bad(await b.call('DELETE', `/booking-data/${bBooking.id}/assets/${aLink.id}`), 404, undefined, "A's link under B's booking");
  assert.equal((ok(await a.call('GET', `/booking-data/${aBooking.id}/assets`), 200) as any[]).length, 1, 'unchanged');

  // The parent sees and writes its child's links; links move with their booking.
  const child = await tenant(ta, 'ten-a-child', { parentId: a.ownerId });
  const cBooking = await child.booking({});
  const cBox = (await child.asset({})).id;
  const cl = ok(await a.link(cBooking.id, { assetId: cBox, from: day(1), to: day(2) }), 201, 'parent links for its child');
  assert.equal(ok(await child.call('GET', `/booking-data/${cBooking.id}/assets/${cl.id}`), 200).id, cl.id);
  bad(await child.link(aBooking.id, { assetId: cBox, from: day(7), to: day(8) }), 404, undefined, "the child, on its parent's booking");
  ok(await a.call('PATCH', `/booking-data/${cBooking.id}`, { ownerId: a.ownerId }), 200, 'the parent takes the booking over');
  bad(await child.call('GET', `/booking-data/${cBooking.id}/assets`), 404, undefined, 'gone from the child with its booking');
  const { rows } = await db.query<{ owner_id: string }>('SELECT owner_id FROM booking_assets WHERE id = $1', [cl.id]);
  assert.equal(rows[0]!.owner_id, a.ownerId, "the link follows its booking's owner");

  // Read scope reads, write scope writes.
  const reader = await tenant(ta, 'ten-a-reader', { parentId: a.ownerId, scopes: ['read'] });
  const readerBooking = ok(await a.call('POST', '/booking-data', { type: TYPE, ownerId: reader.ownerId }), 201);
  const readerBox = ok(await a.call('POST', '/assets', { name: 'reader-box', ownerId: reader.ownerId }), 201).id;
  const rl = ok(await a.link(readerBooking.id, { assetId: readerBox, from: day(1), to: day(2) }), 201);
  assert.equal((ok(await reader.call('GET', `/booking-data/${readerBooking.id}/assets`), 200) as any[]).length, 1);
  bad(await reader.link(readerBooking.id, { assetId: readerBox, from: day(3), to: day(4) }), 403, undefined, 'read-only create');
  bad(await reader.call('DELETE', `/booking-data/${readerBooking.id}/assets/${rl.id}`), 403, undefined, 'read-only delete');
});

test(`a booking has at most bookingAssetLinks (${BOUNDS.bookingAssetLinks.value}) links: one more is a 409, nothing saved`, async () => {
  const max = BOUNDS.bookingAssetLinks.value;
  const a = await tenant(ta, 'bound');
  const b = await a.booking({});
  const box = (await a.asset({})).id;
  // All but one made directly (an hour each, back to back), the last through the API.
  await db.query(
    `INSERT INTO booking_assets (id, booking_id, asset_id, owner_id, valid_from, valid_to, who_created)
     SELECT gen_random_uuid(), $1, $2, $3, timestamptz '2020-01-01Z' + make_interval(hours => n), timestamptz '2020-01-01Z' + make_interval(hours => n + 1), 'test'
       FROM generate_series(0, $4::int - 2) n`,
    [b.id, box, a.ownerId, max],
  );
  const last = ok(await a.link(b.id, { assetId: box, from: day(0), to: day(1) }), 201, 'the last one');
  const over = await a.link(b.id, { assetId: box, from: day(2), to: day(3) });
  bad(over, 409, undefined, 'one more');
  assert.equal(over.body.code, 'CONFLICT');
  assert.match(over.body.message, new RegExp(`has ${max} asset links, the most it may have \\(bookingAssetLinks ${max}\\)`));
  const list = ok(await a.call('GET', `/booking-data/${b.id}/assets`), 200) as any[];
  assert.equal(list.length, max, 'all of them, in one answer');
  assert.equal(list.at(-1).id, last.id);
  // Another booking is not held back; a deleted link makes room.
  const other = await a.booking({});
  ok(await a.link(other.id, { assetId: box, from: day(2), to: day(3) }), 201);
  ok(await a.call('DELETE', `/booking-data/${b.id}/assets/${last.id}`), 204);
  ok(await a.link(b.id, { assetId: box, from: day(0), to: day(1) }), 201, 'room again');
});
