// A delivery process (DELIVERY_WORKERS, processes.ts): the delivery engine alone, on PostgreSQL,
// forked by the service's HTTP process after it migrated the database. It reports its counters to
// the parent once a second and stops as the service does (SIGTERM, or its parent gone): finishes
// its requests, writes their results, hands its claims back, exits.
import pino from 'pino';
import { loadSecretsKey } from '../auth/crypto.js';
import { loadConfig } from '../config.js';
import { createPostgres } from '../db/db.js';
import { logPoisonTo, poisonCounts } from '../ops/poison.js';
import { Partitions, withPartitions } from '../storage/partitions.js';
import { policyOf } from './address.js';
import { type DeliveryReport, deliveryEngine } from './processes.js';

const cfg = loadConfig();
if (!cfg.DATABASE_URL) throw new Error('a delivery process needs PostgreSQL (DATABASE_URL)');
const log = pino({ level: cfg.LOG_LEVEL, base: { pid: process.pid, role: 'delivery', slot: process.env.DELIVERY_PROCESS_SLOT } });
logPoisonTo(log);
const raw = createPostgres(cfg.DATABASE_URL, cfg.DB_POOL_SIZE);
// Results are written at the time they happen: a partition the service has not made yet is made here.
const db = withPartitions(raw, new Partitions(raw, cfg.PARTITION_INTERVAL));
const policy = policyOf(cfg);
const engine = deliveryEngine(db, cfg, loadSecretsKey(cfg, false), policy, log);
const report = () => {
  const r: DeliveryReport = {
    requestsSent: engine.requestsSent,
    resultsParked: engine.resultsParked,
    statements: raw.counts?.statements ?? 0,
    ...engine.eventLog,
    poison: poisonCounts(),
  };
  if (process.connected) process.send?.(r);
};
const reporting = setInterval(report, 1000);
engine.start();

let stopping = false;
const stop = async (why: string) => {
  if (stopping) return;
  stopping = true;
  log.info({ why }, 'delivery process stopping');
  const timer = setTimeout(() => {
    log.error('delivery process stop timed out; exiting');
    process.exit(1);
  }, cfg.SHUTDOWN_TIMEOUT_MS);
  timer.unref();
  clearInterval(reporting);
  try {
    await engine.stop();
    report();
    await db.close();
  } finally {
    process.exit(0);
  }
};
process.on('SIGTERM', () => void stop('SIGTERM'));
// Ctrl-C reaches the whole process group: the parent's SIGTERM, or its exit, decides.
process.on('SIGINT', () => {});
process.on('disconnect', () => void stop('parent gone'));
