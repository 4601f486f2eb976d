// The delivery queue: every statement on the delivery tables lives here, and no other module writes
// them (API.md section 9). The tables:
//
//   outbox             the log: one row per stored event, in its push shape, with the transaction
//                      that stored it (tx_id) and the owner ancestry of that moment (owner_path)
//   integration_state  per integration: its position in the log, 429 pause, token bucket
//   delivery_claims    events a worker took from the log, under a lease, until every request is done
//   deliveries         events with a state of their own: retrying, failed, cancelled, redelivered
//   delivery_batches   a failed batch's body, retried byte for byte with the same webhook-id
//   delivery_attempts  one insert-only row per request (a batch carries many events)
//
// The normal path costs no row per event: a claim reads the log after the integration's position,
// moves the position and writes one claim row; a request that succeeds writes one attempt row.
//
// Positions are (tx_id, id). The log is read only below the horizon pg_snapshot_xmin(): the oldest
// transaction still running. A transaction that took a lower id but commits later holds the horizon
// back until it commits, so reading everything after the position never skips it (PgQ's approach).
import type { Db, Queryable } from '../db/db.js';
import { NOTIFY_CHANNEL, type ObjectType } from '../outbox/outbox.js';

/** The horizon: every transaction with a lower id has ended, so no event below it can still appear. */
const HORIZON = 'pg_snapshot_xmin(pg_current_snapshot())::text::bigint';
/** An event is covered by an integration: its type, and its owner's ancestry when it was stored. */
const COVERED = `(o.object_type = ANY(i.object_types) AND o.owner_path && i.owner_ids)`;
/** ...and stored after the integration was created (not by a transaction it already saw committed). */
const AFTER_START = `(o.tx_id >= s.start_xmax OR o.tx_id = ANY(s.start_xip))`;

export interface Position {
  tx: string;
  id: string;
}

// ---- storing: the log --------------------------------------------------------------------------

/**
 * The owner ancestry of each owner (itself first), as stored with its events: which integrations
 * cover an event is decided by the hierarchy of the moment it was stored (API.md 9).
 */
export async function ownerPaths(q: Queryable, ownerIds: string[]): Promise<{ owners: string[]; paths: string[] }> {
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
 * Data-modifying CTEs appending one log row per row of `source` (which has id and owner_id), next
 * to the INSERT that stores the records: one round trip for both. `m` is the 1-based index of two
 * parameters from ownerPaths (owners, paths). Wakes other instances' engines at commit.
 */
export function appendCtes(type: ObjectType, source: string, payloadExpr: string, m: number): string {
  return `o AS (
      INSERT INTO outbox (object_type, object_id, owner_id, owner_path, payload)
      SELECT '${type}', ${source}.id::text, ${source}.owner_id, p.path::uuid[], ${payloadExpr}
        FROM ${source} JOIN unnest($${m}::uuid[], $${m + 1}::text[]) AS p(owner_id, path) ON p.owner_id = ${source}.owner_id
      RETURNING 1
    ), n AS (
      SELECT pg_notify('${NOTIFY_CHANNEL}', '') WHERE EXISTS (SELECT 1 FROM o) AND EXISTS (SELECT 1 FROM integrations WHERE enabled)
    )`;
}

/** Appends already-shaped objects (asset changes) to the log. */
export async function appendEvents(
  q: Queryable,
  type: ObjectType,
  items: { objectId: string; ownerId: string; payload: unknown }[],
): Promise<void> {
  if (!items.length) return;
  const p = await ownerPaths(q, [...new Set(items.map((i) => i.ownerId))]);
  await q.query(
    `WITH src AS (SELECT o AS id, w AS owner_id, p AS payload FROM unnest($1::text[], $2::uuid[], $3::jsonb[]) AS u(o, w, p)),
     ${appendCtes(type, 'src', 'src.payload', 4)}
     SELECT (SELECT count(*) FROM n)::int AS notified`,
    [items.map((i) => i.objectId), items.map((i) => i.ownerId), items.map((i) => JSON.stringify(i.payload)), p.owners, p.paths],
  );
}

// ---- integrations ------------------------------------------------------------------------------

/**
 * A new integration starts at the moment it is created (API.md 9: no backfill): its position is
 * the horizon, and the transactions then running are remembered, so their events, committed after
 * the creation, are delivered while those already committed are not.
 */
export async function startIntegration(q: Queryable, integrationId: string): Promise<void> {
  await q.query(
    `INSERT INTO integration_state (integration_id, tokens, log_tx, log_id, start_xmax, start_xip)
     SELECT $1, 'Infinity', pg_snapshot_xmin(s)::text::bigint, 0, pg_snapshot_xmax(s)::text::bigint,
            ARRAY(SELECT x::text::bigint FROM pg_snapshot_xip(s) AS x)
       FROM pg_current_snapshot() AS s`,
    [integrationId],
  );
}

/**
 * Deleting an integration (API.md 9): what it had pending, retries and the unread log alike,
 * becomes CANCELLED at once; its claims end. The attempts stay for the result stream.
 */
export async function cancelIntegration(q: Queryable, integrationId: string): Promise<void> {
  // The state row first, as a claim takes it: a claim in progress finishes before the cancel reads.
  await q.query('SELECT 1 FROM integration_state WHERE integration_id = $1 FOR UPDATE', [integrationId]);
  await q.query(
    `UPDATE deliveries SET status = 'CANCELLED', completed_at = now(), lease_until = NULL
      WHERE integration_id = $1 AND status = 'PENDING'`,
    [integrationId],
  );
  // The claimed events without an attempt, and the log after the position.
  await q.query(
    `WITH s AS (SELECT * FROM integration_state WHERE integration_id = $1),
     i AS (SELECT * FROM integrations WHERE id = $1),
     claimed AS (
       SELECT DISTINCT x AS id FROM delivery_claims c, unnest(c.outbox_ids) AS x
        WHERE c.integration_id = $1
          AND NOT EXISTS (SELECT 1 FROM delivery_attempts a WHERE a.outbox_ids && ARRAY[x] AND a.claim_id = c.id)
     ), ev AS (
       SELECT o.* FROM outbox o WHERE o.id IN (SELECT id FROM claimed)
       UNION ALL
       SELECT o.* FROM outbox o, s, i WHERE (o.tx_id, o.id) > (s.log_tx, s.log_id) AND ${COVERED} AND ${AFTER_START}
     )
     INSERT INTO deliveries (integration_id, outbox_id, event_id, object_type, object_id, status, when_created, completed_at)
     SELECT $1, id, event_id, object_type, object_id, 'CANCELLED', when_created, now() FROM ev
     ON CONFLICT DO NOTHING`,
    [integrationId],
  );
  // A deleted integration reads the log no more (every reader skips it): its position stays.
  await q.query('DELETE FROM delivery_claims WHERE integration_id = $1', [integrationId]);
}

// ---- the engine: claims ------------------------------------------------------------------------

/** An integration with work a worker could claim now. */
export interface DueIntegration {
  id: string;
  whenUpdated: Date;
}

/**
 * Integrations with work: log events after their position below the horizon, retries due, or a
 * claim whose worker let its lease run out. One index probe per integration and kind. `waiting`
 * says some integration has events after its position that a running transaction still holds
 * above the horizon: they become readable as soon as it ends, so the engine looks again shortly.
 */
export async function dueIntegrations(q: Queryable): Promise<{ due: DueIntegration[]; waiting: boolean }> {
  const { rows } = await q.query<{ id: string; when_updated: Date; next_tx: string | null; other: boolean; horizon: string }>(
    `SELECT * FROM (
       SELECT i.id, i.when_updated, ${HORIZON} AS horizon,
              -- ORDER BY .. LIMIT 1 makes this an index probe; a plain EXISTS with the correlated row
              -- comparison is planned as a scan of the whole log.
              (SELECT o.tx_id FROM outbox o WHERE (o.tx_id, o.id) > (s.log_tx, s.log_id) ORDER BY o.tx_id, o.id LIMIT 1) AS next_tx,
              (EXISTS (SELECT 1 FROM deliveries d WHERE d.integration_id = i.id AND d.status = 'PENDING'
                         AND d.next_attempt_at <= now() AND (d.lease_until IS NULL OR d.lease_until <= now()))
               OR EXISTS (SELECT 1 FROM delivery_claims c WHERE c.integration_id = i.id AND c.lease_until <= now())) AS other
         FROM integrations i JOIN integration_state s ON s.integration_id = i.id
        WHERE i.enabled AND i.deleted_at IS NULL AND (s.paused_until IS NULL OR s.paused_until <= now())
     ) x WHERE next_tx IS NOT NULL OR other`,
    [],
    'delivery_due',
  );
  let waiting = false;
  const due: DueIntegration[] = [];
  for (const r of rows) {
    const readable = r.next_tx !== null && BigInt(r.next_tx) < BigInt(r.horizon);
    if (r.next_tx !== null && !readable) waiting = true;
    if (readable || r.other) due.push({ id: r.id, whenUpdated: r.when_updated });
  }
  return { due, waiting };
}

/** The integration's shared state, locked for one claim: every worker of every instance sees the same. */
export interface ClaimState {
  paused: boolean;
  tokens: number;
  elapsedSeconds: number;
  /** The bucket's clock: taken once the lock is held (a transaction's now() is its start, before any lock wait). */
  at: string;
  position: Position;
  /** Requests in flight across all workers: live claims' and leased retries'. */
  inFlight: number;
  /** Retry requests due now (up to 1000). */
  dueRetries: number;
  expiredClaims: number;
}

/**
 * Locks the integration's state row for the rest of the transaction (FOR UPDATE): claims of one
 * integration are serialised across instances, so its in-flight count and token bucket hold
 * everywhere. Other integrations are not blocked. Null when it is disabled or deleted meanwhile.
 */
export async function lockState(q: Queryable, integrationId: string, bucketCapacity: number): Promise<ClaimState | null> {
  // The lock first, on its own: in READ COMMITTED a statement that waited for the lock still reads
  // with the snapshot it started with, so the counts below are taken by a second statement that
  // sees what the previous holder committed.
  const { rows: locked } = await q.query(
    `SELECT 1 FROM integration_state s JOIN integrations i ON i.id = s.integration_id
      WHERE s.integration_id = $1 AND i.enabled AND i.deleted_at IS NULL FOR UPDATE OF s`,
    [integrationId],
    'delivery_lock_state',
  );
  if (!locked.length) return null;
  const { rows } = await q.query<{
    paused: boolean;
    tokens: number;
    elapsed: number;
    at: string;
    log_tx: string;
    log_id: string;
    in_flight: number;
    due_retries: number;
    expired_claims: number;
  }>(
    `SELECT COALESCE(s.paused_until > now(), false) AS paused, s.tokens,
            GREATEST(extract(epoch FROM t.at - s.refilled_at), 0)::float8 AS elapsed, t.at::text AS at, s.log_tx, s.log_id,
            (SELECT COALESCE(sum(LEAST(c.requests, c.slots)), 0) FROM delivery_claims c
              WHERE c.integration_id = s.integration_id AND c.lease_until > now())::int
          + (SELECT count(DISTINCT COALESCE(d.batch_id::text, d.outbox_id::text)) FROM deliveries d
              WHERE d.integration_id = s.integration_id AND d.status = 'PENDING' AND d.lease_until > now())::int AS in_flight,
            (SELECT count(*) FROM (SELECT 1 FROM deliveries d WHERE d.integration_id = s.integration_id AND d.status = 'PENDING'
                AND d.next_attempt_at <= now() AND (d.lease_until IS NULL OR d.lease_until <= now()) LIMIT 1000) x)::int AS due_retries,
            (SELECT count(*) FROM delivery_claims c WHERE c.integration_id = s.integration_id AND c.lease_until <= now())::int AS expired_claims
       FROM integration_state s, (SELECT clock_timestamp() AS at) t WHERE s.integration_id = $1`,
    [integrationId],
    'delivery_claim_state',
  );
  const r = rows[0]!;
  return {
    paused: r.paused,
    // A new integration's bucket starts full: its tokens are stored as Infinity, read as null.
    tokens: r.tokens === null ? bucketCapacity : r.tokens,
    elapsedSeconds: r.elapsed,
    at: r.at,
    position: { tx: r.log_tx, id: r.log_id },
    inFlight: r.in_flight,
    dueRetries: r.due_retries,
    expiredClaims: r.expired_claims,
  };
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

interface LogRow {
  id: string;
  tx_id: string;
  event_id: string;
  object_type: ObjectType;
  object_id: string;
  when_created: Date;
  covered: boolean;
  payload: string | null;
}
const toEvent = (r: Omit<LogRow, 'tx_id' | 'covered'>): LogEvent => ({
  pos: r.id,
  eventId: r.event_id,
  objectType: r.object_type,
  objectId: r.object_id,
  payload: r.payload!,
  whenCreated: r.when_created,
});

/**
 * Reads the log after the integration's position, below the horizon, in position order: covered
 * events while `accept` takes them, looking at no more than `scan` rows. Returns them and the
 * position after the last row taken or passed over (rows not covered are passed over for good).
 * The caller moves the position in the same transaction, with the state row locked.
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
       FROM outbox o, integrations i, integration_state s
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

/** The log rows of these positions (a claim taken over, a retry). */
export async function eventsAt(q: Queryable, ids: string[]): Promise<LogEvent[]> {
  const { rows } = await q.query<LogRow>(
    `SELECT o.id, o.event_id, o.object_type, o.object_id, o.when_created, o.payload::text AS payload
       FROM outbox o WHERE o.id = ANY($1::int8[]) ORDER BY o.id`,
    [ids],
  );
  return rows.map(toEvent);
}

/**
 * Ends the claim step: records the claim (when it took events), moves the position, and saves the
 * token bucket, in one statement.
 */
export async function saveClaim(
  q: Queryable,
  integrationId: string,
  o: {
    position: Position;
    tokens: number | null;
    /** The bucket's clock for `tokens` (ClaimState.at). */
    at: string;
    claim: { id: string; outboxIds: string[]; requests: number; slots: number; leaseSeconds: number } | null;
  },
): Promise<void> {
  const c = o.claim;
  await q.query(
    `WITH c AS (
       INSERT INTO delivery_claims (id, integration_id, outbox_ids, requests, slots, lease_until)
       SELECT $4::uuid, $1, $5::text::int8[], $6, $9, now() + make_interval(secs => $7) WHERE $4::uuid IS NOT NULL
     )
     UPDATE integration_state SET log_tx = $2, log_id = $3,
            tokens = COALESCE($8, tokens), refilled_at = CASE WHEN $8::float8 IS NULL THEN refilled_at ELSE GREATEST(refilled_at, $10::timestamptz) END
      WHERE integration_id = $1`,
    [
      integrationId,
      o.position.tx,
      o.position.id,
      c?.id ?? null,
      `{${(c?.outboxIds ?? []).join(',')}}`, // digits only: an array literal, not an escape per element
      c?.requests ?? 0,
      c?.leaseSeconds ?? 0,
      o.tokens,
      c?.slots ?? 0,
      o.at,
    ],
    'delivery_save_claim',
  );
}

/**
 * Backlog expiry (API.md 9): covered events of the log older than `hours` at the position become
 * FAILED with "backlog expired" instead of being sent.
 */
export async function expireLogEvents(q: Queryable, integrationId: string, events: LogEvent[]): Promise<void> {
  if (!events.length) return;
  await q.query(
    `INSERT INTO deliveries (integration_id, outbox_id, event_id, object_type, object_id, status, when_created, completed_at, last_error)
     SELECT $1, o.id, o.event_id, o.object_type, o.object_id, 'FAILED', o.when_created, now(), 'backlog expired'
       FROM outbox o WHERE o.id = ANY($2::int8[])
     ON CONFLICT DO NOTHING`,
    [integrationId, events.map((e) => e.pos)],
  );
}

/**
 * Takes over one claim whose worker let its lease run out (it died): renews the lease under a new
 * generation and returns the events that have no attempt yet, the rest having been sent (or handed
 * to the retry queue); the caller then sets its requests (setClaimRequests). SKIP LOCKED: two
 * workers never take the same claim.
 */
export async function takeExpiredClaim(
  q: Queryable,
  integrationId: string,
  leaseSeconds: number,
): Promise<{ id: string; generation: number; events: LogEvent[] } | null> {
  const { rows } = await q.query<{ id: string; ids: string[] }>(
    `WITH c AS (
       SELECT id, outbox_ids FROM delivery_claims WHERE integration_id = $1 AND lease_until <= now()
        ORDER BY lease_until LIMIT 1 FOR UPDATE SKIP LOCKED
     )
     SELECT c.id, ARRAY(SELECT x::text FROM unnest(c.outbox_ids) AS x
                         WHERE NOT EXISTS (SELECT 1 FROM delivery_attempts a WHERE a.outbox_ids && ARRAY[x] AND a.claim_id = c.id)) AS ids
       FROM c`,
    [integrationId],
  );
  const r = rows[0];
  if (!r) return null;
  const events = r.ids.length ? await eventsAt(q, r.ids) : [];
  if (!events.length) {
    await q.query('DELETE FROM delivery_claims WHERE id = $1', [r.id]);
    return { id: r.id, generation: 0, events };
  }
  const { rows: g } = await q.query<{ generation: number }>(
    `UPDATE delivery_claims SET generation = generation + 1, lease_until = now() + make_interval(secs => $2)
      WHERE id = $1 RETURNING generation`,
    [r.id, leaseSeconds],
  );
  return { id: r.id, generation: g[0]!.generation, events };
}

/** Sets how many requests a taken-over claim sends, and how many at a time. */
export async function setClaimRequests(q: Queryable, claimId: string, requests: number, slots: number): Promise<void> {
  await q.query('UPDATE delivery_claims SET requests = $2, slots = $3 WHERE id = $1', [claimId, requests, slots]);
}

/**
 * Renews the leases of claims a worker is still sending. Returns the claims it no longer holds
 * (taken over after a stall, or ended by a delete): the worker stops sending what is left of them.
 */
export async function renewClaims(q: Queryable, claims: { id: string; generation: number; leaseSeconds: number }[]): Promise<string[]> {
  if (!claims.length) return [];
  const { rows } = await q.query<{ id: string }>(
    `UPDATE delivery_claims c SET lease_until = now() + make_interval(secs => r.lease)
       FROM unnest($1::uuid[], $2::int[], $3::float8[]) AS r(id, generation, lease)
      WHERE c.id = r.id AND c.generation = r.generation RETURNING c.id`,
    [claims.map((c) => c.id), claims.map((c) => c.generation), claims.map((c) => c.leaseSeconds)],
    'delivery_renew_claims',
  );
  const held = new Set(rows.map((r) => r.id));
  return claims.filter((c) => !held.has(c.id)).map((c) => c.id);
}

/**
 * Hands claims back at a graceful stop: their leases end now, so another worker (or this process
 * restarted) takes over what was not sent at once instead of after the lease.
 */
export async function releaseClaims(q: Queryable, claims: { id: string; generation: number }[]): Promise<void> {
  if (!claims.length) return;
  await q.query(
    `UPDATE delivery_claims c SET lease_until = now() FROM unnest($1::uuid[], $2::int[]) AS r(id, generation)
      WHERE c.id = r.id AND c.generation = r.generation`,
    [claims.map((c) => c.id), claims.map((c) => c.generation)],
  );
}

/** Integrations among these paused now (a 429 seen by any instance), and until when. */
export async function pausesOf(q: Queryable, integrationIds: string[]): Promise<Map<string, Date>> {
  if (!integrationIds.length) return new Map();
  const { rows } = await q.query<{ integration_id: string; paused_until: Date }>(
    'SELECT integration_id, paused_until FROM integration_state WHERE integration_id = ANY($1::uuid[]) AND paused_until > now()',
    [integrationIds],
    'delivery_pauses',
  );
  return new Map(rows.map((r) => [r.integration_id, r.paused_until]));
}

/** A delivery of the retry queue, leased for one request. */
export interface RetryDelivery extends LogEvent {
  attempts: number;
  /** Attempts made before the last redelivery: numbering goes on, the budget counts from here. */
  attemptBase: number;
  firstAttemptAt: Date | null;
}
interface RetryRow {
  outbox_id: string;
  event_id: string;
  object_type: ObjectType;
  object_id: string;
  when_created: Date;
  payload: string;
  attempts: number;
  attempt_base: number;
  first_attempt_at: Date | null;
}
const toRetry = (r: RetryRow): RetryDelivery => ({
  ...toEvent({ ...r, id: r.outbox_id }),
  attempts: r.attempts,
  attemptBase: r.attempt_base,
  firstAttemptAt: r.first_attempt_at,
});

/**
 * Leases due deliveries of the retry queue (FOR UPDATE SKIP LOCKED, a row lease per event: only
 * events that failed, wait or were redelivered are here). `= ANY(ARRAY(...))` makes the update
 * fetch the chosen rows by key instead of joining a scan of the backlog.
 */
function leaseRetriesSql(extra: string, limit: string, due: boolean): string {
  return `
    WITH c AS (
      UPDATE deliveries d SET lease_until = now() + make_interval(secs => $2)
       WHERE d.integration_id = $1 AND d.outbox_id = ANY(ARRAY(
               SELECT outbox_id FROM deliveries
                WHERE integration_id = $1 AND status = 'PENDING' ${due ? 'AND next_attempt_at <= now()' : ''}
                  AND (lease_until IS NULL OR lease_until <= now()) ${extra}
                ORDER BY next_attempt_at, outbox_id LIMIT ${limit} FOR UPDATE SKIP LOCKED))
      RETURNING d.outbox_id, d.event_id, d.object_type, d.object_id, d.when_created, d.attempts, d.attempt_base, d.first_attempt_at)
    SELECT c.*, o.payload::text AS payload FROM c JOIN outbox o ON o.id = c.outbox_id ORDER BY c.outbox_id`;
}

/** Up to `n` due deliveries that are not part of a failed batch. */
export async function leaseRetries(q: Queryable, integrationId: string, leaseSeconds: number, n: number): Promise<RetryDelivery[]> {
  if (n <= 0) return [];
  const { rows } = await q.query<RetryRow>(leaseRetriesSql('AND batch_id IS NULL', '$3', true), [integrationId, leaseSeconds, n]);
  return rows.map(toRetry);
}

/**
 * Up to `n` failed batches due again, each whole (every pending member leased) with its stored
 * body, so no part of a batch goes twice and the body stays byte for byte the same.
 */
export async function leaseRetryBatches(
  q: Queryable,
  integrationId: string,
  leaseSeconds: number,
  n: number,
  maxItems: number,
): Promise<{ batchId: string; body: string; objectType: ObjectType; deliveries: RetryDelivery[] }[]> {
  if (n <= 0) return [];
  const { rows: due } = await q.query<{ batch_id: string; n: number }>(
    `SELECT batch_id, count(*)::int AS n FROM deliveries
      WHERE integration_id = $1 AND status = 'PENDING' AND batch_id IS NOT NULL
      GROUP BY batch_id
     HAVING min(next_attempt_at) <= now() AND bool_and(lease_until IS NULL OR lease_until <= now())
      ORDER BY min(next_attempt_at) LIMIT $2`,
    [integrationId, n],
  );
  const out = [];
  let items = maxItems;
  for (const b of due) {
    if (b.n > items) break;
    const { rows } = await q.query<RetryRow>(leaseRetriesSql('AND batch_id = $3', '10000', false), [
      integrationId,
      leaseSeconds,
      b.batch_id,
    ]);
    const { rows: body } = await q.query<{ body: string; object_type: ObjectType }>(
      'SELECT body, object_type FROM delivery_batches WHERE id = $1',
      [b.batch_id],
    );
    if (rows.length !== b.n || !body[0]) {
      // A member is busy elsewhere (or the batch changed): leave the whole batch for later.
      if (rows.length)
        await releaseRetries(
          q,
          integrationId,
          rows.map((r) => r.outbox_id),
        );
      continue;
    }
    out.push({ batchId: b.batch_id, body: body[0].body, objectType: body[0].object_type, deliveries: rows.map(toRetry) });
    items -= rows.length;
  }
  return out;
}

/** Hands leased retry deliveries back at once (claimed over the request budget). */
export async function releaseRetries(q: Queryable, integrationId: string, outboxIds: string[]): Promise<void> {
  if (!outboxIds.length) return;
  await q.query('UPDATE deliveries SET lease_until = NULL WHERE integration_id = $1 AND outbox_id = ANY($2::int8[])', [
    integrationId,
    outboxIds,
  ]);
}

// ---- the engine: results -----------------------------------------------------------------------

/** What the attempt log keeps of one request's answer (API.md 9), whatever the channel. */
export interface AttemptResponse {
  httpStatus: number | null;
  responseTimeMs: number;
  receiptId: string | null;
  topic: string | null;
  partition: number | null;
  /** Kafka: each event's partition, in the order of the request's events (null: `partition` for all). */
  partitions?: number[] | null;
  qos: number | null;
  error: string | null;
  responseHeaders: Record<string, string> | null;
  /** The answer's first bytes as sent (64 KiB at most): any bytes, NUL included, are stored as they came. */
  responseBody: Buffer | null;
  responseBodyBytes: number | null;
  truncated: boolean;
}

/**
 * Text a receiver or a broker chose (an error, a receipt id, a header) as PostgreSQL text takes it:
 * NUL and lone surrogates, which text and jsonb refuse, become U+FFFD. One such character in one
 * answer must never stop the results of every integration from being written.
 */
export function storableText(s: string | null): string | null {
  if (s === null) return null;
  return (s.includes('\u0000') ? s.replaceAll('\u0000', '\uFFFD') : s).toWellFormed();
}

function storableHeaders(h: Record<string, string> | null): Record<string, string> | null {
  // fromEntries defines own members: a header named __proto__ stays an ordinary member.
  return h === null ? null : Object.fromEntries(Object.entries(h).map(([k, v]) => [storableText(k)!, storableText(v)!]));
}

/** What one request did, and what becomes of each event it carried (decided by the engine). */
export interface RequestOutcome extends AttemptResponse {
  integrationId: string;
  requestId: string;
  /** The claim the request came from (a first attempt), or null for the retry queue. */
  claimId: string | null;
  claimGeneration: number;
  attempt: number;
  at: Date;
  success: boolean;
  latencyMs: number;
  /** A 429: the integration pauses this long. */
  pauseSeconds: number | null;
  /** Batch mode, when the events stay pending: the body to retry byte for byte. */
  batchBody: { objectType: ObjectType; body: string } | null;
  events: {
    event: LogEvent;
    status: 'PENDING' | 'SUCCEEDED' | 'FAILED';
    attempts: number;
    nextAttemptAt: Date | null;
    firstAttemptAt: Date;
  }[];
}

/**
 * Writes a set of request results in one statement: an attempt row per request; for first
 * attempts, a delivery row only for events that did not succeed; for the retry queue, each
 * delivery's new state (guarded by status = 'PENDING', so a cancel or a result already written
 * wins); claims lose the requests that ended and go when none is left; 429 pauses.
 */
export async function writeResults(q: Queryable, results: RequestOutcome[]): Promise<void> {
  if (!results.length) return;
  // Rows as JSON documents, one parameter per table: serialised natively on both sides, where a
  // column-per-array form costs an escape per value in the driver.
  const attempts: object[] = [];
  const fresh: object[] = [];
  const retry: object[] = [];
  const batches: object[] = [];
  const claims = new Map<string, { generation: number; n: number }>();
  const pauses = new Map<string, number>();
  for (const r of results) {
    const at = r.at.toISOString();
    attempts.push({
      integration_id: r.integrationId,
      request_id: r.requestId,
      claim_id: r.claimId,
      outbox_ids: r.events.map((e) => e.event.pos),
      attempt: r.attempt,
      when_attempted: at,
      success: r.success,
      http_status: r.httpStatus,
      response_time_ms: r.responseTimeMs,
      receipt_id: storableText(r.receiptId),
      topic: storableText(r.topic),
      partition: r.partition,
      partitions: r.partitions ?? null,
      qos: r.qos,
      error: storableText(r.error),
      response_headers: storableHeaders(r.responseHeaders),
      response_body: r.responseBody === null ? null : r.responseBody.toString('base64'),
      response_body_bytes: r.responseBodyBytes,
      truncated: r.truncated,
      latency_ms: Math.round(r.latencyMs),
    });
    if (r.claimId) {
      const c = claims.get(r.claimId) ?? { generation: r.claimGeneration, n: 0 };
      if (c.generation === r.claimGeneration) c.n++;
      claims.set(r.claimId, c);
    }
    if (r.pauseSeconds !== null) pauses.set(r.integrationId, Math.max(pauses.get(r.integrationId) ?? 0, r.pauseSeconds));
    const pendingBatch = r.batchBody !== null && r.events.some((e) => e.status === 'PENDING');
    if (pendingBatch) {
      batches.push({ id: r.requestId, integration_id: r.integrationId, object_type: r.batchBody!.objectType, body: r.batchBody!.body });
    }
    for (const e of r.events) {
      // A first attempt that succeeded needs no row of its own: the attempt row says it all.
      if (r.claimId && e.status === 'SUCCEEDED') continue;
      (r.claimId ? fresh : retry).push({
        integration_id: r.integrationId,
        outbox_id: e.event.pos,
        status: e.status,
        attempts: e.attempts,
        next_at: e.nextAttemptAt?.toISOString() ?? null,
        first_at: e.firstAttemptAt.toISOString(),
        at,
        batch_id: pendingBatch ? r.requestId : null,
        error: r.success ? null : storableText(r.error),
        receipt: storableText(r.receiptId),
      });
    }
  }
  // One statement, so one round trip and atomic without a transaction around it: each part is a
  // data-modifying CTE, a no-op when its document is empty. The claims' DELETE and UPDATE touch
  // disjoint rows (requests <= n, requests > n), as one statement must.
  await q.query(
    `WITH a AS (
       INSERT INTO delivery_attempts (integration_id, request_id, claim_id, outbox_ids, attempt, when_attempted, success, http_status,
                                      response_time_ms, receipt_id, topic, partition, partitions, qos, error, response_headers,
                                      response_body, response_body_bytes, truncated, latency_ms)
       SELECT integration_id, request_id, claim_id, outbox_ids, attempt, when_attempted, success, http_status, response_time_ms,
              receipt_id, topic, partition, partitions, qos, error, response_headers, decode(response_body, 'base64'), response_body_bytes,
              truncated, latency_ms
         FROM json_to_recordset($1::json) AS r(integration_id uuid, request_id uuid, claim_id uuid, outbox_ids int8[], attempt int,
              when_attempted timestamptz, success bool, http_status int, response_time_ms int, receipt_id text, topic text,
              partition int, partitions int[], qos int, error text, response_headers jsonb, response_body text, response_body_bytes int,
              truncated bool, latency_ms int)
     ), b AS (
       INSERT INTO delivery_batches (id, integration_id, object_type, body)
       SELECT id, integration_id, object_type, body
         FROM json_to_recordset($2::json) AS r(id uuid, integration_id uuid, object_type text, body text)
       ON CONFLICT DO NOTHING
     ), f AS (
       INSERT INTO deliveries (integration_id, outbox_id, event_id, object_type, object_id, status, attempts, next_attempt_at,
                               first_attempt_at, last_attempt_at, batch_id, when_created, completed_at, last_error)
       SELECT r.integration_id, o.id, o.event_id, o.object_type, o.object_id, r.status, r.attempts, COALESCE(r.next_at, now()),
              r.first_at, r.at, r.batch_id, o.when_created, CASE WHEN r.status <> 'PENDING' THEN now() END, r.error
         FROM json_to_recordset($3::json) AS r(integration_id uuid, outbox_id int8, status text, attempts int, next_at timestamptz,
              first_at timestamptz, at timestamptz, batch_id uuid, error text)
         JOIN outbox o ON o.id = r.outbox_id
       ON CONFLICT DO NOTHING
     ), u AS (
       UPDATE deliveries d SET status = r.status, attempts = r.attempts, next_attempt_at = COALESCE(r.next_at, d.next_attempt_at),
              lease_until = NULL, first_attempt_at = COALESCE(d.first_attempt_at, r.first_at), last_attempt_at = r.at,
              receipt_id = COALESCE(r.receipt, d.receipt_id), batch_id = COALESCE(r.batch_id, d.batch_id), last_error = r.error,
              completed_at = CASE WHEN r.status IN ('SUCCEEDED', 'FAILED') THEN now() END
         FROM json_to_recordset($4::json) AS r(integration_id uuid, outbox_id int8, status text, attempts int, next_at timestamptz,
              first_at timestamptz, at timestamptz, batch_id uuid, error text, receipt text)
        WHERE d.integration_id = r.integration_id AND d.outbox_id = r.outbox_id AND d.status = 'PENDING'
     ), done AS (
       SELECT * FROM json_to_recordset($5::json) AS r(id uuid, n int, generation int)
     ), cd AS (
       -- A claim goes with its last request; one taken over since (a newer generation) is the new worker's to count.
       DELETE FROM delivery_claims c USING done r WHERE c.id = r.id AND c.generation = r.generation AND c.requests <= r.n
     ), cu AS (
       UPDATE delivery_claims c SET requests = c.requests - r.n FROM done r
        WHERE c.id = r.id AND c.generation = r.generation AND c.requests > r.n
     )
     -- Spec 6.4: a 429 pauses the whole integration; its events stay queued.
     UPDATE integration_state s SET paused_until = GREATEST(COALESCE(s.paused_until, now()), now() + make_interval(secs => r.seconds))
       FROM json_to_recordset($6::json) AS r(id uuid, seconds float8)
      WHERE s.integration_id = r.id`,
    [
      JSON.stringify(attempts),
      JSON.stringify(batches),
      JSON.stringify(fresh),
      JSON.stringify(retry),
      JSON.stringify([...claims].map(([id, c]) => ({ id, n: c.n, generation: c.generation }))),
      JSON.stringify([...pauses].map(([id, seconds]) => ({ id, seconds }))),
    ],
    'delivery_write_results',
  );
}

// ---- upkeep ------------------------------------------------------------------------------------

/**
 * Retention and the log's life (API.md 9), in bulk, never row by row on the hot path:
 * - events of the log the integration has not reached, older than its maxBacklogHours, become
 *   FAILED ("backlog expired"), whether it is enabled or not (an event once attempted, paused or
 *   redelivered is governed by the retry deadline instead, so a redelivery is never expired again);
 * - deliveries and attempts past retention go (succeeded 7 days, failed and cancelled 30);
 * - the log is pruned below the position every integration has passed, past retention, keeping
 *   what a delivery still waits on.
 */
export async function sweep(db: Db, o: { succeededDays: number; failedDays: number }): Promise<number> {
  // Only integrations with an unread event past their maxBacklogHours among the first 100 after
  // their position (one short index range each): the log is appended in time order, so the others
  // have nothing to expire. Not just the first: a new integration's position may sit below a few
  // events committed before it was created (skipped by the read, younger than the rest).
  const { rows: integrations } = await db.query<{ id: string }>(
    `SELECT i.id FROM integrations i JOIN integration_state s ON s.integration_id = i.id
      WHERE i.deleted_at IS NULL
        AND (SELECT min(f.when_created) FROM (SELECT o.when_created FROM outbox o
               WHERE (o.tx_id, o.id) > (s.log_tx, s.log_id) AND o.tx_id < ${HORIZON}
               ORDER BY o.tx_id, o.id LIMIT 100) f) < now() - make_interval(secs => i.max_backlog_hours * 3600)`,
  );
  for (const { id } of integrations) {
    for (;;) {
      const n = await db.tx(async (q) => {
        const { rows } = await q.query<{ log_tx: string; log_id: string; hours: number }>(
          `SELECT s.log_tx, s.log_id, i.max_backlog_hours AS hours FROM integration_state s JOIN integrations i ON i.id = s.integration_id
            WHERE s.integration_id = $1 AND i.deleted_at IS NULL FOR UPDATE OF s`,
          [id],
        );
        const st = rows[0];
        if (!st) return 0;
        const cutoff = Date.now() - st.hours * 3600_000;
        const read = await readLog(q, id, { tx: st.log_tx, id: st.log_id }, (e) => e.whenCreated.getTime() < cutoff, 5000);
        if (read.next.tx === st.log_tx && read.next.id === st.log_id) return 0;
        // Stop at the first event still young enough: everything before it is expired or not covered.
        await expireLogEvents(q, id, read.events);
        await q.query('UPDATE integration_state SET log_tx = $2, log_id = $3 WHERE integration_id = $1', [id, read.next.tx, read.next.id]);
        return read.events.length || 1;
      });
      if (n === 0) break;
    }
  }
  let removed = 0;
  const batched = async (sql: string, params: unknown[]) => {
    for (;;) {
      const { rowCount } = await db.query(sql, params);
      removed += rowCount;
      if (rowCount < 10000) break;
    }
  };
  for (const [status, days] of [
    ['SUCCEEDED', o.succeededDays],
    ['FAILED', o.failedDays],
    ['CANCELLED', o.failedDays],
  ] as const) {
    await batched(
      `DELETE FROM deliveries WHERE (integration_id, outbox_id) IN (
         SELECT integration_id, outbox_id FROM deliveries WHERE status = $1 AND completed_at < now() - make_interval(days => $2) LIMIT 10000)`,
      [status, days],
    );
  }
  // An attempt that succeeded is kept as long as a succeeded delivery, a failed one as a failed one.
  await batched(
    `DELETE FROM delivery_attempts WHERE id = ANY(ARRAY(
       SELECT id FROM delivery_attempts
        WHERE when_attempted < now() - make_interval(days => CASE WHEN success THEN $1::int ELSE $2::int END) LIMIT 10000))`,
    [o.succeededDays, o.failedDays],
  );
  await db.query(
    `DELETE FROM delivery_batches b WHERE when_created < now() - make_interval(days => $1)
       AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.integration_id = b.integration_id AND d.batch_id = b.id AND d.status = 'PENDING')`,
    [Math.min(o.succeededDays, o.failedDays)],
  );
  // The log: below every live integration's position and every live claim, past retention, and
  // not waited on by a delivery.
  const keepDays = Math.max(o.succeededDays, o.failedDays);
  await batched(
    `WITH low AS (
       SELECT min(s.log_tx) AS tx FROM integration_state s JOIN integrations i ON i.id = s.integration_id WHERE i.deleted_at IS NULL
     )
     DELETE FROM outbox WHERE id = ANY(ARRAY(
       SELECT o.id FROM outbox o, low
        WHERE o.when_created < now() - make_interval(days => $1) AND (low.tx IS NULL OR o.tx_id < low.tx)
          AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = o.event_id AND d.status = 'PENDING')
          AND NOT EXISTS (SELECT 1 FROM delivery_claims c WHERE o.id = ANY(c.outbox_ids))
        LIMIT 10000))`,
    [keepDays],
  );
  return removed;
}

/** Deliveries not yet in a final state, over every integration (for /metrics; capped estimate). */
export async function pendingTotal(q: Queryable): Promise<number> {
  const { rows } = await q.query<{ n: number }>(
    `SELECT (SELECT count(*) FROM deliveries WHERE status = 'PENDING')::int8
          + (SELECT COALESCE(sum(cardinality(outbox_ids)), 0) FROM delivery_claims)::int8
          + (SELECT COALESCE(sum(LEAST(10001, (
               SELECT count(*) FROM (SELECT 1 FROM outbox o WHERE (o.tx_id, o.id) > (s.log_tx, s.log_id)
                                       AND ${COVERED} AND ${AFTER_START} ORDER BY o.tx_id, o.id LIMIT 10001) x))), 0)
               FROM integration_state s JOIN integrations i ON i.id = s.integration_id WHERE i.deleted_at IS NULL)::int8 AS n`,
  );
  return Number(rows[0]?.n ?? 0);
}

/**
 * Seconds since the oldest transaction still open began (0 when none): while it runs, the log's
 * horizon cannot pass it, so every integration waits. The service's own sessions are bounded by
 * idle_in_transaction_session_timeout; this metric shows anyone else's.
 */
export async function oldestTransactionAge(q: Queryable): Promise<number> {
  const { rows } = await q.query<{ age: number | null }>(
    `SELECT extract(epoch FROM now() - min(xact_start))::float8 AS age FROM pg_stat_activity
      WHERE (backend_xid IS NOT NULL OR backend_xmin IS NOT NULL) AND pid <> pg_backend_pid()`,
  );
  return Math.max(0, rows[0]?.age ?? 0);
}

// ---- history -----------------------------------------------------------------------------------

/**
 * Every delivery of the integration named by $1, as one derived table (for keyset paging): events
 * with a row of their own; first attempts that succeeded (their attempt row says so); events
 * claimed and not yet attempted; and the log after the position that the integration covers.
 * Columns: id (the event's log position), integration_id, event_id, object_type, object_id, status,
 * attempts, last_attempt_at, next_attempt_at, receipt_id, batch_id, when_created, last_error.
 */
export const DELIVERIES_OF_INTEGRATION = `(
  SELECT d.outbox_id AS id, d.integration_id, d.event_id, d.object_type, d.object_id, d.status, d.attempts, d.last_attempt_at,
         d.next_attempt_at, d.receipt_id, d.batch_id, d.when_created, d.last_error
    FROM deliveries d WHERE d.integration_id = $1
  UNION ALL
  SELECT o.id, $1::uuid, o.event_id, o.object_type, o.object_id, 'SUCCEEDED', a.n::int, a.when_attempted, NULL::timestamptz,
         a.receipt_id, NULLIF(a.request_id, o.event_id), o.when_created, NULL
    FROM (SELECT DISTINCT ON (x) x, count(*) OVER (PARTITION BY x) AS n, a.when_attempted, a.receipt_id,
                 a.request_id
            FROM delivery_attempts a, unnest(a.outbox_ids) AS x
           WHERE a.integration_id = $1 AND a.claim_id IS NOT NULL
           ORDER BY x, a.success DESC, a.id DESC) a
    JOIN outbox o ON o.id = a.x
   WHERE NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.integration_id = $1 AND d.outbox_id = a.x)
  UNION ALL
  SELECT o.id, $1::uuid, o.event_id, o.object_type, o.object_id, 'PENDING', 0, NULL::timestamptz, c.when_created, NULL, NULL,
         o.when_created, NULL
    FROM delivery_claims c, unnest(c.outbox_ids) AS x, outbox o
   WHERE c.integration_id = $1 AND o.id = x
     AND NOT EXISTS (SELECT 1 FROM delivery_attempts a WHERE a.outbox_ids && ARRAY[x] AND a.claim_id = c.id)
     AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.integration_id = $1 AND d.outbox_id = x)
  UNION ALL
  SELECT o.id, $1::uuid, o.event_id, o.object_type, o.object_id, 'PENDING', 0, NULL::timestamptz, o.when_created, NULL, NULL,
         o.when_created, NULL
    FROM outbox o, integration_state s, integrations i
   WHERE s.integration_id = $1 AND i.id = $1 AND i.deleted_at IS NULL
     AND (o.tx_id, o.id) > (s.log_tx, s.log_id) AND ${COVERED} AND ${AFTER_START}
) d`;

export interface AttemptRow {
  delivery_id: string;
  request_id: string;
  attempt: number;
  when_attempted: Date;
  success: boolean;
  http_status: number | null;
  response_time_ms: number | null;
  receipt_id: string | null;
  topic: string | null;
  partition: number | null;
  qos: number | null;
  error: string | null;
  response_headers: Record<string, string> | null;
  /** The bytes as received (bytea: a Buffer on pg, a Uint8Array on PGlite). */
  response_body: Uint8Array | null;
  response_body_bytes: number | null;
  truncated: boolean;
}

/** The attempts of some events of an integration, one row per attempt and event, oldest first. */
export async function attemptsOf(q: Queryable, integrationId: string, outboxIds: string[]): Promise<AttemptRow[]> {
  if (!outboxIds.length) return [];
  const { rows } = await q.query<AttemptRow>(
    `SELECT x.id::text AS delivery_id, a.request_id, a.attempt, a.when_attempted, a.success, a.http_status, a.response_time_ms,
            a.receipt_id, a.topic, COALESCE(a.partitions[x.n], a.partition) AS partition, a.qos, a.error, a.response_headers,
            a.response_body, a.response_body_bytes, a.truncated
       FROM delivery_attempts a, unnest(a.outbox_ids) WITH ORDINALITY AS x(id, n)
      WHERE a.integration_id = $1 AND a.outbox_ids && $2::int8[] AND x.id = ANY($2::int8[])
      ORDER BY x.id, a.id`,
    [integrationId, outboxIds],
  );
  return rows;
}

const REDELIVER_SET = `status = 'PENDING', next_attempt_at = now(), lease_until = NULL, attempt_base = attempts, first_attempt_at = NULL,
  completed_at = NULL, batch_id = NULL, last_error = NULL`;

/**
 * Sends one delivery again: a pending one is made due now (its attempts so far still count); a
 * finished one starts afresh. False when the integration never had the event.
 */
export async function redeliverOne(q: Queryable, integrationId: string, outboxId: string): Promise<boolean> {
  const { rows } = await q.query<{ status: string }>(
    'SELECT status FROM deliveries WHERE integration_id = $1 AND outbox_id = $2 FOR UPDATE',
    [integrationId, outboxId],
  );
  if (rows[0]) {
    await q.query(
      rows[0].status === 'PENDING'
        ? 'UPDATE deliveries SET next_attempt_at = now() WHERE integration_id = $1 AND outbox_id = $2'
        : `UPDATE deliveries SET ${REDELIVER_SET} WHERE integration_id = $1 AND outbox_id = $2`,
      [integrationId, outboxId],
    );
    return true;
  }
  // A first attempt that succeeded: it gets a row of its own, due now.
  const { rowCount } = await q.query(
    `INSERT INTO deliveries (integration_id, outbox_id, event_id, object_type, object_id, status, attempts, attempt_base, when_created)
     SELECT $1, o.id, o.event_id, o.object_type, o.object_id, 'PENDING', 1, 1, o.when_created FROM outbox o
      WHERE o.id = $2 AND EXISTS (SELECT 1 FROM delivery_attempts a WHERE a.integration_id = $1 AND a.outbox_ids && ARRAY[$2::int8])
     ON CONFLICT DO NOTHING`,
    [integrationId, outboxId],
  );
  if (rowCount) return true;
  // Still to be sent (claimed, or covered after the position): it goes anyway.
  const { rows: pending } = await q.query(
    `SELECT 1 WHERE EXISTS (SELECT 1 FROM delivery_claims c WHERE c.integration_id = $1 AND $2::int8 = ANY(c.outbox_ids))
        OR EXISTS (SELECT 1 FROM outbox o, integration_state s, integrations i
                    WHERE o.id = $2 AND s.integration_id = $1 AND i.id = $1
                      AND (o.tx_id, o.id) > (s.log_tx, s.log_id) AND ${COVERED} AND ${AFTER_START})`,
    [integrationId, outboxId],
  );
  return pending.length > 0;
}

/** Sends again every delivery of a final status whose event was stored in [from, to). */
export async function redeliverRange(
  q: Queryable,
  integrationId: string,
  status: 'FAILED' | 'SUCCEEDED' | 'CANCELLED',
  from: string,
  to: string,
): Promise<number> {
  let n = 0;
  if (status === 'SUCCEEDED') {
    // First attempts that succeeded get rows of their own first.
    const { rowCount } = await q.query(
      `INSERT INTO deliveries (integration_id, outbox_id, event_id, object_type, object_id, status, attempts, attempt_base, when_created)
       SELECT DISTINCT $1::uuid, o.id, o.event_id, o.object_type, o.object_id, 'PENDING', 1, 1, o.when_created
         FROM delivery_attempts a, unnest(a.outbox_ids) AS x, outbox o
        WHERE a.integration_id = $1 AND a.claim_id IS NOT NULL AND a.success AND o.id = x
          AND o.when_created >= $2 AND o.when_created < $3
       ON CONFLICT DO NOTHING`,
      [integrationId, from, to],
    );
    n += rowCount;
  }
  const { rowCount } = await q.query(
    `UPDATE deliveries SET ${REDELIVER_SET} WHERE integration_id = $1 AND status = $2 AND when_created >= $3 AND when_created < $4`,
    [integrationId, status, from, to],
  );
  return n + rowCount;
}

/** One line of the result stream: an attempt and one event it carried (`n`: its place in the attempt, from 1). */
export interface StreamRow extends AttemptRow {
  tx_id: string;
  id: string;
  n: number;
  integration_id: string;
  channel: string;
  event_id: string | null;
  object_type: string | null;
}

/** Bytes a line costs besides the response body: what the page budget counts per event. */
const LINE_BYTES = 400;

/**
 * The result stream after a position (tx_id, id) of the attempt log: up to `limit` attempts and
 * about `bytes` of lines, each attempt expanded into one line per event it carried; the response
 * body and headers only on an attempt's first line (a batch's 64 KiB body once, not once per event).
 * A follower reads below the horizon only, so it never misses an attempt committed late behind a
 * newer one. `more`: the page stopped at a limit, so more may follow at once.
 */
export async function streamAfter(
  q: Queryable,
  o: { after: Position; since: string; channel: string | null; owners: string[] | null; limit: number; bytes: number; follow: boolean },
): Promise<{ rows: StreamRow[]; next: Position; more: boolean }> {
  const { rows } = await q.query<StreamRow & { scanned: number }>(
    `WITH a AS (
       SELECT a.tx_id, a.id, a.integration_id, i.channel, a.outbox_ids, a.partitions, a.partition, a.request_id, a.attempt,
              a.when_attempted, a.success, a.http_status, a.response_time_ms, a.receipt_id, a.topic, a.qos, a.error,
              a.response_headers, a.response_body, a.response_body_bytes, a.truncated,
              COALESCE(octet_length(a.response_body), 0) + ${LINE_BYTES} * cardinality(a.outbox_ids) AS size
         FROM delivery_attempts a JOIN integrations i ON i.id = a.integration_id
        WHERE (a.tx_id, a.id) > ($1::bigint, $2::bigint) AND ($7::bool IS NOT TRUE OR a.tx_id < ${HORIZON}) AND a.when_attempted >= $3
          AND ($4::text IS NULL OR i.channel = $4) AND ($5::uuid[] IS NULL OR i.owner_ids <@ $5::uuid[])
        ORDER BY a.tx_id, a.id LIMIT $6
     ), p AS (
       SELECT * FROM (SELECT a.*, sum(size) OVER (ORDER BY tx_id, id) - size AS before, count(*) OVER () AS scanned FROM a) s
        WHERE before < $8
     )
     SELECT p.tx_id, p.id, x.n::int AS n, p.scanned::int AS scanned, p.integration_id, p.channel, x.id::text AS delivery_id,
            p.request_id, p.attempt, p.when_attempted, p.success, p.http_status, p.response_time_ms, p.receipt_id, p.topic,
            COALESCE(p.partitions[x.n], p.partition) AS partition, p.qos, p.error,
            CASE WHEN x.n = 1 THEN p.response_headers END AS response_headers,
            CASE WHEN x.n = 1 THEN p.response_body END AS response_body,
            p.response_body_bytes, p.truncated, o.event_id, o.object_type
       FROM p CROSS JOIN LATERAL unnest(p.outbox_ids) WITH ORDINALITY AS x(id, n) LEFT JOIN outbox o ON o.id = x.id
      ORDER BY p.tx_id, p.id, x.n`,
    [o.after.tx, o.after.id, o.since, o.channel, o.owners, o.limit, o.follow, o.bytes],
  );
  let attempts = 0;
  let next = o.after;
  for (const r of rows) {
    if (r.n === 1) attempts++;
    next = { tx: r.tx_id, id: r.id };
  }
  const scanned = rows[0]?.scanned ?? 0;
  return { rows, next, more: scanned >= o.limit || attempts < scanned };
}

/** API.md 9: what GET /integrations/{id} reports of its delivery. */
export interface IntegrationStats {
  pending: number;
  delivered: { lastHour: number; lastDay: number };
  failed: { lastHour: number; lastDay: number };
  lastSuccessAt: Date | null;
  lastErrorAt: Date | null;
  lastError: string | null;
  pausedUntil: Date | null;
  p50LatencyMs: number | null;
  p99LatencyMs: number | null;
}

/**
 * Counts for one integration. `pending` counts the log after the position up to 10,000 (then it is
 * a lower bound: API.md allows an estimate); latency percentiles are over the last hour's newest
 * 10,000 successful requests, each measured from its oldest event's store time.
 */
export async function stats(q: Queryable, integrationId: string): Promise<IntegrationStats> {
  const { rows } = await q.query<{
    pending: string;
    delivered_hour: string;
    delivered_day: string;
    failed_hour: string;
    failed_day: string;
    last_success_at: Date | null;
    last_error_at: Date | null;
    last_error: string | null;
    paused_until: Date | null;
    p50: number | null;
    p99: number | null;
  }>(
    `SELECT
       (SELECT count(*) FROM deliveries d WHERE d.integration_id = $1 AND d.status = 'PENDING')
       + (SELECT COALESCE(sum(cardinality(c.outbox_ids)), 0) FROM delivery_claims c WHERE c.integration_id = $1)
       + (SELECT count(*) FROM (SELECT 1 FROM outbox o, integration_state s, integrations i
                                 WHERE s.integration_id = $1 AND i.id = $1 AND (o.tx_id, o.id) > (s.log_tx, s.log_id)
                                   AND ${COVERED} AND ${AFTER_START} ORDER BY o.tx_id, o.id LIMIT 10000) x) AS pending,
       (SELECT COALESCE(sum(cardinality(a.outbox_ids)), 0) FROM delivery_attempts a
         WHERE a.integration_id = $1 AND a.success AND a.when_attempted > now() - interval '1 hour') AS delivered_hour,
       (SELECT COALESCE(sum(cardinality(a.outbox_ids)), 0) FROM delivery_attempts a
         WHERE a.integration_id = $1 AND a.success AND a.when_attempted > now() - interval '1 day') AS delivered_day,
       (SELECT count(*) FROM deliveries d WHERE d.integration_id = $1 AND d.status = 'FAILED'
           AND d.completed_at > now() - interval '1 hour') AS failed_hour,
       (SELECT count(*) FROM deliveries d WHERE d.integration_id = $1 AND d.status = 'FAILED'
           AND d.completed_at > now() - interval '1 day') AS failed_day,
       (SELECT max(a.when_attempted) FROM delivery_attempts a WHERE a.integration_id = $1 AND a.success) AS last_success_at,
       e.when_attempted AS last_error_at, e.error AS last_error,
       (SELECT paused_until FROM integration_state s WHERE s.integration_id = $1 AND s.paused_until > now()) AS paused_until,
       l.p50, l.p99
     FROM (SELECT 1) one
     LEFT JOIN LATERAL (SELECT a.when_attempted, a.error FROM delivery_attempts a WHERE a.integration_id = $1 AND NOT a.success
                         ORDER BY a.id DESC LIMIT 1) e ON true
     LEFT JOIN LATERAL (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY latency_ms)::float8 AS p50,
                               percentile_cont(0.99) WITHIN GROUP (ORDER BY latency_ms)::float8 AS p99
                          FROM (SELECT a.latency_ms FROM delivery_attempts a
                                 WHERE a.integration_id = $1 AND a.success AND a.when_attempted > now() - interval '1 hour'
                                 ORDER BY a.id DESC LIMIT 10000) x) l ON true`,
    [integrationId],
  );
  const r = rows[0]!;
  const n = (v: string) => Number(v);
  return {
    pending: n(r.pending),
    delivered: { lastHour: n(r.delivered_hour), lastDay: n(r.delivered_day) },
    failed: { lastHour: n(r.failed_hour), lastDay: n(r.failed_day) },
    lastSuccessAt: r.last_success_at,
    lastErrorAt: r.last_error_at,
    lastError: r.last_error,
    pausedUntil: r.paused_until,
    p50LatencyMs: r.p50 === null ? null : Math.round(r.p50),
    p99LatencyMs: r.p99 === null ? null : Math.round(r.p99),
  };
}
