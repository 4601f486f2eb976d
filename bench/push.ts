// Push delivery benchmarks against PostgreSQL: the service runs as a
// child process (`node --import tsx src/main.ts`, engine defaults) on a fresh database
// `tracking_bench_push`; records go in through the REST API with a bearer token, integrations are
// made through the integrations API, and a local receiver records when each pushed object (by its
// `id`) first arrives. Store times come from event_log.when_created, joined on object_id = that `id`.
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { baselineRoot } from './baseline.js';
import {
  Api,
  type Child,
  cpuPressureMs,
  cpuSeconds,
  freshDatabase,
  ingestClosedLoop,
  ingestPaced,
  knob,
  latencies,
  objectsOf,
  retire,
  runQueueWaitMs,
  ownerWithAssets,
  percentile,
  pct,
  type Receiver,
  rawClient,
  round,
  type Sink,
  sleep,
  startService,
  storeTimes,
  waitArrivals,
} from './lib.js';

const DB_NAME = 'tracking_bench_push';
export const EVENTS = Math.max(1000, Math.round(knob('BENCH_PUSH_EVENTS', 20_000) / 1000) * 1000);
const BACKLOG = Math.max(1000, Math.round(knob('BENCH_BACKLOG', 600_000) / 1000) * 1000);
/** BENCH_BACKLOG_MODE=single drains the backlog in single mode: delivery alone, no ingest beside it. */
const BACKLOG_MODE: 'single' | 'batch' = process.env.BENCH_BACKLOG_MODE === 'single' ? 'single' : 'batch';
const SUSTAIN_SECONDS = knob('BENCH_SUSTAIN_SECONDS', 60);
const SUSTAIN_RATE = knob('BENCH_SUSTAIN_RATE', 0); // records/s offered; 0 = as fast as ingest goes
const STEADY_SECONDS = knob('BENCH_STEADY_SECONDS', 30);
const FAIR_SECONDS = knob('BENCH_FAIRNESS_SECONDS', 30);
const FAIR_BASELINE_SECONDS = knob('BENCH_FAIRNESS_BASELINE_SECONDS', 10);
export const SINGLE_CONCURRENCY = knob('BENCH_SINGLE_CONCURRENCY', 64);
export const BATCH_CONCURRENCY = knob('BENCH_BATCH_CONCURRENCY', 64);
export const BATCH_SIZE = 100;
/** The raw HTTP client baseline's requests in flight. */
export const RAW_CONCURRENCY = 64;
/** REST ingest for the throughput figures: bulks of 1000, 2 in flight. */
const BULK = 1000;
const INGEST_IN_FLIGHT = 2;

export type PushPart = 'single' | 'batch' | 'backlog' | 'sustain' | 'latency' | 'fairness';

const deadlineFor = (events: number) => 120_000 + events * 2;

interface Ctx {
  api: Api;
  rx: Receiver;
  db: pg.Pool;
  svc: Child;
  n: number;
  sampleLocation?: Record<string, unknown>;
}

/** Single or batch settings for an integration. */
const webhook = (mode: 'single' | 'batch', extra: Record<string, unknown> = {}) =>
  mode === 'single'
    ? { mode, maxConcurrentRequests: SINGLE_CONCURRENCY, ...extra }
    : { mode, batchSize: BATCH_SIZE, maxConcurrentRequests: BATCH_CONCURRENCY, ...extra };

async function integration(ctx: Ctx, name: string, ownerId: string, sink: Sink, hook: Record<string, unknown>, enabled = true) {
  return ctx.api.call('POST', '/integrations', {
    name,
    channel: 'webhook',
    enabled,
    ownerIds: [ownerId],
    objectTypes: ['location'],
    destination: ctx.rx.url(sink),
    webhook: hook,
  });
}

const owner = (ctx: Ctx, name: string) => ownerWithAssets(ctx.api, `${name}-${ctx.n++}`);

const stats = (lat: number[]) => ({
  p50Ms: round(percentile(lat, 50)),
  p99Ms: round(percentile(lat, 99)),
  maxMs: round(lat[lat.length - 1] ?? NaN),
});

/** Figures 1 and 2: EVENTS locations ingested (bulks of 1000, 2 in flight), all delivered. */
async function throughput(ctx: Ctx, mode: 'single' | 'batch') {
  const { ownerId, assets } = await owner(ctx, `push-${mode}`);
  const sink = ctx.rx.sink(`push-${mode}`, mode === 'single' ? 1 : BATCH_SIZE);
  const integ = await integration(ctx, `bench-${mode}`, ownerId, sink, webhook(mode));
  const t0 = Date.now();
  await ingestClosedLoop(ctx.api, assets, EVENTS / BULK, BULK, INGEST_IN_FLIGHT);
  const ingestSeconds = (Date.now() - t0) / 1000;
  const complete = await waitArrivals(sink, EVENTS, deadlineFor(EVENTS));
  const seconds = ((complete ? sink.lastArrival : Date.now()) - t0) / 1000;
  await retire(ctx.api, integ.id);
  const ids = [...sink.arrivals.keys()];
  const lat = latencies(sink, await storeTimes(ctx.db, ids, t0 - 60_000), ids);
  // The raw client: as many bodies as the service sent, each one the service really sent.
  const sample = sink.sampleBody ?? sink.firstBody;
  if (mode === 'single' && sink.firstBody) ctx.sampleLocation = objectsOf(JSON.parse(sink.firstBody))[0] as Record<string, unknown>;
  let rawPerSecond = NaN;
  if (sample) {
    const per = Math.max(1, objectsOf(JSON.parse(sample)).length);
    const requests = Math.ceil(EVENTS / per);
    const rawSink = ctx.rx.sink(`raw-${mode}`);
    const rawSeconds = await rawClient(
      ctx.rx.url(rawSink),
      Array.from({ length: requests }, () => sample),
      RAW_CONCURRENCY,
    );
    rawPerSecond = (requests * per) / rawSeconds;
  }
  const deliveredPerSecond = sink.count / seconds;
  const ingestPerSecond = EVENTS / ingestSeconds;
  return {
    mode,
    settings: mode === 'single' ? `single, ${SINGLE_CONCURRENCY} concurrent` : `batch ${BATCH_SIZE}, ${BATCH_CONCURRENCY} concurrent`,
    events: EVENTS,
    arrived: sink.count,
    complete,
    requests: sink.requests,
    duplicates: sink.duplicates,
    ingestPerSecond: round(ingestPerSecond),
    seconds: round(seconds, 2),
    deliveredPerSecond: round(deliveredPerSecond),
    deliveredVsIngest: pct(deliveredPerSecond / ingestPerSecond),
    rawClientPerSecond: round(rawPerSecond),
    serviceVsRaw: pct(deliveredPerSecond / rawPerSecond),
    ...stats(lat),
    serviceRssMiB: ctx.svc.peakRssMiB(),
  };
}

/** Figure 3: a stored backlog drained by a batch integration enabled after the fact. */
async function backlog(ctx: Ctx) {
  const { ownerId, assets } = await owner(ctx, 'push-backlog');
  const sink = ctx.rx.sink('push-backlog', BACKLOG_MODE === 'single' ? 1 : BATCH_SIZE);
  const integ = await integration(ctx, 'bench-backlog', ownerId, sink, webhook(BACKLOG_MODE), false);
  let t0 = Date.now();
  await ingestClosedLoop(ctx.api, assets, BACKLOG / BULK, BULK, INGEST_IN_FLIGHT);
  const ingestSeconds = (Date.now() - t0) / 1000;
  const arrivedWhileDisabled = sink.count;
  t0 = Date.now();
  await ctx.api.call('PATCH', `/integrations/${integ.id}`, { enabled: true });
  const complete = await waitArrivals(sink, BACKLOG, deadlineFor(BACKLOG));
  const seconds = ((complete ? sink.lastArrival : Date.now()) - t0) / 1000;
  const firstArrival = sink.count ? sink.arrivals.values().next().value! - t0 : NaN;
  await retire(ctx.api, integ.id);
  return {
    settings: `${BACKLOG_MODE === 'single' ? `single, ${SINGLE_CONCURRENCY}` : `batch ${BATCH_SIZE}, ${BATCH_CONCURRENCY}`} concurrent; created disabled, enabled after the backlog was stored`,
    backlog: BACKLOG,
    ingestPerSecond: round(BACKLOG / ingestSeconds),
    arrivedWhileDisabled,
    arrived: sink.count,
    complete,
    firstArrivalMs: round(firstArrival),
    seconds: round(seconds, 2),
    deliveredPerSecond: round(sink.count / seconds),
    duplicates: sink.duplicates,
    serviceRssMiB: ctx.svc.peakRssMiB(),
  };
}

/** Figure 4: batch delivery while ingesting for SUSTAIN_SECONDS; backlog at each third of the window. */
async function sustain(ctx: Ctx) {
  const { ownerId, assets } = await owner(ctx, 'push-sustain');
  const sink = ctx.rx.sink('push-sustain');
  const integ = await integration(ctx, 'bench-sustain', ownerId, sink, webhook('batch'));
  let ingested = 0;
  const t0 = performance.now();
  const end = t0 + SUSTAIN_SECONDS * 1000;
  const marks = [1, 2, 3].map((k) => Math.round((SUSTAIN_SECONDS * k) / 3));
  const backlogAt: Record<string, { ingested: number; delivered: number; backlog: number }> = {};
  const sampler = (async () => {
    for (const s of marks) {
      await sleep(t0 + s * 1000 - performance.now());
      backlogAt[`${s}s`] = { ingested, delivered: sink.count, backlog: ingested - sink.count };
    }
  })();
  if (SUSTAIN_RATE > 0) {
    // A fixed offered rate: bulks of 1000 on a schedule.
    const r = await ingestPaced(ctx.api, assets, {
      bulk: BULK,
      intervalMs: (BULK / SUSTAIN_RATE) * 1000,
      seconds: SUSTAIN_SECONDS,
      maxInFlight: 8,
    });
    ingested = r.stored;
  } else {
    await ingestClosedLoop(
      ctx.api,
      assets,
      Number.MAX_SAFE_INTEGER,
      BULK,
      INGEST_IN_FLIGHT,
      (n) => {
        ingested = n;
      },
      () => performance.now() >= end,
    );
  }
  await sampler;
  const window = (performance.now() - t0) / 1000;
  const deliveredInWindow = backlogAt[`${marks[2]}s`]?.delivered ?? sink.count;
  const ingestedInWindow = backlogAt[`${marks[2]}s`]?.ingested ?? ingested;
  // Then let it drain (bounded), so the next scenario starts on an idle engine.
  const d0 = Date.now();
  const drained = await waitArrivals(sink, ingested, deadlineFor(ingested - sink.count));
  const drainSeconds = ((drained ? Math.max(sink.lastArrival, d0) : Date.now()) - d0) / 1000;
  await retire(ctx.api, integ.id);
  return {
    settings: `batch ${BATCH_SIZE}, ${BATCH_CONCURRENCY} concurrent; ingest ${SUSTAIN_RATE > 0 ? `offered at ${SUSTAIN_RATE}/s` : 'as fast as it goes (bulks of 1000, 2 in flight)'}`,
    windowSeconds: round(window, 1),
    ingestPerSecond: round(ingestedInWindow / SUSTAIN_SECONDS),
    deliveredPerSecond: round(deliveredInWindow / SUSTAIN_SECONDS),
    backlogAt,
    ingestedTotal: ingested,
    drained,
    drainSecondsAfterWindow: round(drainSeconds, 1),
    duplicates: sink.duplicates,
    serviceRssMiB: ctx.svc.peakRssMiB(),
  };
}

/** Figures 6 and 7: single mode at a steady rate; store -> delivered p50/p99. */
async function steady(ctx: Ctx, rate: number, bulk: number) {
  const { ownerId, assets } = await owner(ctx, `push-steady-${rate}`);
  const sink = ctx.rx.sink(`push-steady-${rate}`);
  const integ = await integration(ctx, `bench-steady-${rate}`, ownerId, sink, webhook('single'));
  await sleep(500);
  const since = Date.now() - 60_000;
  const cpu0 = cpuSeconds(ctx.svc.proc.pid);
  const wait0 = runQueueWaitMs(ctx.svc.proc.pid);
  const pressure0 = cpuPressureMs();
  const r = await ingestPaced(ctx.api, assets, { bulk, intervalMs: (bulk / rate) * 1000, seconds: STEADY_SECONDS });
  const waited = runQueueWaitMs(ctx.svc.proc.pid) - wait0;
  const pressure = cpuPressureMs() - pressure0;
  const deliveredAtWindowEnd = sink.count;
  const complete = await waitArrivals(sink, r.stored, deadlineFor(r.stored));
  const cpu = cpuSeconds(ctx.svc.proc.pid) - cpu0;
  await retire(ctx.api, integ.id);
  const lat = latencies(sink, await storeTimes(ctx.db, r.ids, since), r.ids);
  return {
    settings: `single, ${SINGLE_CONCURRENCY} concurrent; bulks of ${bulk} every ${round((bulk / rate) * 1000, 1)} ms for ${STEADY_SECONDS} s`,
    offeredPerSecond: rate,
    storedPerSecond: round(r.stored / r.seconds),
    stored: r.stored,
    deliveredAtWindowEnd,
    arrived: sink.count,
    complete,
    ...stats(lat),
    ...(await tail(ctx.db, integ.id)),
    /** The service's CPU (all its processes) per 1,000 records stored and delivered, ms. */
    serviceCpuMsPer1k: round((cpu / r.stored) * 1e6),
    /** Over the window, per second: how long the service's threads waited for a core, ms. */
    serviceRunQueueMsPerS: round(waited / r.seconds),
    /** Over the window: the share of time in which some task of the machine waited for a core, %. */
    cpuPressurePct: round((pressure / (r.seconds * 1000)) * 100),
    serviceRssMiB: ctx.svc.peakRssMiB(),
  };
}

/**
 * Where the tail lies, from the service's own attempt log (latency_ms: store -> the request's end;
 * response_time_ms: the request itself): p99 after the window's first 2 s (the cold start: new
 * connections, code not yet optimised), p99 of the wait before the send, p99 of the send.
 */
async function tail(db: pg.Pool, integrationId: string) {
  const { rows } = await db.query<{ warm: number; wait: number; send: number }>(
    `WITH a AS (SELECT latency_ms, response_time_ms, when_attempted, min(when_attempted) OVER () AS t0
                  FROM delivery_attempts WHERE integration_id = $1)
     SELECT percentile_disc(0.99) WITHIN GROUP (ORDER BY latency_ms) FILTER (WHERE when_attempted >= t0 + interval '2 s') AS warm,
            percentile_disc(0.99) WITHIN GROUP (ORDER BY latency_ms - response_time_ms) AS wait,
            percentile_disc(0.99) WITHIN GROUP (ORDER BY response_time_ms) AS send
       FROM a`,
    [integrationId],
  );
  const t = rows[0]!;
  return { p99AfterFirst2sMs: t.warm, p99WaitBeforeSendMs: t.wait, p99SendMs: t.send };
}

/** Figure 10: owner B's healthy integration while owner A's endpoint hangs 8 s per request. */
async function fairness(ctx: Ctx) {
  const b = await owner(ctx, 'fair-b');
  const a = await owner(ctx, 'fair-a');
  const sinkB = ctx.rx.sink('fair-b');
  const sinkA = ctx.rx.sink('fair-a');
  sinkA.delayMs = 8000;
  const integB = await integration(ctx, 'bench-fair-b', b.ownerId, sinkB, webhook('single'));
  await sleep(500);
  const since = Date.now() - 60_000;
  // Baseline: B alone, 20 events/s.
  const alone = await ingestPaced(ctx.api, b.assets, { bulk: 1, intervalMs: 50, seconds: FAIR_BASELINE_SECONDS });
  const aloneComplete = await waitArrivals(sinkB, alone.stored, 60_000);
  const aloneLat = latencies(sinkB, await storeTimes(ctx.db, alone.ids, since), alone.ids);
  const aloneArrived = alone.ids.filter((id) => sinkB.arrivals.has(id)).length;
  // With A: A's endpoint answers after 8 s (64 concurrent allowed, 10 s timeout), A gets 200/s.
  const integA = await integration(
    ctx,
    'bench-fair-a',
    a.ownerId,
    sinkA,
    webhook('single', { maxConcurrentRequests: 64, timeoutMs: 10_000 }),
  );
  let stopA = false;
  const aRun = ingestPaced(ctx.api, a.assets, { bulk: 2, intervalMs: 10, seconds: FAIR_SECONDS + 3600, stop: () => stopA });
  await sleep(2000); // A's requests fill its 64 slots first
  sinkB.reset();
  const withA = await ingestPaced(ctx.api, b.assets, { bulk: 1, intervalMs: 50, seconds: FAIR_SECONDS });
  const deliveredAtWindowEnd = withA.ids.filter((id) => sinkB.arrivals.has(id)).length;
  const complete = await waitArrivals(sinkB, withA.stored, 60_000);
  stopA = true;
  const aStored = (await aRun).stored;
  await retire(ctx.api, integA.id);
  await retire(ctx.api, integB.id);
  ctx.rx.release(sinkA);
  const lat = latencies(sinkB, await storeTimes(ctx.db, withA.ids, since), withA.ids);
  const base = stats(aloneLat);
  const loaded = stats(lat);
  return {
    settings: `single, 64 concurrent each; A's endpoint answers after 8 s, A gets 200 records/s; B gets 20/s`,
    bAloneSeconds: FAIR_BASELINE_SECONDS,
    bAloneStored: alone.stored,
    bAloneArrived: aloneArrived,
    bAloneComplete: aloneComplete,
    bAloneP50Ms: base.p50Ms,
    bAloneP99Ms: base.p99Ms,
    withASeconds: FAIR_SECONDS,
    bStored: withA.stored,
    bDeliveredAtWindowEnd: deliveredAtWindowEnd,
    bArrived: withA.ids.filter((id) => sinkB.arrivals.has(id)).length,
    bComplete: complete,
    bP50Ms: loaded.p50Ms,
    bP99Ms: loaded.p99Ms,
    bMaxMs: loaded.maxMs,
    aStored,
    aArrived: sinkA.count,
    serviceRssMiB: ctx.svc.peakRssMiB(),
  };
}

export interface PushResults {
  single?: Awaited<ReturnType<typeof throughput>>;
  batch?: Awaited<ReturnType<typeof throughput>>;
  backlog?: Awaited<ReturnType<typeof backlog>>;
  sustain?: Awaited<ReturnType<typeof sustain>>;
  steady1k?: Awaited<ReturnType<typeof steady>>;
  steady5k?: Awaited<ReturnType<typeof steady>>;
  steadyAt60?: Awaited<ReturnType<typeof steady>>;
  fairness?: Awaited<ReturnType<typeof fairness>>;
  serviceRssPeakMiB?: number;
  /** Error lines the service logged during the push bench. */
  serviceErrorLines?: number;
  /** One location object as the service pushed it (the peer baseline's payload). */
  sampleLocation?: Record<string, unknown>;
}

/**
 * Runs the selected parts against one service process; `between` runs after the single and batch
 * figures (the peer baseline), while the service is up but idle.
 */
export async function runPushBench(
  rx: Receiver,
  parts: Set<PushPart>,
  between?: (r: PushResults) => Promise<void>,
  root?: string,
  /** The latency part also runs single mode steadily at this rate (60% of its throughput), when given. */
  at60?: number,
): Promise<PushResults> {
  const url = await freshDatabase(DB_NAME);
  const svc = await startService({ DATABASE_URL: url }, root);
  const api = new Api(svc.base);
  const db = new pg.Pool({ connectionString: url, max: 2 });
  const ctx: Ctx = { api, rx, db, svc, n: 0 };
  const out: PushResults = {};
  const step = (what: string) => console.error(`[push] ${what} (${new Date().toISOString().slice(11, 19)})`);
  try {
    await api.login();
    if (parts.has('single')) {
      step(`single: ${EVENTS} events`);
      out.single = await throughput(ctx, 'single');
      out.sampleLocation = ctx.sampleLocation;
    }
    if (parts.has('batch')) {
      step(`batch: ${EVENTS} events`);
      out.batch = await throughput(ctx, 'batch');
    }
    if (between) await between(out);
    if (parts.has('backlog')) {
      step(`backlog: ${BACKLOG} events`);
      out.backlog = await backlog(ctx);
    }
    if (parts.has('sustain')) {
      step(`sustain: ${SUSTAIN_SECONDS} s`);
      out.sustain = await sustain(ctx);
    }
    if (parts.has('latency')) {
      step(`steady 1000/s: ${STEADY_SECONDS} s`);
      out.steady1k = await steady(ctx, 1000, 10);
      step(`steady 5000/s: ${STEADY_SECONDS} s`);
      out.steady5k = await steady(ctx, 5000, 50);
      if (at60) {
        step(`steady ${at60}/s (60% of single mode's throughput): ${STEADY_SECONDS} s`);
        out.steadyAt60 = await steady(ctx, at60, Math.max(1, Math.round(at60 / 100)));
      }
    }
    if (parts.has('fairness')) {
      step(`fairness: ${FAIR_BASELINE_SECONDS} s + ${FAIR_SECONDS} s`);
      out.fairness = await fairness(ctx);
    }
  } finally {
    await db.end();
    api.close();
    out.serviceRssPeakMiB = await svc.stop();
    out.serviceErrorLines = svc.errors.count;
    for (const line of svc.errors.first) console.error(`[service error] ${line}`);
  }
  return out;
}

export type Steady = Awaited<ReturnType<typeof steady>>;

/** One service's run of the latency shapes: today's (`who` = "today") or the baseline's (its commit). */
export interface LatencyRun {
  who: string;
  round: number;
  steady1k?: Steady;
  steady5k?: Steady;
  steadyAt60?: Steady;
  serviceRssPeakMiB?: number;
}

/**
 * The latency shapes (steady 1,000/s and 5,000/s, and 60% of single mode's throughput when known)
 * on today's service and on the baseline (bench/baseline.ts) in turn, BENCH_ROUNDS rounds (default
 * 2), each on a fresh database and a fresh service process, in the order A B B A ... so that drift
 * in the machine's load falls on both alike.
 */
export async function runLatencyBench(rx: Receiver, at60?: number): Promise<{ baseline: string | null; runs: LatencyRun[] }> {
  const base = baselineRoot();
  const rounds = Math.max(1, Math.round(knob('BENCH_ROUNDS', 2)));
  const runs: LatencyRun[] = [];
  for (let round = 1; round <= rounds; round++) {
    const sides: { who: string; root?: string }[] = [{ who: 'today' }, ...(base ? [{ who: base.commit, root: base.root }] : [])];
    if (round % 2 === 0) sides.reverse();
    for (const side of sides) {
      console.error(`[latency] round ${round}: ${side.who === 'today' ? "today's service" : `baseline ${side.who}`}`);
      const r = await runPushBench(rx, new Set(['latency']), undefined, side.root, at60);
      runs.push({
        who: side.who,
        round,
        steady1k: r.steady1k,
        steady5k: r.steady5k,
        steadyAt60: r.steadyAt60,
        serviceRssPeakMiB: r.serviceRssPeakMiB,
      });
    }
  }
  return { baseline: base?.commit ?? null, runs };
}
