// Idempotency-Key on a create (API guide 4): the first answer is kept for a day per credential,
// method and path with a hash of the body; a repeat gets it again, another body with the same key
// is a 422, a repeat while the first still runs a 409, and a 5xx is forgotten so it can be retried.
// This module is the only writer of idempotency_keys, its sweep of expired keys included.
import crypto from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Db } from '../db/db.js';
import { ApiError } from './errors.js';

declare module 'fastify' {
  interface FastifyRequest {
    idempotency?: { credential: string; path: string; key: string };
  }
}

const SWEEP_EVERY_MS = 5 * 60_000;

export function installIdempotency(app: FastifyInstance, deps: { db: Db; windowSeconds: number; abandonSeconds: number }): void {
  const { db } = deps;
  // Keys past their window go in one statement every few minutes, off the hot path.
  let sweep: NodeJS.Timeout | undefined;
  app.addHook('onReady', async () => {
    sweep = setInterval(() => {
      db.query('DELETE FROM idempotency_keys WHERE when_created < now() - make_interval(secs => $1)', [deps.windowSeconds]).catch(
        (e: Error) => app.log.warn({ err: e }, 'idempotency sweep failed'),
      );
    }, SWEEP_EVERY_MS);
    sweep.unref();
  });
  app.addHook('onClose', async () => clearInterval(sweep));

  app.addHook('preHandler', async (req, reply) => {
    const key = req.headers['idempotency-key'];
    if (req.method !== 'POST' || key === undefined || req.credential === null) return;
    if (typeof key !== 'string' || key.length < 1 || key.length > 255) {
      throw new ApiError('VALIDATION_FAILED', 'Idempotency-Key must be 1-255 characters.', { field: '/headers/idempotency-key' });
    }
    const credential = req.credential;
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
      const abandoned = prev.response_status === null && prev.age_s > deps.abandonSeconds;
      if (prev.age_s > deps.windowSeconds || abandoned) {
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
