// @test-lanes postgres pglite kafka
// Webhook push (API guide 9) against a real local receiver: the
// delivery rules of 6.4 row by row, single and batch bodies, every auth method, Standard Webhooks
// signatures (verified with the npm `standardwebhooks` package), event-id injection, per-webhook
// rate and concurrency limits measured by the receiver, redirects not followed, address refusals,
// redelivery, the result stream and the test endpoint.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { addressPolicy, vetUrl, vettedLookup } from '../src/delivery/address.js';
import { closeAgents, sendWebhook } from '../src/delivery/channels/webhook/webhook.js';
import type { IntegrationConfig } from '../src/delivery/integrations/model.js';
import { TEST_EVENT_LOG, TEST_KAFKA_BROKERS } from './event-log.js';
import { bad, deliveryHistory, fleet, ownerWithKey, startApp, storeLocations, type TestApp } from './helpers.js';
import { assertBucket, Receiver } from './receiver.js';

const SECRET = `whsec_${crypto.randomBytes(24).toString('base64')}`;
const ta: TestApp = await startApp(undefined, {
  PUSH_ALLOW_HTTP: 'true',
  PUSH_ALLOWED_NETWORKS: '127.0.0.0/8',
  DELIVERY_POLL_MS: '100',
  RATE_LIMIT_MAX: '100000',
});
const rx = await new Receiver().start();
after(() => rx.close());

let n = 0;
/** An owner with one asset and a webhook integration to a receiver path of its own. */
async function hookFleet(integration: Record<string, unknown>) {
  const path = `/hook-${++n}`;
  const f = await fleet(ta, `fleet-${n}`, {
    channel: 'webhook',
    destination: rx.url + path,
    retry: { scheduleSeconds: [0.2] },
    ...integration,
  });
  return { ...f, path };
}

const { deliveries, until } = deliveryHistory(() => ta);

test('single mode: one signed POST per record, stored status, time and receipt id; secrets never returned', async () => {
  const f = await hookFleet({ webhook: { signingSecret: SECRET, auth: { type: 'apiKey', token: 'cust-key-1' } } });
  assert.equal(f.integration.webhook.signingSecretSet, true);
  assert.deepEqual(f.integration.webhook.auth, { type: 'apiKey' });
  assert.ok(!JSON.stringify(f.integration).includes('cust-key-1'));
  const stored = await f.store(3);
  const done = await until(f.integrationId, (d) => d.length === 3 && d.every((x) => x.status === 'SUCCEEDED'));
  const got = rx.for(f.path);
  assert.equal(got.length, 3);
  const wh = new Webhook(SECRET);
  for (const r of got) {
    const payload = wh.verify(r.body, {
      'webhook-id': r.headers['webhook-id'] as string,
      'webhook-timestamp': r.headers['webhook-timestamp'] as string,
      'webhook-signature': r.headers['webhook-signature'] as string,
    }) as any;
    assert.equal(r.headers['content-type'], 'application/json');
    assert.equal(r.headers['webhook-object-type'], 'location');
    assert.equal(r.headers['webhook-schema-version'], '1');
    assert.equal(r.headers.authorization, 'Bearer cust-key-1');
    assert.match(String(r.headers['user-agent']), /asset-tracking-service/);
    assert.ok(!Array.isArray(payload), 'one object, no wrapper');
    assert.ok(stored.some((s) => Number(s) === payload.id));
    assert.ok(
      done.some((d) => d.eventId === r.headers['webhook-id']),
      'webhook-id is the event id',
    );
  }
  for (const d of done) {
    assert.equal(d.attempts, 1);
    assert.match(d.receiptId, /^rcpt-\d$/);
    assert.equal(d.attemptsLog.length, 1);
    assert.equal(d.attemptsLog[0].success, true);
    assert.equal(d.attemptsLog[0].httpStatus, 200);
    assert.ok(d.attemptsLog[0].responseTimeMs >= 0);
  }
  // A tampered body fails verification.
  assert.throws(() =>
    wh.verify(`${got[0]!.body} `, {
      'webhook-id': got[0]!.headers['webhook-id'] as string,
      'webhook-timestamp': got[0]!.headers['webhook-timestamp'] as string,
      'webhook-signature': got[0]!.headers['webhook-signature'] as string,
    }),
  );
});

test('5xx and timeouts are retried until success; 4xx and 3xx fail at once with the response stored; redirects are not followed', async () => {
  // The second answer never comes while the sender waits: the receiver holds it until the test has
  // seen that attempt time out. The others answer at once, well inside the 2 s timeout.
  const retry = await hookFleet({ webhook: { timeoutMs: 2000 } });
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  rx.on(retry.path, async (_r, k) => {
    if (k === 1) return { status: 503, body: 'busy' };
    if (k === 2) {
      await released;
      return { status: 200 };
    }
    return { status: 200, body: '{"success":true,"id":"ok-3"}' };
  });
  await retry.store(1);
  try {
    await until(retry.integrationId, (x) => x[0]?.attemptsLog.length >= 2);
  } finally {
    release();
  }
  const [d] = await until(retry.integrationId, (x) => x[0]?.status === 'SUCCEEDED');
  assert.equal(d.attempts, 3);
  assert.deepEqual(
    d.attemptsLog.map((a: any) => [a.success, a.httpStatus]),
    [
      [false, 503],
      [false, null],
      [true, 200],
    ],
  );
  assert.equal(d.attemptsLog[0].responseBody, 'busy');
  assert.match(d.attemptsLog[1].error, /timed out/);
  assert.equal(d.receiptId, 'ok-3');

  const gone = await hookFleet({});
  rx.on(gone.path, () => ({ status: 404, headers: { 'x-why': 'nope' }, body: '{"error":"unknown endpoint"}' }));
  rx.on(`${gone.path}-target`, () => ({ status: 200 }));
  await gone.store(1);
  const [g] = await until(gone.integrationId, (x) => x[0]?.status === 'FAILED');
  assert.equal(g.attempts, 1);
  assert.equal(g.attemptsLog[0].httpStatus, 404);
  assert.equal(g.attemptsLog[0].responseHeaders['x-why'], 'nope');
  assert.equal(g.attemptsLog[0].responseBody, '{"error":"unknown endpoint"}');

  const moved = await hookFleet({});
  rx.on(moved.path, () => ({ status: 302, headers: { location: `${rx.url}${moved.path}-target` } }));
  await moved.store(1);
  const [m] = await until(moved.integrationId, (x) => x[0]?.status === 'FAILED');
  assert.equal(m.attemptsLog[0].httpStatus, 302);
  assert.equal(m.attemptsLog.length, 1);
  // No sleep to show nothing more comes: a second record, sent after the first one's outcome, is
  // the barrier; by its own FAILED, a retry or a followed redirect of the first would have shown.
  await moved.store(1);
  await until(moved.integrationId, (x) => x.length === 2 && x.every((y) => y.status === 'FAILED'));
  assert.equal(rx.for(`${moved.path}-target`).length, 0, 'the redirect was not followed');
  assert.equal(rx.for(moved.path).length, 2, 'no further attempts: one request per record');
});

test('429 pauses the whole integration for Retry-After without using up an attempt', async () => {
  // Five events wait; one request at a time, so every request after the 429 starts after it.
  const f = await hookFleet({ retry: { scheduleSeconds: [0.1], maxAttempts: 1 }, webhook: { maxConcurrentRequests: 1 } });
  rx.on(f.path, (_r, k) => (k === 1 ? { status: 429, headers: { 'retry-after': '2' } } : { status: 200 }));
  await f.store(5);
  const done = await until(f.integrationId, (x) => x.length === 5 && x.every((d) => d.status === 'SUCCEEDED'));
  const times = rx.for(f.path).map((r) => r.at);
  assert.equal(times.length, 6, 'five deliveries and the one refused request');
  // The pause starts when the 429 is answered (after it arrived) and covers every pending event.
  const quiet = times[1]! - times[0]!;
  assert.ok(quiet >= 1950, `no request for ${quiet} ms after the 429 (Retry-After 2 s)`);
  assert.ok(
    done.every((d) => d.attempts === 1),
    'the 429 did not use up the only attempt',
  );
  const refused = done.filter((d) => d.attemptsLog.some((a: any) => a.httpStatus === 429));
  assert.equal(refused.length, 1);
  const [d] = refused;
  assert.deepEqual(
    d.attemptsLog.map((a: any) => a.httpStatus),
    [429, 200],
  );
  assert.ok(
    done.filter((x) => x !== d).every((x) => x.attemptsLog.length === 1 && x.attemptsLog[0].httpStatus === 200),
    'the other events were sent once, after the pause',
  );
});

test('the retry schedule ends in FAILED after maxAttempts, and redeliver sends it again', async () => {
  const f = await hookFleet({ retry: { scheduleSeconds: [0.05, 0.1], maxAttempts: 3 } });
  let healthy = false;
  rx.on(f.path, () => (healthy ? { status: 200 } : { status: 500 }));
  await f.store(4);
  const failed = await until(f.integrationId, (x) => x.length === 4 && x.every((d) => d.status === 'FAILED'));
  assert.ok(failed.every((d) => d.attempts === 3 && d.attemptsLog.length === 3));
  const [d0, d1, d2, d3] = [...failed].sort((a, b) => Number(a.id) - Number(b.id));
  const sent = (d: any) => rx.for(f.path).filter((r) => r.headers['webhook-id'] === d.eventId).length;
  const statuses = async () => {
    const now = new Map((await deliveries(f.integrationId)).map((d) => [d.id, d.status]));
    return [d0, d1, d2, d3].map((d) => now.get(d.id));
  };
  const redeliver = (body: Record<string, string>) =>
    ta.call('POST', `/api/v1/integrations/${f.integrationId}/deliveries/redeliver`, { token: ta.adminToken, body });
  const ago = (min: number) => new Date(Date.now() - min * 60_000).toISOString();
  // What the receiver got of each event so far: three tries each, unless one of them failed on
  // the way (a kept-alive connection reset under load counts as an attempt that never arrived).
  const initial = [d0, d1, d2, d3].map(sent);
  assert.ok(
    initial.every((n) => n >= 1 && n <= 3),
    String(initial),
  );
  healthy = true;

  // One delivery: sent again with a fresh attempt budget; the others stay as they were.
  const one = await ta.call('POST', `/api/v1/integrations/${f.integrationId}/deliveries/${d0.id}/redeliver`, {
    token: ta.adminToken,
  });
  assert.equal(one.status, 202);
  const afterOne = await until(f.integrationId, (x) => x.find((d) => d.id === d0.id)?.status === 'SUCCEEDED');
  const again = afterOne.find((d) => d.id === d0.id);
  // A fresh budget (it had used all 3), and the numbering goes on: attempt 4 follows attempt 3.
  assert.equal(again.attempts, 4, 'attempts counts every attempt, before and after the redelivery');
  assert.deepEqual(
    again.attemptsLog.map((a: any) => [a.attempt, a.success]),
    [
      [1, false],
      [2, false],
      [3, false],
      [4, true],
    ],
    'the earlier attempts stay in the log, numbered in order',
  );
  assert.deepEqual(await statuses(), ['SUCCEEDED', 'FAILED', 'FAILED', 'FAILED']);

  // In bulk, [from, to) on the delivery's creation time and the status (default FAILED) select exactly.
  // The test sets creation times in the past (it owns this clock): d1 3 h ago, d0 and d2 2 h ago.
  const db = ta.app.services.db;
  await db.query(`UPDATE deliveries SET when_created = now() - interval '3 hours' WHERE log_id = $1`, [d1.id]);
  await db.query(`UPDATE deliveries SET when_created = now() - interval '2 hours' WHERE log_id = ANY($1::int8[])`, [[d0.id, d2.id]]);
  const failedInRange = await redeliver({ from: ago(150), to: ago(30) });
  assert.equal(failedInRange.status, 202, failedInRange.raw);
  assert.deepEqual(failedInRange.body, { count: 1 }, 'only d2: d0 is not FAILED, d1 and d3 are out of range');
  // d2 is PENDING again (or already sent); nothing else was selected.
  const [s0, s1, s2, s3] = await statuses();
  assert.deepEqual([s0, s1, s3], ['SUCCEEDED', 'FAILED', 'FAILED'], 'nothing else selected');
  assert.ok(s2 === 'PENDING' || s2 === 'SUCCEEDED', String(s2));
  await until(f.integrationId, (x) => x.find((d) => d.id === d2.id)?.status === 'SUCCEEDED');
  assert.deepEqual(await statuses(), ['SUCCEEDED', 'FAILED', 'SUCCEEDED', 'FAILED']);

  const succeeded = await redeliver({ status: 'SUCCEEDED', from: ago(150), to: ago(-1) });
  assert.deepEqual(succeeded.body, { count: 2 }, 'd0 and d2: d1 and d3 are FAILED');
  await rx.waitFor(() => sent(d0) === initial[0]! + 2 && sent(d2) === initial[2]! + 2, 60_000, 'd0 and d2 sent again');
  await until(f.integrationId, (x) => x.filter((d) => d.status === 'SUCCEEDED').length === 2);
  assert.deepEqual(await statuses(), ['SUCCEEDED', 'FAILED', 'SUCCEEDED', 'FAILED']);
  assert.deepEqual([d1, d3].map(sent), [initial[1], initial[3]], 'the FAILED ones were not sent');

  const rest = await redeliver({ from: ago(240), to: ago(-1) });
  assert.deepEqual(rest.body, { count: 2 }, 'd1 and d3');
  await until(f.integrationId, (x) => x.every((d) => d.status === 'SUCCEEDED'));
  // What the receiver got: its failed tries, then one success per redelivery that chose it.
  assert.deepEqual([d0, d1, d2, d3].map(sent), [initial[0]! + 2, initial[1]! + 1, initial[2]! + 2, initial[3]! + 1]);
});

test('batch mode: JSON arrays of one type, at most batchSize, retried with the same body and id; event ids injected at a nested path', async () => {
  const f = await hookFleet({
    objectTypes: ['location', 'sensordata'],
    webhook: { mode: 'batch', batchSize: 4, injectEventId: true, injectEventIdPath: 'meta.trace.eventId', signingSecret: SECRET },
  });
  rx.on(f.path, (_r, k) => (k === 1 ? { status: 500 } : { status: 200 }));
  await f.store(10);
  await ta.call('POST', '/api/v1/sensor-data', {
    token: f.key,
    body: [{ assetId: f.assetId, sensorId: 's', type: 'TEMPERATURE', value: 1 }],
  });
  const done = await until(f.integrationId, (x) => x.length === 11 && x.every((d) => d.status === 'SUCCEEDED'));
  const got = rx.for(f.path);
  const first = got[0]!;
  const retried = got.find((r, i) => i > 0 && r.headers['webhook-id'] === first.headers['webhook-id']);
  assert.ok(retried, 'the failed batch was sent again with the same webhook-id');
  assert.equal(retried!.body, first.body, 'and byte for byte the same body');
  const wh = new Webhook(SECRET);
  const seen = new Set<string>();
  for (const r of got.filter((x) => x !== first)) {
    const arr = wh.verify(r.body, {
      'webhook-id': r.headers['webhook-id'] as string,
      'webhook-timestamp': r.headers['webhook-timestamp'] as string,
      'webhook-signature': r.headers['webhook-signature'] as string,
    }) as any[];
    assert.ok(Array.isArray(arr) && arr.length >= 1 && arr.length <= 4);
    const type = r.headers['webhook-object-type'];
    for (const o of arr) {
      assert.equal(type === 'sensordata', 'sensorId' in o, 'one object type per batch');
      assert.match(o.meta.trace.eventId, /^[0-9a-f-]{36}$/);
      seen.add(o.meta.trace.eventId);
    }
  }
  assert.equal(seen.size, 11);
  assert.deepEqual([...seen].sort(), done.map((d) => d.eventId).sort());
  assert.ok(done.every((d) => d.batchId));
});

test('naming injectEventIdPath alone turns injection on; a path named while it is off is a 400; a patch turning it off drops the path', async () => {
  const f = await hookFleet({ webhook: { injectEventIdPath: 'meta.eventId' } });
  assert.deepEqual([f.integration.webhook.injectEventId, f.integration.webhook.injectEventIdPath], [true, 'meta.eventId']);
  await f.store(1);
  const [d] = await until(f.integrationId, (x) => x.length === 1 && x[0].status === 'SUCCEEDED');
  assert.equal(JSON.parse(rx.for(f.path)[0]!.body).meta.eventId, d.eventId);
  const o = await ownerWithKey(ta, `inject-${++n}`);
  const r = await ta.call('POST', '/api/v1/integrations', {
    token: ta.adminToken,
    body: {
      name: `inject-${n}`,
      channel: 'webhook',
      ownerIds: [o.ownerId],
      destination: `${rx.url}/x`,
      webhook: { injectEventId: false, injectEventIdPath: 'meta.eventId' },
    },
  });
  assert.equal(r.status, 400, r.raw);
  assert.equal(r.body.field, '/webhook/injectEventIdPath');
  const path = `/api/v1/integrations/${f.integrationId}`;
  const off = await ta.call('PATCH', path, { token: ta.adminToken, body: { webhook: { injectEventId: false } } });
  assert.deepEqual([off.body.webhook.injectEventId, off.body.webhook.injectEventIdPath], [false, null]);
  const top = await ta.call('PATCH', path, { token: ta.adminToken, body: { webhook: { injectEventId: true } } });
  assert.deepEqual([top.body.webhook.injectEventId, top.body.webhook.injectEventIdPath], [true, null]);
});

test('an address refused when dialled is a configuration error on every channel: FAILED at the first attempt with the reason, redeliverable', async () => {
  // Saved with an allowed address, then pointed (straight in the database, as an old row or a DNS
  // change would) at a private one: the engine vets it before any connection is made.
  const cases: [string, Record<string, unknown>, string][] = [
    ['webhook', { destination: `${rx.url}/refused` }, `destination = 'http://10.255.255.1/x'`],
    [
      'mqtt',
      { destination: 'refused', mqtt: { url: 'mqtt://127.0.0.1:1883' } },
      `settings = jsonb_set(settings, '{url}', '"mqtt://10.255.255.1:1883"')`,
    ],
    [
      'kafka',
      { destination: 'refused', kafka: { brokers: ['127.0.0.1:19099'] } }, // saved only: not the event log's broker (the kafka lane)
      `settings = jsonb_set(settings, '{brokers}', '["10.255.255.1:9092"]')`,
    ],
  ];
  for (const [channel, settings, change] of cases) {
    const o = await ownerWithKey(ta, `refused-${channel}-${++n}`);
    const asset = await ta.call('POST', '/api/v1/assets', { token: o.key, body: { name: 'R1' } });
    const i = await ta.call('POST', '/api/v1/integrations', {
      token: ta.adminToken,
      body: {
        name: `refused-${channel}-${n}`,
        channel,
        enabled: false,
        ownerIds: [o.ownerId],
        objectTypes: ['location'],
        retry: { scheduleSeconds: [0.2], maxAttempts: 5 },
        ...settings,
      },
    });
    assert.equal(i.status, 201, i.raw);
    await ta.app.services.db.query(`UPDATE integrations SET ${change}, enabled = true, when_updated = clock_timestamp() WHERE id = $1`, [
      i.body.id,
    ]);
    await storeLocations(ta, o.key, asset.body.id, 1);
    const [d] = await until(i.body.id, (x) => x.length === 1 && x[0].status === 'FAILED');
    assert.equal(d.attempts, 1, `${channel}: not retried (the old MQTT channel tried again and again)`);
    assert.match(d.attemptsLog[0].error, /10\.255\.255\.1.*not a public address/, channel);
    const again = await ta.call('POST', `/api/v1/integrations/${i.body.id}/deliveries/${d.id}/redeliver`, { token: ta.adminToken });
    assert.equal(again.status, 202, `${channel}: redeliverable`);
  }
});

test('auth methods: OAuth 2.0 static and client credentials (token fetched once and cached), custom header, basic', async () => {
  let tokenCalls = 0;
  rx.on('/oauth/token', (r) => {
    tokenCalls++;
    assert.equal(r.headers.authorization, `Basic ${Buffer.from('cid:csecret').toString('base64')}`);
    assert.match(r.body, /grant_type=client_credentials/);
    return { status: 200, body: JSON.stringify({ access_token: 'fetched-token', expires_in: 3600, token_type: 'Bearer' }) };
  });
  const cases = [
    [{ type: 'oauth2', token: 'static-oauth' }, (h: any) => h.authorization === 'Bearer static-oauth'],
    [
      { type: 'oauth2', tokenUrl: `${rx.url}/oauth/token`, clientId: 'cid', clientSecret: 'csecret', scope: 'push' },
      (h: any) => h.authorization === 'Bearer fetched-token',
    ],
    [{ type: 'header', name: 'X-Api-Token', value: 'hdr-secret' }, (h: any) => h['x-api-token'] === 'hdr-secret'],
    [{ type: 'basic', username: 'u', password: 'p w' }, (h: any) => h.authorization === `Basic ${Buffer.from('u:p w').toString('base64')}`],
  ] as const;
  for (const [auth, check] of cases) {
    const f = await hookFleet({ webhook: { auth } });
    await f.store(2);
    await until(f.integrationId, (x) => x.length === 2 && x.every((d) => d.status === 'SUCCEEDED'));
    for (const r of rx.for(f.path)) assert.ok(check(r.headers), `${auth.type}: ${JSON.stringify(r.headers)}`);
    const got = await ta.call('GET', `/api/v1/integrations/${f.integrationId}`, { token: ta.adminToken });
    assert.ok(!/secret|static-oauth|p w/.test(JSON.stringify(got.body.webhook.auth)), 'write-only');
  }
  assert.equal(tokenCalls, 1, 'the client-credentials token is cached');
});

test('maxConcurrentRequests and maxItemsPerMinute hold, as the receiver measures them', async () => {
  const conc = await hookFleet({ webhook: { maxConcurrentRequests: 2 } });
  // Each request is held until a second one is in flight (or all ten came), so the limit is
  // reached whatever the load, then 150 ms more, in which a third would arrive if it were let.
  let active = 0;
  let most = 0;
  rx.on(conc.path, async () => {
    most = Math.max(most, ++active);
    const end = Date.now() + 30_000;
    while (active < 2 && rx.for(conc.path).length < 10 && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
    await new Promise((r) => setTimeout(r, 150));
    active--;
    return { status: 200 };
  });
  await conc.store(10);
  await until(conc.integrationId, (x) => x.length === 10 && x.every((d) => d.status === 'SUCCEEDED'));
  assert.ok(most <= 2, `max in flight ${most}`);
  assert.equal(most, 2);

  // 120/min: a bucket of 2 refilled at 118/60 per second, one request at a time: 10 items need
  // about 3.5 s at the receiver, and every stretch between two arrivals is checked (receiver.ts).
  const rate = await hookFleet({ webhook: { maxItemsPerMinute: 120, maxConcurrentRequests: 1 } });
  await rate.store(10);
  await until(rate.integrationId, (x) => x.length === 10 && x.every((d) => d.status === 'SUCCEEDED'));
  const t = rx.for(rate.path).map((r) => r.at);
  assert.equal(t.length, 10);
  assertBucket(t, { perMinute: 120, maxConcurrent: 1 });
});

test('addresses: http and private hosts refused at save time unless allowed; mapped, NAT64 and 6to4 forms recognised', async () => {
  // The classification itself: test/unit/delivery-policy.test.ts.
  const o = await ownerWithKey(ta, `addr-${++n}`);
  const bad = async (destination: string, env?: string) => {
    const r = await ta.call('POST', '/api/v1/integrations', {
      token: ta.adminToken,
      body: { name: `bad-${++n}`, channel: 'webhook', ownerIds: [o.ownerId], destination },
    });
    assert.equal(r.status, 400, `${destination}: ${r.raw}`);
    assert.equal(r.body.field, '/destination', env);
  };
  await bad('http://169.254.169.254/latest/meta-data');
  await bad('http://[::ffff:10.0.0.1]/hook');
  await bad('http://10.0.0.1/hook');
  await bad('ftp://example.com/hook');
  await bad('http://user:pw@127.0.0.1/hook');
  // Allowed networks hold 127.0.0.0/8 here, yet the IPv4-compatible ::127.0.0.1 (deprecated; on a
  // real host it routes to the default gateway) and site-local fec0::/10 are refused all the same.
  await bad(`http://[::127.0.0.1]:${new URL(rx.url).port}/hook`);
  await bad('http://[::7f00:1]/hook');
  await bad('http://[fec0::1]/hook');
  // The test endpoint applies the same rules at connect time.
  const t = await ta.call('POST', '/api/v1/webhooks/test', { token: o.key, body: { url: 'http://192.168.0.10/hook' } });
  assert.equal(t.status, 200);
  assert.equal(t.body.success, false);
  assert.match(t.body.error, /not a public address/);
});

test("webhook test endpoint (API guide 9) sends one sample Asset now, with the integration's auth and signature", async () => {
  const f = await hookFleet({ webhook: { signingSecret: SECRET, auth: { type: 'apiKey', token: 'k-test' } } });
  // API guide 9: with integrationId, only one of the integration's own destinations gets its auth.
  bad(
    await ta.call('POST', '/api/v1/webhooks/test', { token: f.key, body: { url: `${rx.url}/probe`, integrationId: f.integrationId } }),
    400,
    '/url',
    'a URL that is not a destination of the integration',
  );
  assert.equal(rx.for('/probe').length, 0, 'nothing sent to it');
  rx.on(f.path, () => ({ status: 200, body: '{"success":true,"id":"probe-1"}' }));
  const r = await ta.call('POST', '/api/v1/webhooks/test', {
    token: f.key,
    body: { url: `${rx.url}${f.path}`, integrationId: f.integrationId },
  });
  assert.equal(r.status, 200, r.raw);
  assert.equal(r.body.success, true);
  assert.equal(r.body.status, 200);
  assert.equal(r.body.receiptId, 'probe-1');
  const got = rx.for(f.path).at(-1)!;
  assert.match(String(got.headers['webhook-id']), /^test_/);
  assert.equal(got.headers.authorization, 'Bearer k-test');
  const asset = new Webhook(SECRET).verify(got.body, {
    'webhook-id': got.headers['webhook-id'] as string,
    'webhook-timestamp': got.headers['webhook-timestamp'] as string,
    'webhook-signature': got.headers['webhook-signature'] as string,
  }) as any;
  assert.ok(asset.id && asset.name && asset.ownerId && asset.whenCreated);
  const other = await ownerWithKey(ta, `other-${++n}`);
  const hidden = await ta.call('POST', '/api/v1/webhooks/test', {
    token: other.key,
    body: { url: `${rx.url}${f.path}`, integrationId: f.integrationId },
  });
  assert.equal(hidden.status, 404, "another owner cannot borrow an integration's credentials");
  const down = await ta.call('POST', '/api/v1/webhooks/test', { token: f.key, body: { url: 'http://127.0.0.1:1/nothing' } });
  assert.equal(down.body.success, false);
  assert.ok(down.body.error);
});

test('the result stream gives one line per attempt for the channel, as NDJSON and as SSE', async () => {
  const f = await hookFleet({});
  await f.store(2);
  await until(f.integrationId, (x) => x.length === 2 && x.every((d) => d.status === 'SUCCEEDED'));
  const res = await fetch(`${ta.url}/api/v1/deliveries/stream?channel=webhook`, {
    headers: { authorization: `Bearer ${ta.adminToken}` },
    signal: AbortSignal.timeout(30_000),
  });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /ndjson/);
  const lines = (await res.text())
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  const mine = lines.filter((l) => l.integrationId === f.integrationId);
  assert.equal(mine.length, 2);
  assert.ok(mine.every((l) => l.channel === 'webhook' && l.objectType === 'location' && l.eventId && l.success === true));
  const ac = new AbortController();
  const sse = await fetch(`${ta.url}/api/v1/deliveries/stream?channel=webhook&since=${encodeURIComponent(new Date().toISOString())}`, {
    headers: { authorization: `Bearer ${ta.adminToken}`, accept: 'text/event-stream' },
    signal: ac.signal,
  });
  assert.match(sse.headers.get('content-type') ?? '', /event-stream/);
  const reader = sse.body!.getReader();
  const decoder = new TextDecoder();
  await f.store(1);
  // Follow the stream until the new attempt shows; a stream that stays silent fails after 30 s.
  const want = new RegExp(`data: \\{.*"integrationId":"${f.integrationId}"`);
  let text = '';
  const timer = setTimeout(() => ac.abort(), 30_000);
  try {
    while (!want.test(text)) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
  } catch (e) {
    if (!ac.signal.aborted) throw e;
  } finally {
    clearTimeout(timer);
    ac.abort();
  }
  assert.match(text, want, `no SSE event for the new attempt within 30 s; the stream sent: ${text.slice(0, 500)}`);
  // Reconnecting with Last-Event-ID resumes after that event: the window is not sent again.
  const ids = [...text.matchAll(/^id: (\d+\.\d+)$/gm)].map((m) => m[1]!);
  assert.ok(ids.length >= 1);
  const until_ = async (headers: Record<string, string>) => {
    const c = new AbortController();
    const r = await fetch(`${ta.url}/api/v1/deliveries/stream?channel=webhook`, {
      headers: { authorization: `Bearer ${ta.adminToken}`, accept: 'text/event-stream', ...headers },
      signal: c.signal,
    });
    const rd = r.body!.getReader();
    let got = '';
    const t = setTimeout(() => c.abort(), 30_000);
    try {
      // Everything up to the first keep-alive: the backlog after the position.
      while (!got.includes(': keep-alive')) {
        const { value, done } = await rd.read();
        if (done) break;
        got += decoder.decode(value, { stream: true });
      }
    } catch (e) {
      if (!c.signal.aborted) throw e;
    } finally {
      clearTimeout(t);
      c.abort();
    }
    return [...got.matchAll(/^id: (\d+\.\d+)$/gm)].map((m) => m[1]!);
  };
  const fromStart = await until_({});
  assert.ok(fromStart.includes(ids[0]!), 'without Last-Event-ID the window is sent');
  const resumed = await until_({ 'last-event-id': ids[0]! });
  assert.ok(!resumed.includes(ids[0]!), 'the named event is not sent again');
  assert.deepEqual(resumed, fromStart.slice(fromStart.indexOf(ids[0]!) + 1), 'exactly what followed it');
  // A non-admin sees the results of integrations scoped to its own owners only.
  const own = await fetch(`${ta.url}/api/v1/deliveries/stream?channel=webhook`, {
    headers: { authorization: `Bearer ${f.key}` },
    signal: AbortSignal.timeout(30_000),
  });
  const ownLines = (await own.text())
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
  assert.ok(ownLines.length >= 2 && ownLines.every((l) => l.integrationId === f.integrationId));
  const stranger = await ownerWithKey(ta, `stranger-${++n}`);
  const none = await fetch(`${ta.url}/api/v1/deliveries/stream?channel=webhook`, {
    headers: { authorization: `Bearer ${stranger.key}` },
    signal: AbortSignal.timeout(30_000),
  });
  assert.equal((await none.text()).trim(), '');
});

test('retention: succeeded deliveries go after 7 days, failed and cancelled after 30, removed in bulk', async () => {
  const f = await hookFleet({ retry: { scheduleSeconds: [0.05], maxAttempts: 1 } });
  rx.on(f.path, (_r, k) => (k <= 2 ? { status: 200 } : { status: 400 }));
  await f.store(6);
  const done = await until(f.integrationId, (x) => x.length === 6 && x.every((d) => d.status !== 'PENDING'));
  const ok = done.filter((d) => d.status === 'SUCCEEDED').map((d) => d.id);
  const failed = done.filter((d) => d.status === 'FAILED').map((d) => d.id);
  assert.deepEqual([ok.length, failed.length], [2, 4]);
  const db = ta.app.services.db;
  // Two of them as a deleted integration leaves its pending work: CANCELLED, kept like failures.
  const cancelled = failed.splice(2, 2);
  await db.query(`UPDATE deliveries SET status = 'CANCELLED' WHERE log_id = ANY($1::int8[])`, [cancelled]);
  // The test owns the clock: it moves the results into the past. A delivery that failed has a row of
  // its own (completed_at); one that succeeded at once has only its attempt (when_attempted).
  const age = async (id: string, days: number) => {
    await db.query(`UPDATE deliveries SET completed_at = now() - make_interval(days => $2::int) WHERE log_id = $1`, [id, days]);
    await db.query(
      `UPDATE delivery_attempts SET when_attempted = now() - make_interval(days => $2::int) WHERE log_ids && ARRAY[$1::int8]`,
      [id, days],
    );
  };
  await age(cancelled[0]!, 31);
  await age(cancelled[1]!, 8);
  // One of each just past its retention, one of each just inside it.
  await age(ok[0]!, 8);
  await age(ok[1]!, 6);
  await age(failed[0]!, 31);
  await age(failed[1]!, 8);
  const removed = await ta.app.services.engine!.sweep();
  assert.ok(removed >= 3);
  const left = (await deliveries(f.integrationId)).map((d) => d.id).sort();
  assert.deepEqual(left, [ok[1], failed[1], cancelled[1]].sort());
  const attempts = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM delivery_attempts WHERE log_ids && $1::int8[]', [
    [ok[0], failed[0]],
  ]);
  assert.equal(attempts.rows[0]!.n, 0, 'their attempts went with them');
});

test('https is required unless allowed, and a host name is vetted again when dialled', async () => {
  const strict = addressPolicy(false, []);
  await assert.rejects(vetUrl('http://93.184.216.34/hook', strict), /must use https/);
  await assert.rejects(vetUrl('https://127.0.0.1/hook', strict), /not a public address/);
  assert.equal((await vetUrl('https://93.184.216.34/hook', strict)).hostname, '93.184.216.34');
  // Connect time: the lookup the HTTP client uses refuses a name that resolves to loopback.
  const err = await new Promise<NodeJS.ErrnoException | null>((resolve) => vettedLookup(strict)('localhost', {}, (e) => resolve(e)));
  assert.equal(err?.code, 'ADDRESS_REFUSED');
  assert.match(String(err?.message), /not a public address/);
  // And the webhook sender dials through that lookup: a name resolving to loopback (the receiver,
  // here) is refused as a failure that no retry can mend, and nothing reaches it.
  const httpOnly = addressPolicy(true, []);
  const port = new URL(rx.url).port;
  const cfg: IntegrationConfig = {
    id: 'vet',
    name: 'vet',
    channel: 'webhook',
    enabled: true,
    maxBacklogHours: 72,
    ownerIds: [],
    destination: `http://localhost:${port}/vetted`,
    destinations: {},
    retry: { scheduleSeconds: [1], maxAttempts: 1, deadlineHours: 1 },
    webhook: {
      format: 'standard',
      mode: 'single',
      batchSize: 1,
      maxItemsPerMinute: null,
      maxConcurrentRequests: 1,
      timeoutMs: 10_000,
      injectEventId: false,
      injectEventIdPath: null,
      auth: null,
      signingSecret: SECRET,
      previousSigningSecret: null,
    },
  };
  try {
    const sent = await sendWebhook(cfg, { url: cfg.destination, id: 'vet-1', objectType: 'asset', body: '{}' }, httpOnly);
    assert.equal(sent.outcome, 'fail', JSON.stringify(sent));
    assert.match(String(sent.error), /not a public address/);
    assert.equal(rx.for('/vetted').length, 0, 'nothing reached the loopback receiver');
  } finally {
    closeAgents(httpOnly);
  }
});

test('credentials are stored encrypted; a disabled integration keeps its pending deliveries, a deleted one sends nothing more', async () => {
  const f = await hookFleet({
    retry: { scheduleSeconds: [0.5] },
    webhook: { auth: { type: 'apiKey', token: 'plain-token-7' }, signingSecret: SECRET },
  });
  const { rows } = await ta.app.services.db.query<{ secrets: string }>('SELECT secrets FROM integrations WHERE id = $1', [f.integrationId]);
  assert.ok(rows[0]!.secrets.startsWith('v1:'));
  assert.ok(!rows[0]!.secrets.includes('plain-token-7') && !rows[0]!.secrets.includes(SECRET.slice(6, 20)));

  // The first attempt's 503 is held until the integration is disabled, so no retry can be claimed before.
  let release!: () => void;
  const held = new Promise<void>((r) => {
    release = r;
  });
  rx.on(f.path, async (_r, k) => {
    if (k > 1) return { status: 200 };
    await held;
    return { status: 503 };
  });
  await f.store(1);
  await rx.waitFor(() => rx.for(f.path).length === 1, 30_000, 'first attempt');
  const off = await ta.call('PATCH', `/api/v1/integrations/${f.integrationId}`, { token: ta.adminToken, body: { enabled: false } });
  assert.equal(off.status, 200);
  release();
  // Wait (on the database's clock) until the retry is due, then let a claim cycle pass: a second,
  // enabled integration's delivery stored after that arrives only once the engine has claimed again,
  // and that cycle would have taken the disabled one's due retry too.
  const db = ta.app.services.db;
  for (const end = Date.now() + 60_000; ; ) {
    const { rows: due } = await db.query<{ due: boolean }>(
      'SELECT attempts = 1 AND next_attempt_at < now() AS due FROM deliveries WHERE integration_id = $1',
      [f.integrationId],
    );
    if (due[0]?.due) break;
    assert.ok(Date.now() < end, 'the retry never became due');
    await new Promise((r) => setTimeout(r, 50));
  }
  const barrier = await hookFleet({});
  await barrier.store(1);
  await rx.waitFor(() => rx.for(barrier.path).length === 1, 30_000, 'the barrier delivery');
  assert.equal(rx.for(f.path).length, 1, 'nothing is sent while disabled');
  const [pending] = await deliveries(f.integrationId);
  assert.equal(pending.status, 'PENDING');
  await ta.call('PATCH', `/api/v1/integrations/${f.integrationId}`, { token: ta.adminToken, body: { enabled: true } });
  await until(f.integrationId, (x) => x[0]?.status === 'SUCCEEDED');

  const g = await hookFleet({ retry: { scheduleSeconds: [0.5] }, webhook: { auth: { type: 'apiKey', token: 'wiped-on-delete' } } });
  rx.on(g.path, () => ({ status: 503 }));
  await g.store(2);
  await rx.waitFor(() => rx.for(g.path).length >= 2, 30_000, 'first attempts');
  assert.equal((await ta.call('DELETE', `/api/v1/integrations/${g.integrationId}`, { token: ta.adminToken })).status, 204);
  // API guide 9: pending deliveries become CANCELLED at once (an attempt already in flight still
  // records its attempt, but cannot bring its delivery back), credentials are wiped, history stays.
  const after = await ta.app.services.db.query<{ status: string }>('SELECT status FROM deliveries WHERE integration_id = $1', [
    g.integrationId,
  ]);
  assert.equal(after.rows.length, 2);
  assert.ok(
    after.rows.every((r) => r.status === 'CANCELLED'),
    JSON.stringify(after.rows),
  );
  const sealed = await ta.app.services.db.query<{ secrets: string | null; deleted: boolean }>(
    'SELECT secrets, deleted_at IS NOT NULL AS deleted FROM integrations WHERE id = $1',
    [g.integrationId],
  );
  assert.deepEqual(sealed.rows[0], { secrets: null, deleted: true });
  assert.equal((await ta.call('GET', `/api/v1/integrations/${g.integrationId}`, { token: ta.adminToken })).status, 404);
  const redeliver = await ta.call('POST', `/api/v1/integrations/${g.integrationId}/deliveries/redeliver`, {
    token: ta.adminToken,
    body: { status: 'CANCELLED', from: '2020-01-01T00:00:00Z', to: '2100-01-01T00:00:00Z' },
  });
  assert.equal(redeliver.status, 404, 'a deleted integration cannot be redelivered');
  // Its attempts stay in the result stream (the results of requests that were in flight at the
  // delete are written a moment later: wait for them, with a deadline).
  for (const end = Date.now() + 30_000; ; ) {
    const res = await fetch(`${ta.url}/api/v1/deliveries/stream?channel=webhook`, {
      headers: { authorization: `Bearer ${ta.adminToken}` },
    });
    const lines = (await res.text())
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
      .filter((l) => l.integrationId === g.integrationId);
    if (lines.length >= 2) break;
    assert.ok(Date.now() < end, `attempts of the deleted integration in the stream: ${lines.length}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  // New records of its owners make no deliveries for it, and its name is free again.
  await g.store(1);
  const still = await ta.app.services.db.query<{ n: number }>('SELECT count(*)::int AS n FROM deliveries WHERE integration_id = $1', [
    g.integrationId,
  ]);
  assert.equal(still.rows[0]!.n, 2);
  const again = await ta.call('POST', '/api/v1/integrations', {
    token: ta.adminToken,
    body: { name: g.integration.name, channel: 'webhook', enabled: false, ownerIds: [g.ownerId], destination: `${rx.url}/again` },
  });
  assert.equal(again.status, 201, again.raw);
});

if (TEST_EVENT_LOG === 'kafka') {
  test("the event log's broker is never a destination: a Kafka integration, MQTT or webhook at its address and port is a 400", async () => {
    const o = await ownerWithKey(ta, `event-log-broker-${++n}`);
    const [host, port] = TEST_KAFKA_BROKERS.split(',')[0]!.split(':') as [string, string];
    for (const [channel, settings] of [
      ['kafka', { destination: 'x', kafka: { brokers: [`${host}:${port}`] } }],
      ['kafka', { destination: 'x', kafka: { brokers: [`localhost:${port}`] } }],
      ['mqtt', { destination: 'x', mqtt: { url: `mqtt://${host}:${port}` } }],
      ['webhook', { destination: `http://${host}:${port}/x` }],
    ] as const) {
      const r = await ta.call('POST', '/api/v1/integrations', {
        token: ta.adminToken,
        body: { name: `evlog-${channel}-${++n}`, channel, ownerIds: [o.ownerId], objectTypes: ['location'], ...settings },
      });
      assert.equal(r.status, 400, `${channel}: ${r.raw}`);
      assert.match(r.body.message, /EVENT_LOG_KAFKA_BROKERS/, channel);
    }
  });
}
