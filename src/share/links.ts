// Share links (API guide 8, "Share links"): a customer (its own assets) or the operator (any)
// makes a link to a read-only page, with no sign-in, that shows only what the link names (the
// latest position, the track, the temperatures) of only its assets, until it expires or is revoked.
// The token in the link's `url` is 256 random bits, shown once in the create answer and kept only as
// its SHA-256 (as API keys are: auth/credentials.ts), so a list, a backup or the audit log never
// holds it. A link belongs to the lowest owner whose tree holds all its assets: whoever sees that
// owner sees and may revoke the link. DELETE revokes (the row stays, so the page says so: 410).
//
// Bounds (src/bounds.ts): assets per link, how far ahead it may expire, the window it shows, and
// the links in effect per top-level owner's tree (SHARE_MAX_LINKS_PER_OWNER); ended links are kept
// only as many again, the oldest removed when a link is made, so no one grows the table unbounded.
import crypto from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { type Static, Type } from '@sinclair/typebox';
import { audit } from '../audit/audit.js';
import { digest } from '../auth/crypto.js';
import { BOUNDS } from '../bounds.js';
import type { Db, Queryable } from '../db/db.js';
import { ApiError, badRequest, conflict, notFound } from '../http/errors.js';
import { applyFilters, type Filter, filters, listQuery } from '../http/filters.js';
import { listPage } from '../http/paging.js';
import { DateTime, IdParam, isUuid, iso, Literals, Nullable, Str, Uuid } from '../http/schemas.js';
import type { Tenancy } from '../tenancy/tenancy.js';

/** What a link may show. */
export const SHOWN = ['position', 'track', 'temperature'] as const;
export type Shown = (typeof SHOWN)[number];
export const STATUSES = ['active', 'expired', 'revoked'] as const;
const DEFAULT_WINDOW_HOURS = 24;

export const ShareLink = Type.Object(
  {
    id: Uuid,
    ownerId: Type.String({ format: 'uuid', description: 'The lowest owner whose tree holds every asset of the link' }),
    assetIds: Type.Array(Uuid, { description: 'The shared assets, in the order the page shows them' }),
    show: Type.Array(Literals(SHOWN)),
    windowHours: Type.Integer({ description: 'How far back the track and the temperatures reach' }),
    note: Nullable(Type.String()),
    expiresAt: DateTime,
    revokedAt: Nullable(DateTime),
    status: Literals(STATUSES, { description: 'active until expiresAt or a DELETE; then expired or revoked (the page answers 410)' }),
    uses: Type.Integer({ description: 'Answered uses of the page and its data' }),
    lastUsedAt: Nullable(DateTime),
    whoCreated: Type.String(),
    whenCreated: DateTime,
  },
  { title: 'ShareLink' },
);
const ShareLinkCreated = Type.Object(
  {
    ...ShareLink.properties,
    url: Type.String({ description: 'The link to hand out (its token is shown only here, once): <PUBLIC_URL>/share/<token>' }),
  },
  { title: 'ShareLinkCreated' },
);

const ShareLinkWrite = Type.Object({
  assetIds: Type.Array(Uuid, {
    minItems: 1,
    maxItems: BOUNDS.shareAssetsPerLink.value,
    uniqueItems: true,
    description: `The assets to share (1-${BOUNDS.shareAssetsPerLink.value}), each one the caller sees`,
  }),
  expiresAt: Type.String({
    format: 'date-time',
    description: `When the link stops working: in the future, at most ${BOUNDS.shareExpiryDays.value} days ahead`,
  }),
  show: Type.Array(Literals(SHOWN), { minItems: 1, maxItems: SHOWN.length, uniqueItems: true, description: 'What the page shows' }),
  windowHours: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: BOUNDS.shareWindowHours.value,
      description: `How far back the track and the temperatures reach (default ${DEFAULT_WINDOW_HOURS})`,
    }),
  ),
  note: Type.Optional(Nullable(Str(255, { description: 'Who or what the link is for, for the list' }))),
});
type ShareLinkWrite = Static<typeof ShareLinkWrite>;

const STATUS_SQL = `CASE WHEN revoked_at IS NOT NULL THEN 'revoked' WHEN expires_at <= now() THEN 'expired' ELSE 'active' END`;
const LINK_FILTERS: Record<string, Filter> = {
  assetId: { schema: filters.anyUuid('').schema, sql: (p) => `asset_ids && ${p}::uuid[]` },
  status: filters.equals(STATUS_SQL, Literals(STATUSES)),
};
const LinkList = listQuery(LINK_FILTERS);

export interface LinkRow {
  id: string;
  owner_id: string;
  asset_ids: string[];
  show: Shown[];
  window_hours: number;
  note: string | null;
  expires_at: Date;
  revoked_at: Date | null;
  status: (typeof STATUSES)[number];
  uses: string;
  last_used_at: Date | null;
  created_by: string;
  when_created: Date;
}
const SELECT = `id, owner_id, asset_ids::text[] AS asset_ids, show, window_hours, note, expires_at, revoked_at, ${STATUS_SQL} AS status,
  uses::text AS uses, last_used_at, created_by, when_created`;

const toApi = (r: LinkRow) => ({
  id: r.id,
  ownerId: r.owner_id,
  assetIds: r.asset_ids,
  show: r.show,
  windowHours: r.window_hours,
  note: r.note,
  expiresAt: iso(r.expires_at)!,
  revokedAt: iso(r.revoked_at),
  status: r.status,
  uses: Number(r.uses),
  lastUsedAt: iso(r.last_used_at),
  whoCreated: r.created_by,
  whenCreated: iso(r.when_created)!,
});
/** The audit's view: settings only (uses change with every view, and are no change of anyone's). */
const audited = (r: LinkRow) => {
  const { uses: _uses, lastUsedAt: _last, ...rest } = toApi(r);
  return rest;
};

/** A new link's token: 256 random bits, URL-safe (43 characters). */
export const newToken = () => crypto.randomBytes(32).toString('base64url');
/** Whether a path segment can be a token at all (else 404 without a read). */
export const isToken = (s: string) => /^[A-Za-z0-9_-]{43}$/.test(s);
export const tokenDigest = (token: string) => digest(token);

const read = async (q: Queryable, id: string) => (await q.query<LinkRow>(`SELECT ${SELECT} FROM share_links WHERE id = $1`, [id])).rows[0]!;

async function getLink(q: Queryable, t: Tenancy, id: string, forUpdate = false): Promise<LinkRow> {
  if (!isUuid(id)) throw notFound('share link');
  return t.one<LinkRow>(q, { select: SELECT, from: 'share_links', ownerColumn: 'owner_id' }, id, 'share link', forUpdate);
}

/**
 * Each asset's owner, in the order given; an asset the caller does not see is a 404 naming its
 * index (`/assetIds/2`), the first such.
 */
async function assetOwners(q: Queryable, t: Tenancy, ids: string[]): Promise<string[]> {
  const params: unknown[] = [ids];
  const cond = await t.where('owner_id', params, q);
  const { rows } = await q.query<{ id: string; owner_id: string }>(
    `SELECT id, owner_id FROM assets WHERE id = ANY($1::uuid[]) AND ${cond}`,
    params,
  );
  const owner = new Map(rows.map((r) => [r.id, r.owner_id]));
  const missing = ids.findIndex((id) => !owner.has(id));
  if (missing >= 0) throw new ApiError('NOT_FOUND', `asset ${ids[missing]} not found`, { field: `/assetIds/${missing}` });
  return ids.map((id) => owner.get(id)!);
}

/**
 * The lowest owner whose tree holds all of `owners`, and the top-level owner above it; null when
 * they are under different top-level owners (only an operator can name such assets).
 */
async function commonOwner(q: Queryable, owners: string[]): Promise<{ owner: string; top: string } | null> {
  const distinct = [...new Set(owners)];
  const { rows } = await q.query<{ start: string; id: string; depth: number }>(
    `WITH RECURSIVE up(start, id, parent_id, depth) AS (
       SELECT id, id, parent_id, 0 FROM owners WHERE id = ANY($1::uuid[])
       UNION ALL
       SELECT up.start, o.id, o.parent_id, up.depth + 1 FROM owners o JOIN up ON o.id = up.parent_id WHERE up.depth < 100
     ) SELECT start, id, depth FROM up`,
    [distinct],
  );
  // Each owner's chain from its top-level owner down to itself.
  const chains = distinct.map((start) =>
    rows
      .filter((r) => r.start === start)
      .sort((a, b) => b.depth - a.depth)
      .map((r) => r.id),
  );
  const first = chains[0]!;
  let n = 0;
  while (n < first.length && chains.every((c) => c[n] === first[n])) n++;
  return n === 0 ? null : { owner: first[n - 1]!, top: first[0]! };
}

/** The owners of `top`'s tree, for a query (`$1` is top). */
const TREE = `WITH RECURSIVE tree(id) AS (SELECT $1::uuid UNION ALL SELECT o.id FROM owners o JOIN tree ON o.parent_id = tree.id)`;

/**
 * Makes room for one more link in `top`'s tree, or 409: at most `max` in effect. Ended links past
 * the newest `max` of the tree are removed first (their pages then answer 404 instead of 410).
 * Locks the tree until the commit, so concurrent creates are counted one after the other.
 */
async function withinLinkLimit(q: Queryable, top: string, max: number): Promise<void> {
  await q.query(`SELECT pg_advisory_xact_lock(hashtext('share-links:' || $1::text))`, [top]);
  await q.query(
    `${TREE} DELETE FROM share_links WHERE id IN (
       SELECT id FROM share_links WHERE owner_id IN (SELECT id FROM tree) AND (revoked_at IS NOT NULL OR expires_at <= now())
        ORDER BY LEAST(COALESCE(revoked_at, expires_at), expires_at) DESC, id OFFSET $2)`,
    [top, max],
  );
  const { rows } = await q.query<{ n: number }>(
    `${TREE} SELECT count(*)::int AS n FROM share_links
      WHERE owner_id IN (SELECT id FROM tree) AND revoked_at IS NULL AND expires_at > now()`,
    [top],
  );
  const n = rows[0]!.n;
  if (n >= max) {
    throw conflict(
      `The owner's top-level organisation has ${n} share links in effect, the most it may have (SHARE_MAX_LINKS_PER_OWNER ${max}); revoke one first.`,
    );
  }
}

/** expiresAt in the future and at most shareExpiryDays ahead, else a 400 naming it. */
function checkExpiry(expiresAt: string): Date {
  const at = new Date(expiresAt);
  const now = Date.now();
  if (at.getTime() <= now) throw badRequest('expiresAt must be in the future.', '/expiresAt');
  const days = BOUNDS.shareExpiryDays.value;
  if (at.getTime() > now + days * 86_400_000) throw badRequest(`expiresAt must be at most ${days} days ahead.`, '/expiresAt');
  return at;
}

export const shareLinkRoutes: FastifyPluginAsyncTypebox<{ db: Db; maxLinksPerOwner: number }> = async (app, { db, maxLinksPerOwner }) => {
  const tags = ['share-links'];

  app.get('/share-links', {
    schema: {
      tags,
      summary: 'List the share links of the owners the caller sees (never their tokens); filter by assetId or status',
      querystring: LinkList,
      response: { 200: Type.Array(ShareLink) },
    },
    handler: async (req, reply) => {
      const rows = await listPage<LinkRow>(db, req, reply, {
        select: SELECT,
        from: 'share_links',
        owners: { column: 'owner_id', scope: req.tenancy },
        defaultOrder: 'desc',
        idType: 'uuid',
        filters: (params, where) => applyFilters(LINK_FILTERS, req.query as Record<string, unknown>, params, where),
      });
      return rows.map(toApi);
    },
  });

  app.post('/share-links', {
    schema: {
      tags,
      summary: 'Make a share link: a read-only page, no sign-in, showing only `show` of only these assets until expiresAt',
      body: ShareLinkWrite,
      response: { 201: ShareLinkCreated },
    },
    handler: async (req, reply) => {
      const body = req.body as ShareLinkWrite;
      const expiresAt = checkExpiry(body.expiresAt);
      // The page shows the parts in one order, whatever the request's.
      const show = SHOWN.filter((s) => body.show.includes(s));
      const id = crypto.randomUUID();
      const token = newToken();
      const row = await db.tx(async (q) => {
        const owners = await assetOwners(q, req.tenancy, body.assetIds);
        const common = await commonOwner(q, owners);
        if (!common)
          throw badRequest("These assets belong to different top-level owners: share each one's in a link of its own.", '/assetIds');
        await withinLinkLimit(q, common.top, maxLinksPerOwner);
        await q.query(
          `INSERT INTO share_links (id, owner_id, digest, asset_ids, show, window_hours, note, expires_at, created_by)
           VALUES ($1, $2, $3, $4::uuid[], $5::text[], $6, $7, $8, $9)`,
          [
            id,
            common.owner,
            tokenDigest(token),
            body.assetIds,
            show,
            body.windowHours ?? DEFAULT_WINDOW_HOURS,
            body.note ?? null,
            expiresAt,
            req.tenancy.principal.actor,
          ],
        );
        const r = await read(q, id);
        await audit(q, req.tenancy, { action: 'create', type: 'shareLink', id, ownerId: r.owner_id, before: null, after: audited(r) });
        return r;
      });
      reply.code(201).header('Location', `${req.server.publicUrl}/api/v1/share-links/${id}`);
      return { ...toApi(row), url: `${req.server.publicUrl}/share/${token}` };
    },
  });

  app.get('/share-links/:id', {
    schema: { tags, summary: 'Get a share link (never its token)', params: IdParam, response: { 200: ShareLink } },
    handler: async (req) => toApi(await getLink(db, req.tenancy, req.params.id)),
  });

  app.delete('/share-links/:id', {
    schema: { tags, summary: 'Revoke a share link: its page answers 410 from now on (the link stays listed, revoked)', params: IdParam },
    handler: async (req, reply) => {
      await db.tx(async (q) => {
        const cur = await getLink(q, req.tenancy, req.params.id, true);
        // Revoked once: a second DELETE changes nothing and writes nothing.
        if (cur.revoked_at) return;
        await q.query('UPDATE share_links SET revoked_at = now() WHERE id = $1', [cur.id]);
        const after = await read(q, cur.id);
        await audit(q, req.tenancy, {
          action: 'revoke',
          type: 'shareLink',
          id: cur.id,
          ownerId: cur.owner_id,
          before: audited(cur),
          after: audited(after),
        });
      });
      return reply.code(204).send();
    },
  });
};
