// The asset overview (API guide 5, "The asset overview"): GET /assets/overview answers one row per
// visible asset (last seen, last position and its zone, last temperature against the REEFER
// specification's range, open alarms as the inbox counts them, devices) with search, filters,
// sorts, pages and CSV; never another tenant's assets; bad inputs are 400s; an answer covers at
// most OVERVIEW_MAX_ASSETS assets (6 here) and says when it left some out.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { bad, customer, frozenSpecification, ok, startApp, waitFor } from './helpers.js';

const MAX = 6;
const ta = await startApp(undefined, { RATE_LIMIT_MAX: '100000', OVERVIEW_MAX_ASSETS: String(MAX) });
const ago = (minutes: number) => new Date(Date.now() - minutes * 60_000).toISOString();

/** Every row of the overview, following Link rel="next". */
async function everyRow(call: (m: string, p: string) => Promise<{ status: number; body: any; headers: any; raw: string }>, path: string) {
  const out: any[] = [];
  let next: string | undefined = path;
  for (let pages = 0; next && pages < 50; pages++) {
    const r = await call('GET', next);
    out.push(...ok(r as any, 200, next));
    const link = /<([^>]+)>;\s*rel="next"/.exec(String(r.headers.link ?? ''));
    next = link ? new URL(link[1]!).pathname.replace('/api/v1', '') + new URL(link[1]!).search : undefined;
  }
  return out;
}

/** A CSV answer's rows as objects by the header's names (no quoted commas in these tests' cells but JSON ones). */
function csvRows(text: string): Record<string, string>[] {
  const lines = text.trimEnd().split('\n');
  const split = (l: string) => {
    const cells: string[] = [];
    let cur = '';
    let quoted = false;
    for (let i = 0; i < l.length; i++) {
      const ch = l[i]!;
      if (quoted) {
        if (ch === '"' && l[i + 1] === '"') {
          cur += '"';
          i++;
        } else if (ch === '"') quoted = false;
        else cur += ch;
      } else if (ch === '"') quoted = true;
      else if (ch === ',') {
        cells.push(cur);
        cur = '';
      } else cur += ch;
    }
    cells.push(cur);
    return cells;
  };
  const head = split(lines[0]!);
  return lines.slice(1).map((l) => Object.fromEntries(split(l).map((c, i) => [head[i]!, c])));
}

// One fleet for the file: a customer with six assets (the bound) in every state the overview tells apart.
const a = await customer(ta, 'overview-a', { base: '/api/v1' });
const id = {
  cold: await a.asset('Reefer 2 cold'),
  warm: await a.asset('Reefer 10 warm'),
  cleared: await a.asset('Reefer 3 cleared'),
  acked: await a.asset('Reefer 4 acked'),
  silent: await a.asset('Truck silent'),
  empty: await a.asset('Empty box'),
};
ok(await a.call('PATCH', `/assets/${id.empty}`, { disabled: true, tags: 'spare,Depot-B' }), 200, 'disable');
ok(await a.call('PATCH', `/assets/${id.cold}`, { tags: 'frozen,fish' }), 200, 'tags');
for (const k of ['cold', 'warm', 'cleared', 'acked'] as const) await frozenSpecification(a.call, id[k]);
const reefer = async (assetId: string, minutesAgo: number, supplyAirTemperature: number | string, nested = false) =>
  ok(
    await a.call('POST', '/reefer-data', {
      assetId,
      whenCreated: ago(minutesAgo),
      data: nested ? { cargo: { sensors: { supplyAirTemperature } } } : { supplyAirTemperature },
    }),
    201,
    'reefer data',
  );
// In range, read from where the simulator puts it (data.cargo.sensors), as text.
await reefer(id.cold, 3, '-20.5', true);
// Out of range: an open ALERT, twice over (two readings, one alert: it lasts).
await reefer(id.warm, 3, -4);
await reefer(id.warm, 2, -3.5);
// Out of range, then back: the alert is cleared.
await reefer(id.cleared, 3, 0);
await reefer(id.cleared, 2, -20);
// Out of range still, but its alert acknowledged.
await reefer(id.acked, 3, 1);
const ackedAlerts = ok(await a.call('GET', `/events?assetId=${id.acked}&open=true`), 200, 'open alerts') as any[];
assert.equal(ackedAlerts.length, 1, 'one open alert to acknowledge');
ok(await a.call('POST', `/events/${ackedAlerts[0].id}/acknowledge`), 200, 'acknowledge');
// A position inside a zone; the silent truck's last record two days ago.
ok(await a.call('POST', '/zones', { name: 'Depot Venlo', circle: { latitude: 51.37, longitude: 6.17, radiusMeters: 5000 } }), 201, 'zone');
ok(await a.call('POST', '/locations', { assetId: id.cold, latitude: 51.371, longitude: 6.171, whenCreated: ago(1) }), 201, 'location');
ok(
  await a.call('POST', '/locations', { assetId: id.silent, latitude: 10, longitude: 20, whenCreated: ago(2 * 1440) }),
  201,
  'old location',
);
const device = ok(await a.call('POST', '/devices', { assetId: id.silent, protocol: 'osmand' }), 201, 'device');
ok(await a.call('PATCH', `/devices/${device.id}`, { disabled: true }), 200, 'device disabled');
ok(await a.call('POST', '/devices', { assetId: id.silent, protocol: 'osmand' }), 201, 'second device');

const rows = async (query = '') => ok(await a.call('GET', `/assets/overview?limit=1000${query}`), 200, `overview ${query}`) as any[];
const byId = async (query = '') => new Map((await rows(query)).map((r) => [r.id, r]));

test('a row per asset: last seen, position and zone, temperature against the range, open alarms, devices, attention', async () => {
  const all = await waitFor(
    () => 'the zone on the position',
    async () => {
      const m = await byId();
      return m.get(id.cold)?.position?.place ? m : undefined;
    },
  );
  assert.equal(all.size, 6);
  const cold = all.get(id.cold)!;
  assert.equal(cold.name, 'Reefer 2 cold');
  assert.equal(cold.ownerId, a.ownerId);
  assert.equal(cold.tags, 'frozen,fish');
  assert.equal(cold.disabled, false);
  assert.deepEqual(cold.temperature, {
    sensor: 'supplyAirTemperature',
    value: -20.5,
    time: cold.temperature.time,
    min: -30,
    max: -10,
    inRange: true,
  });
  assert.ok(Math.abs(Date.parse(cold.temperature.time) - (Date.now() - 3 * 60_000)) < 60_000, 'the reading time');
  assert.deepEqual(cold.position, { latitude: 51.371, longitude: 6.171, time: cold.position.time, place: 'Depot Venlo' });
  assert.ok(Date.parse(cold.lastSeen) >= Date.parse(cold.position.time), 'last seen: the newest record of any kind');
  assert.equal(cold.openAlarms, 0);
  assert.deepEqual(cold.attention, []);

  const warm = all.get(id.warm)!;
  assert.equal(warm.temperature.value, -3.5, 'the newest reading');
  assert.equal(warm.temperature.inRange, false);
  assert.equal(warm.position, null);
  assert.equal(warm.openAlarms, 1, 'one open alert, as the inbox counts it');
  assert.deepEqual(warm.attention, ['outOfRange', 'openAlarms']);
  assert.equal(
    warm.openAlarms,
    (ok(await a.call('GET', `/events?open=true&assetId=${id.warm}`), 200) as unknown[]).length,
    'the same definition as GET /events?open=true',
  );

  const cleared = all.get(id.cleared)!;
  assert.equal(cleared.openAlarms, 0, 'a cleared alert is not open');
  assert.equal(cleared.temperature.inRange, true);
  assert.deepEqual(cleared.attention, []);
  const acked = all.get(id.acked)!;
  assert.equal(acked.openAlarms, 0, 'an acknowledged alert is not open');
  assert.deepEqual(acked.attention, ['outOfRange']);

  const silent = all.get(id.silent)!;
  assert.equal(silent.temperature, null);
  assert.equal(silent.position.place, null, 'in no zone');
  assert.deepEqual(silent.attention, ['notSeen']);
  assert.deepEqual(silent.devices, { count: 2, enabled: 1, lastContact: null, lastError: null, lastErrorAt: null });

  const empty = all.get(id.empty)!;
  assert.deepEqual(empty, {
    id: id.empty,
    name: 'Empty box',
    ownerId: a.ownerId,
    tags: 'spare,Depot-B',
    disabled: true,
    lastSeen: null,
    position: null,
    temperature: null,
    openAlarms: 0,
    devices: { count: 0, enabled: 0, lastContact: null, lastError: null, lastErrorAt: null },
    attention: [],
  });
  // A longer allowance: the truck is not late yet.
  assert.deepEqual((await byId('&notSeenMinutes=5000')).get(id.silent)!.attention, []);
});

test('search by name and tag; filters: attention, disabled, ownerId', async () => {
  const names = async (query: string) => (await rows(query)).map((r) => r.name);
  assert.deepEqual(await names('&q=REEFER%202'), ['Reefer 2 cold'], 'name, any case');
  assert.deepEqual(await names('&q=fish'), ['Reefer 2 cold'], 'a tag');
  assert.deepEqual(await names('&q=depot-b'), ['Empty box'], 'a tag, any case');
  assert.deepEqual(await names('&q=nothing-like-it'), []);
  assert.deepEqual(new Set(await names('&attention=true')), new Set(['Reefer 10 warm', 'Reefer 4 acked', 'Truck silent']));
  assert.deepEqual(new Set(await names('&attention=false')), new Set(['Reefer 2 cold', 'Reefer 3 cleared', 'Empty box']));
  assert.deepEqual(await names('&disabled=true'), ['Empty box']);
  assert.equal((await names('&disabled=false')).length, 5);
  assert.equal((await names(`&ownerId=${a.ownerId}`)).length, 6);
  const child = await customer(ta, 'overview-a-child', { parentId: a.ownerId });
  const childAsset = await child.asset('Child reefer');
  assert.deepEqual(
    (await rows(`&ownerId=${child.ownerId}`)).map((r) => r.id),
    [childAsset],
    'a parent sees its child, and filters by it',
  );
  ok(await ta.call('DELETE', `/api/v1/assets/${childAsset}`, { token: a.key }), 204);
});

test('sorts: name (numbers in names as numbers), temperature and open alarms, nulls last either way; pages follow the same order', async () => {
  assert.deepEqual(
    (await rows()).map((r) => r.name),
    ['Empty box', 'Reefer 2 cold', 'Reefer 3 cleared', 'Reefer 4 acked', 'Reefer 10 warm', 'Truck silent'],
  );
  assert.deepEqual(
    (await rows('&sort=name&order=desc')).map((r) => r.name),
    ['Truck silent', 'Reefer 10 warm', 'Reefer 4 acked', 'Reefer 3 cleared', 'Reefer 2 cold', 'Empty box'],
  );
  const temps = (list: any[]) => list.map((r) => r.temperature?.value ?? null);
  assert.deepEqual(temps(await rows('&sort=temperature')), [1, -3.5, -20, -20.5, null, null], 'warmest first by default');
  assert.deepEqual(temps(await rows('&sort=temperature&order=asc')), [-20.5, -20, -3.5, 1, null, null]);
  const alarms = await rows('&sort=openAlarms');
  assert.equal(alarms[0].id, id.warm);
  assert.deepEqual(
    (await rows('&sort=attention')).slice(0, 3).map((r) => r.name),
    ['Reefer 10 warm', 'Reefer 4 acked', 'Truck silent'],
    'most reasons first, then by name',
  );
  const seen = await rows('&sort=lastSeen');
  assert.deepEqual(
    seen.slice(-2).map((r) => r.name),
    ['Truck silent', 'Empty box'],
    'the longest silent last but the never seen',
  );
  for (const q of ['', '&sort=temperature', '&sort=lastSeen&order=asc', '&sort=openAlarms&q=reefer']) {
    const paged = await everyRow(a.call, `/assets/overview?limit=2${q}`);
    assert.deepEqual(
      paged.map((r) => r.id),
      (await rows(q)).map((r) => r.id),
      `pages of 2 in order ${q}`,
    );
  }
});

test('CSV: the same rows as JSON, in the same order, dotted columns', async () => {
  const json = await rows('&sort=temperature');
  const ways: { q: string; headers: Record<string, string> }[] = [
    { q: '&format=csv', headers: {} },
    { q: '', headers: { accept: 'text/csv' } },
  ];
  for (const how of ways) {
    const r = await ta.call('GET', `/api/v1/assets/overview?sort=temperature${how.q}`, { token: a.key, headers: how.headers });
    assert.equal(r.status, 200, r.raw);
    assert.match(String(r.headers['content-type']), /^text\/csv/);
    assert.match(String(r.headers['content-disposition']), /attachment; filename="assets-overview.csv"/);
    const csv = csvRows(r.raw);
    assert.deepEqual(
      csv.map((x) => x.id),
      json.map((x) => x.id),
    );
    const warm = csv.find((x) => x.id === id.warm)!;
    assert.equal(warm['temperature.value'], '-3.5');
    assert.equal(warm['temperature.inRange'], 'false');
    assert.equal(warm.openAlarms, '1');
    assert.equal(warm.attention, '["outOfRange","openAlarms"]');
    assert.equal(csv.find((x) => x.id === id.cold)!['position.place'], 'Depot Venlo');
    assert.equal(csv.find((x) => x.id === id.empty)!.lastSeen, '');
  }
});

test("tenancy: another tenant's assets never appear, its records never show; the operator sees both", async () => {
  const b = await customer(ta, 'overview-b', { base: '/api/v1' });
  const bAsset = await b.asset('Reefer 2 cold');
  ok(await b.call('POST', '/locations', { assetId: bAsset, latitude: 1, longitude: 2 }), 201);
  const mine = await rows();
  assert.ok(!mine.some((r) => r.id === bAsset), "B's asset is not in A's overview");
  const theirs = ok(await b.call('GET', '/assets/overview?limit=1000'), 200) as any[];
  assert.deepEqual(
    theirs.map((r) => r.id),
    [bAsset],
  );
  assert.equal((await rows(`&ownerId=${b.ownerId}`)).length, 0, "filtering by B's owner shows nothing of B's");
  const csv = await ta.call('GET', '/api/v1/assets/overview?format=csv&q=Reefer', { token: a.key });
  assert.ok(!csv.raw.includes(bAsset), "nor does A's CSV");
  const admin = ok(await ta.call('GET', `/api/v1/assets/overview?limit=1000&q=Reefer%202%20cold`, { token: ta.adminToken }), 200) as any[];
  assert.deepEqual(new Set(admin.map((r) => r.id)), new Set([id.cold, bAsset]), 'the operator sees both');

  // A moved asset shows its new owner only what was stored for it (API guide 3).
  const moved = await a.asset('Moved reefer');
  ok(await a.call('POST', '/locations', { assetId: moved, latitude: 3, longitude: 4 }), 201);
  await reefer(moved, 1, -50);
  ok(await ta.call('PATCH', `/api/v1/assets/${moved}`, { token: ta.adminToken, body: { ownerId: b.ownerId } }), 200, 'move');
  const there = (ok(await b.call('GET', '/assets/overview?limit=1000'), 200) as any[]).find((r) => r.id === moved);
  assert.equal(there.position, null, "A's position is not B's to read");
  assert.equal(there.temperature, null, "nor A's reading");
  assert.ok(!(await rows()).some((r) => r.id === moved), 'gone from A');
});

test('bad inputs: 400 with {error, message} naming the parameter', async () => {
  const q = async (query: string, field: string | undefined, code = 'VALIDATION_FAILED') => {
    const r = await a.call('GET', `/assets/overview?${query}`);
    bad(r, 400, field, query);
    assert.equal(r.body.code, code, query);
  };
  await q('sort=colour', '/sort');
  await q('order=up', '/order');
  await q('limit=0', '/limit');
  await q('limit=1001', '/limit');
  await q('q=', '/q');
  await q(`q=${'x'.repeat(256)}`, '/q');
  await q('ownerId=nobody', '/ownerId');
  await q('disabled=maybe', '/disabled');
  await q('attention=yes', '/attention');
  await q('notSeenMinutes=0', '/notSeenMinutes');
  await q('format=ndjson', '/format');
  await q('cursor=not-a-cursor', '/cursor', 'BAD_CURSOR');
  const forged = Buffer.from(JSON.stringify({ s: 'name', o: 'asc', v: 'x', n: 'x', i: "1' OR 1=1" })).toString('base64url');
  await q(`cursor=${forged}`, '/cursor', 'BAD_CURSOR');
  const r = await ta.call('GET', '/api/v1/assets/overview', { headers: { accept: 'application/x-ndjson' }, token: a.key });
  bad(r, 400, '/format', 'ndjson by Accept');
  assert.equal((await ta.call('GET', '/api/v1/assets/overview')).status, 401, 'a credential is needed');
});

test('an answer covers OVERVIEW_MAX_ASSETS assets, the first by name, and says it left some out', async () => {
  const c = await customer(ta, 'overview-many', { base: '/api/v1' });
  const made: string[] = [];
  for (let i = 0; i < MAX + 2; i++) made.push(await c.asset(`Box ${String.fromCharCode(65 + i)}`));
  const r = await c.call('GET', '/assets/overview?limit=1000&sort=name&order=desc');
  const list = ok(r, 200) as any[];
  assert.equal(list.length, MAX);
  assert.equal(r.headers['overview-truncated'], 'true');
  assert.deepEqual(
    list.map((x) => x.name),
    ['Box F', 'Box E', 'Box D', 'Box C', 'Box B', 'Box A'],
    'the first by name, then sorted',
  );
  const csv = await c.call('GET', '/assets/overview?format=csv');
  assert.equal(csv.headers['overview-truncated'], 'true');
  assert.equal(csvRows(csv.raw).length, MAX);
  // A search narrows to what is past the bound; the whole answer then has no such header.
  const narrowed = await c.call('GET', '/assets/overview?q=Box%20H');
  assert.deepEqual(
    (ok(narrowed, 200) as any[]).map((x) => x.name),
    ['Box H'],
  );
  assert.equal(narrowed.headers['overview-truncated'], undefined);
  assert.equal((await rows()).length, 6, 'A, at the bound exactly, is not cut');
  assert.equal((await a.call('GET', '/assets/overview')).headers['overview-truncated'], undefined);
});
