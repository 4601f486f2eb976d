// Where delivery runs. With the embedded database, or DELIVERY_WORKERS=0, the engine runs in the
// HTTP process. With PostgreSQL and DELIVERY_WORKERS=n (default 1), the service's entry forks n
// delivery processes (src/delivery-main.ts, assembled by app.ts) beside the HTTP one, so REST ingest and delivery each have a
// core's event loop and heap: they share nothing but the database, as instances already do (the
// engine's claims, leases and limits hold across processes), so no new coordination is needed.
//
// The HTTP process supervises them: a delivery process that exits unexpectedly is started again
// (after 1 s, doubling to 30 s while it keeps failing); one whose parent is gone (its IPC channel
// closes) stops as on SIGTERM: it finishes its requests, writes their results and hands its claims
// back. Their counters reach /metrics through the IPC channel once a second.
import { type ChildProcess, fork } from 'node:child_process';
import type { FastifyBaseLogger } from 'fastify';
import { Restarts } from '../instance/restarts.js';

/** What /metrics reads of delivery, wherever it runs. */
export interface DeliveryCounters {
  readonly requestsSent: number;
  readonly resultsParked: number;
  /** Statements sent to PostgreSQL by delivery processes of their own (0 when delivery runs in this process). */
  readonly statements?: number;
  /** The Kafka event log: events published by the relays, read from the topic, parked in the retry queue. */
  readonly eventLog: { published: number; consumed: number; parked: number };
  /** Poison set aside by delivery processes of their own, by "consumer:reason" (absent when delivery runs in this process: its counts are this process's). */
  readonly poison?: Record<string, number>;
  stop(): Promise<void>;
}

/** A delivery process's report to its parent. */
export interface DeliveryReport {
  requestsSent: number;
  resultsParked: number;
  statements: number;
  published?: number;
  consumed?: number;
  parked?: number;
  /** Poison this process set aside, by "consumer:reason" (poison.ts). */
  poison?: Record<string, number>;
}

interface Child {
  proc: ChildProcess;
  report: DeliveryReport;
  exited: Promise<void>;
}

/** `a` with `b`'s counts added. */
function addCounts(a: Record<string, number>, b: Record<string, number>): Record<string, number> {
  for (const [k, n] of Object.entries(b)) if (typeof n === 'number') a[k] = (a[k] ?? 0) + n;
  return a;
}

/** The delivery processes of one service process. */
export class DeliveryProcesses implements DeliveryCounters {
  private readonly children = new Map<number, Child>();
  private readonly restarts = new Restarts();
  /** Counters of processes that have exited. */
  private readonly gone: DeliveryReport = { requestsSent: 0, resultsParked: 0, statements: 0 };
  private stopping = false;

  /** The children run `entry` with this process's node flags (a loader such as tsx, the heap's size). */
  constructor(
    private readonly count: number,
    private readonly entry: string,
    private readonly log: FastifyBaseLogger,
  ) {}

  start(): void {
    for (let slot = 0; slot < this.count; slot++) this.spawn(slot, 0);
  }

  private spawn(slot: number, failures: number): void {
    const proc = fork(this.entry, [], {
      execArgv: process.execArgv,
      env: { ...process.env, DELIVERY_PROCESS_SLOT: String(slot) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const startedAt = Date.now();
    const child: Child = {
      proc,
      report: { requestsSent: 0, resultsParked: 0, statements: 0 },
      exited: new Promise((resolve) => proc.once('exit', () => resolve())),
    };
    this.children.set(slot, child);
    proc.on('message', (m: DeliveryReport) => {
      if (typeof m?.requestsSent === 'number' && typeof m.resultsParked === 'number' && typeof m.statements === 'number') child.report = m;
    });
    proc.on('error', (err) => this.log.error({ err, slot }, 'delivery process error'));
    proc.once('exit', (code, signal) => {
      this.gone.requestsSent += child.report.requestsSent;
      this.gone.resultsParked += child.report.resultsParked;
      this.gone.statements += child.report.statements;
      for (const k of ['published', 'consumed', 'parked'] as const) this.gone[k] = (this.gone[k] ?? 0) + (child.report[k] ?? 0);
      this.gone.poison = addCounts(this.gone.poison ?? {}, child.report.poison ?? {});
      if (this.children.get(slot) === child) this.children.delete(slot);
      if (this.stopping) return;
      const delay = this.restarts.after(slot, startedAt, failures, (n) => {
        if (!this.stopping) this.spawn(slot, n);
      });
      this.log.error({ slot, code, signal, restartInMs: delay }, 'delivery process exited; starting it again');
    });
  }

  private sum(key: Exclude<keyof DeliveryReport, 'poison'>): number {
    let n = this.gone[key] ?? 0;
    for (const c of this.children.values()) n += c.report[key] ?? 0;
    return n;
  }

  get eventLog() {
    return { published: this.sum('published'), consumed: this.sum('consumed'), parked: this.sum('parked') };
  }

  get poison(): Record<string, number> {
    let sum = { ...this.gone.poison };
    for (const c of this.children.values()) sum = addCounts(sum, c.report.poison ?? {});
    return sum;
  }

  get requestsSent(): number {
    return this.sum('requestsSent');
  }

  get resultsParked(): number {
    return this.sum('resultsParked');
  }

  get statements(): number {
    return this.sum('statements');
  }

  /** SIGTERM to each: they finish their requests, write the results and hand their claims back. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.restarts.cancel();
    const running = [...this.children.values()];
    for (const c of running) c.proc.kill('SIGTERM');
    await Promise.all(running.map((c) => c.exited));
  }
}
