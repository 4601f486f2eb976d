// API guide 4, 5 and 8: specifications and the alert engine, driven
// through the API with time-stamped reefer data (record time, a few days in the past, so every
// due time is already behind the server clock: the sweep is called with the clock the test owns).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Db, Queryable } from '../src/db/db.js';
import { allocateIds } from '../src/db/statement.js';
import { RecordHooks } from '../src/records/hooks.js';
import { ownerPaths } from '../src/eventlog/log.js';
import { customer, startApp, ok, bad } from './helpers.js';

const ta = await startApp(undefined, { RATE_LIMIT_MAX: '100000', RATE_LIMIT_CONCURRENT: '1000', ALERT_SILENCE_SECONDS: '3600' });
const { alerts } = ta.app.services;

/** Whole minutes a few days back: record time the tests own. */
const BASE = Math.floor(Date.now() / 60_000) * 60_000 - 3 * 86400_000;
const at = (minutes: number) => new Date(BASE + minutes * 60_000).toISOString().replace(/\.\d{3}Z$/, 'Z');

let n = 0;
async function tenant(label = 'alerts') {
  const c = await customer(ta, label, { base: '/api/v1' });
  const { call } = c;
  const asset = (name = `reefer-${++n}`): Promise<string> => c.asset(name);
  const spec = async (body: Record<string, unknown>): Promise<any> => ok(await call('POST', '/specifications', body), 201, 'specification');
  /** Posts reefer data: [minute, data] pairs, as one bulk in the given order. */
  const reefer = async (assetId: string, ...items: [number, Record<string, unknown>][]) =>
    ok(
      await call(
        'POST',
        '/reefer-data',
        items.map(([m, data]) => ({ assetId, whenCreated: at(m), data })),
      ),
      201,
      'reefer data',
    );
  /** Events of an asset, oldest first, as "SEVERITY subject @minute". */
  const events = async (assetId: string): Promise<string[]> =>
    ok(await call('GET', `/events?assetId=${assetId}&order=asc&limit=1000`), 200, 'events').map(
      (e: any) => `${e.severity} ${e.subject} @${(Date.parse(e.whenCreated) - BASE) / 60_000}`,
    );
  const notifications = async (assetId: string): Promise<any[]> =>
    ok(await call('GET', `/notifications?assetId=${assetId}&order=asc&limit=1000`), 200, 'notifications');
  return { ...c, asset, spec, reefer, events, notifications };
}

/** A REEFER specification with one cargo range. */
const rangeSpec = (assetId: string, key: string, range: (number | null)[], extra: Record<string, unknown> = {}) => ({
  assetId,
  type: 'REEFER',
  name: 'Frozen cargo',
  ranges: { cargo: { sensors: { [key]: range } } },
  ...extra,
});

test('specification CRUD: assetName, ownerId and whoCreated are filled; one per asset and type; tenancy', async () => {
  const a = await tenant();
  const b = await tenant();
  const assetId = await a.asset('box-1');
  const body = {
    assetId,
    type: 'REEFER',
    name: 'Bananas',
    settings: { cargo: { settings: { temperatureSetpoint: 13.3, humiditySetpoint: 90, co2Setpoint: null } } },
    ranges: {
      cargo: { sensors: { supplyAirTemperature: [12, 15, 30, 60], co2: [null, 8], usda1Temperature: [null, null] } },
      hardware: { sensors: { batteryVoltage: [11.5, null, 5], condenserFanLevel: ['LOW', 'MEDIUM'] } },
    },
    notification: {
      controller: { alarm: { default: { duration: 0, frequency: 120 } }, power: { default: { duration: 15, frequency: 0 } } },
    },
  };
  const created = await a.spec(body);
  assert.equal(created.assetName, 'box-1');
  assert.equal(created.ownerId, a.ownerId);
  assert.match(created.whoCreated, /^apikey:/);
  assert.deepEqual(created.ranges, body.ranges);
  assert.deepEqual(created.settings, body.settings);
  assert.deepEqual(created.notification, body.notification);
  const got = ok(await a.call('GET', `/specifications/${created.id}`), 200);
  assert.deepEqual(got, created);

  // One per asset and type: a second REEFER is a 409; a GENSET one is fine.
  const dup = await a.call('POST', '/specifications', { assetId, type: 'REEFER' });
  bad(dup, 409, '/type');
  assert.equal(dup.body.code, 'CONFLICT');
  const genset = await a.spec({ assetId, type: 'GENSET' });
  assert.equal(ok(await a.call('GET', `/specifications?assetId=${assetId}&type=GENSET`), 200).length, 1);
  assert.equal(ok(await a.call('GET', `/specifications?assetId=${assetId}`), 200).length, 2);

  // Another owner sees nothing and cannot aim a specification at the asset.
  bad(await b.call('GET', `/specifications/${created.id}`), 404, undefined);
  assert.equal(ok(await b.call('GET', '/specifications'), 200).length, 0);
  bad(await b.call('POST', '/specifications', { assetId, type: 'GENSET' }), 404, '/assetId');
  bad(await b.call('PATCH', `/specifications/${created.id}`, { name: 'x' }), 404, undefined);

  // PATCH merges (null removes a member), PUT replaces.
  const patched = ok(
    await a.call('PATCH', `/specifications/${created.id}`, {
      name: 'Bananas 2',
      ranges: { cargo: { sensors: { co2: null, o2: [2, 5] } } },
    }),
    200,
  );
  assert.equal(patched.name, 'Bananas 2');
  assert.deepEqual(patched.ranges.cargo.sensors, { supplyAirTemperature: [12, 15, 30, 60], usda1Temperature: [null, null], o2: [2, 5] });
  assert.deepEqual(patched.ranges.hardware, body.ranges.hardware);
  assert.ok(Date.parse(patched.whenUpdated) >= Date.parse(created.whenUpdated));
  const replaced = ok(await a.call('PUT', `/specifications/${created.id}`, { assetId, type: 'REEFER' }), 200);
  assert.equal(replaced.name, null);
  assert.equal(replaced.ranges, null);
  assert.equal(replaced.whoCreated, created.whoCreated);

  // Renaming the asset shows in assetName (read through the asset).
  ok(await a.call('PATCH', `/assets/${assetId}`, { name: 'box-1b' }), 200);
  assert.equal(ok(await a.call('GET', `/specifications/${created.id}`), 200).assetName, 'box-1b');

  assert.equal((await a.call('DELETE', `/specifications/${genset.id}`)).status, 204);
  bad(await a.call('GET', `/specifications/${genset.id}`), 404, undefined);
  bad(await a.call('GET', '/specifications/not-a-uuid'), 404, undefined);
});

test('malformed specifications are 400 naming the path, and change nothing', async () => {
  const a = await tenant();
  const assetId = await a.asset();
  const cases: [Record<string, unknown>, string][] = [
    [{ type: 'REEFER' }, '/assetId'],
    [{ assetId, type: 'TRUCK' }, '/type'],
    [{ assetId, type: 'REEFER', ranges: { cargo: { sensors: { bogus: [1, 2] } } } }, '/ranges/cargo/sensors/bogus'],
    [{ assetId, type: 'REEFER', ranges: { cargo: { sensors: { batteryVoltage: [1, 2] } } } }, '/ranges/cargo/sensors/batteryVoltage'],
    [{ assetId, type: 'REEFER', ranges: { cargo: { sensors: { co2: [9, 2] } } } }, '/ranges/cargo/sensors/co2'],
    [{ assetId, type: 'REEFER', ranges: { cargo: { sensors: { co2: [1] } } } }, '/ranges/cargo/sensors/co2'],
    [{ assetId, type: 'REEFER', ranges: { cargo: { sensors: { co2: [1, 2, 3, 4, 5] } } } }, '/ranges/cargo/sensors/co2'],
    [{ assetId, type: 'REEFER', ranges: { cargo: { sensors: { co2: [1, 2, -1] } } } }, '/ranges/cargo/sensors/co2/2'],
    [{ assetId, type: 'REEFER', ranges: { cargo: { sensors: { co2: [1, 2, 0, null] } } } }, '/ranges/cargo/sensors/co2/3'],
    [{ assetId, type: 'REEFER', ranges: { cargo: { sensors: { co2: ['1', 2] } } } }, '/ranges/cargo/sensors/co2/0'],
    [
      { assetId, type: 'REEFER', ranges: { hardware: { sensors: { condenserFanLevel: [1, 2] } } } },
      '/ranges/hardware/sensors/condenserFanLevel/0',
    ],
    [{ assetId, type: 'REEFER', ranges: { engine: {} } }, '/ranges/engine'],
    [
      { assetId, type: 'REEFER', notification: { controller: { alarm: { default: { duration: -1, frequency: 0 } } } } },
      '/notification/controller/alarm/default/duration',
    ],
    [
      { assetId, type: 'REEFER', notification: { controller: { alarm: { default: { duration: 1 } } } } },
      '/notification/controller/alarm/default/frequency',
    ],
    [
      { assetId, type: 'REEFER', notification: { controller: { door: { default: { duration: 1, frequency: 1 } } } } },
      '/notification/controller/door',
    ],
    [
      { assetId, type: 'REEFER', settings: { cargo: { settings: { temperatureSetpoint: 'cold' } } } },
      '/settings/cargo/settings/temperatureSetpoint',
    ],
    [{ assetId, type: 'REEFER', name: 'x'.repeat(51) }, '/name'],
  ];
  for (const [body, field] of cases) {
    const r = await a.call('POST', '/specifications', body);
    bad(r, 400, field, JSON.stringify(body));
  }
  assert.equal(ok(await a.call('GET', '/specifications'), 200).length, 0, 'nothing stored');

  // A merge patch is checked whole once merged: the path names the bad member.
  const spec = await a.spec(rangeSpec(assetId, 'co2', [1, 5]));
  bad(
    await a.call('PATCH', `/specifications/${spec.id}`, { ranges: { cargo: { sensors: { co2: [6, 5] } } } }),
    400,
    '/ranges/cargo/sensors/co2',
  );
  bad(
    await a.call('PATCH', `/specifications/${spec.id}`, { ranges: { cargo: { sensors: { nope: [1, 2] } } } }),
    400,
    '/ranges/cargo/sensors/nope',
  );
  bad(await a.call('PATCH', `/specifications/${spec.id}`, { type: null }), 400, '/type');
  assert.deepEqual(ok(await a.call('GET', `/specifications/${spec.id}`), 200).ranges, { cargo: { sensors: { co2: [1, 5] } } });
});

test('a spike shorter than duration raises nothing; a long excursion alerts once, repeats at frequency, and recovery is INFO', async () => {
  const a = await tenant();
  const assetId = await a.asset();
  await a.spec(rangeSpec(assetId, 'supplyAirTemperature', [-25, -15, 10, 30]));
  // Spike: out of range for 6 minutes (< 10), then back.
  await a.reefer(assetId, [0, { supplyAirTemperature: -20 }], [2, { supplyAirTemperature: -5 }], [5, { supplyAirTemperature: -4 }]);
  await a.reefer(assetId, [8, { supplyAirTemperature: -19 }]);
  assert.deepEqual(await a.events(assetId), [], 'a spike raises nothing, and its end is no event');
  assert.equal(await alerts.sweep(new Date(Date.now() + 7200_000)), 0, 'nothing is due');

  // Excursion from minute 20: due at 30, repeats at 60 and 90; back in range at 100.
  const minutes = [20, 25, 29, 30, 31, 45, 59, 60, 61, 89, 92, 95];
  await a.reefer(assetId, ...minutes.map((m): [number, Record<string, unknown>] => [m, { supplyAirTemperature: -10 }]));
  await a.reefer(assetId, [100, { supplyAirTemperature: -18 }], [110, { supplyAirTemperature: -18 }]);
  assert.deepEqual(await a.events(assetId), [
    'ALERT supplyAirTemperature -10 above maximum -15 @30',
    'ALERT supplyAirTemperature -10 above maximum -15 @60',
    'ALERT supplyAirTemperature -10 above maximum -15 @92',
    'INFO supplyAirTemperature back in range (-18) @100',
  ]);
  const list = await a.notifications(assetId);
  assert.equal(list.length, 3, 'every ALERT event has its notification');
  const first = list[0];
  assert.equal(first.type, 'ALERT');
  assert.equal(first.assetId, assetId);
  assert.equal(first.ownerId, a.ownerId);
  assert.equal(first.specificationName, 'Frozen cargo');
  assert.equal(first.whenCreated, at(30));
  assert.equal(first.reeferData.whenCreated, at(30));
  assert.deepEqual(first.reeferData.data, { supplyAirTemperature: -10 });
  const events = ok(await a.call('GET', `/events?assetId=${assetId}&order=asc&severity=ALERT`), 200);
  assert.equal(events.length, 3);
  assert.equal(first.eventId, events[0].id);
  assert.deepEqual(events[0].currentData, { value: '-10', whenCreated: at(30) });
  assert.deepEqual(events[0].prevData, { value: '-10', whenCreated: at(29) });
  assert.deepEqual(ok(await a.call('GET', `/notifications/${first.id}`), 200), first);
  // Another owner sees none of them, in the list or one by one.
  const stranger = await tenant('stranger');
  assert.equal(ok(await stranger.call('GET', `/notifications?assetId=${assetId}`), 200).length, 0);
  bad(await stranger.call('GET', `/notifications/${first.id}`), 404, undefined);
  const info = ok(await a.call('GET', `/events?assetId=${assetId}&severity=INFO`), 200);
  assert.deepEqual(info[0].prevData, { value: '-10', whenCreated: at(95) });
  // from/to filter on whenCreated.
  assert.equal(ok(await a.call('GET', `/notifications?assetId=${assetId}&from=${at(31)}&to=${at(92)}`), 200).length, 1);
});

test('null bounds are unbounded; grouped data is read; frequency 0 alerts once per violation', async () => {
  const a = await tenant();
  const assetId = await a.asset();
  await a.spec({
    assetId,
    type: 'REEFER',
    ranges: { cargo: { sensors: { co2: [null, 5], o2: [2, null] } }, hardware: { sensors: { batteryVoltage: [null, null] } } },
  });
  await a.reefer(
    assetId,
    [0, { co2: -1000, o2: 1000, batteryVoltage: -50 }],
    [1, { cargo: { sensors: { co2: 6 } } }],
    [2, { cargo: { sensors: { co2: 7 } }, o2: 1 }],
    [3, { co2: 7, o2: '3' }],
    [4, { co2: 4 }],
    [5, { co2: 'n/a' }],
    [6, { co2: 9 }],
  );
  assert.deepEqual(await a.events(assetId), [
    'ALERT co2 6 above maximum 5 @1',
    'ALERT o2 1 below minimum 2 @2',
    'INFO o2 back in range (3) @3',
    'INFO co2 back in range (4) @4',
    'ALERT co2 9 above maximum 5 @6',
  ]);
});

test('string levels: a level not in the list alerts, an accepted one recovers', async () => {
  const a = await tenant();
  const assetId = await a.asset();
  await a.spec({ assetId, type: 'REEFER', ranges: { hardware: { sensors: { evaporatorFanLevel: ['LOW', 'HIGH'] } } } });
  await a.reefer(
    assetId,
    [0, { evaporatorFanLevel: 'LOW' }],
    [1, { hardware: { sensors: { evaporatorFanLevel: 'OFF' } } }],
    [2, { evaporatorFanLevel: 'OFF' }],
    [3, { evaporatorFanLevel: 3 }],
    [4, { evaporatorFanLevel: 'HIGH' }],
  );
  assert.deepEqual(await a.events(assetId), [
    'ALERT evaporatorFanLevel level OFF not accepted @1',
    'INFO evaporatorFanLevel level HIGH accepted again @4',
  ]);
});

test('power off and on: assetState follows data.powerOn; an alert after duration; Power back on is INFO', async () => {
  const a = await tenant();
  const assetId = await a.asset();
  await a.spec({ assetId, type: 'REEFER', notification: { controller: { power: { default: { duration: 15, frequency: 0 } } } } });
  await a.reefer(
    assetId,
    [0, { powerOn: true, defrost: true }],
    [10, { powerOn: false }],
    [20, { powerOn: true }],
    [30, { powerOn: false, controlModule: { deviceId: 'cm-1', serial: 'S1', firmwareVersion: '2.1', configuration: { mode: 'x' } } }],
    [44, { powerOn: false }],
    [45, { powerOn: false }],
    [70, { powerOn: false }],
    [80, { powerOn: true }],
  );
  assert.deepEqual(await a.events(assetId), ['ALERT Power off @45', 'INFO Power back on @80']);
  const [note] = await a.notifications(assetId);
  assert.deepEqual(note.assetState, { powerOffSince: at(30), powerOnSince: null, lastDefrost: at(0) });
  assert.deepEqual(note.cmData, {
    deviceId: 'cm-1',
    serial: 'S1',
    ownerId: a.ownerId,
    firmwareVersion: '2.1',
    configuration: '{"mode":"x"}',
    lastUpdated: at(30),
  });
  assert.equal(note.location, null, 'no location yet');
});

test('alarm codes, CA and scheduler alarms: one alert per code, cleared codes are INFO, repeats at frequency', async () => {
  const a = await tenant();
  const assetId = await a.asset();
  await a.spec({
    assetId,
    type: 'REEFER',
    notification: {
      controller: { alarm: { default: { duration: 0, frequency: 60 } }, ca: { default: { duration: 5, frequency: 0 } } },
      controlModule: { scheduler: { default: { duration: 0, frequency: 0 } } },
    },
  });
  await a.reefer(
    assetId,
    [0, { alarms: [], caAlarms: [] }],
    [1, { alarms: ['AL20', 31], caAlarms: ['CA1'], schedulerAlarms: ['S9'] }],
    [2, { alarms: ['AL20', 31], caAlarms: ['CA1'], schedulerAlarms: ['S9'] }],
    [6, { alarms: [31], caAlarms: ['CA1'], schedulerAlarms: [] }],
    [61, { alarms: [31], caAlarms: [] }],
  );
  assert.deepEqual(await a.events(assetId), [
    'ALERT Alarm AL20 active @1',
    'ALERT Alarm 31 active @1',
    'ALERT Scheduler alarm S9 active @1',
    'INFO Alarm AL20 cleared @6',
    'ALERT CA alarm CA1 active @6',
    'INFO Scheduler alarm S9 cleared @6',
    'ALERT Alarm 31 active @61',
    'INFO CA alarm CA1 cleared @61',
  ]);
});

test('late, out-of-order and duplicate records: stored, never a false or duplicate alert', async () => {
  const a = await tenant();
  const assetId = await a.asset();
  await a.spec(rangeSpec(assetId, 'humidity', [60, 95, 10, 0]));
  // One bulk out of order: evaluated in record time order.
  await a.reefer(assetId, [12, { humidity: 50 }], [0, { humidity: 50 }], [5, { humidity: 50 }], [10, { humidity: 50 }]);
  assert.deepEqual(await a.events(assetId), ['ALERT humidity 50 below minimum 60 @10']);
  // Duplicates (same time, same values) and late records (older than minute 12): nothing new.
  await a.reefer(assetId, [12, { humidity: 50 }], [12, { humidity: 50 }]);
  await a.reefer(assetId, [3, { humidity: 80 }], [11, { humidity: 80 }]);
  assert.deepEqual(await a.events(assetId), ['ALERT humidity 50 below minimum 60 @10'], 'late in-range records are not a recovery');
  assert.equal(ok(await a.call('GET', `/reefer-data?assetId=${assetId}&limit=1000`), 200).length, 8, 'every record is stored');
  await a.reefer(assetId, [13, { humidity: 70 }], [13, { humidity: 70 }]);
  assert.deepEqual(await a.events(assetId), ['ALERT humidity 50 below minimum 60 @10', 'INFO humidity back in range (70) @13']);
  assert.equal((await a.notifications(assetId)).length, 1);
});

test('two specifications on different assets, in one bulk, are evaluated apart', async () => {
  const a = await tenant();
  const [x, y] = [await a.asset(), await a.asset()];
  await a.spec(rangeSpec(x, 'co2', [null, 5, 0, 0]));
  await a.spec(rangeSpec(y, 'co2', [null, 10, 0, 0]));
  const body = [0, 1, 2].flatMap((m) => [
    { assetId: x, whenCreated: at(m), data: { co2: 7 } },
    { assetId: y, whenCreated: at(m), data: { co2: 7 + m * 2 } },
  ]);
  ok(await a.call('POST', '/reefer-data', body), 201);
  assert.deepEqual(await a.events(x), ['ALERT co2 7 above maximum 5 @0']);
  assert.deepEqual(await a.events(y), ['ALERT co2 11 above maximum 10 @2']);
  const z = await a.asset();
  ok(await a.call('POST', '/reefer-data', { assetId: z, whenCreated: at(0), data: { co2: 1000 } }), 201);
  assert.deepEqual(await a.events(z), [], 'an asset without a specification raises nothing');
});

test('a specification changed mid-violation: new bounds end it (INFO), a longer duration defers it, new ranges start one', async () => {
  const a = await tenant();
  const assetId = await a.asset();
  const spec = await a.spec(rangeSpec(assetId, 'co2', [null, 5, 0, 30]));
  await a.reefer(assetId, [0, { co2: 7, o2: 1 }]);
  assert.deepEqual(await a.events(assetId), ['ALERT co2 7 above maximum 5 @0']);
  // Widen the range: the last reading is back in range, so the violation ends now.
  ok(await a.call('PATCH', `/specifications/${spec.id}`, { ranges: { cargo: { sensors: { co2: [null, 8, 0, 30] } } } }), 200);
  assert.deepEqual(await a.events(assetId), ['ALERT co2 7 above maximum 5 @0', 'INFO co2 back in range (7) @0']);
  await a.reefer(assetId, [30, { co2: 7 }]);
  assert.equal((await a.events(assetId)).length, 2, 'no repeat once ended');

  // Tighten again with a long duration: the violation starts from the last reading (minute 30).
  ok(await a.call('PATCH', `/specifications/${spec.id}`, { ranges: { cargo: { sensors: { co2: [null, 5, 60, 0], o2: [2, 5] } } } }), 200);
  assert.equal((await a.events(assetId)).length, 2);
  await a.reefer(assetId, [60, { co2: 7, o2: 3 }]);
  assert.equal((await a.events(assetId)).length, 2, 'the duration runs from minute 30');
  await a.reefer(assetId, [90, { co2: 7, o2: 1 }]);
  const last = await a.events(assetId);
  assert.deepEqual(
    last.filter((e) => e.endsWith('@90')).sort(),
    ['ALERT co2 7 above maximum 5 @90', 'ALERT o2 1 below minimum 2 @90'],
    last.join('; '),
  );
});

test('an asset that goes silent mid-violation still notifies when due (the sweep), as if its last reading persisted', async () => {
  const a = await tenant();
  const assetId = await a.asset();
  await a.spec(rangeSpec(assetId, 'returnAirTemperature', [null, 4, 20, 60]));
  await a.reefer(assetId, [0, { returnAirTemperature: 3 }], [5, { returnAirTemperature: 9 }]);
  // The asset was heard just now: the sweep waits for ALERT_SILENCE_SECONDS (an hour here).
  assert.equal(await alerts.sweep(), 0);
  assert.deepEqual(await a.events(assetId), []);
  // An hour and a bit later by the test's clock: due at 25 (duration), then 85, 145, ... in record time.
  const later = new Date(Date.now() + 3700_000);
  assert.ok((await alerts.sweep(later)) >= 1);
  const ev = await a.events(assetId);
  assert.ok(ev.length >= 1);
  assert.equal(ev[0], 'ALERT returnAirTemperature 9 above maximum 4 @25');
  const [note] = await a.notifications(assetId);
  assert.equal(note.whenCreated, at(25));
  assert.equal(note.reeferData.whenCreated, at(5), 'the last reading is the one shown');
  const count = ev.length;
  assert.equal(await alerts.sweep(later), 0, 'a second sweep at the same moment raises nothing');
  assert.equal((await a.events(assetId)).length, count);
  // The asset speaks again: still out of range, no duplicate of what the sweep raised.
  await a.reefer(assetId, [26, { returnAirTemperature: 9 }]);
  assert.equal((await a.events(assetId)).length, count);
});

test("a notification snapshots the latest location at its time, with its first zone's members", async () => {
  const a = await tenant();
  const assetId = await a.asset();
  const zone = ok(
    await a.call('POST', '/zones', {
      name: 'Depot',
      type: 'yard',
      note: 'gate 3',
      circle: { latitude: 10, longitude: 10, radiusMeters: 5000 },
    }),
    201,
  );
  ok(
    await a.call('POST', '/locations', [
      { assetId, latitude: 10, longitude: 10, whenCreated: at(0) },
      { assetId, latitude: 40, longitude: 40, whenCreated: at(50) },
    ]),
    201,
  );
  await a.spec(rangeSpec(assetId, 'co2', [null, 5, 0, 0]));
  await a.reefer(assetId, [10, { co2: 6 }]);
  const [note] = await a.notifications(assetId);
  assert.equal(note.location.whenCreated, at(0), 'the location at the alert time, not a later one');
  assert.equal(note.location.zoneId, zone.id);
  assert.equal(note.location.name, 'Depot');
  assert.equal(note.location.type, 'yard');
  assert.equal(note.location.note, 'gate 3');
  assert.equal(note.location.latitude, 10);
});

test('GENSET specifications evaluate genset data', async () => {
  const a = await tenant();
  const assetId = await a.asset();
  await a.spec({ assetId, type: 'GENSET', ranges: { hardware: { sensors: { fuelLevel: [10, null] } } } });
  ok(await a.call('POST', '/genset-data', { assetId, gensetType: 'SG-3000', whenCreated: at(0), data: { fuelLevel: 5 } }), 201);
  await a.reefer(assetId, [1, { fuelLevel: 1 }]);
  assert.deepEqual(await a.events(assetId), ['ALERT fuelLevel 5 below minimum 10 @0']);
  const [note] = await a.notifications(assetId);
  assert.equal(note.reeferData.gensetType, 'SG-3000');
});

test('a bulk of 1000 records for 100 assets is stored and evaluated in a few statements, writing with one', async () => {
  const a = await tenant();
  const assets: string[] = [];
  for (let i = 0; i < 100; i++) {
    const id = await a.asset();
    assets.push(id);
    await a.spec(rangeSpec(id, 'supplyAirTemperature', [-30, -10, 5, 15]));
  }
  const { db } = ta.app.services;
  const statements: string[] = [];
  const counted = (q: Queryable): Queryable => ({
    query: (sql: string, params?: unknown[]) => {
      statements.push(sql);
      return q.query(sql, params);
    },
  });
  // The store as the route runs it, with the alert hook alone and the database's calls counted.
  const countedDb: Db = { ...db, ...counted(db), serialized: (keys, fn) => db.serialized(keys, (q, atomic) => fn(counted(q), atomic)) };
  const batch = assets.flatMap((assetId) =>
    Array.from({ length: 10 }, (_, g) => ({
      item: { assetId, data: { supplyAirTemperature: g < 7 ? 0 : -20 } },
      at: '',
      ownerId: a.ownerId,
      whenCreated: at(g),
    })),
  );
  const ids = await allocateIds(db, 'reefer_data', batch.length);
  const paths = await ownerPaths(db, [a.ownerId]);
  const hooks = new RecordHooks().register(alerts.hook('reeferdata'));
  const rows = await hooks.store(
    countedDb,
    'reeferdata',
    batch,
    ids,
    (stmt, rows) => {
      const columns = stmt.arrays(rows, [
        [(r) => r.id, 'int8'],
        [(r) => r.item.assetId, 'uuid'],
        [(r) => r.ownerId, 'uuid'],
        [(r) => r.whenCreated, 'timestamptz'],
        [(r) => JSON.stringify(r.item.data), 'jsonb'],
      ]);
      const records = stmt.with(
        `INSERT INTO reefer_data (id, asset_id, owner_id, when_created, data) OVERRIDING SYSTEM VALUE
       SELECT * FROM unnest(${columns}) RETURNING *`,
        'i',
      );
      return { records, final: 'SELECT * FROM i' };
    },
    paths,
  );
  assert.equal(rows.length, 1000);
  assert.ok(statements.length <= 4, statements.join('\n---\n'));
  const writes = statements.filter((s) => /\b(INSERT|UPDATE)\b/.test(s));
  assert.equal(writes.length, 1, 'one statement writes the records, the states, the events and the notifications');
  const ev = ok(await a.call('GET', `/events?assetId=${assets[0]}&order=asc`), 200);
  assert.ok(ev.length > 0, 'violations over 5 minutes alerted');
  const notes = ok(await a.call('GET', `/notifications?assetId=${assets[0]}`), 200);
  assert.ok(notes.length > 0, 'a notification');
  // Its record was stored by the same statement (invisible in the table to that statement's reads).
  assert.ok(ids.slice(0, 10).includes(notes[0].reeferData?.id), `the notification shows a record of the batch: ${notes[0].reeferData?.id}`);
});

test('the records module imports neither zones nor alerts: they plug in through its hooks', async () => {
  const fs = await import('node:fs/promises');
  for (const file of await fs.readdir('src/records')) {
    const text = await fs.readFile(`src/records/${file}`, 'utf8');
    const imports = [...text.matchAll(/from '([^']+)'/g)].map((m) => m[1]!);
    assert.deepEqual(
      imports.filter((i) => /\/(zones|alerts|events)\//.test(i)),
      [],
      `src/records/${file}`,
    );
  }
});
