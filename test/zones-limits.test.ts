// API guide 8, "Zones": the zone limits per top-level owner's tree (ZONES_MAX_PER_OWNER,
// ZONES_MAX_VERTICES_PER_OWNER: 409, nothing saved), and isolation: a tenant storing a bulk inside
// big zones at those limits does not hold up another tenant's requests (matching runs in slices).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { bad, customer, ok, postgresOnly, startApp } from './helpers.js';

// The count limit low enough to reach; the positions limit at its default (100,000).
const ta = await startApp(undefined, { RATE_LIMIT_MAX: '100000', RATE_LIMIT_CONCURRENT: '1000', ZONES_MAX_PER_OWNER: '12' });
assert.equal(ta.cfg.ZONES_MAX_VERTICES_PER_OWNER, 100_000);

const circle = (radiusMeters = 1000) => ({ latitude: 0, longitude: 0, radiusMeters });
/** A closed ring of n positions on a circle of r degrees around (lon, lat). */
function ring(n: number, lon: number, lat: number, r: number): number[][] {
  const pts: number[][] = [];
  for (let i = 0; i < n - 1; i++) {
    const t = (2 * Math.PI * i) / (n - 1);
    pts.push([lon + r * Math.cos(t), lat + r * Math.sin(t)]);
  }
  pts.push(pts[0]!);
  return pts;
}
const polygon = (n: number, lon: number, lat: number, r: number) => ({ type: 'Polygon', coordinates: [ring(n, lon, lat, r)] });
const numeric = (a: string, b: string) => (BigInt(a) < BigInt(b) ? -1 : 1);

test("ZONES_MAX_PER_OWNER counts the top-level owner's whole tree: one more is a 409 and saves nothing", async () => {
  const top = await customer(ta, 'zone-count');
  const sub = await customer(ta, 'zone-count-sub', { parentId: top.ownerId });
  for (let n = 0; n < 6; n++) ok(await top.call('POST', '/api/v1/zones', { name: `top-${n}`, circle: circle() }), 201);
  for (let n = 0; n < 5; n++) ok(await sub.call('POST', '/api/v1/zones', { name: `sub-${n}`, circle: circle() }), 201);
  ok(await top.call('POST', '/api/v1/zones', { name: 'top-last', ownerId: sub.ownerId }), 201); // no shape counts too: 12
  for (const [who, body] of [
    [sub, { name: 'one-more', circle: circle() }],
    [top, { name: 'one-more' }],
    [top, { name: 'one-more', ownerId: sub.ownerId }],
  ] as const) {
    const r = await who.call('POST', '/api/v1/zones', body);
    bad(r, 409, '/ownerId', 'past the count');
    assert.equal(r.body.code, 'CONFLICT');
    assert.match(r.body.message, /ZONES_MAX_PER_OWNER 12/);
  }
  assert.equal(ok(await top.call('GET', '/api/v1/zones?name=one-more'), 200).length, 0, 'nothing saved');
  assert.equal(ok(await top.call('GET', '/api/v1/zones?limit=100'), 200).length, 12);
  // Another top-level owner is counted apart; changing a zone in a full tree is fine, and so is a new one once one is gone.
  const other = await customer(ta, 'zone-count-other');
  ok(await other.call('POST', '/api/v1/zones', { name: 'one-more', circle: circle() }), 201);
  const [first] = ok(await sub.call('GET', '/api/v1/zones?limit=1'), 200);
  ok(await sub.call('PATCH', `/api/v1/zones/${first.id}`, { note: 'still fine', circle: { radiusMeters: 2000 } }), 200);
  ok(await sub.call('DELETE', `/api/v1/zones/${first.id}`), 204);
  ok(await sub.call('POST', '/api/v1/zones', { name: 'one-more', circle: circle() }), 201);
});

// On PostgreSQL only: PGlite runs the database itself on the event loop, so its statements (the
// bulk's insert among them) hold every request whatever the zones do.
postgresOnly(
  "PGlite's statements hold every request, whatever the zones do",
  "another tenant's requests stay fast while a bulk is matched against zones at the positions limit; the bulk is stored right",
  async () => {
    const a = await customer(ta, 'zone-load');
    const b = await customer(ta, 'zone-bystander');
    await b.asset('b-1');
    // 10 zones of 9,999 positions, every location inside every one, and a circle: 99,991 positions.
    const zones: string[] = [];
    for (let z = 0; z < 10; z++) {
      zones.push(ok(await a.call('POST', '/api/v1/zones', { name: `big-${z}`, geometry: polygon(9999, 10, 50, 1 + z / 100) }), 201).id);
    }
    const disc = ok(
      await a.call('POST', '/api/v1/zones', { name: 'disc', circle: { latitude: 50, longitude: 10, radiusMeters: 100_000 } }),
      201,
    );
    zones.push(disc.id);

    // ZONES_MAX_VERTICES_PER_OWNER: 10 more positions would pass 100,000; a change that grows a zone too. Nothing saved.
    const r = await a.call('POST', '/api/v1/zones', { name: 'too-many', geometry: polygon(10, -60, 10, 1) });
    bad(r, 409, '/geometry', 'past the positions');
    assert.equal(r.body.code, 'CONFLICT');
    assert.match(r.body.message, /ZONES_MAX_VERTICES_PER_OWNER 100000/);
    bad(await a.call('PATCH', `/api/v1/zones/${disc.id}`, { circle: null, geometry: polygon(11, 10, 50, 2) }), 409, '/geometry', 'growing');
    assert.deepEqual(ok(await a.call('GET', `/api/v1/zones/${disc.id}`), 200).geometry, null, 'the zone is unchanged');
    assert.equal(ok(await a.call('GET', '/api/v1/zones?name=too-many'), 200).length, 0, 'nothing saved');
    // Exactly at the limit is allowed (far away: the stored box keeps it out of the matching).
    ok(await a.call('POST', '/api/v1/zones', { name: 'at-limit', geometry: polygon(9, -60, 10, 1) }), 201);

    const assets: string[] = [];
    for (let i = 0; i < 10; i++) assets.push(await a.asset(`load-${i}`));
    const body = Array.from({ length: 1000 }, (_, i) => ({
      assetId: assets[i % 10],
      latitude: Math.round((50 + 0.5 * Math.sin(i)) * 1e6) / 1e6,
      longitude: Math.round((10 + 0.5 * Math.cos(i)) * 1e6) / 1e6,
      whenCreated: new Date(Date.now() - 600_000 + i * 100).toISOString(),
    }));
    // The control: B's requests for 2 s with A idle (a busy machine is slow without A too). The
    // guide's rule is that zone matching gives the event loop back (API guide 7): B waits at most
    // 1 s more than with A idle, as in the hostile suite, not an absolute second.
    const quiet: number[] = [];
    for (const end = performance.now() + 2000; performance.now() < end; ) {
      const t = performance.now();
      ok(await b.call('GET', '/api/v1/assets'), 200);
      quiet.push(performance.now() - t);
      await new Promise((resolve) => setImmediate(resolve));
    }
    const limit = 1000 + Math.max(...quiet);
    let done = false;
    const started = performance.now();
    const bulk = a.call('POST', '/api/v1/locations', body).finally(() => {
      done = true;
    });
    // B asks again and again while A's bulk is being stored; each answer within the limit.
    const waits: number[] = [];
    while (!done) {
      const t = performance.now();
      ok(await b.call('GET', '/api/v1/assets'), 200);
      waits.push(performance.now() - t);
      await new Promise((resolve) => setImmediate(resolve));
    }
    const stored = ok(await bulk, 201);
    const took = performance.now() - started;
    console.log(
      `zone load: A's bulk ${Math.round(took)} ms; B ${waits.length} requests, longest ${Math.round(Math.max(...waits))} ms (idle: ${Math.round(Math.max(...quiet))} ms)`,
    );
    assert.ok(waits.length >= 2, `B was answered ${waits.length} times during A's ${Math.round(took)} ms bulk`);
    assert.ok(
      Math.max(...waits) < limit,
      `B waited ${Math.round(Math.max(...waits))} ms, past ${Math.round(limit)} ms (answers: ${waits.map(Math.round).join(', ')})`,
    );

    const expected = [...zones].sort(numeric).join(',');
    assert.equal(stored.length, 1000);
    for (const [n, loc] of stored.entries()) assert.equal(loc.zoneId, expected, `location ${n}`);
    const events = ok(await a.call('GET', `/api/v1/events?assetId=${assets[0]}&limit=100`), 200);
    assert.deepEqual(events.map((e: any) => e.currentData.value).sort(numeric), [...zones].sort(numeric), 'entered each zone once');
  },
);

test('a bulk whose zone rules pass one chunk (ZONE_WRITE_CHUNK_ROWS) is written in chunks: every event and visit, in one store', async () => {
  const { db } = ta.app.services;
  const c = await customer(ta, 'zone-chunks');
  const zones: string[] = [];
  for (let n = 0; n < 12; n++) zones.push(ok(await c.call('POST', '/api/v1/zones', { name: `c-${n}`, circle: circle(5000) }), 201).id);
  const assetId = await c.asset('chunked');
  const other = await c.asset('chunked-2');
  // 1000 locations, in and out of all 12 zones in turn: 6,000 visits and 12,000 events, far past one chunk.
  const t0 = Date.now() - 3600_000;
  const body = Array.from({ length: 1000 }, (_, i) => ({
    assetId: i === 999 ? other : assetId,
    latitude: i % 2 === 0 || i === 999 ? 0 : 10,
    longitude: 0,
    whenCreated: new Date(t0 + i * 1000).toISOString(),
  }));
  ok(await c.call('POST', '/api/v1/locations', body), 201);
  const counts = async (id: string) => {
    const { rows } = await db.query<{ subject: string; n: number }>(
      `SELECT split_part(subject, ' ', 1) AS subject, count(*)::int AS n FROM events WHERE asset_id = $1 GROUP BY 1 ORDER BY 1`,
      [id],
    );
    const visits = await db.query<{ open: number; closed: number }>(
      'SELECT count(*) FILTER (WHERE left_at IS NULL)::int AS open, count(*) FILTER (WHERE left_at IS NOT NULL)::int AS closed FROM zone_visits WHERE asset_id = $1',
      [id],
    );
    return { events: Object.fromEntries(rows.map((r) => [r.subject, r.n])), ...visits.rows[0] };
  };
  // 999 locations of the first asset: 500 inside (12 Entered each), 499 outside (12 Left each).
  assert.deepEqual(await counts(assetId), { events: { Entered: 6000, Left: 5988 }, open: 12, closed: 5988 });
  assert.deepEqual(await counts(other), { events: { Entered: 12 }, open: 12, closed: 0 });
  // Each event is pushed to the event log once.
  const log = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM event_log WHERE object_type = 'event' AND payload->>'assetId' = $1`,
    [assetId],
  );
  assert.equal(log.rows[0]!.n, 11_988);
  // The next store goes on from the visits the chunks left open (updated by id): 12 Left events.
  ok(
    await c.call('POST', '/api/v1/locations', { assetId, latitude: 10, longitude: 0, whenCreated: new Date(t0 + 2000_000).toISOString() }),
    201,
  );
  assert.deepEqual(await counts(assetId), { events: { Entered: 6000, Left: 6000 }, open: 0, closed: 6000 });
  const zoneIds = await db.query<{ zone_id: string }>('SELECT DISTINCT zone_id::text FROM zone_visits WHERE asset_id = $1 ORDER BY 1', [
    other,
  ]);
  assert.deepEqual(zoneIds.rows.map((r) => r.zone_id).sort(numeric), [...zones].sort(numeric));
});
