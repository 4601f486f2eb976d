// The retry queue (API guide 9): events with a state of their own (a `deliveries` row): those that
// failed and wait for their next attempt, a failed batch kept byte for byte, and redeliveries.
// Row leases with FOR UPDATE SKIP LOCKED: two workers never send the same retry.
import type { Queryable } from '../../db/db.js';
import type { ObjectType } from '../../eventlog/objects.js';
import { AFTER_START, COVERED, type LogEvent, toEvent, UNPUBLISHED } from '../../eventlog/log.js';

/** A delivery of the retry queue, leased for one request. */
export interface RetryDelivery extends LogEvent {
  attempts: number;
  /** Attempts made before the last redelivery: numbering goes on, the budget counts from here. */
  attemptBase: number;
  firstAttemptAt: Date | null;
}

interface RetryRow {
  log_id: string;
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
  ...toEvent({ ...r, id: r.log_id }),
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
       WHERE d.integration_id = $1 AND d.log_id = ANY(ARRAY(
               SELECT log_id FROM deliveries
                WHERE integration_id = $1 AND status = 'PENDING' ${due ? 'AND next_attempt_at <= now()' : ''}
                  AND (lease_until IS NULL OR lease_until <= now()) ${extra}
                ORDER BY next_attempt_at, log_id LIMIT ${limit} FOR UPDATE SKIP LOCKED))
      RETURNING d.log_id, d.event_id, d.object_type, d.object_id, d.when_created, d.attempts, d.attempt_base, d.first_attempt_at)
    SELECT c.*, o.payload::text AS payload FROM c JOIN event_log o ON o.id = c.log_id ORDER BY c.log_id`;
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
          rows.map((r) => r.log_id),
        );
      continue;
    }
    out.push({ batchId: b.batch_id, body: body[0].body, objectType: body[0].object_type, deliveries: rows.map(toRetry) });
    items -= rows.length;
  }
  return out;
}

/** Hands leased retry deliveries back at once (claimed over the request budget). */
export async function releaseRetries(q: Queryable, integrationId: string, logIds: string[]): Promise<void> {
  if (!logIds.length) return;
  await q.query('UPDATE deliveries SET lease_until = NULL WHERE integration_id = $1 AND log_id = ANY($2::int8[])', [integrationId, logIds]);
}

const REDELIVER_SET = `status = 'PENDING', next_attempt_at = now(), lease_until = NULL, attempt_base = attempts, first_attempt_at = NULL,
  completed_at = NULL, batch_id = NULL, last_error = NULL`;

/**
 * Sends one delivery again: a pending one is made due now (its attempts so far still count); a
 * finished one starts afresh. False when the integration never had the event.
 */
export async function redeliverOne(q: Queryable, integrationId: string, logId: string): Promise<boolean> {
  const { rows } = await q.query<{ status: string }>('SELECT status FROM deliveries WHERE integration_id = $1 AND log_id = $2 FOR UPDATE', [
    integrationId,
    logId,
  ]);
  if (rows[0]) {
    await q.query(
      rows[0].status === 'PENDING'
        ? 'UPDATE deliveries SET next_attempt_at = now() WHERE integration_id = $1 AND log_id = $2'
        : `UPDATE deliveries SET ${REDELIVER_SET} WHERE integration_id = $1 AND log_id = $2`,
      [integrationId, logId],
    );
    return true;
  }
  // A first attempt that succeeded: it gets a row of its own, due now.
  const { rowCount } = await q.query(
    `INSERT INTO deliveries (integration_id, log_id, event_id, object_type, object_id, status, attempts, attempt_base, when_created)
     SELECT $1, o.id, o.event_id, o.object_type, o.object_id, 'PENDING', 1, 1, o.when_created FROM event_log o
      WHERE o.id = $2 AND EXISTS (SELECT 1 FROM delivery_attempts a WHERE a.integration_id = $1 AND a.log_ids && ARRAY[$2::int8])
     ON CONFLICT DO NOTHING`,
    [integrationId, logId],
  );
  if (rowCount) return true;
  // Still to be sent (claimed, or covered after the position): it goes anyway.
  const { rows: pending } = await q.query(
    `SELECT 1 WHERE EXISTS (SELECT 1 FROM delivery_claims c WHERE c.integration_id = $1 AND $2::int8 = ANY(c.log_ids))
        OR EXISTS (SELECT 1 FROM event_log o, integration_state s, integrations i
                    WHERE o.id = $2 AND s.integration_id = $1 AND i.id = $1
                      AND (o.tx_id, o.id) > (s.log_tx, s.log_id) AND ${COVERED} AND ${AFTER_START} AND ${UNPUBLISHED})`,
    [integrationId, logId],
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
      `INSERT INTO deliveries (integration_id, log_id, event_id, object_type, object_id, status, attempts, attempt_base, when_created)
       SELECT DISTINCT $1::uuid, o.id, o.event_id, o.object_type, o.object_id, 'PENDING', 1, 1, o.when_created
         FROM delivery_attempts a, unnest(a.log_ids) AS x, event_log o
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
