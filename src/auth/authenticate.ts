// Authentication and scope, before every /api/v1 handler (API guide 2): an API key (one indexed
// digest lookup) or a token of the built-in or an external issuer; 401 with WWW-Authenticate:
// Bearer for missing or bad credentials, 403 for a missing scope. The request then carries its
// Tenancy (what it may see) and the credential that the limits and idempotency count by.
import type { FastifyInstance } from 'fastify';
import type { Db } from '../db/db.js';
import { preparedName } from '../db/statement.js';
import { ApiError } from '../http/errors.js';
import { isScope, ownerTreeSql, type Principal, type Scope, Tenancy } from '../tenancy/tenancy.js';
import { digest } from './crypto.js';
import type { TokenService } from './tokens.js';

/** What an API key starts with, so a key is recognised in a header or a log. */
export const API_KEY_PREFIX = 'atk_';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** No credentials needed (token endpoint, health, docs). */
    public?: boolean;
    /** Needed scope; default read for GET, write otherwise. */
    scope?: Scope;
  }
}

/**
 * An API key by its digest, with the owners it sees (none read for an operator's key, which sees
 * all): the key and the tenancy in one statement, as every request with a key needs both
 * (prepared on PostgreSQL: it runs at every request).
 */
const API_KEY_SQL = `
  WITH RECURSIVE k AS (SELECT id, owner_id, scopes FROM api_keys WHERE digest = $1),
  ${ownerTreeSql("SELECT owner_id FROM k WHERE NOT 'admin' = ANY(scopes)")}
  SELECT id, owner_id, scopes, ARRAY(SELECT id FROM tree) AS visible FROM k`;

export async function authenticate(db: Db, tokens: TokenService, header: string | undefined): Promise<Principal> {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  if (!m?.[1]) throw new ApiError('UNAUTHENTICATED', 'Send credentials as "Authorization: Bearer <token or API key>".');
  const token = m[1];
  if (token.startsWith(API_KEY_PREFIX)) {
    const { rows } = await db.query<{ id: string; owner_id: string; scopes: string[]; visible: string[] }>(
      API_KEY_SQL,
      [digest(token)],
      preparedName(API_KEY_SQL),
    );
    const key = rows[0];
    if (!key) throw new ApiError('UNAUTHENTICATED', 'The API key is not valid.');
    const scopes = key.scopes.filter(isScope);
    return {
      credential: `apikey:${key.id}`,
      ownerId: key.owner_id,
      scopes,
      actor: `apikey:${key.id}`,
      ...(scopes.includes('admin') ? {} : { visibleOwners: key.visible }),
    };
  }
  const t = await tokens.verify(token);
  const actor = t.external ? `external:${t.sub}` : t.username ? `user:${t.sub}` : `client:${t.sub}`;
  return { credential: `jwt:${t.clientId}:${t.sub}`, ownerId: t.ownerId, scopes: t.scopes, actor };
}

/**
 * Registers the check on every route that is not public (an unknown route goes to the 404 handler
 * unauthenticated). Register before the limits (http/limits.ts): they count by req.credential.
 */
export function installAuthentication(app: FastifyInstance, deps: { db: Db; tokens: TokenService }): void {
  app.decorateRequest('tenancy', null as unknown as Tenancy);
  app.addHook('onRequest', async (req) => {
    const cfg = req.routeOptions.config;
    if (cfg.public || !req.routeOptions.url) return;
    const principal = await authenticate(deps.db, deps.tokens, req.headers.authorization);
    req.tenancy = new Tenancy(deps.db, principal, req.ip);
    req.credential = principal.credential;
    const needed = cfg.scope ?? (req.method === 'GET' || req.method === 'HEAD' ? 'read' : 'write');
    if (!principal.scopes.includes(needed)) throw new ApiError('FORBIDDEN', `This credential lacks the "${needed}" scope.`);
  });
  // The visible owners are resolved before the handler, outside any transaction: PGlite has a single
  // connection, so a tenancy query issued from inside a transaction on the main handle would wait for ever.
  app.addHook('preHandler', async (req) => {
    if (req.tenancy) await req.tenancy.visibleOwners();
  });
}
