// A share link in a real Chromium (playwright-core with Debian's chromium; API guide 8, "Share
// links", and 12): made on the asset's page of the dashboard (what to show, for how long), its URL
// copied from the page, opened with no sign-in: the asset's name, position, track and temperatures,
// nothing of another asset, no script run and nothing blocked by the page's policy; revoked on the
// dashboard, the page says so; a link made to expire in 2 s says so after. Screenshots go to
// test-artifacts/ (outside git).
// @test-lanes postgres
// @test-browser
// (the page is the same on either database: it runs once)
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { ok, ownerWithKey, startApp, waitFor } from './helpers.js';
import { ARTIFACTS, launchChromium, requireChromium } from './browser.js';

const MIN = 60_000;

test('a share link made on the dashboard shows its asset and nothing else, with no sign-in; revoked or expired, it says so', {
  timeout: 180_000,
}, async (t) => {
  if (!requireChromium(t)) return;
  const ta = await startApp(t, { RATE_LIMIT_MAX: '100000', RATE_LIMIT_CONCURRENT: '1000' });
  const o = await ownerWithKey(ta, 'share-page-shipper');
  const call = (method: string, p: string, body?: unknown) => ta.call(method, `/api/v1${p}`, { token: o.key, body });
  const reefer = ok(await call('POST', '/assets', { name: 'MSKU1234565' }), 201).id as string;
  const other = ok(await call('POST', '/assets', { name: 'OTHER-ASSET-77' }), 201).id as string;
  const now = Date.now();
  // Rotterdam to the Maasvlakte over the last two hours, and reefer data every five minutes.
  ok(
    await call(
      'POST',
      '/locations',
      Array.from({ length: 120 }, (_, i) => ({
        assetId: reefer,
        latitude: 51.905 + (i / 119) * (51.955 - 51.905) + Math.sin(i / 9) * 0.004,
        longitude: 4.48 - (i / 119) * (4.48 - 4.02),
        speed: 38,
        whenCreated: new Date(now - (120 - i) * MIN).toISOString(),
      })),
    ),
    201,
  );
  ok(
    await call(
      'POST',
      '/reefer-data',
      Array.from({ length: 24 }, (_, i) => ({
        assetId: reefer,
        whenCreated: new Date(now - (120 - i * 5) * MIN).toISOString(),
        data: { supplyAirTemperature: -18.2 + Math.sin(i / 3) * 0.6, returnAirTemperature: -16.9 + Math.cos(i / 4) * 0.5 },
      })),
    ),
    201,
  );
  ok(
    await call('POST', '/locations', {
      assetId: other,
      latitude: 1.264,
      longitude: 103.84,
      whenCreated: new Date(now - MIN).toISOString(),
    }),
    201,
  );

  const browser = await launchChromium();
  const problems: string[] = [];
  const dash = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  dash.on('pageerror', (e) => problems.push(e.message));
  await dash.goto(`${ta.url}/dashboard/`);
  await dash.fill('#key', o.key);
  await dash.click('button[type=submit]');
  await dash.waitForSelector('header nav');
  await dash.evaluate(`location.hash = '#/assets/${reefer}'`);
  await dash.waitForSelector('.asset-page h2:text("MSKU1234565")');
  // Make the link: position, track and temperature, for a day.
  const panel = dash.locator('section.share-links');
  await panel.locator('input[name="share-temperature"]').check();
  await panel.locator('select[name="share-days"]').selectOption('1');
  await panel.locator('input[name="share-note"]').fill('for the consignee');
  await panel.locator('button:text("Share…")').click();
  const url = (await panel.locator('code.share-url').textContent())!.trim();
  assert.match(url, new RegExp(`^${ta.url}/share/[A-Za-z0-9_-]{43}$`));
  await panel.locator('tr[data-status="active"]').waitFor();
  await panel.screenshot({ path: path.join(ARTIFACTS, 'share-panel.png') });

  // The page, in a context of its own (no sign-in, nothing shared with the dashboard's).
  const viewer = await browser.newContext({ viewport: { width: 1000, height: 1200 } });
  const page = await viewer.newPage();
  const blocked: string[] = [];
  page.on('console', (m) => /Content.Security.Policy|Refused/i.test(m.text()) && blocked.push(m.text()));
  page.on('pageerror', (e) => problems.push(e.message));
  const answer = await page.goto(url);
  assert.equal(answer?.status(), 200);
  await page.waitForSelector('h1:text("MSKU1234565")');
  const text = (await page.locator('main').textContent())!;
  assert.ok(!text.includes('OTHER-ASSET-77') && !text.includes('103.84'), 'nothing of the other asset');
  assert.match(text, /51\.9\d{4}, 4\.0[12]\d{3}/, 'the latest position as coordinates');
  assert.equal(await page.locator('svg.map polyline.track').count(), 1, 'the track on the map');
  assert.equal(await page.locator('svg.chart path.series').count(), 2, 'supply and return air');
  assert.equal(await page.locator('script').count(), 0, 'no script');
  // The stylesheet applied (it is the page's one allowed resource).
  const font = await page.evaluate(`getComputedStyle(document.querySelector('main')).maxWidth`);
  assert.equal(font, '780px', 'share.css applied');
  await page.screenshot({ path: path.join(ARTIFACTS, 'share-page.png'), fullPage: true });
  const narrow = await viewer.newPage();
  await narrow.setViewportSize({ width: 390, height: 844 });
  await narrow.goto(url);
  await narrow.waitForSelector('h1:text("MSKU1234565")');
  const scroll = (await narrow.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth')) as number;
  assert.ok(scroll <= 0, `no horizontal scroll at 390 px (${scroll})`);
  await narrow.screenshot({ path: path.join(ARTIFACTS, 'share-page-390.png'), fullPage: true });
  const used = ok(await call('GET', '/share-links'), 200)[0];
  assert.equal(used.uses, 2, 'two views counted');

  // Revoked on the dashboard: the page says so.
  await panel.locator('button:text("Revoke…")').click();
  await panel.locator('button.confirm-revoke').click();
  await panel.locator('tr[data-status="revoked"]').waitFor();
  const gone = await page.reload();
  assert.equal(gone?.status(), 410);
  await page.waitForSelector('text=This link no longer works');
  assert.match((await page.locator('main').textContent())!, /revoked/);
  assert.ok(!(await page.content()).includes('MSKU1234565'), 'the revoked page names nothing');
  await page.screenshot({ path: path.join(ARTIFACTS, 'share-page-revoked.png') });

  // A link that expires in 2 s: the page works, then says it expired.
  const brief = ok(
    await call('POST', '/share-links', { assetIds: [reefer], show: ['position'], expiresAt: new Date(Date.now() + 2000).toISOString() }),
    201,
  );
  assert.equal((await page.goto(brief.url))?.status(), 200);
  await waitFor(
    () => 'the page to say the link expired',
    async () => {
      await new Promise((r) => setTimeout(r, 250));
      return (await page.reload())?.status() === 410;
    },
    20_000,
  );
  await page.waitForSelector('text=/expired/');
  assert.deepEqual(blocked, [], 'nothing refused by the Content-Security-Policy');
  assert.deepEqual(problems, []);
});
