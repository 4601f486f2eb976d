// The seam between storing and pushing (spec 6.1, API.md section 9): every stored asset change and
// data record is appended here, in its push shape (spec 2.12) with a new event id, and gets one
// delivery per enabled integration it matches, all inside the transaction that stores the record.
// A record is never pushed that was not stored, and never lost once stored.
import { EventEmitter } from 'node:events';
import type { Queryable } from '../db/db.js';

export const OBJECT_TYPES = ['asset', 'location', 'sensordata', 'reeferdata', 'gensetdata', 'oemdata'] as const;
export type ObjectType = (typeof OBJECT_TYPES)[number];

/** Wakes this process's delivery engine after a commit that created deliveries. */
export const deliveryWakeups = new EventEmitter();
export const NOTIFY_CHANNEL = 'tracking_deliveries';

/** ISO 8601 UTC to the second, in SQL (the push shapes' date-times). */
export const sqlIso = (col: string) => `to_char(${col} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')`;

export interface Matches {
  owners: string[];
  integrations: string[];
}

/**
 * Which enabled integrations take records of `type` from each owner (API.md 9: an integration's
 * ownerIds cover those owners and their descendants, evaluated now, as the record is stored).
 */
export async function matchIntegrations(q: Queryable, type: ObjectType, ownerIds: string[]): Promise<Matches> {
  const { rows } = await q.query<{ owner_id: string; integration_id: string }>(
    `WITH RECURSIVE anc(owner_id, ancestor) AS (
       SELECT id, id FROM owners WHERE id = ANY($1::uuid[])
       UNION
       SELECT anc.owner_id, o.parent_id FROM anc JOIN owners o ON o.id = anc.ancestor WHERE o.parent_id IS NOT NULL
     )
     SELECT DISTINCT anc.owner_id, i.id AS integration_id
       FROM anc JOIN integrations i ON anc.ancestor = ANY(i.owner_ids)
      WHERE i.enabled AND $2 = ANY(i.object_types)`,
    [ownerIds, type],
  );
  return { owners: rows.map((r) => r.owner_id), integrations: rows.map((r) => r.integration_id) };
}

/**
 * Data-modifying CTEs appending one outbox row per row of `source` and its deliveries, for use next
 * to the INSERT that stores the records: one round trip for all three. `m` is the 1-based index of
 * two parameters (owner ids, integration ids) holding the matches.
 */
export function outboxCtes(type: ObjectType, source: string, payloadExpr: string, m: number): string {
  return `o AS (
      INSERT INTO outbox (object_type, object_id, owner_id, payload)
      SELECT '${type}', ${source}.id::text, ${source}.owner_id, ${payloadExpr} FROM ${source}
      RETURNING id, event_id, owner_id
    ), d AS (
      INSERT INTO deliveries (integration_id, outbox_id, event_id, object_type)
      SELECT mt.integration_id, o.id, o.event_id, '${type}'
        FROM o JOIN unnest($${m}::uuid[], $${m + 1}::uuid[]) AS mt(owner_id, integration_id) ON mt.owner_id = o.owner_id
      RETURNING 1
    ), n AS (
      SELECT pg_notify('${NOTIFY_CHANNEL}', '') FROM (SELECT 1 FROM d LIMIT 1) x
    )`;
}

/** Appends already-shaped objects (asset changes) with their deliveries. */
export async function appendToOutbox(
  q: Queryable,
  type: ObjectType,
  items: { objectId: string; ownerId: string; payload: unknown }[],
): Promise<number> {
  if (!items.length) return 0;
  const m = await matchIntegrations(q, type, [...new Set(items.map((i) => i.ownerId))]);
  const { rows } = await q.query<{ deliveries: number }>(
    `WITH src AS (SELECT o AS id, w AS owner_id, p AS payload FROM unnest($1::text[], $2::uuid[], $3::jsonb[]) AS u(o, w, p)),
     ${outboxCtes(type, 'src', 'src.payload', 4)}
     SELECT (SELECT count(*) FROM d)::int AS deliveries, (SELECT count(*) FROM n)::int AS notified`,
    [items.map((i) => i.objectId), items.map((i) => i.ownerId), items.map((i) => JSON.stringify(i.payload)), m.owners, m.integrations],
  );
  return rows[0]?.deliveries ?? 0;
}
