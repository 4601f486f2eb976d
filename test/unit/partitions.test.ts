// Partition ranges and names (src/storage/tables.ts): UTC intervals, clipping to the partitions
// that exist, and PostgreSQL's printed bounds read back exactly, years before 100 included.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseBound, parsePgTime, partitionName, periodEnd, periodStart, rangeFor } from '../../src/storage/tables.js';

const t = (iso: string) => Date.parse(iso);

test('intervals: a UTC day, an ISO week from Monday, a month', () => {
  const x = t('2026-11-25T13:14:15Z'); // a Wednesday
  assert.equal(periodStart(x, 'day'), t('2026-11-25T00:00:00Z'));
  assert.equal(periodStart(x, 'week'), t('2026-11-23T00:00:00Z'));
  assert.equal(periodEnd(periodStart(x, 'week'), 'week'), t('2026-11-30T00:00:00Z'));
  assert.equal(periodStart(x, 'month'), t('2026-11-01T00:00:00Z'));
  assert.equal(periodEnd(t('2026-12-01T00:00:00Z'), 'month'), t('2027-01-01T00:00:00Z'));
  assert.equal(periodStart(t('2026-11-23T00:00:00Z'), 'week'), t('2026-11-23T00:00:00Z'), 'a Monday starts its own week');
  assert.equal(periodStart(t('2026-11-29T23:59:59.999Z'), 'week'), t('2026-11-23T00:00:00Z'), 'Sunday ends it');
});

test('years before 100 stay themselves', () => {
  const y1 = parsePgTime('0001-01-01 00:00:00+00');
  assert.equal(new Date(y1).toISOString(), '0001-01-01T00:00:00.000Z');
  assert.equal(new Date(periodStart(y1 + 5, 'month')).toISOString(), '0001-01-01T00:00:00.000Z');
  assert.equal(new Date(periodEnd(periodStart(y1, 'day'), 'day')).toISOString(), '0001-01-02T00:00:00.000Z');
  assert.equal(partitionName('locations', y1), 'locations_p00010101');
});

test("PostgreSQL's printed times and bounds", () => {
  assert.equal(parsePgTime('1971-03-04 10:00:00+00'), t('1971-03-04T10:00:00Z'));
  assert.equal(parsePgTime('1971-03-04 10:00:00.25+01:30'), t('1971-03-04T08:30:00.250Z'));
  assert.equal(parsePgTime("'2026-11-25 00:00:00-05'"), t('2026-11-25T05:00:00Z'));
  assert.ok(Number.isNaN(parsePgTime('infinity')));
  assert.deepEqual(parseBound("FOR VALUES FROM (MINVALUE) TO ('2026-11-30 00:00:00+00')"), {
    lo: -Infinity,
    hi: t('2026-11-30T00:00:00Z'),
  });
  assert.equal(parseBound('DEFAULT'), null);
});

test('a new partition is clipped to the gap the existing ones leave', () => {
  const legacy = { lo: -Infinity, hi: t('2026-11-26T12:00:00Z') };
  assert.deepEqual(rangeFor(t('2026-11-27T01:00:00Z'), [legacy], 'week'), { lo: legacy.hi, hi: t('2026-11-30T00:00:00Z') });
  const next = { lo: t('2026-11-24T00:00:00Z'), hi: t('2026-11-25T00:00:00Z') };
  assert.deepEqual(rangeFor(t('2026-11-23T05:00:00Z'), [next], 'week'), { lo: t('2026-11-23T00:00:00Z'), hi: next.lo });
  assert.equal(partitionName('event_log', t('2026-11-26T12:00:00Z')), 'event_log_p20261126_1200');
});
