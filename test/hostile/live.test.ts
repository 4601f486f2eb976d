// The hostile-tenant suite, the live fleet stream's way in (API guide 9, "Live fleet"): tenant A
// opens streams past its bound (LIVE_MAX_OPEN_PER_OWNER, counted for the instance: on PostgreSQL
// two HTTP processes), and each past it is refused 429 while B opens its own; then A stores
// 20,000 positions in bulks while B, timed as always, also has a stream open and stores a position
// now and then, as does C, whose stream is timed: each of C's positions reaches C's stream within 2 s plus the suite's allowance for
// what A's work may add (STALL_MS, EMBEDDED_STALL_MS on the embedded database, times the machine's
// crowding), and neither stream ever carries the other tenant's records.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TEST_DB, waitFor } from '../helpers.js';
import { openLive } from '../live-stream.js';
import { EMBEDDED_STALL_MS, hostileService, STALL_MS, storePositions, whileBWorks } from './tenants.js';

const PER_OWNER = 3;
const h = await hostileService({ LIVE_MAX_OPEN_PER_OWNER: String(PER_OWNER) });
const a = await h.tenant('live-a', 10);
const b = await h.tenant('live-b', 2);
/** The tenant whose stream is timed during A's burst (B's own stores are counted by whileBWorks). */
const c = await h.tenant('live-c', 1);

/** A live stream of `key`, its events collected as they come. */
const live = (key: string) => openLive(h.base, key);

test('streams past the owner bound are refused for the instance; the other tenant opens its own', async () => {
  const open = [];
  for (let i = 0; i < PER_OWNER; i++) {
    const s = await live(a.key);
    assert.equal(s.status, 200);
    open.push(s);
  }
  // Past the bound, on whichever HTTP process the connection reaches.
  for (let i = 0; i < 4; i++) {
    const s = await live(a.key);
    assert.equal(s.status, 429, `stream ${PER_OWNER + i + 1}`);
    assert.equal(s.body?.code, 'TOO_MANY_CONCURRENT');
  }
  const mine = await live(b.key);
  assert.equal(mine.status, 200, "A's streams do not hold B's");
  mine.close();
  for (const s of open) s.close();
  await waitFor(
    () => "A's slots given back",
    async () => {
      const s = await live(a.key);
      s.close();
      return s.status === 200;
    },
    15_000,
  );
});

test("a burst of A's positions does not hold B's stream past the allowance; neither stream sees the other's records", async () => {
  const sa = await live(a.key);
  const sb = await live(c.key);
  assert.equal(sa.status, 200);
  assert.equal(sb.status, 200);
  await waitFor(
    () => 'the snapshots',
    async () => sa.events.some((e) => e.event === 'snapshot') && sb.events.some((e) => e.event === 'snapshot'),
    15_000,
  );
  const delays: number[] = [];
  let stop = false;
  // C stores a position every 500 ms and times its arrival on its own stream.
  const bLoop = (async () => {
    let n = 0;
    while (!stop) {
      const latitude = 10 + (n++ % 1000) / 1000;
      const r = await h.call('POST', '/api/v1/locations', {
        key: c.key,
        body: { assetId: c.assetIds[0], latitude, longitude: 5, whenCreated: new Date().toISOString() },
      });
      assert.equal(r.status, 201, r.text);
      const answered = performance.now();
      const got = await waitFor(
        () => `C's position ${latitude}`,
        async () => sb.events.find((e) => e.event === 'position' && e.data.position.latitude === latitude),
        30_000,
      );
      delays.push(got.at - answered);
      await new Promise((res) => setTimeout(res, 500));
    }
  })();
  const seen = await whileBWorks(h, b, () => storePositions(h, a, 20));
  stop = true;
  await bLoop;
  const allowance = 2000 + (TEST_DB === 'pglite' ? EMBEDDED_STALL_MS : STALL_MS) * seen.crowding;
  const worst = Math.max(...delays);
  console.log(
    `live burst: C's positions on its stream after ${delays.map((d) => Math.round(d)).join(', ')} ms (allowance ${Math.round(allowance)}); A's stream got ${sa.events.length} messages for 20,000 positions; ${JSON.stringify(seen)}`,
  );
  assert.ok(delays.length >= 3, `C stored ${delays.length} positions meanwhile`);
  assert.ok(worst < allowance, `C's worst ${Math.round(worst)} ms past ${Math.round(allowance)} ms`);
  // Coalesced: A's stream carries far fewer messages than positions stored.
  assert.ok(sa.events.length < 20_000 / 5, `A's stream: ${sa.events.length} messages`);
  const owners = (events: typeof sa.events) =>
    new Set(events.filter((e) => e.event !== 'snapshot').map((e) => e.data.asset?.ownerId ?? e.data.ownerId));
  assert.ok(
    [...owners(sb.events)].every((o) => o === c.ownerId),
    `C's stream: ${[...owners(sb.events)]}`,
  );
  assert.ok(
    [...owners(sa.events)].every((o) => o === a.ownerId),
    `A's stream: ${[...owners(sa.events)]}`,
  );
  assert.ok(
    sb.events.find((e) => e.event === 'snapshot')!.data.assets.every((x: any) => x.ownerId === c.ownerId),
    "C's snapshot: C's assets only",
  );
  sa.close();
  sb.close();
});
