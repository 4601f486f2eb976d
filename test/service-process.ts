// The service as a child process (`node src/main.js` in the runner's compiled tree, `node --import tsx
// src/main.ts` when a test file runs as TypeScript), for tests that SIGKILL it: it
// listens on a port the system gives (PORT=0) and the test reads the port from its log line; a
// fixed PUBLIC_URL keeps the token issuer, so one token serves every restart.
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { eventLogEnv } from './event-log.js';

const here = fileURLToPath(import.meta.url);
/**
 * The node arguments that run one of the repository's entry files (`src/main.ts`, `scripts/demo.ts`)
 * the way this test runs: from the compiled JavaScript tree the runner made (scripts/test.mjs), where
 * this file is `test/service-process.js`, or as TypeScript under tsx.
 */
export function entryArgs(file: string): string[] {
  if (here.endsWith('.ts')) return ['--import', 'tsx', file];
  return ['--enable-source-maps', path.join(path.dirname(here), '..', file.replace(/\.ts$/, '.js'))];
}

/**
 * PASSWORD_HASH_COST in the tests' services (here and helpers.ts's testConfig): scrypt N=2^10, not the
 * default 2^14. The suite signs in thousands of times (throttling, revocation, each app's first
 * token), each 16 times cheaper so. auth.test.ts's tests of the default cost and of equal timing,
 * and the hostile-tenant suite, run at the default.
 */
export const TEST_PASSWORD_COST = '10';

export interface ServiceProcess {
  /** The current process's base URL (changes with each start). */
  readonly base: string;
  /** The current process's pid (its delivery processes are its children). */
  readonly pid: number;
  /** Calls the API (/api/v1 + path) with the operator's token. */
  api(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>;
  /** SIGKILL to the service and its delivery processes: no shutdown, no hand-back, whatever is in flight is cut. */
  kill(): void;
  /** Starts a new process (after a kill) and waits until it is ready. */
  start(): Promise<void>;
  /** SIGTERM and wait for the exit. */
  stop(): Promise<void>;
  /** How the current process ended (out of heap, a crash), or undefined while it runs. */
  readonly exit: { code: number | null; signal: string | null } | undefined;
  /** The last LOG_TAIL_BYTES of what its processes logged (stdout), over every start: a failing test's story. */
  logTail(): string;
}

const LOG_TAIL_BYTES = 64 * 1024;

export interface ServiceProcessOptions {
  /** Node's own flags, e.g. `npm start`'s `--max-old-space-size=128`. */
  nodeArgs?: string[];
  /**
   * Whether an embedded database's WebAssembly runs on V8's baseline compiler alone, as the PGlite
   * lane's test processes do (scripts/test.mjs, WASM_BASELINE_ONLY): the default follows the test
   * process. The hostile-tenant suite says no: it measures the service as `npm start` runs it.
   */
  wasmBaselineOnly?: boolean;
}
const LIFTOFF = '--liftoff-only';
/**
 * The test process's own WebAssembly flag, for a service process on the embedded database that
 * follows it (the PGlite lane runs its test processes with --liftoff-only, scripts/test.mjs).
 */
export const followedWasmFlags = (): string[] => (process.execArgv.includes(LIFTOFF) ? [LIFTOFF] : []);

/**
 * A new data folder for the service on the embedded database (under the system's temporary folder;
 * the caller removes it), laid from the run's migrated PGlite template (TEST_PGLITE_TEMPLATE,
 * scripts/test.mjs) when there is one: the service then starts as it does on any start after its
 * first, finding its database made and every migration applied. A first start's initdb and
 * migrations cost the service process some 6 CPU-seconds more, and only a test of that first start
 * needs them (it makes an empty folder of its own).
 */
export function embeddedDataDir(prefix: string): string {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const template = process.env.TEST_PGLITE_TEMPLATE;
  if (template) {
    const pgdata = path.join(dataDir, 'pgdata');
    fs.mkdirSync(pgdata);
    // The template is a tar of the data folder's contents (PGlite's dumpDataDir, uncompressed).
    const r = spawnSync('tar', ['-xf', template, '-C', pgdata], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`the PGlite template could not be laid out (tar: ${r.stderr || r.error?.message})`);
  }
  return dataDir;
}

/**
 * The service on PostgreSQL (a database URL), or on the embedded database in a folder of its own
 * (`{ dataDir }`, kept across restarts).
 */
export async function serviceProcess(
  database: string | { dataDir: string },
  env: Record<string, string> = {},
  opts: ServiceProcessOptions = {},
): Promise<ServiceProcess> {
  const databaseEnv =
    typeof database === 'string'
      ? { DATABASE_URL: database, SECRETS_KEY: crypto.randomBytes(32).toString('hex'), ...eventLogEnv(database) }
      : { DATA_DIR: database.dataDir };
  const fullEnv = {
    ...process.env,
    ...databaseEnv,
    PORT: '0',
    PUBLIC_URL: 'http://tracking.child.test',
    LOG_LEVEL: 'error',
    BOOTSTRAP_CLIENT_SECRET: 'child-secret',
    BOOTSTRAP_PASSWORD: 'child-password',
    PASSWORD_HASH_COST: TEST_PASSWORD_COST,
    RATE_LIMIT_MAX: '1000000',
    RATE_LIMIT_CONCURRENT: '100',
    // One HTTP process unless a test asks for more (the default follows the core count).
    HTTP_WORKERS: '1',
    // Each of its processes (HTTP, coordinator, delivery) has a pool: four test files at once share
    // the server's 100 connections, so a small one unless a test asks for more.
    DB_POOL_SIZE: '5',
    ...env,
  };
  let child: ChildProcess | undefined;
  let base = '';
  let tail = '';
  const keep = (d: string) => {
    tail += d;
    if (tail.length > 2 * LOG_TAIL_BYTES) tail = tail.slice(-LOG_TAIL_BYTES);
  };
  let token = '';
  const start = async () => {
    // Its own process group, so a kill takes the service's delivery processes with it.
    const baseline = typeof database !== 'string' && (opts.wasmBaselineOnly ?? followedWasmFlags().length > 0);
    const c = spawn(process.execPath, [...(baseline ? [LIFTOFF] : []), ...(opts.nodeArgs ?? []), ...entryArgs('src/main.ts')], {
      env: fullEnv,
      stdio: ['ignore', 'pipe', 'inherit'],
      detached: true,
    });
    child = c;
    let out = '';
    c.stdout!.setEncoding('utf8');
    c.stdout!.on('data', keep);
    c.once('exit', (code, signal) => keep(`\n[process ${c.pid} ended: code ${code}, signal ${signal}]\n`));
    base = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`service did not start in 120 s:\n${out}`)), 120_000);
      const read = (d: string) => {
        out += d;
        const m = /listening on (http:\/\/\S+) /.exec(out);
        if (m) {
          clearTimeout(timer);
          c.stdout!.off('data', read); // what follows goes to the tail only
          resolve(m[1]!);
        }
      };
      c.stdout!.on('data', read);
      c.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`service exited (${code}) before listening:\n${out}`));
      });
    });
    // Keep draining its output; TEST_SERVICE_LOG_DIR keeps it, a file per process (for a failing test's story).
    if (process.env.TEST_SERVICE_LOG_DIR) {
      const file = path.join(process.env.TEST_SERVICE_LOG_DIR, `service-${c.pid}.log`);
      c.stdout!.pipe(fs.createWriteStream(file));
    }
    assert.equal((await fetch(`${base}/readyz`)).status, 200, 'ready once listening');
  };
  await start();
  const tokenRes = await fetch(`${base}/auth/realms/tracking/protocol/openid-connect/token`, {
    method: 'POST',
    headers: {
      authorization: `Basic ${Buffer.from('tracking-cli:child-secret').toString('base64')}`,
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: 'grant_type=password&username=operator&password=child-password',
  });
  token = ((await tokenRes.json()) as { access_token: string }).access_token;
  const killAll = () => {
    try {
      if (child?.pid) process.kill(-child.pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  };
  process.once('exit', killAll);
  return {
    get base() {
      return base;
    },
    get pid() {
      return child?.pid ?? 0;
    },
    get exit() {
      if (!child || (child.exitCode === null && child.signalCode === null)) return undefined;
      return { code: child.exitCode, signal: child.signalCode };
    },
    async api(method, path, body) {
      const r = await fetch(`${base}/api/v1${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await r.text();
      return { status: r.status, body: text ? JSON.parse(text) : undefined };
    },
    logTail: () => tail.slice(-LOG_TAIL_BYTES),
    kill: killAll,
    start,
    async stop() {
      const c = child;
      if (!c || c.exitCode !== null || c.signalCode !== null) return;
      const exited = new Promise((r) => c.once('exit', r));
      c.kill('SIGTERM');
      await exited;
    },
  };
}

/** Whether a process of this pid is alive (signal 0 only asks). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
