// The delivery queue: the statements on the delivery tables (API guide 9), one file per job, each
// statement's locking explained beside it. The event log itself (appending, positions, reading after
// a position, an integration's start and end) and the Kafka relay's statements, parking included, are
// src/eventlog/'s (log.ts, relay-sql.ts).
//
//   claims.ts   claims of the event log under leases: due integrations, the shared state lock, takeovers
//   retries.ts  the retry queue: leases of failed events and batches, redelivery
//   results.ts  attempts and results, written in one statement per moment
//   history.ts  reads: deliveries, attempts, the result stream's pages, stats, /metrics figures
//   pruning.ts  backlog expiry, retention and pruning of the event log, in bulk
//   health.ts   integrations' health: failing, disabled after autoDisableAfterHours, recovered
//
// The tables: event_log (one row per stored event), integration_state (each integration's position,
// 429 pause and token bucket), delivery_claims (events a worker took from the event log, under a lease),
// deliveries (events with a state of their own), delivery_batches (a failed batch's body, retried
// byte for byte) and delivery_attempts (one insert-only row per request). The normal path costs no
// row per event: a claim reads the event log after the integration's position, moves the position and
// writes one claim row; a request that succeeds writes one attempt row.
export * from './claims.js';
export * from './health.js';
export * from './history.js';
export * from '../../eventlog/log.js';
export * from './pruning.js';
export * from './results.js';
export * from './retries.js';
