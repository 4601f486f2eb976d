// Several HTTP processes for one instance (HTTP_WORKERS > 1, PostgreSQL only), so that ingest and
// the API use every core. The service's entry (main.ts) becomes the coordinator: it migrates,
// bootstraps, forks the delivery processes, runs MQTT ingest (one client id) and the periodic work,
// and serves no HTTP itself; it forks HTTP_WORKERS HTTP processes (main.ts again, with
// HTTP_PROCESS_SLOT set), which all listen on the one port with SO_REUSEPORT: the kernel spreads
// connections over them, and no process hands sockets on. Each HTTP process is a whole API (its own
// database pool, its own event loop); what must count once per instance goes through the
// coordinator (shared.ts).
//
// The coordinator supervises them as it does delivery processes: one that exits unexpectedly starts
// again (after 1 s, doubling to 30 s while it keeps failing), its leases given back; one whose
// coordinator is gone (the IPC channel closes) stops as on SIGTERM, finishing its requests.
import { type ChildProcess, fork } from 'node:child_process';
import type { FastifyBaseLogger } from 'fastify';
import type { Hub } from './link.js';
import { Restarts } from './restarts.js';

/** What an HTTP process says once it listens. */
export interface Listening {
  t: 'listening';
  port: number;
}

const isListening = (m: unknown): m is Listening =>
  typeof m === 'object' && m !== null && (m as Listening).t === 'listening' && typeof (m as Listening).port === 'number';

/** How long an HTTP process may take from its fork to listening. */
const START_TIMEOUT_MS = 60_000;

export class HttpProcesses {
  private readonly children = new Map<number, { proc: ChildProcess; exited: Promise<void> }>();
  private readonly restarts = new Restarts();
  private stopping = false;
  private port = 0;

  /** `gone(slot)`: an HTTP process exited (its leases are given back). */
  constructor(
    private readonly count: number,
    private readonly entry: string,
    private readonly hub: Hub,
    private readonly log: FastifyBaseLogger,
    private readonly gone: (slot: number) => void,
  ) {}

  /**
   * Forks them and resolves with the port they listen on once all do: the first binds `port` (0: one
   * the system picks), the others the same.
   */
  async start(port: number): Promise<number> {
    this.port = port;
    this.port = await this.spawn(1, 0);
    await Promise.all(Array.from({ length: this.count - 1 }, (_, i) => this.spawn(i + 2, 0)));
    return this.port;
  }

  private spawn(slot: number, failures: number): Promise<number> {
    const proc = fork(this.entry, [], {
      execArgv: process.execArgv,
      env: { ...process.env, PORT: String(this.port), HTTP_PROCESS_SLOT: String(slot) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const startedAt = Date.now();
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    this.children.set(slot, { proc, exited });
    this.hub.attach(slot, proc);
    proc.on('error', (err) => this.log.error({ err, slot }, 'HTTP process error'));
    const listening = new Promise<number>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`HTTP process ${slot} did not listen within ${START_TIMEOUT_MS / 1000} s`)),
        START_TIMEOUT_MS,
      );
      timer.unref();
      proc.on('message', (m) => {
        if (!isListening(m)) return;
        clearTimeout(timer);
        resolve(m.port);
      });
      proc.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`HTTP process ${slot} exited before it listened (code ${code}, signal ${signal})`));
      });
    });
    proc.once('exit', (code, signal) => {
      this.hub.detach(slot, proc);
      this.gone(slot);
      if (this.children.get(slot)?.proc === proc) this.children.delete(slot);
      if (this.stopping) return;
      const delay = this.restarts.after(slot, startedAt, failures, (n) => {
        if (!this.stopping) this.spawn(slot, n).catch((err) => this.log.error({ err, slot }, 'HTTP process did not start'));
      });
      this.log.error({ slot, code, signal, restartInMs: delay }, 'HTTP process exited; starting it again');
    });
    return listening;
  }

  /** SIGTERM to each: they stop taking connections, finish their requests and exit. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.restarts.cancel();
    const running = [...this.children.values()];
    for (const c of running) c.proc.kill('SIGTERM');
    await Promise.all(running.map((c) => c.exited));
  }
}
