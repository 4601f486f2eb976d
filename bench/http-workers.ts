// Benchmark part `http-workers`: REST bulk ingest (bulks of 1,000 locations, 16 posts in flight on
// 16 keep-alive connections) as `npm start` runs the service, with 1, 2 and 4 HTTP processes
// (HTTP_WORKERS), in alternating rounds (1 2 4 4 2 1 for two rounds), each on a fresh database.
// Delivery is off: the figure is ingest's alone. The service's CPU (all its processes), the bench's
// own and the machine's are reported next to each rate (PostgreSQL has the rest), so a rate that
// does not grow shows which of them took the cores.
import fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import { Api, cpuSeconds, freshDatabase, knob, locationsBody, ownerWithAssets, round, startService } from './lib.js';

export const HTTP_PROCESS_COUNTS = [1, 2, 4];
const BULK = 1000;
const IN_FLIGHT = 16;
const POSTS = knob('BENCH_HTTP_POSTS', 200);
const WARMUP = 16;
const ROUNDS = knob('BENCH_ROUNDS', 2);

export interface HttpWorkersRun {
  processes: number;
  recordsPerSecond: number;
  /** CPU seconds of the service (every process) per second of the run: how many cores it used. */
  serviceCores: number;
  /** The bench's own CPU (its HTTP client) per second of the run. */
  benchCores: number;
  /** The machine's busy CPU per second of the run, from /proc/stat: PostgreSQL, the bench and the service. */
  machineCores: number;
}

export interface HttpWorkersResult {
  runs: HttpWorkersRun[];
  /** Median records/s by process count. */
  median: Record<number, number>;
}

/** Busy and total jiffies of the whole machine. */
function machineTicks(): { busy: number; total: number } {
  const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const idle = (f[3] ?? 0) + (f[4] ?? 0);
  const total = f.reduce((a, b) => a + b, 0);
  return { busy: total - idle, total };
}

async function once(processes: number): Promise<HttpWorkersRun> {
  const url = await freshDatabase('tracking_bench_http');
  const svc = await startService({ DATABASE_URL: url, HTTP_WORKERS: String(processes), DELIVERY_ENABLED: 'false' });
  const api = new Api(svc.base);
  try {
    await api.login();
    const { assets } = await ownerWithAssets(api, 'http-workers', 100);
    // The bodies are made before the clock starts: the bench's own CPU stays out of the figure.
    const bodies = Array.from({ length: POSTS + WARMUP }, (_, i) => locationsBody(assets, BULK, i * BULK));
    let next = 0;
    const post = async (until: number) => {
      while (next < until) await api.postLocations(bodies[next++]!);
    };
    await Promise.all(Array.from({ length: IN_FLIGHT }, () => post(WARMUP)));
    const cpu0 = cpuSeconds(svc.proc.pid);
    const m0 = machineTicks();
    const b0 = process.cpuUsage();
    const t0 = performance.now();
    await Promise.all(Array.from({ length: IN_FLIGHT }, () => post(POSTS + WARMUP)));
    const seconds = (performance.now() - t0) / 1000;
    const m1 = machineTicks();
    const b1 = process.cpuUsage(b0);
    const cores = fs
      .readFileSync('/proc/stat', 'utf8')
      .split('\n')
      .filter((l) => /^cpu\d/.test(l)).length;
    return {
      processes,
      recordsPerSecond: Math.round((POSTS * BULK) / seconds),
      serviceCores: round((cpuSeconds(svc.proc.pid) - cpu0) / seconds, 2)!,
      benchCores: round((b1.user + b1.system) / 1e6 / seconds, 2)!,
      machineCores: round(((m1.busy - m0.busy) / (m1.total - m0.total)) * cores, 2)!,
    };
  } finally {
    api.close();
    await svc.stop();
  }
}

export async function runHttpWorkersBench(): Promise<HttpWorkersResult> {
  const runs: HttpWorkersRun[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 ? [...HTTP_PROCESS_COUNTS].reverse() : HTTP_PROCESS_COUNTS;
    for (const n of order) {
      const run = await once(n);
      console.error(`[bench] http-workers: ${n} HTTP processes, ${run.recordsPerSecond} records/s, service ${run.serviceCores} cores`);
      runs.push(run);
    }
  }
  const median: Record<number, number> = {};
  for (const n of HTTP_PROCESS_COUNTS) {
    const v = runs
      .filter((x) => x.processes === n)
      .map((x) => x.recordsPerSecond)
      .sort((a, b) => a - b);
    median[n] = v.length % 2 ? v[(v.length - 1) / 2]! : Math.round((v[v.length / 2 - 1]! + v[v.length / 2]!) / 2);
  }
  return { runs, median };
}
