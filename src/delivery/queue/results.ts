// Attempts and results (API guide 9): what each request did, written for a moment's requests in one
// statement: an insert-only attempt row per request, a delivery row only for events that did not
// succeed at once, a retry's new state, the claims' remaining requests, 429 pauses. What a receiver
// or a broker sent back is made storable first: no byte sequence can make the database refuse it.
import type { Queryable } from '../../db/db.js';
import type { ObjectType } from '../../eventlog/objects.js';
import type { LogEvent } from '../../eventlog/log.js';

/** What the attempt log keeps of one request's answer (API guide 9), whatever the channel. */
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
  // Health (queue/health.ts): per integration, its last success in this set and the first failure
  // after it, or (no success) its first failure.
  const health = new Map<string, { successAt: string | null; failAfter: string | null }>();
  for (const r of [...results].sort((a, b) => +a.at - +b.at)) {
    const h = health.get(r.integrationId) ?? { successAt: null, failAfter: null };
    if (r.success) health.set(r.integrationId, { successAt: r.at.toISOString(), failAfter: null });
    else health.set(r.integrationId, { ...h, failAfter: h.failAfter ?? r.at.toISOString() });
  }
  for (const r of results) {
    const at = r.at.toISOString();
    attempts.push({
      integration_id: r.integrationId,
      request_id: r.requestId,
      claim_id: r.claimId,
      log_ids: r.events.map((e) => e.event.pos),
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
        log_id: e.event.pos,
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
       INSERT INTO delivery_attempts (integration_id, request_id, claim_id, log_ids, attempt, when_attempted, success, http_status,
                                      response_time_ms, receipt_id, topic, partition, partitions, qos, error, response_headers,
                                      response_body, response_body_bytes, truncated, latency_ms)
       SELECT integration_id, request_id, claim_id, log_ids, attempt, when_attempted, success, http_status, response_time_ms,
              receipt_id, topic, partition, partitions, qos, error, response_headers, decode(response_body, 'base64'), response_body_bytes,
              truncated, latency_ms
         FROM json_to_recordset($1::json) AS r(integration_id uuid, request_id uuid, claim_id uuid, log_ids int8[], attempt int,
              when_attempted timestamptz, success bool, http_status int, response_time_ms int, receipt_id text, topic text,
              partition int, partitions int[], qos int, error text, response_headers jsonb, response_body text, response_body_bytes int,
              truncated bool, latency_ms int)
     ), b AS (
       INSERT INTO delivery_batches (id, integration_id, object_type, body)
       SELECT id, integration_id, object_type, body
         FROM json_to_recordset($2::json) AS r(id uuid, integration_id uuid, object_type text, body text)
       ON CONFLICT DO NOTHING
     ), f AS (
       INSERT INTO deliveries (integration_id, log_id, event_id, object_type, object_id, status, attempts, next_attempt_at,
                               first_attempt_at, last_attempt_at, batch_id, when_created, completed_at, last_error)
       SELECT r.integration_id, o.id, o.event_id, o.object_type, o.object_id, r.status, r.attempts, COALESCE(r.next_at, now()),
              r.first_at, r.at, r.batch_id, o.when_created, CASE WHEN r.status <> 'PENDING' THEN now() END, r.error
         FROM json_to_recordset($3::json) AS r(integration_id uuid, log_id int8, status text, attempts int, next_at timestamptz,
              first_at timestamptz, at timestamptz, batch_id uuid, error text)
         JOIN event_log o ON o.id = r.log_id
       ON CONFLICT DO NOTHING
     ), u AS (
       UPDATE deliveries d SET status = r.status, attempts = r.attempts, next_attempt_at = COALESCE(r.next_at, d.next_attempt_at),
              lease_until = NULL, first_attempt_at = COALESCE(d.first_attempt_at, r.first_at), last_attempt_at = r.at,
              receipt_id = COALESCE(r.receipt, d.receipt_id), batch_id = COALESCE(r.batch_id, d.batch_id), last_error = r.error,
              completed_at = CASE WHEN r.status IN ('SUCCEEDED', 'FAILED') THEN now() END
         FROM json_to_recordset($4::json) AS r(integration_id uuid, log_id int8, status text, attempts int, next_at timestamptz,
              first_at timestamptz, at timestamptz, batch_id uuid, error text, receipt text)
        WHERE d.integration_id = r.integration_id AND d.log_id = r.log_id AND d.status = 'PENDING'
     ), done AS (
       SELECT * FROM json_to_recordset($5::json) AS r(id uuid, n int, generation int)
     ), cd AS (
       -- A claim goes with its last request; one taken over since (a newer generation) is the new worker's to count.
       DELETE FROM delivery_claims c USING done r WHERE c.id = r.id AND c.generation = r.generation AND c.requests <= r.n
     ), cu AS (
       UPDATE delivery_claims c SET requests = c.requests - r.n FROM done r
        WHERE c.id = r.id AND c.generation = r.generation AND c.requests > r.n
     )
     -- API guide 9: a 429 pauses the whole integration; its events stay queued. Health: a success
     -- ends a failing streak (or starts one with a later failure); failures start one or go on with it.
     -- A row whose pause and streak stay as they are is not written.
     UPDATE integration_state s
        SET paused_until = CASE WHEN r.seconds IS NULL THEN s.paused_until
                                ELSE GREATEST(COALESCE(s.paused_until, now()), now() + make_interval(secs => r.seconds)) END,
            failing_since = CASE WHEN r.success_at IS NOT NULL THEN r.fail_after ELSE COALESCE(s.failing_since, r.fail_after) END
       FROM json_to_recordset($6::json) AS r(id uuid, seconds float8, success_at timestamptz, fail_after timestamptz)
      WHERE s.integration_id = r.id
        AND (r.seconds IS NOT NULL
             OR (r.success_at IS NOT NULL AND s.failing_since IS DISTINCT FROM r.fail_after)
             OR (r.success_at IS NULL AND s.failing_since IS NULL))`,
    [
      JSON.stringify(attempts),
      JSON.stringify(batches),
      JSON.stringify(fresh),
      JSON.stringify(retry),
      JSON.stringify([...claims].map(([id, c]) => ({ id, n: c.n, generation: c.generation }))),
      JSON.stringify(
        [...health].map(([id, h]) => ({ id, seconds: pauses.get(id) ?? null, success_at: h.successAt, fail_after: h.failAfter })),
      ),
    ],
    'delivery_write_results',
  );
}
