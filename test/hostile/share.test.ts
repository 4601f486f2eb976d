// The hostile-tenant suite, share links (API guide 8, "Share links"; the bounds shareUsesPerMinute
// and shareRequestsPerAddress): a stranger guesses tokens by the hundred, from many addresses and
// from one, while tenant B works: each guess a 404 that reads and writes nothing of anyone's, one
// address held to its budget; a leaked link used from many addresses answers its uses a minute and
// no more; and a customer cannot share, see or revoke another tenant's asset or link.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { test } from 'node:test';
import { BOUNDS } from '../../src/bounds.js';
import { TEST_DB } from '../helpers.js';
import { hostileService, whileBWorks } from './tenants.js';

// The suite's loopback is a trusted proxy here, so that the guesses can come from many addresses.
const h = await hostileService({ TRUST_PROXY: '127.0.0.0/8' });
const a = await h.tenant('share-a', 2);
const b = await h.tenant('share-b');
const from = (ip: string) => ({ headers: { 'x-forwarded-for': ip } });
const guess = () => crypto.randomBytes(32).toString('base64url');
const expiresAt = () => new Date(Date.now() + 86_400_000).toISOString();
/** HTTP processes of the instance: the per-address budget is each one's (API guide 7). */
const PROCESSES = TEST_DB === 'postgres' ? 2 : 1;

async function link(show: string[] = ['position']) {
  const r = await h.call('POST', '/api/v1/share-links', { key: a.key, body: { assetIds: [a.assetIds[0]], show, expiresAt: expiresAt() } });
  assert.equal(r.status, 201, r.text);
  return r.body as { id: string; url: string };
}
const uses = async (id: string) => (await h.call('GET', `/api/v1/share-links/${id}`, { key: a.key })).body.uses as number;

test('hundreds of guessed tokens from many addresses: each a 404 that counts nothing, and B is not held', async () => {
  const real = await link(['position', 'track']);
  const realPath = new URL(real.url).pathname;
  const GUESSES = 400;
  const seen = await whileBWorks(h, b, async () => {
    for (let i = 0; i < GUESSES; i += 20) {
      const batch = Array.from({ length: 20 }, (_, k) => {
        const n = i + k;
        // Well-formed tokens, one character off the real one, malformed ones; page and data.
        const token =
          n % 10 === 0 ? realPath.slice(7, -1) + (realPath.endsWith('A') ? 'B' : 'A') : n % 10 === 1 ? 'x'.repeat(n % 80) : guess();
        return h.call('GET', `/share/${token}${n % 2 ? '/data' : ''}`, from(`198.51.100.${n % 250}`));
      });
      for (const r of await Promise.all(batch)) assert.equal(r.status, 404, r.text.slice(0, 200));
    }
  });
  console.log(`guessed share tokens: ${JSON.stringify(seen)}`);
  assert.equal(await uses(real.id), 0, 'no guess counted as a use of the real link');
  const page = await h.call('GET', realPath, from('198.51.100.251'));
  assert.equal(page.status, 200, 'the real link still answers');
  assert.ok(!page.text.includes('share-b'), "nothing of B's");
});

test('one address guessing is held to SHARE_MAX_REQUESTS_PER_ADDRESS a minute (per HTTP process): then 429 before any lookup', async () => {
  const max = BOUNDS.shareRequestsPerAddress.value;
  const total = max * PROCESSES + 100;
  const statuses: number[] = [];
  const seen = await whileBWorks(h, b, async () => {
    for (let i = 0; i < total; i += 25) {
      const batch = Array.from({ length: Math.min(25, total - i) }, () => h.call('GET', `/share/${guess()}/data`, from('192.0.2.77')));
      for (const r of await Promise.all(batch)) statuses.push(r.status);
    }
  });
  console.log(`one address guessing: ${JSON.stringify(seen)}`);
  const notFound = statuses.filter((s) => s === 404).length;
  const limited = statuses.filter((s) => s === 429).length;
  assert.equal(notFound + limited, total, `only 404 and 429: ${[...new Set(statuses)]}`);
  assert.ok(notFound <= max * PROCESSES, `${notFound} answered past the budget`);
  assert.ok(limited >= 100, `${limited} refused`);
});

test('a leaked link used from many addresses answers SHARE_MAX_USES_PER_MINUTE uses, the rest 429 and not counted; B is not held', async () => {
  const leaked = await link(['position', 'track', 'temperature']);
  const path = new URL(leaked.url).pathname;
  const max = BOUNDS.shareUsesPerMinute.value;
  const statuses: number[] = [];
  const seen = await whileBWorks(h, b, async () => {
    for (let i = 0; i < 3 * max; i += 20) {
      const batch = Array.from({ length: 20 }, (_, k) =>
        h.call('GET', `${path}${(i + k) % 2 ? '/data' : ''}`, from(`203.0.113.${(i + k) % 250}`)),
      );
      for (const r of await Promise.all(batch)) statuses.push(r.status);
    }
  });
  console.log(`leaked share link: ${JSON.stringify(seen)}`);
  const answered = statuses.filter((s) => s === 200).length;
  // The burst takes seconds; a minute is counted from the link's first use, so one minute's budget.
  assert.equal(answered, max, `answered ${answered} of ${statuses.length}: ${statuses.join(',')}`);
  assert.equal(statuses.filter((s) => s === 429).length, 3 * max - max);
  assert.equal(await uses(leaked.id), max, 'refused uses are not counted');
});

test("a customer cannot share, see or revoke another tenant's asset or link", async () => {
  const before = (await h.call('GET', '/api/v1/share-links?limit=1000', { key: a.key })).body.length as number;
  for (const assetIds of [[b.assetIds[0]], [a.assetIds[0], b.assetIds[0]], [a.assetIds[1], a.assetIds[0], b.assetIds[0]]]) {
    const r = await h.call('POST', '/api/v1/share-links', {
      key: a.key,
      body: { assetIds, show: ['position', 'track'], expiresAt: expiresAt() },
    });
    assert.equal(r.status, 404, r.text);
    assert.equal(r.body.field, `/assetIds/${assetIds.length - 1}`);
  }
  assert.equal((await h.call('GET', '/api/v1/share-links?limit=1000', { key: a.key })).body.length, before, 'nothing saved');
  // B's own link: A neither sees nor revokes it, and it keeps working.
  const mine = await h.call('POST', '/api/v1/share-links', {
    key: b.key,
    body: { assetIds: [b.assetIds[0]], show: ['position'], expiresAt: expiresAt() },
  });
  assert.equal(mine.status, 201, mine.text);
  assert.equal((await h.call('GET', `/api/v1/share-links/${mine.body.id}`, { key: a.key })).status, 404);
  assert.equal((await h.call('DELETE', `/api/v1/share-links/${mine.body.id}`, { key: a.key })).status, 404);
  const listed = (await h.call('GET', `/api/v1/share-links?assetId=${b.assetIds[0]}&limit=1000`, { key: a.key })).body as unknown[];
  assert.deepEqual(listed, []);
  assert.equal((await h.call('GET', new URL(mine.body.url).pathname, from('198.51.100.252'))).status, 200);
});
