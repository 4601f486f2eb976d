// @test-lanes postgres pglite kafka
// Time-partitioned storage and retention (README, "Storage"), on both databases: records of any
// time are stored in the partition of their time (made on demand), lists page across partitions,
// retention removes exactly what expired for each owner after the grace period and nothing a
// delivery may still need, and the latest location outlives its row.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { eventLogHandedOver } from './event-log.js';
import { Receiver } from './receiver.js';
import { atEnd, customer, ok, startApp, type TestApp } from './helpers.js';

const DAY = 86_400_000;
// Small pools: a file of five services runs beside others on the shared server (max_connections 100).
// A window reaching back to 1971 (RECORD_MAX_AGE_DAYS; record-time.test.ts tests the default).
const ta = await startApp(undefined, {
  RATE_LIMIT_MAX: '100000',
  RATE_LIMIT_CONCURRENT: '1000',
  DB_POOL_SIZE: '4',
  RECORD_MAX_AGE_DAYS: '36500',
});
const rx = await new Receiver().start();
atEnd(() => rx.close());

const db = () => ta.app.services.db;

/** The partitions of a table, with their bounds as PostgreSQL prints them. */
async function partitions(t: TestApp, table: string): Promise<string[]> {
  const { rows } = await t.app.services.db.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = $1::regclass ORDER BY 1`,
    [table],
  );
  return rows.map((r) => r.name);
}

/** A service of its own for a retention test: local webhooks allowed, no grace unless given. */
const retentionApp = (env: Record<string, string>) =>
  startApp(undefined, {
    RETENTION_GRACE_SECONDS: '0',
    PUSH_ALLOW_HTTP: 'true',
    PUSH_ALLOWED_NETWORKS: '127.0.0.0/8',
    DB_POOL_SIZE: '4',
    ...env,
  });

/** A webhook integration (single mode) of the operator's, for one owner's locations, to `path` on the receiver. */
const webhook = async (t: TestApp, ownerId: string, name: string, path: string, extra: Record<string, unknown> = {}) =>
  ok(
    await t.call('POST', '/api/v1/integrations', {
      token: t.adminToken,
      body: {
        name,
        ownerIds: [ownerId],
        objectTypes: ['location'],
        channel: 'webhook',
        destination: `${rx.url}${path}`,
        webhook: { mode: 'single' },
        ...extra,
      },
    }),
    201,
  );

/** All pages of a list, following the Link header. */
async function pages(call: (m: string, p: string) => Promise<any>, first: string): Promise<{ items: any[]; count: number }> {
  const items: any[] = [];
  let url: string | undefined = first;
  let count = 0;
  while (url) {
    const r = await call('GET', url);
    assert.equal(r.status, 200, r.raw);
    items.push(...r.body);
    count++;
    const link = r.headers.link as string | undefined;
    const next = link ? new URL(/<([^>]+)>/.exec(link)![1]!) : undefined;
    url = next ? next.pathname + next.search : undefined;
  }
  return { items, count };
}

test('a record from 1971 and one a few minutes ahead are stored in partitions of their own time, and listed', async () => {
  const c = await customer(ta, 'times');
  const asset = await c.asset('clocks');
  const old = '1971-03-04T10:00:00Z';
  const ahead = `${new Date(Date.now() + 5 * 60_000).toISOString().slice(0, 19)}Z`;
  const stored = ok(
    await c.call('POST', '/api/v1/locations', [
      { assetId: asset, latitude: 1, longitude: 1, whenCreated: old },
      { assetId: asset, latitude: 2, longitude: 2, whenCreated: ahead },
    ]),
    201,
  );
  const sensor = ok(
    await c.call('POST', '/api/v1/sensor-data', { assetId: asset, sensorId: 's1', type: 'TEMPERATURE', value: 4, whenCreated: old }),
    201,
  );
  const list = ok(await c.call('GET', `/api/v1/locations?assetId=${asset}&order=asc`), 200);
  assert.deepEqual(
    list.map((l: any) => l.whenCreated),
    [old, ahead],
  );
  assert.deepEqual(ok(await c.call('GET', `/api/v1/locations/${stored[0].id}`), 200), stored[0]);
  assert.equal(ok(await c.call('GET', `/api/v1/sensor-data/${sensor.id}`), 200).whenCreated, old);
  // Each in the partition of its time: the 1971 one in a partition made for it.
  const { rows } = await db().query<{ part: string; when_created: Date }>(
    `SELECT tableoid::regclass::text AS part, when_created FROM locations WHERE asset_id = $1 ORDER BY when_created`,
    [asset],
  );
  assert.match(rows[0]!.part, /^locations_p1971/);
  assert.notEqual(rows[0]!.part, rows[1]!.part);
  assert.ok((await partitions(ta, 'sensor_data')).some((p) => p.startsWith('sensor_data_p1971')));
  // A time too far ahead is still refused by the rules, not by the storage.
  const far = new Date(Date.now() + 3 * DAY).toISOString();
  assert.equal((await c.call('POST', '/api/v1/locations', { assetId: asset, latitude: 1, longitude: 1, whenCreated: far })).status, 400);
});

test('every GIN index of a partition takes its inserts into the tree, with no pending list (made now or before)', async () => {
  // One made by the storage module now, for a time of its own; the others at start and by migrations.
  await ta.app.services.storage.partitions.ensure('delivery_attempts', [Date.UTC(1975, 5, 1)]);
  const { rows } = await db().query<{ idx: string; table: string; options: string[] | null }>(
    `SELECT c.relname AS idx, t.relname AS table, c.reloptions AS options
       FROM pg_class c JOIN pg_am a ON a.oid = c.relam JOIN pg_index i ON i.indexrelid = c.oid JOIN pg_class t ON t.oid = i.indrelid
      WHERE c.relkind = 'i' AND a.amname = 'gin'`,
  );
  assert.ok(
    rows.some((r) => r.table.startsWith('delivery_attempts_p1975')),
    JSON.stringify(rows),
  );
  assert.ok(rows.length >= 2);
  for (const r of rows) assert.deepEqual(r.options, ['fastupdate=off'], r.idx);
});

test('a list across many partitions pages without gaps or repeats, both ways', async () => {
  const c = await customer(ta, 'paging');
  const [a, b] = [await c.asset('p1'), await c.asset('p2')];
  // 3 records a week for 30 weeks, over two assets, several at the same instant: 30+ partitions.
  const start = Date.now() - 30 * 7 * DAY;
  const body = [];
  for (let w = 0; w < 30; w++) {
    for (let k = 0; k < 3; k++) {
      body.push({
        assetId: k % 2 ? a : b,
        latitude: w,
        longitude: k,
        whenCreated: new Date(start + w * 7 * DAY + (k === 2 ? 0 : k)).toISOString(),
      });
    }
  }
  const stored: any[] = ok(await c.call('POST', '/api/v1/locations', body), 201);
  const ids = stored.map((s) => s.id);
  assert.ok((await partitions(ta, 'locations')).length >= 30);
  for (const order of ['asc', 'desc']) {
    const { items, count } = await pages(c.call, `/api/v1/locations?order=${order}&limit=7`);
    assert.ok(count >= 13, `${order}: paged (${count} pages)`);
    const got = items.map((i) => i.id);
    assert.equal(new Set(got).size, got.length, `${order}: no repeats`);
    assert.deepEqual([...got].sort(), [...ids].sort(), `${order}: no gaps`);
    const times = items.map((i) => Date.parse(i.whenCreated));
    assert.deepEqual(
      times,
      [...times].sort((x, y) => (order === 'asc' ? x - y : y - x)),
      `${order}: in time order`,
    );
  }
  // A window over a few partitions, for one asset.
  const from = new Date(start + 10 * 7 * DAY).toISOString();
  const to = new Date(start + 14 * 7 * DAY).toISOString();
  const { items } = await pages(c.call, `/api/v1/locations?assetId=${a}&from=${from}&to=${to}&limit=1&order=asc`);
  assert.deepEqual(
    items.map((i) => i.latitude),
    [10, 11, 12, 13],
  );
});

test('a moved asset: its history stays with the owner it was stored for; what comes after goes to the new owner', async () => {
  const first = await customer(ta, 'lessee-1');
  const second = await customer(ta, 'lessee-2');
  const asset = await first.asset('leased');
  const before = ok(await first.call('POST', '/api/v1/locations', { assetId: asset, latitude: 1, longitude: 1 }), 201);
  ok(await ta.call('PATCH', `/api/v1/assets/${asset}`, { token: ta.adminToken, body: { ownerId: second.ownerId } }), 200);
  const after = ok(await second.call('POST', '/api/v1/locations', { assetId: asset, latitude: 2, longitude: 2 }), 201);
  assert.equal(before.ownerId, first.ownerId);
  assert.equal(after.ownerId, second.ownerId);
  assert.deepEqual(
    ok(await first.call('GET', `/api/v1/locations?assetId=${asset}`), 200).map((l: any) => l.id),
    [before.id],
  );
  assert.deepEqual(
    ok(await second.call('GET', `/api/v1/locations?assetId=${asset}`), 200).map((l: any) => l.id),
    [after.id],
  );
  assert.equal((await second.call('GET', `/api/v1/locations/${before.id}`)).status, 404, "the old owner's history is not the new one's");
});

test('retentionDays: admin only, at most RETENTION_DAYS, inherited; GET shows it and the effective one', async () => {
  const t = await startApp(undefined, { RETENTION_DAYS: '400', DB_POOL_SIZE: '4' });
  const parent = await customer(t, 'ret-parent');
  const child = await customer(t, 'ret-child', { parentId: parent.ownerId });
  const admin = (method: string, path: string, body?: unknown) => t.call(method, path, { token: t.adminToken, body });
  const show = async (id: string) => ok(await admin('GET', `/api/v1/owners/${id}`), 200);
  assert.deepEqual([(await show(child.ownerId)).retentionDays, (await show(child.ownerId)).effectiveRetentionDays], [null, 400]);
  ok(await admin('PATCH', `/api/v1/owners/${parent.ownerId}`, { retentionDays: 30 }), 200);
  assert.equal((await show(child.ownerId)).effectiveRetentionDays, 30, 'inherited');
  ok(await admin('PATCH', `/api/v1/owners/${child.ownerId}`, { retentionDays: 7 }), 200);
  assert.deepEqual([(await show(child.ownerId)).retentionDays, (await show(child.ownerId)).effectiveRetentionDays], [7, 7]);
  const refused = await parent.call('PATCH', `/api/v1/owners/${child.ownerId}`, { retentionDays: 90 });
  assert.equal(refused.status, 403, refused.raw);
  assert.equal((await parent.call('PATCH', `/api/v1/owners/${child.ownerId}`, { note: 'still editable' })).status, 200);
  const tooLong = await admin('PATCH', `/api/v1/owners/${child.ownerId}`, { retentionDays: 401 });
  assert.equal(tooLong.status, 400);
  assert.equal(tooLong.body.field, '/retentionDays');
  for (const v of [0, 36501, 1.5, 'x'])
    assert.equal((await admin('PATCH', `/api/v1/owners/${child.ownerId}`, { retentionDays: v })).status, 400);
  assert.equal((await show(child.ownerId)).retentionDays, 7, 'refused changes changed nothing');
  ok(await admin('PATCH', `/api/v1/owners/${child.ownerId}`, { retentionDays: null }), 200);
  assert.equal((await show(child.ownerId)).effectiveRetentionDays, 30);
  // Each service applies its own RETENTION_DAYS (two in this process): this file's first has none.
  const other = await customer(ta, 'ret-other');
  assert.equal(ok(await ta.call('GET', `/api/v1/owners/${other.ownerId}`, { token: ta.adminToken }), 200).effectiveRetentionDays, null);
});

test('retention removes exactly what expired for each owner, after the grace, and keeps the latest location', async () => {
  // Its own service: its owners and integrations are the only ones, and it owns the retention task.
  const t = await retentionApp({ RETENTION_GRACE_SECONDS: '3600', RETENTION_CHECK_SECONDS: '604800' });
  const admin = (method: string, path: string, body?: unknown) => t.call(method, path, { token: t.adminToken, body });
  const parent = await customer(t, 'r-parent');
  const inherits = await customer(t, 'r-inherits', { parentId: parent.ownerId });
  const short = await customer(t, 'r-short', { parentId: parent.ownerId });
  const stranger = await customer(t, 'r-stranger');
  ok(await admin('PATCH', `/api/v1/owners/${parent.ownerId}`, { retentionDays: 30 }), 200);
  ok(await admin('PATCH', `/api/v1/owners/${short.ownerId}`, { retentionDays: 30 }), 200);
  const now = Date.now();
  const ages = [40, 20, 10, 3];
  const assets: Record<string, string> = {};
  for (const c of [parent, inherits, short, stranger]) {
    const asset = await c.asset('a');
    assets[c.ownerId] = asset;
    ok(
      await c.call(
        'POST',
        '/api/v1/locations',
        ages.map((d) => ({ assetId: asset, latitude: d, longitude: 0, whenCreated: new Date(now - d * DAY - 1000).toISOString() })),
      ),
      201,
    );
    ok(
      await c.call(
        'POST',
        '/api/v1/sensor-data',
        ages.map((d) => ({
          assetId: asset,
          sensorId: 's',
          type: 'TEMPERATURE',
          value: d,
          whenCreated: new Date(now - d * DAY).toISOString(),
        })),
      ),
      201,
    );
  }
  const left = async (c: { call: any; ownerId: string }, path: string, field: string) =>
    (ok(await c.call('GET', `${path}?assetId=${assets[c.ownerId]}&order=asc&limit=1000`), 200) as any[])
      .map((x) => x[field])
      .sort((a, b) => b - a);
  const storage = t.app.services.storage;

  // Shortened to 7 days: nothing goes within the grace period.
  ok(await admin('PATCH', `/api/v1/owners/${short.ownerId}`, { retentionDays: 7 }), 200);
  await storage.runRetention(now);
  assert.deepEqual(await left(short, '/api/v1/locations', 'latitude'), [40, 20, 10, 3], 'what was in force still applies');
  // The grace is over (the test owns that clock: the hold ends now).
  await t.app.services.db.query("UPDATE retention_holds SET until = now() - interval '1 second'");
  const result = await storage.runRetention(now);
  assert.deepEqual(await left(parent, '/api/v1/locations', 'latitude'), [20, 10, 3]);
  assert.deepEqual(await left(inherits, '/api/v1/locations', 'latitude'), [20, 10, 3]);
  assert.deepEqual(await left(short, '/api/v1/locations', 'latitude'), [3]);
  assert.deepEqual(await left(stranger, '/api/v1/locations', 'latitude'), [40, 20, 10, 3]);
  assert.deepEqual(await left(short, '/api/v1/sensor-data', 'value'), [3]);
  assert.deepEqual(await left(inherits, '/api/v1/sensor-data', 'value'), [20, 10, 3]);
  assert.equal(result?.removed.locations, 1 + 1 + 3);
  // The latest location outlives its row.
  const latest = ok(await short.call('GET', `/api/v1/locations/latest?assetId=${assets[short.ownerId]}`), 200);
  assert.equal(latest.length, 1);
  assert.equal(latest[0].latitude, 3);

  // Everything of a short-lived owner expires: its latest location still answers.
  ok(await admin('PATCH', `/api/v1/owners/${short.ownerId}`, { retentionDays: 1 }), 200);
  await t.app.services.db.query("UPDATE retention_holds SET until = now() - interval '1 second'");
  await storage.runRetention(now);
  assert.deepEqual(await left(short, '/api/v1/locations', 'latitude'), []);
  const still = ok(await short.call('GET', `/api/v1/locations/latest?assetId=${assets[short.ownerId]}`), 200);
  assert.deepEqual(still, latest);

  const metrics = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
  assert.match(metrics, /storage_rows_removed_total\{table="locations"\} [1-9]/);
  assert.match(metrics, /storage_partitions\{table="locations"\} [1-9]/);
  assert.match(metrics, /storage_bytes\{table="locations"\} [1-9]/);
});

test('a whole partition goes once every owner in it passed it, and an event-log partition only once nothing needs it', async () => {
  const t = await retentionApp({ RETENTION_DAYS: '30' });
  // The test runs retention itself: the periodic task's first turn (under way since the start) must
  // not drop the old partition first.
  await t.app.services.storage.stop();
  const c = await customer(t, 'p-drop');
  const asset = await c.asset('a');
  const now = Date.now();
  // 60 days ago: a partition of its own, whose every owner has 30 days at most.
  /** A location of the asset at `latitude`, `daysAgo` days back. */
  const locate = async (latitude: number, daysAgo: number) =>
    ok(
      await c.call('POST', '/api/v1/locations', {
        assetId: asset,
        latitude,
        longitude: latitude,
        whenCreated: new Date(now - daysAgo * DAY).toISOString(),
      }),
      201,
    );
  await locate(1, 60);
  const old = (await partitions(t, 'locations')).filter(
    (p) => p.startsWith('locations_p') && p < `locations_p${new Date(now - 40 * DAY).toISOString().slice(0, 10).replaceAll('-', '')}`,
  );
  assert.equal(old.length, 1);

  // A paused integration that has not read this owner's events, and an event log aged past every
  // result's retention (the test moves the rows into the past: into a partition made for them).
  rx.on('/drop', () => ({ status: 200 }));
  const integration = await webhook(t, c.ownerId, 'drop-hook', '/drop', { enabled: false });
  ok(await c.call('POST', '/api/v1/locations', { assetId: asset, latitude: 2, longitude: 2 }), 201);
  await t.app.services.db.query("UPDATE event_log SET when_created = when_created - interval '90 days'");
  const logParts = async () =>
    (await partitions(t, 'event_log')).filter(
      (p) => p < `event_log_p${new Date(now - 50 * DAY).toISOString().slice(0, 10).replaceAll('-', '')}`,
    );
  assert.ok((await logParts()).length >= 1, 'the aged log rows are in an old partition');

  const r1 = await t.app.services.storage.runRetention(now);
  assert.ok(r1?.dropped.includes(old[0]!), JSON.stringify(r1));
  assert.equal((await partitions(t, 'locations')).includes(old[0]!), false);
  assert.ok((await logParts()).length >= 1, 'the paused integration still needs its events');

  // The integration is deleted: nothing needs the old log rows any more.
  ok(await t.call('DELETE', `/api/v1/integrations/${integration.id}`, { token: t.adminToken }), 204);
  // With the event log on Kafka, once the consumer group has handed every event over.
  await eventLogHandedOver(t.app.services.db, t.app.services.cfg);
  const r2 = await t.app.services.storage.runRetention(now);
  assert.deepEqual(await logParts(), [], JSON.stringify(r2));
  // A record for the dropped range is stored again, in a partition made again.
  await locate(3, 60);
});

test('a failed delivery keeps its event-log partition through the redelivery window', async () => {
  const t = await retentionApp({});
  const c = await customer(t, 'p-failed');
  const asset = await c.asset('a');
  rx.on('/refuse', () => ({ status: 400 }));
  const integration = await webhook(t, c.ownerId, 'refuse-hook', '/refuse', { retry: { scheduleSeconds: [0.05], maxAttempts: 1 } });
  const stored = ok(await c.call('POST', '/api/v1/locations', { assetId: asset, latitude: 2, longitude: 2 }), 201);
  await rx.waitFor(() => rx.for('/refuse').length >= 1, 60_000, 'the attempt');
  const failed = async () =>
    (
      await t.app.services.db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM deliveries WHERE integration_id = $1 AND status = 'FAILED'",
        [integration.id],
      )
    ).rows[0]!.n;
  for (let i = 0; i < 600 && (await failed()) === 0; i++) await new Promise((r) => setTimeout(r, 100));
  assert.equal(await failed(), 1);
  await t.app.services.db.query("UPDATE event_log SET when_created = when_created - interval '90 days'");
  await t.app.services.storage.runRetention();
  const { rows } = await t.app.services.db.query('SELECT 1 FROM event_log WHERE object_id = $1', [String(stored.id)]);
  assert.equal(rows.length, 1, 'the failed delivery may still be redelivered: its event stays');
  // Past its retention the failed delivery goes, and then its event.
  await t.app.services.db.query("UPDATE deliveries SET completed_at = now() - interval '31 days' WHERE integration_id = $1", [
    integration.id,
  ]);
  await t.app.services.engine!.sweep();
  // With the event log on Kafka, once the consumer group has committed what it handed over.
  await eventLogHandedOver(t.app.services.db, t.app.services.cfg);
  await t.app.services.storage.runRetention();
  assert.equal((await t.app.services.db.query('SELECT 1 FROM event_log WHERE object_id = $1', [String(stored.id)])).rows.length, 0);
});
