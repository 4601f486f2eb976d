// The event log's life (API guide 9), in bulk, never row by row on the hot path: backlog expiry
// and retention of results.
import type { Db } from '../../db/db.js';
import { expireLogEvents } from './claims.js';
import { HORIZON, lockIntegration, readLog } from '../../eventlog/log.js';

/**
 * Retention and the event log's life (API guide 9), in bulk, never row by row on the hot path:
 * - events of the event log the integration has not reached, older than its maxBacklogHours, become
 *   FAILED ("backlog expired"), whether it is enabled or not (an event once attempted, paused or
 *   redelivered is governed by the retry deadline instead, so a redelivery is never expired again);
 * - deliveries and attempts past retention go (succeeded 7 days, failed and cancelled 30).
 * The event log itself goes a partition at a time, once nothing needs it (storage/retention.ts).
 */
export async function sweep(db: Db, o: { succeededDays: number; failedDays: number }): Promise<number> {
  // Only integrations with an unread event past their maxBacklogHours among the first 100 after
  // their position (one short index range each): the event log is appended in time order, so the others
  // have nothing to expire. Not just the first: a new integration's position may sit below a few
  // events committed before it was created (skipped by the read, younger than the rest).
  const { rows: integrations } = await db.query<{ id: string }>(
    `SELECT i.id FROM integrations i JOIN integration_state s ON s.integration_id = i.id
      WHERE i.deleted_at IS NULL
        AND (SELECT min(f.when_created) FROM (SELECT o.when_created FROM event_log o
               WHERE (o.tx_id, o.id) > (s.log_tx, s.log_id) AND o.tx_id < ${HORIZON}
               ORDER BY o.tx_id, o.id LIMIT 100) f) < now() - make_interval(secs => i.max_backlog_hours * 3600)`,
  );
  for (const { id } of integrations) {
    for (;;) {
      const n = await db.tx(async (q) => {
        await lockIntegration(q, id); // as a claim does: no claim takes what this expires
        const { rows } = await q.query<{ log_tx: string; log_id: string; hours: number }>(
          `SELECT s.log_tx, s.log_id, i.max_backlog_hours AS hours FROM integration_state s JOIN integrations i ON i.id = s.integration_id
            WHERE s.integration_id = $1 AND i.deleted_at IS NULL`,
          [id],
        );
        const st = rows[0];
        if (!st) return 0;
        const cutoff = Date.now() - st.hours * 3600_000;
        const read = await readLog(q, id, { tx: st.log_tx, id: st.log_id }, (e) => e.whenCreated.getTime() < cutoff, 5000);
        if (read.next.tx === st.log_tx && read.next.id === st.log_id) return 0;
        // Stop at the first event still young enough: everything before it is expired or not covered.
        await expireLogEvents(q, id, read.events);
        await q.query(
          `UPDATE integration_state SET log_tx = $2, log_id = $3 WHERE integration_id = $1 AND (log_tx, log_id) < ($2::bigint, $3::bigint)`,
          [id, read.next.tx, read.next.id],
        );
        return read.events.length || 1;
      });
      if (n === 0) break;
    }
  }
  // Events parked in the retry queue without an attempt (the event log on Kafka: an integration
  // disabled, paused or slow when they arrived) expire as unread events of the event log do.
  await db.query(
    `UPDATE deliveries d SET status = 'FAILED', completed_at = now(), last_error = 'backlog expired', lease_until = NULL
       FROM integrations i
      WHERE i.id = d.integration_id AND d.status = 'PENDING' AND d.attempts = 0 AND d.first_attempt_at IS NULL
        AND (d.lease_until IS NULL OR d.lease_until <= now())
        AND d.when_created < now() - make_interval(secs => i.max_backlog_hours * 3600)`,
  );
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
      `DELETE FROM deliveries WHERE (integration_id, log_id) IN (
         SELECT integration_id, log_id FROM deliveries WHERE status = $1 AND completed_at < now() - make_interval(days => $2) LIMIT 10000)`,
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
  return removed;
}
