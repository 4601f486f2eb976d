// `npm run bench`: the project's benchmarks, against the PostgreSQL at BENCH_PG_URL
// (default postgres://postgres@127.0.0.1:5432/test; a database `tracking_bench` is created and kept,
// so the 10-million-row table is built once; `tracking_bench_push` and `tracking_bench_gw` are made
// afresh each run). BENCH_ONLY picks parts, comma-separated: ingest, push (= single, batch,
// backlog, sustain), peer, latency, pglite, fairness, brokers (= kafka, mqtt: bench/brokers.ts, on
// `tracking_bench_brokers`, the shared Kafka at 127.0.0.1:19092 and a private Mosquitto), alerts
// (bench/alerts.ts: reefer ingest with and without alert evaluation, on `tracking_bench_alerts`),
// email (bench/email.ts: an alert's store-to-mailbox latency over SMTP next to the same alert as a
// Slack webhook, on `tracking_bench_email`),
// commands (bench/commands.ts: a command's round trip to an MQTT device on the machine's Mosquitto,
// next to the broker alone, on `tracking_bench_commands`),
// storage (bench/storage.ts: bytes, WAL and rows written per record, partitioned next to
// unpartitioned ingest and lists at 10 million rows, removing an expired partition; not in the default run),
// exports (bench/exports.ts: 10 million locations as CSV and NDJSON next to a raw COPY, memory sampled;
// not in the default run), reports (bench/reports.ts: trips and temperature reports over 30 days of
// minute data next to raw reads of the same rows, ingest with rollups next to without; not in the default run),
// ingest-devices (bench/devices.ts: OsmAnd positions next to single-record POST /locations, MQTT ingest next to raw
// Mosquitto; not in the default run), scale (bench/scale.ts: the primary's rows, WAL, statements and CPU per stored
// record and per delivered event, delivery over 1-3 instances; not in the default run).
// http-workers (bench/http-workers.ts: REST bulk ingest with 1, 2 and 4 HTTP processes, HTTP_WORKERS,
// alternating rounds). `latency` runs its shapes on today's service and on a baseline commit in turn (BENCH_BASELINE,
// default dfd22b3, built once in a git worktree under .cache/bench-baseline; "off" leaves it out),
// BENCH_ROUNDS rounds (2), and reports the medians side by side with their ratio (bench/baseline.ts).
// Prints tables, then one JSON line.
import os from 'node:os';
import { type AlertBenchResult, runAlertsBench } from './alerts.js';
import { runEmailBench } from './email.js';
import { runCommandsBench } from './commands.js';
import { runIngestBench } from './ingest.js';
import { HTTP_PROCESS_COUNTS, runHttpWorkersBench } from './http-workers.js';
import { runStorageBench } from './storage.js';
import { runExportsBench } from './exports.js';
import { runReportsBench } from './reports.js';
import { runDevicesBench } from './devices.js';
import { runScaleBench } from './scale.js';
import { pct, Receiver, round } from './lib.js';
import { GW_VERSION, runPeerBench } from './peer.js';
import { PGLITE_RATES, runPgliteBench } from './pglite.js';
import { baselineRoot } from './baseline.js';
import { type PushPart, type PushResults, RAW_CONCURRENCY, runLatencyBench, runPushBench, type Steady } from './push.js';
import { BROKER_BACKLOG, type BrokerPart, type BrokerResults, runBrokersBench, tableRows } from './brokers.js';

const PARTS = [
  'ingest',
  'http-workers',
  'single',
  'batch',
  'backlog',
  'sustain',
  'peer',
  'latency',
  'pglite',
  'fairness',
  'kafka',
  'mqtt',
  'alerts',
  'email',
  'commands',
  'storage',
  'exports',
  'reports',
  'ingest-devices',
  'scale',
] as const;
type Part = (typeof PARTS)[number];
const GROUPS: Record<string, Part[]> = { push: ['single', 'batch', 'backlog', 'sustain'], brokers: ['kafka', 'mqtt'] };

function selection(): Set<Part> {
  const raw = (process.env.BENCH_ONLY ?? '').trim();
  if (!raw)
    return new Set(PARTS.filter((p) => p !== 'storage' && p !== 'exports' && p !== 'reports' && p !== 'ingest-devices' && p !== 'scale'));
  const out = new Set<Part>();
  for (const t of raw.split(',').map((s) => s.trim().toLowerCase())) {
    if (GROUPS[t]) for (const p of GROUPS[t]) out.add(p);
    else if ((PARTS as readonly string[]).includes(t)) out.add(t as Part);
    else throw new Error(`BENCH_ONLY: unknown part "${t}" (one of push, brokers, ${PARTS.join(', ')})`);
  }
  return out;
}

const started = Date.now();
const sel = selection();
console.log(
  `# asset tracking service benchmark — ${new Date().toISOString()}, ${os.cpus().length} cores, node ${process.version}, parts: ${[...sel].join(', ')}`,
);

const ingest = sel.has('ingest') ? await runIngestBench() : null;
if (ingest) {
  console.log('\n## Bulk ingest (locations, batches of 1000, 4 in flight), with 3 webhook integrations matching, and list latency');
  console.table(ingest);
}

const httpWorkers = sel.has('http-workers') ? await runHttpWorkersBench() : null;
if (httpWorkers) {
  console.log(
    `\n## REST bulk ingest (bulks of 1000, 16 in flight) with ${HTTP_PROCESS_COUNTS.join(', ')} HTTP processes (HTTP_WORKERS), alternating rounds`,
  );
  console.table(httpWorkers.runs);
}

const storage = sel.has('storage') ? await runStorageBench() : null;
if (storage) {
  console.log('\n## Storage: what the partition count costs a query (server planning + execution, p50 of 60)');
  console.table(storage.widths);
  console.log('\n## Storage: bytes, WAL and rows written per stored record (partitioned layout, 20,000 of each type)');
  console.table(storage.perType);
  console.log('\n## Storage: rows written per delivered event (10,000 locations, one integration)');
  console.table(storage.channels);
  console.log('\n## Storage: REST bulk ingest (bulks of 1000, 4 in flight, 60 per round), partitioned / unpartitioned, alternating rounds');
  console.table([storage.ingest]);
  console.log('\n## Storage: lists at >= 10 million locations (through the API, 1 in flight)');
  console.table(storage.lists);
  console.log('\n## Storage: removing one expired partition while ingesting');
  console.table([storage.drop]);
}

const exportsBench = sel.has('exports') ? await runExportsBench() : null;
if (exportsBench) {
  console.log("\n## Exports: one owner's locations through GET /locations?format=..., next to psql's raw COPY of the same rows");
  console.table(exportsBench);
}

const reports = sel.has('reports') ? await runReportsBench() : null;
if (reports) {
  console.log('\n## Reports: trips of one asset over 30 days of minute positions, next to the raw read of the same rows');
  console.table(reports.trips);
  console.log('\n## Reports: temperature of 100 reefers over 30 days of minute data, next to psql COPY of the same values');
  console.table(reports.temperature);
  console.log('\n## Rollups: REST ingest (reefer data and locations) with rollups kept up to date, next to without');
  console.table(reports.ingest);
}

const scale = sel.has('scale') ? await runScaleBench() : null;
if (scale) {
  console.log('\n## Scale: what the primary does per stored record and per delivered event (PostgreSQL and Kafka modes)');
  console.table(scale);
}
const devices = sel.has('ingest-devices') ? await runDevicesBench() : null;
if (devices) {
  console.log('\n## Devices: OsmAnd positions over keep-alive, one per request, next to single-record POST /locations');
  console.table(devices);
}

const alerts: AlertBenchResult | null = sel.has('alerts') ? await runAlertsBench() : null;
if (alerts) {
  console.log(
    '\n## Reefer data bulk ingest (1000 per post, 4 in flight) with alert evaluation, next to the same ingest without specifications',
  );
  console.table([alerts]);
}

const email = sel.has('email') ? await runEmailBench() : null;
if (email) {
  console.log('\n## Alert e-mail: store to mailbox (a real SMTP server), 2 alerts a second, next to the same alerts as a Slack webhook');
  console.table(email);
}

const commands = sel.has('commands') ? await runCommandsBench() : null;
if (commands) {
  console.log('\n## Commands to an MQTT device: create to ACKNOWLEDGED read back, one at a time, next to the broker alone');
  console.table(commands);
}

const rx = new Receiver();
await rx.listen();
let push: PushResults | null = null;
let peer: Awaited<ReturnType<typeof runPeerBench>> | null = null;
let pglite: Awaited<ReturnType<typeof runPgliteBench>>[] | null = null;
let latency: Awaited<ReturnType<typeof runLatencyBench>> | null = null;
try {
  // The latency shapes run on services of their own (today's and the baseline's, alternating): below.
  const pushParts = new Set([...sel].filter((p): p is PushPart => ['single', 'batch', 'backlog', 'sustain', 'fairness'].includes(p)));
  if (pushParts.size) {
    // The peer runs between the service's throughput figures and the rest, with the service idle.
    push = await runPushBench(rx, pushParts, async (r) => {
      if (sel.has('peer')) {
        console.error(`[peer] graphile-worker ${GW_VERSION}`);
        peer = await runPeerBench(rx, r.sampleLocation);
      }
    });
  } else if (sel.has('peer')) peer = await runPeerBench(rx);
  if (sel.has('latency')) {
    // Single mode's throughput, when measured in this run, sets the third steady rate (60% of it).
    const single = (push as PushResults | null)?.single?.deliveredPerSecond;
    latency = await runLatencyBench(rx, single ? Math.round(single * 0.6) : undefined);
  }
  if (sel.has('pglite')) {
    pglite = [];
    const base = baselineRoot();
    for (const rate of PGLITE_RATES) {
      console.error(`[pglite] steady ${rate}/s`);
      pglite.push(await runPgliteBench(rx, rate));
      if (base) {
        console.error(`[pglite] steady ${rate}/s, baseline ${base.commit}`);
        pglite.push(await runPgliteBench(rx, rate, base.root, base.commit));
      }
    }
  }
} finally {
  await rx.close();
}
const brokerParts = new Set([...sel].filter((p): p is BrokerPart => p === 'kafka' || p === 'mqtt'));
const brokers: BrokerResults | null = brokerParts.size ? await runBrokersBench(brokerParts) : null;

if (push) {
  const { single, batch, backlog, sustain, fairness } = push;
  const tput = [single, batch].filter((x) => x !== undefined);
  if (tput.length) {
    console.log(
      `\n## Ingest -> webhook delivery (REST bulks of 1000, 2 in flight; end to end from the first post), next to a raw HTTP client (${RAW_CONCURRENCY} in flight) posting bodies the service sent`,
    );
    console.table(tput);
  }
  if (backlog) {
    console.log('\n## Draining a stored backlog (batch integration created disabled, then enabled)');
    console.table([backlog]);
  }
  if (sustain) {
    const { backlogAt, ...rest } = sustain;
    console.log('\n## Sustained batch delivery while ingesting');
    console.table([rest]);
    console.table(backlogAt);
  }
  if (fairness) {
    console.log("\n## Fairness: owner B's healthy integration while owner A's endpoint hangs");
    console.table([fairness]);
  }
}
const lat = latency as Awaited<ReturnType<typeof runLatencyBench>> | null;
if (lat) {
  console.log(
    `\n## Store -> delivered latency, single mode, steady ingest: today's service${lat.baseline ? ` and the baseline ${lat.baseline}, alternating` : ''}`,
  );
  console.table(
    lat.runs.flatMap((r) =>
      [r.steady1k, r.steady5k, r.steadyAt60].filter((x) => x !== undefined).map((x) => ({ service: r.who, round: r.round, ...x })),
    ),
  );
}
const peerRes = peer as Awaited<ReturnType<typeof runPeerBench>> | null;
if (peerRes) {
  console.log(`\n## Peer baseline: graphile-worker ${peerRes.version}, same receiver, same events`);
  console.table(peerRes.rows);
}
if (pglite) {
  console.log(`\n## Embedded database (PGlite), single mode, steady ${PGLITE_RATES.join(' and ')} records/s`);
  console.table(pglite);
}
if (brokers) {
  for (const [name, ch] of Object.entries(brokers)) {
    if (!ch) continue;
    console.log(`\n## Broker delivery: ${name} (delivered = acknowledged by the broker, from the service's attempt log)`);
    for (const [k, v] of Object.entries(ch.broker)) console.log(`- ${k}: ${v}`);
    for (const r of [...ch.backlog, ...ch.raw, ...ch.endToEnd, ...ch.steady])
      console.log(`- ${r.figure}: ${r.settings}; broker count: ${r.brokerHow}`);
    if (ch.backlog.length) console.table(tableRows(ch.backlog));
    if (ch.raw.length) console.table(tableRows(ch.raw));
    if (ch.endToEnd.length) console.table(tableRows(ch.endToEnd));
    if (ch.steady.length) console.table(tableRows(ch.steady));
  }
}

// ---- summary: each figure next to its baseline from this run ---------------------------------------
const summary: { figure: string; measure: string; service: string; baseline: string; ratio: string }[] = [];
const row = (figure: string, measure: string, service: unknown, baseline = '', ratio = '') =>
  summary.push({ figure, measure, service: String(service ?? 'n/a'), baseline, ratio });
const gw = (mode: string) => peerRes?.rows.find((r) => r.mode === mode) as { deliveredPerSecond: number; complete: boolean } | undefined;
const times = (x: number) => (Number.isFinite(x) ? `${x.toFixed(1)}x` : 'n/a');
const done = (complete: boolean) => (complete ? '' : ' (INCOMPLETE)');
if (push?.single) {
  const s = push.single;
  row(
    '1',
    `webhook single: delivered/s, ${s.events} events${done(s.complete)}`,
    s.deliveredPerSecond,
    `raw client ${s.rawClientPerSecond}/s`,
    s.serviceVsRaw,
  );
  const g = gw('single');
  if (g)
    row(
      '1, 5',
      'webhook single vs graphile-worker single',
      s.deliveredPerSecond,
      `graphile-worker ${g.deliveredPerSecond}/s${done(g.complete)}`,
      pct((s.deliveredPerSecond ?? NaN) / g.deliveredPerSecond),
    );
}
if (push?.batch) {
  const b = push.batch;
  row(
    '2',
    `webhook batch of 100: delivered/s, ${b.events} events${done(b.complete)}`,
    b.deliveredPerSecond,
    `REST ingest ${b.ingestPerSecond}/s`,
    b.deliveredVsIngest,
  );
  row('2', 'webhook batch of 100 vs raw client', b.deliveredPerSecond, `raw client ${b.rawClientPerSecond}/s`, b.serviceVsRaw);
  const g = gw('batch');
  if (g)
    row(
      '2, 5',
      'webhook batch vs graphile-worker batch',
      b.deliveredPerSecond,
      `graphile-worker ${g.deliveredPerSecond}/s${done(g.complete)}`,
      pct((b.deliveredPerSecond ?? NaN) / g.deliveredPerSecond),
    );
}
if (push?.backlog) {
  const b = push.backlog;
  row(
    '3',
    `${b.settings.startsWith('single') ? 'single' : 'batch of 100'} draining a stored backlog of ${b.backlog}: delivered/s (${b.arrived} arrived)${done(b.complete)}`,
    b.deliveredPerSecond,
    `REST ingest ${b.ingestPerSecond}/s`,
    pct((b.deliveredPerSecond ?? NaN) / (b.ingestPerSecond ?? NaN)),
  );
}
if (push?.sustain) {
  const s = push.sustain;
  const marks = Object.entries(s.backlogAt)
    .map(([k, v]) => `${k}: ${v.backlog}`)
    .join(', ');
  row(
    '4',
    `batch sustained ${s.windowSeconds} s while ingesting: delivered/s; backlog ${marks}`,
    s.deliveredPerSecond,
    `REST ingest ${s.ingestPerSecond}/s`,
    pct((s.deliveredPerSecond ?? NaN) / (s.ingestPerSecond ?? NaN)),
  );
}
if (!push?.single && !push?.batch && peerRes) {
  for (const r of peerRes.rows as { mode: string; deliveredPerSecond: number }[])
    row('5', `graphile-worker ${r.mode}: delivered/s`, r.deliveredPerSecond);
}
if (lat) {
  // Each figure is the median over the rounds, today's next to the baseline's; the ratio is today's p99 over the baseline's.
  const median = (xs: (number | null | undefined)[]) => {
    const v = xs.filter((x): x is number => typeof x === 'number' && Number.isFinite(x)).sort((a, b) => a - b);
    return v.length ? (v.length % 2 ? v[(v.length - 1) / 2]! : (v[v.length / 2 - 1]! + v[v.length / 2]!) / 2) : NaN;
  };
  const of = (who: string, shape: 'steady1k' | 'steady5k' | 'steadyAt60') =>
    lat.runs.filter((r) => r.who === who && r[shape]).map((r) => r[shape]!);
  for (const [fig, shape] of [
    ['6', 'steady1k'],
    ['7', 'steady5k'],
    ['6b', 'steadyAt60'],
  ] as const) {
    const mine = of('today', shape);
    if (!mine.length) continue;
    const theirs = lat.baseline ? of(lat.baseline, shape) : [];
    const m = (xs: Steady[], k: keyof Steady) => median(xs.map((x) => x[k] as number));
    const complete = mine.every((x) => x.complete) ? '' : ' (INCOMPLETE)';
    const vs = (k: keyof Steady) => (theirs.length ? `${lat.baseline} ${m(theirs, k)}` : '');
    row(
      fig,
      `single, steady ${mine[0]!.offeredPerSecond}/s, median of ${mine.length}: store->delivered p50 / p99 ms${complete}`,
      `${m(mine, 'p50Ms')} / ${m(mine, 'p99Ms')}`,
      theirs.length ? `${lat.baseline} ${m(theirs, 'p50Ms')} / ${m(theirs, 'p99Ms')}` : '',
      theirs.length ? times(m(mine, 'p99Ms') / m(theirs, 'p99Ms')) : '',
    );
    row(fig, '  p99 / p50 (today)', times(m(mine, 'p99Ms') / m(mine, 'p50Ms')));
    row(
      fig,
      '  the tail, from the attempt log: p99 after the first 2 s / p99 wait before the send / p99 send, ms',
      `${m(mine, 'p99AfterFirst2sMs')} / ${m(mine, 'p99WaitBeforeSendMs')} / ${m(mine, 'p99SendMs')}`,
      theirs.length
        ? `${lat.baseline} ${m(theirs, 'p99AfterFirst2sMs')} / ${m(theirs, 'p99WaitBeforeSendMs')} / ${m(theirs, 'p99SendMs')}`
        : '',
    );
    row(
      fig,
      "  the service's CPU per 1,000 records stored and delivered, ms",
      m(mine, 'serviceCpuMsPer1k'),
      vs('serviceCpuMsPer1k'),
      theirs.length ? times(m(mine, 'serviceCpuMsPer1k') / m(theirs, 'serviceCpuMsPer1k')) : '',
    );
    row(
      fig,
      "  waiting for a core: the service's threads, ms per s / the machine (some task waiting), % of the time",
      `${m(mine, 'serviceRunQueueMsPerS')} / ${m(mine, 'cpuPressurePct')}%`,
      theirs.length ? `${lat.baseline} ${m(theirs, 'serviceRunQueueMsPerS')} / ${m(theirs, 'cpuPressurePct')}%` : '',
    );
  }
}
if (ingest) {
  row(
    '8',
    'REST bulk ingest with 3 webhook integrations matching: records/s',
    ingest.api3IntegrationsRecordsPerSecond,
    `raw pg ${ingest.rawPgRecordsPerSecond}/s`,
    String(ingest.api3IntegrationsVsRaw),
  );
  row(
    '8',
    'REST bulk ingest, no integration: records/s',
    ingest.apiRecordsPerSecond,
    `raw pg ${ingest.rawPgRecordsPerSecond}/s`,
    String(ingest.apiVsRaw),
  );
}
if (httpWorkers) {
  const m = httpWorkers.median;
  row(
    '8b',
    `REST bulk ingest, ${HTTP_PROCESS_COUNTS.join(' / ')} HTTP processes: records/s, median of ${httpWorkers.runs.length / HTTP_PROCESS_COUNTS.length}`,
    HTTP_PROCESS_COUNTS.map((n) => m[n]).join(' / '),
    `1 process ${m[1]}/s`,
    HTTP_PROCESS_COUNTS.slice(1)
      .map((n) => `${n}: ${times((m[n] ?? NaN) / (m[1] ?? NaN))}`)
      .join(', '),
  );
}
for (const p of (pglite ?? []).filter((x) => x.service === 'today')) {
  const b = pglite?.find((x) => x.service !== 'today' && x.offeredPerSecond === p.offeredPerSecond);
  row(
    '9',
    `PGlite, single, steady ${p.offeredPerSecond}/s: delivered / stored at window + 5 s; posts failed or timed out (records)`,
    `${p.deliveredAt5s} / ${p.stored}; ${p.failed}`,
    b ? `${b.service} ${b.deliveredAt5s} / ${b.stored}; ${b.failed}` : '',
    p.deliveredVsStored,
  );
  row(
    '9',
    `PGlite ${p.offeredPerSecond}/s: store->delivered p50 / p99 ms`,
    `${p.p50Ms} / ${p.p99Ms}`,
    b ? `${b.service} ${b.p50Ms} / ${b.p99Ms}` : '',
    b ? times((p.p99Ms ?? NaN) / (b.p99Ms ?? NaN)) : '',
  );
}
if (push?.fairness) {
  const f = push.fairness;
  row(
    '10',
    `owner B (20/s) while owner A's endpoint hangs 8 s: p50 / p99 ms (B arrived ${f.bArrived} / ${f.bStored})`,
    `${f.bP50Ms} / ${f.bP99Ms}`,
    `B alone ${f.bAloneP50Ms} / ${f.bAloneP99Ms}`,
    `p99 ${times((f.bP99Ms ?? NaN) / (f.bAloneP99Ms ?? NaN))}`,
  );
}
if (push?.serviceRssPeakMiB !== undefined)
  row('11', 'service peak RSS over the push bench (VmHWM of each process of the service, added up), MiB', push.serviceRssPeakMiB);
for (const p of (pglite ?? []).filter((x) => x.service === 'today')) {
  const b = pglite?.find((x) => x.service !== 'today' && x.offeredPerSecond === p.offeredPerSecond);
  row('11', `service peak RSS, PGlite run at ${p.offeredPerSecond}/s, MiB`, p.serviceRssMiB, b ? `${b.service} ${b.serviceRssMiB}` : '');
}
if (lat) {
  const peak = (who: string) => Math.max(...lat.runs.filter((r) => r.who === who).map((r) => r.serviceRssPeakMiB ?? NaN));
  row(
    '11',
    'service peak RSS over the latency runs (each process of the service, added up), MiB',
    peak('today'),
    lat.baseline ? `${lat.baseline} ${peak(lat.baseline)}` : '',
  );
}
const pgliteErrors = pglite?.reduce((n, p) => n + p.serviceErrorLines, 0);
if (push?.serviceErrorLines || pgliteErrors) {
  row(
    '-',
    'error lines the service logged (see stderr), PostgreSQL / PGlite',
    `${push?.serviceErrorLines ?? '-'} / ${pgliteErrors ?? '-'}`,
  );
}
if (peerRes) row('5', 'graphile-worker process peak RSS, MiB', (peerRes.rows[0] as { workerRssMiB?: number } | undefined)?.workerRssMiB);

if (brokers) {
  const targets: Record<string, number> = { 'Kafka acks=all': 50_000, 'MQTT QoS 1': 25_000, 'MQTT QoS 2': 12_000 };
  for (const ch of [brokers.kafka, brokers.mqtt]) {
    if (!ch) continue;
    for (const b of ch.backlog) {
      const name = b.figure.split(':')[0]!;
      const r = ch.raw.find((x) => x.figure.startsWith(`${name}:`));
      row(
        'B1, B2',
        `${name} draining a stored backlog of ${b.events}: acknowledged/s (target >= ${targets[name]?.toLocaleString('en-US')}/s); broker has ${b.brokerCount ?? 'n/a'}${done(b.complete)}`,
        b.deliveredPerSecond,
        r ? `raw client ${r.perSecond}/s (${r.events} messages)` : '',
        r ? pct((b.deliveredPerSecond ?? NaN) / (r.perSecond ?? NaN)) : '',
      );
    }
    for (const e of ch.endToEnd) {
      row(
        'B3',
        `${e.figure.split(':')[0]} end to end, ${e.events} events ingested while enabled: acknowledged/s (target >= 90% of ingest)${done(e.complete)}`,
        e.deliveredPerSecond,
        `REST ingest ${e.ingestPerSecond}/s`,
        e.deliveredVsIngest,
      );
    }
    for (const s of ch.steady) {
      row(
        'B4',
        `${s.figure.split(':')[0]} steady ${s.offeredPerSecond}/s: store->acknowledged p50 / p99 ms (target p99 < 100); ${s.ackedDistinct} of ${s.stored}${done(s.complete)}`,
        `${s.p50Ms} / ${s.p99Ms}`,
      );
    }
  }
  for (const [name, ch] of Object.entries(brokers)) {
    if (ch) row('B5', `${name}: service peak RSS MiB / error lines it logged`, `${ch.serviceRssPeakMiB} / ${ch.serviceErrorLines}`);
  }
  if (BROKER_BACKLOG < 600_000) row('-', `broker backlog figures with BENCH_BROKER_BACKLOG=${BROKER_BACKLOG} (the issue asks 600000)`, '');
}

if (alerts) {
  row(
    'A1',
    `reefer bulk ingest, a specification on each of 100 assets (target >= 70% of none): records/s; ${alerts.alertsRaised} alerts raised`,
    alerts.withSpecsRecordsPerSecond,
    `no specifications ${alerts.withoutSpecsRecordsPerSecond}/s`,
    alerts.withVsWithout,
  );
}

if (summary.length) {
  console.log('\n## Summary (each figure next to its baseline from this run; ratio = service / baseline)');
  console.table(summary);
}
if (push) delete push.sampleLocation;
console.log(
  JSON.stringify({
    ingest,
    httpWorkers,
    push,
    peer: peerRes,
    pglite,
    brokers,
    alerts,
    email,
    commands,
    storage,
    exports: exportsBench,
    reports,
    devices,
    scale,
    summary,
  }),
);
console.log(`\nbenchmark took ${round((Date.now() - started) / 1000)} s`);
