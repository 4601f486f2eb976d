// Events (API guide 4, 5 and 8): INFO events from zone enter/leave, and ALERT / INFO
// events from alert specifications and rules. Read-only over REST, pushed to the integrations that
// opt into the `event` type; other modules write them only through insertEvents (or pushEvents,
// for rows their own SQL inserts) below, as part of their own statement.
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { Db, Queryable } from '../db/db.js';
import type { WriteStatement } from '../db/statement.js';
import { sqlIso } from '../db/sql.js';
import { appendToLog, type OwnerPaths, ownerPaths } from '../eventlog/log.js';
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
    acknowledgedAt: Type.Union([DateTime, Type.Null()], {
      description: 'ALERT: when someone acknowledged it (or its notification); null until then, and when pushed',
    }),
    acknowledgedBy: Nullable(
      Type.String({ description: 'Who acknowledged it: user:<id>, apikey:<id>, client:<id> or external:<subject>' }),
    ),
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
  acknowledged_at: Date | null;
  acknowledged_by: string | null;
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
  acknowledgedAt: iso(r.acknowledged_at),
  acknowledgedBy: r.acknowledged_by,
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

/** The push shape of an event (API guide 8): its REST shape, from the row alias `e`. */
export const eventPayload = (e: string) =>
  `jsonb_build_object('id', ${e}.id::text, 'subject', ${e}.subject, 'assetId', ${e}.asset_id, 'ownerId', ${e}.owner_id,
     'severity', ${e}.severity, 'currentData', ${e}.current_data, 'prevData', ${e}.prev_data, 'whenCreated', ${sqlIso(`${e}.when_created`)},
     'acknowledgedAt', ${sqlIso(`${e}.acknowledged_at`)}, 'acknowledgedBy', ${e}.acknowledged_by)`;

/** Appends the events inserted by the CTE `inserted` (RETURNING *) to the event log: they are pushed like records. */
export const pushEvents = (stmt: WriteStatement, inserted: string, paths: OwnerPaths) =>
  appendToLog(stmt, 'event', inserted, eventPayload(inserted), paths);

/**
 * Adds the insert of `events`, and their push, to a statement. `ids` (allocateIds, input order)
 * when the caller must name them in the same statement (a notification's event); else the identity's.
 * `paths`: the owners' ancestries (ownerPaths), read here when not given.
 */
export async function insertEvents(
  q: Queryable,
  stmt: WriteStatement,
  events: NewEvent[],
  ids?: string[],
  paths?: OwnerPaths,
): Promise<void> {
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
  const inserted = stmt.with(
    ids
      ? `INSERT INTO events (id, ${names}) OVERRIDING SYSTEM VALUE SELECT * FROM unnest(${stmt.param(ids, 'int8[]')}, ${cols}) RETURNING *`
      : `INSERT INTO events (${names}) SELECT * FROM unnest(${cols}) RETURNING *`,
  );
  pushEvents(stmt, inserted, paths ?? (await ownerPaths(q, [...new Set(events.map((e) => e.ownerId))])));
}

export const toEventApi = toApi;

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
    export: { name: 'events' },
    filters: {
      assetId: filters.anyUuid('asset_id'),
      ownerId: filters.uuid('owner_id'),
      severity: filters.equals('severity', Severity),
    },
  });
};
