// The event log (API guide 9): one row per stored event, in its push shape, with the transaction
// that stored it (tx_id) and the owner ancestry of that moment (owner_path), appended in the
// statement that stores the record. Integrations read it as Kafka consumers read a topic, each from
// its own position (integration_state.log_tx, log_id): this file appends to it, starts and ends an
// integration's reading, and reads it.
//
// Positions are (tx_id, id). The event log is read only below the horizon pg_snapshot_xmin(): the oldest
// transaction still running. A transaction that took a lower id but commits later holds the horizon
// back until it commits, so reading everything after the position never skips it (PgQ's approach).
import type { Db, Queryable } from '../db/db.js';
import { WriteStatement } from '../db/statement.js';
import type { ObjectType } from './objects.js';

/** The channel commits that append events notify, and readers listen on (Db.listen). */
export const EVENT_LOG_CHANNEL = 'tracking_event_log';

/** Wakes this process's readers of the event log at once, after a commit that appended to it. */
export const wakeReaders = (db: Db) => db.wake(EVENT_LOG_CHANNEL);

/**
 * The advisory lock (two int4 keys) between integrations' starts (shared) and the Kafka relay's
 * reads (exclusive): see relay-sql.ts.
 */
export const RELAY_LOCK = '1634955125, 0';

/**
 * Serialises, for the rest of the transaction, everything that reads an integration's position and
 * acts on it: its claims (every worker of every instance), backlog expiry and its deletion. An
 * advisory lock, not a row lock on integration_state: it takes no transaction id, so a claim holds
 * none (and with it the horizon every reader waits on) until its last statement writes. Two int4
 * keys: a space of its own and the integration's hash (two integrations sharing a hash only wait
 * for each other).
 */
export async function lockIntegration(q: Queryable, integrationId: string): Promise<void> {
  await q.query(`SELECT pg_advisory_xact_lock(${INTEGRATION_LOCK_SPACE}, hashtext($1::text))`, [integrationId], 'integration_lock');
}

/** The first key of lockIntegration's advisory locks ("deli" in ASCII), beside the other lock spaces. */
const INTEGRATION_LOCK_SPACE = 1684368489;

/** The horizon: every transaction with a lower id has ended, so no event below it can still appear. */
export const HORIZON = 'pg_snapshot_xmin(pg_current_snapshot())::text::bigint';

/**
 * An event is covered by an integration: its type, its owner's ancestry when it was stored, and the
 * integration's filter for its type (each member's allowed values, compared as JSON; a member the
 * object lacks counts as null). Integrations without a filter pay nothing for it.
 */
export const COVERED = `(o.object_type = ANY(i.object_types) AND o.owner_path && i.owner_ids
  AND (i.type_filters IS NULL OR NOT EXISTS (
    SELECT 1 FROM jsonb_each(i.type_filters -> o.object_type) AS f(field, allowed)
     WHERE NOT f.allowed @> jsonb_build_array(COALESCE(o.payload -> f.field, 'null'::jsonb)))))`;

/**
 * ...and not yet published to Kafka (EVENT_LOG=kafka): what the relay published is the consumers'
 * to hand over, so it is not "after the position" any more, even before the integrations'
 * positions follow the relay's (relay-sql.ts). Always true in the PostgreSQL mode (no relay row).
 */
export const UNPUBLISHED = `NOT EXISTS (SELECT 1 FROM event_log_relay r WHERE (o.tx_id, o.id) <= (r.log_tx, r.log_id))`;

/** ...and stored after the integration was created (not by a transaction it already saw committed). */
export const AFTER_START = `(o.tx_id >= s.start_xmax OR o.tx_id = ANY(s.start_xip))`;

export interface Position {
  tx: string;
  id: string;
}

/** Owners and, at the same index, each one's ancestry (itself first) as a PostgreSQL array literal. */
export interface OwnerPaths {
  owners: string[];
  paths: string[];
}

/**
 * The owner ancestry of each owner (itself first), as stored with its events: which integrations
 * cover an event is decided by the hierarchy of the moment it was stored (API guide 9).
 */
export async function ownerPaths(q: Queryable, ownerIds: string[]): Promise<OwnerPaths> {
  const { rows } = await q.query<{ owner_id: string; path: string }>(
    `WITH RECURSIVE anc(owner_id, ancestor, depth) AS (
       SELECT id, id, 0 FROM owners WHERE id = ANY($1::uuid[])
       UNION ALL
       SELECT anc.owner_id, o.parent_id, anc.depth + 1 FROM anc JOIN owners o ON o.id = anc.ancestor
        WHERE o.parent_id IS NOT NULL AND anc.depth < 100
     )
     SELECT owner_id, array_agg(ancestor ORDER BY depth)::text AS path FROM anc GROUP BY owner_id`,
    [ownerIds],
  );
  return { owners: rows.map((r) => r.owner_id), paths: rows.map((r) => r.path) };
}

/**
 * Adds to `stmt` the append of one log row per row of `source` (a CTE or table with id and
 * owner_id), next to the statement's own writes: one round trip for both. `paths` from ownerPaths.
 * Returns the name of a CTE that wakes other instances' engines at commit: a final query of the
 * caller's must read it (a plain SELECT CTE runs only when read), e.g. `(SELECT count(*) FROM name)`;
 * stmt.run() without one does.
 */
export function appendToLog(stmt: WriteStatement, type: ObjectType, source: string, payloadExpr: string, paths: OwnerPaths): string {
  const appended = stmt.with(`
      INSERT INTO event_log (object_type, object_id, owner_id, owner_path, payload)
      SELECT '${type}', ${source}.id::text, ${source}.owner_id, p.path::uuid[], ${payloadExpr}
        FROM ${source} JOIN unnest(${stmt.param(paths.owners, 'uuid[]')}, ${stmt.param(paths.paths, 'text[]')}) AS p(owner_id, path)
          ON p.owner_id = ${source}.owner_id
      RETURNING 1`);
  const notify = stmt.with(
    `SELECT pg_notify('${EVENT_LOG_CHANNEL}', '') WHERE EXISTS (SELECT 1 FROM ${appended}) AND EXISTS (SELECT 1 FROM integrations WHERE enabled)`,
  );
  stmt.mustRun(notify);
  return notify;
}

/** Appends already-shaped objects (asset changes) to the event log. */
export async function appendEvents(
  q: Queryable,
  type: ObjectType,
  items: { objectId: string; ownerId: string; payload: unknown }[],
): Promise<void> {
  if (!items.length) return;
  const stmt = new WriteStatement();
  const src = stmt.with(
    `SELECT o AS id, w AS owner_id, p AS payload FROM unnest(${stmt.arrays(items, [
      [(i) => i.objectId, 'text'],
      [(i) => i.ownerId, 'uuid'],
      [(i) => JSON.stringify(i.payload), 'jsonb'],
    ])}) AS u(o, w, p)`,
  );
  appendToLog(stmt, type, src, `${src}.payload`, await ownerPaths(q, [...new Set(items.map((i) => i.ownerId))]));
  await stmt.run(q);
}

/**
 * A new integration starts at the moment it is created (API guide 9: no backfill): its position is
 * the horizon, and the transactions then running are remembered, so their events, committed after
 * the creation, are delivered while those already committed are not.
 */
export async function startIntegration(q: Queryable, integrationId: string): Promise<void> {
  // With the event log on Kafka: no row is published until this creation commits (relay-sql.ts).
  await q.query(`SELECT pg_advisory_xact_lock_shared(${RELAY_LOCK})`);
  await q.query(
    `INSERT INTO integration_state (integration_id, tokens, log_tx, log_id, start_xmax, start_xip)
     SELECT $1, 'Infinity', pg_snapshot_xmin(s)::text::bigint, 0, pg_snapshot_xmax(s)::text::bigint,
            ARRAY(SELECT x::text::bigint FROM pg_snapshot_xip(s) AS x)
       FROM pg_current_snapshot() AS s`,
    [integrationId],
  );
}

/**
 * Deleting an integration (API guide 9): what it had pending, retries and the unread event log alike,
 * becomes CANCELLED at once; its claims end. The attempts stay for the result stream.
 */
export async function cancelIntegration(q: Queryable, integrationId: string): Promise<void> {
  // The integration's lock first, as a claim takes it: a claim in progress finishes before the cancel reads.
  await lockIntegration(q, integrationId);
  await q.query(
    `UPDATE deliveries SET status = 'CANCELLED', completed_at = now(), lease_until = NULL
      WHERE integration_id = $1 AND status = 'PENDING'`,
    [integrationId],
  );
  // The claimed events without an attempt, and the event log after the position.
  await q.query(
    `WITH s AS (SELECT * FROM integration_state WHERE integration_id = $1),
     i AS (SELECT * FROM integrations WHERE id = $1),
     claimed AS (
       SELECT DISTINCT x AS id FROM delivery_claims c, unnest(c.log_ids) AS x
        WHERE c.integration_id = $1
          AND NOT EXISTS (SELECT 1 FROM delivery_attempts a WHERE a.log_ids && ARRAY[x] AND a.claim_id = c.id)
     ), ev AS (
       SELECT o.* FROM event_log o WHERE o.id IN (SELECT id FROM claimed)
       UNION ALL
       SELECT o.* FROM event_log o, s, i WHERE (o.tx_id, o.id) > (s.log_tx, s.log_id) AND ${COVERED} AND ${AFTER_START} AND ${UNPUBLISHED}
     )
     INSERT INTO deliveries (integration_id, log_id, event_id, object_type, object_id, status, when_created, completed_at)
     SELECT $1, id, event_id, object_type, object_id, 'CANCELLED', when_created, now() FROM ev
     ON CONFLICT DO NOTHING`,
    [integrationId],
  );
  // A deleted integration reads the event log no more (every reader skips it): its position stays.
  await q.query('DELETE FROM delivery_claims WHERE integration_id = $1', [integrationId]);
}

/** One event as a channel sends it: the payload is the stored JSON text, not parsed. */
export interface LogEvent {
  pos: string;
  eventId: string;
  objectType: ObjectType;
  objectId: string;
  payload: string;
  whenCreated: Date;
}

export interface LogRow {
  id: string;
  tx_id: string;
  event_id: string;
  object_type: ObjectType;
  object_id: string;
  when_created: Date;
  covered: boolean;
  payload: string | null;
}

export const toEvent = (r: Omit<LogRow, 'tx_id' | 'covered'>): LogEvent => ({
  pos: r.id,
  eventId: r.event_id,
  objectType: r.object_type,
  objectId: r.object_id,
  payload: r.payload!,
  whenCreated: r.when_created,
});

/**
 * Reads the event log after the integration's position, below the horizon, in position order: covered
 * events while `accept` takes them, looking at no more than `scan` rows. Returns them and the
 * position after the last row taken or passed over (rows not covered are passed over for good).
 * The caller moves the position in the same transaction, under the integration's lock.
 */
export async function readLog(
  q: Queryable,
  integrationId: string,
  from: Position,
  accept: (e: LogEvent) => boolean,
  scan: number,
): Promise<{ events: LogEvent[]; next: Position }> {
  const { rows } = await q.query<LogRow>(
    `SELECT o.id, o.tx_id, o.event_id, o.object_type, o.object_id, o.when_created,
            ${COVERED} AND ${AFTER_START} AS covered,
            CASE WHEN ${COVERED} AND ${AFTER_START} THEN o.payload::text END AS payload
       FROM event_log o, integrations i, integration_state s
      WHERE i.id = $1 AND s.integration_id = $1
        AND (o.tx_id, o.id) > ($2::bigint, $3::bigint) AND o.tx_id < ${HORIZON}
      ORDER BY o.tx_id, o.id LIMIT $4`,
    [integrationId, from.tx, from.id, scan],
    'delivery_read_log',
  );
  const events: LogEvent[] = [];
  let next = from;
  for (const r of rows) {
    if (r.covered) {
      const e = toEvent(r);
      if (!accept(e)) break;
      events.push(e);
    }
    next = { tx: r.tx_id, id: r.id };
  }
  return { events, next };
}

/** The event log rows of these positions (a claim taken over, a retry). */
export async function eventsAt(q: Queryable, ids: string[]): Promise<LogEvent[]> {
  const { rows } = await q.query<LogRow>(
    `SELECT o.id, o.event_id, o.object_type, o.object_id, o.when_created, o.payload::text AS payload
       FROM event_log o WHERE o.id = ANY($1::int8[]) ORDER BY o.id`,
    [ids],
  );
  return rows.map(toEvent);
}
