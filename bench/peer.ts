// The peer baseline (figure 5): graphile-worker doing the service's push work in the same run, on
// its own schema in a fresh database `tracking_bench_gw`. The worker runs as a child process
// (bench/gw-worker.ts: 64 concurrent jobs, localQueue 500, completeJobBatchDelay 0,
// failJobBatchDelay 0, as in its performance docs); this process adds the jobs in bulk (addJobs,
// 1000 payloads per call, 2 calls in flight, like the REST ingest) and the shared receiver records
// arrivals. Single: one job per location; batch: one job per 100 locations, POSTed as a JSON array.
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { type AddJobsJobSpec, makeWorkerUtils } from 'graphile-worker';
import { freshDatabase, knob, type Receiver, round, startNode, waitArrivals } from './lib.js';
import { BATCH_SIZE, EVENTS } from './push.js';

const DB_NAME = 'tracking_bench_gw';
const CONCURRENCY = knob('BENCH_GW_CONCURRENCY', 64);
const LOCAL_QUEUE = knob('BENCH_GW_LOCAL_QUEUE', 500);
const MAX_POOL = knob('BENCH_GW_MAX_POOL', 25);
const PER_CALL = 1000; // payloads per addJobs call

/** The installed version (its package.json is not exported: read it next to the entry point). */
export const GW_VERSION: string = JSON.parse(
  fs.readFileSync(fileURLToPath(new URL('../package.json', import.meta.resolve('graphile-worker'))), 'utf8'),
).version;

/** A location as the service pushes it (the service's own sample when there is one). */
function payloadMaker(sample: Record<string, unknown> | undefined) {
  const base = sample ?? {
    id: 0,
    assetId: '6f1c3a52-4b8e-4c3e-9f43-0d5f2f4a9b11',
    ownerId: '0b7b3c8e-2f2d-4a8e-8d7a-3e6c1f5b2a90',
    whenCreated: `${new Date().toISOString().slice(0, 19)}Z`,
    latitude: 1,
    longitude: 2,
    altitude: null,
    speed: 10,
    heading: null,
    zoneId: null,
  };
  return (id: number) => ({ ...base, id });
}

async function addAll(add: (specs: AddJobsJobSpec[]) => Promise<unknown>, chunks: AddJobsJobSpec[][]): Promise<void> {
  let next = 0;
  await Promise.all(
    [0, 1].map(async () => {
      while (next < chunks.length) await add(chunks[next++]!);
    }),
  );
}

export async function runPeerBench(rx: Receiver, sample?: Record<string, unknown>) {
  const url = await freshDatabase(DB_NAME);
  const utils = await makeWorkerUtils({ connectionString: url });
  await utils.migrate();
  const worker = await startNode(
    'bench/gw-worker.ts',
    {
      GW_DATABASE_URL: url,
      GW_RECEIVER: rx.base,
      GW_CONCURRENCY: String(CONCURRENCY),
      GW_LOCAL_QUEUE: String(LOCAL_QUEUE),
      GW_MAX_POOL: String(MAX_POOL),
    },
    /gw-ready/,
  );
  const make = payloadMaker(sample);
  const rows: Record<string, unknown>[] = [];
  try {
    for (const mode of ['single', 'batch'] as const) {
      const per = mode === 'single' ? 1 : BATCH_SIZE;
      const sink = rx.sink(`gw-${mode}`);
      // Jobs made before the clock starts, as the service's bodies are.
      let id = 1e12 + (mode === 'single' ? 0 : 1e9);
      const jobs: AddJobsJobSpec[] = Array.from({ length: EVENTS / per }, () =>
        mode === 'single'
          ? { identifier: 'single', payload: make(id++) }
          : { identifier: 'batch', payload: { items: Array.from({ length: per }, () => make(id++)) } },
      );
      const chunks: AddJobsJobSpec[][] = [];
      for (let i = 0; i < jobs.length; i += PER_CALL / per) chunks.push(jobs.slice(i, i + PER_CALL / per));
      const t0 = Date.now();
      await addAll((specs) => utils.addJobs(specs), chunks);
      const addSeconds = (Date.now() - t0) / 1000;
      const complete = await waitArrivals(sink, EVENTS, 120_000 + EVENTS * 2);
      const seconds = ((complete ? sink.lastArrival : Date.now()) - t0) / 1000;
      rows.push({
        mode,
        settings: `${mode === 'single' ? '1 payload' : `${per} payloads`} per job, concurrency ${CONCURRENCY}, localQueue ${LOCAL_QUEUE}, maxPoolSize ${MAX_POOL}, complete/failJobBatchDelay 0`,
        events: EVENTS,
        jobs: jobs.length,
        arrived: sink.count,
        complete,
        addPerSecond: round(EVENTS / addSeconds),
        seconds: round(seconds, 2),
        deliveredPerSecond: round(sink.count / seconds),
        duplicates: sink.duplicates,
      });
    }
  } finally {
    const rss = await worker.stop();
    await utils.release();
    for (const r of rows) r.workerRssMiB = rss;
  }
  return { version: GW_VERSION, rows };
}
