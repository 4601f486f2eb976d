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
import { DateTime, iso, Nullable, Str, Uuid } from '../http/schemas.js';
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
    clearedAt: Type.Union([DateTime, Type.Null()], {
      description: 'ALERT: when its condition ended, the whenCreated of the INFO event that ends it (clearsEventId); null until then',
    }),
    clearsEventId: Nullable(
      Type.String({ description: 'INFO: the ALERT event it ends (int64 as a decimal string); null on every other event' }),
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
  cleared_at: Date | null;
  clears_event_id: string | null;
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
  clearedAt: iso(r.cleared_at),
  clearsEventId: r.clears_event_id,
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
  /** ALERT: filled with the event's id when it is taken (raise.ts), for the INFO event that ends it. */
  ref?: AlertRef;
  /** INFO: the ALERT event it ends (clearsEventId; that event's clearedAt becomes this one's whenCreated). */
  clears?: AlertRef | null;
}

/**
 * An ALERT event as the INFO event that ends it names it: its id (unset until taken, when both are
 * raised by one statement) and its time in epoch ms, the events' partition key. The alert rules
 * keep it in their state while the alert lasts.
 */
export interface AlertRef {
  id?: string;
  at: number;
}

/** The push shape of an event (API guide 8): its REST shape, from the row alias `e`. */
export const eventPayload = (e: string) =>
  `jsonb_build_object('id', ${e}.id::text, 'subject', ${e}.subject, 'assetId', ${e}.asset_id, 'ownerId', ${e}.owner_id,
     'severity', ${e}.severity, 'currentData', ${e}.current_data, 'prevData', ${e}.prev_data, 'whenCreated', ${sqlIso(`${e}.when_created`)},
     'acknowledgedAt', ${sqlIso(`${e}.acknowledged_at`)}, 'acknowledgedBy', ${e}.acknowledged_by,
     'clearedAt', ${sqlIso(`${e}.cleared_at`)}, 'clearsEventId', ${e}.clears_event_id::text)`;

/** Appends the events inserted by the CTE `inserted` (RETURNING *) to the event log: they are pushed like records. */
export const pushEvents = (stmt: WriteStatement, inserted: string, paths: OwnerPaths) =>
  appendToLog(stmt, 'event', inserted, eventPayload(inserted), paths);

/**
 * Adds the insert of `events`, and their push, to a statement. `ids` (allocateIds, input order)
 * when the caller must name them in the same statement (a notification's event, an ALERT an INFO
 * ends); else the identity's. `paths`: the owners' ancestries (ownerPaths), read here when not given.
 *
 * An INFO event that ends an ALERT (`clears`) names it, and the same statement sets that ALERT's
 * clearedAt to the INFO's time: on its row when stored earlier (found by id and time, its
 * partition's key), or as it is inserted when both are in `events` (a statement does not see the
 * rows it inserts). An ALERT cleared already keeps its first clearedAt.
 */
export async function insertEvents(
  q: Queryable,
  stmt: WriteStatement,
  events: NewEvent[],
  ids?: string[],
  paths?: OwnerPaths,
): Promise<void> {
  if (events.length === 0) return;
  const clearedAt = new Map<string, string>();
  const earlier: { id: string; at: number; clearedAt: string }[] = [];
  const here = new Set(ids);
  for (const e of events) {
    const id = e.clears?.id;
    if (id === undefined || clearedAt.has(id)) continue;
    clearedAt.set(id, e.whenCreated);
    if (!here.has(id)) earlier.push({ id, at: e.clears!.at, clearedAt: e.whenCreated });
  }
  const cols = stmt.arrays(events, [
    [(e) => e.ownerId, 'uuid'],
    [(e) => e.assetId, 'uuid'],
    [(e) => e.subject, 'text'],
    [(e) => e.severity, 'text'],
    [(e) => JSON.stringify(e.currentData), 'jsonb'],
    [(e) => (e.prevData ? JSON.stringify(e.prevData) : null), 'jsonb'],
    [(e) => e.whenCreated, 'timestamptz'],
    [(e) => e.clears?.id ?? null, 'int8'],
  ]);
  const names = 'owner_id, asset_id, subject, severity, current_data, prev_data, when_created, clears_event_id';
  const inserted = stmt.with(
    ids
      ? `INSERT INTO events (id, ${names}, cleared_at) OVERRIDING SYSTEM VALUE
         SELECT * FROM unnest(${stmt.param(ids, 'int8[]')}, ${cols}, ${stmt.param(
           ids.map((id) => clearedAt.get(id) ?? null),
           'timestamptz[]',
         )}) RETURNING *`
      : `INSERT INTO events (${names}) SELECT * FROM unnest(${cols}) RETURNING *`,
  );
  if (earlier.length) {
    const c = stmt.arrays(earlier, [
      [(x) => x.id, 'int8'],
      [(x) => new Date(x.at).toISOString(), 'timestamptz'],
      [(x) => x.clearedAt, 'timestamptz'],
    ]);
    stmt.with(
      `UPDATE events e SET cleared_at = c.cleared_at FROM unnest(${c}) AS c(id, at, cleared_at)
        WHERE e.id = c.id AND e.when_created = c.at AND e.cleared_at IS NULL`,
    );
  }
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
      // The alarm inbox: ALERT events neither acknowledged nor cleared (events_open_idx), or the rest.
      open: {
        schema: Type.Boolean({
          description: 'true: ALERT events neither acknowledged nor cleared (the alarm inbox); false: every other event',
        }),
        sql: (p) => `((severity = 'ALERT' AND acknowledged_at IS NULL AND cleared_at IS NULL) = ${p}::boolean)`,
      },
      // Words of the subject, any case (what kind of alert: SETPOINT_MISMATCH, above maximum, Power off, ...).
      subject: {
        schema: Str(100, { minLength: 1, description: 'Events whose subject contains this text, in any case' }),
        sql: (p) => `strpos(lower(subject), lower(${p}::text)) > 0`,
      },
      // Assets inside the zone at their latest position.
      zoneId: {
        schema: Type.String({
          pattern: '^[0-9]{1,19}$',
          maxLength: 19,
          description: 'Events of the assets whose latest position is inside this zone',
        }),
        sql: (p) => `asset_id IN (SELECT asset_id FROM asset_positions WHERE ${p}::bigint = ANY (zone_ids))`,
      },
    },
  });
};
