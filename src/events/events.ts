// Events (API guide 4, 5 and 8): INFO events from zone enter/leave, and ALERT / INFO
// events from alert specifications. Read-only over REST; other modules write them only through
// insertEvents below.
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { Db, Queryable } from '../db/db.js';
import { filters } from '../http/filters.js';
import { DateTime, iso, Nullable, Uuid } from '../http/schemas.js';
import { readRoutes } from '../tenancy/read-routes.js';

const Severity = Type.Union([Type.Literal('INFO'), Type.Literal('ALERT')]);
const ReadingSchema = Type.Object({ value: Type.String(), whenCreated: DateTime }, { additionalProperties: true });
export const Event = Type.Object(
  {
    id: Type.String({ description: 'int64 as a decimal string' }),
    subject: Type.String(),
    assetId: Uuid,
    ownerId: Uuid,
    severity: Severity,
    currentData: ReadingSchema,
    prevData: Nullable(ReadingSchema),
    whenCreated: DateTime,
  },
  { title: 'Event' },
);
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

/** A reading as events carry it (API guide 8): the value as text and its record time. */
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

export const eventRoutes: FastifyPluginAsync<{ db: Db }> = async (app, { db }) => {
  readRoutes(app, db, {
    path: '/events',
    tags: ['events'],
    what: 'event',
    listSummary: 'List events, newest first by default',
    item: Event,
    toApi,
    select: '*',
    from: 'events',
    ownerColumn: 'owner_id',
    idType: 'int8',
    defaultOrder: 'desc',
    filters: {
      assetId: filters.anyUuid('asset_id'),
      ownerId: filters.uuid('owner_id'),
      severity: filters.equals('severity', Severity),
    },
  });
};
