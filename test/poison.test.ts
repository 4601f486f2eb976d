// Poison (API guide 4, "Poison"): each consumer sets one item it cannot take aside with its reason,
// counts it in /metrics (poison_total{consumer, reason}) and goes on with the rest: a rollups batch
// that cannot be folded, a specification the alert sweep cannot save, a delivery result the database
// refuses. (The event log's consumer on Kafka: test/event-log-poison.test.ts.)
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { foldRollups } from '../src/rollups/rollups.js';
import { customer, deliveryHistory, fleet, ok, startApp, type TestApp, waitFor } from './helpers.js';
import { Receiver } from './receiver.js';

const HOUR = 3_600_000;
const ta: TestApp = await startApp(undefined, {
  RATE_LIMIT_MAX: '100000',
  // The hours close when the test folds them, not by the service's own clock.
  ROLLUP_CLOSE_AFTER_SECONDS: String(60 * 86400),
  PUSH_ALLOW_HTTP: 'true',
  PUSH_ALLOWED_NETWORKS: '127.0.0.0/8',
  DELIVERY_POLL_MS: '100',
  // A parked result's events are sent again when their lease runs out.
  DELIVERY_LEASE_SECONDS: '3',
});
const db = ta.app.services.db;
const rx = await new Receiver().start();
after(() => rx.close());
const { reached } = deliveryHistory(() => ta);

/** poison_total{consumer, reason} as /metrics shows it (0 while absent). */
export async function poisonCount(t: TestApp, consumer: string, reason: string): Promise<number> {
  const text = (await t.call('GET', '/metrics')).raw;
  const m = new RegExp(`^poison_total\\{consumer="${consumer}",reason="${reason}"\\} (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

test('a rollups batch that cannot be folded is moved aside with its reason and counted; every other batch is folded', async () => {
  const c = await customer(ta, 'poison-rollups');
  const asset = await c.asset('POISON-R');
  const hour = Math.floor((Date.now() - 2 * 86_400_000) / HOUR) * HOUR;
  const at = (m: number) => new Date(hour + m * 60_000).toISOString();
  const before = {
    undecodable: await poisonCount(ta, 'rollups', 'undecodable'),
    invalid: await poisonCount(ta, 'rollups', 'invalid-part'),
  };
  // Two batches no fold can take, among the stores of a healthy asset: parts that are not JSON, and
  // parts whose asset is no UUID (the database refuses the rollup row); older than the good ones.
  const us = (hour + 60_000) * 1000;
  const insert = async (parts: string) =>
    (
      await db.query<{ id: string }>(
        'INSERT INTO rollup_batches (min_hour, max_hour, parts) VALUES ($1, $1, $2) RETURNING id::text AS id',
        [new Date(hour), parts],
      )
    ).rows[0]!.id;
  const garbage = await insert('[{"t":"location","o":[');
  const invalid = await insert(
    JSON.stringify([{ t: 'location', o: [c.ownerId], k: [], p: [['not-a-uuid', 0, hour, 1, us, us, '1', '1', 1, 2, 1, 2, 0]] }]),
  );
  ok(
    await c.call('POST', '/api/v1/locations', [
      { assetId: asset, latitude: 1, longitude: 2, whenCreated: at(1) },
      { assetId: asset, latitude: 1.001, longitude: 2, whenCreated: at(2) },
    ]),
    201,
  );

  // The fold goes on past them (before, it failed on the first every time, and no batch was folded again).
  await foldRollups(db, ta.cfg.ROLLUP_RETENTION_DAYS, true, true);
  const { rows } = await db.query<{ count: string }>('SELECT count::text FROM rollups WHERE asset_id = $1 AND type = $2 AND hour = $3', [
    asset,
    'location',
    new Date(hour),
  ]);
  assert.deepEqual(
    rows.map((r) => r.count),
    ['2'],
    "the healthy asset's hour is folded",
  );
  const aside = await db.query<{ id: string; reason: string; parts: string }>(
    'SELECT id::text AS id, reason, parts FROM rollup_batches_set_aside WHERE id = ANY($1::int8[]) ORDER BY id',
    [[garbage, invalid]],
  );
  assert.deepEqual(
    aside.rows.map((r) => [r.id, r.reason.split(':')[0]]),
    [
      [garbage, 'undecodable'],
      [invalid, 'invalid-part'],
    ],
  );
  assert.match(aside.rows[1]!.reason, /bad id/);
  assert.equal(aside.rows[0]!.parts, '[{"t":"location","o":[', 'kept as it was');
  const left = await db.query('SELECT 1 FROM rollup_batches WHERE id = ANY($1::int8[])', [[garbage, invalid]]);
  assert.equal(left.rows.length, 0, 'no fold takes them up again');
  assert.equal(await poisonCount(ta, 'rollups', 'undecodable'), before.undecodable + 1);
  assert.equal(await poisonCount(ta, 'rollups', 'invalid-part'), before.invalid + 1);
  // Reads fold first: they answer (before, every read of rollups failed with a 500).
  const read = ok(await c.call('GET', `/api/v1/rollups?assetId=${asset}&from=${at(0)}&to=${at(59)}&interval=hour`), 200);
  assert.equal(read[0]?.records.location, 2);
});

/** Whole minutes a few days back: record times the test owns (every due time is behind the server clock). */
const BASE = Math.floor(Date.now() / 60_000) * 60_000 - 3 * 86_400_000;
const minute = (m: number) => new Date(BASE + m * 60_000).toISOString();

/** An owner with a reefer whose specification's violation (9 above 5, for a minute) falls due at the next sweep. */
async function violated(label: string) {
  const c = await customer(ta, label);
  const assetId = await c.asset(`${label}-reefer`);
  const spec = ok(
    await c.call('POST', '/api/v1/specifications', {
      assetId,
      type: 'REEFER',
      ranges: { cargo: { sensors: { supplyAirTemperature: [0, 5, 1, 0] } } },
    }),
    201,
  );
  ok(await c.call('POST', '/api/v1/reefer-data', [{ assetId, whenCreated: minute(0), data: { supplyAirTemperature: 9 } }]), 201);
  const events = async (): Promise<any[]> => ok(await c.call('GET', `/api/v1/events?assetId=${assetId}&limit=100`), 200);
  return { ...c, assetId, specId: spec.id as string, events };
}

test("a specification whose alert the database refuses is set aside for an hour and counted; the sweep raises every other asset's", async () => {
  const poisoned = await violated('poison-sweep');
  const healthy = await violated('healthy-sweep');
  const before = await poisonCount(ta, 'alert-sweep', 'refused');
  // A refusal no input check foresees, made in the database: any event of the poisoned asset.
  await db.query(`CREATE FUNCTION refuse_event() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'poisoned event' USING ERRCODE = '22000'; END $$`);
  await db.query(
    `CREATE TRIGGER refuse_event BEFORE INSERT ON events FOR EACH ROW WHEN (NEW.asset_id = '${poisoned.assetId}') EXECUTE FUNCTION refuse_event()`,
  );
  try {
    // Before, the sweep's one transaction failed whole, at every round: no asset's alert was raised.
    const later = new Date(Date.now() + 2 * HOUR);
    await ta.app.services.alerts.sweep(later);
    const raised = await healthy.events();
    assert.equal(raised.length, 1, JSON.stringify(raised));
    assert.match(raised[0].subject, /supplyAirTemperature 9 above maximum 5/);
    assert.deepEqual(await poisoned.events(), []);
    assert.equal(await poisonCount(ta, 'alert-sweep', 'refused'), before + 1);
    const { rows } = await db.query<{ later: boolean }>(
      `SELECT next_due > now() + interval '50 minutes' AS later FROM specifications WHERE id = $1`,
      [poisoned.specId],
    );
    assert.deepEqual(rows, [{ later: true }], 'not due again for an hour');
    // The next rounds do not take it up again (no tight loop): nothing more is counted.
    await ta.app.services.alerts.sweep(later);
    await ta.app.services.alerts.sweep(later);
    assert.equal(await poisonCount(ta, 'alert-sweep', 'refused'), before + 1);
  } finally {
    await db.query('DROP TRIGGER refuse_event ON events');
    await db.query('DROP FUNCTION refuse_event()');
  }
});

test("a delivery result the database refuses is parked and counted, and every other integration's results are written", async () => {
  rx.on('/results', () => ({ status: 200 }));
  const hook = (label: string) => fleet(ta, label, { channel: 'webhook', destination: `${rx.url}/results` });
  const poisoned = await hook('poison-results');
  const healthy = await hook('healthy-results');
  const before = await poisonCount(ta, 'delivery-results', 'refused');
  await db.query(`CREATE FUNCTION refuse_attempt() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'poisoned result' USING ERRCODE = '22000'; END $$`);
  await db.query(
    `CREATE TRIGGER refuse_attempt BEFORE INSERT ON delivery_attempts FOR EACH ROW
       WHEN (NEW.integration_id = '${poisoned.integrationId}') EXECUTE FUNCTION refuse_attempt()`,
  );
  try {
    await poisoned.store(2);
    await healthy.store(3);
    await reached(healthy.integrationId, 3, 'SUCCEEDED');
    await waitFor(
      () => 'the refused result counted',
      async () => (await poisonCount(ta, 'delivery-results', 'refused')) > before,
    );
  } finally {
    await db.query('DROP TRIGGER refuse_attempt ON delivery_attempts');
    await db.query('DROP FUNCTION refuse_attempt()');
  }
  // Nothing accepted is lost: the parked result's events are sent again once their lease ran out.
  await reached(poisoned.integrationId, 2, 'SUCCEEDED');
});
