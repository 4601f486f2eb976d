// Hourly rollups (README, "Reports and rollups"), on both databases: they equal what recomputing
// them from the raw rows gives, whether an hour is still open (read from the raw rows), closed and
// summed, or summed again after late records; GET /rollups sums them by hour or UTC day with the
// step between hours counted once; tenancy as for the records; and they outlive the raw rows'
// retention, going after ROLLUP_RETENTION_DAYS.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { haversineMeters } from '../src/zones/geo.js';
import { foldRollups, materializeRollups } from '../src/rollups/rollups.js';
import { aggregate, ROLLUP_COLUMNS, ROLLUP_TABLES, type RollupType } from '../src/rollups/sql.js';
import { bad, customer, ok, startApp, type TestApp } from './helpers.js';

const HOUR = 3_600_000;
const DAY = 86_400_000;
// The hours close when the tests say (materializeRollups' clock), not by the service's own clock.
const ta = await startApp(undefined, {
  RATE_LIMIT_MAX: '100000',
  RATE_LIMIT_CONCURRENT: '1000',
  DB_POOL_SIZE: '4',
  ROLLUP_CLOSE_AFTER_SECONDS: String(60 * 86400),
});

/** A whole hour some days ago (so every record of the test is in the past). */
const base = Math.floor((Date.now() - 3 * DAY) / HOUR) * HOUR;
const at = (minutes: number) => new Date(base + minutes * 60_000).toISOString();

/** The stored rollup rows of an asset, as the table holds them once the late records so far are folded in. */
async function stored(t: TestApp, assetId: string): Promise<any[]> {
  await foldRollups(t.app.services.db, t.cfg.ROLLUP_RETENTION_DAYS);
  const { rows } = await t.app.services.db.query(
    `SELECT ${ROLLUP_COLUMNS} FROM rollups WHERE asset_id = $1 ORDER BY hour, type, owner_id`,
    [assetId],
  );
  return rows;
}

/** The same rows recomputed from the raw tables by the fill's SQL. */
async function recomputed(t: TestApp, assetId: string) {
  const parts = (Object.keys(ROLLUP_TABLES) as RollupType[]).map(
    (type) => `SELECT * FROM (${aggregate(type, `(SELECT * FROM ${ROLLUP_TABLES[type]} WHERE asset_id = $1) AS src`)}) a`,
  );
  const { rows } = await t.app.services.db.query(
    `SELECT x.* FROM (${parts.join(' UNION ALL ')}) AS x(${ROLLUP_COLUMNS}) ORDER BY hour, type, owner_id`,
    [assetId],
  );
  return rows;
}

const post = (c: { call: (m: string, p: string, b?: unknown) => Promise<any> }, path: string, body: unknown) =>
  c.call('POST', `/api/v1${path}`, body).then((r) => ok(r, 201, path));

test('an open hour is read from the raw rows; once closed it is summed, and a late record sums it again', async () => {
  const db = ta.app.services.db;
  const c = await customer(ta, 'rollup-live');
  const asset = await c.asset('ROLL-LIVE');
  // The test's clock: the hours from ten days ago on are not summed yet (the service's own waits
  // 60 days here).
  const open = base - 7 * DAY;
  const before = (await db.query<{ materialized: Date }>('SELECT materialized FROM rollup_state')).rows[0]!.materialized;
  await db.query('UPDATE rollup_state SET materialized = $1', [new Date(open)]);
  const t = (m: number) => new Date(open + m * 60_000).toISOString();
  const hours = async () => ok(await c.call('GET', `/api/v1/rollups?assetId=${asset}&from=${t(0)}&to=${t(180)}`), 200);
  await post(
    c,
    '/locations',
    [0, 10, 50, 70, 130].map((m) => ({ assetId: asset, latitude: 1 + m * 0.01, longitude: 2, whenCreated: t(m) })),
  );
  await post(c, '/reefer-data', [
    { assetId: asset, whenCreated: t(5), data: { supplyAirTemperature: 2.5 } },
    { assetId: asset, whenCreated: t(75), data: { supplyAirTemperature: -1 } },
  ]);
  assert.deepEqual(await stored(ta, asset), [], 'nothing summed while the hours are open');
  const read = await hours();
  assert.deepEqual(
    read.map((h: any) => h.records),
    [{ location: 3, reeferdata: 1 }, { location: 1, reeferdata: 1 }, { location: 1 }],
  );
  // The hours close (two of them): summed once from the raw rows, the same as recomputed; the third is still read raw.
  assert.equal(await materializeRollups(db, open + 2 * HOUR, ta.cfg.ROLLUP_RETENTION_DAYS), 2);
  const summed = await stored(ta, asset);
  assert.deepEqual(
    summed.map((r: any) => new Date(r.hour).getTime()),
    [open, open, open + HOUR, open + HOUR],
  );
  assert.deepEqual(summed, (await recomputed(ta, asset)).slice(0, 4));
  assert.deepEqual(await hours(), read, 'the same answer, summed or read raw');
  // Late: a record inside a summed hour's span: that hour is summed again from its raw rows.
  await post(c, '/locations', { assetId: asset, latitude: 1.3, longitude: 2, whenCreated: t(30) });
  assert.deepEqual((await stored(ta, asset)).slice(0, 4), (await recomputed(ta, asset)).slice(0, 4));
  assert.equal((await hours())[0].records.location, 4);
  // The test's clock back where it was (nothing of the other tests lies in between).
  await db.query('UPDATE rollup_state SET materialized = greatest(materialized, $1)', [before]);
});

test('late records folded over several reads: every batch of a loose hour is taken once, and the rows equal a recomputation', async (tc) => {
  const db = ta.app.services.db;
  const keep = ta.cfg.ROLLUP_RETENTION_DAYS;
  const c = await customer(ta, 'rollup-reads');
  const asset = await c.asset('ROLL-READS');
  const open = base - 8 * DAY;
  const before = (await db.query<{ materialized: Date }>('SELECT materialized FROM rollup_state')).rows[0]!.materialized;
  await db.query('UPDATE rollup_state SET materialized = $1', [new Date(open)]);
  // The test's clock back where it was at the end, whatever happens.
  tc.after(() => db.query('UPDATE rollup_state SET materialized = greatest(materialized, $1)', [before]));
  const t = (m: number) => new Date(open + m * 60_000).toISOString();
  const loc = (m: number) => ({ assetId: asset, latitude: 1 + m * 0.01, longitude: 2 + (m % 3) * 0.01, whenCreated: t(m) });
  const reefer = (m: number) => ({ assetId: asset, whenCreated: t(m), data: { supplyAirTemperature: m / 10 } });
  // In order, a position and a reading every 4 minutes for two hours; then the hours close.
  const every4 = Array.from({ length: 30 }, (_, i) => i * 4);
  await post(c, '/locations', every4.map(loc));
  await post(c, '/reefer-data', every4.map(reefer));
  await materializeRollups(db, open + 2 * HOUR, keep);
  // Late records between the stored ones, a store (and a batch) each, until at least six batches
  // wait (the background fold may take some first).
  const pending = async () =>
    Number(
      (await db.query<{ n: string }>('SELECT count(*) AS n FROM rollup_batches WHERE min_hour < (SELECT materialized FROM rollup_state)'))
        .rows[0]!.n,
    );
  let k = 0;
  const late = () => 4 * Math.floor(k / 3) + 1 + (k++ % 3);
  while ((await pending()) < 6) {
    const ms = [late(), late(), late()];
    await Promise.all([...ms.map((m) => post(c, '/locations', loc(m))), ...ms.map((m) => post(c, '/reefer-data', reefer(m)))]);
  }
  // One batch a read: the rows are loose (late records inside their spans), so the fold must take
  // every batch of the summed hours before it sums their raw rows, each exactly once.
  const waiting = await pending();
  const folded = await foldRollups(db, keep, true, false, { batches: 1, bytes: 1 });
  assert.ok(folded >= waiting, `${folded} of ${waiting}`);
  assert.equal(await pending(), 0);
  const rows = await stored(ta, asset);
  // The late minutes (1, 2, 3, 5, ...) all lie in the first hour.
  assert.ok(k <= 45);
  assert.deepEqual(
    rows.map((r: any) => [r.type, Number(r.count)]),
    [
      ['location', 15 + k],
      ['reeferdata', 15 + k],
      ['location', 15],
      ['reeferdata', 15],
    ],
  );
  assert.deepEqual(rows, await recomputed(ta, asset));
});

test('locations in order, in bulks across hours, and late ones between stored positions: the rollup equals a recomputation', async () => {
  const c = await customer(ta, 'rollup-loc');
  const asset = await c.asset('ROLL-LOC');
  // A ship sailing east along the equator across the antimeridian, one position a minute for 3 hours.
  const point = (m: number) => ({
    assetId: asset,
    latitude: 0.5 + m * 0.001,
    longitude: ((179.5 + m * 0.01 + 180) % 360) - 180,
    whenCreated: at(m),
  });
  const minutes = Array.from({ length: 180 }, (_, m) => m).filter((m) => m % 7 !== 3);
  // In order, in bulks that end mid-hour.
  for (let i = 0; i < minutes.length; i += 50) await post(c, '/locations', minutes.slice(i, i + 50).map(point));
  assert.deepEqual(await stored(ta, asset), await recomputed(ta, asset), 'in-order bulks');
  // Late: the left-out minutes, one at a time and then a bulk, between stored positions (and an hour's first).
  await post(c, '/locations', point(3));
  await post(c, '/locations', point(59 + 4));
  await post(c, '/locations', [17, 24, 31, 38, 45, 52, 59 + 11].map(point));
  assert.deepEqual(await stored(ta, asset), await recomputed(ta, asset), 'after late records');
  // Before the first position: a new hour whose last step joins the next hour when read.
  await post(c, '/locations', [point(-30), point(-10)]);
  assert.deepEqual(await stored(ta, asset), await recomputed(ta, asset), 'an earlier hour');

  // GET /rollups: per hour, the distance includes the step from the previous hour's last position,
  // so the hours add up to the whole route, computed here independently from the raw positions.
  const raw = ok(await c.call('GET', `/api/v1/locations?assetId=${asset}&order=asc&limit=1000&from=${at(-60)}`), 200);
  let whole = 0;
  for (let i = 1; i < raw.length; i++)
    whole += haversineMeters(raw[i - 1].latitude, raw[i - 1].longitude, raw[i].latitude, raw[i].longitude);
  const hours = ok(await c.call('GET', `/api/v1/rollups?assetId=${asset}&from=${at(-60)}&to=${at(240)}`), 200);
  assert.deepEqual(
    hours.map((h: any) => h.start),
    [-60, 0, 60, 120].map((m) => at(m).replace('.000', '')),
  );
  const perHour = [-60, 0, 60, 120].map((m) => raw.filter((l: any) => l.whenCreated >= at(m) && l.whenCreated < at(m + 60)).length);
  assert.deepEqual(
    hours.map((h: any) => h.records.location),
    perHour,
  );
  assert.equal(perHour[0], 2);
  const sum = hours.reduce((s: number, h: any) => s + h.distanceMeters, 0);
  assert.ok(Math.abs(sum - whole) < raw.length * 0.001, `hours add up to the route: ${sum} vs ${whole}`);
  assert.ok(whole > 220_000 && whole < 250_000, `210 minutes at ~1.1 km a minute across the antimeridian, not around the world: ${whole}`);
  // The first hour read alone still counts the step into it from the hour before.
  const one = ok(await c.call('GET', `/api/v1/rollups?assetId=${asset}&from=${at(60)}&to=${at(120)}`), 200);
  assert.equal(one.length, 1);
  assert.equal(one[0].distanceMeters, hours[2].distanceMeters);
  // By day: the same sums.
  const days = ok(await c.call('GET', `/api/v1/rollups?assetId=${asset}&from=${at(-60)}&to=${at(240)}&interval=day`), 200);
  assert.equal(
    days.reduce((s: number, d: any) => s + d.records.location, 0),
    raw.length,
  );
  assert.ok(Math.abs(days.reduce((s: number, d: any) => s + d.distanceMeters, 0) - sum) < 0.01);
});

test('sensor, reefer and genset values: count, min, max and mean per key, late records included', async () => {
  const c = await customer(ta, 'rollup-values');
  const asset = await c.asset('ROLL-REEFER');
  const reefer = (m: number, supply: number, ret: number) => ({
    assetId: asset,
    whenCreated: at(m),
    data: {
      supplyAirTemperature: supply,
      cargo: { sensors: { returnAirTemperature: ret, supplyAirTemperature: 99 } },
      humidity: 80,
      note: 'x',
    },
  });
  await post(c, '/reefer-data', [reefer(1, 2.5, 4.1), reefer(2, 3.25, 4.3), reefer(61, -1.125, 3)]);
  await post(c, '/reefer-data', reefer(0, 0.1, 0.2)); // late, before the first hour's records
  // Late, between them: the hour's longest step is recomputed from its rows.
  await post(c, '/reefer-data', { ...reefer(0, 1.5, 2), whenCreated: new Date(Date.parse(at(1)) + 30_000).toISOString() });
  // Members read where the alert engine reads them: a cargo key under hardware is not its reading, a
  // top-level member wins (even a null one), a numeric string is no number, an unknown key falls back.
  const tricky = await c.asset('ROLL-TRICKY');
  await post(c, '/reefer-data', [
    {
      assetId: tricky,
      whenCreated: at(5),
      data: {
        returnAirTemperature: null,
        cargo: { sensors: { returnAirTemperature: 7, usda1Temperature: '3.5', probeTemperature: 1 } },
        hardware: { sensors: { supplyAirTemperature: 9, compressorTemperature: 70, probeTemperature: 2, oddTemperature: 4 } },
        compressorTemperature: 71,
      },
    },
  ]);
  const odd = await stored(ta, tricky);
  assert.deepEqual(odd[0]!.stats, { compressorTemperature: [1, 71, 71, 71], probeTemperature: [1, 1, 1, 1], oddTemperature: [1, 4, 4, 4] });
  assert.deepEqual(odd, await recomputed(ta, tricky));
  await post(c, '/genset-data', { assetId: asset, gensetType: 'SG-3000', whenCreated: at(5), data: { engineCoolantTemperature: 81.5 } });
  await post(c, '/sensor-data', [
    { assetId: asset, sensorId: 's1', type: 'TEMPERATURE', value: 5.5, whenCreated: at(3) },
    { assetId: asset, sensorId: 's1', type: 'TEMPERATURE', value: 6.5, whenCreated: at(4) },
    { assetId: asset, sensorId: 'door', type: 'PRESSURE', value: 'OPEN', whenCreated: at(4) },
  ]);
  await post(c, '/oem-data', { assetId: asset, payloadType: 7, whenCreated: at(9), data: { x: 1 } });
  assert.deepEqual(await stored(ta, asset), await recomputed(ta, asset));

  const hours = ok(await c.call('GET', `/api/v1/rollups?assetId=${asset}&from=${at(0)}&to=${at(120)}`), 200);
  assert.equal(hours.length, 2);
  const [h0, h1] = hours;
  assert.deepEqual(h0.records, { gensetdata: 1, oemdata: 1, reeferdata: 4, sensordata: 3 });
  // Minutes 0, 1, 1.5 and 2: the longest step is a minute.
  assert.equal((await stored(ta, asset)).find((r: any) => r.type === 'reeferdata')!.max_step_us, '60000000');
  assert.equal(h0.distanceMeters, null);
  assert.deepEqual(h0.reefer.supplyAirTemperature, { count: 4, min: 0.1, max: 3.25, mean: (0.1 + 2.5 + 1.5 + 3.25) / 4 });
  assert.deepEqual(h0.reefer.returnAirTemperature, { count: 4, min: 0.2, max: 4.3, mean: (0.2 + 4.1 + 2 + 4.3) / 4 });
  assert.equal(h0.reefer.humidity, undefined, 'only temperatures');
  assert.deepEqual(h0.genset, { engineCoolantTemperature: { count: 1, min: 81.5, max: 81.5, mean: 81.5 } });
  assert.deepEqual(
    h0.sensors,
    { s1: { type: 'TEMPERATURE', count: 2, min: 5.5, max: 6.5, mean: 6 } },
    'text values are counted, not summed',
  );
  assert.deepEqual(h1.reefer.supplyAirTemperature, { count: 1, min: -1.125, max: -1.125, mean: -1.125 });

  // Odd values and microsecond times, a store each: the parts' exact sums, times and longest step
  // are the SQL's.
  const exact = await c.asset('ROLL-EXACT');
  const odd3 = [0.1, 0.2, 1 / 3, 1e-7, -2.5e-8, 1.5e21, 123.456];
  for (let i = 0; i < odd3.length; i++) {
    const whenCreated = at(20 + i).replace('.000Z', `.${String(123456 + i * 111111).slice(0, 6)}Z`);
    await post(c, '/sensor-data', { assetId: exact, sensorId: 'x', type: 'TEMPERATURE', value: odd3[i], whenCreated });
    await post(c, '/reefer-data', { assetId: exact, whenCreated, data: { supplyAirTemperature: odd3[i] } });
  }
  assert.deepEqual(await stored(ta, exact), await recomputed(ta, exact));
});

test('GET /rollups: another owner’s asset is a 404; bad ranges and intervals are 400s', async () => {
  const c = await customer(ta, 'rollup-owner');
  const other = await customer(ta, 'rollup-stranger');
  const asset = await c.asset('ROLL-T');
  await post(c, '/locations', { assetId: asset, latitude: 1, longitude: 2, whenCreated: at(1) });
  assert.equal((await other.call('GET', `/api/v1/rollups?assetId=${asset}&from=${at(0)}&to=${at(60)}`)).status, 404);
  assert.equal(ok(await c.call('GET', `/api/v1/rollups?assetId=${asset}&from=${at(0)}&to=${at(60)}`), 200).length, 1);
  bad(await c.call('GET', `/api/v1/rollups?assetId=${asset}&from=${at(60)}&to=${at(0)}`), 400, '/from');
  bad(await c.call('GET', `/api/v1/rollups?assetId=${asset}&from=2020-01-01T00:00:00Z&to=2026-01-01T00:00:00Z`), 400, '/from');
  bad(await c.call('GET', `/api/v1/rollups?assetId=${asset}&interval=week`), 400, '/interval');
  bad(await c.call('GET', '/api/v1/rollups'), 400, '/assetId');
});

test('rollups outlive the raw rows, and go after ROLLUP_RETENTION_DAYS', async () => {
  const t = await startApp(undefined, {
    RETENTION_DAYS: '2',
    RETENTION_GRACE_SECONDS: '0',
    ROLLUP_RETENTION_DAYS: '5',
    PARTITION_INTERVAL: 'day',
    DB_POOL_SIZE: '4',
  });
  const c = await customer(t, 'rollup-retention');
  const asset = await c.asset('ROLL-R');
  const now = Date.now();
  const old = (days: number) => new Date(Math.floor((now - days * DAY) / HOUR) * HOUR + 60_000).toISOString();
  await post(
    c,
    '/locations',
    [3, 9].map((d) => ({ assetId: asset, latitude: 1, longitude: 2, whenCreated: old(d) })),
  );
  await t.app.services.storage.runRetention(now);
  const raw = ok(await c.call('GET', `/api/v1/locations?assetId=${asset}&from=${old(20)}`), 200);
  assert.equal(raw.length, 0, 'the raw rows expired');
  const days = ok(await c.call('GET', `/api/v1/rollups?assetId=${asset}&from=${old(20)}&interval=day`), 200);
  assert.deepEqual(
    days.map((d: any) => d.records.location),
    [1],
    'the 3-day-old hour is kept, the 9-day-old one went with its partition',
  );
});
