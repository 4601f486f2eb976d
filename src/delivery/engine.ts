// The delivery engine (spec 6.4, API.md section 9). Work lives in the database: each process claims
// due deliveries with leases (FOR UPDATE SKIP LOCKED), sends them outside any transaction, and writes
// completions and attempt rows in batches. A crashed process's claims come back when their lease
// runs out. Woken by LISTEN/NOTIFY (and in-process events), with polling as the fallback.
//
// Per-integration limits hold across every process and instance because they are decided while the
// integration's state row is locked: maxConcurrentRequests counts the requests whose leases are live,
// maxItemsPerMinute is a token bucket kept in that row, and a 429 pauses the integration there.
import crypto from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import pg from 'pg';
import type { Db, Queryable } from '../db/db.js';
import { deliveryWakeups, NOTIFY_CHANNEL, type ObjectType } from '../outbox/outbox.js';
import type { AddressPolicy } from './address.js';
import { loadConfigFromRow, type IntegrationConfig } from './integrations.js';
import { closeAgents, injectEventId, sendWebhook, type SendResult } from './webhook.js';

export interface EngineSettings {
  leaseSeconds: number;
  pollMs: number;
  maxJobs: number; // requests in flight per process
  succeededRetentionDays: number;
  failedRetentionDays: number;
}

interface Claimed {
  id: string;
  attempts: number;
  first_attempt_at: Date | null;
  event_id: string;
  object_type: ObjectType;
  payload: Record<string, unknown>;
  batch_id: string | null;
}

interface Job {
  integration: IntegrationConfig;
  deliveries: Claimed[];
  batchId: string | null;
  body: string;
  objectType: ObjectType;
  webhookId: string;
}

interface Completion {
  job: Job;
  result: SendResult;
  at: Date;
}

const JITTER = 0.2;

/** Delay before attempt n+1 after n failed attempts: the schedule, its last step repeating, +-20%. */
export function retryDelaySeconds(schedule: number[], attemptsMade: number, random = Math.random): number {
  const base = schedule[Math.min(attemptsMade, schedule.length) - 1] ?? schedule[schedule.length - 1] ?? 60;
  return base * (1 - JITTER + 2 * JITTER * random());
}

export class DeliveryEngine {
  private running = false;
  private loop?: Promise<void>;
  private readonly jobs = new Set<Promise<void>>();
  private completions: Completion[] = [];
  private flushing?: Promise<void>;
  private wakeResolver?: () => void;
  private listener?: pg.Client;
  private readonly onWake = () => this.wake();
  private sweepTimer?: NodeJS.Timeout;
  readonly workerId = crypto.randomUUID();
  /** Requests this process has sent (for /metrics and tests). */
  requestsSent = 0;

  constructor(
    private readonly db: Db,
    private readonly secretsKey: Buffer,
    private readonly policy: AddressPolicy,
    private readonly s: EngineSettings,
    private readonly log: FastifyBaseLogger,
    private readonly databaseUrl?: string,
  ) {}

  start(): void {
    if (this.running) return;
    this.running = true;
    deliveryWakeups.on('wake', this.onWake);
    if (this.databaseUrl) void this.listen();
    this.loop = this.run();
    this.sweepTimer = setInterval(
      () => void this.sweep().catch((e) => this.log.warn({ err: e }, 'delivery retention sweep failed')),
      10 * 60_000,
    );
    this.sweepTimer.unref();
  }

  /** Stops claiming, lets requests in flight finish (bounded by their timeouts), writes their results. */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    clearInterval(this.sweepTimer);
    deliveryWakeups.off('wake', this.onWake);
    this.wake();
    await this.loop;
    await Promise.allSettled([...this.jobs]);
    await this.flush();
    await this.listener?.end().catch(() => {});
    closeAgents(this.policy);
  }

  wake(): void {
    const r = this.wakeResolver;
    this.wakeResolver = undefined;
    r?.();
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.wakeResolver = undefined;
        resolve();
      }, ms);
      this.wakeResolver = () => {
        clearTimeout(t);
        resolve();
      };
    });
  }

  /** LISTEN on PostgreSQL so any instance's commits wake this one; reconnects after failures. */
  private async listen(): Promise<void> {
    let backoff = 500;
    while (this.running) {
      const client = new pg.Client({ connectionString: this.databaseUrl });
      try {
        await client.connect();
        await client.query(`LISTEN ${NOTIFY_CHANNEL}`);
        this.listener = client;
        backoff = 500;
        client.on('notification', () => this.wake());
        await new Promise<void>((resolve) => {
          client.on('error', () => resolve());
          client.on('end', () => resolve());
        });
      } catch {
        /* the database is away: polling goes on; try again */
      } finally {
        this.listener = undefined;
        await client.end().catch(() => {});
      }
      if (this.running) await new Promise((r) => setTimeout(r, backoff));
      backoff = Math.min(backoff * 2, 10_000);
    }
  }

  private async run(): Promise<void> {
    let errorBackoff = 0;
    while (this.running) {
      try {
        const free = this.s.maxJobs - this.jobs.size;
        const started = free > 0 ? await this.claimAndStart(free) : 0;
        errorBackoff = 0;
        if (started === 0) await this.sleep(free > 0 ? this.s.pollMs : 50);
      } catch (e) {
        errorBackoff = Math.min(errorBackoff ? errorBackoff * 2 : 500, 10_000);
        this.log.warn({ err: e }, `delivery claim failed; retrying in ${errorBackoff} ms`);
        await this.sleep(errorBackoff);
      }
    }
  }

  /** Claims work for the integrations that have some due, and starts sending it. */
  private async claimAndStart(free: number): Promise<number> {
    const { rows: due } = await this.db.query<{ id: string }>(
      `SELECT i.id FROM integrations i LEFT JOIN integration_state s ON s.integration_id = i.id
        WHERE i.enabled AND (s.paused_until IS NULL OR s.paused_until <= now())
          AND EXISTS (SELECT 1 FROM deliveries d WHERE d.integration_id = i.id AND d.status = 'PENDING'
                        AND d.next_attempt_at <= now() AND (d.lease_until IS NULL OR d.lease_until <= now()))`,
    );
    let started = 0;
    for (const { id } of shuffle(due)) {
      const budget = free - started;
      if (budget <= 0) break;
      const jobs = await this.db.tx((q) => this.claim(q, id, budget));
      for (const job of jobs) this.startJob(job);
      started += jobs.length;
    }
    return started;
  }

  /**
   * Claims up to `budget` requests' worth of deliveries of one integration. The integration's state
   * row is locked for the claim, so every process sees the same in-flight count and token bucket.
   */
  private async claim(q: Queryable, integrationId: string, budget: number): Promise<Job[]> {
    const { rows: ir } = await q.query(
      `SELECT id, name, channel, enabled, owner_ids::text[] AS owner_ids, object_types, destination, destinations, retry, settings, secrets,
              when_created, when_updated FROM integrations WHERE id = $1 AND enabled`,
      [integrationId],
    );
    if (!ir[0]) return [];
    const cfg = loadConfigFromRow(ir[0] as Parameters<typeof loadConfigFromRow>[0], this.secretsKey);
    const w = cfg.webhook;
    const perMinute = w.maxItemsPerMinute;
    // Bucket: capacity of one second's worth (at least one request's items), refilled so that
    // capacity plus a minute's refill never exceeds maxItemsPerMinute in any 60 s window.
    const capacity = perMinute === null ? 0 : Math.max(1, Math.min(perMinute, Math.ceil(perMinute / 60)));
    const rate = perMinute === null ? 0 : Math.max(perMinute - capacity, 1) / 60;
    await q.query('INSERT INTO integration_state (integration_id, tokens) VALUES ($1, $2) ON CONFLICT DO NOTHING', [
      integrationId,
      capacity,
    ]);
    const { rows: st } = await q.query<{ paused: boolean; tokens: number; elapsed: number }>(
      `SELECT COALESCE(paused_until > now(), false) AS paused, tokens, extract(epoch FROM now() - refilled_at)::float8 AS elapsed
         FROM integration_state WHERE integration_id = $1 FOR UPDATE`,
      [integrationId],
    );
    const state = st[0]!;
    if (state.paused) return [];
    const { rows: fl } = await q.query<{ n: number }>(
      `SELECT count(DISTINCT COALESCE(batch_id::text, id::text))::int AS n FROM deliveries
        WHERE integration_id = $1 AND status = 'PENDING' AND lease_until IS NOT NULL AND lease_until > now()`,
      [integrationId],
    );
    let requests = Math.min(budget, w.maxConcurrentRequests - fl[0]!.n);
    if (requests <= 0) return [];
    let tokens = perMinute === null ? Infinity : Math.min(capacity, state.tokens + rate * state.elapsed);
    const lease = Math.max(this.s.leaseSeconds, w.timeoutMs / 1000 + 5);
    const jobs: Job[] = [];
    // Leases due deliveries (a whole retry batch: every pending member, whatever its own due time).
    // `= ANY(ARRAY(...))` makes the update fetch the chosen rows by primary key; `IN (...)` lets the
    // planner hash-join against a scan of the whole table, which grows with the backlog.
    const claimSql = (extra: string, limit: string, due = true) => `
      WITH c AS (
        UPDATE deliveries SET lease_until = now() + make_interval(secs => $2)
         WHERE id = ANY(ARRAY(SELECT id FROM deliveries
                       WHERE integration_id = $1 AND status = 'PENDING' ${due ? 'AND next_attempt_at <= now()' : ''}
                         AND (lease_until IS NULL OR lease_until <= now()) ${extra}
                       ORDER BY next_attempt_at, id LIMIT ${limit} FOR UPDATE SKIP LOCKED))
        RETURNING id, attempts, first_attempt_at, event_id, object_type, outbox_id, batch_id)
      SELECT c.id, c.attempts, c.first_attempt_at, c.event_id, c.object_type, c.batch_id, o.payload
        FROM c JOIN outbox o ON o.id = c.outbox_id ORDER BY c.id`;

    if (w.mode === 'single') {
      const n = Math.min(requests, Math.floor(tokens));
      if (n <= 0) return this.saveTokens(q, integrationId, tokens, perMinute, jobs);
      const { rows } = await q.query<Claimed>(claimSql('AND batch_id IS NULL', '$3'), [integrationId, lease, n]);
      for (const d of rows) {
        const payload = w.injectEventId ? injectEventId(d.payload, d.event_id, w.injectEventIdPath) : d.payload;
        jobs.push({
          integration: cfg,
          deliveries: [d],
          batchId: null,
          body: JSON.stringify(payload),
          objectType: d.object_type,
          webhookId: d.event_id,
        });
      }
      tokens -= rows.length;
      return this.saveTokens(q, integrationId, tokens, perMinute, jobs);
    }

    // Batch mode. First the batches that failed before: retried whole, same body, same webhook-id.
    // A batch is sent only when every pending member could be leased, so no part of it goes twice.
    const { rows: retryBatches } = await q.query<{ batch_id: string; n: number }>(
      `SELECT batch_id, count(*)::int AS n FROM deliveries
        WHERE integration_id = $1 AND status = 'PENDING' AND batch_id IS NOT NULL
        GROUP BY batch_id
       HAVING min(next_attempt_at) <= now() AND bool_and(lease_until IS NULL OR lease_until <= now())
        ORDER BY min(next_attempt_at) LIMIT $2`,
      [integrationId, requests],
    );
    for (const b of retryBatches) {
      if (b.n > tokens) break;
      const { rows } = await q.query<Claimed>(claimSql('AND batch_id = $3', '1000', false), [integrationId, lease, b.batch_id]);
      const { rows: body } = await q.query<{ body: string; object_type: ObjectType }>(
        'SELECT body, object_type FROM delivery_batches WHERE id = $1',
        [b.batch_id],
      );
      if (rows.length !== b.n || !body[0]) {
        // Some member is busy elsewhere (or the batch changed): leave the whole batch for later.
        if (rows.length) await q.query('UPDATE deliveries SET lease_until = NULL WHERE id = ANY($1::int8[])', [rows.map((r) => r.id)]);
        continue;
      }
      jobs.push({
        integration: cfg,
        deliveries: rows,
        batchId: b.batch_id,
        body: body[0].body,
        objectType: body[0].object_type,
        webhookId: b.batch_id,
      });
      tokens -= rows.length;
      requests--;
    }
    // Then new batches: one object type each, at most batchSize items.
    const want = Math.min(requests * w.batchSize, Math.floor(tokens));
    if (requests > 0 && want > 0) {
      const { rows } = await q.query<Claimed>(claimSql('AND batch_id IS NULL', '$3'), [integrationId, lease, want]);
      const byType = new Map<ObjectType, Claimed[]>();
      for (const d of rows) byType.set(d.object_type, [...(byType.get(d.object_type) ?? []), d]);
      const chunks: Claimed[][] = [];
      for (const list of byType.values()) for (let i = 0; i < list.length; i += w.batchSize) chunks.push(list.slice(i, i + w.batchSize));
      const keep = chunks.slice(0, requests);
      // Over the request budget (several types): hand the rest back at once.
      const back = chunks
        .slice(requests)
        .flat()
        .map((d) => d.id);
      if (back.length) await q.query('UPDATE deliveries SET lease_until = NULL WHERE id = ANY($1::int8[])', [back]);
      const batchRows: { id: string; type: ObjectType; body: string; ids: string[] }[] = [];
      for (const chunk of keep) {
        const id = crypto.randomUUID();
        const body = JSON.stringify(
          chunk.map((d) => (w.injectEventId ? injectEventId(d.payload, d.event_id, w.injectEventIdPath) : d.payload)),
        );
        batchRows.push({ id, type: chunk[0]!.object_type, body, ids: chunk.map((d) => d.id) });
        jobs.push({ integration: cfg, deliveries: chunk, batchId: id, body, objectType: chunk[0]!.object_type, webhookId: id });
        tokens -= chunk.length;
      }
      if (batchRows.length) {
        await q.query(
          `INSERT INTO delivery_batches (id, integration_id, object_type, body) SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[])`,
          [batchRows.map((b) => b.id), batchRows.map(() => integrationId), batchRows.map((b) => b.type), batchRows.map((b) => b.body)],
        );
        await q.query(`UPDATE deliveries d SET batch_id = u.b FROM unnest($1::int8[], $2::uuid[]) AS u(id, b) WHERE d.id = u.id`, [
          batchRows.flatMap((b) => b.ids),
          batchRows.flatMap((b) => b.ids.map(() => b.id)),
        ]);
      }
    }
    return this.saveTokens(q, integrationId, tokens, perMinute, jobs);
  }

  private async saveTokens(q: Queryable, integrationId: string, tokens: number, perMinute: number | null, jobs: Job[]): Promise<Job[]> {
    if (perMinute !== null) {
      await q.query('UPDATE integration_state SET tokens = $2, refilled_at = now() WHERE integration_id = $1', [integrationId, tokens]);
    }
    return jobs;
  }

  private startJob(job: Job): void {
    this.requestsSent++;
    const url = job.integration.destinations[job.objectType] ?? job.integration.destination;
    const p = sendWebhook(job.integration, { url, id: job.webhookId, objectType: job.objectType, body: job.body }, this.policy)
      .then((result) => {
        this.completions.push({ job, result, at: new Date() });
        this.scheduleFlush();
      })
      .catch((e) => this.log.error({ err: e }, 'webhook send crashed'))
      .finally(() => {
        this.jobs.delete(p);
        this.wake();
      });
    this.jobs.add(p);
  }

  private scheduleFlush(): void {
    if (this.flushing) return;
    this.flushing = (async () => {
      await new Promise((r) => setTimeout(r, 3)); // gather completions that land together
      while (this.completions.length) {
        await this.flush();
        this.wake(); // written results free their integration's request slots: claim again
      }
    })().finally(() => {
      this.flushing = undefined;
      if (this.completions.length) this.scheduleFlush();
    });
  }

  /**
   * Writes the completions gathered so far: the deliveries' new states, their attempt rows, and
   * any 429 pause, in one transaction. If the database is away they are kept and written later;
   * if the process dies first, the leases run out and the deliveries are sent again.
   */
  private async flush(): Promise<void> {
    const batch = this.completions.splice(0, 500);
    if (!batch.length) return;
    const rows: unknown[][] = [];
    const pauses = new Map<string, number>();
    for (const { job, result, at } of batch) {
      const cfg = job.integration;
      // One retry time per request, so the members of a batch stay together.
      const jitter = Math.random();
      if (result.outcome === 'pause') pauses.set(cfg.id, Math.max(pauses.get(cfg.id) ?? 0, result.retryAfterSeconds ?? 60));
      const ok = result.outcome === 'success';
      for (const d of job.deliveries) {
        const made = d.attempts + (result.outcome === 'pause' ? 0 : 1);
        const first = d.first_attempt_at ?? at;
        let status = 'PENDING';
        let next: Date | null = null;
        if (result.outcome === 'success') status = 'SUCCEEDED';
        else if (result.outcome === 'fail') status = 'FAILED';
        else if (result.outcome === 'pause') next = new Date(at.getTime() + (result.retryAfterSeconds ?? 60) * 1000);
        else {
          const deadline = first.getTime() + cfg.retry.deadlineHours * 3600_000;
          next = new Date(at.getTime() + retryDelaySeconds(cfg.retry.scheduleSeconds, made, () => jitter) * 1000);
          if (made >= cfg.retry.maxAttempts || next.getTime() > deadline) {
            status = 'FAILED';
            next = null;
          }
        }
        rows.push([
          d.id,
          status,
          made,
          next?.toISOString() ?? null,
          first.toISOString(),
          at.toISOString(),
          result.receiptId,
          made + (result.outcome === 'pause' ? 1 : 0),
          result.outcome === 'success',
          result.httpStatus,
          result.responseTimeMs,
          result.error,
          // spec 6.4: a success keeps status, time and receipt; failures keep the whole response.
          ok || !result.responseHeaders ? null : JSON.stringify(result.responseHeaders),
          ok ? null : result.responseBody,
          ok ? null : result.responseBodyBytes,
          result.truncated,
          job.batchId,
          cfg.id,
        ]);
      }
    }
    const col = (i: number) => rows.map((r) => r[i]);
    try {
      await this.db.tx(async (q) => {
        await q.query(
          `WITH r AS (
             SELECT * FROM unnest($1::int8[], $2::text[], $3::int[], $4::timestamptz[], $5::timestamptz[], $6::timestamptz[], $7::text[],
                                  $8::int[], $9::bool[], $10::int[], $11::int[], $12::text[], $13::jsonb[], $14::text[], $15::int[],
                                  $16::bool[], $17::uuid[], $18::uuid[])
               AS r(id, status, attempts, next_at, first_at, at, receipt, attempt_no, success, http_status, ms, error,
                    headers, body, bytes, truncated, batch_id, integration_id)
           ), u AS (
             UPDATE deliveries d SET status = r.status, attempts = r.attempts, next_attempt_at = COALESCE(r.next_at, d.next_attempt_at),
                    lease_until = NULL, first_attempt_at = COALESCE(d.first_attempt_at, r.first_at), last_attempt_at = r.at,
                    receipt_id = COALESCE(r.receipt, d.receipt_id),
                    completed_at = CASE WHEN r.status IN ('SUCCEEDED', 'FAILED') THEN now() END
               FROM r WHERE d.id = r.id AND d.status = 'PENDING'
             RETURNING d.id)
           INSERT INTO delivery_attempts (delivery_id, integration_id, attempt, when_attempted, success, http_status, response_time_ms,
                                          receipt_id, error, response_headers, response_body, response_body_bytes, truncated, batch_id)
           SELECT r.id, r.integration_id, r.attempt_no, r.at, r.success, r.http_status, r.ms, r.receipt, r.error, r.headers, r.body,
                  r.bytes, r.truncated, r.batch_id
             FROM r WHERE EXISTS (SELECT 1 FROM deliveries d WHERE d.id = r.id)`,
          [
            col(0),
            col(1),
            col(2),
            col(3),
            col(4),
            col(5),
            col(6),
            col(7),
            col(8),
            col(9),
            col(10),
            col(11),
            col(12),
            col(13),
            col(14),
            col(15),
            col(16),
            col(17),
          ],
        );
        for (const [id, seconds] of pauses) {
          // spec 6.4: a 429 pauses the whole integration; the event stays queued.
          await q.query(
            `UPDATE integration_state SET paused_until = GREATEST(COALESCE(paused_until, now()), now() + make_interval(secs => $2)) WHERE integration_id = $1`,
            [id, seconds],
          );
        }
      });
    } catch (e) {
      this.log.warn({ err: e }, 'writing delivery results failed; keeping them to retry');
      this.completions.unshift(...batch);
      await new Promise((r) => setTimeout(r, 1000));
    }
  }

  /** Retention (API.md 9): succeeded deliveries go after 7 days, failed and cancelled after 30, in bulk. */
  async sweep(): Promise<number> {
    let removed = 0;
    for (const [status, days] of [
      ['SUCCEEDED', this.s.succeededRetentionDays],
      ['FAILED', this.s.failedRetentionDays],
      ['CANCELLED', this.s.failedRetentionDays],
    ] as const) {
      for (;;) {
        const { rowCount } = await this.db.query(
          `DELETE FROM deliveries WHERE id = ANY(ARRAY(SELECT id FROM deliveries WHERE status = $1 AND completed_at < now() - make_interval(days => $2) LIMIT 10000))`,
          [status, days],
        );
        removed += rowCount;
        if (rowCount < 10000) break;
      }
    }
    await this.db.query(
      `DELETE FROM delivery_batches b WHERE when_created < now() - make_interval(days => $1)
         AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.batch_id = b.id)`,
      [Math.min(this.s.succeededRetentionDays, this.s.failedRetentionDays)],
    );
    return removed;
  }
}

function shuffle<T>(a: T[]): T[] {
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [a[i], a[j]] = [a[j]!, a[i]!];
  }
  return a;
}
