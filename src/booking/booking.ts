// Booking data (API guide 8): free JSON per owner; `type` must be the one configured
// literal (BOOKING_DATA_TYPE); `name` unique within the owner; `ownerId` defaults to the caller's.
// The references of DCSA Track & Trace (migration 0034): `carrierBookingReference` and
// `transportDocumentReference`; the boxes that carry a booking are its asset links (links.ts).
import { audit } from '../audit/audit.js';
import crypto from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type, type Static } from '@sinclair/typebox';
import type { Config } from '../config.js';
import type { Db, Queryable } from '../db/db.js';
import { badRequest, notFound } from '../http/errors.js';
import { BOUNDS } from '../bounds.js';
import { filters } from '../http/filters.js';
import { readRoutes } from '../tenancy/read-routes.js';
import { DateTime, IdParam, iso, isUuid, Nullable, Str, Uuid } from '../http/schemas.js';
import type { Tenancy } from '../tenancy/tenancy.js';
import { mergePatch } from '../http/merge-patch.js';
import { bookingLinkRoutes } from './links.js';

const MAX_JSON_BYTES = BOUNDS.dataObjectBytes.value;

/** DCSA's references: 1 to `max` characters, no space first or last. */
const Reference = (max: number, description: string) => Type.String({ minLength: 1, maxLength: max, description });
const CarrierBookingReference = Reference(35, "The carrier's booking reference (DCSA carrierBookingReference), 1 to 35 characters");
const TransportDocumentReference = Reference(20, 'The bill of lading number (DCSA transportDocumentReference), 1 to 20 characters');

/** 400 naming the field when a reference given starts or ends with white space. */
function checkReferences(b: { carrierBookingReference?: string | null; transportDocumentReference?: string | null }): void {
  for (const field of ['carrierBookingReference', 'transportDocumentReference'] as const) {
    const v = b[field];
    if (typeof v === 'string' && /^\s|\s$/.test(v)) throw badRequest(`/${field} must not start or end with white space.`, `/${field}`);
  }
}

export const bookingRoutes: FastifyPluginAsyncTypebox<{ db: Db; cfg: Config }> = async (app, { db, cfg }) => {
  const TypeLiteral = Type.Literal(cfg.BOOKING_DATA_TYPE);
  const Booking = Type.Object(
    {
      id: Uuid,
      name: Nullable(Str(50)),
      ownerId: Uuid,
      type: TypeLiteral,
      jsonData: Type.Unknown({ description: 'Any JSON value' }),
      carrierBookingReference: Nullable(CarrierBookingReference),
      transportDocumentReference: Nullable(TransportDocumentReference),
      whoCreated: Type.String(),
      whenCreated: DateTime,
      whenUpdated: DateTime,
    },
    { title: 'BookingData' },
  );
  const BookingWrite = Type.Object({
    name: Type.Optional(Nullable(Str(50, { description: 'Unique within the owner' }))),
    ownerId: Type.Optional(Type.String({ format: 'uuid', description: "Defaults to the caller's owner" })),
    type: TypeLiteral,
    jsonData: Type.Optional(Type.Unknown({ description: 'Any JSON value, at most 64 KiB' })),
    carrierBookingReference: Type.Optional(Nullable(CarrierBookingReference)),
    transportDocumentReference: Type.Optional(Nullable(TransportDocumentReference)),
  });
  type BookingWrite = Static<typeof BookingWrite>;
  const BookingPatch = Type.Partial(BookingWrite);

  interface Row {
    id: string;
    name: string | null;
    owner_id: string;
    type: string;
    json_data: unknown;
    carrier_booking_reference: string | null;
    transport_document_reference: string | null;
    who_created: string;
    when_created: Date;
    when_updated: Date;
  }
  const SELECT =
    'id, name, owner_id, type, json_data, carrier_booking_reference, transport_document_reference, who_created, when_created, when_updated';
  const toApi = (r: Row) => ({
    id: r.id,
    name: r.name,
    ownerId: r.owner_id,
    type: r.type as typeof cfg.BOOKING_DATA_TYPE,
    jsonData: r.json_data ?? null,
    carrierBookingReference: r.carrier_booking_reference,
    transportDocumentReference: r.transport_document_reference,
    whoCreated: r.who_created,
    whenCreated: iso(r.when_created)!,
    whenUpdated: iso(r.when_updated)!,
  });
  const get = (q: Queryable, t: Tenancy, id: string, forUpdate = false) => {
    if (!isUuid(id)) throw notFound('booking data');
    return t.one<Row>(q, { select: SELECT, from: 'booking_data', ownerColumn: 'owner_id' }, id, 'booking data', forUpdate);
  };
  const json = (v: unknown) => {
    if (v === undefined || v === null) return null;
    const text = JSON.stringify(v);
    if (Buffer.byteLength(text) > MAX_JSON_BYTES) throw badRequest('/jsonData must be at most 64 KiB of JSON.', '/jsonData');
    return text;
  };
  const tags = ['booking-data'];

  readRoutes(app, db, {
    path: '/booking-data',
    tags,
    what: 'booking data',
    listSummary: 'List booking data',
    item: Booking,
    toApi,
    select: SELECT,
    from: 'booking_data',
    ownerColumn: 'owner_id',
    idType: 'uuid',
    defaultOrder: 'asc',
    filters: {
      ownerId: filters.uuid('owner_id'),
      name: filters.equals('name', Str(50)),
      carrierBookingReference: filters.equals('carrier_booking_reference', Str(35)),
      transportDocumentReference: filters.equals('transport_document_reference', Str(20)),
    },
    // Each carries a `jsonData` of up to 64 KiB: pages are bounded in bytes too.
    sizeOf: 'COALESCE(octet_length(json_data::text), 0)',
  });

  app.post('/booking-data', {
    schema: { tags, summary: 'Store booking data', body: BookingWrite, response: { 201: Booking } },
    handler: async (req, reply) => {
      const b = req.body;
      checkReferences(b);
      const ownerId = await req.tenancy.ownerFor(b.ownerId);
      const created = await db.tx(async (q) => {
        const { rows } = await q.query<Row>(
          `INSERT INTO booking_data (id, owner_id, name, type, json_data, carrier_booking_reference, transport_document_reference, who_created)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING ${SELECT}`,
          [
            crypto.randomUUID(),
            ownerId,
            b.name ?? null,
            b.type,
            json(b.jsonData),
            b.carrierBookingReference ?? null,
            b.transportDocumentReference ?? null,
            req.tenancy.principal.actor,
          ],
        );
        const out = toApi(rows[0]!);
        await audit(q, req.tenancy, { action: 'create', type: 'bookingData', id: out.id, ownerId, before: null, after: out });
        return out;
      });
      reply.code(201).header('Location', `${req.server.publicUrl}/api/v1/booking-data/${created.id}`);
      return created;
    },
  });

  /** A PUT replaces every writable field (absent optional ones cleared); a PATCH merges, jsonData too. */
  const update = (t: Tenancy, id: string, b: Partial<BookingWrite>, mode: 'put' | 'patch') =>
    db.tx(async (q) => {
      const cur = await get(q, t, id, true);
      const ownerId = b.ownerId ?? cur.owner_id;
      if (ownerId !== cur.owner_id) await t.assertOwner(ownerId, '/ownerId', q);
      checkReferences(b);
      const given = <T>(v: T | undefined, old: T | null): T | null => (v !== undefined ? v : mode === 'put' ? null : old);
      const name = given(b.name, cur.name);
      const data =
        b.jsonData !== undefined
          ? json(mode === 'patch' ? mergePatch(cur.json_data, b.jsonData) : b.jsonData)
          : mode === 'put'
            ? null
            : json(cur.json_data);
      const { rows } = await q.query<Row>(
        `UPDATE booking_data SET name = $2, owner_id = $3, type = $4, json_data = $5, carrier_booking_reference = $6,
                transport_document_reference = $7, when_updated = now()
          WHERE id = $1 RETURNING ${SELECT}`,
        [
          id,
          name,
          ownerId,
          b.type ?? cur.type,
          data,
          given(b.carrierBookingReference, cur.carrier_booking_reference),
          given(b.transportDocumentReference, cur.transport_document_reference),
        ],
      );
      // Its asset links belong to the booking's owner (the tenancy filter of links.ts): they move with it.
      if (ownerId !== cur.owner_id) await q.query('UPDATE booking_assets SET owner_id = $2 WHERE booking_id = $1', [id, ownerId]);
      const after = toApi(rows[0]!);
      await audit(q, t, { action: 'update', type: 'bookingData', id, ownerId, before: toApi(cur), after });
      return after;
    });
  app.put('/booking-data/:id', {
    schema: { tags, summary: 'Replace booking data', params: IdParam, body: BookingWrite, response: { 200: Booking } },
    handler: (req) => update(req.tenancy, req.params.id, req.body, 'put'),
  });
  app.patch('/booking-data/:id', {
    schema: {
      tags,
      summary: 'Update booking data (JSON merge patch of the record)',
      params: IdParam,
      body: BookingPatch,
      response: { 200: Booking },
    },
    handler: (req) => update(req.tenancy, req.params.id, req.body, 'patch'),
  });
  app.delete('/booking-data/:id', {
    schema: { tags, summary: 'Delete booking data', params: IdParam },
    handler: async (req, reply) => {
      const id = req.params.id;
      await db.tx(async (q) => {
        const cur = await get(q, req.tenancy, id, true);
        await q.query('DELETE FROM booking_data WHERE id = $1', [id]);
        await audit(q, req.tenancy, { action: 'delete', type: 'bookingData', id, ownerId: cur.owner_id, before: toApi(cur), after: null });
      });
      return reply.code(204).send();
    },
  });

  // The boxes that carry it (links.ts): /booking-data/{id}/assets.
  await app.register(bookingLinkRoutes, { db });
};
