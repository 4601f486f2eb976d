// The set point rule (API guide 8), on both databases: a specification that opts in
// (notification.controller.setpoint) raises a SETPOINT_MISMATCH alert when the reefer's reported set
// point (data.temperatureSetpoint) stays off settings.cargo.settings.temperatureSetpoint by more than
// the tolerance for the duration, once per mismatch, and an INFO that clears it when it matches
// again. Record times and the sweep's clock are the test's, as in test/alerts.test.ts; the same
// records in another order of arrival give the same events.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { bad, customer, ok, startApp } from './helpers.js';

const ta = await startApp(undefined, {
  RATE_LIMIT_MAX: '100000',
  // The sweep runs only when a test calls it, with the test's clock.
  ALERT_SWEEP_SECONDS: '3600',
  ALERT_SILENCE_SECONDS: '3600',
  DB_POOL_SIZE: '4',
});
const { alerts } = ta.app.services;
/** The test's clock: hours on from now, past the sweep's guard for assets heard from lately. */
const later = (hours = 2) => new Date(Date.now() + hours * 3600_000);
/** Whole minutes a few days back: record time the tests own. */
const BASE = Math.floor(Date.now() / 60_000) * 60_000 - 3 * 86400_000;
const at = (minutes: number) => new Date(BASE + minutes * 60_000).toISOString().replace(/\.\d{3}Z$/, 'Z');
const minuteOf = (iso: string) => (Date.parse(iso) - BASE) / 60_000;

/** A reading: [minute, reported set point]. */
type Reading = [number, number];

let n = 0;
async function tenant(label = 'setpoint') {
  const c = await customer(ta, label, { base: '/api/v1' });
  const asset = (): Promise<string> => c.asset(`${label}-${++n}`);
  /** A REEFER specification wanting `wanted` (null: none), with `setpoint` as its notification.controller.setpoint. */
  const spec = async (assetId: string, wanted: number | null, setpoint?: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    ok(
      await c.call('POST', '/specifications', {
        assetId,
        type: 'REEFER',
        name: 'Frozen',
        settings: { cargo: { settings: { temperatureSetpoint: wanted } } },
        ...(setpoint ? { notification: { controller: { setpoint } } } : {}),
        ...extra,
      }),
      201,
      'specification',
    );
  /** Posts readings as one bulk, in the order given. */
  const reefer = async (assetId: string, ...readings: Reading[]) =>
    ok(
      await c.call(
        'POST',
        '/reefer-data',
        readings.map(([m, temperatureSetpoint]) => ({ assetId, whenCreated: at(m), data: { temperatureSetpoint } })),
      ),
      201,
      'reefer data',
    );
  /** Each reading in a request of its own, in the order given. */
  const oneByOne = async (assetId: string, readings: Reading[]) => {
    for (const r of readings) await reefer(assetId, r);
  };
  const eventsOf = async (assetId: string): Promise<any[]> =>
    ok(await c.call('GET', `/events?assetId=${assetId}&order=asc&limit=1000`), 200, 'events');
  /** Events of an asset, oldest first, as "SEVERITY subject @minute". */
  const events = async (assetId: string): Promise<string[]> =>
    (await eventsOf(assetId)).map((e) => `${e.severity} ${e.subject} @${minuteOf(e.whenCreated)}`);
  const notifications = async (assetId: string): Promise<any[]> =>
    ok(await c.call('GET', `/notifications?assetId=${assetId}&order=asc&limit=1000`), 200, 'notifications');
  return { ...c, asset, spec, reefer, oneByOne, eventsOf, events, notifications };
}

const MISMATCH = "SETPOINT_MISMATCH: set point -10 differs from the specification's -18 by more than 0.5 °C";

test('a mismatch alerts once after its duration (10 minutes by default), not before, and matching again clears it', async () => {
  const a = await tenant();
  const assetId = await a.asset();
  await a.spec(assetId, -18, {});
  await a.oneByOne(assetId, [
    [0, -18],
    [5, -10],
    [10, -10],
    [14, -10],
  ]);
  assert.deepEqual(await a.events(assetId), [], 'nine minutes off raises nothing');
  // A long mismatch: one ALERT (frequency 0), by a reading or by the sweep, never again.
  await a.oneByOne(assetId, [
    [15, -10],
    [30, -10],
    [90, -10],
  ]);
  await alerts.sweep(later());
  await a.oneByOne(assetId, [
    [400, -10],
    [401, -17.6],
    [402, -18],
  ]);
  assert.deepEqual(await a.events(assetId), [
    `ALERT ${MISMATCH} @15`,
    "INFO SETPOINT_MISMATCH cleared: set point -17.6 matches the specification's -18 @401",
  ]);
  const [alert, info] = await a.eventsOf(assetId);
  assert.equal(info.clearsEventId, alert.id, 'the INFO names the ALERT it ends');
  assert.equal(alert.clearedAt, info.whenCreated, "the ALERT is cleared at the INFO's time");
  assert.equal(alert.currentData.value, '-10');
  assert.equal(info.currentData.value, '-17.6');
  const [note] = await a.notifications(assetId);
  assert.equal(note.eventId, alert.id, 'the ALERT has its notification');
  assert.equal(note.subject, MISMATCH);
  assert.equal((await a.notifications(assetId)).length, 1);

  // A mismatch shorter than the duration (five minutes) raises nothing, nor does its end.
  await a.reefer(assetId, [500, -12], [505, -18], [520, -18]);
  assert.equal((await a.events(assetId)).length, 2);
  // The next long one alerts again, once.
  await a.reefer(assetId, [600, 0], [610, 0], [700, 0]);
  assert.deepEqual((await a.events(assetId)).slice(2), [
    "ALERT SETPOINT_MISMATCH: set point 0 differs from the specification's -18 by more than 0.5 °C @610",
  ]);
});

test('the tolerance: a set point within it (at its edge too, -17.5 against -18) is no mismatch; a wider one is kept', async () => {
  const a = await tenant();
  const edge = await a.asset();
  await a.spec(edge, -18, { default: { duration: 0, frequency: 0 } });
  await a.reefer(edge, [0, -17.5], [10, -18.5], [20, -18.2], [30, -17.9]);
  assert.deepEqual(await a.events(edge), [], 'within half a degree');
  await a.reefer(edge, [40, -18.6]);
  assert.deepEqual(await a.events(edge), [
    "ALERT SETPOINT_MISMATCH: set point -18.6 differs from the specification's -18 by more than 0.5 °C @40",
  ]);

  const wide = await a.asset();
  await a.spec(wide, -18, { tolerance: 2.5 });
  await a.reefer(wide, [0, -15.5], [30, -20.5], [60, -16]);
  assert.deepEqual(await a.events(wide), [], 'within 2.5 °C');
  await a.reefer(wide, [70, -15.4], [80, -15.4]);
  assert.deepEqual(await a.events(wide), [
    "ALERT SETPOINT_MISMATCH: set point -15.4 differs from the specification's -18 by more than 2.5 °C @80",
  ]);
});

test('no rule without the opt-in or without a set point in the specification; a record without a set point changes nothing', async () => {
  const a = await tenant();
  const readings: Reading[] = [
    [0, -10],
    [30, -10],
    [120, 5],
  ];
  // The set point and other notification settings, but no controller.setpoint: as before this rule.
  const plain = await a.asset();
  await a.spec(plain, -18, undefined, { notification: { controller: { alarm: { default: { duration: 0, frequency: 0 } } } } });
  // Opted in, but the specification holds no set point (null, or no settings at all).
  const none = await a.asset();
  await a.spec(none, null, {});
  const bare = await a.asset();
  ok(await a.call('POST', '/specifications', { assetId: bare, type: 'REEFER', notification: { controller: { setpoint: {} } } }), 201);
  for (const id of [plain, none, bare]) await a.reefer(id, ...readings);
  await alerts.sweep(later());
  for (const id of [plain, none, bare]) assert.deepEqual(await a.events(id), [], id);

  // A record without data.temperatureSetpoint (or a null one) leaves the mismatch as it was.
  const gaps = await a.asset();
  await a.spec(gaps, -18, {});
  ok(
    await a.call('POST', '/reefer-data', [
      { assetId: gaps, whenCreated: at(0), data: { temperatureSetpoint: -10 } },
      { assetId: gaps, whenCreated: at(5), data: { supplyAirTemperature: -18 } },
      { assetId: gaps, whenCreated: at(8), data: { temperatureSetpoint: null } },
      { assetId: gaps, whenCreated: at(10), data: { temperatureSetpoint: -10 } },
    ]),
    201,
  );
  assert.deepEqual(await a.events(gaps), [`ALERT ${MISMATCH} @10`]);
});

/** Two mismatches, the second repeating every 30 minutes, and ending in an open one the sweep repeats. */
const COURSE: Reading[] = [
  [0, -18],
  [3, -10],
  [8, -10],
  [13, -10],
  [20, -10],
  [25, -18.3],
  [40, -14],
  [45, -14],
  [52, -14],
  [60, -14],
  [85, -14],
  [90, -17.8],
  [100, -25],
  [110, -25],
  [115, -25],
];

test('replay-exact: the same records, one by one, in one reversed bulk or in two shuffled bulks, give the same events', async () => {
  const a = await tenant();
  const setpoint = { tolerance: 0.5, default: { duration: 10, frequency: 30 } };
  const [inOrder, reversed, shuffled] = [await a.asset(), await a.asset(), await a.asset()];
  for (const id of [inOrder, reversed, shuffled]) await a.spec(id, -18, setpoint);
  await a.oneByOne(inOrder, COURSE);
  await a.reefer(reversed, ...[...COURSE].reverse());
  // Two bulks, each out of order within itself; the second holds only records after the first's
  // (a record older than its asset's newest evaluated one is stored, not evaluated: API guide 8).
  const first = COURSE.filter(([m]) => m <= 45);
  const second = COURSE.filter(([m]) => m > 45);
  const shuffle = (rs: Reading[]) =>
    rs
      .map((r, i) => [r, (i * 7) % rs.length] as const)
      .sort((x, y) => x[1] - y[1])
      .map(([r]) => r);
  await a.reefer(shuffled, ...shuffle(first));
  await a.reefer(shuffled, ...shuffle(second));
  // The last mismatch is still open (alerted at 110): the sweep raises its repeat, due at 140.
  await alerts.sweep(later());

  const expected = [
    "ALERT SETPOINT_MISMATCH: set point -10 differs from the specification's -18 by more than 0.5 °C @13",
    "INFO SETPOINT_MISMATCH cleared: set point -18.3 matches the specification's -18 @25",
    "ALERT SETPOINT_MISMATCH: set point -14 differs from the specification's -18 by more than 0.5 °C @52",
    "ALERT SETPOINT_MISMATCH: set point -14 differs from the specification's -18 by more than 0.5 °C @85",
    "INFO SETPOINT_MISMATCH cleared: set point -17.8 matches the specification's -18 @90",
    "ALERT SETPOINT_MISMATCH: set point -25 differs from the specification's -18 by more than 0.5 °C @110",
    "ALERT SETPOINT_MISMATCH: set point -25 differs from the specification's -18 by more than 0.5 °C @140",
  ];
  /** What must not depend on the order of arrival: subject, severity, record time, and which ALERT each INFO clears. */
  const shape = async (assetId: string) => {
    const events = await a.eventsOf(assetId);
    const index = new Map(events.map((e, i) => [e.id, i]));
    return events.map((e) => ({
      severity: e.severity,
      subject: e.subject,
      whenCreated: e.whenCreated,
      clears: e.clearsEventId === null ? null : index.get(e.clearsEventId),
      cleared: e.clearedAt,
    }));
  };
  assert.deepEqual(await a.events(inOrder), expected);
  const want = await shape(inOrder);
  assert.deepEqual(
    want.map((e) => e.clears),
    [null, 0, null, null, 3, null, null],
    'each INFO clears the latest ALERT of its mismatch',
  );
  assert.deepEqual(await shape(reversed), want, 'one reversed bulk');
  assert.deepEqual(await shape(shuffled), want, 'two shuffled bulks');

  // A late record (older than the newest evaluated) is stored and not evaluated: nothing changes.
  await a.reefer(inOrder, [50, -18]);
  assert.deepEqual(await shape(inOrder), want);
});

test('a changed specification re-judges the last set point: a new set point or tolerance ends or starts a mismatch', async () => {
  const a = await tenant();
  const assetId = await a.asset();
  const spec = await a.spec(assetId, -18, {});
  const patch = async (body: unknown) => ok(await a.call('PATCH', `/specifications/${spec.id}`, body), 200, 'patch');
  await a.reefer(assetId, [0, -10], [10, -10]);
  assert.deepEqual(await a.events(assetId), [`ALERT ${MISMATCH} @10`]);
  // The specification's set point moves to the reported one: the mismatch ends, dated at the newest record.
  await patch({ settings: { cargo: { settings: { temperatureSetpoint: -10 } } } });
  assert.deepEqual((await a.events(assetId)).slice(1), [
    "INFO SETPOINT_MISMATCH cleared: set point -10 matches the specification's -10 @10",
  ]);
  const [alert, info] = await a.eventsOf(assetId);
  assert.equal(info.clearsEventId, alert.id);
  assert.equal(alert.clearedAt, info.whenCreated);

  // Moved away again: a mismatch from the last reading (minute 10), due ten minutes on.
  await patch({ settings: { cargo: { settings: { temperatureSetpoint: -12 } } } });
  assert.equal((await a.events(assetId)).length, 2, 'not yet due');
  await a.reefer(assetId, [20, -10]);
  assert.deepEqual((await a.events(assetId)).slice(2), [
    "ALERT SETPOINT_MISMATCH: set point -10 differs from the specification's -12 by more than 0.5 °C @20",
  ]);
  // A wider tolerance accepts it.
  await patch({ notification: { controller: { setpoint: { tolerance: 2 } } } });
  assert.deepEqual((await a.events(assetId)).slice(3), [
    "INFO SETPOINT_MISMATCH cleared: set point -10 matches the specification's -12 @20",
  ]);
  // A narrower one refuses it again; turning the rule off ends that mismatch.
  await patch({ notification: { controller: { setpoint: { tolerance: 0, default: { duration: 0, frequency: 0 } } } } });
  await a.reefer(assetId, [25, -10]);
  await patch({ notification: { controller: { setpoint: null } } });
  assert.deepEqual((await a.events(assetId)).slice(4), [
    "ALERT SETPOINT_MISMATCH: set point -10 differs from the specification's -12 by more than 0 °C @25",
    'INFO SETPOINT_MISMATCH cleared: the set point is no longer monitored @25',
  ]);
  await a.reefer(assetId, [60, 3], [90, 3]);
  assert.equal((await a.events(assetId)).length, 6, 'off: nothing more');
});

test('validation: the tolerance and timing are checked (400 naming the member); the settings read back as given', async () => {
  const a = await tenant();
  const assetId = await a.asset();
  const body = (setpoint: unknown) => ({
    assetId,
    type: 'REEFER',
    settings: { cargo: { settings: { temperatureSetpoint: -18 } } },
    notification: { controller: { setpoint } },
  });
  const path = '/notification/controller/setpoint';
  const cases: [unknown, string][] = [
    [{ tolerance: -0.5 }, `${path}/tolerance`],
    [{ tolerance: '0.5' }, `${path}/tolerance`],
    [{ tolerance: 51 }, `${path}/tolerance`],
    [{ tolerance: null }, `${path}/tolerance`],
    [{ default: { duration: -1, frequency: 0 } }, `${path}/default/duration`],
    [{ default: { duration: 0.001, frequency: 0 } }, `${path}/default/duration`],
    [{ default: { duration: 5 } }, `${path}/default/frequency`],
    [{ margin: 1 }, `${path}/margin`],
    [true, path],
  ];
  for (const [setpoint, field] of cases) bad(await a.call('POST', '/specifications', body(setpoint)), 400, field, JSON.stringify(setpoint));
  assert.equal(ok(await a.call('GET', '/specifications'), 200).length, 0, 'nothing stored');

  const setpoint = { tolerance: 1.5, default: { duration: 0.5, frequency: 60 } };
  const spec = ok(await a.call('POST', '/specifications', body(setpoint)), 201);
  assert.deepEqual(spec.notification, { controller: { setpoint } });
  // A merge patch is checked whole once merged.
  bad(
    await a.call('PATCH', `/specifications/${spec.id}`, { notification: { controller: { setpoint: { tolerance: 'wide' } } } }),
    400,
    `${path}/tolerance`,
  );
  assert.deepEqual(ok(await a.call('GET', `/specifications/${spec.id}`), 200).notification, { controller: { setpoint } });
});
