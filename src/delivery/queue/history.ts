// History reads (API guide 9): an integration's deliveries as one derived table (events with a row
// of their own, first attempts that succeeded, claimed and unread ones), the attempts of some events,
// the result stream's pages, an integration's stats, and the figures /metrics exports.
import type { Queryable } from '../../db/db.js';
import { AFTER_START, COVERED, HORIZON, type Position, UNPUBLISHED } from '../../eventlog/log.js';

/** Deliveries not yet in a final state, over every integration (for /metrics; capped estimate). */
export async function pendingTotal(q: Queryable): Promise<number> {
  const { rows } = await q.query<{ n: number }>(
    `SELECT (SELECT count(*) FROM deliveries WHERE status = 'PENDING')::int8
          + (SELECT COALESCE(sum(cardinality(log_ids)), 0) FROM delivery_claims)::int8
          + (SELECT COALESCE(sum(LEAST(10001, (
               SELECT count(*) FROM (SELECT 1 FROM event_log o WHERE (o.tx_id, o.id) > (s.log_tx, s.log_id)
                                       AND ${COVERED} AND ${AFTER_START} AND ${UNPUBLISHED} ORDER BY o.tx_id, o.id LIMIT 10001) x))), 0)
               FROM integration_state s JOIN integrations i ON i.id = s.integration_id WHERE i.deleted_at IS NULL)::int8 AS n`,
  );
  return Number(rows[0]?.n ?? 0);
}

/**
 * Seconds since the oldest transaction still open began (0 when none): while it runs, the event log's
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

/**
 * Every delivery of the integration named by $1, as one derived table (for keyset paging): events
 * with a row of their own; first attempts that succeeded (their attempt row says so); events
 * claimed and not yet attempted; and the event log after the position that the integration covers.
 * Columns: id (the event's log position), integration_id, event_id, object_type, object_id, status,
 * attempts, last_attempt_at, next_attempt_at, receipt_id, batch_id, when_created, last_error.
 */
export const DELIVERIES_OF_INTEGRATION = `(
  SELECT d.log_id AS id, d.integration_id, d.event_id, d.object_type, d.object_id, d.status, d.attempts, d.last_attempt_at,
         d.next_attempt_at, d.receipt_id, d.batch_id, d.when_created, d.last_error
    FROM deliveries d WHERE d.integration_id = $1
  UNION ALL
  SELECT o.id, $1::uuid, o.event_id, o.object_type, o.object_id, 'SUCCEEDED', a.n::int, a.when_attempted, NULL::timestamptz,
         a.receipt_id, NULLIF(a.request_id, o.event_id), o.when_created, NULL
    FROM (SELECT DISTINCT ON (x) x, count(*) OVER (PARTITION BY x) AS n, a.when_attempted, a.receipt_id,
                 a.request_id
            FROM delivery_attempts a, unnest(a.log_ids) AS x
           WHERE a.integration_id = $1 AND a.claim_id IS NOT NULL
           ORDER BY x, a.success DESC, a.id DESC) a
    JOIN event_log o ON o.id = a.x
   WHERE NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.integration_id = $1 AND d.log_id = a.x)
  UNION ALL
  SELECT o.id, $1::uuid, o.event_id, o.object_type, o.object_id, 'PENDING', 0, NULL::timestamptz, c.when_created, NULL, NULL,
         o.when_created, NULL
    FROM delivery_claims c, unnest(c.log_ids) AS x, event_log o
   WHERE c.integration_id = $1 AND o.id = x
     AND NOT EXISTS (SELECT 1 FROM delivery_attempts a WHERE a.log_ids && ARRAY[x] AND a.claim_id = c.id)
     AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.integration_id = $1 AND d.log_id = x)
  UNION ALL
  SELECT o.id, $1::uuid, o.event_id, o.object_type, o.object_id, 'PENDING', 0, NULL::timestamptz, o.when_created, NULL, NULL,
         o.when_created, NULL
    FROM event_log o, integration_state s, integrations i
   WHERE s.integration_id = $1 AND i.id = $1 AND i.deleted_at IS NULL
     AND (o.tx_id, o.id) > (s.log_tx, s.log_id) AND ${COVERED} AND ${AFTER_START} AND ${UNPUBLISHED}
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
export async function attemptsOf(q: Queryable, integrationId: string, logIds: string[]): Promise<AttemptRow[]> {
  if (!logIds.length) return [];
  const { rows } = await q.query<AttemptRow>(
    `SELECT x.id::text AS delivery_id, a.request_id, a.attempt, a.when_attempted, a.success, a.http_status, a.response_time_ms,
            a.receipt_id, a.topic, COALESCE(a.partitions[x.n], a.partition) AS partition, a.qos, a.error, a.response_headers,
            a.response_body, a.response_body_bytes, a.truncated
       FROM delivery_attempts a, unnest(a.log_ids) WITH ORDINALITY AS x(id, n)
      WHERE a.integration_id = $1 AND a.log_ids && $2::int8[] AND x.id = ANY($2::int8[])
      ORDER BY x.id, a.id`,
    [integrationId, logIds],
  );
  return rows;
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
       SELECT a.tx_id, a.id, a.integration_id, i.channel, a.log_ids, a.partitions, a.partition, a.request_id, a.attempt,
              a.when_attempted, a.success, a.http_status, a.response_time_ms, a.receipt_id, a.topic, a.qos, a.error,
              a.response_headers, a.response_body, a.response_body_bytes, a.truncated,
              COALESCE(octet_length(a.response_body), 0) + ${LINE_BYTES} * cardinality(a.log_ids) AS size
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
       FROM p CROSS JOIN LATERAL unnest(p.log_ids) WITH ORDINALITY AS x(id, n) LEFT JOIN event_log o ON o.id = x.id
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

/**
 * Where a replay of the newest `last` lines of the window starts (API guide 9, `last`): the position
 * just before the newest attempt from which the window holds at least `last` lines (one per attempt
 * and event). One read of the attempt log's (tx_id, id) index backwards, at most `last` attempts,
 * never the window counted. null: the window holds fewer lines, so the replay starts at its beginning.
 * It counts what is committed now, horizon or not (a follower's horizon may lag behind a long
 * transaction, and counting below it would replay the whole window): an attempt committed later
 * with a position before the start is older than the newest N, and is not replayed.
 */
export async function streamStart(
  q: Queryable,
  o: { since: string; channel: string | null; owners: string[] | null; last: number },
): Promise<Position | null> {
  const { rows } = await q.query<{ tx: string; id: string }>(
    `SELECT w.tx_id::text AS tx, (w.id - 1)::text AS id
       FROM (SELECT n.tx_id, n.id, sum(n.lines) OVER (ORDER BY n.tx_id DESC, n.id DESC) AS lines
               FROM (SELECT a.tx_id, a.id, cardinality(a.log_ids) AS lines
                       FROM delivery_attempts a JOIN integrations i ON i.id = a.integration_id
                      WHERE a.when_attempted >= $1
                        AND ($2::text IS NULL OR i.channel = $2) AND ($3::uuid[] IS NULL OR i.owner_ids <@ $3::uuid[])
                      ORDER BY a.tx_id DESC, a.id DESC LIMIT $4) n) w
      WHERE w.lines >= $4
      ORDER BY w.lines LIMIT 1`,
    [o.since, o.channel, o.owners, o.last],
  );
  return rows[0] ?? null;
}

/** API guide 9: what GET /integrations/{id} reports of its delivery. */
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
 * Counts for one integration. `pending` counts the event log after the position up to 10,000 (then it is
 * a lower bound: the API guide allows an estimate); latency percentiles are over the last hour's newest
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
       + (SELECT COALESCE(sum(cardinality(c.log_ids)), 0) FROM delivery_claims c WHERE c.integration_id = $1)
       + (SELECT count(*) FROM (SELECT 1 FROM event_log o, integration_state s, integrations i
                                 WHERE s.integration_id = $1 AND i.id = $1 AND (o.tx_id, o.id) > (s.log_tx, s.log_id)
                                   AND ${COVERED} AND ${AFTER_START} AND ${UNPUBLISHED} ORDER BY o.tx_id, o.id LIMIT 10000) x) AS pending,
       (SELECT COALESCE(sum(cardinality(a.log_ids)), 0) FROM delivery_attempts a
         WHERE a.integration_id = $1 AND a.success AND a.when_attempted > now() - interval '1 hour') AS delivered_hour,
       (SELECT COALESCE(sum(cardinality(a.log_ids)), 0) FROM delivery_attempts a
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
