// The share link's public side (API guide 8, "Share links"), outside /api/v1 and with no sign-in:
// the link is the credential. GET /share/<token> is the read-only page (server-side HTML, no
// script), GET /share/<token>/data the same as JSON; `?asset=<n>` picks the asset (its place in the
// link's list) whose track and temperatures they show. A token that is not one the service made is
// a 404; a revoked or expired link a 410 saying so; both change nothing.
//
// Two bounds keep nobody-signed-in from making the service work: each address has
// SHARE_MAX_REQUESTS_PER_ADDRESS requests a minute (checked before the token is looked up, so
// guessing costs the guesser), and each link SHARE_MAX_USES_PER_MINUTE answered uses a minute
// whoever asks (read.ts), so a leaked link cannot be used to hammer the service.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config.js';
import type { Db } from '../db/db.js';
import { ApiError } from '../http/errors.js';
import { type Limiter, MemoryLimiter, RedisLimiter } from '../http/limits.js';
import { BOUNDS } from '../bounds.js';
import { mapTiles, withTileOrigins } from '../dashboard/tiles.js';
import { isToken } from './links.js';
import { readView, type Use, useLink } from './read.js';
import { refusedHtml, SHARE_CSS, viewHtml } from './render.js';

/**
 * The page's policy: its stylesheet, nothing else; no script, no form, no framing, no referrer.
 * With street tiles (MAP_TILE_URL), images from the tile server's origin too, nothing else.
 */
export const SHARE_CSP = "default-src 'none'; style-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const TokenParam = Type.Object({ token: Type.String({ minLength: 1, maxLength: 200 }) });
const AssetQuery = Type.Object({
  asset: Type.Optional(
    Type.Integer({
      minimum: 0,
      maximum: BOUNDS.shareAssetsPerLink.value - 1,
      description: "The asset's place in the link's list (0 first)",
    }),
  ),
});

type ShareConfig = Pick<Config, 'SHARE_MAX_USES_PER_MINUTE' | 'SHARE_MAX_REQUESTS_PER_ADDRESS' | 'REDIS_URL'> &
  Partial<Pick<Config, 'MAP_TILE_URL' | 'MAP_ATTRIBUTION'>>;

export const sharePageRoutes: FastifyPluginAsyncTypebox<{ db: Db; cfg: ShareConfig }> = async (app, { db, cfg }) => {
  const settings = { max: cfg.SHARE_MAX_REQUESTS_PER_ADDRESS, windowMs: 60_000, concurrent: 20 };
  const limiter: Limiter = cfg.REDIS_URL
    ? await RedisLimiter.connect(cfg.REDIS_URL, settings, (e) =>
        app.log.warn({ err: e }, 'rate limit store unavailable; share request admitted'),
      )
    : new MemoryLimiter(settings);
  app.addHook('onClose', async () => limiter.close());

  const common = { config: { public: true }, schema: { hide: true, params: TokenParam, querystring: AssetQuery } };
  const tiles = mapTiles(cfg);
  const policy = withTileOrigins(SHARE_CSP, tiles);
  /** A page's headers: the token is in the URL, so no referrer leaves it, and no cache keeps it. */
  const secure = (reply: FastifyReply) =>
    reply
      .header('Content-Security-Policy', policy)
      .header('Cache-Control', 'no-store')
      .header('X-Frame-Options', 'DENY')
      .header('Referrer-Policy', 'no-referrer')
      .header('X-Robots-Tag', 'noindex, nofollow');

  /**
   * Admits the request by its address (past the budget: a 429 thrown, with Retry-After), then counts
   * a use of its link, or says why not.
   */
  const use = async (req: FastifyRequest, reply: FastifyReply): Promise<Use> => {
    const admission = await limiter.admit(`share:${req.ip}`);
    if (!admission.ok) {
      throw new ApiError(
        admission.reason === 'rate' ? 'RATE_LIMITED' : 'TOO_MANY_CONCURRENT',
        admission.reason === 'rate'
          ? `Too many share requests from this address; retry in ${admission.retryAfterSeconds} s.`
          : 'Too many share requests in flight from this address; wait for one to finish.',
        { headers: { 'Retry-After': String(admission.retryAfterSeconds) } },
      );
    }
    reply.raw.once('close', admission.release);
    const token = (req.params as { token: string }).token;
    if (!isToken(token)) return { ok: false, status: 404, why: 'This link is not one this service made.' };
    return useLink(db, token, cfg.SHARE_MAX_USES_PER_MINUTE);
  };

  app.get('/share/share.css', { config: { public: true }, schema: { hide: true } }, async (_req, reply) =>
    reply
      .header('Content-Security-Policy', SHARE_CSP)
      .header('Cache-Control', 'public, max-age=3600')
      .type('text/css; charset=utf-8')
      .send(SHARE_CSS),
  );

  app.get('/share/:token', common, async (req, reply) => {
    secure(reply).type('text/html; charset=utf-8');
    let u: Use;
    try {
      u = await use(req, reply);
    } catch (e) {
      if (!(e instanceof ApiError)) throw e;
      for (const [k, v] of Object.entries(e.extra.headers ?? {})) reply.header(k, v);
      return reply.code(e.status).send(refusedHtml(e.status, e.message));
    }
    if (!u.ok) {
      if (u.retryAfter) reply.header('Retry-After', String(u.retryAfter));
      return reply.code(u.status).send(refusedHtml(u.status, u.why));
    }
    const view = await readView(db, u.link, (req.query as { asset?: number }).asset);
    if (!view) return reply.code(404).send(refusedHtml(404, 'This link shares no asset at that place in its list.'));
    return reply.send(viewHtml(view, tiles));
  });

  app.get('/share/:token/data', common, async (req, reply) => {
    secure(reply);
    const u = await use(req, reply);
    if (!u.ok) {
      const code = u.status === 404 ? 'NOT_FOUND' : u.status === 410 ? 'GONE' : 'RATE_LIMITED';
      throw new ApiError(code, u.why, u.retryAfter ? { headers: { 'Retry-After': String(u.retryAfter) } } : {});
    }
    const view = await readView(db, u.link, (req.query as { asset?: number }).asset);
    if (!view) throw new ApiError('NOT_FOUND', 'This link shares no asset at that place in its list.', { field: '/asset' });
    return view;
  });
};
