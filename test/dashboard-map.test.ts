// @test-lanes postgres
// @test-browser
// (the page is the same on either database: it runs once)
// The fleet map in a real Chromium (playwright-core with Debian's chromium): 30 assets, a dozen of
// them a few hundred metres apart in the port of Rotterdam, the rest over the world, a pair on
// either side of the antimeridian. The world view clusters them; the wheel zooms into Rotterdam
// down to the port (the land switches to 50m, then 10m), where the cluster comes apart; a drag
// pans by what it moved; the buttons and keys zoom; "Fit fleet" fits every asset; a click on a
// cluster zooms into it; the track across the antimeridian is never drawn across the map; two
// fingers pinch. Zones (a circle of 250 m, a polygon) show in the port's screenshot. The land files: gzipped, cacheable, revalidated. Screenshots at world, mid and
// port zoom go to test-artifacts/ (outside git), and the redraw time at port zoom is reported.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import type { Page } from 'playwright-core';
import { DASHBOARD_CSP } from '../src/dashboard/dashboard.js';
import { ok, ownerWithKey, startApp, TEST_DB, type TestApp, waitFor } from './helpers.js';
import { ARTIFACTS, launchChromium, requireChromium } from './browser.js';

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

/** The map on a page: its view as the canvas reports it, and where a place is drawn in page pixels. */
function mapOf(page: Page) {
  const canvas = page.locator('canvas.map');
  const attr = async (name: string) => canvas.getAttribute(name);
  // All at once: between two reads, a frame may come.
  const view = async () => {
    const v = (await page.evaluate(`(c => {
      const r = c.getBoundingClientRect();
      return { center: c.dataset.center, zoom: c.dataset.zoom, clusters: c.dataset.clusters, land: c.dataset.land,
        still: !c.hasAttribute('data-animating'), w: c.clientWidth, h: c.clientHeight, left: r.left + c.clientLeft, top: r.top + c.clientTop };
    })(document.querySelector('canvas.map'))`)) as Record<string, string | undefined> & {
      still: boolean;
      w: number;
      h: number;
      left: number;
      top: number;
    };
    const [lat, lon] = (v.center ?? 'NaN,NaN').split(',').map(Number) as [number, number];
    return {
      lat,
      lon,
      zoom: Number(v.zoom),
      clusters: Number(v.clusters),
      land: v.land,
      still: v.still,
      w: v.w,
      h: v.h,
      left: v.left,
      top: v.top,
    };
  };
  type View = Awaited<ReturnType<typeof view>>;
  let last = '';
  /** Waits until the map, at rest, is as `cond` says. */
  const until = (what: string, cond: (v: View) => boolean) =>
    waitFor(
      () => `${what} (last: ${last})`,
      async () => {
        const v = await view();
        last = JSON.stringify(v);
        return v.still && cond(v) ? v : undefined;
      },
      30_000,
    );
  const at = (v: View, p: { latitude: number; longitude: number }) => {
    const scale = v.w * v.zoom;
    const cx = mercX(v.lon);
    let x = mercX(p.longitude);
    x -= Math.round(x - cx);
    return { x: v.left + (x - cx) * scale + v.w / 2, y: v.top + (mercY(p.latitude) - mercY(v.lat)) * scale + v.h / 2 };
  };
  const inside = (v: View, p: Place) => {
    const s = at(v, p);
    return s.x >= v.left && s.x <= v.left + v.w && s.y >= v.top && s.y <= v.top + v.h;
  };
  /** Drags by `steps` moves of `dx` pixels from the centre, each frame's drawing time (data-measure: painted too). */
  const dragTimes = async (steps: number, dx: number) => {
    const v = await view();
    await canvas.evaluate('c => c.setAttribute("data-measure", "")');
    const times: number[] = [];
    let [x, y] = [v.left + v.w / 2, v.top + v.h / 2];
    await page.mouse.move(x, y);
    await page.mouse.down();
    for (let i = 0; i < steps; i++) {
      const before = await attr('data-center');
      x += dx;
      await page.mouse.move(x, y);
      await waitFor(
        () => 'a frame after the move',
        async () => (await attr('data-center')) !== before,
      );
      times.push(Number(await attr('data-draw-ms')));
    }
    await page.mouse.up();
    await canvas.evaluate('c => c.removeAttribute("data-measure")');
    return times.sort((a, b) => a - b);
  };
  return { canvas, view, until, at, inside, dragTimes };
}

if (TEST_DB === 'postgres') {
  test('the fleet map: clusters, wheel zoom to a port with 10m land, pan, fit, cluster zoom, the antimeridian, pinch', {
    timeout: 300_000,
  }, async (t) => {
    if (!requireChromium(t)) return;
    const ta = await startApp(t, { RATE_LIMIT_MAX: '100000', RATE_LIMIT_CONCURRENT: '1000' });
    const shipper = await fleet(ta, 'map-shipper', [...ROTTERDAM, ...PORTS, ...DATELINE], DISABLED);
    const single = await fleet(ta, 'map-single', [{ name: 'ONLY', latitude: 51.95, longitude: 4.14 }]);
    const visible = [...ROTTERDAM, ...PORTS, ...DATELINE];

    // The land files: from node_modules, gzipped when asked, cacheable, revalidated by their ETag.
    for (const level of ['110m', '50m', '10m']) {
      const r = await fetch(`${ta.url}/dashboard/land-${level}.json`, { headers: { 'accept-encoding': 'gzip' } });
      assert.equal(r.status, 200, level);
      assert.equal(r.headers.get('content-encoding'), 'gzip', level);
      assert.equal(r.headers.get('content-security-policy'), DASHBOARD_CSP);
      assert.match(r.headers.get('cache-control')!, /public, max-age=\d+, immutable/);
      const topo = (await r.json()) as { type: string; objects: { land: unknown } };
      assert.equal(topo.type, 'Topology');
      assert.ok(topo.objects.land, level);
      const again = await fetch(`${ta.url}/dashboard/land-${level}.json`, { headers: { 'if-none-match': r.headers.get('etag')! } });
      assert.equal(again.status, 304, `${level} revalidated`);
    }
    const plain = await fetch(`${ta.url}/dashboard/land-10m.json`, { headers: { 'accept-encoding': 'identity' } });
    assert.equal(plain.headers.get('content-encoding'), null);
    assert.equal((await plain.arrayBuffer()).byteLength, fs.statSync('node_modules/world-atlas/land-10m.json').size);

    const browser = await launchChromium();
    const pageErrors: string[] = [];
    const signIn = async (key: string) => {
      const page = await browser.newPage({ viewport: { width: 1400, height: 900 }, hasTouch: true });
      page.on('pageerror', (e) => pageErrors.push(e.message));
      page.on('console', (m) => m.type() === 'error' && !m.text().startsWith('Failed to load resource') && pageErrors.push(m.text()));
      await page.goto(`${ta.url}/dashboard/`);
      await page.fill('#key', key);
      await page.click('button[type=submit]');
      await page.waitForSelector('header nav');
      await page.click('text=Fleet');
      return page;
    };
    const page = await signIn(shipper.key);
    const map = mapOf(page);
    const { canvas, until, at, inside } = map;
    const report: string[] = [];

    // The world: every asset but the disabled one, the dozen in Rotterdam as one cluster.
    await page.waitForSelector(`canvas.map[data-assets="${visible.length}"]`);
    let v = await until('the world with its land', (v) => v.land === '110m' && v.zoom === 1 && v.clusters > 0);
    assert.ok(
      visible.every((p) => inside(v, p) || p.longitude === 179.9 || p.longitude === -179.9),
      'the world view shows the fleet',
    );
    await page.screenshot({ path: path.join(ARTIFACTS, 'map-world.png') });
    const world = await map.dragTimes(10, 3);
    report.push(`world (110m): median ${world[5]} ms, max ${world.at(-1)} ms`);
    await page.keyboard.press('0'); // the canvas has the focus since the drag: back to the world
    v = await until('the world again', (v) => v.zoom === 1 && Math.abs(v.lon) < 1e-4);

    // The wheel zooms about the cursor into Rotterdam, a doubling a notch: 50m, then 10m land.
    for (let k = 1; k <= 14; k++) {
      const p = at(await map.view(), RTM);
      await page.mouse.move(p.x, p.y);
      await page.mouse.wheel(0, -100);
      v = await until(`zoom ${2 ** k}`, (v) => v.zoom === 2 ** k);
      if (k === 2) v = await until('50m land at zoom 4', (v) => v.land === '50m');
      if (k === 3) {
        v = await until('10m land from zoom 6', (v) => v.land === '10m');
        const mid = await map.dragTimes(10, 3); // the most land in view the 10m file draws
        report.push(`zoom 8 (10m): median ${mid[5]} ms, max ${mid.at(-1)} ms`);
      }
      if (k === 7) await page.screenshot({ path: path.join(ARTIFACTS, 'map-mid.png') });
      if (k === 10) await page.screenshot({ path: path.join(ARTIFACTS, 'map-port-coast.png') });
      if (k >= 8) {
        // Zoomed about the cursor: Rotterdam stays where the wheel turned.
        const q = at(v, RTM);
        assert.ok(Math.hypot(q.x - p.x, q.y - p.y) < 2, `zoom ${2 ** k}: Rotterdam stays under the cursor`);
      }
    }
    // At the port: the dozen stand apart, each one drawn, and no closer zoom than 2^14.
    v = await until('the port, no cluster', (v) => v.zoom === 2 ** 14 && v.clusters === 0 && v.land === '10m');
    assert.ok(ROTTERDAM.every((p) => inside(v, p)));
    await page.mouse.wheel(0, -100);
    await until('still 2^14', (v) => v.zoom === 2 ** 14);
    await page.screenshot({ path: path.join(ARTIFACTS, 'map-port.png') });

    // A drag pans by what it moved (and selects nothing); meanwhile, each frame's drawing time with the 10m land.
    const before = await map.view();
    const port = await map.dragTimes(20, 10);
    v = await until('the drag done', () => true);
    const moved = ((v.lon - before.lon) / 360) * v.w * v.zoom;
    assert.ok(Math.abs(moved + 200) < 1, `a drag of 200 px moved the centre by ${moved} px`);
    assert.equal(v.lat, before.lat);
    assert.equal(await page.locator('text=/positions in the last 24 h/').count(), 0, 'a drag is no click');
    report.push(`port (10m): median ${port[10]} ms, max ${port.at(-1)} ms over ${port.length} frames`);

    // The buttons and keys zoom about the centre.
    await page.click('button[aria-label="Zoom out"]');
    await until('zoomed out', (v) => v.zoom === 2 ** 13);
    await page.keyboard.press('-');
    await until('zoomed out again', (v) => v.zoom === 2 ** 12);
    await page.click('button[aria-label="Zoom in"]');
    await until('zoomed in', (v) => v.zoom === 2 ** 13);

    // Two fingers apart: a pinch zooms in about them.
    const cdp = await page.context().newCDPSession(page);
    const c = { x: v.left + v.w / 2, y: v.top + v.h / 2 };
    const fingers = (d: number) => [
      { x: c.x - d, y: c.y, id: 1 },
      { x: c.x + d, y: c.y, id: 2 },
    ];
    await cdp.send('Input.dispatchTouchEvent', { type: 'touchStart', touchPoints: fingers(50) });
    for (let d = 60; d <= 100; d += 10) await cdp.send('Input.dispatchTouchEvent', { type: 'touchMove', touchPoints: fingers(d) });
    await cdp.send('Input.dispatchTouchEvent', { type: 'touchEnd', touchPoints: [] });
    v = await until('pinched in', (v) => Math.abs(v.zoom / 2 ** 14 - 1) < 0.05);

    // "Fit fleet": every asset on the map in view, the fleet over the world needs about the whole of it.
    await page.click('text=Fit fleet');
    v = await until('the fleet fitted', (v) => v.zoom < 2);
    assert.ok(
      visible.every((p) => inside(v, p)),
      `every asset in view: ${visible.filter((p) => !inside(v, p)).map((p) => p.name)}`,
    );
    assert.ok(v.clusters >= 2, 'Rotterdam, and the pair at the antimeridian side by side');

    // A click on the Rotterdam cluster zooms into it (at first, Hamburg's circle touched it: the
    // two together), until its assets stand apart.
    let p = at(v, RTM);
    const clicks: number[] = [];
    while (v.clusters > 0) {
      assert.ok(clicks.length < 3, `zoomed ${clicks} and still ${v.clusters} clusters`);
      const zoom = v.zoom;
      await page.mouse.click(p.x, p.y);
      v = await until('into the cluster', (v) => v.zoom > zoom * 2);
      clicks.push(v.zoom);
      p = at(v, RTM);
    }
    assert.ok(v.zoom >= 2 ** 12, `${clicks}`);
    assert.ok(Math.abs(v.lat - RTM.latitude) < 0.002 && Math.abs(v.lon - RTM.longitude) < 0.002, `centred on Rotterdam: ${v.lat},${v.lon}`);
    assert.ok(ROTTERDAM.every((q) => inside(v, q)));
    assert.equal(v.clusters, 0);

    // The pair across the antimeridian: one cluster, opened with a click; then FIJI-E's track, which crosses it.
    await page.click('text=Fit fleet');
    v = await until('the fleet fitted again', (v) => v.zoom < 2);
    p = at(v, DATELINE[0]!);
    await page.mouse.click(p.x, p.y);
    v = await until('the pair apart', (v) => v.zoom > 100 && v.clusters === 0);
    assert.ok(
      DATELINE.every((q) => inside(v, q)),
      `the pair in view: ${JSON.stringify(v)} ${JSON.stringify(DATELINE.map((q) => at(v, q)))}`,
    );
    p = at(v, DATELINE[0]!);
    await page.mouse.click(p.x, p.y);
    await page.waitForSelector('text=FIJI-E: 3 positions in the last 24 h');
    for (const _ of [1, 2, 3]) await page.keyboard.press('-');
    await until('out a little', (v) => v.zoom < 200);
    await page.screenshot({ path: path.join(ARTIFACTS, 'map-dateline.png') });
    // Orange (the track) on the canvas here, but nowhere in the middle of the world view, which a
    // line across the whole map would cross.
    const orange = (x0: number, x1: number) =>
      page.evaluate(`(() => {
        const c = document.querySelector('canvas.map');
        const d = c.getContext('2d').getImageData(Math.round(c.width * ${x0}), 0, Math.round(c.width * (${x1} - ${x0})), c.height).data;
        let n = 0;
        for (let i = 0; i < d.length; i += 4) if (d[i] > 200 && d[i + 1] > 55 && d[i + 1] < 90 && d[i + 2] < 40) n++;
        return n;
      })()`) as Promise<number>;
    assert.ok((await orange(0, 1)) > 50, 'the track is drawn');
    await canvas.focus();
    await page.keyboard.press('0');
    await until('the world', (v) => v.zoom === 1);
    assert.equal(await orange(0.05, 0.95), 0, 'no track across the world');

    // The disabled asset shows when asked for.
    await page.locator('label', { hasText: 'show disabled assets' }).locator('input').check();
    await page.waitForSelector(`canvas.map[data-assets="${visible.length + 1}"]`);

    // One asset: "Fit fleet" comes close, on it.
    const one = await signIn(single.key);
    const oneMap = mapOf(one);
    await one.waitForSelector('canvas.map[data-assets="1"]');
    await oneMap.until('the land', (v) => v.land === '110m');
    await one.click('text=Fit fleet');
    v = await oneMap.until('one asset fitted', (v) => v.zoom > 1000);
    assert.equal(v.zoom, 2 ** 12);
    assert.ok(Math.abs(v.lat - 51.95) < 1e-4 && Math.abs(v.lon - 4.14) < 1e-4, `on the asset: ${v.lat},${v.lon}`);
    // Its track: one position, in the singular.
    const only = at(v, { latitude: 51.95, longitude: 4.14 });
    await one.mouse.click(only.x, only.y);
    await one.waitForSelector('text=ONLY: 1 position in the last 24 h');

    t.diagnostic(`redraw: ${report.join('; ')}`);
    console.log(`redraw: ${report.join('; ')}`);
    assert.deepEqual(pageErrors, []);
  });
}
