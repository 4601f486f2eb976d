// The assets page (#/assets, the asset overview) in a real Chromium: the table shows every asset
// with its temperature against the range, the one out of range marked and its open alarm counted;
// a click on a header sorts (again: the other way), the search and the attention filter narrow it,
// "Download CSV" saves the same rows, a name leads to the asset's page, and at 390 px the page
// does not scroll sideways. Screenshots go to test-artifacts/ (outside git).
// @test-lanes postgres
// @test-browser
// (the page is the same on either database: it runs once)
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import type { Page } from 'playwright-core';
import { customer, frozenSpecification, ok, startApp } from './helpers.js';
import { ARTIFACTS, launchChromium, requireChromium } from './browser.js';

/** The names in the table, top to bottom, once they read `want` (the table follows the address). */
async function names(page: Page, want: string[]): Promise<string[]> {
  const cells = page.locator('table.overview tbody tr td:first-child a');
  try {
    await page.waitForFunction(
      (w) => [...document.querySelectorAll('table.overview tbody tr td:first-child a')].map((a) => a.textContent).join('|') === w,
      want.join('|'),
      { timeout: 10_000 },
    );
  } catch {
    /* the assertion below says what it read */
  }
  return cells.allTextContents();
}

test('assets page: the overview table, sorted by a click, searched, filtered, as CSV, each row a link', { timeout: 180_000 }, async (t) => {
  if (!requireChromium(t)) return;
  const ta = await startApp(t);
  const c = await customer(ta, 'Overview Shipping', { base: '/api/v1' });
  const warm = await c.asset('REEFER-A');
  const cold = await c.asset('REEFER-B');
  const box = await c.asset('BOX-C');
  ok(await c.call('PATCH', `/assets/${box}`, { disabled: true, tags: 'spare' }), 200);
  for (const id of [warm, cold]) await frozenSpecification(c.call, id);
  const reading = (assetId: string, supplyAirTemperature: number) =>
    c.call('POST', '/reefer-data', { assetId, whenCreated: new Date(Date.now() - 60_000).toISOString(), data: { supplyAirTemperature } });
  ok(await reading(warm, -2), 201);
  ok(await reading(cold, -18), 201);
  ok(await c.call('POST', '/locations', { assetId: cold, latitude: 51.9, longitude: 4.1 }), 201);

  const browser = await launchChromium();
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 }, acceptDownloads: true });
  const pageErrors: string[] = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  await page.goto(`${ta.url}/dashboard/#/assets`);
  await page.fill('#key', c.key);
  await page.click('button[type=submit]');
  await page.waitForSelector('table.overview');
  assert.deepEqual(await names(page, ['BOX-C', 'REEFER-A', 'REEFER-B']), ['BOX-C', 'REEFER-A', 'REEFER-B'], 'by name');

  // The reefer out of range: marked, its reading in the warning colour, its open alarm counted.
  const warmRow = page.locator(`table.overview tr[data-id="${warm}"]`);
  assert.equal(await warmRow.getAttribute('class'), 'attention');
  assert.equal((await warmRow.locator('td.warn').first().textContent())?.startsWith('-2 °C'), true);
  assert.equal(await warmRow.locator('td.alarms-open').textContent(), '1');
  assert.match((await warmRow.textContent()) ?? '', /out of range, open alarms/);
  const coldRow = page.locator(`table.overview tr[data-id="${cold}"]`);
  assert.equal(await coldRow.getAttribute('class'), '');
  assert.equal(await coldRow.locator('td.warn').count(), 0);
  assert.match((await coldRow.textContent()) ?? '', /-18 °C/);
  assert.match((await page.locator(`table.overview tr[data-id="${box}"]`).textContent()) ?? '', /disabled/);
  await page.screenshot({ path: path.join(ARTIFACTS, 'assets-overview.png'), fullPage: true });

  // A click on a header sorts by it (the warmest first), a second the other way; the address keeps it.
  await page.click('table.overview th[data-sort="temperature"] button');
  assert.deepEqual(await names(page, ['REEFER-A', 'REEFER-B', 'BOX-C']), ['REEFER-A', 'REEFER-B', 'BOX-C'], 'warmest first');
  assert.equal(await page.getAttribute('th[data-sort="temperature"]', 'aria-sort'), 'descending');
  await page.click('table.overview th[data-sort="temperature"] button');
  assert.deepEqual(await names(page, ['REEFER-B', 'REEFER-A', 'BOX-C']), ['REEFER-B', 'REEFER-A', 'BOX-C'], 'coldest first, none last');
  assert.equal(await page.getAttribute('th[data-sort="temperature"]', 'aria-sort'), 'ascending');
  assert.match(await page.evaluate(() => location.hash), /^#\/assets\?.*sort=temperature.*order=asc/);

  // The search (name or tag) and the filters.
  await page.fill('input[name=q]', 'spare');
  assert.deepEqual(await names(page, ['BOX-C']), ['BOX-C'], 'a tag');
  await page.fill('input[name=q]', 'reefer-b');
  assert.deepEqual(await names(page, ['REEFER-B']), ['REEFER-B'], 'a name, any case');
  await page.fill('input[name=q]', '');
  await page.check('input[name=attention]');
  assert.deepEqual(await names(page, ['REEFER-A']), ['REEFER-A'], 'needs attention');
  await page.uncheck('input[name=attention]');
  await page.selectOption('select[name=disabled]', 'false');
  assert.deepEqual(await names(page, ['REEFER-B', 'REEFER-A']), ['REEFER-B', 'REEFER-A'], 'enabled only');

  // "Download CSV": the rows shown.
  const [d] = await Promise.all([page.waitForEvent('download'), page.click('.assets-overview button.download')]);
  assert.equal(d.suggestedFilename(), 'assets-overview.csv');
  const csv = fs
    .readFileSync(await d.path(), 'utf8')
    .trim()
    .split('\n');
  assert.match(csv[0]!, /^id,name,ownerId,tags,disabled,lastSeen,position\.latitude/);
  assert.deepEqual(
    csv.slice(1).map((l) => l.split(',')[1]),
    ['REEFER-B', 'REEFER-A'],
  );

  // A name leads to the asset's page.
  await page.click('table.overview a:text("REEFER-A")');
  await page.waitForSelector('.asset-page h2:text("REEFER-A")');
  assert.equal(await page.evaluate(() => location.hash.split('?')[0]), `#/assets/${warm}`);

  // A phone, 390 px wide: the table scrolls in its own box, the page never sideways.
  const phone = await browser.newPage({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
  phone.on('pageerror', (e) => pageErrors.push(e.message));
  await phone.goto(`${ta.url}/dashboard/#/assets`);
  await phone.fill('#key', c.key);
  await phone.click('button[type=submit]');
  await phone.waitForSelector('table.overview tbody tr');
  await phone.waitForTimeout(300); // the layout settles after the data arrives
  const wide = await phone.evaluate(`[...document.querySelectorAll('body *')]
    .filter((e) => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
    .slice(0, 5).map((e) => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right)).join(', ')`);
  const sideways = (await phone.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth')) as number;
  await phone.screenshot({ path: path.join(ARTIFACTS, 'phone-assets.png'), fullPage: true });
  assert.equal(sideways, 0, `#/assets at 390 px scrolls sideways: ${wide}`);
  assert.deepEqual(pageErrors, []);
});
