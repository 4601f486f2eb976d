// Integration health (API guide 9), on the test's own clock (the health sweep run with a `now` the
// test picks): an endpoint failing for an hour makes its integration `failing`, delivering again
// `recovered`; failing for autoDisableAfterHours disables it, saying why; enabling it again
// delivers the backlog it kept. Each change is in the integration's healthLog and pushed as an
// `integrationStatus` object to the owner's integration that asks for that type.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { sweepHealth } from '../src/delivery/queue/index.js';
import { customer, deliveryHistory, ok, startApp, storeLocations, waitFor } from './helpers.js';
import { Receiver } from './receiver.js';

const ta = await startApp(undefined, {
  PUSH_ALLOW_HTTP: 'true',
  PUSH_ALLOWED_NETWORKS: '127.0.0.0/8',
  DELIVERY_POLL_MS: '100',
  RATE_LIMIT_MAX: '100000',
  DB_POOL_SIZE: '4',
});
const rx = await new Receiver().start();
after(() => rx.close());
const { db } = ta.app.services;
const { deliveries } = deliveryHistory(() => ta);
const hours = (h: number) => new Date(Date.now() + h * 3600_000);

/** A webhook integration of the customer's, to a receiver path, retried every 0.2 s. */
async function webhook(c: Awaited<ReturnType<typeof customer>>, path: string, extra: Record<string, unknown>) {
  return ok(
    await c.call('POST', '/integrations', {
      name: `health${path.replaceAll('/', '-')}`,
      channel: 'webhook',
      ownerIds: [c.ownerId],
      destination: `${rx.url}${path}`,
      retry: { scheduleSeconds: [0.2], maxAttempts: 10000, deadlineHours: 720 },
      ...extra,
    }),
    201,
  );
}

test('failing, recovered, disabled after autoDisableAfterHours, enabled again with its backlog; every change pushed', async () => {
  const c = await customer(ta, 'health', { base: '/api/v1' });
  const asset = await c.asset('health-1');
  let down = true;
  rx.on('/health-endpoint', () => ({ status: down ? 503 : 200, body: down ? 'down for maintenance' : '{}' }));
  const sick = await webhook(c, '/health-endpoint', { name: 'health-sick', objectTypes: ['location'], autoDisableAfterHours: 2 });
  assert.deepEqual([sick.health, sick.autoDisableAfterHours, sick.disabledReason], ['ok', 2, null]);
  await webhook(c, '/health-watch', { objectTypes: ['integrationStatus'] });
  const statuses = () => rx.for('/health-watch').map((r) => JSON.parse(r.body));
  const get = async () => ok(await c.call('GET', `/integrations/${sick.id}`), 200);
  /** Waits for a failed attempt of the location `id`. */
  const failedAttempt = (id: string) =>
    waitFor(
      () => `a failed attempt of location ${id}`,
      async () => (await deliveries(sick.id)).some((d) => d.objectId === id && d.attemptsLog.some((a: { success: boolean }) => !a.success)),
    );

  // 1. Failing for an hour (on the test's clock).
  const [first] = await storeLocations(ta, c.key, asset, [1]);
  await failedAttempt(first!);
  assert.equal(await sweepHealth(db, hours(1.5)), 1);
  assert.equal((await get()).health, 'failing');
  await rx.waitFor(() => statuses().length >= 1, 60_000, 'the failing status');
  const failing = statuses()[0];
  assert.equal(failing.status, 'failing');
  assert.equal(failing.integrationId, sick.id);
  assert.equal(failing.integrationName, 'health-sick');
  assert.match(failing.detail, /Every attempt has failed since .*; last error: .*503/);
  assert.equal(rx.for('/health-watch')[0]!.headers['webhook-object-type'], 'integrationStatus');

  // 2. Delivering again: recovered.
  down = false;
  await waitFor(
    () => 'the first location delivered',
    async () => (await deliveries(sick.id)).every((d) => d.status === 'SUCCEEDED'),
  );
  await sweepHealth(db); // the engine's own sweep may have seen it first: either records it once
  await rx.waitFor(() => statuses().some((s) => s.status === 'recovered'), 60_000, 'recovered');
  assert.equal((await get()).health, 'ok');

  // 3. Down again for longer than autoDisableAfterHours: disabled, saying why and when.
  down = true;
  const [second] = await storeLocations(ta, c.key, asset, [2]);
  await failedAttempt(second!);
  await sweepHealth(db, hours(3));
  const off = await get();
  assert.equal(off.enabled, false);
  assert.equal(off.health, 'disabled');
  assert.match(off.disabledReason, /^Every attempt failed for 2 hours, since .*; last error: .*503/);
  assert.ok(off.disabledAt);
  await rx.waitFor(() => statuses().some((s) => s.status === 'disabled'), 60_000, 'disabled');
  // The audit log says who disabled it: the health sweep, not a person.
  const [disabled] = ok(await c.call('GET', `/audit?action=disable&resourceType=integration`), 200);
  assert.deepEqual(
    [disabled.actor, disabled.resource.id, disabled.changes.enabled],
    [{ type: 'system', id: 'health' }, sick.id, { from: true, to: false }],
  );

  // 4. While disabled its events wait; enabled again (the endpoint fixed), it delivers them.
  down = false;
  const before = rx.for('/health-endpoint').length;
  await storeLocations(ta, c.key, asset, [3]);
  const on = ok(await c.call('PATCH', `/integrations/${sick.id}`, { enabled: true }), 200);
  assert.deepEqual([on.enabled, on.health, on.disabledReason, on.disabledAt], [true, 'ok', null, null]);
  await rx.waitFor(
    () =>
      rx
        .for('/health-endpoint')
        .slice(before)
        .map((r) => JSON.parse(r.body).latitude)
        .filter((l) => l === 2 || l === 3).length >= 2,
    60_000,
    'the kept backlog',
  );
  await rx.waitFor(() => statuses().some((s) => s.status === 'enabled'), 60_000, 'enabled');
  assert.deepEqual(
    (await get()).healthLog.map((h: { status: string }) => h.status),
    ['enabled', 'disabled', 'recovered', 'failing'],
  );
});

test('autoDisableAfterHours 0 never disables', async () => {
  const c = await customer(ta, 'health-never', { base: '/api/v1' });
  const asset = await c.asset('never-1');
  rx.on('/health-never', () => ({ status: 500 }));
  const i = await webhook(c, '/health-never', { objectTypes: ['location'], autoDisableAfterHours: 0 });
  await storeLocations(ta, c.key, asset, [1]);
  await waitFor(
    () => 'a failed attempt',
    async () => (await deliveries(i.id)).some((d) => d.attemptsLog.length > 0),
  );
  await sweepHealth(db, hours(1000));
  const got = ok(await c.call('GET', `/integrations/${i.id}`), 200);
  assert.deepEqual([got.enabled, got.health], [true, 'failing']);
});

test("the event log's lost partitions (Kafka mode) make every enabled integration failing, naming them, until none is lost; while unknown, none recovers", async () => {
  const c = await customer(ta, 'health-lost', { base: '/api/v1' });
  rx.on('/health-lost', () => ({ status: 200 }));
  const i = await webhook(c, '/health-lost', { objectTypes: ['location'] });
  await webhook(c, '/health-lost-watch', { objectTypes: ['integrationStatus'] });
  const log = async () =>
    (ok(await c.call('GET', `/integrations/${i.id}`), 200).healthLog as { status: string; detail: string }[]).reverse();
  // (The engine's own sweep, every minute, finds no partition lost in this mode: it may record the
  // recovery first. So the integration's healthLog is what is checked, not its state at one moment.)
  await sweepHealth(db, new Date(), [7, 3]);
  const [lost] = await log();
  assert.equal(lost?.status, 'failing');
  assert.match(lost!.detail, /^The event log lost messages Kafka deleted before they were read \(partitions 3, 7\): /);
  // Not known now (the cluster does not answer): this sweep recovers nothing.
  assert.equal(await sweepHealth(db, new Date(), null), 0);
  await sweepHealth(db, new Date(), []);
  assert.deepEqual(
    (await log()).map((h) => h.status),
    ['failing', 'recovered'],
  );
  const pushed = () =>
    rx
      .for('/health-lost-watch')
      .map((r) => JSON.parse(r.body))
      .filter((s) => s.integrationId === i.id);
  await rx.waitFor(() => pushed().length >= 2, 60_000, 'both changes pushed');
  // (No order is promised across pushed objects: each says when it was seen.)
  assert.deepEqual(
    pushed()
      .map((s) => s.status)
      .sort(),
    ['failing', 'recovered'],
  );
});
