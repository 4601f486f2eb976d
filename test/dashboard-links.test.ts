// Deep links in a real Chromium (API guide 12, "Links"): every page of the dashboard has its
// address, its state that a bookmark should keep included (an asset's range, the inbox's and the
// audit log's filters, an integration's attempt filters). After an account's sign-in, a reload of
// each page signs in again with no click (one `prompt=none` request to the issuer, whose sign-in
// session answers) and shows the same page; back and forward move between pages, across a reload
// too; a bookmark opened before signing in is the page shown after it. When the issuer's session
// has ended, the silent try comes back with login_required: the card, once, no second try, and
// the click still lands on the page. A sign-out then a reload shows the card with no silent try.
// With a pasted API key a reload asks for the key again (nothing is stored) and shows the same
// page after it. Runs on PostgreSQL (the page is the same on both databases).
// @test-browser
// @test-lanes postgres
import assert from 'node:assert/strict';
import path from 'node:path';
import { type TestContext, test } from 'node:test';
import type { Page } from 'playwright-core';
import { OPERATOR, ok, ownerWithKey, startApp } from './helpers.js';
import { ARTIFACTS, launchChromium, requireChromium } from './browser.js';

/** The one thing the dashboard keeps in localStorage (dashboard/session.ts): never a token. */
const MARKER = 'dashboard.signIn';

/** The service with a customer's integration and asset, the pages, and a browser. */
async function world(t: TestContext) {
  if (!requireChromium(t)) return null;
  const ta = await startApp(t, {
    PUSH_ALLOW_HTTP: 'true',
    PUSH_ALLOWED_NETWORKS: '127.0.0.0/8',
    RATE_LIMIT_MAX: '100000',
    RATE_LIMIT_CONCURRENT: '1000',
  });
  const customer = await ownerWithKey(ta, 'links-customer');
  const call = (method: string, p: string, body?: unknown, token = ta.adminToken) =>
    ta.call(method, `/api/v1${p}`, { token, ...(body === undefined ? {} : { body }) });
  const integration = ok(
    await call('POST', '/integrations', {
      name: 'links-hook',
      channel: 'webhook',
      enabled: false,
      ownerIds: [customer.ownerId],
      objectTypes: ['location'],
      destination: 'http://127.0.0.1:9/hook',
    }),
    201,
  );
  const asset = ok(await call('POST', '/assets', { name: 'LINKS-0001' }, customer.key), 201);
  ok(await call('POST', '/locations', [{ assetId: asset.id, latitude: 51.9, longitude: 4.1 }], customer.key), 201);

  /** Each page, with state of its own where it has some, and what shows that it is that page. */
  const pages: { hash: string; nav: string; shown: (p: Page) => Promise<void> }[] = [
    { hash: '#/integrations', nav: 'Integrations', shown: (p) => p.locator('h2:text-is("Integrations")').waitFor() },
    {
      hash: `#/integrations/${integration.id}?status=failed`,
      nav: 'Integrations',
      shown: async (p) => {
        await p.locator('h2:text-is("links-hook")').waitFor();
        assert.equal(await p.locator('.filters select').first().inputValue(), 'failed', 'the attempts filter');
      },
    },
    { hash: '#/fleet', nav: 'Fleet', shown: (p) => p.locator('h2:text-is("Fleet")').waitFor() },
    { hash: '#/assets', nav: 'Assets', shown: (p) => p.locator('main, section').getByText('LINKS-0001').first().waitFor() },
    {
      hash: `#/assets/${asset.id}?range=7d`,
      nav: 'Assets',
      shown: async (p) => {
        await p.locator('h2:text-is("LINKS-0001")').waitFor();
        await p.locator('fieldset.range-bar button[aria-pressed=true]:text-is("7 days")').waitFor();
      },
    },
    { hash: '#/devices', nav: 'Devices', shown: (p) => p.locator('h2:text-is("Devices")').waitFor() },
    {
      hash: '#/alarms?kind=Power+off',
      nav: 'Alarms',
      shown: async (p) => {
        await p.locator('h2:text-is("Open alerts")').waitFor();
        assert.equal(await p.locator('section.inbox select[name=kind]').inputValue(), 'Power off', 'the kind filter');
      },
    },
    {
      hash: '#/audit?action=create',
      nav: 'Audit log',
      shown: async (p) => {
        await p.locator('h2:text-is("Audit log")').waitFor();
        assert.equal(await p.locator('.filters select').first().inputValue(), 'create', 'the action filter');
      },
    },
  ];
  const byHash = (h: string) => pages.find((p) => p.hash === h)!;
  /** The page is shown, signed in, at its address, its nav entry marked. */
  const at = async (page: Page, p: { hash: string; nav: string; shown: (p: Page) => Promise<void> }) => {
    await page.locator('header nav a.active').waitFor();
    await p.shown(page);
    assert.equal(await page.evaluate('location.hash'), p.hash, 'the address');
    assert.match(await page.locator('header nav a.active').innerText(), new RegExp(`^${p.nav}`));
  };
  const go = (page: Page, hash: string) => page.evaluate(`location.hash = ${JSON.stringify(hash)}`);
  const storage = (page: Page) =>
    page.evaluate('[Object.entries(localStorage), Object.entries(sessionStorage)]') as Promise<[string, string][][]>;

  const browser = await launchChromium();
  const pageErrors: string[] = [];
  const newPage = async () => {
    // A context of its own (as a browser profile): its storage, its cookies, its tabs.
    const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    const page = await context.newPage();
    page.on('pageerror', (e) => pageErrors.push(e.message));
    // What the page asks the issuer's authorization endpoint: the prompt of each request.
    const asks: string[] = [];
    page.on('request', (r) => {
      const u = new URL(r.url());
      if (u.pathname.endsWith('/protocol/openid-connect/auth') && r.method() === 'GET') asks.push(u.searchParams.get('prompt') ?? '');
    });
    return { page, asks };
  };
  return { ta, customer, asset, pages, byHash, at, go, storage, newPage, pageErrors };
}

test('deep links after an account sign-in: a reload of each page, a bookmark, back and forward return to it with no click; an ended session, a sign-out', {
  timeout: 300_000,
}, async (t) => {
  const w = await world(t);
  if (!w) return;
  const { ta, asset, pages, byHash, at, go, storage, newPage, pageErrors } = w;
  const { page, asks } = await newPage();
  const inbox = byHash('#/alarms?kind=Power+off');
  await page.goto(`${ta.url}/dashboard/${inbox.hash}`);
  await page.click('text=Sign in with your account');
  await page.fill('input[name=username]', OPERATOR.username);
  await page.fill('input[name=password]', OPERATOR.password);
  await page.click('button[type=submit]');
  await at(page, inbox);
  assert.deepEqual(asks, [''], 'one sign-in, with the form');
  // Only the marker is kept: no token in browser storage, nothing waits in the session's.
  assert.deepEqual(await storage(page), [[[MARKER, 'account']], []]);

  // Each page, reloaded: signed in again with no click (prompt=none, answered by the sign-in
  // session), the same page at the same address.
  for (const p of pages) {
    await go(page, p.hash);
    await at(page, p);
    const before = asks.length;
    await page.reload();
    await at(page, p);
    assert.deepEqual(asks.slice(before), ['none'], `${p.hash}: one silent request`);
    assert.equal(await page.locator('input[name=password]').count(), 0);
    assert.deepEqual(await storage(page), [[[MARKER, 'account']], []], `${p.hash}: no token stored`);
  }
  await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-links-reloaded.png') });

  // Back and forward move between pages: within the page, and across a reload (a fresh page
  // that signs in silently again).
  await page.click('header nav >> text=Fleet');
  await at(page, byHash('#/fleet'));
  await page.click('header nav >> text=Devices');
  await at(page, byHash('#/devices'));
  await page.goBack();
  await at(page, byHash('#/fleet'));
  await page.goForward();
  await at(page, byHash('#/devices'));
  await page.reload();
  await at(page, byHash('#/devices'));
  await page.goBack();
  await at(page, byHash('#/fleet'));
  await page.goForward();
  await at(page, byHash('#/devices'));
  // An asset's page is bookmarked in a new tab of the same browser: signed in without a click.
  const tab = await page.context().newPage();
  tab.on('pageerror', (e) => pageErrors.push(e.message));
  const assetPage = byHash(`#/assets/${asset.id}?range=7d`);
  await tab.goto(`${ta.url}/dashboard/${assetPage.hash}`);
  await at(tab, assetPage);
  assert.equal(await tab.locator('input[name=password]').count(), 0);
  // A range chosen is in the address: 24 h replaces 7 days there, and a reload keeps it.
  await tab.click('fieldset.range-bar button:text-is("Last 24 h")');
  await tab.waitForFunction(`location.hash === '#/assets/${asset.id}?range=24h'`);
  await tab.reload();
  await tab.locator('fieldset.range-bar button[aria-pressed=true]:text-is("Last 24 h")').waitFor();
  await tab.close();

  // The issuer's session ends (its cookie gone): the silent try comes back with login_required;
  // the card says so, once, with no second try, and the click lands on the same page.
  await go(page, assetPage.hash);
  await at(page, assetPage);
  await page.context().clearCookies();
  const before = asks.length;
  await page.reload();
  await page.locator('text=Your sign-in has ended: sign in again.').waitFor();
  assert.deepEqual(asks.slice(before), ['none'], 'one silent try');
  assert.equal(await page.evaluate('location.search'), '', 'the error is gone from the address');
  assert.equal(await page.evaluate('location.hash'), assetPage.hash);
  assert.deepEqual(await storage(page), [[], []], 'the marker forgotten: the next load makes no silent try');
  await page.click('text=Sign in with your account');
  await page.fill('input[name=username]', OPERATOR.username);
  await page.fill('input[name=password]', OPERATOR.password);
  await page.click('button[type=submit]');
  await at(page, assetPage);
  assert.deepEqual(asks.slice(before), ['none', ''], 'then the form, asked once');

  // A sign-out forgets the marker: a reload shows the card and asks the issuer nothing.
  await page.click('header >> text=Sign out');
  await page.locator('text=Sign in with your account').waitFor();
  assert.deepEqual(await storage(page), [[], []]);
  const out = asks.length;
  await page.reload();
  // The card is drawn only once the page has decided on no silent try.
  await page.locator('text=Sign in with your account').waitFor();
  await page.locator('#key').waitFor();
  assert.equal(asks.length, out, 'no silent try after a sign-out');
  assert.equal(await page.evaluate('location.hash'), assetPage.hash);
  await page.close();
  assert.deepEqual(pageErrors, []);
});

test('deep links with a pasted API key: never stored; a reload of each page asks for the key again, then shows the page', {
  timeout: 300_000,
}, async (t) => {
  const w = await world(t);
  if (!w) return;
  const { ta, customer, asset, pages, byHash, at, go, storage, newPage, pageErrors } = w;
  const { page, asks } = await newPage();
  const assetPage = byHash(`#/assets/${asset.id}?range=7d`);
  await page.goto(`${ta.url}/dashboard/${assetPage.hash}`);
  const signIn = async () => {
    await page.fill('#key', customer.key);
    await page.click('button[type=submit]');
  };
  await signIn();
  await at(page, assetPage);
  for (const p of pages) {
    await go(page, p.hash);
    await at(page, p);
    assert.deepEqual(await storage(page), [[], []], `${p.hash}: the key is in memory only`);
    await page.reload();
    await page.locator('#key').waitFor();
    assert.equal(await page.evaluate('location.hash'), p.hash, `${p.hash}: the card keeps the address`);
    await signIn();
    await at(page, p);
  }
  await page.click('header nav >> text=Fleet');
  await at(page, byHash('#/fleet'));
  await page.goBack();
  await at(page, byHash('#/audit?action=create'));
  await page.goForward();
  await at(page, byHash('#/fleet'));
  assert.deepEqual(asks, [], 'a key never goes to the issuer');
  await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-links-key.png') });
  await page.close();
  assert.deepEqual(pageErrors, []);
});
