// The scale benchmark (`BENCH_ONLY=scale`; issue 24's figures): what the primary does per stored
// record and per delivered event, and how delivery spreads over 1, 2 and 3 instances, in the
// PostgreSQL mode and then with the event log on Kafka (the shared broker of scripts/kafka.sh). Per phase it reads, before and after:
//   - rows written: pg_stat_user_tables' inserts, updates and deletes of the bench database
//     (read once the backends have flushed their counters, STATS_FLUSH_MS after the work);
//   - WAL bytes: pg_current_wal_lsn() (the whole cluster: run it on a quiet machine);
//   - statements: the instances' db_statements_total (their delivery processes included);
//   - the primary's CPU: the CPU time of every process of the postgres user (/proc).
// Phases: ingest alone (per stored record); ingest with a webhook integration in single mode and in
// batch mode (per delivered event, the record's own cost left out); then a backlog drained by
// 1, 2 and 3 instances on one database (delivered events/s, and the primary's CPU per event).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import pg from 'pg';
import {
  Api,
  freshDatabase,
  ingestClosedLoop,
  knob,
  ownerWithAssets,
  Receiver,
  retire,
  round,
  sleep,
  startService,
  waitArrivals,
} from './lib.js';

const EVENTS = Math.max(1000, Math.round(knob('BENCH_SCALE_EVENTS', 20_000) / 1000) * 1000);
const BULK = 1000;
/** A backend's statistics reach pg_stat_user_tables at most 10 s after its last transaction (PostgreSQL 15). */
const STATS_FLUSH_MS = knob('BENCH_SCALE_STATS_FLUSH_MS', 11_000);
const TICKS = 100; // clock ticks a second (Linux USER_HZ)

interface Counters {
  rows: number;
  wal: bigint;
  statements: number;
  cpuSeconds: number;
}

/** CPU seconds of every process of the postgres user (the server and its backends). */
function postgresCpuSeconds(): number {
  let pids: string[] = [];
  try {
    pids = execFileSync('pgrep', ['-u', 'postgres'], { encoding: 'utf8' }).split('\n').filter(Boolean);
  } catch {
    return Number.NaN;
  }
  let ticks = 0;
  for (const pid of pids) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(f[11]) + Number(f[12]); // utime, stime
    } catch {
      /* gone */
    }
  }
  return ticks / TICKS;
}

async function statements(bases: string[]): Promise<number> {
  let n = 0;
  for (const base of bases) {
    const text = await (await fetch(`${base}/metrics`)).text();
    n += Number(/^db_statements_total (\d+)/m.exec(text)?.[1] ?? Number.NaN);
  }
  return n;
}

async function counters(db: pg.Pool, bases: string[]): Promise<Counters> {
  const { rows } = await db.query<{ rows: string; wal: string }>(
    `SELECT (SELECT COALESCE(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) FROM pg_stat_user_tables)::text AS rows,
            pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::text AS wal`,
  );
  return {
    rows: Number(rows[0]!.rows),
    wal: BigInt(rows[0]!.wal.split('.')[0]!),
    statements: await statements(bases),
    cpuSeconds: postgresCpuSeconds(),
  };
}

interface Cost {
  rows: number;
  walBytes: number;
  statements: number;
  cpuMs: number;
}

const per = (a: Counters, b: Counters, n: number): Cost => ({
  rows: (b.rows - a.rows) / n,
  walBytes: Number(b.wal - a.wal) / n,
  statements: (b.statements - a.statements) / n,
  cpuMs: ((b.cpuSeconds - a.cpuSeconds) * 1000) / n,
});
const minus = (a: Cost, b: Cost): Cost => ({
  rows: a.rows - b.rows,
  walBytes: a.walBytes - b.walBytes,
  statements: a.statements - b.statements,
  cpuMs: a.cpuMs - b.cpuMs,
});
const shown = (c: Cost) => ({
  rows: round(c.rows, 2),
  walBytes: round(c.walBytes),
  statements: round(c.statements, 3),
  primaryCpuMs: round(c.cpuMs, 3),
});

export interface ScaleRow {
  mode: 'postgres' | 'kafka';
  phase: string;
  per: string;
  rows: number | null;
  walBytes: number | null;
  statements: number | null;
  primaryCpuMs: number | null;
  eventsPerSecond?: number | null;
}

/** The Kafka broker the Kafka mode's event log uses (the shared one of scripts/kafka.sh); unset BENCH_KAFKA=0 skips that mode. */
const KAFKA_BROKERS = process.env.BENCH_KAFKA_BROKERS ?? '127.0.0.1:19092';

/** Both modes, the PostgreSQL one first, each on a fresh database of its own. */
export async function runScaleBench(): Promise<ScaleRow[]> {
  const modes = (process.env.BENCH_SCALE_MODES ?? 'postgres kafka').split(/\s+/).filter(Boolean);
  const out: ScaleRow[] = [];
  if (modes.includes('postgres')) out.push(...(await runScaleMode('postgres')));
  if (modes.includes('kafka')) {
    execFileSync('bash', ['scripts/kafka.sh', 'start'], { stdio: 'inherit' });
    out.push(...(await runScaleMode('kafka')));
  }
  return out;
}

/** Integrations of the phase where each covers one owner's fleet of many. */
const FLEETS = 20;

async function runScaleMode(mode: 'postgres' | 'kafka'): Promise<ScaleRow[]> {
  const url = await freshDatabase(`tracking_bench_scale_${mode === 'postgres' ? 'pg' : 'kafka'}`);
  const db = new pg.Pool({ connectionString: url, max: 2 });
  const rx = new Receiver();
  await rx.listen();
  const run = Date.now().toString(36);
  const env = {
    DATABASE_URL: url,
    DB_POOL_SIZE: '8',
    RATE_LIMIT_MAX: '10000000',
    RATE_LIMIT_CONCURRENT: '1000',
    ...(mode === 'kafka'
      ? {
          EVENT_LOG: 'kafka',
          EVENT_LOG_KAFKA_BROKERS: KAFKA_BROKERS,
          // A topic and a group of this run's own: nothing of an earlier run is read.
          EVENT_LOG_TOPIC: `tracking.bench.event-log.${run}`,
          EVENT_LOG_GROUP: `tracking.bench.delivery.${run}`,
        }
      : {}),
  };
  // The API's instance stores and never delivers; delivery runs in instances of its own, so the
  // backlog below can be drained by 1, 2 and 3 of them started after it was stored.
  const first = await startService({ ...env, DELIVERY_ENABLED: 'false' });
  const delivering = [await startService(env)];
  const out: ScaleRow[] = [];
  const label = (phase: string) => `[scale ${mode}] ${phase}`;
  try {
    const api = new Api(first.base);
    await api.login();
    const bases = () => [first, ...delivering].map((i) => i.base);
    const measured = async (work: () => Promise<void>, n: number): Promise<Cost> => {
      await sleep(STATS_FLUSH_MS);
      const a = await counters(db, bases());
      await work();
      await sleep(STATS_FLUSH_MS);
      return per(a, await counters(db, bases()), n);
    };

    // Ingest alone: the cost of a stored record (in the Kafka mode, its relay to the topic included).
    const alone = await ownerWithAssets(api, 'scale-alone');
    const record = await measured(async () => void (await ingestClosedLoop(api, alone.assets, EVENTS / BULK, BULK, 2)), EVENTS);
    out.push({ mode, phase: 'ingest alone', per: 'stored record', ...shown(record) });
    console.error(`${label('ingest alone')}: ${JSON.stringify(shown(record))}`);

    // Ingest with a webhook integration: the cost of a delivered event, the record's left out.
    for (const webhookMode of ['single', 'batch'] as const) {
      const o = await ownerWithAssets(api, `scale-${webhookMode}`);
      const sink = rx.sink(`scale-${webhookMode}`, webhookMode === 'single' ? 1 : 100);
      const integ = await api.call('POST', '/integrations', {
        name: `scale-${webhookMode}`,
        channel: 'webhook',
        ownerIds: [o.ownerId],
        objectTypes: ['location'],
        destination: rx.url(sink),
        webhook:
          webhookMode === 'single'
            ? { mode: webhookMode, maxConcurrentRequests: 64 }
            : { mode: webhookMode, batchSize: 100, maxConcurrentRequests: 64 },
      });
      let seconds = 0;
      const both = await measured(async () => {
        const t0 = Date.now();
        await ingestClosedLoop(api, o.assets, EVENTS / BULK, BULK, 2);
        if (!(await waitArrivals(sink, EVENTS, 600_000))) throw new Error(`scale: ${webhookMode} delivered ${sink.count} of ${EVENTS}`);
        seconds = (sink.lastArrival - t0) / 1000;
      }, EVENTS);
      await retire(api, integ.id);
      const event = minus(both, record);
      out.push({
        mode,
        phase: `webhook ${webhookMode}${webhookMode === 'batch' ? ' 100' : ''}`,
        per: 'delivered event',
        ...shown(event),
        eventsPerSecond: round(EVENTS / seconds),
      });
      console.error(`${label(webhookMode)}: ${JSON.stringify(shown(event))}`);
    }

    // Many integrations, each for one owner's fleet: the PostgreSQL mode reads the event log once
    // per integration (passing over the others' events), the Kafka mode fans each event out once.
    {
      const fleets: { ownerId: string; assets: string[]; sink: ReturnType<Receiver['sink']>; id: string }[] = [];
      for (let f = 0; f < FLEETS; f++) {
        const o = await ownerWithAssets(api, `scale-fleet${f}`, 5);
        const sink = rx.sink(`scale-fleet${f}`);
        const integ = await api.call('POST', '/integrations', {
          name: `scale-fleet${f}`,
          channel: 'webhook',
          ownerIds: [o.ownerId],
          objectTypes: ['location'],
          destination: rx.url(sink),
          webhook: { mode: 'single', maxConcurrentRequests: 16 },
        });
        fleets.push({ ...o, sink, id: integ.id as string });
      }
      const assets = fleets.flatMap((f) => f.assets);
      let seconds = 0;
      const both = await measured(async () => {
        const t0 = Date.now();
        await ingestClosedLoop(api, assets, EVENTS / BULK, BULK, 2);
        for (const f of fleets) {
          if (!(await waitArrivals(f.sink, EVENTS / FLEETS, 600_000)))
            throw new Error(`scale: fleet delivered ${f.sink.count} of ${EVENTS / FLEETS}`);
        }
        seconds = (Math.max(...fleets.map((f) => f.sink.lastArrival)) - t0) / 1000;
      }, EVENTS);
      for (const f of fleets) await retire(api, f.id);
      const event = minus(both, record);
      out.push({
        mode,
        phase: `webhook single, ${FLEETS} integrations`,
        per: 'delivered event',
        ...shown(event),
        eventsPerSecond: round(EVENTS / seconds),
      });
      console.error(`${label(`${FLEETS} integrations`)}: ${JSON.stringify(shown(event))}`);
    }

    // A backlog stored while no instance delivers, then drained by 1, 2 and 3 instances started
    // together (single mode: the most delivery work per event). Events/s from the first arrival to
    // the last (the instances' start is left out); the counters include their start.
    for (let k = 1; k <= 3; k++) {
      for (const d of delivering.splice(0)) await d.stop();
      const o = await ownerWithAssets(api, `scale-x${k}`);
      const sink = rx.sink(`scale-x${k}`);
      const integ = await api.call('POST', '/integrations', {
        name: `scale-x${k}`,
        channel: 'webhook',
        ownerIds: [o.ownerId],
        objectTypes: ['location'],
        destination: rx.url(sink),
        webhook: { mode: 'single', maxConcurrentRequests: 64 },
      });
      await ingestClosedLoop(api, o.assets, EVENTS / BULK, BULK, 2);
      let seconds = 0;
      const drain = await measured(async () => {
        delivering.push(...(await Promise.all(Array.from({ length: k }, () => startService(env)))));
        if (!(await waitArrivals(sink, EVENTS, 600_000))) throw new Error(`scale: ${k} instances delivered ${sink.count} of ${EVENTS}`);
        seconds = (sink.lastArrival - Math.min(...sink.arrivals.values())) / 1000;
      }, EVENTS);
      await retire(api, integ.id);
      out.push({
        mode,
        phase: `backlog, ${k} instance${k > 1 ? 's' : ''}`,
        per: 'delivered event',
        ...shown(drain),
        eventsPerSecond: round(EVENTS / seconds),
      });
      console.error(`${label(`${k} instances`)}: ${round(EVENTS / seconds)}/s ${JSON.stringify(shown(drain))}`);
    }
    return out;
  } finally {
    for (const i of [first, ...delivering]) await i.stop();
    await rx.close();
    await db.end();
  }
}
