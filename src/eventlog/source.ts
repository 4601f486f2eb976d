// Where first attempts come from (API guide 9 and 17): the delivery engine's one seam to the event
// log, chosen where the engine is built (app.ts). In the PostgreSQL mode (PostgresFirstAttempts) the
// engine reads the event log after each integration's position (log.ts). With EVENT_LOG=kafka
// (KafkaFirstAttempts, consumer.ts) the topic's partitions this process owns are read and their
// events held, fanned out per integration; the engine claims them as it claims the event log (a claim
// row under a lease, the integration's state locked for its limits), and the source counts an event
// as handed over once the claim's transaction committed.
import type { Queryable } from '../db/db.js';
import { type LogEvent, type Position, readLog } from './log.js';

/** An integration with work a worker could claim now. */
export interface DueIntegration {
  id: string;
  whenUpdated: Date;
}

/** Events a claim took from a source: settled once the claim's transaction ended. */
export interface TakenEvents {
  integrationId: string;
  events: LogEvent[];
  /** The integration's position after them: moved only by a source that reads after positions. */
  next: Position;
}

export interface FirstAttemptSource {
  /** First attempts are the event log after each integration's position (the due query looks there). */
  readonly readsPositions: boolean;
  /** Starts reading; `wake` is called when integrations have new events. */
  start(wake: () => void): void;
  /** Stops reading, and commits what was handed over. */
  stop(): Promise<void>;
  /** Integrations with events waiting in this process (beyond what the due query finds). */
  due(): DueIntegration[];
  /**
   * The integration's waiting events in order, while `accept` takes them, from `from` (its position,
   * the integration locked by the caller in `q`), looking at no more than `scan` rows of the log.
   */
  take(q: Queryable, integrationId: string, from: Position, accept: (e: LogEvent) => boolean, scan: number): Promise<TakenEvents>;
  /** After the claim's transaction: committed (the events are the claim's now) or not (they wait again). */
  settle(t: TakenEvents, committed: boolean): void;
  /** Events this process published (its relay), read from the topic, and parked (for /metrics). */
  counts(): { published: number; consumed: number; parked: number };
  /**
   * Partitions whose unread events the source can no longer hand over (Kafka deleted them before
   * the group read them; API guide 17), for integration health. Throws when it cannot be known now.
   */
  lostPartitions(): Promise<number[]>;
}

/**
 * The event log in PostgreSQL: read after the integration's position, below the horizon; the
 * engine moves the position in the claim's transaction. Nothing is held in the process.
 */
export class PostgresFirstAttempts implements FirstAttemptSource {
  readonly readsPositions = true;
  start(): void {}
  async stop(): Promise<void> {}
  due(): DueIntegration[] {
    return [];
  }
  async take(q: Queryable, integrationId: string, from: Position, accept: (e: LogEvent) => boolean, scan: number): Promise<TakenEvents> {
    const { events, next } = await readLog(q, integrationId, from, accept, scan);
    return { integrationId, events, next };
  }
  settle(): void {}
  counts() {
    return { published: 0, consumed: 0, parked: 0 };
  }
  async lostPartitions(): Promise<number[]> {
    return []; // the log is read from PostgreSQL, where nothing is removed unread
  }
}
