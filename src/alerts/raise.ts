// What the alert engine raises (API guide 8), stored and pushed as part of the caller's statement:
// events, and for each alert its notification, with the snapshot it shows (the asset's latest
// location at that time with its first zone's members, the record behind it, assetState, cmData).
// Specification alerts (engine.ts) and the silence and zone rules (silence.ts, visits.ts) all raise
// through here, so a notification looks and is pushed the same whatever raised it.
import type { Queryable } from '../db/db.js';
import { allocateIds, type WriteStatement } from '../db/statement.js';
import { sqlIso } from '../db/sql.js';
import { appendToLog, type OwnerPaths, ownerPaths } from '../eventlog/log.js';
import { insertEvents, type NewEvent } from '../events/events.js';
import type { SpecType } from './model.js';

const TABLE: Record<SpecType, string> = { REEFER: 'reefer_data', GENSET: 'genset_data' };
// The record a notification shows, in its REST shape (genset data for a GENSET specification).
const RECORD_JSON: Record<SpecType, string> = {
  REEFER: `jsonb_build_object('id', r.id::text, 'assetId', r.asset_id, 'ownerId', r.owner_id, 'reeferClass', r.reefer_class,
    'gensetManufacturer', r.genset_manufacturer, 'data', r.data, 'whenCreated', ${sqlIso('r.when_created')})`,
  GENSET: `jsonb_build_object('id', r.id::text, 'assetId', r.asset_id, 'ownerId', r.owner_id, 'gensetType', r.genset_type,
    'boxId', r.box_id, 'data', r.data, 'whenCreated', ${sqlIso('r.when_created')})`,
};
// The asset's latest location at the alert's time, with the members of the first zone it was in
// ("zone-like members name, type, note, whenUpdated").
const LOCATION_JSON = `(SELECT jsonb_build_object('id', l.id::text, 'assetId', l.asset_id, 'ownerId', l.owner_id,
      'latitude', l.latitude, 'longitude', l.longitude, 'altitude', l.altitude, 'heading', l.heading, 'speed', l.speed,
      'zoneId', l.zone_id, 'whenCreated', ${sqlIso('l.when_created')},
      'name', z.name, 'type', z.type, 'note', z.note, 'whenUpdated', ${sqlIso('z.when_updated')})
    FROM locations l
    LEFT JOIN zones z ON z.owner_id = l.owner_id
      AND z.id = CASE WHEN split_part(l.zone_id, ',', 1) ~ '^[0-9]{1,18}$' THEN split_part(l.zone_id, ',', 1)::int8 END
    WHERE l.asset_id = x.a AND l.when_created <= x.w ORDER BY l.when_created DESC, l.id DESC LIMIT 1)`;

/** The push shape of a notification: its REST shape (notifications.ts), from the row alias `n`. */
export const notificationPayload = (n: string) =>
  `jsonb_build_object('id', ${n}.id::text, 'ownerId', ${n}.owner_id, 'assetId', ${n}.asset_id, 'assetName', ${n}.asset_name,
     'whenCreated', ${sqlIso(`${n}.when_created`)}, 'whenReceived', ${sqlIso(`${n}.when_received`)}, 'type', ${n}.type,
     'subject', ${n}.subject, 'eventId', ${n}.event_id::text, 'specificationId', ${n}.specification_id, 'zoneId', ${n}.zone_id::text,
     'location', ${n}.location, 'reeferData', ${n}.reefer_data,
     'assetState', COALESCE(${n}.asset_state, '{"powerOffSince": null, "powerOnSince": null, "lastDefrost": null}'::jsonb),
     'cmData', ${n}.cm_data, 'acknowledgedAt', ${sqlIso(`${n}.acknowledged_at`)}, 'acknowledgedBy', ${n}.acknowledged_by)
   || CASE WHEN ${n}.specification_name IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('specificationName', ${n}.specification_name) END`;

/** Notification types: a specification's violation, an asset's silence, a stay in a zone. */
export type NotificationType = 'ALERT' | 'SILENT' | 'DWELL';

export interface Raised {
  event: NewEvent;
  /** An alert's notification (its event must be an ALERT). */
  notification?: {
    type: NotificationType;
    specificationId: string | null;
    specificationName: string | null;
    zoneId: string | null;
    /** The record it shows (by id; null: the asset's latest record of `recordType` at the alert's time). */
    recordId: string | null;
    assetState: Record<string, string | null> | null;
    cmData: Record<string, unknown> | null;
  };
}

/**
 * Adds the events and notifications to `stmt`, both pushed. An event's `ref` gets its id (before
 * this returns), so a caller writes it in its state in the same statement. `recordType`: which data a
 * notification shows (reefer data unless a GENSET specification raised it); `records`: the CTE of
 * records stored by the same statement (not yet visible in their table), looked in first.
 */
export async function raise(
  q: Queryable,
  stmt: WriteStatement,
  items: Raised[],
  opts: { recordType?: SpecType; records?: string; paths?: OwnerPaths } = {},
): Promise<void> {
  if (items.length === 0) return;
  const paths = opts.paths ?? (await ownerPaths(q, [...new Set(items.map((i) => i.event.ownerId))]));
  // Notifications name their events, and so does an INFO event that ends an ALERT raised here
  // (its `ref`, which the caller's state keeps too): the events' ids are taken first.
  const named = items.some((i) => i.notification || i.event.ref);
  const ids = named ? await allocateIds(q, 'events', items.length) : undefined;
  if (ids) for (const [n, i] of items.entries()) if (i.event.ref) i.event.ref.id = ids[n]!;
  await insertEvents(
    q,
    stmt,
    items.map((i) => i.event),
    ids,
    paths,
  );
  if (!ids) return;
  const withIds = items.map((i, n) => ({ ...i, eventId: ids[n]! })).filter((i) => i.notification);
  const columns = stmt.arrays(withIds, [
    [(x) => x.event.ownerId, 'uuid'],
    [(x) => x.event.assetId, 'uuid'],
    [(x) => x.notification!.type, 'text'],
    [(x) => x.event.subject, 'text'],
    [(x) => x.eventId, 'int8'],
    [(x) => x.notification!.specificationId, 'uuid'],
    [(x) => x.notification!.specificationName, 'text'],
    [(x) => x.notification!.zoneId, 'int8'],
    [(x) => x.notification!.recordId, 'int8'],
    [(x) => (x.notification!.assetState ? JSON.stringify(x.notification!.assetState) : null), 'jsonb'],
    [(x) => (x.notification!.cmData ? JSON.stringify(x.notification!.cmData) : null), 'jsonb'],
    [(x) => x.event.whenCreated, 'timestamptz'],
  ]);
  const type = opts.recordType ?? 'REEFER';
  const byId = (source: string) => `(SELECT ${RECORD_JSON[type]} FROM ${source} r WHERE r.id = x.r)`;
  const shown = opts.records ? `COALESCE(${byId(opts.records)}, ${byId(TABLE[type])})` : byId(TABLE[type]);
  const latest = `(SELECT ${RECORD_JSON[type]} FROM ${TABLE[type]} r WHERE r.asset_id = x.a AND r.when_created <= x.w
                    ORDER BY r.when_created DESC, r.id DESC LIMIT 1)`;
  const inserted = stmt.with(
    `INSERT INTO notifications (owner_id, asset_id, asset_name, type, subject, event_id, specification_id, specification_name,
                                zone_id, location, reefer_data, asset_state, cm_data, when_created)
     SELECT x.o, x.a, a.name, x.t, x.s, x.e, x.sid, x.sn, x.z, ${LOCATION_JSON},
            CASE WHEN x.r IS NULL THEN ${latest} ELSE ${shown} END, x.st, x.cm, x.w
       FROM unnest(${columns}) WITH ORDINALITY AS x(o, a, t, s, e, sid, sn, z, r, st, cm, w, n)
       JOIN assets a ON a.id = x.a
      ORDER BY x.n
     RETURNING *`,
  );
  appendToLog(stmt, 'notification', inserted, notificationPayload(inserted), paths);
}
