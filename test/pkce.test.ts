// API guide 2 and 9: the built-in issuer's authorization code flow with PKCE for the dashboard's
// public client: the sign-in page, the redirect with a one-time code, the exchange against the
// verifier, and every way it must refuse (wrong password, foreign redirect, missing or plain PKCE,
// wrong verifier, a code used twice or for another redirect), then refresh without a secret.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { test } from 'node:test';
import { OPERATOR, startApp } from './helpers.js';

const ta = await startApp(undefined, { AUTH_THROTTLE_FAILURES: '100' });
const base = `/auth/realms/tracking/protocol/openid-connect`;
const redirect = `${ta.url}/dashboard/`;
const pkce = () => {
  const verifier = crypto.randomBytes(32).toString('base64url');
  return { verifier, challenge: crypto.createHash('sha256').update(verifier).digest('base64url') };
};
const authorizeQuery = (challenge: string, extra: Record<string, string> = {}) =>
  new URLSearchParams({
    response_type: 'code',
    client_id: 'dashboard',
    redirect_uri: redirect,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state: 'st-1',
    ...extra,
  }).toString();
const form = (body: Record<string, string>) => ({
  method: 'POST',
  // A browser names the page's origin with the form it posts (the sign-in form insists).
  headers: { 'content-type': 'application/x-www-form-urlencoded', origin: ta.url },
  body: new URLSearchParams(body).toString(),
  redirect: 'manual' as const,
});
const login = (challenge: string, password = OPERATOR.password, extra: Record<string, string> = {}) =>
  fetch(
    `${ta.url}${base}/auth`,
    form({ ...Object.fromEntries(new URLSearchParams(authorizeQuery(challenge, extra))), username: OPERATOR.username, password }),
  );
const exchange = (body: Record<string, string>) =>
  fetch(`${ta.url}${base}/token`, form({ grant_type: 'authorization_code', client_id: 'dashboard', redirect_uri: redirect, ...body }));

test('discovery names the authorization endpoint and S256', async () => {
  const d = (await (await fetch(`${ta.url}/auth/realms/tracking/.well-known/openid-configuration`)).json()) as Record<string, unknown>;
  assert.equal(d.authorization_endpoint, `${ta.cfg.publicUrl}${base}/auth`);
  assert.deepEqual(d.code_challenge_methods_supported, ['S256']);
  assert.ok((d.grant_types_supported as string[]).includes('authorization_code'));
});

test('sign-in page, code, exchange with the verifier, refresh without a secret; the code works once', async () => {
  const { verifier, challenge } = pkce();
  const page = await fetch(`${ta.url}${base}/auth?${authorizeQuery(challenge)}`);
  assert.equal(page.status, 200);
  assert.match(page.headers.get('content-security-policy') ?? '', /form-action 'self'/);
  const html = await page.text();
  assert.match(html, /<form method="post"/);
  assert.match(html, new RegExp(`name="code_challenge" value="${challenge}"`));

  const wrong = await login(challenge, 'not-the-password');
  assert.equal(wrong.status, 401);
  assert.match(await wrong.text(), /Invalid username or password/);

  const ok = await login(challenge);
  assert.equal(ok.status, 303);
  const to = new URL(ok.headers.get('location')!);
  assert.equal(`${to.origin}${to.pathname}`, redirect);
  assert.equal(to.searchParams.get('state'), 'st-1');
  const code = to.searchParams.get('code')!;
  assert.ok(code.length >= 40);

  const bad = await exchange({ code, code_verifier: pkce().verifier });
  assert.equal(bad.status, 400);
  assert.equal(((await bad.json()) as { error: string }).error, 'invalid_grant');
  // The failed try used the code up: a code is exchanged once, whatever the outcome.
  const late = await exchange({ code, code_verifier: verifier });
  assert.equal(late.status, 400);

  const second = await login(challenge);
  const code2 = new URL(second.headers.get('location')!).searchParams.get('code')!;
  const tokens = await exchange({ code: code2, code_verifier: verifier });
  assert.equal(tokens.status, 200);
  const t = (await tokens.json()) as { access_token: string; refresh_token: string };
  const me = await ta.call('GET', '/api/v1/integrations', { token: t.access_token });
  assert.equal(me.status, 200, 'the operator signed in with their own scopes (admin)');
  const again = await exchange({ code: code2, code_verifier: verifier });
  assert.equal(again.status, 400, 'a code used once is refused');

  const refreshed = await fetch(
    `${ta.url}${base}/token`,
    form({ grant_type: 'refresh_token', client_id: 'dashboard', refresh_token: t.refresh_token }),
  );
  assert.equal(refreshed.status, 200);
  // A public client cannot use the password grant, and a confidential one must give its secret.
  const pw = await fetch(
    `${ta.url}${base}/token`,
    form({ grant_type: 'password', client_id: 'dashboard', username: OPERATOR.username, password: OPERATOR.password }),
  );
  assert.equal(pw.status, 400);
  assert.equal(((await pw.json()) as { error: string }).error, 'unauthorized_client');
  const noSecret = await fetch(
    `${ta.url}${base}/token`,
    form({ grant_type: 'password', client_id: OPERATOR.clientId, username: OPERATOR.username, password: OPERATOR.password }),
  );
  assert.equal(noSecret.status, 401);
});

test('refusals: a foreign redirect or client is an error page; missing or plain PKCE goes back as an error; redirect_uri must match', async () => {
  const { verifier, challenge } = pkce();
  for (const [extra, what] of [
    [{ redirect_uri: 'https://evil.example/dashboard/' }, 'foreign origin'],
    [{ redirect_uri: `${ta.url}/other/` }, 'unlisted path'],
    [{ client_id: OPERATOR.clientId }, 'a client without the code grant'],
    [{ client_id: 'nobody' }, 'unknown client'],
  ] as const) {
    const r = await fetch(`${ta.url}${base}/auth?${authorizeQuery(challenge, extra)}`, { redirect: 'manual' });
    assert.equal(r.status, 400, what);
    assert.equal(r.headers.get('location'), null, `${what}: never redirected`);
  }
  for (const [extra, error] of [
    [{ code_challenge_method: 'plain' }, 'invalid_request'],
    [{ code_challenge: 'short' }, 'invalid_request'],
    [{ response_type: 'token' }, 'unsupported_response_type'],
  ] as const) {
    const r = await fetch(`${ta.url}${base}/auth?${authorizeQuery(challenge, extra)}`, { redirect: 'manual' });
    assert.equal(r.status, 303);
    const to = new URL(r.headers.get('location')!);
    assert.equal(to.searchParams.get('error'), error);
    assert.equal(to.searchParams.get('state'), 'st-1');
  }
  // A code asked for one redirect cannot be exchanged naming another.
  const ok = await login(challenge);
  const code = new URL(ok.headers.get('location')!).searchParams.get('code')!;
  const r = await exchange({ code, code_verifier: verifier, redirect_uri: `${ta.url}/dashboard/?x=1` });
  assert.equal(r.status, 400);
  // The page escapes what it echoes.
  const page = await fetch(`${ta.url}${base}/auth?${authorizeQuery(challenge, { state: '"><script>alert(1)</script>' })}`);
  const html = await page.text();
  assert.ok(!html.includes('<script>alert(1)</script>'));
  assert.match(html, /&#34;&#62;&#60;script&#62;/);
});

test("the sign-in page trusts PUBLIC_URL, never the request's Host; its form must come from that origin", async () => {
  const { challenge } = pkce();
  // Someone points a name of theirs at the service and sends a user there: no page, no code.
  const evil = 'evil.example:4443';
  const q = authorizeQuery(challenge, { redirect_uri: `http://${evil}/dashboard/` });
  const r = await ta.call('GET', `${base}/auth?${q}`, { headers: { host: evil } });
  assert.equal(r.status, 400, r.raw.slice(0, 200));
  assert.equal(r.headers.location, undefined);
  const posted = await ta.call('POST', `${base}/auth`, {
    headers: { host: evil, origin: `http://${evil}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      ...Object.fromEntries(new URLSearchParams(q)),
      username: OPERATOR.username,
      password: OPERATOR.password,
    }).toString(),
  });
  assert.notEqual(posted.status, 303, 'no code for a foreign origin');
  // A form posted from another site, or with no Origin at all, is refused, the right password included.
  for (const origin of ['https://evil.example', undefined]) {
    const r2 = await fetch(`${ta.url}${base}/auth`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...(origin ? { origin } : {}) },
      body: new URLSearchParams({
        ...Object.fromEntries(new URLSearchParams(authorizeQuery(challenge))),
        username: OPERATOR.username,
        password: OPERATOR.password,
      }).toString(),
      redirect: 'manual',
    });
    assert.equal(r2.status, 403, `Origin ${origin}`);
    assert.equal(r2.headers.get('location'), null);
  }
  // The page itself lets the browser send its origin with the form.
  const page = await fetch(`${ta.url}${base}/auth?${authorizeQuery(challenge)}`);
  assert.equal(page.headers.get('referrer-policy'), 'same-origin');
});

test('discovery lists only what is supported: response type code', async () => {
  const d = (await (await fetch(`${ta.url}/auth/realms/tracking/.well-known/openid-configuration`)).json()) as Record<string, unknown>;
  assert.deepEqual(d.response_types_supported, ['code']);
});

test('the sign-in session: an HttpOnly SameSite=Strict cookie signs in again without the form; signing out ends it and its logins', async () => {
  const { verifier, challenge } = pkce();
  const ok = await login(challenge);
  assert.equal(ok.status, 303);
  const set = ok.headers.get('set-cookie') ?? '';
  assert.match(set, /^atk_signin=[A-Za-z0-9_-]{43};/);
  assert.match(set, /; HttpOnly/);
  assert.match(set, /; SameSite=Strict/);
  assert.match(set, /; Path=\/auth\/realms\/tracking\/protocol\/openid-connect;/);
  const cookie = set.split(';')[0]!;
  const code = new URL(ok.headers.get('location')!).searchParams.get('code')!;
  const first = (await (await exchange({ code, code_verifier: verifier })).json()) as { refresh_token: string };

  // A reload: no token, the cookie only. The authorization endpoint answers with a code at once.
  const again = pkce();
  const silent = await fetch(`${ta.url}${base}/auth?${authorizeQuery(again.challenge)}`, { headers: { cookie }, redirect: 'manual' });
  assert.equal(silent.status, 303);
  const code2 = new URL(silent.headers.get('location')!).searchParams.get('code')!;
  const second = await exchange({ code: code2, code_verifier: again.verifier });
  assert.equal(second.status, 200);
  const t2 = (await second.json()) as { access_token: string; refresh_token: string };
  assert.equal((await ta.call('GET', '/api/v1/owners', { token: t2.access_token })).status, 200);
  // prompt=login asks anyway; prompt=none without a session goes back with login_required.
  const asked = await fetch(`${ta.url}${base}/auth?${authorizeQuery(again.challenge, { prompt: 'login' })}`, {
    headers: { cookie },
    redirect: 'manual',
  });
  assert.equal(asked.status, 200);
  const none = await fetch(`${ta.url}${base}/auth?${authorizeQuery(again.challenge, { prompt: 'none' })}`, { redirect: 'manual' });
  assert.equal(new URL(none.headers.get('location')!).searchParams.get('error'), 'login_required');

  // Signing out from another site is refused; from the service's own origin it ends everything.
  const foreign = await fetch(`${ta.url}${base}/logout`, { method: 'POST', headers: { cookie, origin: 'https://evil.example' } });
  assert.equal(foreign.status, 403);
  const out = await fetch(`${ta.url}${base}/logout`, { method: 'POST', headers: { cookie, origin: ta.url } });
  assert.equal(out.status, 204);
  assert.match(out.headers.get('set-cookie') ?? '', /^atk_signin=; .*Max-Age=0/);
  const after = await fetch(`${ta.url}${base}/auth?${authorizeQuery(again.challenge)}`, { headers: { cookie }, redirect: 'manual' });
  assert.equal(after.status, 200, 'the old cookie no longer signs in: the form again');
  assert.equal((await ta.call('GET', '/api/v1/owners', { token: t2.access_token })).status, 401, 'the logins made through it are revoked');
  for (const rt of [first.refresh_token, t2.refresh_token]) {
    const r = await fetch(`${ta.url}${base}/token`, form({ grant_type: 'refresh_token', client_id: 'dashboard', refresh_token: rt }));
    assert.equal(r.status, 400);
  }

  // A new password ends a user's sign-in sessions too.
  const o = await ta.call('POST', '/api/v1/owners', { token: ta.adminToken, body: { name: 'session owner' } });
  const user = await ta.call('POST', '/api/v1/users', {
    token: ta.adminToken,
    body: { username: 'session-user', password: 'first-password-1', ownerId: (o.body as { id: string }).id, scopes: ['read'] },
  });
  assert.equal(user.status, 201, user.raw);
  const p3 = pkce();
  const signedIn = await fetch(
    `${ta.url}${base}/auth`,
    form({
      ...Object.fromEntries(new URLSearchParams(authorizeQuery(p3.challenge))),
      username: 'session-user',
      password: 'first-password-1',
    }),
  );
  const c3 = (signedIn.headers.get('set-cookie') ?? '').split(';')[0]!;
  assert.equal(
    (await fetch(`${ta.url}${base}/auth?${authorizeQuery(p3.challenge)}`, { headers: { cookie: c3 }, redirect: 'manual' })).status,
    303,
  );
  const changed = await ta.call('PATCH', `/api/v1/users/${(user.body as { id: string }).id}`, {
    token: ta.adminToken,
    body: { password: 'second-password-2' },
  });
  assert.equal(changed.status, 200);
  assert.equal(
    (await fetch(`${ta.url}${base}/auth?${authorizeQuery(p3.challenge)}`, { headers: { cookie: c3 }, redirect: 'manual' })).status,
    200,
  );
});

test('the sign-in page uses nothing its own Content-Security-Policy refuses (its icon, its stylesheet, its form)', async () => {
  const page = await fetch(`${ta.url}${base}/auth?${authorizeQuery(pkce().challenge)}`);
  assert.equal(page.status, 200);
  const csp = new Map(
    (page.headers.get('content-security-policy') ?? '')
      .split(';')
      .map((d) => d.trim().split(/\s+/))
      .filter((d) => d[0])
      .map(([name, ...sources]) => [name!, sources]),
  );
  const html = await page.text();
  /** Whether `directive` (or default-src, its fallback) lets the page load `url` (CSP 3: 'self' and scheme sources). */
  const allows = (directive: string, url: string) => {
    const sources = csp.get(directive) ?? csp.get('default-src') ?? [];
    const u = new URL(url, page.url);
    return sources.some((s) => (s === "'self'" ? u.origin === new URL(page.url).origin : s.endsWith(':') && u.protocol === s));
  };
  const used: [string, string][] = [];
  for (const tag of html.match(/<(link|script|img|form)\b[^>]*>/g) ?? []) {
    const attr = (name: string) => new RegExp(`\\b${name}="([^"]*)"`).exec(tag)?.[1];
    if (tag.startsWith('<link')) {
      const rel = attr('rel') ?? '';
      used.push([rel === 'stylesheet' ? 'style-src' : /icon/.test(rel) ? 'img-src' : 'default-src', attr('href')!]);
    } else if (tag.startsWith('<script')) used.push(['script-src', attr('src') ?? '(inline)']);
    else if (tag.startsWith('<img')) used.push(['img-src', attr('src')!]);
    else used.push(['form-action', (attr('action') ?? page.url).replace(/&amp;/g, '&')]);
  }
  assert.ok(
    used.some(([d, u]) => d === 'img-src' && u.startsWith('data:')),
    'the page names its icon (data:, so the browser asks for no /favicon.ico)',
  );
  for (const [directive, url] of used)
    assert.ok(allows(directive, url), `${directive} refuses ${url}: ${page.headers.get('content-security-policy')}`);
  assert.doesNotMatch(html, /<style\b|\sstyle="|<script>/, 'nothing inline');
});

test('prompt=none (the dashboard reloaded): a code at once with a live sign-in session, never the form; login_required without one or after signing out', async () => {
  const first = pkce();
  const ok = await login(first.challenge);
  const cookie = (ok.headers.get('set-cookie') ?? '').split(';')[0]!;
  const silent = pkce();
  const ask = (extra: Record<string, string>, headers: Record<string, string> = {}) =>
    fetch(`${ta.url}${base}/auth?${authorizeQuery(silent.challenge, { prompt: 'none', state: 'silent-1', ...extra })}`, {
      headers,
      redirect: 'manual',
    });
  const r = await ask({}, { cookie });
  assert.equal(r.status, 303);
  const to = new URL(r.headers.get('location')!);
  assert.equal(to.searchParams.get('state'), 'silent-1');
  const tokens = await exchange({ code: to.searchParams.get('code')!, code_verifier: silent.verifier });
  assert.equal(tokens.status, 200, 'the silent code is exchanged as any other');
  // No session: back to the client with login_required and its state, never the form.
  for (const [extra, headers, what] of [
    [{}, {}, 'no cookie'],
    [{}, { cookie: 'atk_signin=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' }, 'an unknown cookie'],
  ] as const) {
    const none = await ask(extra, headers);
    assert.equal(none.status, 303, what);
    const back = new URL(none.headers.get('location')!);
    assert.equal(`${back.origin}${back.pathname}`, redirect, what);
    assert.equal(back.searchParams.get('error'), 'login_required', what);
    assert.equal(back.searchParams.get('state'), 'silent-1', what);
    assert.equal(back.searchParams.get('code'), null, what);
  }
  // none goes alone (OpenID Connect Core 3.1.2.1): with another value the request is malformed.
  const both = await ask({ prompt: 'none login' }, { cookie });
  assert.equal(new URL(both.headers.get('location')!).searchParams.get('error'), 'invalid_request');
  // A list with login still shows the form.
  assert.equal((await ask({ prompt: 'login consent' }, { cookie })).status, 200);
  // After signing out the same cookie gets login_required.
  const out = await fetch(`${ta.url}${base}/logout`, { method: 'POST', headers: { cookie, origin: ta.url } });
  assert.equal(out.status, 204);
  const after = await ask({}, { cookie });
  assert.equal(new URL(after.headers.get('location')!).searchParams.get('error'), 'login_required');
});
