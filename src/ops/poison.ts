// Poison (docs/DESIGN.md, "Operations"; API guide 4): one item a consumer cannot take (an event-log message
// it cannot read, a specification the alert sweep cannot evaluate or save, a delivery result the
// database refuses, a rollups batch that cannot be folded) is set aside with its reason, logged with
// its id and counted here, and the consumer goes on with the rest. /metrics shows the counts as
// poison_total{consumer, reason}: this process's, and its delivery processes' (which report theirs
// to it with their other counters).
import type { FastifyBaseLogger } from 'fastify';
import { isDatabaseUnavailable } from '../http/errors.js';

/** The consumers that set poison aside (the metric's `consumer` label). */
export type PoisonConsumer = 'eventlog' | 'alert-sweep' | 'delivery-results' | 'rollups';

/** Items set aside in this process, by "consumer:reason". */
const counts = new Map<string, number>();

/** Counts one item `consumer` set aside for `reason` (a short fixed word: the metric's label). */
export function countPoison(consumer: PoisonConsumer, reason: string, n = 1): void {
  const k = `${consumer}:${reason}`;
  counts.set(k, (counts.get(k) ?? 0) + n);
}

/** This process's counts, by "consumer:reason" (a copy: a delivery process sends it to its parent). */
export function poisonCounts(): Record<string, number> {
  return Object.fromEntries(counts);
}

type Log = Pick<FastifyBaseLogger, 'error'>;
/** Where setAside logs: the service's logger once the app (or a delivery process) names it. */
let sink: Log = { error: (o: object, msg?: string) => console.error(JSON.stringify({ level: 50, ...o, msg })) } as Log;

/** Names the logger setAside writes to (the app's, a delivery process's). */
export function logPoisonTo(log: Log): void {
  sink = log;
}

/**
 * Sets one item aside: logged (error level) with its ids and reason, and counted. `ids` names the
 * item (e.g. { specificationId }); `err` is what went wrong; `where` says where the item went.
 */
export function setAside(consumer: PoisonConsumer, reason: string, ids: Record<string, unknown>, err?: unknown, where = 'set aside'): void {
  countPoison(consumer, reason);
  sink.error({ err, consumer, reason, ...ids }, `poison: ${consumer} could not take one item (${reason}): ${where}; the others go on`);
}

/**
 * An error the database answers about the statement itself (its data, a constraint, a trigger):
 * running it again fails again. Not one of a database that is away, a deadlock, a serialization
 * failure, a lock or statement timeout or a cancel: those pass, and the work is tried again whole.
 */
export function isRefusal(e: unknown): boolean {
  if (isDatabaseUnavailable(e)) return false;
  const code = (e as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || code.length !== 5) return false;
  return /^(22|23|P0|2F|39|XX)/.test(code);
}
