// The browser tests: the dashboard in a real Chromium (playwright-core with Debian's
// chromium). An operator signs in on the issuer's page (authorization code with PKCE), reloads and
// is signed in again with no click (the issuer's sign-in session), sees an integration's attempts
// arrive live, redelivers a failed one and sees it succeed, sees an asset on the map, signs out
// (the next sign-in asks for the password); a customer's API key sees its own fleet and, read-only,
// the operator's integration. A customer's user runs the portal: creates an integration of each
// channel with the form, sees the signing secret once, tests, rotates, disables, enables,
// redelivers and deletes, and reads the audit log. A hostile response body is shown as text. A
// screenshot of each page goes to test-artifacts/ (outside git).
// @test-lanes postgres
// @test-browser
// (the page is the same on either database: it runs once)
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { DASHBOARD_CSP } from '../src/dashboard/dashboard.js';
import { atEnd, OPERATOR, ok, ownerWithKey, startApp, TEST_DB, waitFor } from './helpers.js';
import { ARTIFACTS, launchChromium, requireChromium } from './browser.js';
import { Receiver } from './receiver.js';
import { SmtpSink } from './smtp.js';

const HOSTILE = '<img src=x onerror="window.__xss=1">';

// One browser run per suite: PGlite or PostgreSQL makes no difference to the page.
if (TEST_DB === 'postgres') {
  test('dashboard: sign in, live attempts, redeliver a failed one, the fleet map; a customer sees its own', {
    timeout: 240_000,
  }, async (t) => {
    if (!requireChromium(t)) return;
    const ta = await startApp(t, {
      PUSH_ALLOW_HTTP: 'true',
      PUSH_ALLOWED_NETWORKS: '127.0.0.0/8',
      DELIVERY_POLL_MS: '100',
      RATE_LIMIT_MAX: '100000',
      RATE_LIMIT_CONCURRENT: '1000',
    });
    let healthy = false;
    const rx = await new Receiver().start();
    atEnd(() => rx.close());
    rx.on('/hook', () => (healthy ? { status: 200, body: '{"success":true,"id":"rcpt-ok"}' } : { status: 500, body: HOSTILE }));

    const customer = await ownerWithKey(ta, 'dash-customer');
    const call = (method: string, p: string, body?: unknown, token = ta.adminToken) =>
      ta.call(method, `/api/v1${p}`, { token, ...(body === undefined ? {} : { body }) });
    const integration = ok(
      await call('POST', '/integrations', {
        name: 'dash-hook',
        channel: 'webhook',
        ownerIds: [customer.ownerId],
        objectTypes: ['location'],
        destination: `${rx.url}/hook`,
        retry: { maxAttempts: 1 },
      }),
      201,
    );
    const asset = ok(await call('POST', '/assets', { name: 'DASH0001' }, customer.key), 201);
    ok(await call('POST', '/zones', { name: 'Depot', circle: { latitude: 51.9, longitude: 4.1, radiusMeters: 20000 } }, customer.key), 201);
    ok(
      await call(
        'POST',
        '/locations',
        [
          { assetId: asset.id, latitude: 51.5, longitude: 3.5, whenCreated: new Date(Date.now() - 120_000).toISOString() },
          { assetId: asset.id, latitude: 51.9, longitude: 4.1 },
        ],
        customer.key,
      ),
      201,
    );
    await rx.waitFor(() => rx.for('/hook').length >= 2, 60_000, 'the two failed deliveries');

    // The page itself: a strict policy, and the script served from this origin.
    const page0 = await fetch(`${ta.url}/dashboard/`);
    assert.equal(page0.status, 200);
    assert.equal(page0.headers.get('content-security-policy'), DASHBOARD_CSP);
    assert.match(DASHBOARD_CSP, /script-src 'self';/);
    assert.equal((await fetch(`${ta.url}/dashboard/app.js`)).status, 200);

    const browser = await launchChromium();
    const pageErrors: string[] = [];
    const signIn = async (credential: string) => {
      const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
      page.on('pageerror', (e) => pageErrors.push(e.message));
      // Script errors only: the browser also logs the sign-in's expected 403 (is this an operator?).
      page.on('console', (m) => m.type() === 'error' && !m.text().startsWith('Failed to load resource') && pageErrors.push(m.text()));
      await page.goto(`${ta.url}/dashboard`);
      await page.fill('#key', credential);
      await page.click('button[type=submit]');
      await page.waitForSelector('header nav');
      return page;
    };

    // Operator, through the issuer's sign-in page (authorization code with PKCE): the integration
    // with its stats, then its attempts live.
    const op = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    op.on('pageerror', (e) => pageErrors.push(e.message));
    await op.goto(`${ta.url}/dashboard/`);
    await op.click('text=Sign in with your account');
    await op.waitForSelector('input[name=username]');
    await op.fill('input[name=username]', OPERATOR.username);
    await op.fill('input[name=password]', 'wrong password');
    await op.click('button[type=submit]');
    await op.waitForSelector('text=Invalid username or password.');
    await op.screenshot({ path: path.join(ARTIFACTS, 'dashboard-signin.png') });
    await op.fill('input[name=password]', OPERATOR.password);
    await op.click('button[type=submit]');
    await op.waitForSelector('header nav');
    assert.equal(new URL(op.url()).search, '', 'the code is gone from the address bar');
    await op.waitForSelector('header >> text=operator');
    // A reload keeps no token (browser storage holds only the word that an account signed in), yet
    // it signs in again with no click: prompt=none, and the issuer's sign-in session answers.
    assert.deepEqual(
      await op.evaluate('[Object.entries(localStorage), Object.keys(sessionStorage).length]'),
      [[['dashboard.signIn', 'account']], 0],
      'no token in browser storage',
    );
    const cookies = await op.context().cookies();
    const signInCookie = cookies.find((c) => c.name === 'atk_signin');
    assert.ok(signInCookie?.httpOnly, 'the sign-in session is an HttpOnly cookie');
    assert.equal(signInCookie?.sameSite, 'Strict');
    await op.reload();
    await op.waitForSelector('header nav');
    assert.equal(await op.locator('input[name=password]').count(), 0, 'no password asked');
    await op.waitForSelector('header >> text=operator');
    // One word for one page: the nav says what the page says.
    await op.waitForSelector('header nav >> text=Integrations');
    await op.waitForSelector('h2:text("Integrations")');
    assert.equal(await op.locator('header nav >> text=Deliveries').count(), 0);
    await op.waitForSelector('text=dash-hook');
    await op.screenshot({ path: path.join(ARTIFACTS, 'dashboard-integrations.png'), fullPage: true });
    // Pause and resume it from the table: the API agrees each time.
    const row = op.locator('tr', { hasText: 'dash-hook' });
    await row.locator('button', { hasText: 'Disable' }).click();
    await row.locator('text=disabled').waitFor();
    assert.equal(ok(await call('GET', `/integrations/${integration.id}`), 200).enabled, false);
    await row.locator('button', { hasText: 'Enable' }).click();
    await row.locator('text=enabled').waitFor();
    assert.equal(ok(await call('GET', `/integrations/${integration.id}`), 200).enabled, true);
    await op.click('text=dash-hook');
    await op.waitForSelector('table.attempts tbody tr.failed');
    assert.equal(await op.locator('table.attempts tbody tr.failed').count(), 2);
    // The customer endpoint's answer is text on the page, never markup.
    await op.waitForSelector(`text=${HOSTILE}`);
    assert.equal(await op.evaluate(() => (window as unknown as { __xss?: number }).__xss), undefined);
    assert.equal(await op.locator('table.attempts img').count(), 0);

    // Redeliver one failed attempt: its success arrives over the live stream.
    healthy = true;
    await op.locator('table.attempts tbody tr.failed button', { hasText: 'Redeliver' }).first().click();
    await op.waitForSelector('text=queued again');
    await op.waitForSelector('table.attempts tbody tr:not(.failed) >> text=OK 200');
    await op.screenshot({ path: path.join(ARTIFACTS, 'dashboard-attempts.png'), fullPage: true });
    // A test event to the integration's own destination, with its signature.
    const before = rx.for('/hook').length;
    await op.click('text=Send test event');
    await op.waitForSelector('text=/Test event delivered: 200/');
    assert.ok(
      rx
        .for('/hook')
        .slice(before)
        .some((r) => String(r.headers['webhook-id']).startsWith('test_')),
    );

    // The fleet: the asset on the map, its zone drawn, its track on a click.
    await op.click('text=Fleet');
    await op.waitForSelector('div.map[data-assets="1"]');
    await op.waitForSelector('text=1 of 1 assets on the map');
    // A click on the asset shows its track: both of its positions.
    await op.click('div.map path.map-asset');
    await op.waitForSelector('text=DASH0001: 2 positions in the last 24 h');
    await op.screenshot({ path: path.join(ARTIFACTS, 'dashboard-fleet.png'), fullPage: true });

    // Signing out ends the issuer's session: the next sign-in asks for the password again.
    await op.click('header >> text=Sign out');
    await op.click('text=Sign in with your account');
    await op.waitForSelector('input[name=password]');
    assert.equal((await op.context().cookies()).filter((c) => c.name === 'atk_signin').length, 0, 'the cookie is gone');
    await op.screenshot({ path: path.join(ARTIFACTS, 'dashboard-signed-out.png') });

    // A customer's key: its fleet; the operator's integration by name, its attempts read-only.
    const cu = await signIn(customer.key);
    // The header names the credential (GET /me): the key's name.
    await cu.waitForSelector('header .who >> text=dash-customer-key');
    await cu.waitForSelector('text=dash-hook');
    await cu.waitForSelector('text=managed by the operator');
    assert.equal(await cu.locator('tr', { hasText: 'dash-hook' }).locator('button').count(), 0, 'no enable or disable');
    await cu.click('text=dash-hook');
    await cu.waitForSelector('table.attempts tbody tr');
    assert.equal(await cu.locator('table.attempts button', { hasText: 'Redeliver' }).count(), 0);
    assert.equal(await cu.locator('button', { hasText: 'Rotate signing secret' }).count(), 0);
    await cu.click('text=Fleet');
    await cu.waitForSelector('div.map[data-assets="1"]');
    await cu.screenshot({ path: path.join(ARTIFACTS, 'dashboard-customer-fleet.png'), fullPage: true });

    // A bad key is refused on the sign-in form.
    const bad = await browser.newPage();
    await bad.goto(`${ta.url}/dashboard/`);
    await bad.fill('#key', 'atk_not-a-key');
    await bad.click('button[type=submit]');
    await bad.waitForSelector('text=That key was not accepted.');
    assert.deepEqual(pageErrors, []);
  });

  test("the portal: a customer's user creates an integration of each channel, sees the secret once, tests, rotates, disables, enables, redelivers, deletes; the audit log", {
    timeout: 240_000,
  }, async (t) => {
    if (!requireChromium(t)) return;
    const smtp = await new SmtpSink().start();
    atEnd(() => smtp.close());
    const ta = await startApp(t, {
      PUSH_ALLOW_HTTP: 'true',
      PUSH_ALLOWED_NETWORKS: '127.0.0.0/8',
      DELIVERY_POLL_MS: '100',
      RATE_LIMIT_MAX: '100000',
      RATE_LIMIT_CONCURRENT: '1000',
      SMTP_URL: smtp.url,
    });
    const rx = await new Receiver().start();
    atEnd(() => rx.close());
    let healthy = false;
    rx.on('/portal', () => (healthy ? { status: 200, body: '{"ok":true}' } : { status: 503, body: 'down' }));
    const shipper = await ownerWithKey(ta, 'Portal Shipping');
    const asset = ok(await ta.call('POST', '/api/v1/assets', { token: shipper.key, body: { name: 'PORT0001' } }), 201);
    const portalUser = ok(
      await ta.call('POST', '/api/v1/users', {
        token: ta.adminToken,
        body: { username: 'portal-user', password: 'portal-password-1', ownerId: shipper.ownerId, scopes: ['read', 'write'] },
      }),
      201,
    );
    const integrations = async () =>
      ok(await ta.call('GET', '/api/v1/integrations', { token: shipper.key }), 200) as {
        id: string;
        name: string;
        channel: string;
        enabled: boolean;
      }[];

    const browser = await launchChromium();
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    const pageErrors: string[] = [];
    page.on('pageerror', (e) => pageErrors.push(e.message));
    page.on('dialog', (d) => void d.accept());
    await page.goto(`${ta.url}/dashboard/`);
    await page.click('text=Sign in with your account');
    await page.fill('input[name=username]', 'portal-user');
    await page.fill('input[name=password]', 'portal-password-1');
    await page.click('button[type=submit]');
    // The header names the user (GET /me), not a role.
    await page.waitForSelector('header .who >> text=portal-user');

    // A webhook with HTTP Basic: the form, then the signing secret shown once.
    await page.click('text=New integration');
    await page.waitForSelector('form.new-integration');
    await page.fill('#f-name', 'Portal hook');
    await page.fill('#f-endpoint', `${rx.url}/portal`);
    await page.selectOption('#f-auth', 'basic');
    await page.fill('#f-username', 'ops');
    await page.fill('#f-secret', 'basic-password-1');
    await page.screenshot({ path: path.join(ARTIFACTS, 'portal-new-webhook.png'), fullPage: true });
    await page.click('form.new-integration button[type=submit]');
    const secret = (await page.locator('code[data-secret]').textContent())!;
    assert.match(secret, /^whsec_/);
    await page.screenshot({ path: path.join(ARTIFACTS, 'portal-secret-once.png'), fullPage: true });
    await page.click('text=I have copied it');
    assert.equal(await page.locator('code[data-secret]').count(), 0, 'shown once');
    const hook = (await integrations()).find((i) => i.name === 'Portal hook')!;
    assert.equal(ok(await ta.call('GET', `/api/v1/integrations/${hook.id}`, { token: shipper.key }), 200).managedBy, 'customer');

    // MQTT and Kafka from the same form.
    for (const [channel, fill] of [
      ['mqtt', async () => page.fill('#f-url', 'mqtt://127.0.0.1:1883')],
      [
        'kafka',
        async () => {
          await page.fill('#f-brokers', '127.0.0.1:19092');
          await page.locator('label.check', { hasText: 'TLS' }).locator('input').uncheck();
        },
      ],
    ] as const) {
      await page.click('text=New integration');
      await page.fill('#f-name', `Portal ${channel}`);
      await page.selectOption('#f-channel', channel);
      await fill();
      await page.fill('#f-destination', `portal-${channel}`);
      await page.click('form.new-integration button[type=submit]');
      await page.waitForSelector(`a:text("Portal ${channel}")`);
    }
    // Alerts for people: a Slack webhook and an e-mail integration, from the same form.
    await page.click('text=New integration');
    await page.fill('#f-name', 'Portal Slack');
    await page.selectOption('#f-format', 'slack');
    assert.equal(await page.locator('#f-mode').count(), 0, 'a chat message is one per alert: no mode to choose');
    await page.fill('#f-endpoint', `${rx.url}/slack`);
    await page.click('form.new-integration button[type=submit]');
    await page.click('text=I have copied it');
    await page.waitForSelector('a:text("Portal Slack")');
    await page.click('text=New integration');
    await page.fill('#f-name', 'Portal e-mail');
    await page.selectOption('#f-channel', 'email');
    await page.fill('#f-to', 'ops@example.com, night@example.com');
    await page.fill('#f-escalateTo', 'duty@example.com');
    await page.fill('#f-escalateAfterMinutes', '20');
    await page.fill('#f-timeZone', 'Europe/Amsterdam');
    await page.screenshot({ path: path.join(ARTIFACTS, 'portal-new-email.png'), fullPage: true });
    await page.click('form.new-integration button[type=submit]');
    await page.waitForSelector('a:text("Portal e-mail")');
    const byName = async (name: string) => {
      const id = (await integrations()).find((i) => i.name === name)!.id;
      return ok(await ta.call('GET', `/api/v1/integrations/${id}`, { token: shipper.key }), 200);
    };
    const slack = await byName('Portal Slack');
    assert.equal(slack.webhook.format, 'slack');
    assert.deepEqual(slack.objectTypes, ['event', 'notification']);
    const mail = await byName('Portal e-mail');
    assert.deepEqual(mail.email.to, ['ops@example.com', 'night@example.com']);
    assert.deepEqual(mail.email.escalateTo, ['duty@example.com']);
    assert.equal(mail.email.escalateAfterMinutes, 20);
    assert.equal(mail.email.timeZone, 'Europe/Amsterdam');
    assert.deepEqual(
      mail.email.recipients.map((r: { confirmedAt: string | null }) => r.confirmedAt),
      [null, null, null],
      "a customer's recipients confirm first",
    );
    assert.deepEqual((await integrations()).map((i) => i.channel).sort(), ['email', 'kafka', 'mqtt', 'webhook', 'webhook']);
    await page.screenshot({ path: path.join(ARTIFACTS, 'portal-integrations.png'), fullPage: true });

    // One integration: a test event, a rotation (the new secret once), disable, enable.
    await page.click('a:text("Portal hook")');
    await page.waitForSelector('h2:text("Portal hook")');
    healthy = true;
    await page.click('text=Send test event');
    await page.waitForSelector('text=/Test event delivered: 200/');
    await page.click('text=Rotate signing secret');
    const rotated = (await page.locator('code[data-secret]').textContent())!;
    assert.match(rotated, /^whsec_/);
    assert.notEqual(rotated, secret);
    await page.click('text=I have copied it');
    await page.click('.actions >> text=Disable');
    await page.waitForSelector('text=/^Disabled: nothing is sent/');
    assert.equal((await integrations()).find((i) => i.id === hook.id)!.enabled, false);
    await page.click('.actions >> text=Enable');
    await page.waitForSelector('text=/^Enabled:/');
    assert.equal((await integrations()).find((i) => i.id === hook.id)!.enabled, true);

    // A failed delivery, redelivered from its row once the endpoint answers again.
    healthy = false;
    ok(await ta.call('POST', '/api/v1/locations', { token: shipper.key, body: { assetId: asset.id, latitude: 1, longitude: 2 } }), 201);
    // The attempt fails at the engine's pace, then reaches the page over the result stream: on a
    // loaded machine that takes longer than Playwright's default 30 s, so wait for it, not for a time.
    await page.waitForSelector('table.attempts tbody tr.failed', { timeout: 180_000 });
    healthy = true;
    await page.locator('table.attempts tbody tr.failed button', { hasText: 'Redeliver' }).first().click();
    await page.waitForSelector('text=queued again');
    await page.waitForSelector('table.attempts tbody tr:not(.failed) >> text=OK 200');
    await page.screenshot({ path: path.join(ARTIFACTS, 'portal-integration.png'), fullPage: true });

    // The audit log: what this user did, secrets masked.
    await page.click('text=Audit log');
    await page.waitForSelector('table.audit >> text=/create integration/');
    await page.waitForSelector('table.audit >> text=/rotate integration/');
    const audit = (await page.locator('table.audit').textContent())!;
    assert.ok(!audit.includes('basic-password-1') && !audit.includes(secret) && !audit.includes(rotated), 'no secret in the audit log');
    // Who did it, by name: the user (itself, from GET /me) and its owner's API key (GET /api-keys).
    const keyId = (ok(await ta.call('GET', `/api/v1/api-keys?ownerId=${shipper.ownerId}`, { token: ta.adminToken }), 200) as any[]).find(
      (k) => k.name === 'Portal Shipping-key',
    ).id;
    await page.waitForSelector('table.audit >> text=/user portal-user/');
    await page.waitForSelector('table.audit >> text=/apiKey Portal Shipping-key/');
    await page.waitForSelector('table.audit >> text=/create user portal-user/');
    const whoAndWhat = [
      ...(await page.locator('table.audit tbody td:nth-child(2)').allTextContents()),
      ...(await page.locator('table.audit tbody td:nth-child(4)').allTextContents()),
    ].join('\n');
    assert.ok(!whoAndWhat.includes(portalUser.id) && !whoAndWhat.includes(keyId), `names, not ids:\n${whoAndWhat}`);
    await page.screenshot({ path: path.join(ARTIFACTS, 'portal-audit.png'), fullPage: true });

    // Delete (after a confirmation).
    await page.click('header nav >> text=Integrations');
    await page.click('a:text("Portal mqtt")');
    await page.click('.actions >> text=Delete');
    await page.waitForSelector('h2:text("Integrations")');
    assert.deepEqual((await integrations()).map((i) => i.channel).sort(), ['email', 'kafka', 'webhook', 'webhook']);
    assert.deepEqual(pageErrors, []);
  });

  test('the dashboard asks a few times a minute and nothing while hidden; a sign-in error shows fixed words; /docs works under its policy', {
    timeout: 180_000,
  }, async (t) => {
    if (!requireChromium(t)) return;
    const ta = await startApp(t, { PUSH_ALLOW_HTTP: 'true', PUSH_ALLOWED_NETWORKS: '127.0.0.0/8', RATE_LIMIT_MAX: '100000' });
    const o = await ownerWithKey(ta, 'poll');
    for (const k of [1, 2, 3]) {
      ok(
        await ta.call('POST', '/api/v1/integrations', {
          token: ta.adminToken,
          body: { name: `poll-${k}`, channel: 'webhook', enabled: false, ownerIds: [o.ownerId], destination: 'http://127.0.0.1:9/x' },
        }),
        201,
      );
    }
    const browser = await launchChromium();

    // The page's clock is the test's: 15 s of it pass when the test says so.
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    await page.clock.install();
    const calls: string[] = [];
    page.on('request', (r) => {
      const u = new URL(r.url());
      if (u.pathname.startsWith('/api/v1/integrations')) calls.push(`${u.pathname}${u.search}`);
    });
    await page.goto(`${ta.url}/dashboard/`);
    await page.fill('#key', ta.adminToken);
    await page.click('button[type=submit]');
    await page.waitForSelector('text=poll-3');
    const settled = async (n: number) =>
      waitFor(
        () => `${n} requests (got ${calls.length}: ${calls.slice(-5).join(', ')})`,
        async () => calls.length === n,
      );
    const n0 = calls.length;
    await page.clock.runFor(14_000);
    assert.equal(calls.length, n0, 'nothing before 15 s (the old page asked every 5 s, once per integration too)');
    await page.clock.runFor(1_000);
    await settled(n0 + 1);
    assert.match(calls.at(-1)!, /^\/api\/v1\/integrations\?stats=true&limit=1000$/, 'one request for the list and its stats');
    // A hidden tab asks for nothing, for as long as it stays hidden; shown again, it catches up once.
    // As text: tsx would wrap a function in a helper the page does not have.
    const visibility = (state: 'hidden' | 'visible') =>
      page.evaluate(
        `Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => '${state}' });` +
          `document.dispatchEvent(new Event('visibilitychange'));`,
      );
    await visibility('hidden');
    for (let i = 0; i < 20; i++) await page.clock.runFor(15_000);
    assert.equal(calls.length, n0 + 1, 'five minutes hidden: no request');
    await visibility('visible');
    await settled(n0 + 2);

    // An error in the address bar is shown as the page's own words for its code, never as given.
    const err = await browser.newPage();
    await err.goto(
      `${ta.url}/dashboard/?error=access_denied&error_description=${encodeURIComponent('Your account is locked. Call +1-800-EVIL')}&state=x`,
    );
    await err.waitForSelector('text=Sign-in was cancelled or refused.');
    assert.ok(!(await err.content()).includes('1-800-EVIL'));

    // The API docs: the same kind of policy as every page, and Swagger UI still renders under it.
    const head = await fetch(`${ta.url}/docs`);
    assert.match(head.headers.get('content-security-policy') ?? '', /script-src 'self';.*frame-ancestors 'none'/);
    assert.equal(head.headers.get('x-content-type-options'), 'nosniff');
    const docs = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    const violations: string[] = [];
    docs.on('console', (m) => /Content Security Policy/i.test(m.text()) && violations.push(m.text()));
    await docs.goto(`${ta.url}/docs`);
    await docs.waitForSelector('.swagger-ui .info .title');
    await docs.screenshot({ path: path.join(ARTIFACTS, 'docs.png') });
    await docs.waitForSelector('.opblock-summary-path[data-path="/api/v1/deliveries/stream"]');
    assert.deepEqual(violations, []);
  });
}
