// A delivery process (DELIVERY_WORKERS, delivery/processes.ts): the delivery engine alone, on
// PostgreSQL, assembled by app.ts, forked by the service's HTTP process after it migrated the database. It reports its counters to
// the parent once a second and stops as the service does (SIGTERM, or its parent gone): finishes
// its requests, writes their results, hands its claims back, exits.
import pino from 'pino';
import { buildDeliveryProcess } from './app.js';
import { loadConfig } from './config.js';
import type { DeliveryReport } from './delivery/processes.js';
import { logPoisonTo, poisonCounts } from './ops/poison.js';

const cfg = loadConfig();
const log = pino({ level: cfg.LOG_LEVEL, base: { pid: process.pid, role: 'delivery', slot: process.env.DELIVERY_PROCESS_SLOT } });
logPoisonTo(log);
const { raw, db, engine } = buildDeliveryProcess(cfg, log);
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
