// API guide 2: the token request exactly as the specification writes it, expiry,
// refresh, and every kind of bad token answering 401; a missing scope answering 403; throttling of
// failed token requests and equal timing for unknown users.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import http from 'node:http';
import { promisify } from 'node:util';
import { test } from 'node:test';
import * as jose from 'jose';
import { DEFAULT_PASSWORD_COST, hashPassword } from '../src/auth/crypto.js';
import { OPERATOR, ownerWithKey, passwordToken, startApp, basic, type TestApp } from './helpers.js';

const exec = promisify(execFile);

test('the API guide 2 token request sent by curl returns a JWT that expires 20 minutes after issue', async (t) => {
  const ta = await startApp(t);
  const u = new URL(ta.url);
  // Exactly as API guide 2: POST {auth_url}/protocol/openid-connect/token, client id and secret as the
  // URL's user and password parts, form body with scope=openid+profile+read.
  const authUrl = `http://${OPERATOR.clientId}:${OPERATOR.clientSecret}@${u.host}/auth/realms/tracking`;
  const { stdout } = await exec('curl', [
    '-s',
    '-X',
    'POST',
    `${authUrl}/protocol/openid-connect/token`,
    '-d',
    `grant_type=password&scope=openid+profile+read&username=${OPERATOR.username}&password=${OPERATOR.password}`,
  ]);
  const body = JSON.parse(stdout);
  assert.equal(body.token_type, 'Bearer');
  assert.equal(body.expires_in, 1200);
  const claims = jose.decodeJwt(body.access_token);
  assert.equal(claims.exp! - claims.iat!, 20 * 60);
  assert.equal(claims.iss, `${ta.url}/auth/realms/tracking`);
  assert.ok(typeof claims.owner_id === 'string');
  assert.deepEqual(claims.roles, ['read', 'write', 'admin']);
  // The token works on the REST interface as API guide 2 step 3 says.
  const { stdout: owners } = await exec('curl', ['-s', '-H', `Authorization: Bearer ${body.access_token}`, `${ta.url}/api/v1/owners`]);
  assert.ok(Array.isArray(JSON.parse(owners)));
  // Also served without the /auth prefix, and the discovery document and JWKS answer.
  const r2 = await ta.call('POST', '/realms/tracking/protocol/openid-connect/token', {
    headers: { authorization: basic(OPERATOR.clientId, OPERATOR.clientSecret), 'content-type': 'application/x-www-form-urlencoded' },
    body: `grant_type=client_credentials`,
  });
  assert.equal(r2.status, 200);
  const disc = await ta.call('GET', '/auth/realms/tracking/.well-known/openid-configuration');
  assert.equal(disc.body.token_endpoint, `${ta.url}/auth/realms/tracking/protocol/openid-connect/token`);
  const jwks = await ta.call('GET', '/auth/realms/tracking/protocol/openid-connect/certs');
  const key = await jose.importJWK(jwks.body.keys[0], 'ES256');
  await jose.jwtVerify(body.access_token, key, { issuer: `${ta.url}/auth/realms/tracking` });
});

test('wrong client secret, unknown user, wrong password and unsupported grants are refused', async (t) => {
  const ta = await startApp(t);
  const form = (b: Record<string, string>) => new URLSearchParams(b).toString();
  const post = (auth: string, body: Record<string, string>) =>
    ta.call('POST', '/auth/realms/tracking/protocol/openid-connect/token', {
      headers: { authorization: auth, 'content-type': 'application/x-www-form-urlencoded' },
      body: form(body),
    });
  const good = basic(OPERATOR.clientId, OPERATOR.clientSecret);
  let r = await post(basic(OPERATOR.clientId, 'wrong'), {
    grant_type: 'password',
    username: OPERATOR.username,
    password: OPERATOR.password,
  });
  assert.equal(r.status, 401);
  assert.equal(r.body.error, 'invalid_client');
  assert.ok(r.body.message);
  r = await post(good, { grant_type: 'password', username: OPERATOR.username, password: 'nope' });
  assert.equal(r.status, 400);
  assert.equal(r.body.error, 'invalid_grant');
  r = await post(good, { grant_type: 'password', username: 'nobody', password: 'x' });
  assert.equal(r.status, 400);
  r = await post(good, { grant_type: 'device_code' });
  assert.equal(r.status, 400);
  assert.equal(r.body.error, 'unsupported_grant_type');
  // A grant the service knows but this client may not use (the code flow is the dashboard's).
  r = await post(good, { grant_type: 'authorization_code' });
  assert.equal(r.status, 400);
  assert.equal(r.body.error, 'unauthorized_client');
  r = await ta.call('POST', '/auth/realms/other/protocol/openid-connect/token', {
    headers: { authorization: good, 'content-type': 'application/x-www-form-urlencoded' },
    body: 'grant_type=client_credentials',
  });
  assert.equal(r.status, 404);
});

test('an expired token answers 401 saying it expired, and the refresh grant gives a new one', async (t) => {
  const ta = await startApp(t);
  // The service's clock, moved by the test: no waiting, and no 1-second lives a busy machine outruns.
  const tokens = ta.app.services.tokens;
  let nowMs = Date.now();
  tokens.now = () => nowMs;
  const tok = await passwordToken(ta.call, OPERATOR.username, OPERATOR.password);
  assert.equal(tok.expires_in, 1200);
  assert.equal((await ta.call('GET', '/api/v1/owners', { token: tok.access_token })).status, 200);
  nowMs += 1199_000;
  assert.equal((await ta.call('GET', '/api/v1/owners', { token: tok.access_token })).status, 200, 'valid one second before exp');
  nowMs += 2_000;
  const expired = await ta.call('GET', '/api/v1/owners', { token: tok.access_token });
  assert.equal(expired.status, 401);
  assert.equal(expired.body.code, 'TOKEN_EXPIRED');
  assert.match(expired.body.message, /expired/);
  assert.equal(expired.headers['www-authenticate'], 'Bearer');
  const refresh = (refresh_token: string) =>
    ta.call('POST', '/auth/realms/tracking/protocol/openid-connect/token', {
      headers: { authorization: basic(OPERATOR.clientId, OPERATOR.clientSecret), 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token }).toString(),
    });
  const refreshed = await refresh(tok.refresh_token);
  assert.equal(refreshed.status, 200, refreshed.raw);
  assert.equal((await ta.call('GET', '/api/v1/owners', { token: refreshed.body.access_token })).status, 200);
  // A refresh token is not an access token, and an access token is not a refresh token.
  assert.equal((await ta.call('GET', '/api/v1/owners', { token: tok.refresh_token })).status, 401);
  const wrongKind = await refresh(refreshed.body.access_token);
  assert.equal(wrongKind.status, 400);
  // A refresh token expires too (8 h by default).
  nowMs += 8 * 3600_000 + 1000;
  const late = await refresh(refreshed.body.refresh_token);
  assert.equal(late.status, 400, late.raw);
  assert.equal(late.body.error, 'invalid_grant');
  assert.match(late.body.message, /expired/);
});

/** A token request over a real socket from a chosen local address (127.0.0.1, 127.0.0.2, ...). */
function tokenFrom(
  ta: TestApp,
  localAddress: string,
  form: Record<string, string>,
  client: { clientId: string; clientSecret: string } = OPERATOR,
  extraHeaders: Record<string, string> = {},
): Promise<{ status: number; retryAfter: string | undefined; body: any }> {
  const payload = new URLSearchParams(form).toString();
  const u = new URL(`${ta.url}/auth/realms/tracking/protocol/openid-connect/token`);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: 'POST',
        localAddress,
        headers: {
          authorization: basic(client.clientId, client.clientSecret),
          'content-type': 'application/x-www-form-urlencoded',
          'content-length': Buffer.byteLength(payload),
          ...extraHeaders,
        },
      },
      (res) => {
        let raw = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          raw += d;
        });
        res.on('end', () => {
          const retryAfter = res.headers['retry-after'];
          resolve({
            status: res.statusCode ?? 0,
            retryAfter: typeof retryAfter === 'string' ? retryAfter : undefined,
            body: JSON.parse(raw),
          });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

test('ten failed passwords for one user from one address: 429 with Retry-After, the right password too, until the window passes; other pairs are unaffected', async (t) => {
  const ta = await startApp(t);
  const tokens = ta.app.services.tokens;
  let nowMs = Date.now();
  tokens.now = () => nowMs;
  const owner = await ownerWithKey(ta, 'throttle-co');
  const made = await ta.call('POST', '/api/v1/users', {
    token: ta.adminToken,
    body: { username: 'victim', password: 'victim-password', ownerId: owner.ownerId, scopes: ['read'] },
  });
  assert.equal(made.status, 201, made.raw);
  const attempt = (from: string, username: string, password: string) => tokenFrom(ta, from, { grant_type: 'password', username, password });
  for (let i = 1; i <= 10; i++) {
    const r = await attempt('127.0.0.1', 'victim', `wrong-${i}`);
    assert.equal(r.status, 400, `failure ${i}`);
    assert.equal(r.body.error, 'invalid_grant');
  }
  const locked = await attempt('127.0.0.1', 'victim', 'wrong-11');
  assert.equal(locked.status, 429);
  assert.equal(locked.body.error, 'too_many_attempts');
  assert.ok(locked.body.message);
  const retry = Number(locked.retryAfter);
  assert.ok(Number.isInteger(retry) && retry >= 1 && retry <= 300, `Retry-After ${locked.retryAfter}`);
  // The right password is refused as well while the pair is throttled.
  assert.equal((await attempt('127.0.0.1', 'victim', 'victim-password')).status, 429);
  // Another address, and another username from the same address, are not locked out.
  assert.equal((await attempt('127.0.0.2', 'victim', 'victim-password')).status, 200);
  assert.equal((await attempt('127.0.0.1', OPERATOR.username, 'wrong')).status, 400);
  assert.equal((await attempt('127.0.0.1', OPERATOR.username, OPERATOR.password)).status, 200);
  // Still refused just before the window (5 minutes from the first failure) ends, admitted after.
  nowMs += (retry - 1) * 1000;
  assert.equal((await attempt('127.0.0.1', 'victim', 'victim-password')).status, 429);
  nowMs += 2000;
  assert.equal((await attempt('127.0.0.1', 'victim', 'victim-password')).status, 200);
  // Unknown usernames count the same (a lockout must not tell which users exist).
  for (let i = 0; i < 10; i++) assert.equal((await attempt('127.0.0.1', 'nobody-here', 'x')).status, 400);
  assert.equal((await attempt('127.0.0.1', 'nobody-here', 'x')).status, 429);
});

test('failed client secrets are throttled per client and address the same way, with the limits configured', async (t) => {
  const ta = await startApp(t, { AUTH_THROTTLE_FAILURES: '4', AUTH_THROTTLE_WINDOW_SECONDS: '60' });
  const tokens = ta.app.services.tokens;
  let nowMs = Date.now();
  tokens.now = () => nowMs;
  const cc = { grant_type: 'client_credentials' };
  const wrong = { clientId: OPERATOR.clientId, clientSecret: 'wrong-secret' };
  for (let i = 1; i <= 4; i++) {
    const r = await tokenFrom(ta, '127.0.0.1', cc, wrong);
    assert.equal(r.status, 401, `failure ${i}`);
    assert.equal(r.body.error, 'invalid_client');
  }
  const locked = await tokenFrom(ta, '127.0.0.1', cc);
  assert.equal(locked.status, 429, 'the right secret is refused while throttled');
  const retry = Number(locked.retryAfter);
  assert.ok(Number.isInteger(retry) && retry >= 1 && retry <= 60, `Retry-After ${locked.retryAfter}`);
  assert.equal((await tokenFrom(ta, '127.0.0.2', cc)).status, 200, 'another address');
  nowMs += 61_000;
  assert.equal((await tokenFrom(ta, '127.0.0.1', cc)).status, 200, 'after the window');
});

test('made-up client ids and usernames store nothing: their failures are counted in bounded memory and refused alike', async (t) => {
  const ta = await startApp(t, { AUTH_THROTTLE_FAILURES: '3' });
  const rows = async () =>
    Number((await ta.app.services.db.query<{ n: number }>('SELECT count(*)::int AS n FROM auth_throttle')).rows[0]!.n);
  const before = await rows();
  const cc = { grant_type: 'client_credentials' };
  for (let i = 0; i < 200; i++) {
    const r = await tokenFrom(ta, '127.0.0.1', cc, { clientId: `nobody-${i}`, clientSecret: 'x' });
    assert.equal(r.status, 401);
  }
  assert.equal(await rows(), before, 'no row per made-up client id (the old code stored each for a day)');
  // One made-up name from one address is throttled exactly as a real one: nothing tells them apart.
  for (const clientId of ['ghost', OPERATOR.clientId]) {
    for (let i = 0; i < 3; i++) assert.equal((await tokenFrom(ta, '127.0.0.2', cc, { clientId, clientSecret: 'x' })).status, 401);
    const r = await tokenFrom(ta, '127.0.0.2', cc, { clientId, clientSecret: 'x' });
    assert.equal(r.status, 429, clientId);
    assert.ok(Number(r.retryAfter) >= 1);
  }
  // Made-up usernames with a real client, and on the sign-in page, store nothing either.
  const pw = { grant_type: 'password', scope: 'openid' };
  for (let i = 0; i < 20; i++) {
    assert.equal((await tokenFrom(ta, '127.0.0.3', { ...pw, username: `nobody-${i}`, password: 'x' })).status, 400);
  }
  const challenge = 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM';
  for (let i = 0; i < 20; i++) {
    const r = await fetch(`${ta.url}/auth/realms/tracking/protocol/openid-connect/auth`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: ta.url },
      body: new URLSearchParams({
        response_type: 'code',
        client_id: 'dashboard',
        redirect_uri: `${ta.url}/dashboard/`,
        code_challenge: challenge,
        code_challenge_method: 'S256',
        username: `nobody-${i}`,
        password: 'x',
      }).toString(),
    });
    assert.equal(r.status, 401);
  }
  assert.equal(await rows(), before + 1, 'only the real client, which failed, has a row');
});

test('a burst of attempts sent at once is throttled as exactly as attempts sent one by one', async (t) => {
  const ta = await startApp(t, { AUTH_THROTTLE_FAILURES: '10' });
  const wrong = { grant_type: 'password', scope: 'openid', username: OPERATOR.username, password: 'guess' };
  const burst = await Promise.all(Array.from({ length: 30 }, () => tokenFrom(ta, '127.0.0.1', wrong)));
  const statuses = burst.map((r) => r.status);
  assert.equal(statuses.filter((s) => s === 400).length, 10, `only 10 guesses are checked: ${statuses.join(' ')}`);
  assert.equal(statuses.filter((s) => s === 429).length, 20);
  const right = await tokenFrom(ta, '127.0.0.1', { ...wrong, password: OPERATOR.password });
  assert.equal(right.status, 429, 'the right password too, while throttled');
});

test('behind a trusted proxy (TRUST_PROXY) throttling keys on X-Forwarded-For; otherwise that header is ignored', async (t) => {
  const cc = { grant_type: 'client_credentials' };
  const wrong = { clientId: OPERATOR.clientId, clientSecret: 'wrong-secret' };
  const from = (ta: TestApp, xff: string, client = wrong) => tokenFrom(ta, '127.0.0.1', cc, client, { 'x-forwarded-for': xff });
  const proxied = await startApp(t, { AUTH_THROTTLE_FAILURES: '2', TRUST_PROXY: '127.0.0.0/8' });
  for (let i = 0; i < 2; i++) assert.equal((await from(proxied, '203.0.113.5')).status, 401);
  assert.equal((await from(proxied, '203.0.113.5', OPERATOR)).status, 429, 'that client address is throttled');
  assert.equal((await from(proxied, '203.0.113.6', OPERATOR)).status, 200, 'another client behind the same proxy is not');
  const direct = await startApp(t, { AUTH_THROTTLE_FAILURES: '2' });
  for (let i = 0; i < 2; i++) assert.equal((await from(direct, `203.0.113.${10 + i}`)).status, 401);
  assert.equal((await from(direct, '203.0.113.99', OPERATOR)).status, 429, 'an untrusted header cannot dodge the throttle');
});

test('a wrong password takes as long for an unknown user as for a real one', async (t) => {
  // At the default cost (the other tests hash at a sixteenth of it): the time is scrypt's.
  const ta = await startApp(t, { AUTH_THROTTLE_FAILURES: '100000', PASSWORD_HASH_COST: String(DEFAULT_PASSWORD_COST) });
  const form = (username: string) => new URLSearchParams({ grant_type: 'password', username, password: 'definitely-wrong' }).toString();
  const timed = async (username: string) => {
    const started = performance.now();
    const r = await ta.call('POST', '/auth/realms/tracking/protocol/openid-connect/token', {
      headers: { authorization: basic(OPERATOR.clientId, OPERATOR.clientSecret), 'content-type': 'application/x-www-form-urlencoded' },
      body: form(username),
    });
    assert.equal(r.status, 400);
    return performance.now() - started;
  };
  await timed('nobody-at-all');
  await timed(OPERATOR.username);
  const known: number[] = [];
  const unknown: number[] = [];
  // Interleaved, so load from elsewhere falls on both alike; medians, and a generous ratio.
  for (let i = 0; i < 15; i++) {
    known.push(await timed(OPERATOR.username));
    unknown.push(await timed(`nobody-${i}`));
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const k = median(known);
  const u = median(unknown);
  t.diagnostic(`wrong password, median of 15: known user ${k.toFixed(1)} ms, unknown user ${u.toFixed(1)} ms`);
  assert.ok(u >= 0.5 * k, `unknown user median ${u.toFixed(1)} ms vs known ${k.toFixed(1)} ms`);
});

test('passwords are stored at PASSWORD_HASH_COST; a sign-in stores a hash made at another cost again at the setting, and only then', async (t) => {
  const ta = await startApp(t, { PASSWORD_HASH_COST: String(DEFAULT_PASSWORD_COST) });
  const db = ta.app.services.db;
  const hashOf = async (username: string) =>
    (await db.query<{ password_hash: string }>('SELECT password_hash FROM users WHERE username = $1', [username])).rows[0]!.password_hash;
  const costOf = async (username: string) => Number((await hashOf(username)).split('$')[1]);
  assert.equal(await costOf(OPERATOR.username), 2 ** DEFAULT_PASSWORD_COST, 'the bootstrap user');
  const owner = await ownerWithKey(ta, 'hash-cost-co');
  const made = await ta.call('POST', '/api/v1/users', {
    token: ta.adminToken,
    body: { username: 'cost-user', password: 'cost-user-password', ownerId: owner.ownerId, scopes: ['read'] },
  });
  assert.equal(made.status, 201, made.raw);
  assert.equal(await costOf('cost-user'), 2 ** DEFAULT_PASSWORD_COST, 'a user made over the API');
  // A hash from before the setting changed (N=2^10): a wrong password leaves it, the right one replaces it.
  await db.query('UPDATE users SET password_hash = $2 WHERE username = $1', ['cost-user', await hashPassword('cost-user-password', 10)]);
  await assert.rejects(passwordToken(ta.call, 'cost-user', 'not-the-password'));
  assert.equal(await costOf('cost-user'), 2 ** 10, 'a wrong password changes nothing');
  await passwordToken(ta.call, 'cost-user', 'cost-user-password');
  const stored = await hashOf('cost-user');
  assert.equal(Number(stored.split('$')[1]), 2 ** DEFAULT_PASSWORD_COST, 'stored again at the setting');
  await passwordToken(ta.call, 'cost-user', 'cost-user-password');
  assert.equal(await hashOf('cost-user'), stored, 'a hash at the setting is left as it is');
});

test('forged tokens (wrong signature, alg none, wrong issuer, garbage) and missing credentials all answer 401', async (t) => {
  const ta = await startApp(t);
  const real = jose.decodeJwt(ta.adminToken);
  const header = jose.decodeProtectedHeader(ta.adminToken);
  const claims = { ...real };
  // Wrong signature: same kid and claims, signed with another key.
  const { privateKey } = await jose.generateKeyPair('ES256');
  const wrongSig = await new jose.SignJWT(claims).setProtectedHeader({ alg: 'ES256', kid: header.kid!, typ: 'JWT' }).sign(privateKey);
  // alg none: unsigned.
  const none = new jose.UnsecuredJWT(claims).encode();
  const [h, p] = ta.adminToken.split('.');
  const noneSameKid = `${Buffer.from(JSON.stringify({ alg: 'none', kid: header.kid, typ: 'JWT' })).toString('base64url')}.${p}.`;
  // HS256 with the public key as secret (algorithm confusion).
  const jwks = await ta.call('GET', '/auth/realms/tracking/protocol/openid-connect/certs');
  const hs = await new jose.SignJWT(claims)
    .setProtectedHeader({ alg: 'HS256', kid: header.kid! })
    .sign(new TextEncoder().encode(JSON.stringify(jwks.body.keys[0])));
  // Wrong issuer, signed by a key the attacker controls.
  const wrongIss = await new jose.SignJWT({ ...claims, iss: 'http://evil.example/auth/realms/tracking' })
    .setProtectedHeader({ alg: 'ES256', kid: header.kid! })
    .sign(privateKey);
  // Tampered payload with the real signature.
  const tampered = `${h}.${Buffer.from(JSON.stringify({ ...claims, roles: ['read', 'write', 'admin'], owner_id: '00000000-0000-0000-0000-000000000000' })).toString('base64url')}.${ta.adminToken.split('.')[2]}`;
  for (const [name, token] of Object.entries({
    wrongSig,
    none,
    noneSameKid,
    hs,
    wrongIss,
    tampered,
    garbage: 'not-a-jwt',
    unknownKey: 'atk_nope',
  })) {
    const r = await ta.call('GET', '/api/v1/owners', { token });
    assert.equal(r.status, 401, `${name}: ${r.raw}`);
    assert.equal(r.headers['www-authenticate'], 'Bearer', name);
    assert.ok(r.body.error && r.body.message, name);
  }
  assert.equal((await ta.call('GET', '/api/v1/owners')).status, 401);
  assert.equal((await ta.call('GET', '/api/v1/owners', { headers: { authorization: 'Basic abc' } })).status, 401);
});

test('a credential lacking the needed scope answers 403; admin routes need admin', async (t) => {
  const ta = await startApp(t);
  const reader = await ownerWithKey(ta, 'reader-co', { scopes: ['read'] });
  const writer = await ownerWithKey(ta, 'writer-co', { scopes: ['read', 'write'] });
  assert.equal((await ta.call('GET', '/api/v1/assets', { token: reader.key })).status, 200);
  const w = await ta.call('POST', '/api/v1/assets', { token: reader.key, body: { name: 'A1' } });
  assert.equal(w.status, 403);
  assert.match(w.body.message, /write/);
  assert.equal((await ta.call('GET', '/api/v1/assets', { token: reader.key })).body.length, 0, 'nothing stored');
  assert.equal((await ta.call('POST', '/api/v1/owners', { token: writer.key, body: { name: 'x' } })).status, 403);
  assert.equal((await ta.call('GET', '/api/v1/users', { token: writer.key })).status, 403);
  // No key wider than its creator.
  const wider = await ta.call('POST', '/api/v1/api-keys', { token: writer.key, body: { name: 'k', scopes: ['read', 'admin'] } });
  assert.equal(wider.status, 403);
  const ok = await ta.call('POST', '/api/v1/api-keys', { token: writer.key, body: { name: 'k', scopes: ['read'] } });
  assert.equal(ok.status, 201);
  assert.match(ok.body.key, /^atk_/);
  const list = await ta.call('GET', '/api/v1/api-keys', { token: writer.key });
  assert.ok(
    list.body.every((k: Record<string, unknown>) => !('key' in k)),
    'the secret is shown only once',
  );
  // A revoked key stops working at once.
  assert.equal((await ta.call('DELETE', `/api/v1/api-keys/${ok.body.id}`, { token: writer.key })).status, 204);
  assert.equal((await ta.call('GET', '/api/v1/assets', { token: ok.body.key })).status, 401);
});

test('failed sign-ins naming nobody: one audit entry per address and window with a count, the name masked; a real user’s failure in the flood is kept as typed', async (t) => {
  const ta = await startApp(t, { AUTH_THROTTLE_FAILURES: '1000' });
  const db = ta.app.services.db;
  const owner = await ownerWithKey(ta, 'audit-flood-co');
  const made = await ta.call('POST', '/api/v1/users', {
    token: ta.adminToken,
    body: { username: 'real-user', password: 'real-user-password', ownerId: owner.ownerId, scopes: ['read'] },
  });
  assert.equal(made.status, 201, made.raw);
  const rowsFrom = async (address: string) =>
    (
      await db.query<{ actor_id: string | null; resource_type: string; changes: any }>(
        "SELECT actor_id, resource_type, changes FROM audit_log WHERE action = 'signInFailed' AND address = $1 ORDER BY id",
        [address],
      )
    ).rows;
  // A password typed into the username box is what a made-up name may be.
  const typedPassword = 'Tr0ub4dor&3-horse-battery';
  const pw = { grant_type: 'password', scope: 'openid' };
  // 500 failed sign-ins from one client: 200 made-up usernames (each costs a scrypt hash, as a real
  // one does), 300 made-up client ids.
  const burst = 200;
  let next = 0;
  const one = async () => {
    for (let i = next++; i < burst; i = next++) {
      const username = i === 0 ? typedPassword : `guess-${i}-${Math.random().toString(36).slice(2)}`;
      assert.equal((await tokenFrom(ta, '127.0.0.4', { ...pw, username, password: 'x' })).status, 400);
      // A real user's failure in the middle of the flood is its own entry, the name as typed.
      if (i === 100) assert.equal((await tokenFrom(ta, '127.0.0.4', { ...pw, username: 'real-user', password: 'wrong' })).status, 400);
    }
  };
  await Promise.all(Array.from({ length: 8 }, one));
  // Made-up client ids from the same address: an entry of their own kind.
  for (let i = 0; i < 300; i++) {
    assert.equal(
      (await tokenFrom(ta, '127.0.0.4', { grant_type: 'client_credentials' }, { clientId: `ghost-${i}`, clientSecret: 'x' })).status,
      401,
    );
  }
  const rows = await rowsFrom('127.0.0.4');
  const unknownUsers = rows.filter((r) => r.actor_id === null && r.resource_type === 'user');
  const unknownClients = rows.filter((r) => r.actor_id === null && r.resource_type === 'client');
  const real = rows.filter((r) => r.actor_id !== null);
  assert.equal(unknownUsers.length, 1, `200 made-up usernames are one entry (the old code wrote one each): ${rows.length} rows`);
  assert.equal(unknownUsers[0]!.changes.attempts.to, burst);
  assert.equal(unknownUsers[0]!.changes.reason.to, 'unknown username');
  assert.match(unknownUsers[0]!.changes.username.to, /^.…\(\d+\)$/, 'masked: first character and length');
  assert.ok(!Number.isNaN(Date.parse(unknownUsers[0]!.changes.lastAt.to)));
  assert.equal(unknownClients.length, 1);
  assert.equal(unknownClients[0]!.changes.attempts.to, 300);
  assert.equal(real.length, 1, 'the real user’s failure is recorded');
  assert.equal(real[0]!.changes.username.to, 'real-user', 'a name that names a user is kept as typed');
  const all = JSON.stringify((await db.query('SELECT changes FROM audit_log')).rows);
  assert.ok(!all.includes(typedPassword) && !all.includes('guess-'), 'no made-up name is kept as typed');
  assert.ok(rows.length <= 3, `at most one entry per kind for the window, plus the real user's: ${rows.length}`);

  // The sign-in page's made-up names are aggregated alike (another address here: an entry of its own).
  const page = await fetch(`${ta.url}/auth/realms/tracking/protocol/openid-connect/auth`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: ta.url },
    body: new URLSearchParams({
      response_type: 'code',
      client_id: 'dashboard',
      redirect_uri: `${ta.url}/dashboard/`,
      code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
      code_challenge_method: 'S256',
      username: 'page-guess',
      password: 'x',
    }).toString(),
  });
  assert.equal(page.status, 401);
  const after = (await rowsFrom('127.0.0.1')).filter((r) => r.actor_id === null);
  assert.equal(after.length, 1);
  assert.equal(after[0]!.changes.username.to, 'p…(10)');
});

test('GET /me tells any credential who it is: actor, owner, scopes, admin and a name to show', async (t) => {
  const ta = await startApp(t);
  const operator = await ta.call('GET', '/api/v1/me', { token: ta.adminToken });
  assert.equal(operator.status, 200, operator.raw);
  assert.equal(operator.body.admin, true);
  assert.ok(operator.body.scopes.includes('admin'));
  assert.match(operator.body.actor, /^(user|client):/);
  assert.equal(typeof operator.body.name, 'string');
  const reader = await ownerWithKey(ta, 'me-reader', { scopes: ['read'] });
  const r = await ta.call('GET', '/api/v1/me', { token: reader.key });
  assert.equal(r.status, 200, r.raw);
  assert.deepEqual(
    { ownerId: r.body.ownerId, scopes: r.body.scopes, admin: r.body.admin, name: r.body.name },
    { ownerId: reader.ownerId, scopes: ['read'], admin: false, name: 'me-reader-key' },
  );
  assert.match(r.body.actor, /^apikey:[0-9a-f-]{36}$/);
  assert.equal((await ta.call('GET', '/api/v1/me')).status, 401, 'no credential');
});
