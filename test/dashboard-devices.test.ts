// The devices page in a real Chromium: a customer registers an OsmAnd device with the form and is
// shown its generated id and the server URL for the Traccar Client; the device's positions and a
// bad message show as last seen and last error; Disable refuses its next message. A screenshot
// goes to test-artifacts/ (outside git).
// @test-lanes postgres
// @test-browser
// (the page is the same on either database: it runs once)
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { ok, ownerWithKey, startApp, waitFor } from './helpers.js';
import { ARTIFACTS, launchChromium, requireChromium } from './browser.js';

test('devices page: register an OsmAnd device, see it last seen and its last error, disable it', { timeout: 180_000 }, async (t) => {
  if (!requireChromium(t)) return;
  const ta = await startApp(t);
  const fleet = await ownerWithKey(ta, 'Device Shipping');
  ok(await ta.call('POST', '/api/v1/assets', { token: fleet.key, body: { name: 'TRUCK-0007' } }), 201);
  const browser = await launchChromium();
  t.after(() => browser.close());
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const pageErrors: string[] = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  await page.goto(`${ta.url}/dashboard/#/devices`);
  await page.fill('#key', fleet.key);
  await page.click('button[type=submit]');
  await page.waitForSelector('h2:text("Devices")');
  await page.waitForSelector('#d-asset >> option:text("TRUCK-0007")', { state: 'attached' });
  assert.equal(await page.locator('#d-unique').count(), 0, 'a customer cannot choose a uniqueId');
  await page.selectOption('#d-asset', { label: 'TRUCK-0007' });
  await page.selectOption('#d-protocol', 'osmand');
  await page.click('text=Register device');
  const uniqueId = (await page.locator('[data-unique]').textContent())!.trim();
  assert.match(uniqueId, /^[a-z2-9]{24}$/);
  await page.waitForSelector(`text=${ta.url}/ingest/osmand`);

  // The device sends a position, then a bad one.
  ok(await ta.call('GET', `/ingest/osmand?id=${uniqueId}&lat=51.9&lon=4.4&speed=10`), 200);
  assert.equal((await ta.call('GET', `/ingest/osmand?id=${uniqueId}&lat=north&lon=4.4`)).status, 400);
  await page.click('text=Done');
  await page.click('text=Refresh');
  const row = page.locator('table.devices tbody tr').first();
  let seen = '';
  await waitFor(
    () => `last seen and last error on the page (the row: ${seen})`,
    async () => {
      const text = (await row.textContent()) ?? '';
      seen = text;
      if (!/bad message: lat must be a number/.test(text)) {
        await page.click('text=Refresh');
        return undefined;
      }
      return text;
    },
  );
  const cells = await row.locator('td').allTextContents();
  assert.equal(cells[0], 'TRUCK-0007');
  assert.notEqual(cells[4], '–', 'last seen');
  await page.screenshot({ path: path.join(ARTIFACTS, 'devices.png'), fullPage: true });

  // Disable: its next message is refused.
  await row.locator('button:text("Disable")').click();
  await page.waitForSelector('table.devices >> text=disabled');
  assert.equal((await ta.call('GET', `/ingest/osmand?id=${uniqueId}&lat=51.9&lon=4.4`)).status, 404);
  assert.deepEqual(pageErrors, []);
});
