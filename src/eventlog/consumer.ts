// The delivery processes as one consumer group (EVENT_LOG=kafka, API guide 17). Each process reads
// the partitions the group gives it, fans every event out to the integrations that cover it, and
// holds them for the engine, which claims them as it claims the PostgreSQL event log (the claim row,
// under a lease, is what survives a crash; limits and fairness are decided under the integration's
// lock, across instances).
//
// An event is handed over once, for every integration it is for, it sits in a committed claim or
// in the retry queue. Offsets are committed only up to the first event not yet handed over, so a
// crash or a partition moving to another process sends again what was not (at least once, never
// lost). An integration that is disabled or paused, or whose events wait here longer than
// PARK_AFTER_MS, has them parked in PostgreSQL's retry queue: no integration holds a partition back
// for the others, and nothing waits on the topic's retention.
import type { Consumer, Message, MessagesStream } from '@platformatic/kafka';
import type { FastifyBaseLogger } from 'fastify';
import type { Db, Queryable } from '../db/db.js';
import type { ObjectType } from './objects.js';
import type { LogEvent, Position } from './log.js';
import { type Coverage, coverage, handedOver, parkEvents } from './relay-sql.js';
import type { DueIntegration, FirstAttemptSource, TakenEvents } from './source.js';
import { setAside } from '../ops/poison.js';
import { covers, parseOwnerPath, type TopicEvent } from './coverage.js';
import { offsetsLost, recordConsumed } from './floor.js';
import { clientOptions, type EventLogConfig, ensureTopic, groupOffsets, kafkaLib } from './kafka.js';
import { EventLogRelay } from './relay.js';

type Msg = Message<string, string, string, string>;

/** One message of a partition, until every integration it is for has it. */
interface Entry {
  offset: bigint;
  pending: number;
  commit: Msg['commit'];
  /** The event's log position (none for poison). */
  pos?: Position;
}

interface Held {
  event: LogEvent;
  entry: Entry;
  partition: number;
  since: number;
}

/** Events held here at most before the topic is read further. */
const MAX_HELD = 20_000;
/** How long an event waits here for its integration's request slot before it is parked. */
const PARK_AFTER_MS = 5_000;
const COMMIT_EVERY_MS = 200;
/** How long after a partition is assigned its events are checked against what was handed over. */
const RECOVERY_MS = 30_000;

export class KafkaFirstAttempts implements FirstAttemptSource {
  /** The topic's consumers hand first attempts over: the due query does not read after positions. */
  readonly readsPositions = false;
  private running = false;
  private consumer?: Consumer<string, string, string, string>;
  private stream?: MessagesStream<string, string, string, string>;
  private starting?: Promise<void>;
  private wake: () => void = () => {};
  private readonly incoming: Msg[] = [];
  private processing?: Promise<void>;
  /** Partitions this process owns (the group's last assignment), and their messages in offset order. */
  private assigned = new Set<number>();
  private readonly parts = new Map<number, { entries: Entry[]; last: bigint }>();
  private readonly held = new Map<string, Held[]>();
  /**
   * Partitions recently assigned to this process: until when, and which of their events (published
   * before the assignment, a second's clock skew allowed: a previous owner can have consumed no
   * later one) are checked against what was handed over (handedOver).
   */
  private readonly recovering = new Map<number, { until: number; publishedBefore: number }>();
  private heldCount = 0;
  private paused = false;
  private covered = new Map<string, Coverage>();
  private coveredAt = 0;
  private timer?: NodeJS.Timeout;
  private maintaining = false;
  /** For /metrics and tests. */
  consumed = 0;
  parked = 0;

  /** This process's relay: the one holding the lease publishes, the others wait for it. */
  readonly relay: EventLogRelay;

  constructor(
    private readonly db: Db,
    private readonly cfg: EventLogConfig,
    pollMs: number,
    private readonly log: FastifyBaseLogger,
  ) {
    this.relay = new EventLogRelay(db, cfg, pollMs, log);
  }

  start(wake: () => void): void {
    if (this.running) return;
    this.running = true;
    this.wake = wake;
    this.relay.start();
    this.starting = this.connect();
    this.timer = setInterval(() => void this.maintain(), COMMIT_EVERY_MS);
    this.timer.unref();
  }

  /** Joins the group, retrying while the cluster is away. */
  private async connect(): Promise<void> {
    let backoff = 500;
    while (this.running) {
      try {
        const { Consumer, MessagesStreamModes, MessagesStreamFallbackModes, stringDeserializers } = await kafkaLib();
        await ensureTopic(this.cfg);
        const consumer = new Consumer<string, string, string, string>({
          ...clientOptions(this.cfg, 'delivery'),
          groupId: this.cfg.EVENT_LOG_GROUP,
          deserializers: stringDeserializers,
          autocommit: false,
          sessionTimeout: 10_000,
          heartbeatInterval: 1_000,
          rebalanceTimeout: 20_000,
          maxWaitTime: 200,
        });
        consumer.on('consumer:group:join', (p) => this.assign(p.assignments ?? []));
        // The group lost (a coordinator gone for longer than the client's retries): join again.
        consumer.on('error', (e: unknown) => this.rejoin(consumer, e));
        this.consumer = consumer;
        const stream = await consumer.consume({
          topics: [this.cfg.EVENT_LOG_TOPIC],
          mode: MessagesStreamModes.COMMITTED,
          // A group's first start reads the topic from its beginning: the service made the topic.
          fallbackMode: MessagesStreamFallbackModes.EARLIEST,
          autocommit: false,
          maxWaitTime: 200,
        });
        this.assign(consumer.assignments ?? []);
        stream.on('data', (m: Msg) => this.arrive(m));
        // A stream that fails (a broker gone for longer than the client's retries) is not read
        // again: the consumer leaves and joins again, and reads on from the committed offsets.
        stream.once('error', (e) => this.rejoin(consumer, e));
        stream.once('close', () => this.rejoin(consumer, null));
        this.stream = stream;
        return;
      } catch (e) {
        this.log.warn({ err: e }, `joining the event log's consumer group failed; retrying in ${backoff} ms`);
        const failed = this.consumer;
        this.consumer = undefined; // before closing: its own 'error' must not start a second join
        await failed?.close().catch(() => {});
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(backoff * 2, 10_000);
      }
    }
  }

  private rejoin(consumer: Consumer<string, string, string, string>, e: unknown): void {
    if (!this.running || this.consumer !== consumer) return;
    if ((e as { findBy?: (k: string, v: unknown) => unknown } | null)?.findBy?.('apiId', 'OFFSET_OUT_OF_RANGE')) {
      // Kafka deleted messages the group had not read (the topic's retention passed them). The
      // offsets are never moved to the earliest or the latest: the partition waits for an operator
      // (event_log_consumer_offsets_lost in /metrics; API guide 17), its rows kept in the event log.
      this.log.error(
        { err: e },
        "event log consumer: the group's committed offset is below the topic's earliest (messages deleted unread); not reset, joining the group again",
      );
    }
    this.log.warn({ err: e }, 'event log consumer failed; joining the group again');
    const stream = this.stream;
    this.stream = undefined;
    this.consumer = undefined;
    this.paused = false;
    // What it held is not handed over: the next assignment reads it again.
    this.assign([]);
    this.starting = (async () => {
      await stream?.close().catch(() => {});
      await consumer.close().catch(() => {});
      await new Promise((r) => setTimeout(r, 500));
      await this.connect();
    })();
  }

  /** A new assignment: what this process no longer owns is dropped (its next owner reads it again). */
  private assign(assignments: { topic: string; partitions: number[] }[]): void {
    const mine = new Set(assignments.find((a) => a.topic === this.cfg.EVENT_LOG_TOPIC)?.partitions ?? []);
    // A partition new to this process is read again from its last committed offset: for a while,
    // what it reads is checked against what its previous owner handed over.
    const now = Date.now();
    for (const p of mine) if (!this.assigned.has(p)) this.recovering.set(p, { until: now + RECOVERY_MS, publishedBefore: now + 1000 });
    this.assigned = mine;
    for (const p of [...this.parts.keys()]) if (!mine.has(p)) this.parts.delete(p);
    for (const [id, list] of this.held) {
      const kept = list.filter((h) => mine.has(h.partition));
      this.heldCount -= list.length - kept.length;
      if (kept.length) this.held.set(id, kept);
      else this.held.delete(id);
    }
    this.log.info({ partitions: [...mine].sort((a, b) => a - b) }, 'event log partitions assigned');
  }

  private arrive(m: Msg): void {
    this.incoming.push(m);
    if (this.incoming.length + this.heldCount >= MAX_HELD) this.pause();
    this.schedule();
  }

  private schedule(): void {
    this.processing ??= this.process()
      .catch((e) => this.log.error({ err: e }, 'event log consumer: fanning messages out failed'))
      .finally(() => {
        this.processing = undefined;
        if (this.incoming.length && this.running) this.schedule();
      });
  }

  private pause(): void {
    if (this.paused) return;
    this.paused = true;
    this.stream?.pause();
  }

  private resumeIfRoom(): void {
    if (this.paused && this.incoming.length + this.heldCount < MAX_HELD / 2) {
      this.paused = false;
      this.stream?.resume();
    }
  }

  /**
   * Fans the arrived messages out. The integrations are read after the messages arrived, so an
   * integration whose creation committed before an event was published is in view (relay-sql.ts).
   */
  private async process(): Promise<void> {
    while (this.running && this.incoming.length) {
      await new Promise((r) => setImmediate(r)); // gather what arrives together
      let cov: Coverage[];
      try {
        cov = await coverage(this.db);
      } catch (e) {
        this.log.warn({ err: e }, 'reading integrations for the event log failed; retrying');
        await new Promise((r) => setTimeout(r, 1000));
        continue;
      }
      this.covered = new Map(cov.map((c) => [c.id, c]));
      this.coveredAt = Date.now();
      const batch = this.incoming.splice(0, this.incoming.length);
      // Each message's event and the integrations covering it, decided once.
      // A message that is no event (poison: headers missing or bad, a payload that is not a JSON
      // object, its handling throws) is set aside: logged, counted, its offset committed; the
      // others go on.
      const fanned = batch.map((m): Fanned => {
        let e: TopicEvent | null = null;
        try {
          const got = toTopicEvent(m);
          if ('poison' in got) return { m, e: null, covering: [], poison: got.poison };
          e = got;
          let parsed: Record<string, unknown> | undefined;
          const payload = () => (parsed ??= payloadOf(got.payload));
          const covering = cov.filter((c) => covers(c, got, payload));
          // What is handed over must be a JSON object: receivers get it as such.
          if (covering.length) payload();
          return { m, e, covering };
        } catch (err) {
          return { m, e: null, covering: [], poison: err instanceof BadPayload ? 'bad-payload' : 'handling-failed', err };
        }
      });
      const park: Held[] = [];
      const parkFor: string[] = [];
      const now = Date.now();
      let seen = new Set<string>();
      try {
        seen = await this.alreadyHanded(fanned, now);
      } catch (e) {
        this.log.warn({ err: e }, 'reading what was handed over failed; retrying');
        this.incoming.unshift(...batch);
        await new Promise((r) => setTimeout(r, 1000));
        continue;
      }
      for (const f of fanned) {
        const { m, e, covering } = f;
        if (!this.assigned.has(m.partition)) continue;
        let part = this.parts.get(m.partition);
        if (!part) {
          part = { entries: [], last: -1n };
          this.parts.set(m.partition, part);
        }
        if (m.offset <= part.last) continue; // read again after a rejoin: already here
        part.last = m.offset;
        this.consumed++;
        const entry: Entry = { offset: m.offset, pending: 0, commit: m.commit, ...(e ? { pos: { tx: String(e.tx), id: e.id } } : {}) };
        part.entries.push(entry);
        if (!e) {
          setAside(
            'eventlog',
            f.poison ?? 'handling-failed',
            { topic: m.topic, partition: m.partition, offset: String(m.offset), key: m.key, logId: m.headers.get('id') },
            f.err,
            'skipped (its offset is committed)',
          );
          continue;
        }
        const event: LogEvent = {
          pos: e.id,
          eventId: e.eventId,
          objectType: e.objectType as ObjectType,
          objectId: e.objectId,
          payload: e.payload,
          whenCreated: e.whenCreated,
        };
        for (const c of covering) {
          if (seen.has(`${c.id}:${e.id}`)) continue;
          entry.pending++;
          const h: Held = { event, entry, partition: m.partition, since: now };
          if (!c.enabled || c.paused) {
            park.push(h);
            parkFor.push(c.id);
            continue;
          }
          const list = this.held.get(c.id);
          if (list) list.push(h);
          else this.held.set(c.id, [h]);
          this.heldCount++;
        }
      }
      if (park.length) await this.park(park, parkFor);
      if (this.heldCount) this.wake();
    }
  }

  /**
   * The (integration, event) pairs that were handed over already, of the messages that may repeat:
   * those of recovering partitions, and a relay's first batch after it took the lease.
   */
  private async alreadyHanded(fanned: Fanned[], now: number): Promise<Set<string>> {
    for (const [p, r] of this.recovering) if (r.until < now) this.recovering.delete(p);
    const pairs: { integrationId: string; logId: string }[] = [];
    for (const { m, e, covering } of fanned) {
      if (!e) continue;
      // A relay's first batch after it took the lease may repeat its last holder's last one.
      const again = m.headers.get('maybe-again') === '1';
      const r = this.recovering.get(m.partition);
      if (!again && (!r || Number(m.timestamp) > r.publishedBefore)) continue;
      for (const c of covering) pairs.push({ integrationId: c.id, logId: e.id });
    }
    return handedOver(this.db, pairs);
  }

  /** Parks events in the retry queue; on failure they wait here and are parked again later. */
  private async park(items: Held[], integrationIds: string[]): Promise<boolean> {
    try {
      await parkEvents(
        this.db,
        items.map((h, i) => ({ integrationId: integrationIds[i]!, logId: h.event.pos })),
      );
    } catch (e) {
      this.log.warn({ err: e, events: items.length }, 'parking events in the retry queue failed; they wait');
      items.forEach((h, i) => {
        const id = integrationIds[i]!;
        const list = this.held.get(id);
        if (list) list.unshift(h);
        else this.held.set(id, [h]);
        this.heldCount++;
      });
      return false;
    }
    for (const h of items) h.entry.pending--;
    this.parked += items.length;
    return true;
  }

  /**
   * Every half second: events of integrations disabled, paused or deleted since, and events that
   * waited too long, leave (parked, or dropped for a deleted integration); then offsets are
   * committed up to the first event not yet handed over, per partition.
   */
  private async maintain(): Promise<void> {
    if (this.maintaining || !this.running) return;
    this.maintaining = true;
    try {
      const now = Date.now();
      const park: Held[] = [];
      const parkFor: string[] = [];
      // Integrations disabled, paused or deleted since they were read: looked at once a second
      // (a claim meanwhile reads its integration's state itself).
      if (this.held.size && now - this.coveredAt >= 1000) {
        try {
          this.covered = new Map((await coverage(this.db)).map((c) => [c.id, c]));
          this.coveredAt = now;
        } catch {
          // The database is away: the engine cannot claim either; next turn.
          return;
        }
      }
      for (const [id, list] of [...this.held]) {
        const c = this.covered.get(id);
        if (!c) {
          // Deleted: its pending events were cancelled with it.
          for (const h of list) h.entry.pending--;
        } else if (!c.enabled || c.paused || now - list[0]!.since > PARK_AFTER_MS) {
          for (const h of list) {
            park.push(h);
            parkFor.push(id);
          }
        } else continue;
        this.held.delete(id);
        this.heldCount -= list.length;
      }
      if (park.length) await this.park(park, parkFor);
      this.resumeIfRoom();
      await this.commit();
    } finally {
      this.maintaining = false;
    }
  }

  /**
   * Commits, per partition owned, the offset after the last message every earlier one of which is
   * handed over. The log position of the last such event is recorded first (floor.ts): retention
   * keeps what comes after it in the partition; while it cannot be recorded nothing is committed.
   */
  private async commit(): Promise<void> {
    const done: { p: number; n: number; last: Entry }[] = [];
    const handed: { partition: number; pos: Position }[] = [];
    for (const [p, part] of this.parts) {
      if (!this.assigned.has(p)) continue;
      let n = 0;
      let pos: Position | undefined;
      while (n < part.entries.length && part.entries[n]!.pending <= 0) pos = part.entries[n++]!.pos ?? pos;
      if (!n) continue;
      done.push({ p, n, last: part.entries[n - 1]! });
      if (pos) handed.push({ partition: p, pos });
    }
    if (!done.length) return;
    try {
      await recordConsumed(this.db, handed);
    } catch (e) {
      this.log.warn({ err: e }, "recording what the event log's consumer handed over failed; its offsets wait");
      return;
    }
    for (const { p, n, last } of done) {
      const part = this.parts.get(p);
      if (part?.entries[n - 1] !== last) continue; // the partition moved meanwhile
      part.entries.splice(0, n);
      try {
        await last.commit();
      } catch (e) {
        // A rebalance under way: the next commit of this partition covers it, or its next owner reads it again.
        this.log.debug({ err: e, partition: p }, 'committing an event log offset failed');
      }
    }
  }

  counts() {
    return { published: this.relay.published, consumed: this.consumed, parked: this.parked };
  }

  /** The group's partitions whose committed offset fell below the earliest (one admin call to the cluster). */
  async lostPartitions(): Promise<number[]> {
    return (await groupOffsets(this.cfg)).filter(offsetsLost).map((p) => p.partition);
  }

  due(): DueIntegration[] {
    const out: DueIntegration[] = [];
    for (const id of this.held.keys()) {
      const c = this.covered.get(id);
      if (c?.enabled && !c.paused) out.push({ id, whenUpdated: c.whenUpdated });
    }
    return out;
  }

  /** The position stays where it is: the relay keeps it (relay-sql.ts). */
  async take(
    _q: Queryable,
    integrationId: string,
    from: Position,
    accept: (e: LogEvent) => boolean,
  ): Promise<TakenEvents & { held?: Held[] }> {
    const list = this.held.get(integrationId);
    if (!list) return { integrationId, events: [], next: from };
    let n = 0;
    while (n < list.length && accept(list[n]!.event)) n++;
    const taken = list.splice(0, n);
    if (!list.length) this.held.delete(integrationId);
    this.heldCount -= n;
    return { integrationId, events: taken.map((h) => h.event), next: from, held: taken };
  }

  settle(t: TakenEvents & { held?: Held[] }, committed: boolean): void {
    const items = t.held ?? [];
    if (committed) {
      for (const h of items) h.entry.pending--;
      this.resumeIfRoom();
      return;
    }
    const mine = items.filter((h) => this.assigned.has(h.partition));
    if (!mine.length) return;
    const list = this.held.get(t.integrationId);
    if (list) list.unshift(...mine);
    else this.held.set(t.integrationId, mine);
    this.heldCount += mine.length;
  }

  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    clearInterval(this.timer);
    await this.starting;
    await this.processing;
    await this.commit().catch(() => {});
    // Leaving the group hands the partitions to the others at once.
    await this.stream?.close().catch(() => {});
    await this.consumer?.close().catch(() => {});
    await this.relay.stop();
  }
}

/** A message with its event and the integrations covering it, or why it is poison. */
interface Fanned {
  m: Msg;
  e: TopicEvent | null;
  covering: Coverage[];
  poison?: string;
  err?: unknown;
}

class BadPayload extends Error {}

/** A message's payload: a JSON object, or BadPayload. */
function payloadOf(text: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new BadPayload(`the payload is not JSON (${(e as Error).message})`);
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new BadPayload('the payload is not a JSON object');
  return v as Record<string, unknown>;
}

const INT8 = /^\d{1,19}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const MAX_INT8 = 9_223_372_036_854_775_807n;
const int8 = (v: string) => INT8.test(v) && BigInt(v) <= MAX_INT8;

/**
 * The event a message carries (its headers, set by the relay), or why it is none: `missing-headers`,
 * `bad-headers` (a value the relay never sends: the database would refuse it, or no date).
 */
function toTopicEvent(m: Msg): TopicEvent | { poison: string } {
  const h = m.headers;
  const id = h.get('id');
  const tx = h.get('tx');
  const eventId = h.get('event-id');
  const type = h.get('type');
  const objectId = h.get('object-id');
  const path = h.get('owner-path');
  const at = h.get('at');
  if (!id || !tx || !eventId || !type || objectId === undefined || !path || !at || typeof m.value !== 'string') {
    return { poison: 'missing-headers' };
  }
  const whenCreated = new Date(at);
  if (!int8(id) || !int8(tx) || !UUID.test(eventId) || !/^\{.*\}$/s.test(path) || Number.isNaN(whenCreated.getTime())) {
    return { poison: 'bad-headers' };
  }
  return {
    id,
    tx: BigInt(tx),
    eventId,
    objectType: type,
    objectId,
    ownerPath: parseOwnerPath(path),
    whenCreated,
    payload: m.value,
  };
}
