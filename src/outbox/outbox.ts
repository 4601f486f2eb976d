// The seam between storing and pushing (spec 6.1, API.md section 9): every stored asset change and
// data record is appended here, in its push shape (spec 2.12) with a new event id, inside the same
// transaction as the record. A record is never pushed that was not stored, and never lost once stored.
// The delivery engine reads this table; nothing else does.
import type { Queryable } from '../db/db.js';

export const OBJECT_TYPES = ['asset', 'location', 'sensordata', 'reeferdata', 'gensetdata', 'oemdata'] as const;
export type ObjectType = (typeof OBJECT_TYPES)[number];

/** ISO 8601 UTC to the second, in SQL (the push shapes' date-times). */
export const sqlIso = (col: string) => `to_char(${col} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')`;

/**
 * The SQL that appends one outbox row per row of `source` (a CTE or table alias), for use as a
 * data-modifying CTE next to the INSERT that stores the records: one round trip for both.
 */
export function outboxInsertSql(type: ObjectType, source: string, payloadExpr: string): string {
  return `INSERT INTO outbox (object_type, object_id, owner_id, payload)
          SELECT '${type}', ${source}.id::text, ${source}.owner_id, ${payloadExpr} FROM ${source}`;
}

/** Appends already-shaped objects (asset changes). */
export async function appendToOutbox(q: Queryable, type: ObjectType, items: { objectId: string; ownerId: string; payload: unknown }[]): Promise<void> {
  if (!items.length) return;
  await q.query(
    `INSERT INTO outbox (object_type, object_id, owner_id, payload)
     SELECT $1, o, w, p FROM unnest($2::text[], $3::uuid[], $4::jsonb[]) AS u(o, w, p)`,
    [type, items.map((i) => i.objectId), items.map((i) => i.ownerId), items.map((i) => JSON.stringify(i.payload))],
  );
}
