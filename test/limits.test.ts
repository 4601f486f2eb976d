// Spec section 8, API.md section 7: 1000 requests per rolling hour and 10 in flight per
// credential; 429 with Retry-After and RateLimit-* headers; counters shared through Redis.
import assert from 'node:assert/strict';
import http from 'node:http';
import { test, type TestContext } from 'node:test';
import { Redis } from 'ioredis';
import { ownerWithKey, REDIS_URL, requireService, startApp, TEST_DB, type TestApp } from './helpers.js';

/** Opens a POST whose body never finishes: the request stays in flight until `finish` is called. */
function holdRequest(ta: TestApp, key: string): { response: Promise<number>; finish: () => void } {
  const u = new URL(ta.url);
  const body = JSON.stringify({ name: `held-${Math.random()}` });
  const req = http.request({
    host: u.hostname,
    port: u.port,
    method: 'POST',
    path: '/api/v1/assets',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
  });
  const response = new Promise<number>((resolve, reject) => {
    req.on('response', (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
  });
  req.write(body.slice(0, 5));
  req.flushHeaders();
  let done = false;
  return {
    response,
    finish: () => {
      if (done) return;
      done = true;
      req.end(body.slice(5));
    },
  };
}

/**
 * Holds requests open and gives the server time to admit them all. Polling with the same
 * credential instead would race: a poll in flight can push a held request over the limit.
 */
async function holdAll(t: TestContext, targets: TestApp[], key: string) {
  const held = targets.map((ta) => holdRequest(ta, key));
  // Whatever happens, finish them when the test ends, or closing the app would wait for ever.
  t.after(() => held.forEach((h) => h.finish()));
  let early = 0;
  for (const h of held)
    void h.response.then(
      () => early++,
      () => early++,
    );
  await new Promise((r) => setTimeout(r, 800));
  assert.equal(early, 0, 'a held request was answered before it was finished');
  return held;
}

async function waitFor(cond: () => Promise<boolean>, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('the 1001st request in an hour answers 429 with Retry-After and RateLimit headers; other credentials are unaffected', async (t) => {
  const ta = await startApp(t);
  const a = await ownerWithKey(ta, 'busy');
  const b = await ownerWithKey(ta, 'quiet');
  let last;
  for (let i = 1; i <= 1000; i++) {
    last = await ta.call('GET', '/api/v1/assets?limit=1', { token: a.key });
    assert.equal(last.status, 200, `request ${i}`);
  }
  assert.equal(last!.headers['ratelimit-limit'], '1000');
  assert.equal(last!.headers['ratelimit-remaining'], '0');
  const over = await ta.call('GET', '/api/v1/assets?limit=1', { token: a.key });
  assert.equal(over.status, 429);
  assert.equal(over.body.code, 'RATE_LIMITED');
  assert.ok(over.body.error && over.body.message);
  const retryAfter = Number(over.headers['retry-after']);
  assert.ok(retryAfter > 3500 && retryAfter <= 3600, `Retry-After ${retryAfter}`);
  assert.equal(over.headers['ratelimit-remaining'], '0');
  assert.ok(Number(over.headers['ratelimit-reset']) > 0);
  // A refused request is not counted, writes are refused too, and another credential goes on.
  assert.equal((await ta.call('POST', '/api/v1/assets', { token: a.key, body: { name: 'x' } })).status, 429);
  assert.equal((await ta.call('GET', '/api/v1/assets', { token: b.key })).status, 200);
});

test('the window rolls: requests are admitted again once the oldest leave the window', async (t) => {
  const ta = await startApp(t, { RATE_LIMIT_MAX: '5', RATE_LIMIT_WINDOW_SECONDS: '2' });
  const a = await ownerWithKey(ta, 'roller');
  for (let i = 0; i < 5; i++) assert.equal((await ta.call('GET', '/api/v1/assets', { token: a.key })).status, 200);
  const over = await ta.call('GET', '/api/v1/assets', { token: a.key });
  assert.equal(over.status, 429);
  assert.ok(Number(over.headers['retry-after']) <= 2);
  await new Promise((r) => setTimeout(r, 2100));
  assert.equal((await ta.call('GET', '/api/v1/assets', { token: a.key })).status, 200);
});

test('the 11th request held in flight answers 429; finishing one admits the next', async (t) => {
  const ta = await startApp(t);
  const a = await ownerWithKey(ta, 'parallel');
  const held = await holdAll(t, Array(10).fill(ta), a.key);
  const eleventh = await ta.call('GET', '/api/v1/assets', { token: a.key });
  if (eleventh.status !== 429) for (const h of held) h.finish();
  assert.equal(eleventh.status, 429);
  assert.equal(eleventh.body.code, 'TOO_MANY_CONCURRENT');
  assert.equal(eleventh.headers['retry-after'], '1');
  held[0]!.finish();
  assert.equal(await held[0]!.response, 201);
  assert.equal((await ta.call('GET', '/api/v1/assets', { token: a.key })).status, 200);
  for (const h of held.slice(1)) h.finish();
  assert.deepEqual(await Promise.all(held.slice(1).map((h) => h.response)), Array(9).fill(201));
});

async function redisAvailable(): Promise<boolean> {
  const r = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0, connectTimeout: 1000 });
  r.on('error', () => {});
  try {
    await r.connect();
    await r.ping();
    return true;
  } catch {
    return false;
  } finally {
    r.disconnect();
  }
}

// Several instances share one PostgreSQL database; the embedded database is one process only.
if (TEST_DB === 'postgres') {
  test('two instances sharing Redis share the hourly and in-flight counters of a credential', async (t) => {
    if (!requireService(t, await redisAvailable(), `Redis at ${REDIS_URL}`, 'redis-server --daemonize yes --port 6379 --save ""')) return;
    const env = { REDIS_URL, RATE_LIMIT_MAX: '60', RATE_LIMIT_CONCURRENT: '4' };
    const one = await startApp(t, env);
    const two = await startApp(t, env, { databaseUrl: one.databaseUrl! });
    const a = await ownerWithKey(one, 'shared');
    for (let i = 0; i < 30; i++) {
      assert.equal((await one.call('GET', '/api/v1/assets', { token: a.key })).status, 200);
      assert.equal((await two.call('GET', '/api/v1/assets', { token: a.key })).status, 200);
    }
    assert.equal((await one.call('GET', '/api/v1/assets', { token: a.key })).status, 429);
    assert.equal((await two.call('GET', '/api/v1/assets', { token: a.key })).status, 429);

    const b = await ownerWithKey(one, 'shared-parallel');
    const held = await holdAll(t, [one, one, two, two], b.key);
    const r = await one.call('GET', '/api/v1/assets', { token: b.key });
    for (const h of held) h.finish(); // before asserting, so a failure cannot leave requests open
    assert.equal(r.status, 429, r.raw);
    assert.equal(r.body.code, 'TOO_MANY_CONCURRENT', r.raw);
    assert.deepEqual(await Promise.all(held.map((h) => h.response)), [201, 201, 201, 201]);
    await waitFor(async () => (await one.call('GET', '/api/v1/assets', { token: b.key })).status === 200);
  });
}
