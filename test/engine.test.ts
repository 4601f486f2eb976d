// Delivery engine v2 (API guide 9): the event log is a log that each integration reads from
// its own position (tx_id, id), only below the horizon pg_snapshot_xmin(), so an event whose
// transaction commits late, behind a newer one, is still delivered, and the result stream follows
// the attempt log the same way. Also: fresh events are not starved by a large retry backlog (claim
// order, not timing), the stats of GET /integrations/{id}, backlog expiry after maxBacklogHours (FAILED
// visibly, redeliverable), and which events a new integration covers: those stored after it was
// created, with the owner ancestry of the moment each event was stored.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import type { Queryable } from '../src/db/db.js';
import * as queue from '../src/delivery/queue/index.js';
import { appendEvents } from '../src/eventlog/log.js';
import {
  bad,
  deliveryHistory,
  fleet,
  ownerWithKey,
  postgresOnly,
  startApp,
  storeLocations,
  type TestApp,
  waitFor,
  connectPg,
} from './helpers.js';
import { Receiver } from './receiver.js';

const ta: TestApp = await startApp(undefined, {
  PUSH_ALLOW_HTTP: 'true',
  PUSH_ALLOWED_NETWORKS: '127.0.0.0/8',
  DELIVERY_POLL_MS: '100',
  RATE_LIMIT_MAX: '100000',
});
const rx = await new Receiver().start();
after(() => rx.close());
const db = ta.app.services.db;

let n = 0;
/** An owner (under parentId when given) with one asset and a webhook integration to a receiver path of its own. */
async function hookFleet(integration: Record<string, unknown>, parentId?: string) {
  const path = `/engine-${++n}`;
  const f = await fleet(
    ta,
    `engine-${n}`,
    { channel: 'webhook', destination: rx.url + path, retry: { scheduleSeconds: [0.2] }, ...integration },
    parentId ? { parentId } : {},
  );
  return { ...f, path };
}

const { deliveries, until } = deliveryHistory(() => ta);

async function stats(integrationId: string) {
  const r = await ta.call('GET', `/api/v1/integrations/${integrationId}`, { token: ta.adminToken });
  assert.equal(r.status, 200, r.raw);
  return r.body.stats;
}

async function patch(integrationId: string, body: Record<string, unknown>) {
  const r = await ta.call('PATCH', `/api/v1/integrations/${integrationId}`, { token: ta.adminToken, body });
  assert.equal(r.status, 200, r.raw);
}

/**
 * Waits until these locations' log rows are below the horizon (every transaction that could still
 * commit an earlier position has ended), so the next read of the log reaches them. On a busy server
 * another session's short transaction may hold the horizon for a moment: a condition, not a delay.
 */
async function belowHorizon(locationIds: string[]): Promise<void> {
  await waitFor(
    () => 'the log rows below the horizon',
    async () => {
      const { rows } = await db.query<{ ok: boolean }>(
        `SELECT bool_and(tx_id < pg_snapshot_xmin(pg_current_snapshot())::text::bigint) AS ok
           FROM event_log WHERE object_type = 'location' AND object_id = ANY($1::text[])`,
        [locationIds],
      );
      return rows[0]?.ok === true;
    },
  );
}

/** The location ids (payload id) a receiver path got, in arrival order. */
const locationsAt = (path: string) =>
  rx
    .for(path)
    .filter((r) => r.headers['webhook-object-type'] === 'location')
    .map((r) => String(JSON.parse(r.body).id));

/** A raw PostgreSQL session the test drives itself, as the Queryable the queue module takes. */
async function rawSession() {
  const client = await connectPg(ta.databaseUrl);
  const q: Queryable = {
    query: async (text, params) => {
      const r = await client.query(text, params as unknown[]);
      return { rows: r.rows, rowCount: r.rowCount ?? 0 };
    },
  };
  return { client, q };
}

/** Follows the SSE result stream: every `data:` line parsed, and how many keep-alives came. */
async function follow(query: string) {
  const ac = new AbortController();
  const res = await fetch(`${ta.url}/api/v1/deliveries/stream?${query}`, {
    headers: { authorization: `Bearer ${ta.adminToken}`, accept: 'text/event-stream' },
    signal: ac.signal,
  });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /event-stream/);
  const state = { lines: [] as any[], keepAlives: 0, error: null as unknown };
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  const reading = (async () => {
    let buf = '';
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += decoder.decode(value, { stream: true });
        const parts = buf.split('\n');
        buf = parts.pop()!;
        for (const l of parts) {
          if (l.startsWith('data: ')) state.lines.push(JSON.parse(l.slice(6)));
          else if (l.startsWith(': keep-alive')) state.keepAlives++;
        }
      }
    } catch (e) {
      if (!ac.signal.aborted) state.error = e;
    }
  })();
  const waitFor = async (cond: () => boolean, what: string, ms = 120_000) => {
    const end = Date.now() + ms;
    while (!cond()) {
      if (state.error) throw state.error;
      if (Date.now() > end) throw new Error(`stream: ${what} not met in ${ms} ms (${state.lines.length} lines)`);
      await new Promise((r) => setTimeout(r, 25));
    }
  };
  const close = async () => {
    ac.abort();
    await reading;
  };
  return { state, waitFor, close };
}

// Tests of what only PostgreSQL can do (two transactions at once, two instances on one database)
// run in its stage only, as the crash tests do: PGlite has one connection.
postgresOnly(
  'two transactions at once; PGlite has one connection',
  'events committed out of order are all delivered (none skipped)',
  async () => {
    const f = await hookFleet({ objectTypes: ['asset', 'location'] });
    const late = await rawSession();
    try {
      // An asset event appended in a transaction that stays open: it takes its log id now...
      await late.q.query('BEGIN');
      await appendEvents(late.q, 'asset', [{ objectId: f.assetId, ownerId: f.ownerId, payload: { id: f.assetId, marker: 'late' } }]);
      // ...and a location stored through the API commits meanwhile, with a higher id.
      const [locationId] = await f.store([1]);
      const { rows } = await late.q.query<{ id: string; object_type: string }>(
        `SELECT id, object_type FROM event_log
          WHERE (object_type = 'asset' AND object_id = $1 AND payload->>'marker' = 'late')
             OR (object_type = 'location' AND object_id = $2)`,
        [f.assetId, locationId],
      );
      const lateId = rows.find((r) => r.object_type === 'asset')!.id;
      const restId = rows.find((r) => r.object_type === 'location')!.id;
      assert.ok(BigInt(lateId) < BigInt(restId), `the late event has the lower id (${lateId} < ${restId}): committed out of order`);
      await late.q.query('COMMIT');

      await rx.waitFor(
        () => {
          const got = rx.for(f.path).map((r) => JSON.parse(r.body));
          return got.some((b) => b.marker === 'late') && got.some((b) => String(b.id) === locationId);
        },
        120_000,
        'the late asset event and the location',
      );
      const done = await until(f.integrationId, (d) => [lateId, restId].every((id) => d.find((x) => x.id === id)?.status === 'SUCCEEDED'));
      assert.equal(done.length, 2, 'two deliveries, both SUCCEEDED');

      // The result stream follows attempts the same way. The follower starts at the database's
      // present; an attempt row committed late behind a newer one must still reach it.
      const { rows: now } = await db.query<{ t: Date }>('SELECT now() AS t');
      const s = await follow(`channel=webhook&since=${encodeURIComponent(now[0]!.t.toISOString())}`);
      const lateAttempt = await rawSession();
      try {
        // The next location's request is held at the receiver until the raw attempt row is written,
        // so its result is committed by a transaction younger than the raw one.
        let release!: () => void;
        const held = new Promise<void>((r) => (release = r));
        rx.on(f.path, async () => {
          await held;
          return { status: 200 };
        });
        const [next] = await f.store([2]);
        await rx.waitFor(() => locationsAt(f.path).includes(next!), 120_000, 'the next location, in flight');
        await lateAttempt.q.query('BEGIN');
        const { rows: raw } = await lateAttempt.q.query<{ id: string; tx_id: string }>(
          `INSERT INTO delivery_attempts (integration_id, request_id, log_ids, attempt, when_attempted, success)
           VALUES ($1, gen_random_uuid(), ARRAY[$2::int8], 99, now(), true) RETURNING id::text, tx_id::text`,
          [f.integrationId, lateId],
        );
        release();
        const { rows: nextOutbox } = await db.query<{ id: string }>(
          `SELECT id::text FROM event_log WHERE object_type = 'location' AND object_id = $1`,
          [next],
        );
        const nextId = nextOutbox[0]!.id;
        // The newer attempt is committed (visible to another session) while the raw one is open.
        const newer = await waitFor(
          () => 'the newer attempt committed',
          async () => {
            const { rows } = await db.query<{ id: string; tx_id: string }>(
              'SELECT id::text, tx_id::text FROM delivery_attempts WHERE log_ids && ARRAY[$1::int8] AND success',
              [nextId],
            );
            return rows.length === 1 ? rows : undefined;
          },
        );
        assert.ok(BigInt(newer[0]!.tx_id) > BigInt(raw[0]!.tx_id), 'the newer attempt is of a younger transaction');
        assert.ok(BigInt(newer[0]!.id) > BigInt(raw[0]!.id), 'and has the higher id');
        // Two keep-alives after it committed: the stream has queried at least once since (query,
        // rows, a pause, keep-alive, query...). The horizon holds the newer line back meanwhile.
        const base = s.state.keepAlives;
        await s.waitFor(() => s.state.keepAlives >= base + 2, 'two keep-alives');
        const mine = () => s.state.lines.filter((l) => l.integrationId === f.integrationId);
        assert.ok(!mine().some((l) => l.deliveryId === nextId), 'not shown while an older transaction may still commit before it');
        await lateAttempt.q.query('COMMIT');
        await s.waitFor(
          () => mine().some((l) => l.deliveryId === lateId && l.attempt === 99) && mine().some((l) => l.deliveryId === nextId),
          'both attempts on the stream',
        );
        const order = mine().map((l) =>
          l.deliveryId === lateId && l.attempt === 99 ? 'late' : l.deliveryId === nextId ? 'next' : 'other',
        );
        assert.deepEqual(
          order.filter((x) => x !== 'other'),
          ['late', 'next'],
          'each once, in transaction order',
        );
        const line = mine().find((l) => l.deliveryId === nextId);
        assert.equal(line.success, true);
        assert.equal(line.objectType, 'location');
      } finally {
        await lateAttempt.client.query('ROLLBACK').catch(() => {});
        await lateAttempt.client.end();
        await s.close();
      }
    } finally {
      await late.client.query('ROLLBACK').catch(() => {});
      await late.client.end();
    }
  },
);

test('fresh events are claimed beside a large retry backlog', async () => {
  const f = await hookFleet({ retry: { scheduleSeconds: [3600] }, webhook: { maxConcurrentRequests: 1 } });
  rx.on(f.path, (_r, k) => (k <= 40 ? { status: 400 } : { status: 200 }));
  const stored = await f.store(Array.from({ length: 40 }, (_, i) => i));
  await until(f.integrationId, (d) => d.length === 40 && d.every((x) => x.status === 'FAILED'));
  await patch(f.integrationId, { enabled: false });
  const redeliver = await ta.call('POST', `/api/v1/integrations/${f.integrationId}/deliveries/redeliver`, {
    token: ta.adminToken,
    body: {
      status: 'FAILED',
      from: new Date(Date.now() - 3600_000).toISOString(),
      to: new Date(Date.now() + 3600_000).toISOString(),
    },
  });
  assert.equal(redeliver.status, 202, redeliver.raw);
  assert.deepEqual(redeliver.body, { count: 40 }, '40 PENDING, due now');
  const [fresh] = await f.store([45]);
  await belowHorizon([fresh!]);
  const before = rx.for(f.path).length;
  assert.equal(before, 40);
  await patch(f.integrationId, { enabled: true });
  await until(f.integrationId, (d) => d.length === 41 && d.every((x) => x.status === 'SUCCEEDED'));
  const sent = locationsAt(f.path).slice(before);
  assert.equal(sent.length, 41, 'each once');
  assert.deepEqual([...sent].sort(), [...stored, fresh!].sort());
  // By claim order, not timing: with one request free, each claim takes either the log or the retry
  // queue, alternating, starting with the log. The 40 redeliveries were due before the fresh event
  // was stored, yet it goes in the first claim (the second at worst), not after them.
  const at = sent.indexOf(fresh!);
  assert.ok(at >= 0 && at <= 1, `the fresh event went as request ${at} of ${sent.length} after enabling`);
});

test('a claim taken while few requests were free gets the requests that free up after it: its events do not wait behind each other', async () => {
  const f = await hookFleet({ webhook: { maxConcurrentRequests: 4 } });
  // The first three requests are held until released; every later one takes 200 ms, and the most of
  // them open at once is counted.
  let release!: () => void;
  const held = new Promise<void>((r) => {
    release = r;
  });
  let open = 0;
  let peak = 0;
  rx.on(f.path, async (_r, k) => {
    if (k <= 3) {
      await held;
      return { status: 200 };
    }
    open++;
    peak = Math.max(peak, open);
    await new Promise((r) => setTimeout(r, 200));
    open--;
    return { status: 200 };
  });
  await f.store([0, 1, 2]);
  await rx.waitFor(() => rx.for(f.path).length === 3, 30_000, 'the first three requests');
  // One request of the four is free: the next claim takes these 16 events with one slot.
  await f.store(Array.from({ length: 16 }, (_, i) => 10 + i));
  await rx.waitFor(() => rx.for(f.path).length === 4, 30_000, 'the claim of the 16');
  assert.equal(peak, 1);
  release();
  await until(f.integrationId, (d) => d.length === 19 && d.every((x) => x.status === 'SUCCEEDED'));
  // The log has nothing newer: the three requests freed go to the claim holding the 16, which then
  // sends up to four at a time (before, it sent its 16 one after another).
  assert.ok(peak >= 2, `at most ${peak} of the 16 were sent at once`);
  // Grown, the claim still keeps the integration's maxConcurrentRequests.
  assert.ok(peak <= 4, `${peak} of the 16 were sent at once, over maxConcurrentRequests 4`);
  assert.equal(locationsAt(f.path).length, 19, 'each once');
});

postgresOnly(
  'a second session and the horizon: PGlite has one session',
  "a claim in progress holds no other integration's events back: its lock takes no transaction id; a second claim of the same integration waits for it",
  async () => {
    const a = await hookFleet({});
    const b = await hookFleet({});
    rx.on(b.path, () => ({ status: 200 }));
    // a is paused: the engine leaves it alone (its round would wait for the test's lock of a).
    await db.query(`UPDATE integration_state SET paused_until = now() + interval '1 hour' WHERE integration_id = $1`, [a.integrationId]);
    // A claim round that delivers an event of b stored now listed its integrations after the pause:
    // no round still about to claim a (listed before it) is left to wait for the lock below.
    const [before] = await b.store([0]);
    await rx.waitFor(() => locationsAt(b.path).includes(before!), 30_000, "b's event before a's claim");
    const first = await rawSession();
    const second = await rawSession();
    try {
      await first.client.query('BEGIN');
      assert.equal((await queue.lockState(first.q, a.integrationId, 0))?.paused, true, "a's state");
      const { rows } = await first.client.query('SELECT pg_current_xact_id_if_assigned() AS xid');
      assert.equal(rows[0].xid, null, 'the claim holds a transaction id before it writes');
      // Another integration's events are read past the open claim (with the state row locked FOR
      // UPDATE, they waited for its commit: the claim held the horizon).
      const [id] = await b.store([1]);
      await rx.waitFor(() => locationsAt(b.path).includes(id!), 30_000, "b's event, while a's claim is open");
      // The same integration's next claim waits for the lock.
      await second.client.query('BEGIN');
      const pid = (await second.client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
      let secondDone = false;
      const secondClaim = queue.lockState(second.q, a.integrationId, 0).then((st) => {
        secondDone = true;
        return st;
      });
      await waitFor(
        () => "the second claim of a to wait for the first's lock",
        async () =>
          (await db.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = $2', [pid, 'Lock'])).rows.length > 0,
      );
      assert.equal(secondDone, false);
      await first.client.query('COMMIT');
      assert.ok(await secondClaim, 'the second claim goes on once the first ends');
      await second.client.query('COMMIT');
    } finally {
      await first.client.end();
      await second.client.end();
    }
  },
);

test('stats: pending, delivered, failed, last error and latency', async () => {
  const f = await hookFleet({});
  rx.on(f.path, (r) => (JSON.parse(r.body).latitude === 7 ? { status: 400 } : { status: 200 }));
  await f.store([1, 2, 3, 4, 5, 7]);
  const done = await until(f.integrationId, (d) => d.length === 6 && d.every((x) => x.status !== 'PENDING'));
  assert.deepEqual(done.map((d) => d.status).sort(), ['FAILED', 'SUCCEEDED', 'SUCCEEDED', 'SUCCEEDED', 'SUCCEEDED', 'SUCCEEDED']);
  const s = await stats(f.integrationId);
  assert.equal(s.pending, 0);
  assert.deepEqual(s.delivered, { lastHour: 5, lastDay: 5 });
  assert.deepEqual(s.failed, { lastHour: 1, lastDay: 1 });
  assert.equal(s.lastError, 'HTTP 400');
  for (const t of [s.lastSuccessAt, s.lastErrorAt]) {
    assert.equal(typeof t, 'string');
    assert.ok(!Number.isNaN(Date.parse(t)), String(t));
  }
  for (const p of [s.p50LatencyMs, s.p99LatencyMs]) assert.ok(Number.isInteger(p) && p >= 0, String(p));
  assert.ok(s.p99LatencyMs >= s.p50LatencyMs);
  assert.equal(s.pausedUntil, null);

  await patch(f.integrationId, { enabled: false });
  await f.store([8, 9, 10]);
  assert.equal((await stats(f.integrationId)).pending, 3, 'the disabled backlog counts as pending');

  // The result stream without a channel (API guide 9: all three by default) carries these attempts.
  const res = await fetch(`${ta.url}/api/v1/deliveries/stream`, { headers: { authorization: `Bearer ${ta.adminToken}` } });
  assert.equal(res.status, 200);
  const lines = (await res.text())
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l))
    .filter((l) => l.integrationId === f.integrationId);
  assert.equal(lines.length, 6, 'one line per attempt and event');
  assert.ok(lines.every((l) => l.channel === 'webhook' && typeof l.requestId === 'string'));
});

test('a backlog older than maxBacklogHours fails visibly and can be redelivered', async () => {
  // Out of range, or not a number: a 400 naming the field, and nothing changes.
  const o = await ownerWithKey(ta, 'bad-backlog-owner');
  for (const maxBacklogHours of [0, 8761, 'soon']) {
    const body = { name: 'bad-backlog', channel: 'webhook', ownerIds: [o.ownerId], destination: rx.url, maxBacklogHours };
    bad(await ta.call('POST', '/api/v1/integrations', { token: ta.adminToken, body }), 400, '/maxBacklogHours', String(maxBacklogHours));
  }
  assert.equal((await ta.call('GET', '/api/v1/integrations?name=bad-backlog', { token: ta.adminToken })).body.length, 0);
  const f = await hookFleet({ maxBacklogHours: 1, enabled: false });
  const ids = await f.store([1, 2]);
  await belowHorizon(ids);
  // The test owns this clock: the events were stored two hours ago.
  await db.query(`UPDATE event_log SET when_created = now() - interval '2 hours' WHERE object_type = 'location' AND object_id = ANY($1)`, [
    ids,
  ]);
  await ta.app.services.engine!.sweep();
  const failed = await deliveries(f.integrationId);
  assert.equal(failed.length, 2);
  assert.ok(
    failed.every((d) => d.status === 'FAILED' && d.lastError === 'backlog expired' && d.attempts === 0),
    JSON.stringify(failed),
  );
  assert.deepEqual(failed.map((d) => d.objectId).sort(), [...ids].sort());
  assert.equal((await stats(f.integrationId)).failed.lastHour, 2);
  assert.equal(rx.for(f.path).length, 0, 'nothing was sent');

  await patch(f.integrationId, { enabled: true });
  // Redelivery selects by the delivery's creation time: the event's store time, moved 2 h back.
  const r = await ta.call('POST', `/api/v1/integrations/${f.integrationId}/deliveries/redeliver`, {
    token: ta.adminToken,
    body: { status: 'FAILED', from: new Date(Date.now() - 3 * 3600_000).toISOString(), to: new Date(Date.now() + 3600_000).toISOString() },
  });
  assert.equal(r.status, 202, r.raw);
  assert.deepEqual(r.body, { count: 2 });
  await until(f.integrationId, (d) => d.length === 2 && d.every((x) => x.status === 'SUCCEEDED'));
  await rx.waitFor(() => ids.every((id) => locationsAt(f.path).includes(id)), 120_000, 'both redelivered');
});

test('a new integration starts at the moment it is created; an event keeps the owner ancestry of the moment it was stored', async () => {
  const parent = await ownerWithKey(ta, `engine-parent-${++n}`);
  const child = await ownerWithKey(ta, `engine-child-${n}`, { parentId: parent.ownerId });
  const asset = async (key: string) => {
    const r = await ta.call('POST', '/api/v1/assets', { token: key, body: { name: 'A1' } });
    assert.equal(r.status, 201, r.raw);
    return r.body.id as string;
  };
  const parentAsset = await asset(parent.key);
  const childAsset = await asset(child.key);
  const [before] = await storeLocations(ta, child.key, childAsset, [1]);
  // On the parent: its descendants are covered. One request at a time, so the receiver sees log order.
  const path = `/engine-${n}`;
  const r = await ta.call('POST', '/api/v1/integrations', {
    token: ta.adminToken,
    body: {
      name: `int-${n}`,
      channel: 'webhook',
      enabled: false,
      ownerIds: [parent.ownerId],
      objectTypes: ['location'],
      destination: rx.url + path,
      webhook: { maxConcurrentRequests: 1 },
    },
  });
  assert.equal(r.status, 201, r.raw);
  const integrationId = r.body.id as string;
  const [e1] = await storeLocations(ta, child.key, childAsset, [2]);
  // The child leaves the parent (to the root): what it stores from now on is no longer covered.
  const moved = await ta.call('PATCH', `/api/v1/owners/${child.ownerId}`, { token: ta.adminToken, body: { ownerId: null } });
  assert.equal(moved.status, 200, moved.raw);
  assert.equal(moved.body.ownerId, null);
  const [e2] = await storeLocations(ta, child.key, childAsset, [3]);
  await patch(integrationId, { enabled: true });
  await rx.waitFor(() => locationsAt(path).includes(e1!), 120_000, 'e1, stored under the parent while disabled');
  // A barrier after everything above in the log: once it arrives, the integration has read past
  // them, and one request at a time means nothing before it can still be on its way.
  const [barrier] = await storeLocations(ta, parent.key, parentAsset, [4]);
  await rx.waitFor(() => locationsAt(path).includes(barrier!), 120_000, 'the barrier');
  assert.deepEqual(locationsAt(path), [e1, barrier], 'neither the location stored before the integration nor the one after the move');
  assert.ok(!locationsAt(path).includes(before!) && !locationsAt(path).includes(e2!));
  const d = await until(integrationId, (x) => x.length === 2 && x.every((y) => y.status === 'SUCCEEDED'));
  assert.deepEqual(d.map((x) => x.objectId).sort(), [e1, barrier].sort());
});

postgresOnly(
  'two instances on one database; PGlite has one connection',
  'a stopping instance hands its claims back: another takes them over at once, not after the lease',
  async () => {
    // A lease of an hour: only a hand-back at stop lets the second instance deliver within the test.
    const env = {
      PUSH_ALLOW_HTTP: 'true',
      PUSH_ALLOWED_NETWORKS: '127.0.0.0/8',
      DELIVERY_POLL_MS: '100',
      RATE_LIMIT_MAX: '100000',
      DELIVERY_LEASE_SECONDS: '3600',
    };
    const a = await startApp(undefined, env);
    const o = await ownerWithKey(a, 'handover');
    const asset = await a.call('POST', '/api/v1/assets', { token: o.key, body: { name: 'H1' } });
    assert.equal(asset.status, 201, asset.raw);
    const path = '/engine-handover';
    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    rx.on(path, async (_r, k) => {
      if (k === 1) await held; // the first request is in flight while the instance stops
      return { status: 200 };
    });
    const created = await a.call('POST', '/api/v1/integrations', {
      token: a.adminToken,
      body: {
        name: 'handover',
        channel: 'webhook',
        ownerIds: [o.ownerId],
        objectTypes: ['location'],
        destination: rx.url + path,
        webhook: { mode: 'single', maxConcurrentRequests: 1 },
      },
    });
    assert.equal(created.status, 201, created.raw);
    const items = Array.from({ length: 10 }, (_, i) => ({ assetId: asset.body.id, latitude: i, longitude: 1 }));
    const stored = await a.call('POST', '/api/v1/locations', { token: o.key, body: items });
    assert.equal(stored.status, 201, stored.raw);
    // One claim holds all ten (one slot, sixteen deep); the first is at the receiver.
    await rx.waitFor(() => rx.for(path).length === 1, 60_000, 'the first request');
    const closing = a.app.close();
    release();
    await closing;
    assert.equal(rx.for(path).length, 1, 'a stopping instance sends nothing new');
    const b = await startApp(undefined, env, { databaseUrl: a.databaseUrl! });
    const ids = () => new Set(rx.for(path).map((r) => String(JSON.parse(r.body).id)));
    await rx.waitFor(() => ids().size === 10, 120_000, 'the other instance delivers the rest');
    assert.equal(rx.for(path).length, 10, 'each sent once: the one answered before the stop is not sent again');
    assert.ok(b);
  },
);
