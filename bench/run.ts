// `npm run bench`: the project's benchmarks, against the PostgreSQL at BENCH_PG_URL
// (default postgres://postgres@127.0.0.1:5432/test; a database `tracking_bench` is created and kept,
// so the 10-million-row table is built once).
import os from 'node:os';
import { runIngestBench } from './ingest.js';
import { runPushBench } from './push.js';

const started = Date.now();
console.log(`# asset tracking service benchmark — ${new Date().toISOString()}, ${os.cpus().length} cores, node ${process.version}`);
const only = process.env.BENCH_ONLY; // ingest | push
const ingest = only === 'push' ? null : await runIngestBench();
if (ingest) {
  console.log('\n## Bulk ingest (locations, batches of 1000, 4 in flight) and list latency');
  console.table(ingest);
}
const push = only === 'ingest' ? null : await runPushBench();
if (push) {
  console.log('\n## End-to-end ingest -> webhook delivery, next to a raw HTTP client posting the same bodies');
  console.table(push);
}
console.log(JSON.stringify({ ingest, push }));
console.log(`\nbenchmark took ${Math.round((Date.now() - started) / 1000)} s`);
