// The rollups' parts (src/rollups/parts.ts): exact decimal sums in any order, record times to the
// microsecond, and the combining of parts in time order, interleaving ones refused.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  combine,
  decAdd,
  decodeParts,
  decOf,
  decParse,
  decText,
  encodeParts,
  encodeStore,
  epochMicros,
  type Part,
  partsOf,
} from '../../src/rollups/parts.js';

test('sums are exact decimals of each value’s shortest form, the same in any order', () => {
  const values = [0.1, 0.2, 1 / 3, 1e-7, -2.5e-8, 1.5e21, -0, 123.456, -1.25];
  const sum = (vs: number[]) => decText(vs.map(decOf).reduce(decAdd));
  assert.equal(decText(decOf(0.1)), '0.1');
  assert.equal(decText(decOf(1e-7)), '0.0000001');
  assert.equal(decText(decOf(-2.5e-8)), '-0.000000025');
  assert.equal(decText(decOf(1.5e21)), '1500000000000000000000');
  assert.equal(sum([0.1, 0.2]), '0.3', 'not 0.30000000000000004');
  // Past 2^53 the mantissa goes on as a bigint.
  assert.equal(sum([99999999999999.9, 0.01]), '99999999999999.91');
  assert.equal(
    sum([
      999999999999999, 999999999999999, 999999999999999, 999999999999999, 999999999999999, 999999999999999, 999999999999999,
      999999999999999, 999999999999999, 999999999999999,
    ]),
    '9999999999999990',
  );
  const forward = sum(values);
  assert.equal(sum([...values].reverse()), forward);
  assert.equal(sum([values[4]!, values[0]!, values[7]!, values[2]!, values[1]!, values[8]!, values[3]!, values[6]!, values[5]!]), forward);
  assert.equal(decText(decParse(forward)), forward);
  assert.equal(decText(decParse('-0.05')), '-0.05');
});

test('record times keep their microseconds, in any zone', () => {
  assert.equal(epochMicros('2026-11-01T10:00:00Z'), Date.parse('2026-11-01T10:00:00Z') * 1000);
  assert.equal(epochMicros('2026-11-01T10:00:00.123456Z'), Date.parse('2026-11-01T10:00:00Z') * 1000 + 123_456);
  assert.equal(epochMicros('2026-11-01T12:00:00.5+02:00'), Date.parse('2026-11-01T10:00:00Z') * 1000 + 500_000);
  assert.equal(epochMicros('1969-12-31T23:59:59.25Z'), -750_000);
});

const asset = '00000000-0000-4000-8000-000000000001';
const owner = '00000000-0000-4000-8000-000000000002';
const loc = (id: number, minute: number, lat: number) => ({
  id: String(id),
  at: '',
  ownerId: owner,
  whenCreated: new Date(Date.UTC(2026, 10, 1, 10, minute)).toISOString(),
  time: new Date(Date.UTC(2026, 10, 1, 10, minute)),
  item: { assetId: asset, latitude: lat, longitude: 5 },
});

test('parts combine in time order: distance and longest step across them; interleaving parts leave those loose', () => {
  const whole = partsOf('location', [loc(1, 0, 1), loc(2, 10, 1.01), loc(3, 20, 1.02), loc(4, 30, 1.03)]);
  const a = partsOf('location', [loc(1, 0, 1), loc(2, 10, 1.01)]);
  const b = partsOf('location', [loc(3, 20, 1.02), loc(4, 30, 1.03)]);
  assert.deepEqual(combine([b[0]!, a[0]!]), whole[0]);
  // Through JSON (a batch) and back.
  assert.deepEqual(combine(decodeParts(encodeParts([a[0]!, b[0]!]))), whole[0]);
  const inside = partsOf('location', [loc(5, 15, 2)]);
  const loose = combine([whole[0]!, inside[0]!]);
  assert.equal(loose.loose, true, 'a position between stored ones');
  assert.equal(loose.n, 5);
  assert.deepEqual([loose.first, loose.last, loose.lastId], [whole[0]!.first, whole[0]!.last, 4n]);
  assert.equal(decodeParts(encodeParts([loose]))[0]!.loose, true);
  const reefer = (id: number, minute: number) => ({
    ...loc(id, minute, 0),
    item: { assetId: asset, data: { supplyAirTemperature: minute / 10 } },
  });
  const r1 = partsOf('reeferdata', [reefer(1, 0), reefer(2, 5)])[0]!;
  const r2 = partsOf('reeferdata', [reefer(3, 30)])[0]!;
  const r = combine([r1, r2]);
  assert.equal(r.step, 25 * 60_000_000, 'the longest step is the one between the parts');
  assert.deepEqual(
    [...r.stats!].map(([k, s]) => [k, s.n, s.min, s.max, decText(s.sum!)]),
    [['supplyAirTemperature', 3, 0, 3, '3.5']],
  );
});

test('a store’s batch, encoded straight, is what its parts encode: one record alone or several of an hour', () => {
  const other = '00000000-0000-4000-8000-000000000003';
  const rows = [
    loc(1, 0, 1),
    { ...loc(2, 5, 2), item: { assetId: other, latitude: 2.1234567, longitude: -179.9999999 } },
    loc(3, 10, 1.01),
    { ...loc(4, 70, 1.5), whenCreated: '2026-11-01T11:10:00.123456Z' },
  ];
  const reefers = rows.map((r, i) => ({
    ...r,
    item: {
      assetId: r.item.assetId,
      data: { supplyAirTemperature: i / 3, cargo: { sensors: { returnAirTemperature: 1e-7 * i } }, note: 'x' },
    },
  }));
  const sensors = rows.map((r, i) => ({
    ...r,
    item: { assetId: r.item.assetId, sensorId: 's', type: 'TEMPERATURE', value: i === 1 ? 'OPEN' : i * 0.1 },
  }));
  const key = (p: Part) => `${p.asset}|${p.hour}`;
  const sorted = (ps: Part[]) => ps.sort((a, b) => (key(a) < key(b) ? -1 : 1));
  for (const [type, list] of [
    ['location', rows],
    ['reeferdata', reefers],
    ['sensordata', sensors],
    ['oemdata', rows],
  ] as const) {
    assert.deepEqual(
      sorted(decodeParts(encodeStore(type, list as any))),
      sorted(decodeParts(encodeParts(partsOf(type, list as any)))),
      type,
    );
  }
});
