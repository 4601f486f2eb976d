// Events (API guide 4, 5 and 8): INFO events from zone enter/leave, and ALERT / INFO
// events from alert specifications. Read-only over REST; other modules write them only through
// insertEvents below, as part of their own statement.
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { Db } from '../db/db.js';
import type { WriteStatement } from '../db/statement.js';
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

/**
 * Adds the insert of `events` to a store's statement. `ids` (allocateIds, input order) when the
 * caller must name them in the same statement (a notification's event); else the identity's.
 */
export function insertEvents(stmt: WriteStatement, events: NewEvent[], ids?: string[]): void {
  if (events.length === 0) return;
  const cols = stmt.arrays(events, [
    [(e) => e.ownerId, 'uuid'],
    [(e) => e.assetId, 'uuid'],
    [(e) => e.subject, 'text'],
    [(e) => e.severity, 'text'],
    [(e) => JSON.stringify(e.currentData), 'jsonb'],
    [(e) => (e.prevData ? JSON.stringify(e.prevData) : null), 'jsonb'],
    [(e) => e.whenCreated, 'timestamptz'],
  ]);
  const names = 'owner_id, asset_id, subject, severity, current_data, prev_data, when_created';
  stmt.with(
    ids
      ? `INSERT INTO events (id, ${names}) OVERRIDING SYSTEM VALUE SELECT * FROM unnest(${stmt.param(ids, 'int8[]')}, ${cols})`
      : `INSERT INTO events (${names}) SELECT * FROM unnest(${cols})`,
  );
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
