// The IPC between the processes of one instance (HTTP_WORKERS, instance/processes.ts). The first
// process (the coordinator: migrations, delivery processes, MQTT ingest, periodic work) holds what
// must count once per instance; each HTTP process asks it over the IPC channel its fork opened.
//
// Two kinds of message, both plain JSON:
// - a call: runs a handler in the coordinator (an HTTP process asks) or in one HTTP process (the
//   coordinator asks, e.g. for its metrics) and answers the caller;
// - a cast: runs a handler in every other process of the instance, no answer (a device changed,
//   sessions were revoked).
// A call that gets no answer within CALL_TIMEOUT_MS fails: the caller decides what that means (a
// limit admits the request and logs, as the Redis limiter does when Redis is away).

/** Work a process does when asked: its arguments, and the slot of the process that asked (0: the coordinator). */
export type Handler = (args: unknown[], from: number) => unknown;

type Message =
  | { t: 'call'; id: number; op: string; args: unknown[] }
  | { t: 'reply'; id: number; value?: unknown; error?: string }
  | { t: 'cast'; op: string; args: unknown[]; id?: number };

const CALL_TIMEOUT_MS = 5000;

/** The side of a link both kinds of process share: calls out, answers in, casts. */
export interface InstanceLink {
  /** 0 for the coordinator, 1..n for HTTP processes. */
  readonly slot: number;
  /** Runs `op` in the coordinator (directly when this is the coordinator). */
  call<T>(op: string, ...args: unknown[]): Promise<T>;
  /**
   * Runs `op` in every other process of the instance; resolves once it is on its way to each (the
   * coordinator has sent it on), not when they have run it.
   */
  cast(op: string, ...args: unknown[]): Promise<void>;
  /** What this process does when asked `op` (a call or a cast). */
  handle(op: string, handler: Handler): void;
}

/** A channel to one process: what `process` is in a child, a ChildProcess in the parent. */
export interface Port {
  send?(message: unknown): boolean;
  readonly connected: boolean;
  on(event: 'message', listener: (m: unknown) => void): unknown;
}

const isMessage = (m: unknown): m is Message =>
  typeof m === 'object' &&
  m !== null &&
  typeof (m as { t?: unknown }).t === 'string' &&
  ['call', 'reply', 'cast'].includes((m as Message).t);

/** The calls one side has sent on one port and not had answered. */
class Pending {
  private next = 1;
  private readonly waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }>();

  send<T>(port: Port, op: string, args: unknown[], kind: 'call' | 'cast' = 'call'): Promise<T> {
    if (!port.connected || !port.send) return Promise.reject(new Error(`instance link closed (${op})`));
    const id = this.next++;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        reject(new Error(`instance link: no answer to ${op} within ${CALL_TIMEOUT_MS} ms`));
      }, CALL_TIMEOUT_MS);
      timer.unref();
      this.waiting.set(id, { resolve: resolve as (v: unknown) => void, reject, timer });
      port.send!({ t: kind, id, op, args } satisfies Message);
    });
  }

  settle(m: Extract<Message, { t: 'reply' }>): void {
    const w = this.waiting.get(m.id);
    if (!w) return;
    this.waiting.delete(m.id);
    clearTimeout(w.timer);
    if (m.error !== undefined) w.reject(new Error(m.error));
    else w.resolve(m.value);
  }

  /** The port closed: nothing sent on it will be answered. */
  failAll(why: string): void {
    for (const w of this.waiting.values()) {
      clearTimeout(w.timer);
      w.reject(new Error(why));
    }
    this.waiting.clear();
  }
}

/** Runs a call's handler and sends its answer (an error as its message) back on `port`. */
function answer(port: Port, handlers: Map<string, Handler>, m: Extract<Message, { t: 'call' }>, from: number): void {
  const reply = (r: Omit<Extract<Message, { t: 'reply' }>, 't' | 'id'>) => {
    if (port.connected) port.send?.({ t: 'reply', id: m.id, ...r } satisfies Message);
  };
  const h = handlers.get(m.op);
  if (!h) {
    reply({ error: `no handler for ${m.op}` });
    return;
  }
  Promise.resolve()
    .then(() => h(m.args, from))
    .then(
      (value) => reply({ value: value ?? null }),
      (e) => reply({ error: e instanceof Error ? e.message : String(e) }),
    );
}

/** A cast's handler, if this process has one; a cast has nobody to answer, so a failure ends here. */
function runCast(handlers: Map<string, Handler>, op: string, args: unknown[], from: number): void {
  Promise.resolve()
    .then(() => handlers.get(op)?.(args, from))
    .catch(() => {});
}

/** The coordinator's side: one port per HTTP process, by slot. */
export class Hub implements InstanceLink {
  readonly slot = 0;
  private readonly handlers = new Map<string, Handler>();
  private readonly ports = new Map<number, { port: Port; pending: Pending }>();

  handle(op: string, handler: Handler): void {
    this.handlers.set(op, handler);
  }

  async call<T>(op: string, ...args: unknown[]): Promise<T> {
    const h = this.handlers.get(op);
    if (!h) throw new Error(`no handler for ${op}`);
    return (await h(args, 0)) as T;
  }

  async cast(op: string, ...args: unknown[]): Promise<void> {
    this.castFrom(0, op, args);
  }

  private castFrom(from: number, op: string, args: unknown[]): void {
    if (from !== 0) runCast(this.handlers, op, args, from);
    for (const [slot, p] of this.ports) if (slot !== from && p.port.connected) p.port.send?.({ t: 'cast', op, args } satisfies Message);
  }

  /** Runs `op` in each HTTP process; a process that does not answer is left out. */
  async callEach<T>(op: string, ...args: unknown[]): Promise<T[]> {
    const answers = await Promise.allSettled([...this.ports.values()].map((p) => p.pending.send<T>(p.port, op, args)));
    return answers.flatMap((a) => (a.status === 'fulfilled' ? [a.value] : []));
  }

  /** An HTTP process's channel, from its fork until `detach`. */
  attach(slot: number, port: Port): void {
    const pending = new Pending();
    this.ports.set(slot, { port, pending });
    port.on('message', (m) => {
      if (!isMessage(m)) return;
      if (m.t === 'call') answer(port, this.handlers, m, slot);
      else if (m.t === 'reply') pending.settle(m);
      else {
        this.castFrom(slot, m.op, m.args);
        if (m.id !== undefined && port.connected) port.send?.({ t: 'reply', id: m.id, value: null } satisfies Message);
      }
    });
  }

  detach(slot: number, port: Port): void {
    const p = this.ports.get(slot);
    if (p?.port !== port) return;
    this.ports.delete(slot);
    p.pending.failAll(`HTTP process ${slot} exited`);
  }
}

/** An HTTP process's side: its one port is the channel to the coordinator. */
export class Member implements InstanceLink {
  private readonly handlers = new Map<string, Handler>();
  private readonly pending = new Pending();

  constructor(
    readonly slot: number,
    private readonly port: Port = process as Port,
  ) {
    port.on('message', (m) => {
      if (!isMessage(m)) return;
      if (m.t === 'call') answer(port, this.handlers, m, 0);
      else if (m.t === 'reply') this.pending.settle(m);
      else runCast(this.handlers, m.op, m.args, 0);
    });
  }

  handle(op: string, handler: Handler): void {
    this.handlers.set(op, handler);
  }

  call<T>(op: string, ...args: unknown[]): Promise<T> {
    return this.pending.send<T>(this.port, op, args);
  }

  async cast(op: string, ...args: unknown[]): Promise<void> {
    await this.pending.send(this.port, op, args, 'cast');
  }

  /** Ends what waits for an answer (the coordinator is gone). */
  close(): void {
    this.pending.failAll('the coordinator is gone');
  }
}
