// The alert evaluation (src/alerts/evaluation.ts; API guide 8) without a database: record time, a
// violation's duration and repeats, alarm codes, the sweep of a silent asset, a changed
// specification, the hourly ceiling, and timings that could break the date arithmetic.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type AlertLimits, type AlertState, Evaluation, rulesOf } from '../../src/alerts/evaluation.js';

const MIN = 60_000;
const T0 = Date.UTC(2026, 10, 1);
const LIMITS: AlertLimits = { maxCodesPerList: 32, maxEventsPerHour: 100 };
let id = 0;
const evaluation = (ranges: unknown, notification: unknown = null, limits = LIMITS) =>
  new Evaluation({ c: {}, a: {} } as AlertState, rulesOf(ranges as never, notification as never), { at: null, id: null }, limits);
const feed = (e: Evaluation, ...readings: [number, Record<string, unknown>][]) => {
  for (const [m, data] of readings) e.record({ id: String(++id), ownerId: 'o', at: T0 + m * MIN, data });
  return e.fired.map((f) => `${f.severity} ${f.subject} @${(f.at - T0) / MIN}`);
};
const supplyAir = (range: (number | null)[]) => ({ cargo: { sensors: { supplyAirTemperature: range } } });

test('a violation alerts once it has lasted its duration, again every frequency, and its end is INFO', () => {
  const e = evaluation(supplyAir([0, 5, 10, 30]));
  const fired = feed(
    e,
    [0, { supplyAirTemperature: 9 }],
    [5, { supplyAirTemperature: 9 }],
    [10, { supplyAirTemperature: 9.5 }],
    [39, { supplyAirTemperature: 9 }],
    [40, { supplyAirTemperature: 9 }],
    [45, { supplyAirTemperature: 4 }],
  );
  assert.deepEqual(fired, [
    'ALERT supplyAirTemperature 9.5 above maximum 5 @10',
    'ALERT supplyAirTemperature 9 above maximum 5 @40',
    'INFO supplyAirTemperature back in range (4) @45',
  ]);
  // A spike shorter than the duration raises nothing; older records are not evaluated.
  const spike = evaluation(supplyAir([0, 5, 10, 0]));
  assert.deepEqual(feed(spike, [0, { supplyAirTemperature: 9 }], [5, { supplyAirTemperature: 3 }]), []);
  assert.equal(spike.record({ id: '1', ownerId: 'o', at: T0, data: { supplyAirTemperature: 99 } }), false);
});

test('each alarm code is its own violation; a code gone from the list clears; at most maxCodesPerList are read', () => {
  const e = evaluation(null, { controller: { alarm: { default: { duration: 0, frequency: 0 } } } }, { ...LIMITS, maxCodesPerList: 2 });
  assert.deepEqual(feed(e, [0, { alarms: ['A1', 7, 'A3'] }], [1, { alarms: [7] }]), [
    'ALERT Alarm A1 active @0',
    'ALERT Alarm 7 active @0',
    'INFO Alarm A1 cleared @1',
  ]);
});

test('a silent asset: the sweep raises what fell due as if the last reading persisted, once', () => {
  const e = evaluation(supplyAir([null, 4, 20, 60]));
  feed(e, [0, { supplyAirTemperature: 3 }], [5, { supplyAirTemperature: 9 }]);
  assert.equal(e.nextDue(), T0 + 25 * MIN);
  e.sweep(T0 + 90 * MIN);
  assert.deepEqual(
    e.fired.map((f) => `${f.severity} @${(f.at - T0) / MIN}`),
    ['ALERT @25'],
  );
  assert.equal(e.nextDue(), T0 + 145 * MIN, 'the next repeat on its cadence after the sweep');
  e.sweep(T0 + 90 * MIN);
  assert.equal(e.fired.length, 1, 'a second sweep at the same moment raises nothing');
});

test('a changed specification re-judges the last reading: new bounds end a violation that alerted (INFO)', () => {
  const state = { c: {}, a: {} } as AlertState;
  const before = new Evaluation(state, rulesOf(supplyAir([0, 5, 0, 0]) as never, null), { at: null, id: null }, LIMITS);
  feed(before, [0, { supplyAirTemperature: 9 }]);
  const after = new Evaluation(
    state,
    rulesOf(supplyAir([0, 10, 0, 0]) as never, null),
    { at: before.evaluatedAt, id: before.evaluatedId },
    LIMITS,
  );
  after.respecify(T0 + 10 * MIN);
  assert.deepEqual(
    after.fired.map((f) => `${f.severity} ${f.subject}`),
    ['INFO supplyAirTemperature back in range (9)'],
  );
});

test('past maxEventsPerHour one summary ALERT, then a count when the hour is over; the conditions move on', () => {
  const e = evaluation(null, { controller: { alarm: { default: { duration: 0, frequency: 0 } } } }, { ...LIMITS, maxEventsPerHour: 3 });
  const fired = feed(e, [0, { alarms: ['a', 'b'] }], [1, { alarms: ['c', 'd'] }], [2, { alarms: ['e'] }], [70, { alarms: [] }]);
  assert.deepEqual(fired, [
    'ALERT Alarm a active @0',
    'ALERT Alarm b active @0',
    'ALERT Alarm c active @1',
    'ALERT Alert limit reached: 3 alert events since 2026-11-01T00:00:00Z; more until 2026-11-01T01:00:00Z are counted, not stored @1',
    'INFO 6 more alert events were not stored between 2026-11-01T00:00:00Z and 2026-11-01T01:00:00Z (at most 3 per hour) @60',
    'INFO Alarm e cleared @70',
  ]);
  assert.equal(e.fired.filter((f) => f.summary).length, 2, 'the two summaries (no notification for them)');
  // The count ends the summary ALERT; alarm e's INFO ends nothing stored (its ALERT was only counted).
  const [limit, count, cleared] = e.fired.slice(3);
  assert.ok(limit!.ref && count!.clears === limit!.ref, 'the count names the summary');
  assert.equal(cleared!.clears, undefined);
  assert.equal(e.state.a.w!.e, undefined, "the new hour's window has no summary");
});

test('the INFO that ends a violation names its latest stored ALERT, kept in the state between evaluations', () => {
  const e = evaluation(supplyAir([0, 5, 0, 10]));
  feed(e, [0, { supplyAirTemperature: 9 }], [10, { supplyAirTemperature: 9 }]);
  const [first, repeat] = e.fired;
  assert.deepEqual(first!.ref, { at: T0 });
  assert.deepEqual(repeat!.ref, { at: T0 + 10 * MIN });
  // raise() fills in the ids before the state is written; the state holds the latest.
  first!.ref!.id = '41';
  repeat!.ref!.id = '42';
  const saved = JSON.parse(JSON.stringify(e.state)) as AlertState;
  assert.deepEqual(saved.c.supplyAirTemperature!.e, { at: T0 + 10 * MIN, id: '42' });
  const next = new Evaluation(saved, e.rules, { at: e.evaluatedAt, id: e.evaluatedId }, LIMITS);
  feed(next, [15, { supplyAirTemperature: 4 }]);
  assert.deepEqual(
    next.fired.map((f) => [f.severity, f.clears]),
    [['INFO', { at: T0 + 10 * MIN, id: '42' }]],
  );
  assert.equal(saved.c.supplyAirTemperature!.e, undefined, 'forgotten with the violation');
  // An ALERT and its end in one evaluation: the INFO holds the ALERT's own reference (its id comes later).
  const both = evaluation(supplyAir([0, 5, 0, 0]));
  feed(both, [0, { supplyAirTemperature: 9 }], [1, { supplyAirTemperature: 3 }]);
  assert.equal(both.fired[1]!.clears, both.fired[0]!.ref);
  // A state saved before ALERTs were kept: the INFO names nothing.
  const old = { c: { supplyAirTemperature: { v: '9', at: T0, bad: true, since: T0, n: 1, due: null, last: T0 } }, a: {} } as AlertState;
  const upgraded = new Evaluation(old, rulesOf(supplyAir([0, 5, 0, 0]) as never, null), { at: T0, id: '1' }, LIMITS);
  feed(upgraded, [5, { supplyAirTemperature: 3 }]);
  assert.deepEqual(
    upgraded.fired.map((f) => [f.severity, f.clears]),
    [['INFO', undefined]],
  );
  // A changed specification that ends the violation names it too.
  const state = { c: {}, a: {} } as AlertState;
  const before = new Evaluation(state, rulesOf(supplyAir([0, 5, 0, 0]) as never, null), { at: null, id: null }, LIMITS);
  feed(before, [0, { supplyAirTemperature: 9 }]);
  before.fired[0]!.ref!.id = '7';
  const after = new Evaluation(state, rulesOf(null, null), { at: before.evaluatedAt, id: before.evaluatedId }, LIMITS);
  after.respecify(T0 + MIN);
  assert.deepEqual(after.fired[0]!.clears, { at: T0, id: '7' });
});

test('timings that could break the date arithmetic (a stored 5e-324 minutes) become whole seconds; nothing throws', () => {
  const e = evaluation(supplyAir([0, 5, 0, 5e-324]));
  const fired = feed(e, [0, { supplyAirTemperature: 9 }], [1, { supplyAirTemperature: 9 }], [2, { supplyAirTemperature: 9 }]);
  assert.equal(fired.length, 3, 'one alert per reading: the repeat is due every second');
  const due = e.nextDue();
  assert.ok(due !== null && Number.isFinite(due) && due > T0 + 2 * MIN);
  e.sweep(T0 + 10 * MIN);
  assert.ok(e.fired.every((f) => Number.isFinite(f.at)));
  assert.doesNotThrow(() => new Date(e.nextDue()!).toISOString());
});
