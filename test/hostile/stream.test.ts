// The hostile-tenant suite, the result stream's way in: tenant A's integration has delivered
// 20,000 events in batches of 200 (the demo's shape), and A opens three full replays of the
// window at once (the dashboard did one per sign-in, and kept only the newest 2,000), while
// tenant B is timed. Then the dashboard's own request, the newest 2,000, costs what it keeps.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { waitFor } from '../helpers.js';
import { Receiver } from '../receiver.js';
import { hostileService, storePositions, whileBWorks } from './tenants.js';

const rx = await new Receiver().start();
after(() => rx.close());
const h = await hostileService({ PUSH_ALLOW_HTTP: 'true', PUSH_ALLOWED_NETWORKS: '127.0.0.0/8', DELIVERY_POLL_MS: '100' });
const a = await h.tenant('tenant-a', 10);
const b = await h.tenant('tenant-b');
const EVENTS = 20_000;

test('three full replays of a large window and the dashboard replay do not hold B; the newest N costs N lines', async () => {
  const made = await h.call('POST', '/api/v1/integrations', {
    key: a.key,
    body: {
      name: 'a-hook',
      channel: 'webhook',
      destination: `${rx.url}/a`,
      ownerIds: [a.ownerId],
      objectTypes: ['location'],
      webhook: { mode: 'batch', batchSize: 200 },
    },
  });
  assert.equal(made.status, 201, made.text.slice(0, 300));
  const since = new Date(Date.now() - 60_000).toISOString();
  await storePositions(h, a, EVENTS / 1000);
  const lines = async (query: string) => {
    const r = await h.call('GET', `/api/v1/deliveries/stream?${query}`, { key: a.key });
    assert.equal(r.status, 200, r.text.slice(0, 300));
    return { lines: r.text.split('\n').filter(Boolean).length, bytes: r.text.length };
  };
  // Delivered: the receiver has every event (a batch is a JSON array), then the stream shows them.
  const delivered = () => rx.received.reduce((n, r) => n + (JSON.parse(r.body) as unknown[]).length, 0);
  await waitFor(
    () => `${EVENTS} events delivered (${delivered()} so far)`,
    async () => delivered() >= EVENTS,
    240_000,
  );
  await waitFor(
    () => `${EVENTS} lines in the stream`,
    async () => (await lines(`since=${since}`)).lines >= EVENTS,
  );
  const seen = await whileBWorks(h, b, async () => {
    const full = await Promise.all([1, 2, 3].map(() => lines(`since=${since}`)));
    const newest = await lines(`since=${since}&last=2000`);
    return { full: full.map((x) => x.bytes), newest };
  });
  const result = seen.result as { full: number[]; newest: { lines: number; bytes: number } };
  console.log(`replays: ${JSON.stringify(seen)}`);
  assert.ok(result.newest.lines >= 2000 && result.newest.lines <= 2000 + 200, `the newest 2,000: ${result.newest.lines} lines`);
  assert.ok(result.newest.bytes * 5 < result.full[0]!, 'the newest 2,000 cost a fraction of the whole window');
});
