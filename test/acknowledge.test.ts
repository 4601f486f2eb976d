// Acknowledging alerts (API guide 8): an ALERT event and its notification are one alert, so
// acknowledging either records who and when on both, once; INFO events are not acknowledged;
// another tenant's alert is a 404; a bulk is all or none; each acknowledgement is audited.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { alertingReefer, bad, ok, ownerWithKey, startApp } from './helpers.js';

const ta = await startApp(undefined, { RATE_LIMIT_MAX: '100000' });

/** A customer with a reefer whose specification alerts above -10, and `readings` stored a minute apart (oldest first). */
async function alerted(label: string, readings: number[]) {
  const c = await alertingReefer(ta, label);
  const assetId = c.assetId;
  for (const [n, t] of readings.entries()) await c.reefer(readings.length - n, t);
  const events = ok(await c.call('GET', `/events?assetId=${assetId}&order=asc`), 200, 'events') as any[];
  const notifications = ok(await c.call('GET', `/notifications?assetId=${assetId}&order=asc`), 200, 'notifications') as any[];
  return { ...c, assetId, events, notifications };
}

test('acknowledging an ALERT event records who and when on it and its notification, once; the audit log has it', async () => {
  const c = await alerted('ack-one', [0]);
  const [event] = c.events;
  const [note] = c.notifications;
  assert.equal(event.severity, 'ALERT');
  assert.equal(event.acknowledgedAt, null, 'not acknowledged when raised');
  assert.equal(note.acknowledgedBy, null);
  assert.equal(note.eventId, event.id);

  const acked = ok(await c.call('POST', `/events/${event.id}/acknowledge`), 200, 'acknowledge');
  const keyId = (await ta.call('GET', '/api/v1/api-keys', { token: c.key })).body.find(
    (k: { ownerId: string }) => k.ownerId === c.ownerId,
  ).id;
  assert.equal(acked.acknowledgedBy, `apikey:${keyId}`);
  assert.ok(Date.now() - Date.parse(acked.acknowledgedAt) < 60_000);
  assert.deepEqual({ ...acked, acknowledgedAt: null, acknowledgedBy: null }, event, 'nothing else changed');
  const noteAfter = ok(await c.call('GET', `/notifications/${note.id}`), 200, 'notification');
  assert.equal(noteAfter.acknowledgedAt, acked.acknowledgedAt, 'the notification is the same alert');
  assert.equal(noteAfter.acknowledgedBy, acked.acknowledgedBy);

  // The first acknowledgement stands: another credential's, later, changes nothing.
  const again = ok(await ta.call('POST', `/api/v1/events/${event.id}/acknowledge`, { token: ta.adminToken }), 200, 'again');
  assert.deepEqual(again, acked);
  const viaNote = ok(await c.call('POST', `/notifications/${note.id}/acknowledge`), 200, 'via the notification');
  assert.equal(viaNote.acknowledgedAt, acked.acknowledgedAt);

  const entries = ok(await ta.call('GET', '/api/v1/audit?action=acknowledge', { token: ta.adminToken }), 200, 'audit') as any[];
  const mine = entries.filter((e) => e.resource?.id === event.id);
  assert.equal(mine.length, 1, 'one entry: the acknowledgement that changed something');
  assert.equal(mine[0].resource.type, 'event');
  assert.equal(mine[0].ownerId, c.ownerId);
});

test('acknowledging the notification acknowledges its event', async () => {
  const c = await alerted('ack-note', [0]);
  const acked = ok(await c.call('POST', `/notifications/${c.notifications[0].id}/acknowledge`), 200, 'acknowledge');
  assert.match(acked.acknowledgedBy, /^apikey:/);
  const event = ok(await c.call('GET', `/events/${c.events[0].id}`), 200, 'event');
  assert.equal(event.acknowledgedAt, acked.acknowledgedAt);
  assert.equal(event.acknowledgedBy, acked.acknowledgedBy);
});

test("an INFO event is a 409, another tenant's alert a 404, a read-only key a 403; a bulk is all or none", async () => {
  // ALERT, back in range (INFO), ALERT again.
  const c = await alerted('ack-rules', [0, -20, 5]);
  assert.deepEqual(
    c.events.map((e) => e.severity),
    ['ALERT', 'INFO', 'ALERT'],
  );
  const [first, info, second] = c.events;
  const other = await alerted('ack-other', [0]);
  const foreign = other.events[0].id;

  bad(await c.call('POST', `/events/${info.id}/acknowledge`), 409, undefined, 'INFO');
  assert.equal((await c.call('POST', `/events/${foreign}/acknowledge`)).status, 404);
  assert.equal((await c.call('POST', `/notifications/${other.notifications[0].id}/acknowledge`)).status, 404);
  assert.equal((await c.call('POST', '/events/99999999999/acknowledge')).status, 404);
  assert.equal((await c.call('POST', '/events/abc/acknowledge')).status, 404);
  const reader = await ownerWithKey(ta, 'ack-reader', { parentId: c.ownerId, scopes: ['read'] });
  assert.equal((await ta.call('POST', `/api/v1/events/${first.id}/acknowledge`, { token: reader.key })).status, 403);

  // All or none: one foreign id, one INFO, one id past int8 refuse the whole bulk, naming it.
  bad(await c.call('POST', '/events/acknowledge', { ids: [first.id, second.id, foreign] }), 404, '/ids/2');
  bad(await c.call('POST', '/events/acknowledge', { ids: [first.id, info.id] }), 409, '/ids/1');
  bad(await c.call('POST', '/events/acknowledge', { ids: ['9999999999999999999'] }), 404, '/ids/0');
  bad(await c.call('POST', '/events/acknowledge', { ids: [] }), 400, '/ids');
  const tooMany = Array.from({ length: 1001 }, (_, i) => String(i + 1));
  bad(await c.call('POST', '/events/acknowledge', { ids: tooMany }), 400, '/ids');
  for (const e of [first, second]) {
    assert.equal(ok(await c.call('GET', `/events/${e.id}`), 200).acknowledgedAt, null, 'nothing changed');
  }
  assert.equal(ok(await other.call('GET', `/events/${foreign}`), 200).acknowledgedAt, null, "the other tenant's alert is untouched");

  const both = ok(await c.call('POST', '/events/acknowledge', { ids: [second.id, first.id] }), 200, 'bulk');
  assert.deepEqual(
    both.map((e: { id: string }) => e.id),
    [second.id, first.id],
    "in the request's order",
  );
  assert.ok(both.every((e: { acknowledgedAt: string | null }) => e.acknowledgedAt !== null));
  const notes = ok(await c.call('GET', `/notifications?assetId=${c.assetId}`), 200) as any[];
  assert.equal(notes.length, 2);
  assert.ok(notes.every((n) => n.acknowledgedAt !== null && n.acknowledgedBy !== null));
});

test('the inbox filters: open (neither acknowledged nor cleared), words of the subject, a zone the asset is in now', async () => {
  // Three alerts: one acknowledged, one cleared by its INFO (back in range), one open.
  const c = await alerted('inbox', [0, -20, 0, 0]);
  const alerts = c.events.filter((e) => e.severity === 'ALERT');
  assert.equal(alerts.length, 2, JSON.stringify(c.events.map((e) => e.subject)));
  const [cleared, open] = alerts;
  const other = await alerted('inbox-other', [0]);
  ok(await other.call('POST', `/events/${other.events[0].id}/acknowledge`), 200);
  const ids = async (query: string, who = c) => (ok(await who.call('GET', `/events?${query}`), 200) as any[]).map((e) => e.id);
  assert.deepEqual(await ids('open=true'), [open.id], 'the cleared one and the INFO are not open');
  assert.deepEqual(await ids('open=true', other), [], 'an acknowledged one is not open');
  assert.ok((await ids('open=false')).includes(cleared.id));
  assert.ok(!(await ids('open=false')).includes(open.id));
  // Words of the subject, any case.
  assert.deepEqual(await ids('open=true&subject=ABOVE%20MAXIMUM'), [open.id]);
  assert.deepEqual(
    await ids('subject=back%20in%20range'),
    c.events
      .filter((e) => e.severity === 'INFO')
      .map((e) => e.id)
      .reverse(),
  );
  bad(await c.call('GET', `/events?subject=${'x'.repeat(101)}`), 400, '/subject', 'too long');
  // A zone: the asset's latest position inside it, or not.
  const zone = ok(await c.call('POST', '/zones', { name: 'Inbox yard', circle: { latitude: 10, longitude: 10, radiusMeters: 500 } }), 201);
  assert.deepEqual(await ids(`open=true&zoneId=${zone.id}`), [], 'not in it yet');
  ok(await c.call('POST', '/locations', { assetId: c.assetId, latitude: 10, longitude: 10 }), 201);
  assert.deepEqual(await ids(`open=true&zoneId=${zone.id}`), [open.id]);
  assert.deepEqual(await ids(`open=true&zoneId=${zone.id}`, other), [], "another tenant's zone shows nothing of it");
  bad(await c.call('GET', '/events?zoneId=abc'), 400, '/zoneId', 'not an id');
  ok(await c.call('POST', `/events/${open.id}/acknowledge`), 200);
  assert.deepEqual(await ids('open=true'), [], 'acknowledged: out of the inbox');
});
