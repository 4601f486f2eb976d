// Cleared alerts (API guide 8): the INFO event that ends an alert names its ALERT event
// (clearsEventId), and the ALERT's clearedAt becomes the INFO's whenCreated, written by the same
// statement; for a specification's violation, a silence and a dwell alert, each as stored by one
// write (a bulk: the ALERT stored cleared) and by two; the INFO is pushed naming it. An alert whose
// rule state was kept before alerts were named (no id kept) ends with an INFO that names nothing.
// Record times and the sweep's clock are the test's, as in test/alert-rules.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { alertingReefer, customer, ok, startApp } from './helpers.js';

const ta = await startApp(undefined, {
  RATE_LIMIT_MAX: '100000',
  // The sweep runs only when a test calls it, with the test's clock.
  ALERT_SWEEP_SECONDS: '3600',
  ALERT_SILENCE_SECONDS: '3600',
  DB_POOL_SIZE: '4',
});
const { alerts, db } = ta.app.services;
/** The test's clock: hours on from now, past the sweep's guard for assets heard from lately. */
const later = (hours = 2) => new Date(Date.now() + hours * 3600_000);
/** Whole minutes a few days back: record time the tests own. */
const BASE = Math.floor(Date.now() / 60_000) * 60_000 - 3 * 86400_000;
const at = (minutes: number) => new Date(BASE + minutes * 60_000).toISOString();

type Call = (method: string, path: string, body?: unknown) => Promise<any>;
/** An asset's events, oldest first. */
const eventsOf = async (call: Call, assetId: string): Promise<any[]> =>
  ok(await call('GET', `/events?assetId=${assetId}&order=asc&limit=1000`), 200, 'events');
/** The object the event log holds to push for an event. */
const pushed = async (id: string) =>
  (await db.query<{ payload: any }>(`SELECT payload FROM event_log WHERE object_type = 'event' AND object_id = $1`, [id])).rows[0]?.payload;

/** `alert` is cleared by `info`: both in REST and in what was pushed for the INFO. */
async function assertCleared(call: Call, alert: any, info: any) {
  assert.equal(alert.severity, 'ALERT');
  assert.equal(info.severity, 'INFO');
  assert.equal(info.clearsEventId, alert.id, 'the INFO names the ALERT it ends');
  assert.equal(alert.clearedAt, info.whenCreated, "the ALERT is cleared at the INFO's time");
  assert.equal(alert.clearsEventId, null);
  assert.equal(info.clearedAt, null);
  assert.deepEqual(ok(await call('GET', `/events/${info.id}`), 200), info);
  const push = await pushed(info.id);
  assert.equal(push.clearsEventId, alert.id, 'the INFO is pushed naming it');
  assert.equal(push.clearedAt, null);
}

test('a specification alert: the INFO back in range names it and clears it, also within one bulk; an older state names nothing', async () => {
  const c = await alertingReefer(ta, 'cleared-spec');
  await c.reefer(10, 0);
  await c.reefer(9, -20);
  const [alert, info] = await eventsOf(c.call, c.assetId);
  await assertCleared(c.call, alert, info);
  assert.equal(info.subject, 'supplyAirTemperature back in range (-20)');
  assert.equal((await pushed(alert.id)).clearedAt, null, 'the ALERT was pushed when raised, not again');

  // Both in one bulk (one statement): the ALERT is stored, and pushed, cleared.
  const reading = (minutesAgo: number, supplyAirTemperature: number) => ({
    assetId: c.assetId,
    whenCreated: new Date(Date.now() - minutesAgo * 60_000).toISOString(),
    data: { supplyAirTemperature },
  });
  ok(await c.call('POST', '/reefer-data', [reading(8, 3), reading(7, -15)]), 201, 'bulk');
  const [alert2, info2] = (await eventsOf(c.call, c.assetId)).slice(2);
  await assertCleared(c.call, alert2, info2);
  assert.equal((await pushed(alert2.id)).clearedAt, info2.whenCreated);

  // A violation raised by a state saved before alerts were named (its ALERT's id removed): its INFO names nothing.
  await c.reefer(6, 1);
  await db.query(
    `UPDATE specifications SET alert_state = jsonb_set(alert_state, '{c,supplyAirTemperature}', (alert_state #> '{c,supplyAirTemperature}') - 'e')
      WHERE id = $1`,
    [c.spec.id],
  );
  await c.reefer(5, -20);
  const [alert3, info3] = (await eventsOf(c.call, c.assetId)).slice(4);
  assert.equal(alert3.severity, 'ALERT');
  assert.equal(info3.severity, 'INFO');
  assert.equal(info3.clearsEventId, null);
  assert.equal(alert3.clearedAt, null);
  assert.equal((await pushed(info3.id)).clearsEventId, null);
});

test("a silence: the next record's INFO names the SILENT alert and clears it; a silence alerted before ids were kept names nothing", async () => {
  const c = await customer(ta, 'cleared-silence', { base: '/api/v1' });
  ok(await ta.call('PATCH', `/api/v1/owners/${c.ownerId}`, { token: ta.adminToken, body: { silentAlertMinutes: 60 } }), 200);
  const assetId = await c.asset('cleared-silent');
  const locate = async (minute: number) =>
    ok(await c.call('POST', '/locations', { assetId, latitude: 5, longitude: 0.5, whenCreated: at(minute) }), 201, 'location');
  await locate(0);
  await alerts.sweep(later());
  await locate(120);
  const [alert, info] = await eventsOf(c.call, assetId);
  assert.equal(alert.subject, 'No data for more than 60 minutes');
  assert.equal(info.subject, 'Data again after 120 minutes without');
  await assertCleared(c.call, alert, info);
  const [note] = ok(await c.call('GET', `/notifications?assetId=${assetId}`), 200);
  assert.equal(note.eventId, alert.id);

  // The next silence, as a sweep before this change left it (no ALERT id kept).
  await alerts.sweep(later());
  await db.query('UPDATE asset_activity SET silent_event_id = NULL WHERE asset_id = $1', [assetId]);
  await locate(240);
  const [alert2, info2] = (await eventsOf(c.call, assetId)).slice(2);
  assert.equal(alert2.subject, 'No data for more than 60 minutes');
  assert.equal(info2.subject, 'Data again after 120 minutes without');
  assert.equal(info2.clearsEventId, null);
  assert.equal(alert2.clearedAt, null);
});

test('a dwell alert: the INFO at the end of the visit names it and clears it, by location, in one bulk and after the sweep', async () => {
  const c = await customer(ta, 'cleared-dwell', { base: '/api/v1' });
  ok(
    await c.call('POST', '/zones', {
      name: 'Yard',
      dwellAlertMinutes: 45,
      circle: { latitude: 0.5, longitude: 0.5, radiusMeters: 20_000 },
    }),
    201,
    'zone',
  );
  const IN = 0.5;
  const OUT = 5;
  const location = (assetId: string, latitude: number, minute: number) => ({ assetId, latitude, longitude: 0.5, whenCreated: at(minute) });
  const locate = async (assetId: string, latitude: number, minute: number) =>
    ok(await c.call('POST', '/locations', location(assetId, latitude, minute)), 201, 'location');
  /** The dwell alert and the INFO that ends it after `minutes` (the zone's Entered and Left events left out). */
  const dwell = async (assetId: string, minutes: number): Promise<[any, any]> => {
    const events = (await eventsOf(c.call, assetId)).filter((e) => e.subject.includes('minutes'));
    assert.deepEqual(
      events.map((e) => e.subject),
      ['In zone Yard for more than 45 minutes', `Dwell in zone Yard ended after ${minutes} minutes`],
    );
    return events as [any, any];
  };

  // One location a request: the ALERT at 45 (stored with the location at 50), the end at 70.
  const x = await c.asset('dwell-x');
  await locate(x, IN, 0);
  await locate(x, IN, 50);
  await locate(x, OUT, 70);
  await assertCleared(c.call, ...(await dwell(x, 70)));

  // All in one bulk: one statement stores the ALERT cleared.
  const y = await c.asset('dwell-y');
  ok(await c.call('POST', '/locations', [location(y, IN, 0), location(y, IN, 50), location(y, OUT, 70)]), 201, 'bulk');
  const [alertY, infoY] = await dwell(y, 70);
  await assertCleared(c.call, alertY, infoY);
  assert.equal((await pushed(alertY.id)).clearedAt, infoY.whenCreated, 'pushed as stored: cleared');

  // Raised by the sweep (the asset stopped reporting inside), ended by a location.
  const z = await c.asset('dwell-z');
  await locate(z, IN, 0);
  await alerts.sweep(later());
  await locate(z, OUT, 300);
  await assertCleared(c.call, ...(await dwell(z, 300)));

  // A visit alerted before ids were kept: its end names nothing.
  const w = await c.asset('dwell-w');
  await locate(w, IN, 0);
  await locate(w, IN, 50);
  await db.query('UPDATE zone_visits SET dwell_event_id = NULL WHERE asset_id = $1', [w]);
  await locate(w, OUT, 70);
  const [alertW, infoW] = await dwell(w, 70);
  assert.equal(infoW.clearsEventId, null);
  assert.equal(alertW.clearedAt, null);
});
