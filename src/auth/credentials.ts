// Users, OAuth clients and API keys (API guide 2). Secrets are shown once, in the create
// response, and kept only as digests (API keys, client secrets) or scrypt hashes (passwords).
// A non-admin creates API keys only for owners it sees, with scopes no wider than its own.
import { audit } from '../audit/audit.js';
import crypto from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import type { Db, Queryable } from '../db/db.js';
import { forbidden, notFound } from '../http/errors.js';
import { API_KEY_PREFIX } from './authenticate.js';
import { applyFilters, filters, listQuery } from '../http/filters.js';
import { listPage } from '../http/paging.js';
import { DateTime, IdParam, isUuid, iso, Nullable, ScopeSchema, Str, Uuid } from '../http/schemas.js';
import { digest, hashPassword, randomSecret } from './crypto.js';
import type { Scope } from '../tenancy/tenancy.js';

const Scopes = Type.Array(ScopeSchema, { minItems: 1, maxItems: 3, uniqueItems: true });
const Grant = Type.Union([Type.Literal('password'), Type.Literal('refresh_token'), Type.Literal('client_credentials')]);
// What a stored client may show: also the dashboard's public client (authorization code with PKCE).
const GrantShown = Type.Union([...Grant.anyOf, Type.Literal('authorization_code')]);

// ---- shared list helper for the three credential tables -------------------------------------

const OWNED_FILTERS = { ownerId: filters.uuid('owner_id') };
const OwnedList = listQuery(OWNED_FILTERS);

async function listOwned<R>(db: Db, req: FastifyRequest, reply: FastifyReply, table: string, select: string): Promise<R[]> {
  return listPage<R & { id: string }>(db, req, reply, {
    select,
    from: table,
    owners: { column: 'owner_id', scope: req.tenancy },
    defaultOrder: 'asc',
    idType: 'uuid',
    filters: (params, where) => applyFilters(OWNED_FILTERS, req.query as Record<string, unknown>, params, where),
  });
}

// ---- users ---------------------------------------------------------------------------------

const User = Type.Object(
  { id: Uuid, username: Str(255), ownerId: Uuid, scopes: Scopes, disabled: Type.Boolean(), whenCreated: DateTime, whenUpdated: DateTime },
  { title: 'User' },
);
const Me = Type.Object(
  {
    actor: Type.String({
      description: 'user:<id>, apikey:<id>, client:<id> or external:<subject>, as whoCreated and the audit log name it',
    }),
    ownerId: Uuid,
    scopes: Scopes,
    admin: Type.Boolean({ description: 'Whether it has the admin scope (an operator)' }),
    name: Nullable(Type.String({ description: "The user's username, the API key's name, or the client's id" })),
  },
  { title: 'Me' },
);
const UserCreate = Type.Object({
  username: Type.String({ minLength: 1, maxLength: 255, pattern: '^[^\\s:]+$', description: 'No spaces or colons' }),
  password: Type.String({ minLength: 8, maxLength: 1024 }),
  ownerId: Uuid,
  scopes: Scopes,
  disabled: Type.Optional(Type.Boolean()),
});
const UserPatch = Type.Partial(Type.Omit(UserCreate, ['username']));
interface UserRow {
  id: string;
  username: string;
  owner_id: string;
  scopes: Scope[];
  disabled: boolean;
  when_created: Date;
  when_updated: Date;
}
const USER_SELECT = 'id, username, owner_id, scopes, disabled, when_created, when_updated';
const userApi = (r: UserRow) => ({
  id: r.id,
  username: r.username,
  ownerId: r.owner_id,
  scopes: r.scopes,
  disabled: r.disabled,
  whenCreated: iso(r.when_created)!,
  whenUpdated: iso(r.when_updated)!,
});

export async function createUser(
  q: Queryable,
  u: { username: string; password: string; ownerId: string; scopes: Scope[] },
  passwordCost: number,
) {
  const id = crypto.randomUUID();
  await q.query('INSERT INTO users (id, username, password_hash, owner_id, scopes) VALUES ($1, $2, $3, $4, $5)', [
    id,
    u.username,
    await hashPassword(u.password, passwordCost),
    u.ownerId,
    u.scopes,
  ]);
  return id;
}

// ---- clients -------------------------------------------------------------------------------

const Client = Type.Object(
  {
    id: Uuid,
    clientId: Str(255),
    name: Nullable(Str(255)),
    grants: Type.Array(GrantShown),
    ownerId: Uuid,
    scopes: Scopes,
    disabled: Type.Boolean(),
    whenCreated: DateTime,
  },
  { title: 'Client' },
);
const ClientCreate = Type.Object({
  clientId: Type.String({ minLength: 1, maxLength: 255, pattern: '^[A-Za-z0-9._~-]+$' }),
  name: Type.Optional(Nullable(Str(255))),
  grants: Type.Array(Grant, { minItems: 1, maxItems: 3, uniqueItems: true }),
  ownerId: Type.Optional(Type.String({ format: 'uuid', description: "Owner of client_credentials tokens (default: the caller's)" })),
  scopes: Type.Optional(Scopes),
});
const ClientCreated = Type.Intersect([Client, Type.Object({ clientSecret: Type.String({ description: 'Shown once' }) })]);
const ClientPatch = Type.Object({
  name: Type.Optional(Nullable(Str(255))),
  grants: Type.Optional(Type.Array(Grant, { minItems: 1, maxItems: 3, uniqueItems: true })),
  scopes: Type.Optional(Scopes),
  disabled: Type.Optional(Type.Boolean()),
});
interface ClientRow {
  id: string;
  client_id: string;
  name: string | null;
  grants: string[];
  owner_id: string;
  scopes: Scope[];
  disabled: boolean;
  when_created: Date;
}
const CLIENT_SELECT = 'id, client_id, name, grants, owner_id, scopes, disabled, when_created';
const clientApi = (r: ClientRow) => ({
  id: r.id,
  clientId: r.client_id,
  name: r.name,
  grants: r.grants as Static<typeof GrantShown>[],
  ownerId: r.owner_id,
  scopes: r.scopes,
  disabled: r.disabled,
  whenCreated: iso(r.when_created)!,
});

/** Whether `next` drops something `cur` had (narrower scopes or grants revoke tokens, API guide 2). */
const narrows = (cur: readonly string[], next: readonly string[] | undefined) => next !== undefined && cur.some((s) => !next.includes(s));

export async function createClient(
  q: Queryable,
  c: { clientId: string; secret: string; name: string | null; grants: string[]; ownerId: string; scopes: Scope[] },
) {
  const id = crypto.randomUUID();
  await q.query('INSERT INTO clients (id, client_id, name, secret_digest, grants, owner_id, scopes) VALUES ($1, $2, $3, $4, $5, $6, $7)', [
    id,
    c.clientId,
    c.name,
    digest(c.secret),
    c.grants,
    c.ownerId,
    c.scopes,
  ]);
  return id;
}

/**
 * A public client (no secret: it proves itself with the PKCE verifier) of authorization_code and
 * refresh_token, for the given redirect paths on the service's own origin; made when missing, for
 * an owner that exists. The user's own scopes apply to its tokens.
 */
export async function ensurePublicClient(
  q: Queryable,
  c: { clientId: string; name: string; ownerId: string; redirectPaths: string[] },
): Promise<void> {
  await q.query(
    `INSERT INTO clients (id, client_id, name, secret_digest, grants, owner_id, scopes, public, redirect_paths)
     SELECT $1, $2, $3, '', ARRAY['authorization_code', 'refresh_token'], $4, ARRAY['read', 'write', 'admin'], true, $5
      WHERE EXISTS (SELECT 1 FROM owners WHERE id = $4)
     ON CONFLICT (client_id) DO NOTHING`,
    [crypto.randomUUID(), c.clientId, c.name, c.ownerId, c.redirectPaths],
  );
}

// ---- API keys ------------------------------------------------------------------------------

const ApiKey = Type.Object(
  { id: Uuid, name: Str(255), ownerId: Uuid, scopes: Scopes, prefix: Type.String(), whenCreated: DateTime },
  { title: 'ApiKey' },
);
const ApiKeyCreate = Type.Object({
  name: Str(255, { minLength: 1 }),
  ownerId: Type.Optional(Type.String({ format: 'uuid', description: "Defaults to the caller's owner" })),
  scopes: Scopes,
});
const ApiKeyCreated = Type.Intersect([ApiKey, Type.Object({ key: Type.String({ description: 'Shown once' }) })]);
interface ApiKeyRow {
  id: string;
  name: string;
  owner_id: string;
  scopes: Scope[];
  prefix: string;
  when_created: Date;
}
const KEY_SELECT = 'id, name, owner_id, scopes, prefix, when_created';
const keyApi = (r: ApiKeyRow) => ({
  id: r.id,
  name: r.name,
  ownerId: r.owner_id,
  scopes: r.scopes,
  prefix: r.prefix,
  whenCreated: iso(r.when_created)!,
});

export async function createApiKey(q: Queryable, k: { name: string; ownerId: string; scopes: Scope[]; createdBy: string }) {
  const id = crypto.randomUUID();
  const key = randomSecret(API_KEY_PREFIX);
  const { rows } = await q.query<ApiKeyRow>(
    `INSERT INTO api_keys (id, name, owner_id, scopes, digest, prefix, created_by) VALUES ($1, $2, $3, $4, $5, $6, $7)
     RETURNING ${KEY_SELECT}`,
    [id, k.name, k.ownerId, k.scopes, digest(key), key.slice(0, API_KEY_PREFIX.length + 6), k.createdBy],
  );
  return { ...keyApi(rows[0]!), key };
}

// ---- routes --------------------------------------------------------------------------------

export const credentialRoutes: FastifyPluginAsyncTypebox<{ db: Db; passwordCost: number }> = async (app, { db, passwordCost }) => {
  const admin = { scope: 'admin' as const };
  const { sessions } = app.services.tokens;
  const param = (req: { params: { id: string } }, what: string) => {
    if (!isUuid(req.params.id)) throw notFound(what);
    return req.params.id;
  };

  // Who is calling: what the dashboard shows and offers (a name in the header, the forms only a
  // writer or an operator may use), asked once instead of probing routes for a 403.
  app.get('/me', {
    schema: {
      tags: ['users'],
      summary: 'The calling credential: who it acts as, its owner, its scopes and a name to show',
      response: { 200: Me },
    },
    handler: async (req) => {
      const p = req.tenancy.principal;
      const [kind, id] = [p.actor.slice(0, p.actor.indexOf(':')), p.actor.slice(p.actor.indexOf(':') + 1)];
      let name: string | null = null;
      if ((kind === 'user' || kind === 'apikey') && isUuid(id)) {
        const { rows } = await db.query<{ name: string }>(
          kind === 'user' ? 'SELECT username AS name FROM users WHERE id = $1' : 'SELECT name FROM api_keys WHERE id = $1',
          [id],
        );
        name = rows[0]?.name ?? null;
      } else if (kind === 'client' || kind === 'external') name = id;
      return { actor: p.actor, ownerId: p.ownerId, scopes: [...p.scopes], admin: req.tenancy.isAdmin, name };
    },
  });

  // users (admin)
  app.get('/users', {
    config: admin,
    schema: { tags: ['users'], summary: 'List users (admin)', querystring: OwnedList, response: { 200: Type.Array(User) } },
    handler: async (req, reply) => (await listOwned<UserRow>(db, req, reply, 'users', USER_SELECT)).map(userApi),
  });
  app.post('/users', {
    config: admin,
    schema: { tags: ['users'], summary: 'Create a user (admin)', body: UserCreate, response: { 201: User } },
    handler: async (req, reply) => {
      const b = req.body;
      await req.tenancy.assertOwner(b.ownerId);
      const out = await db.tx(async (q) => {
        const id = await createUser(q, b, passwordCost);
        if (b.disabled) await q.query('UPDATE users SET disabled = true WHERE id = $1', [id]);
        const user = userApi(
          await req.tenancy.one<UserRow>(q, { select: USER_SELECT, from: 'users', ownerColumn: 'owner_id' }, id, 'user'),
        );
        await audit(q, req.tenancy, { action: 'create', type: 'user', id, ownerId: user.ownerId, before: null, after: user, body: b });
        return user;
      });
      reply.code(201).header('Location', `${req.server.publicUrl}/api/v1/users/${out.id}`);
      return out;
    },
  });
  app.get('/users/:id', {
    config: admin,
    schema: { tags: ['users'], summary: 'Get a user (admin)', params: IdParam, response: { 200: User } },
    handler: async (req) =>
      userApi(
        await req.tenancy.one<UserRow>(db, { select: USER_SELECT, from: 'users', ownerColumn: 'owner_id' }, param(req, 'user'), 'user'),
      ),
  });
  app.patch('/users/:id', {
    config: admin,
    schema: {
      tags: ['users'],
      summary: 'Update a user (admin): password, owner, scopes, disabled',
      params: IdParam,
      body: UserPatch,
      response: { 200: User },
    },
    handler: async (req) => {
      const id = param(req, 'user');
      const b = req.body;
      const hash = b.password === undefined ? null : await hashPassword(b.password, passwordCost);
      const { user, revoked } = await db.tx(async (q) => {
        const cur = await req.tenancy.one<UserRow>(q, { select: USER_SELECT, from: 'users', ownerColumn: 'owner_id' }, id, 'user', true);
        if (b.ownerId) await req.tenancy.assertOwner(b.ownerId, '/ownerId', q);
        const { rows } = await q.query<UserRow>(
          `UPDATE users SET owner_id = $2, scopes = $3, disabled = $4, password_hash = COALESCE($5, password_hash), when_updated = now()
            WHERE id = $1 RETURNING ${USER_SELECT}`,
          [id, b.ownerId ?? cur.owner_id, b.scopes ?? cur.scopes, b.disabled ?? cur.disabled, hash],
        );
        // API guide 2: a new password, disabling, narrower scopes (or another owner, which the tokens
        // name) end every login of the user, in the same transaction as the change.
        const why =
          b.password !== undefined
            ? 'password changed'
            : b.disabled === true
              ? 'user disabled'
              : narrows(cur.scopes, b.scopes)
                ? 'scopes narrowed'
                : b.ownerId !== undefined && b.ownerId !== cur.owner_id
                  ? 'owner changed'
                  : null;
        if (why) await sessions.revoke(q, { userId: id }, why);
        const user = userApi(rows[0]!);
        await audit(q, req.tenancy, {
          action: 'update',
          type: 'user',
          id,
          ownerId: user.ownerId,
          before: userApi(cur),
          after: user,
          body: b,
        });
        return { user, revoked: why !== null };
      });
      if (revoked) sessions.forget();
      return user;
    },
  });
  app.delete('/users/:id', {
    config: admin,
    schema: { tags: ['users'], summary: 'Delete a user (admin)', params: IdParam },
    handler: async (req, reply) => {
      const id = param(req, 'user');
      await db.tx(async (q) => {
        const cur = await req.tenancy.one<UserRow>(q, { select: USER_SELECT, from: 'users', ownerColumn: 'owner_id' }, id, 'user', true);
        // Its logins go with it (ON DELETE CASCADE); API keys it made belong to their owner and stay.
        await q.query('DELETE FROM users WHERE id = $1', [id]);
        await audit(q, req.tenancy, { action: 'delete', type: 'user', id, ownerId: cur.owner_id, before: userApi(cur), after: null });
      });
      sessions.forget();
      return reply.code(204).send();
    },
  });

  // clients (admin)
  app.get('/clients', {
    config: admin,
    schema: { tags: ['clients'], summary: 'List OAuth clients (admin)', querystring: OwnedList, response: { 200: Type.Array(Client) } },
    handler: async (req, reply) => (await listOwned<ClientRow>(db, req, reply, 'clients', CLIENT_SELECT)).map(clientApi),
  });
  app.post('/clients', {
    config: admin,
    schema: {
      tags: ['clients'],
      summary: 'Create an OAuth client (admin); the secret is shown once',
      body: ClientCreate,
      response: { 201: ClientCreated },
    },
    handler: async (req, reply) => {
      const b = req.body;
      const ownerId = await req.tenancy.ownerFor(b.ownerId);
      const secret = randomSecret('', 32);
      const client = await db.tx(async (q) => {
        const id = await createClient(q, {
          clientId: b.clientId,
          secret,
          name: b.name ?? null,
          grants: b.grants,
          ownerId,
          scopes: b.scopes ?? ['read'],
        });
        const row = await req.tenancy.one<ClientRow>(q, { select: CLIENT_SELECT, from: 'clients', ownerColumn: 'owner_id' }, id, 'client');
        const out = clientApi(row);
        await audit(q, req.tenancy, {
          action: 'create',
          type: 'client',
          id,
          ownerId,
          before: null,
          after: out,
          body: { clientSecret: secret },
        });
        return out;
      });
      reply.code(201).header('Location', `${req.server.publicUrl}/api/v1/clients/${client.id}`);
      return { ...client, clientSecret: secret };
    },
  });
  app.delete('/clients/:id', {
    config: admin,
    schema: { tags: ['clients'], summary: 'Delete an OAuth client (admin)', params: IdParam },
    handler: async (req, reply) => {
      const id = param(req, 'client');
      await db.tx(async (q) => {
        const cur = await req.tenancy.one<ClientRow>(
          q,
          { select: CLIENT_SELECT, from: 'clients', ownerColumn: 'owner_id' },
          id,
          'client',
          true,
        );
        // Every login made through the client goes with it (ON DELETE CASCADE), users' included.
        await q.query('DELETE FROM clients WHERE id = $1', [id]);
        await audit(q, req.tenancy, { action: 'delete', type: 'client', id, ownerId: cur.owner_id, before: clientApi(cur), after: null });
      });
      sessions.forget();
      return reply.code(204).send();
    },
  });
  app.patch('/clients/:id', {
    config: admin,
    schema: {
      tags: ['clients'],
      summary: 'Update an OAuth client (admin): name, grants, scopes, disabled; narrowing or disabling revokes its tokens',
      params: IdParam,
      body: ClientPatch,
      response: { 200: Client },
    },
    handler: async (req) => {
      const id = param(req, 'client');
      const b = req.body;
      const { client, revoked } = await db.tx(async (q) => {
        const cur = await req.tenancy.one<ClientRow>(
          q,
          { select: CLIENT_SELECT, from: 'clients', ownerColumn: 'owner_id' },
          id,
          'client',
          true,
        );
        const { rows } = await q.query<ClientRow>(
          `UPDATE clients SET name = $2, grants = $3, scopes = $4, disabled = $5 WHERE id = $1 RETURNING ${CLIENT_SELECT}`,
          [id, b.name === undefined ? cur.name : b.name, b.grants ?? cur.grants, b.scopes ?? cur.scopes, b.disabled ?? cur.disabled],
        );
        const why =
          b.disabled === true
            ? 'client disabled'
            : narrows(cur.scopes, b.scopes) || narrows(cur.grants, b.grants)
              ? 'client narrowed'
              : null;
        if (why) await sessions.revoke(q, { clientRowId: id }, why);
        const client = clientApi(rows[0]!);
        await audit(q, req.tenancy, {
          action: 'update',
          type: 'client',
          id,
          ownerId: client.ownerId,
          before: clientApi(cur),
          after: client,
        });
        return { client, revoked: why !== null };
      });
      if (revoked) sessions.forget();
      return client;
    },
  });

  // API keys
  app.get('/api-keys', {
    schema: {
      tags: ['api-keys'],
      summary: 'List API keys of visible owners (never the secret)',
      querystring: OwnedList,
      response: { 200: Type.Array(ApiKey) },
    },
    handler: async (req, reply) => (await listOwned<ApiKeyRow>(db, req, reply, 'api_keys', KEY_SELECT)).map(keyApi),
  });
  app.post('/api-keys', {
    schema: {
      tags: ['api-keys'],
      summary: 'Create an API key; the key is shown once',
      body: ApiKeyCreate,
      response: { 201: ApiKeyCreated },
    },
    handler: async (req, reply) => {
      const b = req.body;
      const ownerId = await req.tenancy.ownerFor(b.ownerId);
      const wider = b.scopes.filter((s) => !req.tenancy.has(s));
      if (wider.length) throw forbidden(`A key cannot have scopes its creator lacks: ${wider.join(', ')}.`);
      const created = await db.tx(async (q) => {
        const made = await createApiKey(q, { name: b.name, ownerId, scopes: b.scopes, createdBy: req.tenancy.principal.actor });
        const { key: _shownOnce, ...shown } = made;
        await audit(q, req.tenancy, {
          action: 'create',
          type: 'apiKey',
          id: made.id,
          ownerId,
          before: null,
          after: shown,
          body: { key: made.key },
        });
        return made;
      });
      reply.code(201).header('Location', `${req.server.publicUrl}/api/v1/api-keys/${created.id}`);
      return created;
    },
  });
  app.delete('/api-keys/:id', {
    schema: { tags: ['api-keys'], summary: 'Revoke an API key', params: IdParam },
    handler: async (req, reply) => {
      const id = param(req, 'API key');
      await db.tx(async (q) => {
        const cur = await req.tenancy.one<ApiKeyRow>(
          q,
          { select: KEY_SELECT, from: 'api_keys', ownerColumn: 'owner_id' },
          id,
          'API key',
          true,
        );
        await q.query('DELETE FROM api_keys WHERE id = $1', [id]);
        await audit(q, req.tenancy, { action: 'delete', type: 'apiKey', id, ownerId: cur.owner_id, before: keyApi(cur), after: null });
      });
      return reply.code(204).send();
    },
  });
};
