// The peer baseline's worker process (see peer.ts): graphile-worker with the batching settings of
// its performance docs, and two tasks that POST the job's payload to the benchmark's receiver over
// keep-alive connections. Configured by GW_DATABASE_URL, GW_RECEIVER, GW_CONCURRENCY,
// GW_LOCAL_QUEUE, GW_MAX_POOL; prints "gw-ready" once it is waiting for jobs.
import http from 'node:http';
import { Logger, run } from 'graphile-worker';

const concurrency = Number(process.env.GW_CONCURRENCY ?? 64);
const receiver = process.env.GW_RECEIVER!;
const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });

function post(path: string, body: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${receiver}/${path}`,
      { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      (res) => {
        res.resume();
        res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`receiver answered ${res.statusCode}`))));
      },
    );
    req.on('error', reject);
    req.setTimeout(10_000, () => req.destroy(new Error('timeout')));
    req.end(body);
  });
}

const runner = await run({
  noHandleSignals: true,
  logger: new Logger(() => (level, message) => {
    if (level === 'error') console.error(`graphile-worker: ${message}`);
  }),
  preset: {
    worker: {
      connectionString: process.env.GW_DATABASE_URL,
      concurrentJobs: concurrency,
      maxPoolSize: Number(process.env.GW_MAX_POOL ?? 25),
      localQueue: { size: Number(process.env.GW_LOCAL_QUEUE ?? 500) },
      completeJobBatchDelay: 0,
      failJobBatchDelay: 0,
    },
  },
  taskList: {
    single: async (payload) => post('gw-single', JSON.stringify(payload)),
    batch: async (payload) => post('gw-batch', JSON.stringify((payload as { items: unknown[] }).items)),
  },
});
console.log('gw-ready');
process.on('SIGTERM', () => {
  runner.stop().then(
    () => process.exit(0),
    () => process.exit(1),
  );
});
