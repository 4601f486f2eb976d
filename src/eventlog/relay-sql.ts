// The event log's relay to Kafka (EVENT_LOG=kafka, API guide 17): its position and lease, the
// committed rows it publishes, what the consumers need to fan events out, and the parking of
// events an integration cannot take now. The rows stay the source of truth: the relay moves its
// position only after the brokers acknowledged what it read.
//
// Exactness at an integration's start. A new integration covers the events of transactions that
// were running or not yet begun when it was created (AFTER_START). The consumers decide coverage
// from the integrations they read after an event arrived, so an event must never reach the topic
// before the integration it belongs to is visible: startIntegration takes RELAY_LOCK shared, in the
// creating transaction, and the relay takes it exclusively while it reads rows. Every row it reads
// afterwards is published after the creation committed, and is fanned out with it in view.
import type { Queryable } from '../db/db.js';
import type { ObjectType } from './objects.js';
import { HORIZON, type Position, RELAY_LOCK } from './log.js';

/** The one row range today: the whole event log. */
const RANGE = 0;

/**
 * Takes or renews the relay's lease for `holder`: granted when the lease is its own or has run out.
 * The first relay of a database starts where no integration would miss anything: the lowest
 * position of the integrations (their reading in the PostgreSQL mode so far), else the horizon.
 * Returns the position to publish after, or null while another relay holds the lease.
 */
export async function takeRelayLease(q: Queryable, holder: string, leaseSeconds: number): Promise<Position | null> {
  await q.query(
    `INSERT INTO event_log_relay (range_id, log_tx, log_id)
     SELECT $1, COALESCE(p.log_tx, ${HORIZON}), COALESCE(p.log_id, 0)
       FROM (SELECT s.log_tx, s.log_id FROM integration_state s JOIN integrations i ON i.id = s.integration_id
              WHERE i.deleted_at IS NULL ORDER BY s.log_tx, s.log_id LIMIT 1) p RIGHT JOIN (SELECT 1) one ON true
     ON CONFLICT (range_id) DO NOTHING`,
    [RANGE],
  );
  const { rows } = await q.query<{ log_tx: string; log_id: string }>(
    `UPDATE event_log_relay SET holder = $2, lease_until = now() + make_interval(secs => $3)
      WHERE range_id = $1 AND (holder = $2 OR lease_until < now()) RETURNING log_tx, log_id`,
    [RANGE, holder, leaseSeconds],
  );
  return rows[0] ? { tx: rows[0].log_tx, id: rows[0].log_id } : null;
}

/** A committed event-log row as the relay publishes it. */
export interface RelayRow {
  id: string;
  tx_id: string;
  event_id: string;
  object_type: ObjectType;
  object_id: string;
  owner_path: string;
  when_created: Date;
  /** The topic's key: the asset the event is about (its own id for an asset, a command's target...). */
  key: string;
  payload: string;
}

/**
 * Reads up to `limit` committed rows after `from`, in the log's order, below the horizon. Run in a
 * transaction of its own: the lock it takes waits for integrations being created (see above).
 */
export async function readForRelay(q: Queryable, from: Position, limit: number): Promise<RelayRow[]> {
  await q.query(`SELECT pg_advisory_xact_lock(${RELAY_LOCK})`);
  const { rows } = await q.query<RelayRow>(
    `SELECT o.id, o.tx_id, o.event_id, o.object_type, o.object_id, o.owner_path::text AS owner_path, o.when_created,
            COALESCE(o.payload ->> 'assetId', CASE WHEN o.object_type = 'asset' THEN o.object_id END, o.owner_id::text) AS key,
            o.payload::text AS payload
       FROM event_log o
      WHERE (o.tx_id, o.id) > ($1::bigint, $2::bigint) AND o.tx_id < ${HORIZON}
      ORDER BY o.tx_id, o.id LIMIT $3`,
    [from.tx, from.id, limit],
    'relay_read',
  );
  return rows;
}

/**
 * Moves the position past what the brokers acknowledged, renewing the lease. False when the lease
 * was lost (this relay stalled past it): the taker publishes from the position it found, so what
 * this one sent meanwhile goes twice, never missing.
 */
export async function moveRelay(
  q: Queryable,
  holder: string,
  to: Position,
  published: number,
  leaseSeconds: number,
  syncPositions: boolean,
): Promise<boolean> {
  const { rows } = await q.query<{ moved: boolean }>(
    `WITH m AS (
       UPDATE event_log_relay SET log_tx = $3, log_id = $4, published = published + $5, when_updated = now(),
              lease_until = now() + make_interval(secs => $6)
        WHERE range_id = $1 AND holder = $2 RETURNING 1
     ), s AS (
       -- What was published is the consumers' to hand over: the integrations' positions follow the
       -- relay's (every few seconds, not per batch), so the PostgreSQL mode's reads of "the event
       -- log after the position" (pending counts, the deliveries list, backlog expiry, retention)
       -- see only what is not yet on the topic.
       UPDATE integration_state SET log_tx = $3, log_id = $4
        WHERE $7 AND EXISTS (SELECT 1 FROM m) AND (log_tx, log_id) < ($3::bigint, $4::bigint)
     )
     SELECT EXISTS (SELECT 1 FROM m) AS moved`,
    [RANGE, holder, to.tx, to.id, published, leaseSeconds, syncPositions],
    'relay_move',
  );
  return rows[0]!.moved;
}

/** The integrations' positions follow the relay's (as moveRelay does), when it has been idle since it moved. */
export async function syncPositions(q: Queryable, to: Position): Promise<void> {
  await q.query(
    'UPDATE integration_state SET log_tx = $1, log_id = $2 WHERE (log_tx, log_id) < ($1::bigint, $2::bigint)',
    [to.tx, to.id],
    'relay_sync',
  );
}

/**
 * The event log back in PostgreSQL (EVENT_LOG=postgres after kafka): the integrations read on from
 * the relay's position (what it published was the consumers' to deliver; API guide 17 says to let
 * their lag reach zero first) and the relay's row goes. Nothing to do when there is none.
 */
export async function leaveKafkaMode(q: Queryable): Promise<boolean> {
  const { rows } = await q.query<{ n: string }>(
    `WITH r AS (DELETE FROM event_log_relay RETURNING log_tx, log_id),
     s AS (UPDATE integration_state s SET log_tx = r.log_tx, log_id = r.log_id FROM r WHERE (s.log_tx, s.log_id) < (r.log_tx, r.log_id))
     SELECT count(*)::text AS n FROM r`,
  );
  return Number(rows[0]!.n) > 0;
}

/** Ends the lease at a graceful stop, so another relay goes on at once. */
export async function releaseRelay(q: Queryable, holder: string): Promise<void> {
  await q.query(`UPDATE event_log_relay SET lease_until = '-infinity' WHERE range_id = $1 AND holder = $2`, [RANGE, holder]);
}

/** What a consumer needs of an integration to decide which events it covers. */
export interface Coverage {
  id: string;
  whenUpdated: Date;
  enabled: boolean;
  paused: boolean;
  objectTypes: string[];
  ownerIds: string[];
  typeFilters: Record<string, Record<string, unknown[]>> | null;
  startXmax: bigint;
  startXip: Set<bigint>;
}

/** Every integration not deleted, with its start. */
export async function coverage(q: Queryable): Promise<Coverage[]> {
  const { rows } = await q.query<{
    id: string;
    when_updated: Date;
    enabled: boolean;
    paused: boolean;
    object_types: string[];
    owner_ids: string[];
    type_filters: Coverage['typeFilters'];
    start_xmax: string;
    start_xip: string[] | null;
  }>(
    `SELECT i.id, i.when_updated, i.enabled, COALESCE(s.paused_until > now(), false) AS paused, i.object_types, i.owner_ids::text[] AS owner_ids,
            i.type_filters, s.start_xmax::text, s.start_xip::text[] AS start_xip
       FROM integrations i JOIN integration_state s ON s.integration_id = i.id WHERE i.deleted_at IS NULL`,
    [],
    'relay_coverage',
  );
  return rows.map((r) => ({
    id: r.id,
    whenUpdated: r.when_updated,
    enabled: r.enabled,
    paused: r.paused,
    objectTypes: r.object_types,
    ownerIds: r.owner_ids,
    typeFilters: r.type_filters,
    startXmax: BigInt(r.start_xmax ?? 0),
    startXip: new Set((r.start_xip ?? []).map(BigInt)),
  }));
}

/**
 * Of these (integration, event) pairs, those already handed over: in a claim, in the retry queue, or
 * attempted in the last minute. Asked only for what a partition's new owner reads again from the
 * last committed offset (its previous owner may have claimed them without the offset committed),
 * so a partition that moves sends little twice. The attempts' minute is read once, by time.
 */
export async function handedOver(q: Queryable, pairs: { integrationId: string; logId: string }[]): Promise<Set<string>> {
  if (!pairs.length) return new Set();
  const { rows } = await q.query<{ k: string }>(
    `WITH r AS (SELECT * FROM unnest($1::uuid[], $2::int8[]) AS r(i, l)),
     recent AS (
       SELECT DISTINCT a.integration_id AS i, x AS l FROM delivery_attempts a, unnest(a.log_ids) AS x
        WHERE a.when_attempted > now() - interval '1 minute' AND a.claim_id IS NOT NULL
          AND a.integration_id = ANY($1::uuid[]) AND x = ANY($2::int8[])
     )
     SELECT r.i::text || ':' || r.l::text AS k FROM r
      WHERE EXISTS (SELECT 1 FROM deliveries d WHERE d.integration_id = r.i AND d.log_id = r.l)
         OR EXISTS (SELECT 1 FROM delivery_claims c WHERE c.integration_id = r.i AND r.l = ANY(c.log_ids))
         OR EXISTS (SELECT 1 FROM recent WHERE recent.i = r.i AND recent.l = r.l)`,
    [pairs.map((p) => p.integrationId), pairs.map((p) => p.logId)],
    'relay_handed_over',
  );
  return new Set(rows.map((r) => r.k));
}

/**
 * Parks events in the retry queue (a PENDING delivery due now, no attempt yet): those of an
 * integration that is disabled or paused, or that waited too long for a request slot. The retry
 * queue sends them when the integration can take them, within its limits, so no integration holds
 * a partition's offsets back for the others. An event already there stays as it is.
 */
export async function parkEvents(q: Queryable, parked: { integrationId: string; logId: string }[]): Promise<void> {
  if (!parked.length) return;
  await q.query(
    `INSERT INTO deliveries (integration_id, log_id, event_id, object_type, object_id, status, attempts, next_attempt_at, when_created)
     SELECT r.i, o.id, o.event_id, o.object_type, o.object_id, 'PENDING', 0, now(), o.when_created
       FROM unnest($1::uuid[], $2::int8[]) AS r(i, l) JOIN event_log o ON o.id = r.l
     ON CONFLICT DO NOTHING`,
    [parked.map((p) => p.integrationId), parked.map((p) => p.logId)],
    'relay_park',
  );
}
