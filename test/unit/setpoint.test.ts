// The set point rule of the alert evaluation (src/alerts/evaluation.ts; API guide 8) without a
// database: opt-in, its defaults, the tolerance with binary fractions, once per mismatch, the
// sweep, a changed set point or tolerance, and the same events however the records are split
// between evaluations.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type AlertLimits, type AlertState, Evaluation, rulesOf } from '../../src/alerts/evaluation.js';

const MIN = 60_000;
const T0 = Date.UTC(2026, 10, 1);
const LIMITS: AlertLimits = { maxCodesPerList: 32, maxEventsPerHour: 100 };
let id = 0;
const wants = (temperatureSetpoint: number | null) => ({ cargo: { settings: { temperatureSetpoint } } });
const optIn = (setpoint: Record<string, unknown> = {}) => ({ controller: { setpoint } });
const rules = (setpoint: Record<string, unknown> | null, wanted: number | null = -18) =>
  rulesOf(null, setpoint ? (optIn(setpoint) as never) : null, wants(wanted) as never);
const evaluation = (setpoint: Record<string, unknown> | null, wanted: number | null = -18) =>
  new Evaluation({ c: {}, a: {} } as AlertState, rules(setpoint, wanted), { at: null, id: null }, LIMITS);
/** Readings as [minute, reported set point]. */
const feed = (e: Evaluation, ...readings: [number, unknown][]) => {
  for (const [m, temperatureSetpoint] of readings)
    e.record({ id: String(++id), ownerId: 'o', at: T0 + m * MIN, data: { temperatureSetpoint } });
  return fired(e);
};
const fired = (e: Evaluation) => e.fired.map((f) => `${f.severity} ${f.subject} @${(f.at - T0) / MIN}`);
const OFF = "SETPOINT_MISMATCH: set point -10 differs from the specification's -18 by more than 0.5 °C";

test('opt-in, against a set point the specification holds; defaults: 0.5 °C, 10 minutes, once', () => {
  assert.equal(rulesOf(null, null, wants(-18) as never).size, 0, 'no controller.setpoint: no rule');
  assert.equal(rules({}, null).size, 0, 'no set point in the specification: no rule');
  assert.equal(rulesOf(null, optIn() as never, null).size, 0, 'no settings at all: no rule');
  const e = evaluation({});
  assert.deepEqual(feed(e, [0, -10], [9, -10]), [], 'not before ten minutes');
  assert.deepEqual(feed(e, [10, -10], [60, -10], [600, '-10'], [601, null], [602, -18.5]), [
    `ALERT ${OFF} @10`,
    "INFO SETPOINT_MISMATCH cleared: set point -18.5 matches the specification's -18 @602",
  ]);
  assert.equal(e.fired[1]!.clears, e.fired[0]!.ref, 'the INFO ends the ALERT');
  // A mismatch shorter than the duration raises nothing, nor does its end.
  assert.deepEqual(feed(evaluation({}), [0, -10], [5, -18], [30, -18]), []);
});

test('the tolerance holds at its edge despite binary fractions; 0 means exactly', () => {
  const now = { default: { duration: 0, frequency: 0 } };
  assert.deepEqual(feed(evaluation(now), [0, -17.5], [1, -18.5], [2, -18.49999]), [], '±0.5 is a match');
  assert.deepEqual(feed(evaluation({ ...now, tolerance: 0 }, 0.3), [0, 0.1 + 0.2], [1, 0.3]), [], '0.1 + 0.2 is 0.3');
  assert.deepEqual(feed(evaluation({ ...now, tolerance: 0 }, 5), [0, 5.01]), [
    "ALERT SETPOINT_MISMATCH: set point 5.01 differs from the specification's 5 by more than 0 °C @0",
  ]);
  assert.deepEqual(feed(evaluation({ ...now, tolerance: 0.2 }, -0.1), [0, 0.1], [1, 0.11]), [
    "ALERT SETPOINT_MISMATCH: set point 0.11 differs from the specification's -0.1 by more than 0.2 °C @1",
  ]);
});

test('a frequency repeats it; the sweep raises what fell due on a silent asset, once', () => {
  const e = evaluation({ tolerance: 1, default: { duration: 5, frequency: 60 } });
  assert.deepEqual(feed(e, [0, -10], [5, -10]), [
    "ALERT SETPOINT_MISMATCH: set point -10 differs from the specification's -18 by more than 1 °C @5",
  ]);
  assert.equal(e.nextDue(), T0 + 65 * MIN);
  e.sweep(T0 + 100 * MIN);
  e.sweep(T0 + 100 * MIN);
  assert.deepEqual(fired(e).slice(1), [
    "ALERT SETPOINT_MISMATCH: set point -10 differs from the specification's -18 by more than 1 °C @65",
  ]);
});

test('a changed set point or tolerance re-judges the last reading; dropping the rule ends an alerted mismatch', () => {
  const state = { c: {}, a: {} } as AlertState;
  let e = new Evaluation(state, rules({}), { at: null, id: null }, LIMITS);
  feed(e, [0, -10], [10, -10]);
  const again = (setpoint: Record<string, unknown> | null, wanted: number | null) => {
    e = new Evaluation(state, rules(setpoint, wanted), { at: e.evaluatedAt, id: e.evaluatedId }, LIMITS);
    e.respecify(T0 + 1000 * MIN);
    return fired(e);
  };
  assert.deepEqual(again({}, -10), ["INFO SETPOINT_MISMATCH cleared: set point -10 matches the specification's -10 @10"]);
  // Off again: a mismatch from the last reading, due after the duration.
  assert.deepEqual(again({}, -12), []);
  assert.equal(e.nextDue(), T0 + 20 * MIN);
  assert.deepEqual(feed(e, [20, -10]), [
    "ALERT SETPOINT_MISMATCH: set point -10 differs from the specification's -12 by more than 0.5 °C @20",
  ]);
  assert.deepEqual(again({ tolerance: 2 }, -12), ["INFO SETPOINT_MISMATCH cleared: set point -10 matches the specification's -12 @20"]);
  assert.deepEqual(again({ tolerance: 1, default: { duration: 0, frequency: 0 } }, -12), []);
  assert.deepEqual(feed(e, [21, -10]), [
    "ALERT SETPOINT_MISMATCH: set point -10 differs from the specification's -12 by more than 1 °C @21",
  ]);
  // The specification's set point removed: no rule, and the alerted mismatch ends.
  assert.deepEqual(again({ tolerance: 1 }, null), ['INFO SETPOINT_MISMATCH cleared: the set point is no longer monitored @21']);
  assert.deepEqual(state.c, {});
});

test('replay: the same records in one evaluation or split across several (state saved between) give the same events', () => {
  const course: [number, number][] = [
    [0, -18],
    [3, -10],
    [13, -10],
    [25, -18.3],
    [40, -14],
    [52, -14],
    [85, -14],
    [90, -17.8],
    [100, -25],
    [110, -25],
  ];
  const setpoint = { default: { duration: 10, frequency: 30 } };
  const whole = fired(
    (() => {
      const e = evaluation(setpoint);
      feed(e, ...course);
      return e;
    })(),
  );
  assert.equal(whole.length, 6);
  for (let cut = 1; cut < course.length; cut++) {
    let state = { c: {}, a: {} } as AlertState;
    let at: { at: number | null; id: string | null } = { at: null, id: null };
    const out: string[] = [];
    for (const part of [course.slice(0, cut), course.slice(cut)]) {
      const e = new Evaluation(state, rules(setpoint), at, LIMITS);
      out.push(...feed(e, ...part));
      state = JSON.parse(JSON.stringify(e.state)) as AlertState;
      at = { at: e.evaluatedAt, id: e.evaluatedId };
    }
    assert.deepEqual(out, whole, `split at ${cut}`);
  }
});
