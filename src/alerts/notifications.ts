// Notifications (spec 2.11, API.md sections 4, 5, 8): raised by the alert engine, read-only over
// REST. Each carries a snapshot taken when it was raised: the asset's latest location at that
// time, the reefer data record, assetState and cmData, plus the ALERT event it came with.
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import type { Db } from '../db/db.js';
import { notFound } from '../http/errors.js';
import { listPage, PageQuery } from '../http/paging.js';
import { DateTime, IdParam, iso, isInt8Id, Nullable, Uuid } from '../http/schemas.js';

const Stamp = Nullable(DateTime);
const Free = (description: string) => Type.Object({}, { additionalProperties: true, description });
export const Notification = Type.Object(
  {
    id: Type.String({ description: 'int64 as a decimal string' }),
    ownerId: Uuid,
    assetId: Uuid,
    assetName: Type.String(),
    whenCreated: DateTime,
    whenReceived: DateTime,
    type: Type.String({ description: 'ALERT' }),
    subject: Type.String({ description: 'What was violated, as the ALERT event says' }),
    eventId: Nullable(Type.String({ description: 'The ALERT event raised with it' })),
    specificationId: Uuid,
    specificationName: Type.Optional(Type.String({ description: 'Absent when the specification has no name' })),
    location: Nullable(
      Free('The latest location at that time, with name, type, note and whenUpdated of the first zone it was in; null if none yet'),
    ),
    reeferData: Nullable(Free('The data record that raised it (the last one, for an asset that went silent)')),
    assetState: Type.Object({ powerOffSince: Stamp, powerOnSince: Stamp, lastDefrost: Stamp }),
    cmData: Nullable(
      Type.Object({
        deviceId: Nullable(Type.String()),
        serial: Nullable(Type.String()),
        ownerId: Uuid,
        firmwareVersion: Nullable(Type.String()),
        configuration: Nullable(Type.String()),
        lastUpdated: DateTime,
      }),
    ),
  },
  { title: 'Notification' },
);
const NotificationList = Type.Intersect([
  PageQuery,
  Type.Object({
    assetId: Type.Optional(Type.Array(Uuid)),
    ownerId: Type.Optional(Uuid),
    type: Type.Optional(Type.String({ maxLength: 256 })),
  }),
]);

interface Row {
  id: string;
  owner_id: string;
  asset_id: string;
  asset_name: string;
  type: string;
  subject: string;
  event_id: string | null;
  specification_id: string;
  specification_name: string | null;
  location: Record<string, unknown> | null;
  reefer_data: Record<string, unknown> | null;
  asset_state: { powerOffSince: string | null; powerOnSince: string | null; lastDefrost: string | null } | null;
  cm_data: Static<typeof Notification>['cmData'];
  when_created: Date;
  when_received: Date;
}
const toApi = (r: Row) => ({
  id: r.id,
  ownerId: r.owner_id,
  assetId: r.asset_id,
  assetName: r.asset_name,
  whenCreated: iso(r.when_created)!,
  whenReceived: iso(r.when_received)!,
  type: r.type,
  subject: r.subject,
  eventId: r.event_id,
  specificationId: r.specification_id,
  ...(r.specification_name === null ? {} : { specificationName: r.specification_name }),
  location: r.location,
  reeferData: r.reefer_data,
  assetState: r.asset_state ?? { powerOffSince: null, powerOnSince: null, lastDefrost: null },
  cmData: r.cm_data,
});

export async function notificationRoutes(app: FastifyInstance, { db }: { db: Db }): Promise<void> {
  const tags = ['notifications'];
  app.get('/notifications', {
    schema: {
      tags,
      summary: 'List notifications, newest first by default',
      querystring: NotificationList,
      response: { 200: Type.Array(Notification) },
    },
    handler: async (req, reply) => {
      const query = req.query as Static<typeof NotificationList>;
      const rows = await listPage<Row>(db, req, reply, {
        select: '*',
        from: 'notifications',
        ownerColumn: 'owner_id',
        defaultOrder: 'desc',
        idType: 'int8',
        filters: (params, where) => {
          if (query.assetId?.length) where.push(`asset_id = ANY($${params.push(query.assetId)}::uuid[])`);
          if (query.ownerId !== undefined) where.push(`owner_id = $${params.push(query.ownerId)}::uuid`);
          if (query.type !== undefined) where.push(`type = $${params.push(query.type)}`);
        },
      });
      return rows.map(toApi);
    },
  });
  app.get('/notifications/:id', {
    schema: { tags, summary: 'Get a notification', params: IdParam, response: { 200: Notification } },
    handler: async (req) => {
      const id = (req.params as { id: string }).id;
      if (!isInt8Id(id)) throw notFound('notification');
      return toApi(
        await req.tenancy.one<Row>(db, { select: '*', from: 'notifications', ownerColumn: 'owner_id', idType: 'int8' }, id, 'notification'),
      );
    },
  });
}
