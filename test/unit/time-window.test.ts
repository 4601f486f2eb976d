// The record time window (src/records/time-window.ts) and the device times it is given
// (src/ingest/values.ts timeOf): its edges, what JavaScript cannot hold, and the fields named.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ApiError } from '../../src/http/errors.js';
import { timeOf } from '../../src/ingest/values.js';
import { checkRecordTime, recordTimeWindow } from '../../src/records/time-window.js';

const DAY = 86_400_000;
const cfg = { RECORD_MAX_AGE_DAYS: 366, FUTURE_TOLERANCE_SECONDS: 600 };
const now = Date.parse('2026-11-27T12:00:00Z');

const refused = (fn: () => unknown, field: string, message: RegExp) =>
  assert.throws(fn, (e: ApiError) => e.status === 400 && e.extra.field === field && message.test(e.message));

test('the window: RECORD_MAX_AGE_DAYS back and FUTURE_TOLERANCE_SECONDS ahead, both edges inside', () => {
  assert.deepEqual(recordTimeWindow(cfg, now), { earliest: now - 366 * DAY, latest: now + 600_000 });
  checkRecordTime(cfg, now - 366 * DAY, '/whenCreated', now);
  checkRecordTime(cfg, new Date(now + 600_000).toISOString(), '/whenCreated', now);
  refused(() => checkRecordTime(cfg, now - 366 * DAY - 1, '/3/whenCreated', now), '/3/whenCreated', /RECORD_MAX_AGE_DAYS/);
  refused(() => checkRecordTime(cfg, now + 600_001, '/timestamp', now), '/timestamp', /FUTURE_TOLERANCE_SECONDS/);
  refused(() => checkRecordTime(cfg, '0000-01-01T00:00:00Z', '/position/fixTime', now), '/position/fixTime', /in the past/);
  refused(() => checkRecordTime(cfg, '9999-12-31T23:59:59Z', '/whenCreated', now), '/whenCreated', /in the future/);
  refused(() => checkRecordTime(cfg, 'not a time', '/whenCreated', now), '/whenCreated', /not a time/);
  refused(() => checkRecordTime(cfg, 1e20, '/timestamp', now), '/timestamp', /not a time/);
});

test('timeOf: a number past what a JavaScript date holds is a 400 naming the field (it was a RangeError, a 500)', () => {
  refused(() => timeOf('99999999999999999999', '/timestamp'), '/timestamp', /Unix seconds/);
  refused(() => timeOf('8640000000000001', '/timestamp'), '/timestamp', /Unix seconds/);
  assert.equal(timeOf('8640000000000000', '/timestamp'), '+275760-09-13T00:00:00.000Z', 'the last one it holds (the window refuses it)');
  assert.equal(timeOf('0000-01-01 00:00:00', '/timestamp'), '0000-01-01T00:00:00.000Z', 'year 0000 is read; the window refuses it');
});
