// API guide 2, revocation: deleting or disabling a user or a client, a new password or
// narrower scopes end its tokens at once on this instance and within 10 s on another; refresh
// tokens rotate and a replayed one ends the whole login; API keys belong to their owner. A user moved
// to another owner counts as changed too: its tokens name the old owner.
// Requests go over the app's real socket.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { basic, OPERATOR, ownerWithKey, passwordToken, startApp, TEST_DB, type TestApp } from './helpers.js';

const TOKEN_PATH = '/auth/realms/tracking/protocol/openid-connect/token';
// A long cache: "at once" on the instance that made the change must not come from its expiry.
const ENV = { AUTH_SESSION_CACHE_MS: '9000', RATE_LIMIT_MAX: '100000' };

interface Tokens {
  access_token: string;
  refresh_token: string;
}

/** An authenticated GET over the socket: the status, and the message of an error. */
async function probe(ta: TestApp, token: string): Promise<{ status: number; message?: string; wwwAuthenticate: string | null }> {
  const r = await fetch(`${ta.url}/api/v1/assets?limit=1`, { headers: { authorization: `Bearer ${token}` } });
  const body = (await r.json()) as { message?: string };
  return { status: r.status, message: body.message, wwwAuthenticate: r.headers.get('www-authenticate') };
}

async function assertRevoked(ta: TestApp, token: string, what: string): Promise<void> {
  const r = await probe(ta, token);
  assert.equal(r.status, 401, `${what}: expected 401, got ${r.status}`);
  assert.equal(r.wwwAuthenticate, 'Bearer', what);
  assert.match(r.message ?? '', /revoked/, what);
}

type ClientCreds = { clientId: string; clientSecret: string };

async function tokenRequest(ta: TestApp, form: Record<string, string>, client: ClientCreds = OPERATOR) {
  const r = await fetch(`${ta.url}${TOKEN_PATH}`, {
    method: 'POST',
    headers: { authorization: basic(client.clientId, client.clientSecret), 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(form).toString(),
  });
  return { status: r.status, body: (await r.json()) as any };
}

const refresh = (ta: TestApp, refreshToken: string, client: ClientCreds = OPERATOR) =>
  tokenRequest(ta, { grant_type: 'refresh_token', refresh_token: refreshToken }, client);

async function makeUser(ta: TestApp, ownerId: string, username: string, scopes: string[] = ['read', 'write']): Promise<string> {
  const r = await ta.call('POST', '/api/v1/users', {
    token: ta.adminToken,
    body: { username, password: `${username}-password`, ownerId, scopes },
  });
  assert.equal(r.status, 201, r.raw);
  return r.body.id;
}

test("deleting or disabling a user, a new password or narrower scopes end the user's tokens at once, refresh tokens included", async (t) => {
  const ta = await startApp(t, ENV);
  const { ownerId } = await ownerWithKey(ta, 'revoke-users');
  const elsewhere = await ownerWithKey(ta, 'revoke-users-elsewhere');
  const bystander = await makeUser(ta, ownerId, 'bystander');
  const bystanderTok = await passwordToken(ta.call, 'bystander', 'bystander-password');
  const changes: Record<string, (id: string) => Promise<number>> = {
    deleted: async (id) => (await ta.call('DELETE', `/api/v1/users/${id}`, { token: ta.adminToken })).status,
    disabled: async (id) => (await ta.call('PATCH', `/api/v1/users/${id}`, { token: ta.adminToken, body: { disabled: true } })).status,
    'password changed': async (id) =>
      (await ta.call('PATCH', `/api/v1/users/${id}`, { token: ta.adminToken, body: { password: 'a-brand-new-password' } })).status,
    'scopes narrowed': async (id) =>
      (await ta.call('PATCH', `/api/v1/users/${id}`, { token: ta.adminToken, body: { scopes: ['read'] } })).status,
    // Its tokens name the owner whose data they reach.
    'moved to another owner': async (id) =>
      (await ta.call('PATCH', `/api/v1/users/${id}`, { token: ta.adminToken, body: { ownerId: elsewhere.ownerId } })).status,
  };
  for (const [what, change] of Object.entries(changes)) {
    const username = `user-${what.replace(/ /g, '-')}`;
    const id = await makeUser(ta, ownerId, username);
    const tok = await passwordToken(ta.call, username, `${username}-password`);
    // A second login of the same user, already refreshed once: all its tokens end too.
    const other = await passwordToken(ta.call, username, `${username}-password`);
    const rotated = await refresh(ta, other.refresh_token);
    assert.equal(rotated.status, 200, `${what}: refresh before the change`);
    for (const token of [tok.access_token, other.access_token, rotated.body.access_token]) {
      assert.equal((await probe(ta, token)).status, 200, `${what}: the token works before`);
    }
    assert.ok([200, 204].includes(await change(id)), `${what}: the change`);
    for (const token of [tok.access_token, other.access_token, rotated.body.access_token]) await assertRevoked(ta, token, what);
    for (const r of [tok.refresh_token, rotated.body.refresh_token]) {
      const again = await refresh(ta, r);
      assert.equal(again.status, 400, `${what}: refresh after the change`);
      assert.equal(again.body.error, 'invalid_grant', what);
    }
    // Only this user's tokens: the bystander's and the operator's still work.
    assert.equal((await probe(ta, bystanderTok.access_token)).status, 200, `${what}: bystander`);
    assert.equal((await probe(ta, ta.adminToken)).status, 200, `${what}: operator`);
  }
  // After a new password or narrower scopes, a new login works, with the new scopes.
  const fresh = await passwordToken(ta.call, 'user-password-changed', 'a-brand-new-password');
  assert.equal((await probe(ta, fresh.access_token)).status, 200);
  const narrowed = await tokenRequest(ta, {
    grant_type: 'password',
    username: 'user-scopes-narrowed',
    password: 'user-scopes-narrowed-password',
  });
  assert.equal(narrowed.status, 200);
  assert.equal(narrowed.body.scope, 'openid profile read');
  assert.equal((await probe(ta, narrowed.body.access_token)).status, 200);
  // Widening scopes or touching nothing that tokens carry revokes nothing.
  await ta.call('PATCH', `/api/v1/users/${bystander}`, { token: ta.adminToken, body: { scopes: ['read', 'write', 'admin'] } });
  assert.equal((await probe(ta, bystanderTok.access_token)).status, 200, 'widened');
});

test('deleting, disabling or narrowing a client ends the tokens issued through it at once; a disabled client gets none', async (t) => {
  const ta = await startApp(t, ENV);
  const { ownerId } = await ownerWithKey(ta, 'revoke-clients');
  await makeUser(ta, ownerId, 'client-user');
  const makeClient = async (clientId: string, scopes: string[]) => {
    const r = await ta.call('POST', '/api/v1/clients', {
      token: ta.adminToken,
      body: { clientId, grants: ['password', 'refresh_token', 'client_credentials'], ownerId, scopes },
    });
    assert.equal(r.status, 201, r.raw);
    assert.equal(r.body.disabled, false);
    return { id: r.body.id as string, creds: { clientId, clientSecret: r.body.clientSecret as string } };
  };
  const tokensOf = async (c: Awaited<ReturnType<typeof makeClient>>) => {
    const cc = await tokenRequest(ta, { grant_type: 'client_credentials' }, c.creds);
    assert.equal(cc.status, 200, JSON.stringify(cc.body));
    const pw = await tokenRequest(ta, { grant_type: 'password', username: 'client-user', password: 'client-user-password' }, c.creds);
    assert.equal(pw.status, 200, JSON.stringify(pw.body));
    for (const token of [cc.body.access_token, pw.body.access_token]) assert.equal((await probe(ta, token)).status, 200);
    return { cc: cc.body.access_token as string, pw: pw.body as Tokens };
  };
  const patch = (id: string, body: unknown) => ta.call('PATCH', `/api/v1/clients/${id}`, { token: ta.adminToken, body });

  // Disabled: its tokens stop, and it gets no new ones until enabled again.
  const a = await makeClient('cli-disable', ['read', 'write']);
  const aTok = await tokensOf(a);
  const disabled = await patch(a.id, { disabled: true });
  assert.equal(disabled.status, 200, disabled.raw);
  assert.equal(disabled.body.disabled, true);
  await assertRevoked(ta, aTok.cc, 'client disabled: client_credentials token');
  await assertRevoked(ta, aTok.pw.access_token, 'client disabled: user token through it');
  const refused = await tokenRequest(ta, { grant_type: 'client_credentials' }, a.creds);
  assert.equal(refused.status, 401);
  assert.equal(refused.body.error, 'invalid_client');
  assert.equal((await refresh(ta, aTok.pw.refresh_token, a.creds)).status, 401);
  assert.equal((await patch(a.id, { disabled: false })).status, 200);
  assert.equal((await refresh(ta, aTok.pw.refresh_token, a.creds)).status, 400, 'the revoked login stays revoked');
  await tokensOf(a);

  // Narrower scopes.
  const b = await makeClient('cli-narrow', ['read', 'write']);
  const bTok = await tokensOf(b);
  assert.equal((await patch(b.id, { name: 'renamed' })).status, 200);
  assert.equal((await probe(ta, bTok.cc)).status, 200, 'a rename revokes nothing');
  assert.equal((await patch(b.id, { scopes: ['read'] })).status, 200);
  await assertRevoked(ta, bTok.cc, 'client narrowed');
  const narrowed = await tokenRequest(ta, { grant_type: 'client_credentials' }, b.creds);
  assert.equal(narrowed.body.scope, 'openid profile read');

  // Deleted.
  const c = await makeClient('cli-delete', ['read']);
  const cTok = await tokensOf(c);
  assert.equal((await ta.call('DELETE', `/api/v1/clients/${c.id}`, { token: ta.adminToken })).status, 204);
  await assertRevoked(ta, cTok.cc, 'client deleted: client_credentials token');
  await assertRevoked(ta, cTok.pw.access_token, 'client deleted: user token through it');
  assert.equal((await probe(ta, ta.adminToken)).status, 200, 'the operator client is untouched');
});

test('refresh tokens rotate; a used one presented again is refused and ends every token of its login', async (t) => {
  const ta = await startApp(t, ENV);
  const { ownerId } = await ownerWithKey(ta, 'rotation');
  await makeUser(ta, ownerId, 'rotator');
  const first = await passwordToken(ta.call, 'rotator', 'rotator-password');
  const elsewhere = await passwordToken(ta.call, 'rotator', 'rotator-password'); // another login
  const second = await refresh(ta, first.refresh_token);
  assert.equal(second.status, 200);
  assert.notEqual(second.body.refresh_token, first.refresh_token, 'a new refresh token each time');
  const third = await refresh(ta, second.body.refresh_token);
  assert.equal(third.status, 200);
  for (const token of [first.access_token, second.body.access_token, third.body.access_token]) {
    assert.equal((await probe(ta, token)).status, 200);
  }
  // The first refresh token again: refused, and the whole login with it.
  const replay = await refresh(ta, first.refresh_token);
  assert.equal(replay.status, 400);
  assert.equal(replay.body.error, 'invalid_grant');
  assert.match(replay.body.message, /already used/);
  for (const token of [first.access_token, second.body.access_token, third.body.access_token]) {
    await assertRevoked(ta, token, 'replayed login');
  }
  const newest = await refresh(ta, third.body.refresh_token);
  assert.equal(newest.status, 400, 'even the newest refresh token of that login');
  assert.equal(newest.body.error, 'invalid_grant');
  // The user's other login is another session: untouched.
  assert.equal((await probe(ta, elsewhere.access_token)).status, 200);
  assert.equal((await refresh(ta, elsewhere.refresh_token)).status, 200);
});

test('an API key belongs to its owner: deleting the user who made it leaves it working; deleting the key ends it at once', async (t) => {
  const ta = await startApp(t, ENV);
  const { ownerId } = await ownerWithKey(ta, 'key-owner');
  const maker = await makeUser(ta, ownerId, 'key-maker');
  const tok = await passwordToken(ta.call, 'key-maker', 'key-maker-password');
  const key = await ta.call('POST', '/api/v1/api-keys', { token: tok.access_token, body: { name: 'made-by-user', scopes: ['read'] } });
  assert.equal(key.status, 201, key.raw);
  assert.equal(key.body.ownerId, ownerId);
  assert.equal((await ta.call('DELETE', `/api/v1/users/${maker}`, { token: ta.adminToken })).status, 204);
  await assertRevoked(ta, tok.access_token, "the maker's own token");
  assert.equal((await probe(ta, key.body.key)).status, 200, 'the key still works');
  assert.equal((await ta.call('DELETE', `/api/v1/api-keys/${key.body.id}`, { token: ta.adminToken })).status, 204);
  assert.equal((await probe(ta, key.body.key)).status, 401, 'a deleted key');
});

if (TEST_DB === 'postgres') {
  test('a revocation made on one instance reaches another on the same database within 10 s; rotation holds across them', async (t) => {
    // The other instance trusts its cache for 1 s: well inside the contract's 10 s. One PUBLIC_URL,
    // as instances behind one name have, so both issue and accept the same tokens.
    const env = { ...ENV, AUTH_SESSION_CACHE_MS: '1000', PUBLIC_URL: 'http://tracking.revocation.test' };
    const a = await startApp(t, env);
    const b = await startApp(t, env, { databaseUrl: a.databaseUrl! });
    const { ownerId } = await ownerWithKey(a, 'two-instances-revoke');
    const id = await makeUser(a, ownerId, 'roamer');
    const tok = await passwordToken(a.call, 'roamer', 'roamer-password');
    // B has seen the login as valid (and cached it).
    assert.equal((await probe(b, tok.access_token)).status, 200);
    assert.equal((await probe(a, tok.access_token)).status, 200);
    const changed = await a.call('PATCH', `/api/v1/users/${id}`, { token: a.adminToken, body: { disabled: true } });
    assert.equal(changed.status, 200);
    const changedAt = Date.now();
    await assertRevoked(a, tok.access_token, 'on the instance that made the change, at once');
    // On B: wait for the condition, polling, with the contract's bound as the deadline.
    for (;;) {
      const r = await probe(b, tok.access_token);
      if (r.status === 401) break;
      assert.equal(r.status, 200);
      assert.ok(Date.now() - changedAt < 10_000, 'still accepted on the other instance 10 s after the change');
      await new Promise((r) => setTimeout(r, 50));
    }
    await assertRevoked(b, tok.access_token, 'on the other instance');
    t.diagnostic(`revoked on the other instance after ${Date.now() - changedAt} ms`);

    // A refresh token used on A is refused on B, and that replay ends the login A issued.
    await a.call('PATCH', `/api/v1/users/${id}`, { token: a.adminToken, body: { disabled: false } });
    const login = await passwordToken(a.call, 'roamer', 'roamer-password');
    const onA = await refresh(a, login.refresh_token);
    assert.equal(onA.status, 200);
    assert.equal((await probe(a, onA.body.access_token)).status, 200, 'A has seen the new token');
    const replayOnB = await refresh(b, login.refresh_token);
    assert.equal(replayOnB.status, 400);
    assert.equal(replayOnB.body.error, 'invalid_grant');
    const replayedAt = Date.now();
    await assertRevoked(b, onA.body.access_token, 'replayed on B, on B');
    for (;;) {
      const r = await probe(a, onA.body.access_token);
      if (r.status === 401) break;
      assert.equal(r.status, 200);
      assert.ok(Date.now() - replayedAt < 10_000, 'the replay not seen on A within 10 s');
      await new Promise((r) => setTimeout(r, 50));
    }
  });
} else {
  // Shown as skipped in this lane, with the reason, rather than left out.
  test('a revocation made on one instance reaches another on the same database within 10 s; rotation holds across them', {
    skip: 'PostgreSQL only: two instances on one database',
  }, () => {});
}

test("deleting an owner ends its users' tokens at once on the instance that deleted it", async (t) => {
  const ta = await startApp(t, ENV);
  const { ownerId } = await ownerWithKey(ta, 'revoke-owner');
  await makeUser(ta, ownerId, 'owner-goes');
  const tok = await passwordToken(ta.call, 'owner-goes', 'owner-goes-password');
  assert.equal((await probe(ta, tok.access_token)).status, 200, 'works, and is now in the cache');
  assert.equal((await ta.call('DELETE', `/api/v1/owners/${ownerId}`, { token: ta.adminToken })).status, 204);
  await assertRevoked(ta, tok.access_token, 'owner deleted');
  assert.equal((await refresh(ta, tok.refresh_token)).status, 400, 'its refresh token too');
});
