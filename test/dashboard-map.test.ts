// @test-lanes postgres
// @test-browser
// (the page is the same on either database: it runs once)
// The fleet map (Leaflet) in a real Chromium (playwright-core with Debian's chromium): 30 assets, a
// dozen of them a few hundred metres apart in the port of Rotterdam, the rest over the world, a
// pair on either side of the antimeridian, and two zones (a circle of 250 m, a quay as a polygon).
//
// The built-in base map: nothing the page asks for leaves the service's origin (every request
// recorded); the world view clusters the fleet and draws both zones as shapes of a visible size;
// no two names overlap, nor a name and a cluster; the wheel zooms into Rotterdam down to the port
// (the land switches to 50m, then 10m), where the cluster comes apart; a drag pans by what it
// moved; the buttons and keys zoom; "Fit fleet" fits every asset; a click on a cluster zooms into
// it; the track across the antimeridian is never drawn across the map.
//
// Street tiles (MAP_TILE_URL at a tile server the test runs on loopback): tiles are asked for and
// drawn, the attribution shown, the policy adds that origin and nothing else, the share page draws
// them too. Screenshots at 1440x900 and 390x844 go to test-artifacts/ (outside git).
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { test } from 'node:test';
import zlib from 'node:zlib';
import type { Page } from 'playwright-core';
import { DASHBOARD_CSP } from '../src/dashboard/dashboard.js';
import { SHARE_CSP } from '../src/share/page.js';
import { atEnd, ok, ownerWithKey, startApp, TEST_DB, type TestApp, waitFor } from './helpers.js';
import { ARTIFACTS, launchChromium, requireChromium, type TestBrowser } from './browser.js';

// Web Mercator, as the map draws it (world units: the world is the square 0..1).
const mercX = (lon: number) => (lon + 180) / 360;
const mercY = (lat: number) => 0.5 - Math.log(Math.tan(Math.PI / 4 + (lat * Math.PI) / 360)) / (2 * Math.PI);

interface Place {
  name: string;
  latitude: number;
  longitude: number;
}
// A dozen in the port of Rotterdam, on a grid about 90 m by 80 m.
const ROTTERDAM: Place[] = Array.from({ length: 12 }, (_, i) => ({
  name: `RTM${String(i).padStart(2, '0')}`,
  latitude: 51.95 + Math.floor(i / 4) * 0.0008,
  longitude: 4.14 + (i % 4) * 0.0012,
}));
const RTM = { latitude: 51.9508, longitude: 4.1418 }; // the middle of them
const PORTS: Place[] = [
  ['SIN', 1.26, 103.8],
  ['SHA', 31.23, 121.47],
  ['LAX', 33.74, -118.26],
  ['NYC', 40.67, -74.04],
  ['SSZ', -23.96, -46.3],
  ['DUR', -29.87, 31.03],
  ['JEA', 25.01, 55.06],
  ['BOM', 18.95, 72.84],
  ['SYD', -33.86, 151.2],
  ['HAM', 53.54, 9.97],
  ['PTY', 8.95, -79.56],
  ['LOS', 6.45, 3.39],
  ['TYO', 35.62, 139.77],
  ['YVR', 49.29, -123.11],
  ['VAP', -33.03, -71.63],
].map(([name, latitude, longitude]) => ({ name: name as string, latitude: latitude as number, longitude: longitude as number }));
const DATELINE: Place[] = [
  { name: 'FIJI-E', latitude: -17, longitude: 179.9 },
  { name: 'FIJI-W', latitude: -17, longitude: -179.9 },
];
const DISABLED: Place = { name: 'RTM-OFF', latitude: 51.9504, longitude: 4.1406 };

/** An owner with its assets at their places (and FIJI-E's track across the antimeridian first), one disabled. */
async function fleet(ta: TestApp, owner: string, places: Place[], disabled?: Place) {
  const o = await ownerWithKey(ta, owner);
  const call = (method: string, p: string, body?: unknown) => ta.call(method, `/api/v1${p}`, { token: o.key, body });
  const ids = new Map<string, string>();
  for (const p of [...places, ...(disabled ? [disabled] : [])])
    ids.set(p.name, ok(await call('POST', '/assets', { name: p.name }), 201).id);
  if (disabled) ok(await call('PATCH', `/assets/${ids.get(disabled.name)}`, { disabled: true }), 200);
  if (places.length > 1) {
    // Zones: a circle of 250 m about the Rotterdam dozen, a quay as a polygon east of them.
    ok(await call('POST', '/zones', { name: 'Maasvlakte', circle: { ...RTM, radiusMeters: 250 } }), 201);
    const quay = [
      [4.1445, 51.9495],
      [4.1465, 51.9495],
      [4.1465, 51.9525],
      [4.1445, 51.9525],
      [4.1445, 51.9495],
    ];
    ok(await call('POST', '/zones', { name: 'Quay', geometry: { type: 'Polygon', coordinates: [quay] } }), 201);
  }
  const ago = (s: number) => new Date(Date.now() - s * 1000).toISOString();
  const track = places.some((p) => p.name === 'FIJI-E')
    ? [
        { assetId: ids.get('FIJI-E'), latitude: -17.5, longitude: -179.2, whenCreated: ago(600) },
        { assetId: ids.get('FIJI-E'), latitude: -17.3, longitude: -179.6, whenCreated: ago(300) },
      ]
    : [];
  const latest = [...places, ...(disabled ? [disabled] : [])].map((p) => ({
    assetId: ids.get(p.name),
    latitude: p.latitude,
    longitude: p.longitude,
    whenCreated: ago(60),
  }));
  ok(await call('POST', '/locations', [...track, ...latest]), 201);
  return o;
}

/** The map on a page: its view as its element reports it, and where a place is drawn in page pixels. */
function mapOf(page: Page) {
  const view = async () => {
    const v = (await page.evaluate(`(c => {
      const r = c.getBoundingClientRect();
      return { center: c.dataset.center, zoom: c.dataset.zoom, clusters: c.dataset.clusters, labels: c.dataset.labels,
        land: c.dataset.land, tiles: c.dataset.tiles, still: !c.hasAttribute('data-animating'),
        w: c.clientWidth, h: c.clientHeight, left: r.left + c.clientLeft, top: r.top + c.clientTop };
    })(document.querySelector('div.map'))`)) as Record<string, string | undefined> & {
      still: boolean;
      w: number;
      h: number;
      left: number;
      top: number;
    };
    const [lat, lon] = (v.center ?? 'NaN,NaN').split(',').map(Number) as [number, number];
    return {
      still: v.still,
      w: v.w,
      h: v.h,
      left: v.left,
      top: v.top,
      land: v.land,
      lat,
      lon,
      zoom: Number(v.zoom),
      clusters: Number(v.clusters),
      labels: Number(v.labels),
      tiles: Number(v.tiles ?? 0),
    };
  };
  type View = Awaited<ReturnType<typeof view>>;
  let last = '';
  /**
   * Waits until the map, at rest, is as `cond` says. The guide promises no drawing time: the 10m land
   * (3 MB, decoded and drawn into every tile) came after more than 30 s with eight test files on two
   * cores, so a condition may take as long as the test's own timeout allows.
   */
  const until = (what: string, cond: (v: View) => boolean) =>
    waitFor(
      () => `${what} (last: ${last})`,
      async () => {
        const v = await view();
        last = JSON.stringify(v);
        return v.still && cond(v) ? v : undefined;
      },
      120_000,
    );
  const at = (v: View, p: { latitude: number; longitude: number }) => {
    const scale = 256 * 2 ** v.zoom;
    const cx = mercX(v.lon);
    let x = mercX(p.longitude);
    x -= Math.round(x - cx);
    return { x: v.left + (x - cx) * scale + v.w / 2, y: v.top + (mercY(p.latitude) - mercY(v.lat)) * scale + v.h / 2 };
  };
  const inside = (v: View, p: Place) => {
    const s = at(v, p);
    return s.x >= v.left && s.x <= v.left + v.w && s.y >= v.top && s.y <= v.top + v.h;
  };
  /** The boxes of what the map shows: names, clusters, zones (page pixels). */
  const boxes = (selector: string) =>
    page.evaluate(`[...document.querySelectorAll('div.map ${selector}')].map((e) => {
      const r = e.getBoundingClientRect();
      return { x0: r.left, y0: r.top, x1: r.right, y1: r.bottom, text: e.textContent };
    })`) as Promise<{ x0: number; y0: number; x1: number; y1: number; text: string }[]>;
  /** No two names overlap, nor a name and a cluster; returns how many names show. */
  const labelsApart = async (where: string) => {
    const labels = await boxes('.map-label');
    const clusters = await boxes('.map-cluster');
    const hit = (a: { x0: number; y0: number; x1: number; y1: number }, b: typeof a) =>
      a.x0 < b.x1 - 0.5 && b.x0 < a.x1 - 0.5 && a.y0 < b.y1 - 0.5 && b.y0 < a.y1 - 0.5;
    for (let i = 0; i < labels.length; i++) {
      for (let j = i + 1; j < labels.length; j++)
        assert.ok(!hit(labels[i]!, labels[j]!), `${where}: "${labels[i]!.text}" overlaps "${labels[j]!.text}"`);
      for (const c of clusters) assert.ok(!hit(labels[i]!, c), `${where}: "${labels[i]!.text}" overlaps a cluster of ${c.text}`);
    }
    return labels.length;
  };
  return { view, until, at, inside, boxes, labelsApart };
}

/** A browser page signed in with a key, on the Fleet page; its errors and every request it makes recorded. */
async function fleetPage(browser: TestBrowser, ta: TestApp, key: string, viewport = { width: 1440, height: 900 }) {
  const page = await browser.newPage({ viewport, hasTouch: true });
  const errors: string[] = [];
  const requests: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
  page.on('request', (r) => requests.push(r.url()));
  await page.goto(`${ta.url}/dashboard/`);
  await page.fill('#key', key);
  await page.click('button[type=submit]');
  await page.waitForSelector('header nav');
  await page.click('header >> text=Fleet');
  return { page, errors, requests };
}

/** A PNG of a tile: pale green, its edge darker (so tiles show as a grid). */
function tilePng(): Buffer {
  const size = 256;
  const raw = Buffer.alloc(size * (1 + size * 3));
  for (let y = 0; y < size; y++) {
    raw[y * (1 + size * 3)] = 0;
    for (let x = 0; x < size; x++) {
      const edge = x === 0 || y === 0;
      raw.set(edge ? [150, 170, 150] : [226, 240, 222], y * (1 + size * 3) + 1 + x * 3);
    }
  }
  const chunk = (type: string, data: Buffer) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(zlib.crc32(body));
    return Buffer.concat([len, body, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(size, 0);
  ihdr.writeUInt32BE(size, 4);
  ihdr.set([8, 2, 0, 0, 0], 8);
  return Buffer.concat([
    Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]),
    chunk('IHDR', ihdr),
    chunk('IDAT', zlib.deflateSync(raw)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** A tile server on loopback: a PNG for any /z/x/y.png, each request counted. */
async function tileServer() {
  const png = tilePng();
  const asked: string[] = [];
  const server = http.createServer((req, res) => {
    asked.push(req.url ?? '');
    if (!/^\/\d+\/\d+\/\d+\.png$/.test(req.url ?? '')) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'image/png', 'content-length': png.length }).end(png);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  atEnd(() => new Promise((resolve) => server.close(resolve)));
  return { origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, asked };
}

if (TEST_DB === 'postgres') {
  test('the fleet map on the built-in base map: nothing off the machine, zones at world zoom, names apart, zoom to a port, pan, fit, clusters, the antimeridian', {
    timeout: 300_000,
  }, async (t) => {
    if (!requireChromium(t)) return;
    const ta = await startApp(t, { RATE_LIMIT_MAX: '100000', RATE_LIMIT_CONCURRENT: '1000' });
    const shipper = await fleet(ta, 'map-shipper', [...ROTTERDAM, ...PORTS, ...DATELINE], DISABLED);
    const single = await fleet(ta, 'map-single', [{ name: 'ONLY', latitude: 51.95, longitude: 4.14 }]);
    const visible = [...ROTTERDAM, ...PORTS, ...DATELINE];

    // The land files themselves (gzip, caching, ETag): test/ops.test.ts.
    // The page's policy as it always was; the map's settings say: no street tiles.
    assert.equal((await fetch(`${ta.url}/dashboard/`)).headers.get('content-security-policy'), DASHBOARD_CSP);
    const settings = (await (await fetch(`${ta.url}/dashboard/config.json`)).json()) as { map: { tiles: unknown } };
    assert.equal(settings.map.tiles, null);
    const css = await (await fetch(`${ta.url}/dashboard/app.css`)).text();
    assert.match(css, /\.leaflet-container/, "Leaflet's stylesheet is served with the page's");
    assert.doesNotMatch(css, /url\(/, 'and asks for no image');

    const browser = await launchChromium();
    const { page, errors, requests } = await fleetPage(browser, ta, shipper.key);
    const map = mapOf(page);
    const { until, at, inside } = map;

    // The world: every asset but the disabled one, the dozen in Rotterdam as one cluster.
    await page.waitForSelector(`div.map[data-assets="${visible.length}"]`);
    let v = await until('the world with its land', (v) => v.land === '110m' && v.zoom <= 3 && v.clusters > 0);
    assert.ok(
      visible.every((p) => inside(v, p) || Math.abs(p.longitude) > 170),
      'the world view shows the fleet',
    );
    // Zones at world zoom: drawn, never specks (the ring of a minimum size on each).
    await page.waitForSelector('div.map path.zone-min');
    const zones = await map.boxes('path.zone-min');
    assert.equal(zones.length, 2, 'both zones marked at world zoom');
    for (const z of zones) assert.ok(z.x1 - z.x0 >= 10 && z.y1 - z.y0 >= 10, `a zone ${JSON.stringify(z)} is no speck`);
    assert.equal(await page.locator('div.map path.zone:not(.zone-min)').count(), 2, 'and their shapes');
    // Names: some shown, none over another or over a cluster.
    assert.ok((await map.labelsApart('the world')) > 5, 'names shown at world zoom');
    assert.equal(await map.labelsApart('the world'), v.labels);
    await page.screenshot({ path: path.join(ARTIFACTS, 'map-world.png') });

    // The wheel zooms about the cursor into Rotterdam: the land turns 50m, then 10m; the cluster comes apart.
    const lands = new Set<string>();
    for (let k = 0; k < 20 && !(v.zoom >= 16 && v.clusters === 0); k++) {
      const p = at(v, RTM);
      await page.mouse.move(p.x, p.y);
      await page.mouse.wheel(0, -100);
      const zoom = v.zoom;
      v = await until(`closer than ${zoom}`, (v) => v.zoom > zoom);
      if (v.land) lands.add(v.land);
      if (k === 4) await page.screenshot({ path: path.join(ARTIFACTS, 'map-mid.png') });
      const q = at(v, RTM);
      assert.ok(Math.hypot(q.x - p.x, q.y - p.y) < 8, `zoom ${v.zoom}: Rotterdam stays under the cursor: ${JSON.stringify([p, q, v])}`);
    }
    v = await until('the port with its 10m land', (v) => v.land === '10m' && v.clusters === 0);
    assert.ok(lands.has('50m'), `the 50m land on the way: ${[...lands]}`);
    assert.ok(ROTTERDAM.every((p) => inside(v, p)));
    // At the port the zones are big: their shapes, no ring of a minimum size.
    assert.equal(await page.locator('div.map path.zone-min').count(), 0);
    const shapes = await map.boxes('path.zone');
    assert.ok(
      shapes.every((z) => z.x1 - z.x0 > 40),
      `zones drawn to scale: ${JSON.stringify(shapes)}`,
    );
    const named = await map.labelsApart('the port');
    assert.ok(named >= 6, `${named} names at the port`);
    await page.screenshot({ path: path.join(ARTIFACTS, 'map-port.png') });

    // A drag pans by what it moved (and selects nothing).
    const before = v;
    await page.mouse.move(v.left + v.w / 2, v.top + v.h / 2);
    await page.mouse.down();
    for (let i = 1; i <= 10; i++) await page.mouse.move(v.left + v.w / 2 - 20 * i, v.top + v.h / 2, { steps: 2 });
    await page.mouse.up();
    v = await until('the drag done', (v) => v.lon !== before.lon);
    const moved = ((v.lon - before.lon) / 360) * 256 * 2 ** v.zoom;
    assert.ok(Math.abs(moved - 200) < 30, `a drag of 200 px moved the centre by ${moved} px`);
    assert.equal(await page.locator('text=/positions in the last 24 h/').count(), 0, 'a drag is no click');

    // The buttons and keys zoom about the centre.
    const z0 = v.zoom;
    await page.click('button[aria-label="Zoom out"]');
    await until('zoomed out', (v) => v.zoom === z0 - 1);
    await page.focus('div.map');
    await page.keyboard.press('-');
    await until('zoomed out again', (v) => v.zoom === z0 - 2);
    await page.click('button[aria-label="Zoom in"]');
    await until('zoomed in', (v) => v.zoom === z0 - 1);

    // "Fit fleet": every asset on the map in view.
    await page.click('text=Fit fleet');
    v = await until('the fleet fitted', (v) => v.zoom <= 3);
    assert.ok(
      visible.every((p) => inside(v, p)),
      `every asset in view: ${visible.filter((p) => !inside(v, p)).map((p) => p.name)}`,
    );
    assert.ok(v.clusters >= 1, 'Rotterdam clustered');
    await map.labelsApart('the fleet fitted');

    // A click on the Rotterdam cluster zooms into it, until its assets stand apart.
    const clicks: number[] = [];
    while (v.clusters > 0 && ROTTERDAM.some((q) => inside(v, q))) {
      assert.ok(clicks.length < 8, `zoomed ${clicks} and still ${v.clusters} clusters`);
      const zoom = v.zoom;
      const p = at(v, RTM);
      const nearest = (await map.boxes('.map-cluster'))
        .map((b) => ({ x: (b.x0 + b.x1) / 2, y: (b.y0 + b.y1) / 2 }))
        .sort((a, b) => Math.hypot(a.x - p.x, a.y - p.y) - Math.hypot(b.x - p.x, b.y - p.y))[0]!;
      await page.mouse.click(nearest.x, nearest.y);
      v = await until('into the cluster', (v) => v.zoom > zoom);
      clicks.push(v.zoom);
    }
    assert.ok(
      ROTTERDAM.every((q) => inside(v, q)),
      `the dozen in view after ${clicks}`,
    );
    assert.ok(v.zoom >= 15, `${clicks}`);

    // The pair across the antimeridian: one cluster, opened with a click; then FIJI-E's track, which crosses it.
    await page.click('text=Fit fleet');
    v = await until('the fleet fitted again', (v) => v.zoom <= 3);
    let p = at(v, DATELINE[0]!);
    await page.mouse.click(p.x, p.y);
    v = await until('the pair apart', (v) => v.zoom > 8 && DATELINE.every((q) => inside(v, q)) && v.clusters === 0);
    p = at(v, DATELINE[0]!);
    await page.mouse.click(p.x, p.y);
    await page.waitForSelector('text=FIJI-E: 3 positions in the last 24 h');
    await page.waitForSelector('div.map path.track');
    const pairZoom = (await map.view()).zoom;
    for (const _ of [1, 2, 3]) await page.click('button[aria-label="Zoom out"]'); // clicks in a row add up
    v = await until('out a little', (v) => v.zoom === pairZoom - 3);
    await page.screenshot({ path: path.join(ARTIFACTS, 'map-dateline.png') });
    // The selected asset's name goes first.
    assert.ok(
      (await map.boxes('.map-label.chosen')).some((b) => b.text === 'FIJI-E'),
      'the selected name shown',
    );
    // The track is short here, and short at world zoom: never a line across the whole map.
    const trackWidth = async () => {
      const [b] = await map.boxes('path.track');
      return b ? b.x1 - b.x0 : -1;
    };
    assert.ok((await trackWidth()) > 20, 'the track is drawn');
    await page.focus('div.map');
    await page.keyboard.press('0');
    v = await until('the world', (v) => v.zoom <= 3);
    const w = await trackWidth();
    assert.ok(w >= 0 && w < 20, `no track across the world: ${w} px wide`);
    await map.labelsApart('the world, FIJI-E selected');

    // The disabled asset shows when asked for.
    await page.locator('label', { hasText: 'show disabled assets' }).locator('input').check();
    await page.waitForSelector(`div.map[data-assets="${visible.length + 1}"]`);

    // A phone: the world, names apart.
    const phone = await fleetPage(browser, ta, shipper.key, { width: 390, height: 844 });
    await phone.page.waitForSelector(`div.map[data-assets="${visible.length}"]`);
    await mapOf(phone.page).until('the phone map', (v) => v.land === '110m');
    await mapOf(phone.page).labelsApart('a phone');
    await phone.page.screenshot({ path: path.join(ARTIFACTS, 'map-phone.png') });

    // One asset: "Fit fleet" comes close, on it; a click on it shows its track (one position).
    const one = await fleetPage(browser, ta, single.key);
    const oneMap = mapOf(one.page);
    await one.page.waitForSelector('div.map[data-assets="1"]');
    await oneMap.until('the land', (v) => v.land === '110m');
    await one.page.click('text=Fit fleet');
    v = await oneMap.until('one asset fitted', (v) => v.zoom === 15);
    assert.ok(Math.abs(v.lat - 51.95) < 1e-3 && Math.abs(v.lon - 4.14) < 1e-3, `on the asset: ${v.lat},${v.lon}`);
    await one.page.click('div.map path.map-asset');
    await one.page.waitForSelector('text=ONLY: 1 position in the last 24 h');

    // Nothing was asked of another machine.
    const origin = new URL(ta.url).origin;
    const away = [...requests, ...phone.requests, ...one.requests].filter((u) => !u.startsWith('data:') && new URL(u).origin !== origin);
    assert.deepEqual(away, [], 'the built-in map asks nothing of another machine');
    assert.deepEqual([...errors, ...phone.errors, ...one.errors], []);
  });

  test('street tiles from MAP_TILE_URL: asked for and drawn, attributed, their origin alone added to the policies', {
    timeout: 180_000,
  }, async (t) => {
    if (!requireChromium(t)) return;
    const tiles = await tileServer();
    const ta = await startApp(t, {
      RATE_LIMIT_MAX: '100000',
      RATE_LIMIT_CONCURRENT: '1000',
      MAP_TILE_URL: `${tiles.origin}/{z}/{x}/{y}.png`,
      MAP_ATTRIBUTION: '© Test Tiles & contributors',
    });
    const shipper = await fleet(ta, 'tiles-shipper', [...ROTTERDAM, ...PORTS]);

    // The policies: img-src gains the tile server's origin, nothing else changes.
    const expected = DASHBOARD_CSP.replace("img-src 'self' data:", `img-src 'self' data: ${tiles.origin}`);
    assert.notEqual(expected, DASHBOARD_CSP);
    for (const f of ['/dashboard/', '/dashboard/app.js', '/dashboard/config.json'])
      assert.equal((await fetch(`${ta.url}${f}`)).headers.get('content-security-policy'), expected, f);
    const settings = (await (await fetch(`${ta.url}/dashboard/config.json`)).json()) as { map: { tiles: { url: string } } };
    assert.equal(settings.map.tiles.url, `${tiles.origin}/{z}/{x}/{y}.png`);

    const browser = await launchChromium();
    const { page, errors, requests } = await fleetPage(browser, ta, shipper.key);
    const map = mapOf(page);
    await page.waitForSelector(`div.map[data-assets="${ROTTERDAM.length + PORTS.length}"]`);
    let v = await map.until('tiles drawn', (v) => v.tiles >= 4);
    assert.equal(v.land, undefined, 'no built-in land under the tiles');
    const drawn = (await page.evaluate(
      `[...document.querySelectorAll('div.map img.leaflet-tile-loaded')].filter((i) => i.complete && i.naturalWidth === 256).length`,
    )) as number;
    assert.ok(drawn >= 4, `${drawn} tiles drawn`);
    // (The copies of the world east and west share their tiles' URLs: the browser asks once.)
    assert.ok(tiles.asked.length >= 4, `the tile server was asked ${tiles.asked.length} times`);
    assert.ok(
      tiles.asked.every((u) => /^\/\d+\/\d+\/\d+\.png$/.test(u)),
      `tiles only: ${tiles.asked}`,
    );
    assert.match((await page.locator('.leaflet-control-attribution').textContent())!, /© Test Tiles & contributors/);
    await map.labelsApart('tiles, the world');
    await page.screenshot({ path: path.join(ARTIFACTS, 'map-tiles-world.png') });
    // Closer: more tiles, at the zoom asked for.
    await page.click('text=Fit fleet');
    v = await map.until('fitted', () => true);
    const asked = tiles.asked.length;
    for (let k = 0; k < 3; k++) {
      const zoom = v.zoom;
      const p = map.at(v, RTM);
      await page.mouse.move(p.x, p.y);
      await page.mouse.wheel(0, -100);
      v = await map.until('closer', (v) => v.zoom > zoom);
    }
    await waitFor(
      () => `tiles at zoom ${v.zoom}`,
      async () => tiles.asked.length > asked && tiles.asked.some((u) => u.startsWith(`/${v.zoom}/`)),
    );
    await page.screenshot({ path: path.join(ARTIFACTS, 'map-tiles-mid.png') });

    // A phone.
    const phone = await fleetPage(browser, ta, shipper.key, { width: 390, height: 844 });
    await mapOf(phone.page).until('tiles on a phone', (v) => v.tiles >= 2);
    await phone.page.screenshot({ path: path.join(ARTIFACTS, 'map-tiles-phone.png') });

    // The share page: its map over the tiles, its policy with the same origin added.
    const o = shipper;
    const rtm = (ok(await ta.call('GET', '/api/v1/assets?limit=100', { token: o.key }), 200) as { id: string; name: string }[]).find(
      (a: { name: string }) => a.name === 'RTM00',
    );
    const link = ok(
      await ta.call('POST', '/api/v1/share-links', {
        token: o.key,
        body: { assetIds: [rtm!.id], show: ['position'], expiresAt: new Date(Date.now() + 3_600_000).toISOString() },
      }),
      201,
    );
    const sharePage = await browser.newPage({ viewport: { width: 1440, height: 900 } });
    sharePage.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
    const before = tiles.asked.length;
    const res = await sharePage.goto(link.url);
    assert.equal(res?.headers()['content-security-policy'], SHARE_CSP.replace('img-src data:', `img-src data: ${tiles.origin}`));
    const images = await sharePage.locator('svg.map image.tile').count();
    assert.ok(images >= 4, `${images} tiles on the share page`);
    await waitFor(
      () => 'the share page to ask for its tiles',
      async () => tiles.asked.length >= before + images,
    );
    assert.match((await sharePage.locator('svg.map text.attribution').textContent())!, /© Test Tiles & contributors/);
    await sharePage.screenshot({ path: path.join(ARTIFACTS, 'share-tiles.png') });

    // The dashboard asked only its own origin and the tile server.
    const allowed = new Set([new URL(ta.url).origin, tiles.origin]);
    const away = [...requests, ...phone.requests].filter((u) => !u.startsWith('data:') && !allowed.has(new URL(u).origin));
    assert.deepEqual(away, []);
    assert.deepEqual([...errors, ...phone.errors], []);
  });
}
