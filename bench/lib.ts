// Shared pieces of the benchmarks: knobs, a keep-alive HTTP client for the public API, a local
// webhook receiver, the service as a child process (for its own peak RSS), pacing and waiting.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { createPostgres } from '../src/db/db.js';
import { migrate } from '../src/db/migrate.js';
import { migrationPrograms } from '../src/storage/storage.js';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const ADMIN_URL = process.env.BENCH_PG_URL ?? process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const SECRETS_KEY = crypto.createHash('sha256').update('bench').digest('hex');

/** A numeric knob from the environment. */
export function knob(name: string, def: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return def;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name}=${raw}: must be a number >= 0`);
  return n;
}

/** Waiting for deliveries gives up after this long without a new arrival. */
export const STALL_MS = knob('BENCH_STALL_SECONDS', 60) * 1000;

export function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, ms)));
export const round = (n: number, digits = 0) => (Number.isFinite(n) ? Number(n.toFixed(digits)) : null);
export const pct = (n: number) => (Number.isFinite(n) ? `${Math.round(n * 100)}%` : 'n/a');

/** A database URL for another database on the benchmark's server. */
export function dbUrl(name: string): string {
  const u = new URL(ADMIN_URL);
  u.pathname = `/${name}`;
  return u.toString();
}

/**
 * A database kept between runs (made when missing) and migrated as the service migrates it: its
 * URL, and whether it was made now.
 */
export async function keptDatabase(name: string): Promise<{ url: string; made: boolean }> {
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
  if (!exists.rowCount) await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = dbUrl(name);
  const db = createPostgres(url, 2);
  try {
    await migrate(db, { programs: migrationPrograms('postgres', 'week') });
  } finally {
    await db.close();
  }
  return { url, made: !exists.rowCount };
}

export async function freshDatabase(name: string): Promise<string> {
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  return dbUrl(name);
}

// ---- HTTP client for the public API --------------------------------------------------------------

export interface Answer {
  status: number;
  text: string;
  headers?: http.IncomingHttpHeaders;
}

export function httpRequest(
  agent: http.Agent,
  url: string,
  method: string,
  headers: Record<string, string>,
  body?: string,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const h: Record<string, string | number> = { ...headers };
    if (body !== undefined) h['content-length'] = Buffer.byteLength(body);
    const req = http.request(url, { method, agent, headers: h }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8'), headers: res.headers }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** The service's REST API with a bearer token, over keep-alive connections. */
export class Api {
  readonly agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  token = '';
  constructor(readonly base: string) {}

  async login(): Promise<void> {
    const a = await httpRequest(
      this.agent,
      `${this.base}/auth/realms/tracking/protocol/openid-connect/token`,
      'POST',
      {
        authorization: `Basic ${Buffer.from('tracking-cli:bench-secret').toString('base64')}`,
        'content-type': 'application/x-www-form-urlencoded',
      },
      'grant_type=password&username=operator&password=bench-password',
    );
    if (a.status !== 200) throw new Error(`token: ${a.status} ${a.text.slice(0, 200)}`);
    this.token = (JSON.parse(a.text) as { access_token: string }).access_token;
  }

  /** A raw call; the body is sent as given. */
  send(method: string, apiPath: string, body?: string): Promise<Answer> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.token}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    return httpRequest(this.agent, `${this.base}/api/v1${apiPath}`, method, headers, body);
  }

  /** A call that must succeed (2xx); returns the parsed answer (or null for an empty one). */
  async call(method: string, apiPath: string, body?: unknown): Promise<any> {
    const a = await this.send(method, apiPath, body === undefined ? undefined : JSON.stringify(body));
    if (a.status < 200 || a.status > 299) throw new Error(`${method} ${apiPath}: ${a.status} ${a.text.slice(0, 300)}`);
    return a.text ? JSON.parse(a.text) : null;
  }

  /** Stores a bulk of locations; throws unless all were stored. */
  async postLocations(body: string): Promise<Answer> {
    const a = await this.send('POST', '/locations', body);
    if (a.status !== 201) throw new Error(`POST /locations: ${a.status} ${a.text.slice(0, 300)}`);
    return a;
  }

  close(): void {
    this.agent.destroy();
  }
}

/**
 * Deletes an integration (stopping its delivery). A failed DELETE (a 5xx, e.g. a deadlock with the
 * engine) is retried, then the integration is disabled instead; the failures are reported on stderr.
 */
export async function retire(api: Api, id: string): Promise<void> {
  for (let attempt = 1; attempt <= 5; attempt++) {
    const a = await api.send('DELETE', `/integrations/${id}`);
    if (a.status === 204 || a.status === 200 || a.status === 404) return;
    console.error(`[bench] DELETE /integrations/${id} answered ${a.status} (attempt ${attempt}): ${a.text.slice(0, 200)}`);
    await sleep(200 * attempt);
  }
  const a = await api.send('PATCH', `/integrations/${id}`, JSON.stringify({ enabled: false }));
  console.error(`[bench] disabled integration ${id} instead: PATCH answered ${a.status}`);
}

/** An owner with `n` assets, made through the API. */
export async function ownerWithAssets(api: Api, name: string, n = 50): Promise<{ ownerId: string; assets: string[] }> {
  const owner = await api.call('POST', '/owners', { name });
  const assets: string[] = [];
  for (let i = 0; i < n; i++) assets.push((await api.call('POST', '/assets', { name: `${name}-A${i}`, ownerId: owner.id })).id);
  return { ownerId: owner.id, assets };
}

/** A bulk of `n` locations over `assets` as a JSON body (whenCreated a minute ago: always accepted). */
export function locationsBody(assets: string[], n: number, offset = 0): string {
  const at = new Date(Date.now() - 60_000).toISOString();
  const items = new Array(n);
  for (let i = 0; i < n; i++) {
    items[i] = { assetId: assets[(offset + i) % assets.length], latitude: 1 + (i % 80), longitude: 2, speed: 10, whenCreated: at };
  }
  return JSON.stringify(items);
}

/** Posts `posts` bulks of `size` locations with `inFlight` posts at a time; calls `onStored` after each. */
export async function ingestClosedLoop(
  api: Api,
  assets: string[],
  posts: number,
  size: number,
  inFlight: number,
  onStored?: (n: number) => void,
  stop?: () => boolean,
): Promise<number> {
  let next = 0;
  let stored = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < posts && !stop?.()) {
        const p = next++;
        await api.postLocations(locationsBody(assets, size, p * size));
        stored += size;
        onStored?.(stored);
      }
    }),
  );
  return stored;
}

/**
 * Open-loop ingest: a bulk of `bulk` locations every `intervalMs` for `seconds`, on an absolute
 * schedule (a slow answer does not delay the next post; at most `maxInFlight` posts outstanding).
 * Returns the stored ids (from the answers) and how many were stored.
 */
export async function ingestPaced(
  api: Api,
  assets: string[],
  opts: { bulk: number; intervalMs: number; seconds: number; maxInFlight?: number; stop?: () => boolean },
): Promise<{ ids: string[]; stored: number; failed: number; seconds: number }> {
  const ids: string[] = [];
  let failed = 0;
  let inFlight = 0;
  const maxInFlight = opts.maxInFlight ?? 256;
  const pending = new Set<Promise<void>>();
  const t0 = performance.now();
  const end = t0 + opts.seconds * 1000;
  let due = t0;
  let k = 0;
  while (performance.now() < end && !opts.stop?.()) {
    while (inFlight >= maxInFlight) await Promise.race(pending);
    inFlight++;
    const p: Promise<void> = api
      .postLocations(locationsBody(assets, opts.bulk, k++ * opts.bulk))
      .then(
        (a) => {
          for (const r of JSON.parse(a.text) as { id: string | number }[]) ids.push(String(r.id));
        },
        () => {
          failed += opts.bulk;
        },
      )
      .finally(() => {
        inFlight--;
        pending.delete(p);
      });
    pending.add(p);
    due += opts.intervalMs;
    const now = performance.now();
    if (due < now - 1000) due = now; // more than a second behind: do not burst to catch up
    await sleep(due - now);
  }
  const seconds = (performance.now() - t0) / 1000;
  await Promise.all(pending);
  return { ids, stored: ids.length, failed, seconds };
}

// ---- the receiver ---------------------------------------------------------------------------------

/** One endpoint of the receiver: what arrived there, by the pushed object's `id`. */
export class Sink {
  /** id -> Date.now() at its first arrival. */
  readonly arrivals = new Map<string, number>();
  requests = 0;
  duplicates = 0;
  lastArrival = 0;
  /** Bodies as received: the first, and the first with at least `sampleItems` objects. */
  firstBody: string | null = null;
  sampleBody: string | null = null;
  /** Answer after this many ms (a slow endpoint). */
  delayMs = 0;
  readonly held = new Set<http.ServerResponse>();
  constructor(
    readonly name: string,
    readonly sampleItems = 1,
  ) {}
  get count(): number {
    return this.arrivals.size;
  }
  reset(): void {
    this.arrivals.clear();
    this.requests = 0;
    this.duplicates = 0;
    this.lastArrival = 0;
  }
}

/** The objects in a pushed body: an array, one object, or an envelope holding an array. */
export function objectsOf(body: unknown): { id?: unknown }[] {
  if (Array.isArray(body)) return body;
  if (body && typeof body === 'object') {
    if ('id' in body) return [body as { id: unknown }];
    for (const v of Object.values(body)) if (Array.isArray(v)) return v;
  }
  return [];
}

/** A local HTTP receiver: POST /<sink name> records arrivals and answers 200 (after the sink's delay). */
export class Receiver {
  readonly sinks = new Map<string, Sink>();
  readonly server: http.Server;
  base = '';
  constructor(readonly parse = true) {
    this.server = http.createServer((req, res) => {
      const sink = this.sinks.get((req.url ?? '/').slice(1).split('?')[0]!);
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const answer = () => {
          if (sink) sink.held.delete(res);
          if (!res.writableEnded) res.writeHead(200, { 'content-type': 'application/json' }).end('{"success":true}');
        };
        if (!sink) {
          res.writeHead(404).end();
          return;
        }
        sink.requests++;
        const now = Date.now();
        if (this.parse) {
          const text = Buffer.concat(chunks).toString('utf8');
          let objects: { id?: unknown }[] = [];
          try {
            objects = objectsOf(JSON.parse(text));
          } catch {
            /* not JSON: counted as a request only */
          }
          sink.firstBody ??= text;
          if (sink.sampleBody === null && objects.length >= sink.sampleItems) sink.sampleBody = text;
          for (const o of objects) {
            const id = String(o.id);
            if (sink.arrivals.has(id)) sink.duplicates++;
            else sink.arrivals.set(id, now);
          }
          if (objects.length) sink.lastArrival = now;
        }
        if (sink.delayMs > 0) {
          sink.held.add(res);
          setTimeout(answer, sink.delayMs);
        } else answer();
      });
    });
    this.server.keepAliveTimeout = 60_000;
    this.server.headersTimeout = 70_000;
    this.server.requestTimeout = 0;
  }

  async listen(): Promise<void> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.base = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  sink(name: string, sampleItems = 1): Sink {
    const s = new Sink(name, sampleItems);
    this.sinks.set(name, s);
    return s;
  }

  url(sink: Sink): string {
    return `${this.base}/${sink.name}`;
  }

  /** Answers every held (slow) request now. */
  release(sink: Sink): void {
    sink.delayMs = 0;
    for (const res of sink.held) if (!res.writableEnded) res.writeHead(200).end('{"success":true}');
    sink.held.clear();
  }

  async close(): Promise<void> {
    for (const s of this.sinks.values()) this.release(s);
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }
}

/**
 * Waits until `sink` holds `target` objects, no new one has arrived for STALL_MS, or `deadlineMs`
 * passed. Returns whether all arrived.
 */
export async function waitArrivals(sink: Sink, target: number, deadlineMs = 3600_000): Promise<boolean> {
  const t0 = Date.now();
  let seen = sink.count;
  let progressAt = t0;
  while (sink.count < target) {
    const now = Date.now();
    if (sink.count !== seen) {
      seen = sink.count;
      progressAt = now;
    }
    if (now - progressAt > STALL_MS || now - t0 > deadlineMs) return false;
    await sleep(20);
  }
  return true;
}

/** Raw HTTP client baseline: posts `bodies` to `url` with `concurrency` in flight; returns seconds. */
export async function rawClient(url: string, bodies: string[], concurrency: number): Promise<number> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < bodies.length) {
        const a = await httpRequest(agent, url, 'POST', { 'content-type': 'application/json' }, bodies[next++]!);
        if (a.status !== 200) throw new Error(`raw client: ${a.status}`);
      }
    }),
  );
  agent.destroy();
  return (performance.now() - t0) / 1000;
}

// ---- latency ---------------------------------------------------------------------------------------

/**
 * Store times (event_log.when_created, epoch ms) of location ids, read from PostgreSQL; `since`
 * (epoch ms, a bound below every store time wanted) narrows the scan.
 */
export async function storeTimes(db: pg.Pool, ids: string[], since = 0): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  // A baseline from before the event log (bench/baseline.ts) kept the same columns in `outbox`.
  const { rows: named } = await db.query<{ log: string | null }>(`SELECT to_regclass('event_log')::text AS log`);
  const table = named[0]?.log ? 'event_log' : 'outbox';
  for (let i = 0; i < ids.length; i += 50_000) {
    const { rows } = await db.query<{ object_id: string; at: number }>(
      `SELECT object_id, (extract(epoch FROM when_created) * 1000)::float8 AS at
         FROM ${table} WHERE when_created >= to_timestamp($2::float8 / 1000) AND object_type = 'location' AND object_id = ANY($1::text[])`,
      [ids.slice(i, i + 50_000), since],
    );
    for (const r of rows) out.set(r.object_id, Number(r.at));
  }
  return out;
}

/** Store -> first arrival latencies (ms, sorted) of the stored ids that arrived. */
export function latencies(sink: Sink, stored: Map<string, number>, ids: Iterable<string>): number[] {
  const lat: number[] = [];
  for (const id of ids) {
    const at = sink.arrivals.get(id);
    const s = stored.get(id);
    if (at !== undefined && s !== undefined) lat.push(at - s);
  }
  return lat.sort((a, b) => a - b);
}

// ---- the service as a child process --------------------------------------------------------------

/**
 * VmHWM (peak resident set) of a process and of its child processes (the service's delivery
 * processes) added up, in MiB; NaN when unreadable. The sum of each one's peak: an upper bound of
 * their peak together.
 */
/** Resident memory of a process now, in MiB. */
export function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+)\s+kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : Number.NaN;
}

/** Samples a process's resident memory every 100 ms; `stop` answers the growth over the first sample, in MiB. */
export function rssGrowth(pid: number): { stop(): number } {
  const before = rssMiB(pid);
  let peak = before;
  const timer = setInterval(() => {
    peak = Math.max(peak, rssMiB(pid));
  }, 100);
  return {
    stop() {
      clearInterval(timer);
      return Math.round((Math.max(peak, rssMiB(pid)) - before) * 10) / 10;
    },
  };
}

/**
 * `own(pid)` summed over a process and its child processes (the service's delivery processes), a
 * child that ended meanwhile left out; NaN when the process itself is unreadable.
 */
function overProcessTree(pid: number | undefined, own: (pid: number) => number): number {
  if (pid === undefined) return NaN;
  try {
    let sum = own(pid);
    for (const child of fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(' ').filter(Boolean)) {
      const c = overProcessTree(Number(child), own);
      if (Number.isFinite(c)) sum += c;
    }
    return sum;
  } catch {
    return NaN;
  }
}

/**
 * CPU seconds (user + system) a process and its child processes have used so far; NaN when
 * unreadable. Take it before and after a window.
 */
export function cpuSeconds(pid: number | undefined): number {
  return overProcessTree(pid, (p) => {
    // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
    const stat = fs.readFileSync(`/proc/${p}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / CLOCK_TICKS;
  });
}

/**
 * Milliseconds the threads of a process and of its child processes have waited so far on a run
 * queue, runnable but without a core (the second field of each thread's /proc schedstat); NaN when
 * unreadable. Take it before and after a window: with the CPU time, it says whether the service
 * waited for a core or for something of its own.
 */
export function runQueueWaitMs(pid: number | undefined): number {
  return overProcessTree(pid, (p) => {
    let ms = 0;
    for (const t of fs.readdirSync(`/proc/${p}/task`)) {
      try {
        ms += Number(fs.readFileSync(`/proc/${p}/task/${t}/schedstat`, 'utf8').split(' ')[1]) / 1e6;
      } catch {
        /* the thread ended */
      }
    }
    return ms;
  });
}

/**
 * Milliseconds so far in which at least one task of the machine waited for a core (the kernel's
 * pressure stall information, "some"); NaN without it. Take it before and after a window.
 */
export function cpuPressureMs(): number {
  try {
    return Number(/^some .*total=(\d+)/m.exec(fs.readFileSync('/proc/pressure/cpu', 'utf8'))?.[1]) / 1000;
  } catch {
    return NaN;
  }
}

/** The kernel's clock ticks per second (USER_HZ), 100 on Linux. */
const CLOCK_TICKS = 100;

export function peakRssMiB(pid: number | undefined): number {
  if (pid === undefined) return NaN;
  try {
    const m = /VmHWM:\s+(\d+)\s+kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    if (!m) return NaN;
    let kb = Number(m[1]);
    for (const child of fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(' ').filter(Boolean)) {
      const c = peakRssMiB(Number(child));
      if (Number.isFinite(c)) kb += c * 1024;
    }
    return Math.round(kb / 1024);
  } catch {
    return NaN;
  }
}

export interface Child {
  proc: ChildProcess;
  /** The lines it printed (last 200). */
  output: string[];
  /** How many error or fatal log lines it printed, and the first 10 of them. */
  errors: { count: number; first: string[] };
  peakRssMiB(): number;
  /** SIGTERM, then SIGKILL after 20 s; resolves to the peak RSS read just before. */
  stop(): Promise<number>;
}

/** Runs `node --import tsx <script>` from the repository root, resolving once a line matches `ready`. */
export async function startNode(
  script: string,
  env: Record<string, string>,
  ready: RegExp,
  timeoutMs = 90_000,
  nodeArgs = ['--import', 'tsx'],
  cwd = ROOT,
): Promise<Child & { match: RegExpExecArray }> {
  // BENCH_NODE_ARGS adds node flags to the child (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof" to profile it).
  const extra = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const proc = spawn(process.execPath, [...extra, ...nodeArgs, script], {
    cwd,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  const errors = { count: 0, first: [] as string[] };
  let exited = false;
  const exit = new Promise<void>((r) =>
    proc.on('exit', () => {
      exited = true;
      r();
    }),
  );
  const match = await new Promise<RegExpExecArray>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${script} did not start in ${timeoutMs} ms:\n${output.join('\n')}`)), timeoutMs);
    let buf = '';
    const onData = (c: Buffer) => {
      buf += c.toString('utf8');
      const lines = buf.split('\n');
      buf = lines.pop()!;
      for (const line of lines) {
        output.push(line);
        if (output.length > 200) output.shift();
        if (/"level":(50|60)\b/.test(line)) {
          errors.count++;
          if (errors.first.length < 10) errors.first.push(line.slice(0, 2000));
        }
        const m = ready.exec(line);
        if (m) {
          clearTimeout(timer);
          resolve(m);
        }
      }
    };
    proc.stdout!.on('data', onData);
    proc.stderr!.on('data', onData);
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${script} exited (${code}) before it was ready:\n${output.join('\n')}`));
    });
  });
  return {
    proc,
    output,
    errors,
    match,
    peakRssMiB: () => peakRssMiB(proc.pid),
    async stop() {
      const peak = peakRssMiB(proc.pid);
      if (!exited) {
        proc.kill('SIGTERM');
        const t = setTimeout(() => proc.kill('SIGKILL'), 20_000);
        await exit;
        clearTimeout(t);
      }
      return peak;
    },
  };
}

/** The service's environment for a benchmark: engine defaults, REST limits raised, local webhooks allowed. */
export function serviceEnv(extra: Record<string, string>): Record<string, string> {
  return {
    SECRETS_KEY,
    LOG_LEVEL: 'error',
    PORT: '0',
    HOST: '127.0.0.1',
    RATE_LIMIT_MAX: '10000000',
    RATE_LIMIT_CONCURRENT: '1000',
    TOKEN_LIFE_SECONDS: '86400',
    BOOTSTRAP_CLIENT_SECRET: 'bench-secret',
    BOOTSTRAP_PASSWORD: 'bench-password',
    PUSH_ALLOW_HTTP: 'true',
    PUSH_ALLOWED_NETWORKS: '127.0.0.0/8',
    // One HTTP process, as the previous releases had, unless a part measures more (the ingest part).
    HTTP_WORKERS: '1',
    ...extra,
    // BENCH_SERVICE_ENV="NAME=value,NAME=value" overrides the service's settings, for experiments
    // (the figures in the README are taken without it, with the engine's defaults).
    ...Object.fromEntries(
      (process.env.BENCH_SERVICE_ENV ?? '')
        .split(',')
        .filter((kv) => kv.includes('='))
        .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
    ),
  };
}

/**
 * The service as `npm start` runs it (built to dist/ when a source changed, then `node` with the
 * start script's flags, `dist/main.js`), as a child process; `base` is its address.
 */
export async function startService(extra: Record<string, string>, root = ROOT): Promise<Child & { base: string }> {
  const built = spawnSync(process.execPath, ['scripts/build-if-changed.mjs'], { cwd: root, stdio: 'inherit' });
  if (built.status !== 0) throw new Error('the service did not build');
  const start = (JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start;
  // `npm start`'s line: `... && [NAME=value ...] node [flags] dist/main.js`.
  const m = /&& ((?:[A-Z_]+=\S+ )*)node (.*?)dist\/main\.js/.exec(start);
  const startEnv = Object.fromEntries(
    (m?.[1] ?? '')
      .split(' ')
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
  const flags = m?.[2]?.split(' ').filter(Boolean) ?? [];
  const child = await startNode('dist/main.js', { ...startEnv, ...serviceEnv(extra) }, /listening on (http:\/\/\S+)/, 90_000, flags, root);
  return { ...child, base: child.match[1]! };
}
