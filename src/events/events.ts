// Events (spec 2.8, API.md sections 4-5): INFO events from zone enter/leave, and ALERT / INFO
// events from alert specifications. Read-only over REST; other modules write them only through
// insertEvents below.
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import type { Db, Queryable } from '../db/db.js';
import { notFound } from '../http/errors.js';
import { listPage, PageQuery } from '../http/paging.js';
import { DateTime, IdParam, iso, isInt8Id, Nullable, Uuid } from '../http/schemas.js';

const ReadingSchema = Type.Object({ value: Type.String(), whenCreated: DateTime }, { additionalProperties: true });
export const Event = Type.Object(
  {
    id: Type.String({ description: 'int64 as a decimal string' }),
    subject: Type.String(),
    assetId: Uuid,
    ownerId: Uuid,
    severity: Type.Union([Type.Literal('INFO'), Type.Literal('ALERT')]),
    currentData: ReadingSchema,
    prevData: Nullable(ReadingSchema),
    whenCreated: DateTime,
  },
  { title: 'Event' },
);
const EventList = Type.Intersect([
  PageQuery,
  Type.Object({
    assetId: Type.Optional(Type.Array(Uuid)),
    ownerId: Type.Optional(Uuid),
    severity: Type.Optional(Type.Union([Type.Literal('INFO'), Type.Literal('ALERT')])),
  }),
]);

interface Row {
  id: string;
  subject: string;
  asset_id: string;
  owner_id: string;
  severity: 'INFO' | 'ALERT';
  current_data: { value: string; whenCreated: string };
  prev_data: { value: string; whenCreated: string } | null;
  when_created: Date;
}
const toApi = (r: Row) => ({
  id: r.id,
  subject: r.subject,
  assetId: r.asset_id,
  ownerId: r.owner_id,
  severity: r.severity,
  currentData: r.current_data,
  prevData: r.prev_data,
  whenCreated: iso(r.when_created)!,
});

/** A reading as events carry it (spec 2.8): the value as text and its record time. */
export interface Reading {
  value: string;
  whenCreated: string;
}

export interface NewEvent {
  ownerId: string;
  assetId: string;
  subject: string;
  severity: 'INFO' | 'ALERT';
  currentData: Reading;
  prevData?: Reading | null;
  /** The event's time (record time: the reading's, or when a silent violation fell due). */
  whenCreated: string;
}

/** Stores events in one statement; returns their ids in input order. */
export async function insertEvents(q: Queryable, events: NewEvent[]): Promise<string[]> {
  if (events.length === 0) return [];
  // Identity values follow unnest's row order, so ORDER BY id is input order.
  const { rows } = await q.query<{ id: string }>(
    `WITH i AS (
       INSERT INTO events (owner_id, asset_id, subject, severity, current_data, prev_data, when_created)
       SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::jsonb[], $6::jsonb[], $7::timestamptz[])
       RETURNING id
     ) SELECT id FROM i ORDER BY id`,
    [
      events.map((e) => e.ownerId),
      events.map((e) => e.assetId),
      events.map((e) => e.subject),
      events.map((e) => e.severity),
      events.map((e) => JSON.stringify(e.currentData)),
      events.map((e) => (e.prevData ? JSON.stringify(e.prevData) : null)),
      events.map((e) => e.whenCreated),
    ],
  );
  return rows.map((r) => r.id);
}

export async function eventRoutes(app: FastifyInstance, { db }: { db: Db }): Promise<void> {
  const tags = ['events'];
  app.get('/events', {
    schema: { tags, summary: 'List events, newest first by default', querystring: EventList, response: { 200: Type.Array(Event) } },
    handler: async (req, reply) => {
      const query = req.query as Static<typeof EventList>;
      const rows = await listPage<Row>(db, req, reply, {
        select: '*',
        from: 'events',
        ownerColumn: 'owner_id',
        defaultOrder: 'desc',
        idType: 'int8',
        filters: (params, where) => {
          if (query.assetId?.length) where.push(`asset_id = ANY($${params.push(query.assetId)}::uuid[])`);
          if (query.ownerId !== undefined) where.push(`owner_id = $${params.push(query.ownerId)}::uuid`);
          if (query.severity !== undefined) where.push(`severity = $${params.push(query.severity)}`);
        },
      });
      return rows.map(toApi);
    },
  });
  app.get('/events/:id', {
    schema: { tags, summary: 'Get an event', params: IdParam, response: { 200: Event } },
    handler: async (req) => {
      const id = (req.params as { id: string }).id;
      if (!isInt8Id(id)) throw notFound('event');
      return toApi(await req.tenancy.one<Row>(db, { select: '*', from: 'events', ownerColumn: 'owner_id', idType: 'int8' }, id, 'event'));
    },
  });
}
