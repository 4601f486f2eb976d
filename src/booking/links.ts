// A booking's asset links (API guide 8, "Booking data"; DCSA Track & Trace, migration 0034): which
// box carries the booking over which time range, [from, to). A box carries one booking at a time:
// a range overlapping another link of the same asset, whatever its booking, is a 409 (checked under
// an advisory lock on the asset, so two creates cannot both pass). A booking has at most
// BOUNDS.bookingAssetLinks links. A link is stored with its booking's owner (the tenancy filter) and
// reached through its booking: 404 for a booking the caller does not see, whatever the link.
import crypto from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { audit } from '../audit/audit.js';
import { BOUNDS } from '../bounds.js';
import type { Db, Queryable } from '../db/db.js';
import { ApiError, badRequest, conflict, notFound } from '../http/errors.js';
import { DateTime, IdParam, iso, isUuid, Uuid } from '../http/schemas.js';
import type { Tenancy } from '../tenancy/tenancy.js';

const MAX_LINKS = BOUNDS.bookingAssetLinks.value;

/** The advisory lock space of an asset's booking links ("bkas"), beside the other lock spaces. */
const LINK_LOCK_SPACE = 1651204467;

export const BookingAsset = Type.Object(
  {
    id: Uuid,
    bookingId: Uuid,
    assetId: Uuid,
    from: DateTime,
    to: DateTime,
    whoCreated: Type.String(),
    whenCreated: DateTime,
  },
  { title: 'BookingAsset' },
);
const BookingAssetWrite = Type.Object({
  assetId: Type.String({ format: 'uuid', description: 'An asset the caller sees' }),
  from: Type.String({ format: 'date-time', description: 'RFC 3339, kept to the second; the link covers [from, to)' }),
  to: Type.String({ format: 'date-time', description: 'RFC 3339, kept to the second; after from' }),
});
const LinkParams = Type.Object({ id: IdParam.properties.id, linkId: Type.String({ maxLength: 64 }) });

interface Row {
  id: string;
  booking_id: string;
  asset_id: string;
  owner_id: string;
  valid_from: Date;
  valid_to: Date;
  who_created: string;
  when_created: Date;
}
const SELECT = 'id, booking_id, asset_id, owner_id, valid_from, valid_to, who_created, when_created';
const toApi = (r: Row) => ({
  id: r.id,
  bookingId: r.booking_id,
  assetId: r.asset_id,
  from: iso(r.valid_from)!,
  to: iso(r.valid_to)!,
  whoCreated: r.who_created,
  whenCreated: iso(r.when_created)!,
});

/** A date-time to the second, as every time the API answers (iso). */
const toSecond = (s: string) => new Date(Math.floor(Date.parse(s) / 1000) * 1000);

/** The booking `id` the caller sees (its owner), or 404; `forUpdate` holds it until the commit (the count of its links). */
function booking(q: Queryable, t: Tenancy, id: string, forUpdate = false): Promise<{ id: string; owner_id: string }> {
  if (!isUuid(id)) throw notFound('booking data');
  return t.one(q, { select: 'id, owner_id', from: 'booking_data', ownerColumn: 'owner_id' }, id, 'booking data', forUpdate);
}

/** One link of a booking the caller sees, or 404. */
async function link(q: Queryable, t: Tenancy, bookingId: string, linkId: string, forUpdate = false): Promise<Row> {
  await booking(q, t, bookingId);
  if (!isUuid(linkId)) throw notFound('booking asset link');
  const { rows } = await q.query<Row>(
    `SELECT ${SELECT} FROM booking_assets WHERE id = $1::uuid AND booking_id = $2::uuid${forUpdate ? ' FOR UPDATE' : ''}`,
    [linkId, bookingId],
  );
  if (!rows[0]) throw notFound('booking asset link');
  return rows[0];
}

export const bookingLinkRoutes: FastifyPluginAsyncTypebox<{ db: Db }> = async (app, { db }) => {
  const tags = ['booking-data'];

  app.get('/booking-data/:id/assets', {
    schema: {
      tags,
      summary: `List the assets that carry booking data, by from (all of them: at most ${MAX_LINKS})`,
      params: IdParam,
      response: { 200: Type.Array(BookingAsset) },
    },
    handler: async (req) => {
      const b = await booking(db, req.tenancy, req.params.id);
      const { rows } = await db.query<Row>(`SELECT ${SELECT} FROM booking_assets WHERE booking_id = $1 ORDER BY valid_from, id`, [b.id]);
      return rows.map(toApi);
    },
  });

  app.get('/booking-data/:id/assets/:linkId', {
    schema: { tags, summary: 'Get an asset link of booking data', params: LinkParams, response: { 200: BookingAsset } },
    handler: async (req) => toApi(await link(db, req.tenancy, req.params.id, req.params.linkId)),
  });

  app.post('/booking-data/:id/assets', {
    schema: {
      tags,
      summary: 'Link an asset that carries booking data from..to; 409 when it carries another booking then',
      params: IdParam,
      body: BookingAssetWrite,
      response: { 201: BookingAsset },
    },
    handler: async (req, reply) => {
      const t = req.tenancy;
      const { assetId } = req.body;
      const created = await db.tx(async (q) => {
        // Held until the commit: concurrent links of one booking are counted one after the other.
        const b = await booking(q, t, req.params.id, true);
        const from = toSecond(req.body.from);
        const to = toSecond(req.body.to);
        if (!(from < to))
          throw badRequest(`/to must be after /from (a link covers [from, to)); got ${req.body.from}..${req.body.to}.`, '/to');
        const params: unknown[] = [assetId];
        const cond = await t.where('owner_id', params, q);
        const { rows: assets } = await q.query(`SELECT 1 FROM assets WHERE id = $1::uuid AND ${cond}`, params);
        if (assets.length === 0) throw new ApiError('NOT_FOUND', `asset ${assetId} not found`, { field: '/assetId' });
        // One asset's links are written one at a time (every instance): the overlap check below holds.
        await q.query(`SELECT pg_advisory_xact_lock(${LINK_LOCK_SPACE}, hashtext($1::text))`, [assetId]);
        const { rows: counted } = await q.query<{ n: number }>('SELECT count(*)::int AS n FROM booking_assets WHERE booking_id = $1', [
          b.id,
        ]);
        const n = counted[0]!.n;
        if (n >= MAX_LINKS) {
          throw conflict(`This booking has ${n} asset links, the most it may have (bookingAssetLinks ${MAX_LINKS}); delete one first.`);
        }
        const { rows: overlapping } = await q.query<Row>(
          `SELECT ${SELECT} FROM booking_assets WHERE asset_id = $1::uuid AND valid_from < $3 AND valid_to > $2
            ORDER BY valid_from, id LIMIT 1`,
          [assetId, from, to],
        );
        const other = overlapping[0];
        if (other) {
          // Named when the caller sees it; a booking it does not see stays unnamed.
          const which =
            other.booking_id === b.id
              ? 'this booking'
              : (await t.sees(other.owner_id, q))
                ? `booking data ${other.booking_id}`
                : 'booking data you do not see';
          throw conflict(
            `Asset ${assetId} carries ${which} from ${iso(other.valid_from)} to ${iso(other.valid_to)}, which overlaps ${iso(from)}..${iso(to)}: an asset carries one booking at a time.`,
            '/from',
          );
        }
        const { rows } = await q.query<Row>(
          `INSERT INTO booking_assets (id, booking_id, asset_id, owner_id, valid_from, valid_to, who_created)
           VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${SELECT}`,
          [crypto.randomUUID(), b.id, assetId, b.owner_id, from, to, t.principal.actor],
        );
        const out = toApi(rows[0]!);
        await audit(q, t, { action: 'create', type: 'bookingAsset', id: out.id, ownerId: b.owner_id, before: null, after: out });
        return out;
      });
      reply.code(201).header('Location', `${req.server.publicUrl}/api/v1/booking-data/${created.bookingId}/assets/${created.id}`);
      return created;
    },
  });

  app.delete('/booking-data/:id/assets/:linkId', {
    schema: { tags, summary: 'Remove an asset link of booking data', params: LinkParams },
    handler: async (req, reply) => {
      await db.tx(async (q) => {
        const cur = await link(q, req.tenancy, req.params.id, req.params.linkId, true);
        await q.query('DELETE FROM booking_assets WHERE id = $1', [cur.id]);
        await audit(q, req.tenancy, {
          action: 'delete',
          type: 'bookingAsset',
          id: cur.id,
          ownerId: cur.owner_id,
          before: toApi(cur),
          after: null,
        });
      });
      return reply.code(204).send();
    },
  });
};
