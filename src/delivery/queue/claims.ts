// Claims of the event log (API guide 9): which integrations have work, the integration's shared
// state locked for one claim (position, token bucket, 429 pause, requests in flight across every
// process and instance), the claim row that a worker holds under a renewed lease while it sends,
// its takeover when that worker died, and its hand-back at a graceful stop.
import type { Queryable } from '../../db/db.js';
import { HORIZON, type LogEvent, type Position, eventsAt, lockIntegration } from '../../eventlog/log.js';
import type { DueIntegration } from '../../eventlog/source.js';

/**
 * Integrations with work: log events after their position below the horizon (unless `log` is false:
 * the event log on Kafka), retries due, or a
 * claim whose worker let its lease run out. One index probe per integration and kind. `waiting`
 * says some integration has events after its position that a running transaction still holds
 * above the horizon: they become readable as soon as it ends, so the engine looks again shortly.
 */
export async function dueIntegrations(q: Queryable, log = true): Promise<{ due: DueIntegration[]; waiting: boolean }> {
  const { rows } = await q.query<{ id: string; when_updated: Date; next_tx: string | null; other: boolean; horizon: string }>(
    `SELECT * FROM (
       SELECT i.id, i.when_updated, ${HORIZON} AS horizon,
              -- ORDER BY .. LIMIT 1 makes this an index probe; a plain EXISTS with the correlated row
              -- comparison is planned as a scan of the whole event log.
              -- Not read with the event log on Kafka ($1 false): the topic's consumers hand first attempts over.
              CASE WHEN $1 THEN (SELECT o.tx_id FROM event_log o WHERE (o.tx_id, o.id) > (s.log_tx, s.log_id) ORDER BY o.tx_id, o.id LIMIT 1) END AS next_tx,
              (EXISTS (SELECT 1 FROM deliveries d WHERE d.integration_id = i.id AND d.status = 'PENDING'
                         AND d.next_attempt_at <= now() AND (d.lease_until IS NULL OR d.lease_until <= now()))
               OR EXISTS (SELECT 1 FROM delivery_claims c WHERE c.integration_id = i.id AND c.lease_until <= now())) AS other
         FROM integrations i JOIN integration_state s ON s.integration_id = i.id
        WHERE i.enabled AND i.deleted_at IS NULL AND (s.paused_until IS NULL OR s.paused_until <= now())
     ) x WHERE next_tx IS NOT NULL OR other`,
    [log],
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
 * Locks the integration for the rest of the transaction (lockIntegration, an advisory lock): claims
 * of one integration are serialised across instances, so its in-flight count and token bucket hold
 * everywhere. Other integrations are not blocked. The lock takes no transaction id: a claim takes
 * one only with its last statement (saveClaim), so it holds no reader of the event log back while
 * it reads and builds its messages. Null when it is disabled or deleted meanwhile.
 */
export async function lockState(q: Queryable, integrationId: string, bucketCapacity: number): Promise<ClaimState | null> {
  // The lock first, on its own: in READ COMMITTED a statement that waited for the lock still reads
  // with the snapshot it started with, so the state below is read by a second statement that sees
  // what the previous holder committed.
  await lockIntegration(q, integrationId);
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
          + (SELECT count(DISTINCT COALESCE(d.batch_id::text, d.log_id::text)) FROM deliveries d
              WHERE d.integration_id = s.integration_id AND d.status = 'PENDING' AND d.lease_until > now())::int AS in_flight,
            (SELECT count(*) FROM (SELECT 1 FROM deliveries d WHERE d.integration_id = s.integration_id AND d.status = 'PENDING'
                AND d.next_attempt_at <= now() AND (d.lease_until IS NULL OR d.lease_until <= now()) LIMIT 1000) x)::int AS due_retries,
            (SELECT count(*) FROM delivery_claims c WHERE c.integration_id = s.integration_id AND c.lease_until <= now())::int AS expired_claims
       FROM integration_state s JOIN integrations i ON i.id = s.integration_id, (SELECT clock_timestamp() AS at) t
      WHERE s.integration_id = $1 AND i.enabled AND i.deleted_at IS NULL`,
    [integrationId],
    'delivery_claim_state',
  );
  const r = rows[0];
  if (!r) return null;
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

/**
 * Ends the claim step in one statement, its only write in the common case: records the claim (when
 * it took events), gives this worker's claims that wait for slots the ones counted for them (where
 * a claim is still the worker's: its generation), moves the position (forward only: the Kafka relay
 * moves it too, without the integration's lock) and saves the token bucket. Answers the claims that grew.
 */
export async function saveClaim(
  q: Queryable,
  integrationId: string,
  o: {
    position: Position;
    /** False: the position, bucket and claim are as they were (only claims grow). */
    state: boolean;
    tokens: number | null;
    /** The bucket's clock for `tokens` (ClaimState.at). */
    at: string;
    claim: { id: string; logIds: string[]; requests: number; slots: number; leaseSeconds: number } | null;
    grow: { id: string; generation: number; add: number }[];
  },
): Promise<Set<string>> {
  const c = o.claim;
  const { rows } = await q.query<{ id: string }>(
    `WITH c AS (
       INSERT INTO delivery_claims (id, integration_id, log_ids, requests, slots, lease_until)
       SELECT $4::uuid, $1, $5::text::int8[], $6, $9, now() + make_interval(secs => $7) WHERE $4::uuid IS NOT NULL
     ), s AS (
       UPDATE integration_state
          SET log_tx = CASE WHEN (log_tx, log_id) < ($2::bigint, $3::bigint) THEN $2::bigint ELSE log_tx END,
              log_id = CASE WHEN (log_tx, log_id) < ($2::bigint, $3::bigint) THEN $3::bigint ELSE log_id END,
              tokens = COALESCE($8, tokens),
              refilled_at = CASE WHEN $8::float8 IS NULL THEN refilled_at ELSE GREATEST(refilled_at, $10::timestamptz) END
        WHERE integration_id = $1 AND $11
     ), g AS (
       UPDATE delivery_claims d SET slots = d.slots + g.add
         FROM unnest($12::uuid[], $13::int[], $14::int[]) AS g(id, generation, add)
        WHERE d.id = g.id AND d.generation = g.generation
        RETURNING d.id::text
     )
     SELECT id FROM g`,
    [
      integrationId,
      o.position.tx,
      o.position.id,
      c?.id ?? null,
      `{${(c?.logIds ?? []).join(',')}}`, // digits only: an array literal, not an escape per element
      c?.requests ?? 0,
      c?.leaseSeconds ?? 0,
      o.tokens,
      c?.slots ?? 0,
      o.at,
      o.state,
      o.grow.map((g) => g.id),
      o.grow.map((g) => g.generation),
      o.grow.map((g) => g.add),
    ],
    'delivery_save_claim',
  );
  return new Set(rows.map((r) => r.id));
}

/**
 * Backlog expiry (API guide 9): covered events of the event log older than `hours` at the position become
 * FAILED with "backlog expired" instead of being sent.
 */
export async function expireLogEvents(q: Queryable, integrationId: string, events: LogEvent[]): Promise<void> {
  if (!events.length) return;
  await q.query(
    `INSERT INTO deliveries (integration_id, log_id, event_id, object_type, object_id, status, when_created, completed_at, last_error)
     SELECT $1, o.id, o.event_id, o.object_type, o.object_id, 'FAILED', o.when_created, now(), 'backlog expired'
       FROM event_log o WHERE o.id = ANY($2::int8[])
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
       SELECT id, log_ids FROM delivery_claims WHERE integration_id = $1 AND lease_until <= now()
        ORDER BY lease_until LIMIT 1 FOR UPDATE SKIP LOCKED
     )
     SELECT c.id, ARRAY(SELECT x::text FROM unnest(c.log_ids) AS x
                         WHERE NOT EXISTS (SELECT 1 FROM delivery_attempts a WHERE a.log_ids && ARRAY[x] AND a.claim_id = c.id)) AS ids
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
