// API guide 2: "A real Keycloak must work." A real Keycloak (scripts/keycloak.sh, realm from
// test/fixtures/keycloak-realm.json) issues the tokens; the service verifies them against its JWKS
// and reads the owner from the `owner_id` claim and the roles from `realm_access.roles`.
// Users are created through Keycloak's admin REST API at run time, with a unique name per run.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { test, type TestContext } from 'node:test';
import * as jose from 'jose';
import { ownerWithKey, requireService, startApp, type TestApp } from './helpers.js';

const KC = (process.env.KEYCLOAK_URL ?? 'http://127.0.0.1:18180').replace(/\/+$/, '');
const REALM = 'tracking-test';
const ISSUER = `${KC}/realms/${REALM}`;
const CLIENT = { id: 'tracking-api-test', secret: 'kc-test-secret' };
const RUN = `${Date.now().toString(36)}-${crypto.randomBytes(3).toString('hex')}`;

async function keycloakAvailable(): Promise<boolean> {
  try {
    const r = await fetch(`${ISSUER}/.well-known/openid-configuration`, { signal: AbortSignal.timeout(30_000) });
    return r.ok;
  } catch {
    return false;
  }
}

const form = (b: Record<string, string>) => ({
  method: 'POST',
  headers: { 'content-type': 'application/x-www-form-urlencoded' },
  body: new URLSearchParams(b).toString(),
  signal: AbortSignal.timeout(60_000),
});

async function adminToken(): Promise<string> {
  const r = await fetch(
    `${KC}/realms/master/protocol/openid-connect/token`,
    form({ grant_type: 'password', client_id: 'admin-cli', username: 'admin', password: 'admin' }),
  );
  if (!r.ok) throw new Error(`Keycloak admin token: ${r.status} ${await r.text()}`);
  return ((await r.json()) as { access_token: string }).access_token;
}

/** A thin client for Keycloak's admin REST API on the test realm; deletes its users when the test ends. */
async function keycloakAdmin(t: TestContext) {
  const token = await adminToken();
  const api = async (method: string, path: string, body?: unknown) => {
    const r = await fetch(`${KC}/admin/realms/${REALM}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(60_000),
    });
    if (!r.ok) throw new Error(`Keycloak admin ${method} ${path}: ${r.status} ${await r.text()}`);
    return r;
  };
  const created: string[] = [];
  t.after(async () => {
    for (const id of created) await api('DELETE', `/users/${id}`).catch(() => {}); // best effort
  });
  return {
    /** Creates an enabled user with a non-temporary password, the given owner_id and realm roles. */
    async createUser(label: string, opts: { ownerId?: string; roles: string[] }) {
      const username = `${label}-${RUN}`;
      const password = crypto.randomBytes(12).toString('base64url');
      const r = await api('POST', '/users', {
        username,
        enabled: true,
        email: `${username}@example.test`,
        emailVerified: true,
        firstName: 'Test',
        lastName: label,
        ...(opts.ownerId ? { attributes: { owner_id: [opts.ownerId] } } : {}),
        credentials: [{ type: 'password', value: password, temporary: false }],
      });
      const id = r.headers.get('location')!.split('/').pop()!;
      created.push(id);
      if (opts.roles.length) {
        const roles = await Promise.all(opts.roles.map(async (n) => (await api('GET', `/roles/${n}`)).json()));
        await api('POST', `/users/${id}/role-mappings/realm`, roles);
      }
      if (opts.ownerId) {
        const stored = (await (await api('GET', `/users/${id}`)).json()) as { attributes?: Record<string, string[]> };
        assert.deepEqual(stored.attributes?.owner_id, [opts.ownerId], 'Keycloak stored the owner_id attribute');
      }
      return { id, username, password };
    },
  };
}

/** An access token from Keycloak's own token endpoint, password grant, for the test client. */
async function keycloakToken(user: { username: string; password: string }): Promise<string> {
  const r = await fetch(
    `${ISSUER}/protocol/openid-connect/token`,
    form({
      grant_type: 'password',
      client_id: CLIENT.id,
      client_secret: CLIENT.secret,
      scope: 'openid',
      username: user.username,
      password: user.password,
    }),
  );
  if (!r.ok) throw new Error(`Keycloak token: ${r.status} ${await r.text()}`);
  return ((await r.json()) as { access_token: string }).access_token;
}

const externalEnv = (extra: Record<string, string> = {}) => ({
  AUTH_EXTERNAL_ISSUER: ISSUER,
  AUTH_OWNER_CLAIM: 'owner_id',
  AUTH_ROLES_CLAIM: 'realm_access.roles',
  ...extra,
});

function assert401(r: Awaited<ReturnType<TestApp['call']>>, what: string) {
  assert.equal(r.status, 401, `${what}: ${r.raw}`);
  assert.equal(r.body.code, 'UNAUTHENTICATED', what);
  assert.match(String(r.headers['www-authenticate']), /^Bearer/, what);
}

test('a real Keycloak token is accepted: owner from owner_id, roles from realm_access.roles, tenancy enforced', async (t) => {
  if (!requireService(t, await keycloakAvailable(), `Keycloak at ${KC}`, 'bash scripts/keycloak.sh')) return;
  const ta = await startApp(t, externalEnv());
  const a = await ownerWithKey(ta, `kc-owner-a-${RUN}`);
  const b = await ownerWithKey(ta, `kc-owner-b-${RUN}`);
  const assetA = await ta.call('POST', '/api/v1/assets', { token: a.key, body: { name: 'KC-A-1' } });
  const assetB = await ta.call('POST', '/api/v1/assets', { token: b.key, body: { name: 'KC-B-1' } });
  assert.equal(assetA.status, 201, assetA.raw);
  assert.equal(assetB.status, 201, assetB.raw);

  const kc = await keycloakAdmin(t);
  const writer = await kc.createUser('writer', { ownerId: a.ownerId, roles: ['read', 'write'] });
  const token = await keycloakToken(writer);
  const claims = jose.decodeJwt(token);
  assert.equal(claims.iss, ISSUER);
  assert.equal(claims.owner_id, a.ownerId);
  assert.ok((claims.realm_access as { roles: string[] }).roles.includes('write'));
  assert.equal(jose.decodeProtectedHeader(token).alg, 'RS256');

  // Reads: exactly owner A's asset; owner B's asset does not exist for this caller.
  const list = await ta.call('GET', '/api/v1/assets', { token });
  assert.equal(list.status, 200, list.raw);
  assert.deepEqual(
    list.body.map((x: { id: string }) => x.id),
    [assetA.body.id],
  );
  assert.equal((await ta.call('GET', `/api/v1/assets/${assetA.body.id}`, { token })).status, 200);
  assert.equal((await ta.call('GET', `/api/v1/assets/${assetB.body.id}`, { token })).status, 404);

  // Writes: the `write` realm role allows creating, in owner A by default.
  const created = await ta.call('POST', '/api/v1/assets', { token, body: { name: 'KC-A-2' } });
  assert.equal(created.status, 201, created.raw);
  assert.equal(created.body.ownerId, a.ownerId);

  // A user with only the `read` role reads but may not write.
  const reader = await kc.createUser('reader', { ownerId: a.ownerId, roles: ['read'] });
  const readToken = await keycloakToken(reader);
  assert.equal((await ta.call('GET', '/api/v1/assets', { token: readToken })).body.length, 2);
  const denied = await ta.call('POST', '/api/v1/assets', { token: readToken, body: { name: 'KC-A-3' } });
  assert.equal(denied.status, 403, denied.raw);

  // A valid Keycloak token without an owner_id claim is refused.
  const ownerless = await kc.createUser('ownerless', { roles: ['read', 'write'] });
  const ownerlessToken = await keycloakToken(ownerless);
  assert.equal(jose.decodeJwt(ownerlessToken).owner_id, undefined);
  assert401(await ta.call('GET', '/api/v1/assets', { token: ownerlessToken }), 'no owner_id');

  // The writer's token with its payload changed to owner B (signature kept) is refused.
  const [h, , s] = token.split('.');
  const forged = Buffer.from(JSON.stringify({ ...claims, owner_id: b.ownerId })).toString('base64url');
  assert401(await ta.call('GET', '/api/v1/assets', { token: `${h}.${forged}.${s}` }), 'tampered payload');

  // So is a token with Keycloak's issuer and key id but signed by some other key.
  const { privateKey } = await jose.generateKeyPair('RS256');
  const foreign = await new jose.SignJWT({ ...claims, owner_id: b.ownerId })
    .setProtectedHeader(jose.decodeProtectedHeader(token) as jose.JWTHeaderParameters)
    .sign(privateKey);
  assert401(await ta.call('GET', '/api/v1/assets', { token: foreign }), 'signed by another key');
  assert.equal((await ta.call('GET', '/api/v1/assets', { token })).status, 200, 'the real token still works');
});

test('AUTH_EXTERNAL_AUDIENCE: a Keycloak token is accepted only when it carries that audience', async (t) => {
  if (!requireService(t, await keycloakAvailable(), `Keycloak at ${KC}`, 'bash scripts/keycloak.sh')) return;
  // The realm's client adds audience `tracking-api` (oidc-audience-mapper), next to Keycloak's `account`.
  const matching = await startApp(t, externalEnv({ AUTH_EXTERNAL_AUDIENCE: 'tracking-api' }));
  const other = await startApp(t, externalEnv({ AUTH_EXTERNAL_AUDIENCE: 'some-other-api' }), {
    ...(matching.databaseUrl ? { databaseUrl: matching.databaseUrl } : {}),
  });
  const a = await ownerWithKey(matching, `kc-aud-${RUN}`);
  const kc = await keycloakAdmin(t);
  const user = await kc.createUser('aud', { ownerId: a.ownerId, roles: ['read'] });
  const token = await keycloakToken(user);
  const aud = jose.decodeJwt(token).aud;
  assert.ok((Array.isArray(aud) ? aud : [aud]).includes('tracking-api'), `aud: ${JSON.stringify(aud)}`);
  assert.ok(!(Array.isArray(aud) ? aud : [aud]).includes('some-other-api'));
  assert.equal((await matching.call('GET', '/api/v1/assets', { token })).status, 200);
  assert401(await other.call('GET', '/api/v1/assets', { token }), 'audience not carried');
});
