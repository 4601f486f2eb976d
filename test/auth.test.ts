// Spec 4.2 and 5.1, API.md section 2: the token request exactly as the spec writes it, expiry,
// refresh, and every kind of bad token answering 401; a missing scope answering 403.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { test } from 'node:test';
import * as jose from 'jose';
import { OPERATOR, ownerWithKey, passwordToken, startApp, basic } from './helpers.js';

const exec = promisify(execFile);

test('the spec 4.2 token request sent by curl returns a JWT that expires 20 minutes after issue', async (t) => {
  const ta = await startApp(t);
  const u = new URL(ta.url);
  // Exactly as spec 4.2: POST {auth_url}/protocol/openid-connect/token, client id and secret as the
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
  // The token works on the REST interface as spec 5.1 step 3 says.
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
  r = await post(good, { grant_type: 'authorization_code' });
  assert.equal(r.status, 400);
  assert.equal(r.body.error, 'unsupported_grant_type');
  r = await ta.call('POST', '/auth/realms/other/protocol/openid-connect/token', {
    headers: { authorization: good, 'content-type': 'application/x-www-form-urlencoded' },
    body: 'grant_type=client_credentials',
  });
  assert.equal(r.status, 404);
});

test('an expired token answers 401 saying it expired, and the refresh grant gives a new one', async (t) => {
  const ta = await startApp(t, { TOKEN_LIFE_SECONDS: '1' });
  const tok = await passwordToken(ta.call, OPERATOR.username, OPERATOR.password);
  assert.equal(tok.expires_in, 1);
  assert.equal((await ta.call('GET', '/api/v1/owners', { token: tok.access_token })).status, 200);
  await new Promise((r) => setTimeout(r, 2100));
  const expired = await ta.call('GET', '/api/v1/owners', { token: tok.access_token });
  assert.equal(expired.status, 401);
  assert.equal(expired.body.code, 'TOKEN_EXPIRED');
  assert.match(expired.body.message, /expired/);
  assert.equal(expired.headers['www-authenticate'], 'Bearer');
  const refreshed = await ta.call('POST', '/auth/realms/tracking/protocol/openid-connect/token', {
    headers: { authorization: basic(OPERATOR.clientId, OPERATOR.clientSecret), 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: tok.refresh_token }).toString(),
  });
  assert.equal(refreshed.status, 200, refreshed.raw);
  assert.equal((await ta.call('GET', '/api/v1/owners', { token: refreshed.body.access_token })).status, 200);
  // A refresh token is not an access token, and an access token is not a refresh token.
  assert.equal((await ta.call('GET', '/api/v1/owners', { token: tok.refresh_token })).status, 401);
  const wrongKind = await ta.call('POST', '/auth/realms/tracking/protocol/openid-connect/token', {
    headers: { authorization: basic(OPERATOR.clientId, OPERATOR.clientSecret), 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshed.body.access_token }).toString(),
  });
  assert.equal(wrongKind.status, 400);
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
