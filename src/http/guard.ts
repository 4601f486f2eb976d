// Authentication, scope, per-credential limits and idempotency, run before every /api/v1 handler.
// 401 (with WWW-Authenticate: Bearer) for missing or bad credentials, 403 for a missing scope
// (API.md section 2); 429 with Retry-After and RateLimit-* headers (API.md section 7).
import crypto from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Db } from '../db/db.js';
import { digest } from '../auth/crypto.js';
import { isScope, type Scope, type TokenService } from '../auth/tokens.js';
import { Tenancy, type Principal } from '../tenancy/tenancy.js';
import { ApiError } from './errors.js';
import type { Limiter } from './limits.js';

export const API_KEY_PREFIX = 'atk_';

declare module 'fastify' {
  interface FastifyRequest {
    tenancy: Tenancy;
    /** Ends this request's in-flight count early (a long-lived stream, once its headers are out). */
    leaveInFlight: () => void;
    idempotency?: { credential: string; path: string; key: string };
  }
  interface FastifyContextConfig {
    /** No credentials needed (token endpoint, health, docs). */
    public?: boolean;
    /** Needed scope; default read for GET, write otherwise. */
    scope?: Scope;
  }
}

export async function authenticate(db: Db, tokens: TokenService, header: string | undefined): Promise<Principal> {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  if (!m?.[1]) throw new ApiError('UNAUTHENTICATED', 'Send credentials as "Authorization: Bearer <token or API key>".');
  const token = m[1];
  if (token.startsWith(API_KEY_PREFIX)) {
    const { rows } = await db.query<{ id: string; owner_id: string; scopes: string[] }>(
      'SELECT id, owner_id, scopes FROM api_keys WHERE digest = $1',
      [digest(token)],
    );
    const key = rows[0];
    if (!key) throw new ApiError('UNAUTHENTICATED', 'The API key is not valid.');
    return { credential: `apikey:${key.id}`, ownerId: key.owner_id, scopes: key.scopes.filter(isScope), actor: `apikey:${key.id}` };
  }
  const t = await tokens.verify(token);
  const actor = t.external ? `external:${t.sub}` : t.username ? `user:${t.sub}` : `client:${t.sub}`;
  return { credential: `jwt:${t.clientId}:${t.sub}`, ownerId: t.ownerId, scopes: t.scopes, actor };
}

export function installGuard(
  app: FastifyInstance,
  deps: {
    db: Db;
    tokens: TokenService;
    limiter: Limiter;
    rateLimitMax: number;
    idempotencyWindowSeconds: number;
    idempotencyAbandonSeconds: number;
  },
): void {
  const { db, tokens, limiter } = deps;
  app.decorateRequest('tenancy', null as unknown as Tenancy);
  app.decorateRequest('leaveInFlight', null as unknown as () => void);

  app.addHook('onRequest', async (req, reply) => {
    const cfg = req.routeOptions.config;
    if (cfg.public || !req.routeOptions.url) return; // public route, or unknown route (404 handler)
    const principal = await authenticate(db, tokens, req.headers.authorization);
    req.tenancy = new Tenancy(db, principal);
    const needed = cfg.scope ?? (req.method === 'GET' || req.method === 'HEAD' ? 'read' : 'write');
    if (!principal.scopes.includes(needed)) {
      throw new ApiError('FORBIDDEN', `This credential lacks the "${needed}" scope.`);
    }
    const admission = await limiter.admit(principal.credential);
    reply.header('RateLimit-Limit', String(deps.rateLimitMax));
    reply.header('RateLimit-Remaining', String(admission.remaining));
    reply.header('RateLimit-Reset', String(admission.resetSeconds));
    if (!admission.ok) {
      throw new ApiError(
        admission.reason === 'rate' ? 'RATE_LIMITED' : 'TOO_MANY_CONCURRENT',
        admission.reason === 'rate'
          ? `Request limit reached for this credential; retry in ${admission.retryAfterSeconds} s.`
          : 'Too many requests in flight for this credential; wait for one to finish.',
        { headers: { 'Retry-After': String(admission.retryAfterSeconds) } },
      );
    }
    // In flight from received to response finished (or the connection closed), or until a stream
    // leaves early (API.md 7): released once either way.
    let released = false;
    req.leaveInFlight = () => {
      if (released) return;
      released = true;
      admission.release();
    };
    reply.raw.once('close', req.leaveInFlight);
    // Resolve the visible owners now, outside any transaction: PGlite has a single connection, so a
    // tenancy query issued from inside a transaction on the main handle would wait for ever.
    await req.tenancy.visibleOwners();
  });

  // API.md section 4: Idempotency-Key on a create.
  app.addHook('preHandler', async (req, reply) => {
    const key = req.headers['idempotency-key'];
    if (req.method !== 'POST' || key === undefined || !req.tenancy) return;
    if (typeof key !== 'string' || key.length < 1 || key.length > 255) {
      throw new ApiError('VALIDATION_FAILED', 'Idempotency-Key must be 1-255 characters.', { field: '/headers/idempotency-key' });
    }
    const credential = req.tenancy.principal.credential;
    const path = req.url.split('?')[0] ?? '/';
    const bodyHash = crypto
      .createHash('sha256')
      .update(JSON.stringify(req.body ?? null))
      .digest('hex');
    for (let i = 0; i < 2; i++) {
      const ins = await db.query(
        `INSERT INTO idempotency_keys (credential, method, path, key, body_hash) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT DO NOTHING RETURNING 1`,
        [credential, req.method, path, key, bodyHash],
      );
      if (ins.rowCount === 1) {
        req.idempotency = { credential, path, key };
        return;
      }
      const { rows } = await db.query<{
        body_hash: string;
        response_status: number | null;
        response_headers: Record<string, string> | null;
        response_body: string | null;
        age_s: number;
      }>(
        `SELECT body_hash, response_status, response_headers, response_body,
                extract(epoch FROM now() - when_created)::float8 AS age_s
           FROM idempotency_keys WHERE credential = $1 AND method = $2 AND path = $3 AND key = $4`,
        [credential, req.method, path, key],
      );
      const prev = rows[0];
      if (!prev) continue; // removed meanwhile: try again
      // Past the window, or a first request abandoned by a crashed process: start afresh.
      const abandoned = prev.response_status === null && prev.age_s > deps.idempotencyAbandonSeconds;
      if (prev.age_s > deps.idempotencyWindowSeconds || abandoned) {
        await db.query('DELETE FROM idempotency_keys WHERE credential = $1 AND method = $2 AND path = $3 AND key = $4', [
          credential,
          req.method,
          path,
          key,
        ]);
        continue;
      }
      if (prev.body_hash !== bodyHash) {
        throw new ApiError('IDEMPOTENCY_KEY_REUSED', 'This Idempotency-Key was used with a different body.', {
          field: '/headers/idempotency-key',
        });
      }
      if (prev.response_status === null) {
        throw new ApiError('IDEMPOTENCY_IN_PROGRESS', 'A request with this Idempotency-Key is still being processed.');
      }
      for (const [h, v] of Object.entries(prev.response_headers ?? {})) reply.header(h, v);
      reply.header('Idempotent-Replayed', 'true');
      return reply
        .code(prev.response_status)
        .type('application/json; charset=utf-8')
        .send(prev.response_body ?? '');
    }
    throw new ApiError('IDEMPOTENCY_IN_PROGRESS', 'A request with this Idempotency-Key is still being processed.');
  });

  app.addHook('onSend', async (req: FastifyRequest, reply, payload) => {
    const idem = req.idempotency;
    if (!idem) return payload;
    req.idempotency = undefined;
    const where = [idem.credential, 'POST', idem.path, idem.key];
    if (reply.statusCode >= 500) {
      // Not a final answer: let the client retry with the same key.
      await db.query('DELETE FROM idempotency_keys WHERE credential = $1 AND method = $2 AND path = $3 AND key = $4', where);
      return payload;
    }
    const headers: Record<string, string> = {};
    for (const h of ['location', 'link']) {
      const v = reply.getHeader(h);
      if (typeof v === 'string') headers[h] = v;
    }
    await db.query(
      `UPDATE idempotency_keys SET response_status = $5, response_headers = $6, response_body = $7
        WHERE credential = $1 AND method = $2 AND path = $3 AND key = $4`,
      [...where, reply.statusCode, JSON.stringify(headers), typeof payload === 'string' ? payload : String(payload ?? '')],
    );
    return payload;
  });
}
