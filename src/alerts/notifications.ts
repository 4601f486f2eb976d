// Notifications (API guide 4, 5 and 8): raised by the alert engine (raise.ts), read-only over
// REST, pushed to the integrations that opt into the `notification` type. Each carries a snapshot taken when it was raised: the asset's latest location at that
// time, the reefer data record, assetState and cmData, plus the ALERT event it came with.
import type { FastifyPluginAsync } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import type { Db } from '../db/db.js';
import { filters } from '../http/filters.js';
import { DateTime, iso, Nullable, Uuid } from '../http/schemas.js';
import { readRoutes } from '../tenancy/read-routes.js';

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
    type: Type.String({
      description: 'ALERT (a specification violated), SILENT (no record for silentAlertMinutes), DWELL (in a zone for dwellAlertMinutes)',
    }),
    subject: Type.String({ description: 'What was violated, as the ALERT event says' }),
    eventId: Nullable(Type.String({ description: 'The ALERT event raised with it' })),
    specificationId: Nullable(Type.String({ format: 'uuid', description: 'The specification violated; null for SILENT and DWELL' })),
    zoneId: Nullable(Type.String({ description: 'DWELL: the zone (int64 as a decimal string); else null' })),
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
    acknowledgedAt: Type.Union([DateTime, Type.Null()], {
      description: 'When someone acknowledged it (or its event); null until then, and when pushed',
    }),
    acknowledgedBy: Nullable(
      Type.String({ description: 'Who acknowledged it: user:<id>, apikey:<id>, client:<id> or external:<subject>' }),
    ),
  },
  { title: 'Notification' },
);
interface Row {
  id: string;
  owner_id: string;
  asset_id: string;
  asset_name: string;
  type: string;
  subject: string;
  event_id: string | null;
  specification_id: string | null;
  zone_id: string | null;
  specification_name: string | null;
  location: Record<string, unknown> | null;
  reefer_data: Record<string, unknown> | null;
  asset_state: { powerOffSince: string | null; powerOnSince: string | null; lastDefrost: string | null } | null;
  cm_data: Static<typeof Notification>['cmData'];
  when_created: Date;
  when_received: Date;
  acknowledged_at: Date | null;
  acknowledged_by: string | null;
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
  zoneId: r.zone_id,
  ...(r.specification_name === null ? {} : { specificationName: r.specification_name }),
  location: r.location,
  reeferData: r.reefer_data,
  assetState: r.asset_state ?? { powerOffSince: null, powerOnSince: null, lastDefrost: null },
  cmData: r.cm_data,
  acknowledgedAt: iso(r.acknowledged_at),
  acknowledgedBy: r.acknowledged_by,
});

export const toNotificationApi = toApi;

export const notificationRoutes: FastifyPluginAsync<{ db: Db }> = async (app, { db }) => {
  readRoutes(app, db, {
    path: '/notifications',
    tags: ['notifications'],
    what: 'notification',
    listSummary: 'List notifications, newest first by default',
    item: Notification,
    toApi,
    select: '*',
    from: 'notifications',
    ownerColumn: 'owner_id',
    idType: 'int8',
    defaultOrder: 'desc',
    export: { name: 'notifications' },
    filters: {
      assetId: filters.anyUuid('asset_id'),
      ownerId: filters.uuid('owner_id'),
      type: filters.equals('type', Type.String({ maxLength: 256 })),
    },
  });
};
