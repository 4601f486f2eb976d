// The silence and zone rules of the alert engine (API guide 8), on the test's own clock: record
// times the test picks, and the sweep run with a `now` it picks (the background sweep is kept out of
// the way). Silence inherited from owners and overridden on assets; dwell alerts raised and cleared;
// enterAfterSeconds / leaveAfterSeconds holding zone events back, a pass-by raising nothing; the
// zone visits they all come from.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { customer, ok, startApp } from './helpers.js';

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
const at = (minutes: number) => new Date(BASE + minutes * 60_000).toISOString().replace(/\.\d{3}Z$/, 'Z');
const minuteOf = (iso: string) => (Date.parse(iso) - BASE) / 60_000;

async function tenant(label: string, owner: Record<string, unknown> = {}) {
  const c = await customer(ta, label, { base: '/api/v1' });
  if (Object.keys(owner).length) ok(await ta.call('PATCH', `/api/v1/owners/${c.ownerId}`, { token: ta.adminToken, body: owner }), 200);
  const locate = async (assetId: string, latitude: number, minute: number) =>
    ok(await c.call('POST', '/locations', { assetId, latitude, longitude: 0.5, whenCreated: at(minute) }), 201, 'location');
  /** Events of an asset, oldest first, as "SEVERITY subject @minute". */
  const events = async (assetId: string): Promise<string[]> =>
    ok(await c.call('GET', `/events?assetId=${assetId}&order=asc&limit=1000`), 200).map(
      (e: any) => `${e.severity} ${e.subject} @${minuteOf(e.whenCreated)}`,
    );
  const notifications = async (assetId: string): Promise<any[]> =>
    ok(await c.call('GET', `/notifications?assetId=${assetId}&order=asc&limit=1000`), 200);
  const zone = async (body: Record<string, unknown>) =>
    ok(
      await c.call('POST', '/zones', {
        circle: { latitude: 0.5, longitude: 0.5, radiusMeters: 20_000 },
        ...body,
      }),
      201,
      'zone',
    );
  return { ...c, locate, events, notifications, zone };
}

const IN = 0.5;
const OUT = 5;

test('silence: inherited from the owner, overridden on the asset, raised by the sweep once, cleared by the next record of any type', async () => {
  const a = await tenant('silent', { silentAlertMinutes: 60 });
  const owner = ok(await a.call('GET', `/owners/${a.ownerId}`), 200);
  assert.equal(owner.silentAlertMinutes, 60);
  assert.equal(owner.effectiveSilentAlertMinutes, 60);
  const child = await tenant('silent-child', {}).then(async (c) => {
    ok(await ta.call('PATCH', `/api/v1/owners/${c.ownerId}`, { token: ta.adminToken, body: { ownerId: a.ownerId } }), 200);
    return c;
  });
  const inherits = await child.asset('inherits');
  const own = ok(await child.call('POST', '/assets', { name: 'own', silentAlertMinutes: 30 }), 201);
  const off = ok(await child.call('POST', '/assets', { name: 'off', silentAlertMinutes: 0 }), 201);
  assert.equal(ok(await child.call('GET', `/assets/${inherits}`), 200).effectiveSilentAlertMinutes, 60, 'from the parent owner');
  assert.equal(own.effectiveSilentAlertMinutes, 30);
  assert.equal(off.silentAlertMinutes, 0);
  assert.equal(off.effectiveSilentAlertMinutes, null, '0 turns it off');
  for (const id of [inherits, own.id, off.id]) await child.locate(id, OUT, 0);
  // Heard from at minute 0 (record time), three days ago: the sweep on the test's clock raises both.
  await alerts.sweep(later());
  await alerts.sweep(later(3)); // once per silence
  assert.deepEqual(await child.events(inherits), ['ALERT No data for more than 60 minutes @60']);
  assert.deepEqual(await child.events(own.id), ['ALERT No data for more than 30 minutes @30']);
  assert.deepEqual(await child.events(off.id), []);
  const [note] = await child.notifications(inherits);
  assert.equal(note.type, 'SILENT');
  assert.equal(note.specificationId, null);
  assert.equal(note.subject, 'No data for more than 60 minutes');
  assert.equal(note.location.latitude, OUT, 'the last location it sent');
  assert.equal(note.eventId, (ok(await child.call('GET', `/events?assetId=${inherits}`), 200) as any[])[0].id);
  // Sensor data two hours later ends it: an INFO event, dated at that record.
  ok(
    await child.call('POST', '/sensor-data', { assetId: inherits, sensorId: 's1', type: 'TEMPERATURE', value: 4, whenCreated: at(120) }),
    201,
  );
  assert.deepEqual(await child.events(inherits), [
    'ALERT No data for more than 60 minutes @60',
    'INFO Data again after 120 minutes without @120',
  ]);
  // A record older than the newest changes nothing; a new silence alerts again.
  await child.locate(inherits, OUT, 90);
  await alerts.sweep(later());
  assert.deepEqual((await child.events(inherits)).slice(2), ['ALERT No data for more than 60 minutes @180']);
  // A disabled asset raises nothing.
  ok(await child.call('PATCH', `/assets/${own.id}`, { disabled: true }), 200);
  await child.locate(own.id, OUT, 200);
  await alerts.sweep(later());
  assert.deepEqual((await child.events(own.id)).slice(2), []);
});

test('dwell: a stay longer than dwellAlertMinutes raises a DWELL alert, once, cleared when the asset leaves', async () => {
  const a = await tenant('dwell');
  const z = await a.zone({ name: 'Yard', dwellAlertMinutes: 45 });
  assert.equal(z.dwellAlertMinutes, 45);
  // In record time: inside at 0 and at 50; the alert is dated when the stay passed 45 minutes.
  const x = await a.asset('dwell-x');
  await a.locate(x, IN, 0);
  await a.locate(x, IN, 50);
  await a.locate(x, IN, 55);
  await a.locate(x, OUT, 70);
  assert.deepEqual(await a.events(x), [
    'INFO Entered zone Yard @0',
    'ALERT In zone Yard for more than 45 minutes @45',
    'INFO Left zone Yard @70',
    'INFO Dwell in zone Yard ended after 70 minutes @70',
  ]);
  const [note] = await a.notifications(x);
  assert.equal(note.type, 'DWELL');
  assert.equal(note.zoneId, z.id);
  assert.equal(note.location.name, 'Yard', "the location's zone members");
  // An asset that stops reporting inside: the sweep raises it on the test's clock.
  const y = await a.asset('dwell-y');
  await a.locate(y, IN, 0);
  assert.deepEqual(await a.events(y), ['INFO Entered zone Yard @0']);
  await alerts.sweep(later());
  await alerts.sweep(later(4));
  assert.deepEqual(await a.events(y), ['INFO Entered zone Yard @0', 'ALERT In zone Yard for more than 45 minutes @45']);
  await a.locate(y, OUT, 300);
  assert.deepEqual((await a.events(y)).slice(2), ['INFO Left zone Yard @300', 'INFO Dwell in zone Yard ended after 300 minutes @300']);
  // The visits behind it: one per stay, entered at the first location inside, left at the first outside.
  const { rows } = await db.query<{ entered_at: Date; left_at: Date; dwell_alerted_at: Date }>(
    'SELECT entered_at, left_at, dwell_alerted_at FROM zone_visits WHERE asset_id = $1 ORDER BY entered_at',
    [x],
  );
  assert.deepEqual(
    rows.map((r) => [r.entered_at.toISOString(), r.left_at.toISOString(), r.dwell_alerted_at.toISOString()]),
    [[at(0), at(70), at(45)].map((t) => new Date(t).toISOString())],
  );
});

test('enterAfterSeconds / leaveAfterSeconds: a pass-by raises nothing; stays fire once confirmed, in record time or by the sweep', async () => {
  const a = await tenant('delay');
  await a.zone({ name: 'Depot', enterAfterSeconds: 300, leaveAfterSeconds: 120 });
  const x = await a.asset('delay-x');
  // Driving past: inside for two minutes, out again before five.
  await a.locate(x, OUT, 0);
  await a.locate(x, IN, 1);
  await a.locate(x, IN, 2);
  await a.locate(x, OUT, 3);
  assert.deepEqual(await a.events(x), [], 'a pass-by shorter than enterAfterSeconds raises no zone event');
  // A stay: inside at 10 and at 16: entered, dated when the five minutes passed (15), as of 10.
  await a.locate(x, IN, 10);
  await a.locate(x, IN, 16);
  const [entered] = ok(await a.call('GET', `/events?assetId=${x}`), 200) as any[];
  assert.equal(entered.subject, 'Entered zone Depot');
  assert.equal(minuteOf(entered.whenCreated), 15);
  assert.equal(minuteOf(entered.currentData.whenCreated), 10, 'the reading: when it went in');
  // Out for one minute and back: no Left event.
  await a.locate(x, OUT, 20);
  await a.locate(x, IN, 21);
  // Out for good at 30: nothing until the two minutes pass; the sweep on the test's clock fires it.
  await a.locate(x, OUT, 30);
  assert.deepEqual(await a.events(x), ['INFO Entered zone Depot @15']);
  await alerts.sweep(later());
  assert.deepEqual(await a.events(x), ['INFO Entered zone Depot @15', 'INFO Left zone Depot @32']);
  const [left] = ok(await a.call('GET', `/events?assetId=${x}&order=desc`), 200) as any[];
  assert.equal(minuteOf(left.currentData.whenCreated), 30, 'the reading: when it went out');
  // An asset whose last location is inside: the sweep confirms the enter as if it stayed.
  const y = await a.asset('delay-y');
  await a.locate(y, IN, 0);
  assert.deepEqual(await a.events(y), []);
  await alerts.sweep(later());
  assert.deepEqual(await a.events(y), ['INFO Entered zone Depot @5']);
  // Only the stays are visits: the pass-by left none.
  const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM zone_visits WHERE asset_id = $1', [x]);
  assert.equal(rows[0]!.n, 1);
});
