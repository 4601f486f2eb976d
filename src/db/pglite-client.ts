// This side of the database thread (pglite-thread.ts): every statement of an embedded database is
// a message to the thread and its rows a message back (structured clone keeps Date and the rest),
// so the event loop serving HTTP and delivery only waits, never runs the database. A transaction
// holds the database's one connection in the thread until this side commits or rolls back.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { PgliteOptions } from './pglite-open.js';
import type { Reply, Request } from './pglite-thread.js';

/** What db.ts uses of an embedded database, wherever it runs. */
export interface PgliteQueries {
  query(text: string, params?: unknown[]): Promise<{ rows: any[]; affectedRows?: number }>;
  exec(sql: string): Promise<void>;
}

export interface PgliteConnection extends PgliteQueries {
  /** Runs fn in one transaction, which holds the database until fn settles (commit, or rollback when it throws). */
  transaction<T>(fn: (t: PgliteQueries) => Promise<T>): Promise<T>;
  /** `checkpoint`: write everything to the data folder first. */
  close(checkpoint: boolean): Promise<void>;
}

const here = fileURLToPath(import.meta.url);
/** The thread's entry, as this file is run (.ts under tsx, .js when built). */
const ENTRY = path.join(path.dirname(here), `pglite-thread${path.extname(here)}`);

type Call = Request extends infer R ? (R extends { id: number } ? Omit<R, 'id'> : never) : never;

/** The one database thread of this process, started at the first open. */
class DatabaseThread {
  private worker: Worker | null = null;
  /** Databases open in the thread: its end with any open is a crash of the database. */
  open = 0;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private next = 1;

  call<T>(m: Call): Promise<T> {
    const w = this.worker ?? this.start();
    const id = this.next++;
    // Referenced while it owes an answer: a script awaiting a statement must not exit meanwhile;
    // otherwise it holds no process open (as the database did on the main thread).
    if (this.pending.size === 0) w.ref();
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      w.postMessage({ ...m, id } as Request);
    });
  }

  /** Ends the thread (and all the memory it grew); the next open starts a new one. Only with no database open. */
  async end(): Promise<void> {
    if (this.open > 0) return; // another database still lives there: its memory stays anyway
    const w = this.worker;
    this.worker = null;
    await w?.terminate();
  }

  private start(): Worker {
    // A small young generation: the thread's allocations are statements' rows, short-lived and
    // handed on at once; V8's default reserves more than the thread ever uses.
    const w = new Worker(ENTRY, { resourceLimits: { maxYoungGenerationSizeMb: YOUNG_MB } });
    w.unref();
    w.on('message', (r: Reply) => {
      const p = this.pending.get(r.id);
      if (!p) return;
      this.pending.delete(r.id);
      if (this.pending.size === 0) w.unref();
      if ('error' in r) p.reject(Object.assign(new Error(r.error.message), r.error));
      else p.resolve(r.value);
    });
    const gone = (e: Error) => {
      if (this.worker !== w) return; // ended on purpose (end())
      this.worker = null;
      for (const p of this.pending.values()) p.reject(e);
      this.pending.clear();
      // The databases it held are gone with it (out of memory, a crash in PGlite): nothing this
      // process does with them can succeed, so it stops, as after any crash, for its supervisor to
      // start it again (the data folder is PostgreSQL's, recovered at the next open).
      if (this.open > 0) {
        setImmediate(() => {
          throw new Error(`the embedded database's thread stopped: ${e.message}`);
        });
      }
    };
    w.on('error', gone);
    w.on('exit', (code) => gone(new Error(`the database thread exited (code ${code})`)));
    this.worker = w;
    return w;
  }
}

const YOUNG_MB = 4;

let thread: DatabaseThread | undefined;

/**
 * Ends the database thread if no database is open in it: WebAssembly memory never shrinks, so
 * the memory that creating and migrating a database grew is let go only with its thread.
 */
export async function endDatabaseThread(): Promise<void> {
  await thread?.end();
}

/** Opens an embedded database in the database thread. */
export async function openInThread(opts: PgliteOptions): Promise<PgliteConnection> {
  thread ??= new DatabaseThread();
  const t = thread;
  const db = await t.call<number>({ op: 'open', opts });
  t.open++;
  const on = (tx?: number): PgliteQueries => ({
    query: (text, params) => t.call({ op: 'query', db, text, ...(params?.length ? { params } : {}), ...(tx ? { tx } : {}) }),
    exec: async (sql) => {
      await t.call({ op: 'exec', db, sql, ...(tx ? { tx } : {}) });
    },
  });
  return {
    ...on(),
    async transaction(fn) {
      const tx = await t.call<number>({ op: 'begin', db });
      let value;
      try {
        value = await fn(on(tx));
      } catch (e) {
        await t.call({ op: 'end', db, tx, commit: false }).catch(() => {});
        throw e;
      }
      await t.call({ op: 'end', db, tx, commit: true });
      return value;
    },
    async close(checkpoint) {
      try {
        await t.call({ op: 'close', db, checkpoint });
      } finally {
        t.open--;
      }
    },
  };
}
