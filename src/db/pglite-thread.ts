// The database thread: where the embedded databases (PGlite) of this process run, so that their
// work (PostgreSQL compiled to WebAssembly runs synchronously while it executes a statement) never
// holds the event loop that serves HTTP and sends deliveries. One thread per process hosts every
// embedded database the process opens (the service has one; the tests many, which then share the
// compiled WebAssembly). pglite-client.ts is the other end: this file only answers its messages.
import v8 from 'node:v8';
import vm from 'node:vm';
import { parentPort } from 'node:worker_threads';
import type { PGlite, Transaction } from '@electric-sql/pglite';
import { openPglite, type PgliteOptions } from './pglite-open.js';

export type Request =
  | { id: number; op: 'open'; opts: PgliteOptions }
  | { id: number; op: 'query'; db: number; tx?: number; text: string; params?: unknown[] }
  | { id: number; op: 'exec'; db: number; tx?: number; sql: string }
  | { id: number; op: 'begin'; db: number }
  | { id: number; op: 'end'; db: number; tx: number; commit: boolean }
  | { id: number; op: 'close'; db: number; checkpoint: boolean };

export type Reply = { id: number; value: unknown } | { id: number; error: Record<string, unknown> & { message: string } };

/** A transaction ended from the other end without committing. */
class RolledBack extends Error {}

interface Open {
  db: PGlite;
  /** Transactions open on it, by id: their handle and how to end them. */
  txs: Map<number, { t: Transaction; end: (commit: boolean) => Promise<void> }>;
}

const dbs = new Map<number, Open>();
let nextDb = 1;
let nextTx = 1;

/** An error as the other end rebuilds it: its message and every own field (a database error's SQLSTATE `code`, `detail`...). */
function errorOf(e: unknown): Record<string, unknown> & { message: string } {
  if (!(e instanceof Error)) return { message: String(e) };
  const out: Record<string, unknown> & { message: string } = { message: e.message, name: e.name };
  for (const [k, v] of Object.entries(e)) if (v === null || ['string', 'number', 'boolean'].includes(typeof v)) out[k] = v;
  return out;
}

function handle(m: Request, open: Open | undefined): Promise<unknown> {
  if (m.op === 'open') {
    return openPglite(m.opts).then((db) => {
      const id = nextDb++;
      dbs.set(id, { db, txs: new Map() });
      return id;
    });
  }
  if (!open) return Promise.reject(new Error('the embedded database is closed'));
  const on = (tx: number | undefined) => {
    if (tx === undefined) return open.db;
    const t = open.txs.get(tx);
    if (!t) throw new Error('the transaction has ended');
    return t.t;
  };
  switch (m.op) {
    case 'query':
      return on(m.tx)
        .query(m.text, m.params)
        .then((r) => ({ rows: r.rows, affectedRows: r.affectedRows }));
    case 'exec':
      return on(m.tx)
        .exec(m.sql)
        .then(() => null);
    case 'begin':
      // PGlite's transaction() holds its one connection until the function settles: the function
      // waits here for the other end to say commit or roll back, its statements arriving meanwhile.
      return new Promise((resolve, reject) => {
        const tx = nextTx++;
        const done = open.db.transaction(
          (t) =>
            new Promise<void>((commit, rollback) => {
              open.txs.set(tx, {
                t,
                end: (yes) => {
                  open.txs.delete(tx);
                  if (yes) commit();
                  else rollback(new RolledBack());
                  return done.catch((e) => {
                    if (!(e instanceof RolledBack)) throw e;
                  });
                },
              });
              resolve(tx);
            }),
        );
        done.catch(reject); // BEGIN itself failed: nothing was resolved
      });
    case 'end': {
      const t = open.txs.get(m.tx);
      return t ? t.end(m.commit).then(() => null) : Promise.resolve(null);
    }
    case 'close':
      dbs.delete(m.db);
      return (async () => {
        try {
          if (m.checkpoint) await open.db.query('CHECKPOINT');
        } finally {
          await open.db.close();
        }
        // WebAssembly memory never shrinks: it is freed only when its instance is collected, and
        // an idle thread may not collect for hours (v8.setFlagsFromString is how gc() is reached at run time).
        v8.setFlagsFromString('--expose-gc');
        (vm.runInNewContext('gc') as () => void)();
        return null;
      })();
  }
}

parentPort!.on('message', (m: Request) => {
  let answer: Promise<unknown>;
  try {
    answer = handle(m, m.op === 'open' ? undefined : dbs.get(m.db));
  } catch (e) {
    answer = Promise.reject(e);
  }
  answer.then(
    (value) => parentPort!.postMessage({ id: m.id, value } satisfies Reply),
    (e) => parentPort!.postMessage({ id: m.id, error: errorOf(e) } satisfies Reply),
  );
});
