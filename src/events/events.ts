// Events (spec 2.8, API.md sections 4-5): INFO events from zone enter/leave, and (from alert
// specifications) ALERT events. Read-only over REST.
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import type { Db } from '../db/db.js';
import { notFound } from '../http/errors.js';
import { listPage, PageQuery } from '../http/paging.js';
import { DateTime, IdParam, iso, isInt8Id, Nullable, Uuid } from '../http/schemas.js';

const Reading = Type.Object({ value: Type.String(), whenCreated: DateTime }, { additionalProperties: true });
export const Event = Type.Object(
  {
    id: Type.String({ description: 'int64 as a decimal string' }),
    subject: Type.String(),
    assetId: Uuid,
    ownerId: Uuid,
    severity: Type.Union([Type.Literal('INFO'), Type.Literal('ALERT')]),
    currentData: Reading,
    prevData: Nullable(Reading),
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
