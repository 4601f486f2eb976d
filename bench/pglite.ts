// Figure 9: the embedded database. The service runs as a child process with no DATABASE_URL and a
// fresh DATA_DIR (PGlite); single-mode webhook at steady rates (BENCH_PGLITE_RATES, default 200 and
// 1,000 records/s, each on a fresh service; a bulk every 10 ms, as the latency shapes post) for
// BENCH_STEADY_SECONDS; delivered vs stored at the end of the window + 5 s, and the posts that
// failed or timed out; each rate on today's service and then on the baseline commit (BENCH_BASELINE,
// bench/baseline.ts), when there is one. Store times are read
// from the event log once the service has stopped (PGlite has one process at a time).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { Api, ingestPaced, knob, latencies, ownerWithAssets, percentile, type Receiver, ROOT, round, sleep, startService } from './lib.js';
import { SINGLE_CONCURRENCY } from './push.js';

const STEADY_SECONDS = knob('BENCH_STEADY_SECONDS', 30);

/** The rates the embedded database is measured at (records/s). */
export const PGLITE_RATES = (process.env.BENCH_PGLITE_RATES ?? '200,1000')
  .split(',')
  .map((x) => Number(x.trim()))
  .filter((x) => x > 0);

/** A bulk every 10 ms: its size for `rate` records/s. */
const bulkOf = (rate: number) => Math.max(1, Math.round(rate / 100));

/** One rate on one service: today's (`root` this checkout) or the baseline's (its worktree). */
export async function runPgliteBench(rx: Receiver, rate = 1000, root = ROOT, service = 'today') {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tracking-bench-pglite-'));
  try {
    const svc = await startService({ DATA_DIR: dir }, root);
    const api = new Api(svc.base);
    const sink = rx.sink(`pglite-${rate}-${service}`);
    let r: Awaited<ReturnType<typeof runSteady>>;
    let rss: number;
    try {
      r = await runSteady(api, rx, sink, rate);
    } finally {
      api.close();
      rss = await svc.stop();
      for (const line of svc.errors.first) console.error(`[service error] ${line}`);
    }
    const db = await PGlite.create(path.join(dir, 'pgdata'));
    const stored = new Map<string, number>();
    let eventLogRows = 0;
    try {
      const { rows } = await db.query<{ object_id: string; at: number }>(
        `SELECT object_id, (extract(epoch FROM when_created) * 1000)::float8 AS at FROM event_log WHERE object_type = 'location'`,
      );
      eventLogRows = rows.length;
      for (const row of rows) stored.set(row.object_id, Number(row.at));
    } finally {
      await db.close();
    }
    const lat = latencies(sink, stored, r.ids);
    return {
      service,
      settings: `PGlite (DATA_DIR in ${os.tmpdir()}), single, ${SINGLE_CONCURRENCY} concurrent; bulks of ${bulkOf(rate)} every 10 ms for ${STEADY_SECONDS} s`,
      offeredPerSecond: rate,
      storedPerSecond: round(r.stored / r.seconds),
      stored: r.stored,
      /** Records whose post failed or timed out (the client's own timeout). */
      failed: r.failed,
      eventLogRows,
      deliveredAtWindowEnd: r.atEnd,
      deliveredAt5s: r.after5s,
      deliveredVsStored: `${Math.round((r.after5s / Math.max(1, r.stored)) * 100)}%`,
      p50Ms: round(percentile(lat, 50)),
      p99Ms: round(percentile(lat, 99)),
      maxMs: round(lat[lat.length - 1] ?? NaN),
      serviceRssMiB: rss,
      serviceErrorLines: svc.errors.count,
    };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

async function runSteady(api: Api, rx: Receiver, sink: ReturnType<Receiver['sink']>, rate: number) {
  await api.login();
  const { ownerId, assets } = await ownerWithAssets(api, 'pglite');
  await api.call('POST', '/integrations', {
    name: 'bench-pglite',
    channel: 'webhook',
    ownerIds: [ownerId],
    objectTypes: ['location'],
    destination: rx.url(sink),
    webhook: { mode: 'single', maxConcurrentRequests: SINGLE_CONCURRENCY },
  });
  await sleep(500);
  const r = await ingestPaced(api, assets, { bulk: bulkOf(rate), intervalMs: (bulkOf(rate) / rate) * 1000, seconds: STEADY_SECONDS });
  const arrived = () => r.ids.filter((id) => sink.arrivals.has(id)).length;
  const atEnd = arrived();
  await sleep(5000);
  return { ...r, atEnd, after5s: arrived() };
}
