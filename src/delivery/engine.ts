// The delivery engine (API guide 9): claims work from the queue (src/delivery/queue/), its first
// attempts through the event log's source (src/eventlog/source.ts: the PostgreSQL event log or the
// Kafka topic, chosen where the engine is built), hands messages to channels (src/delivery/channels),
// and turns what each send did into the next state of its events. It knows no channel, no mode of
// the event log and no SQL.
//
// Scheduling. Each process has `maxJobs` request slots. Every integration with work gets a fair
// share of them (a hanging endpoint can hold its share, never the others'), and within an
// integration the slots are split between first attempts (the event log) and the retry queue, so neither
// starves the other. maxConcurrentRequests, maxItemsPerMinute and 429 pauses are decided under the
// integration's lock (an advisory lock, eventlog/log.ts lockIntegration), so they hold across every
// process and instance.
//
// Claims. A claim of the event log takes up to sixteen requests per slot at once and sends them as its
// slots free, under a lease it renews; a claim with messages waiting for a slot gets the integration's
// free requests before newer events do; a stopping process hands its claims back.
//
// Waking. A commit that stores events wakes this process at once (and other instances through
// LISTEN/NOTIFY); written results wake it to use the slots they free; events held above the
// horizon by a running transaction are looked at again within milliseconds; polling is the fallback.
import crypto from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { Db, Queryable } from '../db/db.js';
import { isDatabaseUnavailable } from '../http/errors.js';
import type { AttemptRecord, Channel, ChannelLimits, OutMessage } from './channels/channel.js';
import type { IntegrationConfig } from './integrations/model.js';
import { loadIntegration } from './integrations/store.js';
import { setAside } from '../ops/poison.js';
import { EVENT_LOG_CHANNEL, type LogEvent, type Position } from '../eventlog/log.js';
import * as queue from './queue/index.js';
import type { FirstAttemptSource, TakenEvents } from '../eventlog/source.js';
import { Waker } from '../eventlog/waker.js';

export interface EngineSettings {
  leaseSeconds: number;
  pollMs: number;
  maxJobs: number; // requests in flight per process
  succeededRetentionDays: number;
  failedRetentionDays: number;
}

/**
 * Requests a claim takes per slot: one claim of the event log feeds each of its slots several times, so
 * the claim's cost (a transaction) is shared by that many requests.
 */
const CLAIM_DEPTH = 16;
/** Events one claim takes at most, whatever the batch size: bounds the memory a claim holds. */
const MAX_CLAIM_EVENTS = 5000;
const FLUSH_GATHER_MS = 5;

/** A claim of the event log this process is sending: at most `slots` of its messages at a time. */
interface LocalClaim {
  id: string;
  generation: number;
  integrationId: string;
  leaseSeconds: number;
  slots: number;
  queue: Job[];
  inFlight: number;
  /**
   * Its requests that ended and whose results wait for the next write. A slot is free again when
   * its request ends, but no new request starts while these and those in flight reach twice the
   * slots: a process that dies has at most 2 x slots requests' events unrecorded (sent again).
   */
  unwritten: number;
  renewedAt: number;
  abandoned: boolean;
}

/** One message on its way, and where its events came from. */
interface Job {
  cfg: IntegrationConfig;
  channel: Channel;
  msg: OutMessage;
  /** The event log claim it belongs to (a first attempt), or null for the retry queue. */
  claim: LocalClaim | null;
  /** The retry queue's state of each event (first attempts: none). */
  prior: Map<string, { attempts: number; attemptBase: number; firstAttemptAt: Date | null }>;
}

/**
 * Slots a claim holds: its slots, or fewer once fewer messages are left than that, and never fewer
 * than its requests in flight (after its share shrank, those still run).
 */
const held = (c: LocalClaim) => Math.max(Math.min(c.slots, c.queue.length + c.inFlight), c.inFlight);

const JITTER = 0.2;

/** Delay before attempt n+1 after n failed attempts: the schedule, its last step repeating, +-20%. */
export function retryDelaySeconds(schedule: number[], attemptsMade: number, random = Math.random): number {
  const base = schedule[Math.min(attemptsMade, schedule.length) - 1] ?? schedule[schedule.length - 1] ?? 60;
  return base * (1 - JITTER + 2 * JITTER * random());
}

/** What a send means for each event it carried (API guide 9): the engine's one retry policy. */
export function outcomeFor(job: Job, r: AttemptRecord, at: Date, random = Math.random): queue.RequestOutcome {
  const { cfg, msg } = job;
  const jitter = random(); // one retry time per request, so a batch's events stay together
  const pause = r.outcome === 'pause';
  let attemptNo = 1;
  const events = msg.events.map((event) => {
    const prior = job.prior.get(event.pos);
    const made = (prior?.attempts ?? 0) + (pause ? 0 : 1);
    attemptNo = Math.max(attemptNo, made + (pause ? 1 : 0));
    // The budget and the schedule count from the last redelivery; the numbering does not.
    const madeSince = made - (prior?.attemptBase ?? 0);
    const firstAttemptAt = prior?.firstAttemptAt ?? at;
    let status: 'PENDING' | 'SUCCEEDED' | 'FAILED' = 'PENDING';
    let nextAttemptAt: Date | null = null;
    if (r.outcome === 'success') status = 'SUCCEEDED';
    else if (r.outcome === 'fail') status = 'FAILED';
    else if (pause) nextAttemptAt = new Date(at.getTime() + (r.retryAfterSeconds ?? 60) * 1000);
    else {
      const deadline = firstAttemptAt.getTime() + cfg.retry.deadlineHours * 3600_000;
      nextAttemptAt = new Date(at.getTime() + retryDelaySeconds(cfg.retry.scheduleSeconds, madeSince, () => jitter) * 1000);
      if (madeSince >= cfg.retry.maxAttempts || nextAttemptAt.getTime() > deadline) {
        status = 'FAILED';
        nextAttemptAt = null;
      }
    }
    return { event, status, attempts: made, nextAttemptAt, firstAttemptAt };
  });
  const ok = r.outcome === 'success';
  const oldest = Math.min(...msg.events.map((e) => e.whenCreated.getTime()));
  return {
    integrationId: cfg.id,
    requestId: msg.requestId,
    claimId: job.claim?.id ?? null,
    claimGeneration: job.claim?.generation ?? 0,
    attempt: attemptNo,
    at,
    success: ok,
    httpStatus: r.httpStatus,
    responseTimeMs: r.responseTimeMs,
    receiptId: r.receiptId,
    topic: r.topic,
    partition: r.partition,
    partitions: r.partitions ?? null,
    qos: r.qos,
    error: r.error,
    // API guide 9: a success keeps status, time and receipt; a failure keeps the whole response.
    responseHeaders: ok ? null : r.responseHeaders,
    responseBody: ok ? null : r.responseBody,
    responseBodyBytes: ok ? null : r.responseBodyBytes,
    truncated: r.truncated,
    latencyMs: Math.max(0, at.getTime() - oldest),
    pauseSeconds: pause ? (r.retryAfterSeconds ?? 60) : null,
    batchBody: job.channel.limits(cfg).keepBatches ? { objectType: msg.objectType, body: msg.body } : null,
    events,
  };
}

export class DeliveryEngine {
  private running = false;
  private loop?: Promise<void>;
  private readonly jobs = new Set<Promise<void>>();
  /** Log claims this process is sending. */
  private readonly claims = new Map<string, LocalClaim>();
  /** Retry requests in flight in this process, per integration. */
  private readonly retrying = new Map<string, number>();
  /** Integrations paused by a 429 (epoch ms): their claims send nothing until then. */
  private readonly paused = new Map<string, number>();
  /** Integrations with a single free request alternate between the event log and the retry queue. */
  private readonly retryTurn = new Set<string>();
  private readonly configs = new Map<string, { whenUpdated: number; cfg: IntegrationConfig }>();
  private completions: queue.RequestOutcome[] = [];
  /** The claim of each completion that came from one (LocalClaim.unwritten). */
  private completionClaim = new Map<queue.RequestOutcome, LocalClaim>();
  private flushing?: Promise<void>;
  private readonly waker = new Waker();
  private unlisten?: () => void;
  private sweepTimer?: NodeJS.Timeout;
  private renewTimer?: NodeJS.Timeout;
  private renewing = false;
  /** Requests this process has sent (for /metrics and tests). */
  requestsSent = 0;
  /** Results the database refused even without their response (for /metrics): see flush(). */
  resultsParked = 0;

  /** The Kafka event log's counters in this process (zeros in the PostgreSQL mode). */
  get eventLog(): { published: number; consumed: number; parked: number } {
    return this.source.counts();
  }

  constructor(
    private readonly db: Db,
    private readonly secretsKey: Buffer,
    private readonly channels: ReadonlyMap<string, Channel>,
    private readonly s: EngineSettings,
    private readonly log: FastifyBaseLogger,
    /** Where first attempts come from: the event log in PostgreSQL, or on Kafka (EVENT_LOG=kafka). */
    private readonly source: FirstAttemptSource,
  ) {}

  /** A channel of this engine by name (tests drive the e-mail channel's clock through it). */
  channel(name: string): Channel | undefined {
    return this.channels.get(name);
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.source.start(() => this.wake());
    // Any instance's commit that appended events (LISTEN/NOTIFY), and this process's at once; with
    // the event log on Kafka the source wakes the engine, and this hears of retries and redeliveries.
    this.unlisten = this.db.listen(EVENT_LOG_CHANNEL, () => this.wake());
    this.loop = this.run();
    this.sweepTimer = setInterval(() => void this.sweep().catch((e) => this.log.warn({ err: e }, 'delivery sweep failed')), 60_000);
    this.sweepTimer.unref();
    this.renewTimer = setInterval(() => void this.renew(), 500);
    this.renewTimer.unref();
  }

  /** Slots held per integration in this process: its log claims' and its retry requests'. */
  private heldBy(): Map<string, number> {
    const m = new Map(this.retrying);
    for (const c of this.claims.values()) m.set(c.integrationId, (m.get(c.integrationId) ?? 0) + held(c));
    return m;
  }

  /** Holds an integration's claims until `until` (a 429 here or on another instance), then resumes them. */
  private pause(integrationId: string, until: number): void {
    if ((this.paused.get(integrationId) ?? 0) >= until) return;
    this.paused.set(integrationId, until);
    setTimeout(
      () => {
        if ((this.paused.get(integrationId) ?? 0) > Date.now()) return;
        this.paused.delete(integrationId);
        for (const c of this.claims.values()) if (c.integrationId === integrationId) this.pump(c);
      },
      until - Date.now() + 5,
    ).unref();
  }

  /**
   * Every half second: learns of 429 pauses other instances saw for the integrations whose claims
   * this one sends, and renews those claims' leases (a third of the lease ahead), dropping lost ones.
   */
  private async renew(): Promise<void> {
    if (this.renewing || !this.claims.size) return;
    const now = Date.now();
    const due = [...this.claims.values()].filter((c) => now - c.renewedAt > (c.leaseSeconds * 1000) / 3);
    this.renewing = true;
    try {
      const ids = [...new Set([...this.claims.values()].filter((c) => c.queue.length).map((c) => c.integrationId))];
      for (const [id, until] of await queue.pausesOf(this.db, ids)) this.pause(id, until.getTime());
      if (!due.length) return;
      const lost = await queue.renewClaims(this.db, due);
      for (const c of due) c.renewedAt = now;
      for (const id of lost) {
        const c = this.claims.get(id);
        if (!c) continue;
        // Taken over (this process stalled past its lease) or ended by a delete: the rest is not ours.
        c.abandoned = true;
        c.queue.length = 0;
        if (c.inFlight === 0) this.claims.delete(id);
      }
    } catch (e) {
      this.log.warn({ err: e }, 'renewing delivery claims failed');
    } finally {
      this.renewing = false;
    }
  }

  /** Stops claiming, lets requests in flight finish (bounded by their timeouts), writes their results. */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    clearInterval(this.sweepTimer);
    // What is queued and not yet sent is handed back below: another worker takes the claims over.
    const handBack = [...this.claims.values()].filter((c) => c.queue.length > 0);
    for (const c of handBack) c.queue.length = 0;
    this.unlisten?.();
    this.wake();
    await this.loop;
    await Promise.allSettled([...this.jobs]);
    while (this.completions.length) {
      const before = this.completions.length;
      await this.flush();
      if (this.completions.length >= before) break; // the database is away: the leases bring them back
    }
    clearInterval(this.renewTimer);
    // After the results are written, so the taker sends only what has no attempt. If the database
    // is away, the leases end by themselves.
    await queue.releaseClaims(this.db, handBack).catch(() => {});
    // Offsets are committed for what the claims took: the rest goes to the partition's next owner.
    await this.source.stop().catch((e) => this.log.warn({ err: e }, 'stopping the event log consumer failed'));
    await Promise.allSettled([...this.channels.values()].map((c) => c.close()));
  }

  wake(): void {
    this.waker.wake();
  }

  private async run(): Promise<void> {
    let errorBackoff = 0;
    let waitBackoff = 0;
    while (this.running) {
      try {
        this.waker.clear();
        const { busy, waiting } = await this.claimRound();
        errorBackoff = 0;
        // Events held above the horizon by a running transaction are readable the moment it ends
        // (its commit may be another instance's, or not wake us): look again within milliseconds.
        waitBackoff = waiting && !busy ? Math.min(waitBackoff ? waitBackoff * 2 : 1, 8) : 0;
        if (!busy) await this.waker.sleep(waitBackoff || this.s.pollMs);
      } catch (e) {
        errorBackoff = Math.min(errorBackoff ? errorBackoff * 2 : 500, 10_000);
        this.log.warn({ err: e }, `delivery claim failed; retrying in ${errorBackoff} ms`);
        await this.waker.sleep(errorBackoff);
      }
    }
  }

  /**
   * One round over the integrations with work: each may claim up to its share of this process's
   * free slots. True when something was claimed or the position in the event log moved (look again at once).
   */
  private async claimRound(): Promise<{ busy: boolean; waiting: boolean }> {
    const { due, waiting } = await queue.dueIntegrations(this.db, this.source.readsPositions);
    const seen = new Set(due.map((d) => d.id));
    for (const d of this.source.due()) if (!seen.has(d.id)) due.push(d);
    // An integration whose claims here have messages waiting for a slot has work, new events or not.
    for (const c of this.claims.values()) {
      const known = this.configs.get(c.integrationId);
      if (c.queue.length && !c.abandoned && known && !seen.has(c.integrationId)) {
        seen.add(c.integrationId);
        due.push({ id: c.integrationId, whenUpdated: new Date(known.whenUpdated) });
      }
    }
    if (!due.length) return { busy: false, waiting };
    const heldBy = this.heldBy();
    const active = new Set([...due.map((d) => d.id), ...[...heldBy].filter(([, n]) => n > 0).map(([id]) => id)]);
    // Fair shares of the process's slots, keeping an eighth free for an integration that has none
    // yet: a newcomer starts at once, and the shares shrink to make room for it as requests end.
    const reserve = Math.max(1, Math.floor(this.s.maxJobs / 8));
    const share = Math.max(1, Math.floor((this.s.maxJobs - reserve) / active.size));
    this.rebalance(share);
    let used = 0;
    for (const n of this.heldBy().values()) used += n;
    let left = this.s.maxJobs - used;
    if (left <= 0) return { busy: false, waiting };
    let busy = false;
    for (const d of shuffle(due)) {
      const budget = Math.min(left, share - (heldBy.get(d.id) ?? 0));
      if (budget <= 0) continue;
      const cfg = await this.config(d.id, d.whenUpdated);
      const channel = cfg && this.channels.get(cfg.channel);
      if (!cfg || !channel) continue;
      const taken: TakenEvents[] = [];
      let result: Awaited<ReturnType<DeliveryEngine['claim']>>;
      try {
        result = await this.db.tx((q) => this.claim(q, cfg, channel, budget, taken));
      } catch (e) {
        for (const t of taken) this.source.settle(t, false);
        throw e;
      }
      for (const t of taken) this.source.settle(t, true);
      const { claims, retries, moved, grown } = result;
      for (const [c, add] of grown) {
        c.slots += add;
        left -= add;
        this.pump(c);
      }
      for (const c of claims) {
        this.claims.set(c.id, c);
        this.pump(c);
        left -= c.slots;
      }
      for (const job of retries) this.startJob(job);
      left -= retries.length;
      busy ||= claims.length > 0 || retries.length > 0 || moved || grown.size > 0;
      if (left <= 0) break;
    }
    return { busy, waiting };
  }

  /** Shrinks this process's claims of any integration over its share (its newest claims first). */
  private rebalance(share: number): void {
    const byIntegration = new Map<string, LocalClaim[]>();
    for (const c of this.claims.values()) byIntegration.set(c.integrationId, [...(byIntegration.get(c.integrationId) ?? []), c]);
    for (const [id, claims] of byIntegration) {
      let over = claims.reduce((n, c) => n + Math.min(c.slots, c.queue.length + c.inFlight), 0) + (this.retrying.get(id) ?? 0) - share;
      for (const c of claims.reverse()) {
        if (over <= 0) break;
        const cut = Math.min(over, c.slots - 1);
        c.slots -= cut;
        over -= cut;
      }
    }
  }

  private async config(id: string, whenUpdated: Date): Promise<IntegrationConfig | null> {
    const c = this.configs.get(id);
    if (c && c.whenUpdated === whenUpdated.getTime()) return c.cfg;
    const cfg = await loadIntegration(this.db, id, this.secretsKey);
    if (cfg) this.configs.set(id, { whenUpdated: whenUpdated.getTime(), cfg });
    return cfg;
  }

  /**
   * Claims up to `budget` requests of one integration under its lock (lockIntegration): first any claim a
   * dead worker left, then first attempts from the event log and the retry queue side by side.
   */
  private async claim(
    q: Queryable,
    cfg: IntegrationConfig,
    channel: Channel,
    budget: number,
    taken: TakenEvents[],
  ): Promise<{ claims: LocalClaim[]; retries: Job[]; moved: boolean; grown: Map<LocalClaim, number> }> {
    const lim: ChannelLimits = channel.limits(cfg);
    const grown = new Map<LocalClaim, number>();
    const perMinute = lim.maxItemsPerMinute;
    // Bucket: capacity of one second's worth (at least one request's items), refilled so that
    // capacity plus a minute's refill never exceeds maxItemsPerMinute in any 60 s window.
    const capacity = perMinute === null ? 0 : Math.max(1, Math.min(perMinute, Math.ceil(perMinute / 60)));
    const rate = perMinute === null ? 0 : Math.max(perMinute - capacity, 1) / 60;
    const st = await queue.lockState(q, cfg.id, capacity);
    if (!st || st.paused) return { claims: [], retries: [], moved: false, grown };
    let requests = Math.min(budget, lim.maxConcurrentRequests - st.inFlight);
    if (requests <= 0) return { claims: [], retries: [], moved: false, grown };
    let tokens = perMinute === null ? Infinity : Math.min(capacity, st.tokens + rate * st.elapsedSeconds);
    const lease = Math.max(this.s.leaseSeconds, lim.timeoutMs / 1000 + 5);
    const claims: LocalClaim[] = [];
    const retries: Job[] = [];
    const none = new Map();
    const local = (id: string, generation: number, msgs: OutMessage[], slots: number): LocalClaim => {
      const c: LocalClaim = {
        id,
        generation,
        integrationId: cfg.id,
        leaseSeconds: lease,
        slots,
        queue: [],
        inFlight: 0,
        unwritten: 0,
        renewedAt: Date.now(),
        abandoned: false,
      };
      c.queue = msgs.map((msg) => ({ cfg, channel, msg, claim: c, prior: none }));
      return c;
    };

    // This process's own claims of the integration whose messages outnumber their slots (taken when
    // few requests were free, after a stall) hold older events than the log has: free requests go to
    // them first, so that no event waits behind its claim's other messages while requests it could
    // use go to newer events. Their rows say so (the requests in flight stay counted for every
    // instance); the slots are theirs once this transaction commits. The rows change in the claim's
    // last statement (the claim writes nothing before it): a claim another worker took over
    // meanwhile does not grow, and its requests stay unused until the next round.
    const want = new Map<LocalClaim, number>();
    for (const c of this.claims.values()) {
      if (c.integrationId !== cfg.id || c.abandoned || !c.queue.length) continue;
      const add = Math.min(c.queue.length, requests);
      if (add <= 0) break;
      want.set(c, add);
      requests -= add;
    }

    // A claim whose worker died: the oldest work there is.
    if (st.expiredClaims > 0) {
      const t = await queue.takeExpiredClaim(q, cfg.id, lease);
      if (t?.events.length) {
        const msgs = channel.messages(cfg, t.events, t.id);
        const slots = Math.max(1, Math.min(requests, msgs.length));
        await queue.setClaimRequests(q, t.id, msgs.length, slots);
        claims.push(local(t.id, t.generation, msgs, slots));
        requests -= slots;
        tokens -= t.events.length;
      }
    }

    // The event log and the retry queue share the requests: retries get at most half while first
    // attempts wait (Hook0's reserve), and take turns when only one request is free.
    let retryShare = 0;
    if (st.dueRetries > 0 && requests > 0) {
      if (requests === 1) {
        retryShare = this.retryTurn.has(cfg.id) ? 1 : 0;
        if (retryShare) this.retryTurn.delete(cfg.id);
        else this.retryTurn.add(cfg.id);
      } else retryShare = Math.min(st.dueRetries, Math.floor(requests / 2));
    }
    const position = st.position;
    let next = position;
    let moved = false;
    let claim: Parameters<typeof queue.saveClaim>[2]['claim'] = null;
    const freshSlots = requests - retryShare;
    if (freshSlots > 0 && tokens >= 1) {
      const maxRequests = freshSlots * CLAIM_DEPTH;
      const maxEvents = Math.floor(Math.min(tokens, maxRequests * lim.batchSize, MAX_CLAIM_EVENTS));
      const accept = requestCounter(lim.batchSize, maxRequests, maxEvents);
      const read = await this.source.take(q, cfg.id, position, accept, maxEvents + 256);
      taken.push(read);
      next = read.next;
      moved = read.events.length > 0 || positionMoved(position, next);
      const cutoff = Date.now() - cfg.maxBacklogHours * 3600_000;
      const expired = read.events.filter((e) => e.whenCreated.getTime() < cutoff);
      const live = expired.length ? read.events.filter((e) => e.whenCreated.getTime() >= cutoff) : read.events;
      await queue.expireLogEvents(q, cfg.id, expired);
      if (live.length) {
        const claimId = crypto.randomUUID();
        const msgs = channel.messages(cfg, live, claimId);
        const slots = Math.min(freshSlots, msgs.length);
        claims.push(local(claimId, 0, msgs, slots));
        claim = { id: claimId, logIds: live.map((e) => e.pos), requests: msgs.length, slots, leaseSeconds: lease };
        requests -= slots;
        tokens -= live.length;
      }
    }

    // The retry queue with what is left.
    if (requests > 0 && tokens >= 1 && st.dueRetries > 0) {
      if (lim.keepBatches) {
        for (const b of await queue.leaseRetryBatches(q, cfg.id, lease, requests, Math.floor(tokens))) {
          const msg: OutMessage = { requestId: b.batchId, objectType: b.objectType, events: b.deliveries, body: b.body };
          retries.push({ cfg, channel, msg, claim: null, prior: priorOf(b.deliveries) });
          requests--;
          tokens -= b.deliveries.length;
        }
      }
      const want = Math.floor(Math.min(requests * lim.batchSize, tokens));
      const leased = await queue.leaseRetries(q, cfg.id, lease, want);
      if (leased.length) {
        // Redelivered events in batch mode form new batches, with new ids (a receiver must not drop them as seen).
        const msgs = channel.messages(cfg, leased, crypto.randomUUID());
        const keep = msgs.slice(0, Math.max(requests, 0));
        await queue.releaseRetries(
          q,
          cfg.id,
          msgs.slice(keep.length).flatMap((m) => m.events.map((e) => e.pos)),
        );
        const prior = priorOf(leased);
        for (const msg of keep) {
          retries.push({ cfg, channel, msg, claim: null, prior });
          tokens -= msg.events.length;
        }
      }
    }
    const state = positionMoved(position, next) || claim !== null || perMinute !== null;
    if (state || want.size) {
      const ok = await queue.saveClaim(q, cfg.id, {
        position: next,
        state,
        tokens: perMinute === null ? null : Math.max(tokens, 0),
        at: st.at,
        claim,
        grow: [...want].map(([c, add]) => ({ id: c.id, generation: c.generation, add })),
      });
      for (const [c, add] of want) if (ok.has(c.id)) grown.set(c, add);
    }
    return { claims, retries, moved, grown };
  }

  /** Sends a claim's next messages while it has free slots. */
  private pump(c: LocalClaim): void {
    if ((this.paused.get(c.integrationId) ?? 0) > Date.now()) return;
    while (!c.abandoned && c.inFlight < c.slots && c.inFlight + c.unwritten < 2 * c.slots && c.queue.length) {
      c.inFlight++;
      this.startJob(c.queue.shift()!);
    }
  }

  private startJob(job: Job): void {
    this.requestsSent++;
    const id = job.cfg.id;
    if (!job.claim) this.retrying.set(id, (this.retrying.get(id) ?? 0) + 1);
    const p = job.channel
      .send(job.cfg, job.msg)
      .then((result) => {
        if (result.outcome === 'pause') this.pause(id, Date.now() + (result.retryAfterSeconds ?? 60) * 1000);
        const outcome = outcomeFor(job, result, new Date());
        const failed = outcome.events.filter((e) => e.status === 'FAILED');
        if (failed.length) {
          // API guide 9: what cannot be delivered is logged (and kept for redelivery).
          this.log.warn(
            {
              reason: result.outcome === 'fail' ? 'not retryable' : 'no attempts left',
              integrationId: id,
              channel: job.channel.name,
              requestId: outcome.requestId,
              events: failed.length,
              eventIds: failed.slice(0, 10).map((e) => e.event.eventId),
              attempts: failed[0]!.attempts,
              error: result.error,
            },
            'delivery FAILED (kept for redelivery)',
          );
        }
        this.completions.push(outcome);
        if (job.claim) {
          job.claim.unwritten++;
          this.completionClaim.set(outcome, job.claim);
        }
        this.scheduleFlush();
      })
      .catch((e) => this.log.error({ err: e }, `${job.channel.name} send crashed`))
      .finally(() => {
        this.jobs.delete(p);
        const c = job.claim;
        if (c) {
          c.inFlight--;
          this.pump(c);
          if (c.queue.length === 0 && c.inFlight === 0) this.claims.delete(c.id);
        } else {
          const n = (this.retrying.get(id) ?? 1) - 1;
          if (n > 0) this.retrying.set(id, n);
          else this.retrying.delete(id);
        }
      });
    this.jobs.add(p);
  }

  private scheduleFlush(): void {
    if (this.flushing) return;
    this.flushing = (async () => {
      // Gather the completions of a few milliseconds: one statement writes them all (a statement's
      // fixed cost is shared by more rows; delivery itself does not wait for it).
      await new Promise((r) => setTimeout(r, FLUSH_GATHER_MS));
      while (this.completions.length) {
        await this.flush();
        this.wake(); // written results free their integration's request slots everywhere: claim again
      }
    })().finally(() => {
      this.flushing = undefined;
      if (this.completions.length) this.scheduleFlush();
    });
  }

  /**
   * Writes the completions gathered so far in one statement. If the database is away they are
   * kept and written later; if the process dies first, the leases run out and the events are sent
   * again (at least once). A result the database refuses must never hold back the others (every
   * integration's results are written together): the batch is then written one result at a time,
   * a refused one once more without what its receiver sent, and if that is refused too it is
   * parked: logged and dropped, its events sent again when their lease runs out.
   */
  private async flush(): Promise<void> {
    const batch = this.completions.splice(0, 1000);
    if (!batch.length) return;
    const putBack = async (from: number, e: unknown) => {
      this.log.warn({ err: e }, 'writing delivery results failed; keeping them to retry');
      this.completions.unshift(...batch.slice(from));
      await new Promise((r) => setTimeout(r, 1000));
    };
    try {
      await queue.writeResults(this.db, batch);
      this.settle(batch);
      return;
    } catch (e) {
      if (isTransient(e)) return putBack(0, e);
      if (batch.length > 1) this.log.warn({ err: e }, 'the database refused a batch of delivery results; writing them one by one');
    }
    for (const [n, r] of batch.entries()) {
      try {
        await queue.writeResults(this.db, [r]);
      } catch (e) {
        if (isTransient(e)) return putBack(n, e);
        try {
          await queue.writeResults(this.db, [withoutResponse(r, e)]);
          setAside(
            'delivery-results',
            'response-refused',
            { integrationId: r.integrationId, requestId: r.requestId },
            e,
            'result stored without its response',
          );
        } catch (e2) {
          if (isTransient(e2)) return putBack(n, e2);
          this.resultsParked++;
          setAside(
            'delivery-results',
            'refused',
            { integrationId: r.integrationId, requestId: r.requestId, events: r.events.length },
            e2,
            'result parked (logged and dropped; its events are sent again when their lease runs out)',
          );
        }
      }
      this.settle([r]);
    }
  }

  /** Results written (or parked): their claims may start new requests again. */
  private settle(results: queue.RequestOutcome[]): void {
    const claims = new Set<LocalClaim>();
    for (const r of results) {
      const c = this.completionClaim.get(r);
      if (!c) continue;
      this.completionClaim.delete(r);
      c.unwritten--;
      claims.add(c);
    }
    for (const c of claims) this.pump(c);
  }

  /** Integrations' health, retention, backlog expiry of disabled integrations and log pruning (API guide 9), in bulk. */
  async sweep(): Promise<number> {
    // Partitions the event log lost unread make every integration failing until they are dealt with;
    // while that cannot be known (the cluster does not answer), nothing recovers in this sweep.
    const lost = await this.source.lostPartitions().catch((e) => {
      this.log.warn({ err: e }, "integration health: the event log's lost partitions could not be read");
      return null;
    });
    await queue.sweepHealth(this.db, new Date(), lost);
    return queue.sweep(this.db, { succeededDays: this.s.succeededRetentionDays, failedDays: this.s.failedRetentionDays });
  }
}

/**
 * Accepts log events while they fit in `requests` messages of up to `batchSize` events of one
 * object type each (the way channels group them) and in `maxEvents`.
 */
const positionMoved = (a: Position, b: Position) => a.id !== b.id || a.tx !== b.tx;

function requestCounter(batchSize: number, requests: number, maxEvents: number): (e: LogEvent) => boolean {
  const open = new Map<string, number>();
  let messages = 0;
  let events = 0;
  return (e) => {
    if (events >= maxEvents) return false;
    const n = open.get(e.objectType);
    if (n === undefined || n >= batchSize) {
      if (messages >= requests) return false;
      messages++;
      open.set(e.objectType, 1);
    } else open.set(e.objectType, n + 1);
    events++;
    return true;
  };
}

/**
 * Failures that say nothing about the rows written (the database away, a deadlock, a serialization
 * failure, a cancelled statement): the same batch is tried again as it is.
 */
function isTransient(e: unknown): boolean {
  const code = (e as { code?: unknown }).code;
  return isDatabaseUnavailable(e) || (typeof code === 'string' && ['40P01', '40001', '55P03', '57014'].includes(code));
}

/** A result without what the receiver sent (body, headers, receipt, error text), naming why. */
function withoutResponse(r: queue.RequestOutcome, e: unknown): queue.RequestOutcome {
  const why = `the response could not be stored (${String((e as Error).message ?? e).slice(0, 200)})`;
  return { ...r, error: r.success ? null : why, receiptId: null, responseHeaders: null, responseBody: null, truncated: false };
}

function priorOf(ds: queue.RetryDelivery[]): Job['prior'] {
  return new Map(ds.map((d) => [d.pos, { attempts: d.attempts, attemptBase: d.attemptBase, firstAttemptAt: d.firstAttemptAt }]));
}

function shuffle<T>(a: T[]): T[] {
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [a[i], a[j]] = [a[j]!, a[i]!];
  }
  return a;
}
