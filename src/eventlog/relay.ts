// The relay (EVENT_LOG=kafka, API guide 17): publishes the event log's committed rows to the topic,
// in the log's order, keyed by asset id so one asset's events stay in order on one partition. One
// relay at a time holds the lease (every delivery process runs one; the others wait for the lease to
// end). A batch is read, sent with acks=all by an idempotent producer with ONE send in flight (more
// would lose data silently with @platformatic/kafka 1.x, platformatic/kafka#326), and only after the
// brokers acknowledged it does the position move. A crash anywhere between publishes the batch
// again: at least once, never skipped, never anything uncommitted (rows are read below the horizon).
import crypto from 'node:crypto';
import os from 'node:os';
import type { Producer } from '@platformatic/kafka';
import type { FastifyBaseLogger } from 'fastify';
import type { Db } from '../db/db.js';
import { EVENT_LOG_CHANNEL, type Position } from './log.js';
import { moveRelay, readForRelay, releaseRelay, syncPositions, takeRelayLease } from './relay-sql.js';
import { Waker } from './waker.js';
import { clientOptions, type EventLogConfig, ensureTopic, kafkaLib } from './kafka.js';

const LEASE_SECONDS = 30;
const BATCH = 2000;
const SYNC_POSITIONS_MS = 5000;

export class EventLogRelay {
  private running = false;
  private loop?: Promise<void>;
  private producer?: Producer<string, string, string, string>;
  private unlisten?: () => void;
  private readonly waker = new Waker();
  private leaseRenewedAt = 0;
  /** The next batch may repeat what the lease's last holder published (see turn()). */
  private again = true;
  /** Where this relay goes on from while it holds the lease. */
  private position?: Position;
  private syncedAt = 0;
  /** Moved since the integrations' positions last followed. */
  private unsynced = false;
  private readonly holder = `${os.hostname()}:${process.pid}:${crypto.randomUUID().slice(0, 8)}`;
  /** Events this relay published (for /metrics and tests). */
  published = 0;

  constructor(
    private readonly db: Db,
    private readonly cfg: EventLogConfig,
    private readonly pollMs: number,
    private readonly log: FastifyBaseLogger,
  ) {}

  start(): void {
    if (this.running) return;
    this.running = true;
    this.unlisten = this.db.listen(EVENT_LOG_CHANNEL, () => this.wake());
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.unlisten?.();
    this.wake();
    await this.loop;
    await releaseRelay(this.db, this.holder).catch(() => {});
    await this.producer?.close().catch(() => {});
  }

  private wake(): void {
    this.waker.wake();
  }

  private async producerOf(): Promise<Producer<string, string, string, string>> {
    if (this.producer) return this.producer;
    const { Producer, ProduceAcks, stringSerializers } = await kafkaLib();
    await ensureTopic(this.cfg);
    this.producer = new Producer<string, string, string, string>({
      ...clientOptions(this.cfg, 'relay'),
      serializers: stringSerializers,
      acks: ProduceAcks.ALL,
      idempotent: true,
      autocreateTopics: false,
    });
    return this.producer;
  }

  private async run(): Promise<void> {
    let backoff = 0;
    while (this.running) {
      try {
        const busy = await this.turn();
        backoff = 0;
        if (!busy) await this.waker.sleep(this.pollMs);
      } catch (e) {
        backoff = Math.min(backoff ? backoff * 2 : 500, 10_000);
        this.log.warn({ err: e }, `event log relay failed; retrying in ${backoff} ms`);
        // A producer that failed is built again: a broker may have moved or come back.
        const p = this.producer;
        this.producer = undefined;
        this.position = undefined;
        await p?.close().catch(() => {});
        await this.waker.sleep(backoff);
      }
    }
  }

  /** One batch: true when a full one went (look again at once). */
  private async turn(): Promise<boolean> {
    this.waker.clear();
    // The lease is taken (one statement) only when not held or a third of it has passed: each move
    // renews it too.
    if (!this.position || Date.now() - this.leaseRenewedAt > (LEASE_SECONDS * 1000) / 3) {
      // Taken afresh (at start, from a relay that died, after a failure): the first batch may
      // have been published already by the last holder, whose position did not move.
      if (!this.position) this.again = true;
      this.position = (await takeRelayLease(this.db, this.holder, LEASE_SECONDS)) ?? undefined;
      if (!this.position) {
        // Another relay publishes; this one looks again when its lease could have ended.
        await this.waker.sleep(Math.max(this.pollMs, 2000));
        return false;
      }
      this.leaseRenewedAt = Date.now();
    }
    const from = this.position;
    const rows = await this.db.tx((q) => readForRelay(q, from, BATCH));
    if (!rows.length) {
      if (this.unsynced && Date.now() - this.syncedAt > SYNC_POSITIONS_MS) {
        await syncPositions(this.db, from);
        this.syncedAt = Date.now();
        this.unsynced = false;
      }
      return false;
    }
    const producer = await this.producerOf();
    const topic = this.cfg.EVENT_LOG_TOPIC;
    await producer.send({
      messages: rows.map((r) => ({
        topic,
        key: r.key,
        value: r.payload,
        headers: {
          id: r.id,
          tx: r.tx_id,
          'event-id': r.event_id,
          type: r.object_type,
          'object-id': r.object_id,
          'owner-path': r.owner_path,
          at: r.when_created.toISOString(),
          // Consumers check such events against what was handed over already (consumer.ts).
          ...(this.again ? { 'maybe-again': '1' } : {}),
        },
      })),
    });
    const last = rows[rows.length - 1]!;
    const sync = Date.now() - this.syncedAt > SYNC_POSITIONS_MS;
    const kept = await moveRelay(this.db, this.holder, { tx: last.tx_id, id: last.id }, rows.length, LEASE_SECONDS, sync);
    if (sync) this.syncedAt = Date.now();
    this.unsynced = !sync;
    if (kept) {
      this.again = false;
      this.position = { tx: last.tx_id, id: last.id };
      this.leaseRenewedAt = Date.now();
    } else {
      this.position = undefined;
      this.log.warn('event log relay lost its lease while publishing; another relay goes on (its batch may go twice)');
    }
    this.published += rows.length;
    return rows.length === BATCH;
  }
}
