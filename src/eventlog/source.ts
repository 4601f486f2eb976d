// Where first attempts come from (API guide 9 and 17). In the PostgreSQL mode the engine reads the
// event log after each integration's position (queue/log.ts). With EVENT_LOG=kafka a source
// (src/eventlog/consumer.ts) hands it the events of the topic's partitions this process owns, fanned
// out per integration; the engine claims them as it claims the event log (a claim row under a lease,
// the integration's state locked for its limits), and the source counts an event as handed over
// once the claim's transaction committed.
import type { DueIntegration, LogEvent } from './queue/index.js';

/** Events a claim took from a source: settled once the claim's transaction ended. */
export interface TakenEvents {
  integrationId: string;
  events: LogEvent[];
}

export interface FirstAttemptSource {
  /** Starts reading; `wake` is called when integrations have new events. */
  start(wake: () => void): void;
  /** Stops reading, and commits what was handed over. */
  stop(): Promise<void>;
  /** Integrations with events waiting in this process. */
  due(): DueIntegration[];
  /** The integration's waiting events in order, while `accept` takes them. */
  take(integrationId: string, accept: (e: LogEvent) => boolean): TakenEvents;
  /** After the claim's transaction: committed (the events are the claim's now) or not (they wait again). */
  settle(t: TakenEvents, committed: boolean): void;
  /** Events this process published (its relay), read from the topic, and parked (for /metrics). */
  counts(): { published: number; consumed: number; parked: number };
}
