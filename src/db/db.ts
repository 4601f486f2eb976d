// One database interface over PostgreSQL (pg) and the embedded PGlite, with the same SQL on both
// (written for PostgreSQL 15; PGlite runs 17). Type parsing is made identical: int8 as decimal
// strings (ids are 64-bit, API guide 1), numeric as JS numbers, timestamptz as Date.
import fs from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import pg from 'pg';
import { to as copyTo } from 'pg-copy-streams';
import { Notifier } from './notifier.js';
import { FLOAT4, FLOAT8, finiteOrNull, INT8, NUMERIC } from './pglite-open.js';
import { endDatabaseThread, openInThread, type PgliteQueries } from './pglite-client.js';

export { endDatabaseThread };

export interface QueryResult<R> {
  rows: R[];
  rowCount: number;
}

export interface Queryable {
  /**
   * `name` makes it a prepared statement on PostgreSQL: parsed and planned once per connection,
   * for the hot paths that run the same text thousands of times a second (one name per text).
   */
  query<R = Record<string, any>>(text: string, params?: unknown[], name?: string): Promise<QueryResult<R>>;
}

export interface Session extends Queryable {
  /** Runs several statements at once (migrations). */
  exec(sql: string): Promise<void>;
}

/**
 * Within Db.serialized: runs `first` (one statement), then `more` (further statements, each of a
 * bounded size), still under the keys' locks. PostgreSQL: all in one transaction on the locked
 * connection (all or nothing), opened only for such a write. PGlite, whose one connection a
 * transaction holds exclusively (every other request would wait for all of it): `first` commits
 * with fn's transaction, and `more` runs after it, each statement committing on its own, so other
 * requests run between them (a crash in between can leave part of `more` unwritten).
 */
export type Atomic = <U>(first: (q: Queryable) => Promise<U>, more: (q: Queryable) => Promise<void>) => Promise<U>;

export interface Db extends Queryable {
  readonly kind: 'postgres' | 'pglite';
  /**
   * Calls fn when any instance commits a pg_notify(channel), or this process wakes the channel
   * (notifier.ts). Returns the unsubscribe.
   */
  listen(channel: string, fn: () => void): () => void;
  /** Wakes this process's listeners of the channel at once (after a commit of its own). */
  wake(channel: string): void;
  /** Runs fn in one transaction; commits when it resolves, rolls back when it throws. */
  tx<T>(fn: (q: Queryable) => Promise<T>): Promise<T>;
  /** Holds one connection for fn (session-level advisory locks, multi-statement SQL). */
  session<T>(fn: (s: Session) => Promise<T>): Promise<T>;
  /**
   * Runs fn on one connection holding the locks of `keys` (asset ids: ASSET_LOCK_SPACE), so two
   * calls with a key in common run one after the other, here and on every instance. The locks are
   * session-level advisory locks, taken in one order: they need no transaction, so neither the wait
   * nor fn's own reads hold the event log's horizon back; fn writes with one statement, or, when
   * that would be too large (a store's zone visits and events: zones/positions.ts), with `atomic`.
   */
  serialized<T>(keys: string[], fn: (q: Queryable, atomic: Atomic) => Promise<T>): Promise<T>;
  /**
   * PostgreSQL only: `COPY (query) TO STDOUT ...` as a stream of the server's bytes, on a
   * connection of its own until the stream ends (one cut short takes its connection with it).
   * `sql` carries its values inline: COPY takes no parameters.
   */
  copyOut?(sql: string): Promise<Readable>;
  /** PostgreSQL only: statements sent since the start (for /metrics and the scale benchmark). */
  readonly counts?: { statements: number };
  close(): Promise<void>;
}

/**
 * Runs fn's reads in one snapshot (a read-only REPEATABLE READ transaction): a page that reads rows
 * and then their details sees both as of one moment, never a row from before a write and its details
 * from after it. A read-only transaction takes no transaction id, so it holds no horizon back.
 */
export function oneSnapshot<T>(db: Pick<Db, 'tx'>, fn: (q: Queryable) => Promise<T>): Promise<T> {
  return db.tx(async (q) => {
    await q.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY');
    return fn(q);
  });
}

/**
 * The advisory lock space of per-asset serialisation (stores whose hooks read and then write an
 * asset's state: its position, its alert states). Two int4 keys: this constant and hashtext(asset
 * id); a hash collision only serialises two assets that did not need it.
 */
export const ASSET_LOCK_SPACE = 1634955124;

/** SQL taking an asset's lock for the rest of a transaction (the alert sweep and re-evaluation). */
export const assetXactLock = (assetIdExpr: string, attempt = false) =>
  `pg_${attempt ? 'try_' : ''}advisory_xact_lock(${ASSET_LOCK_SPACE}, hashtext(${assetIdExpr}::text))`;

/** How long a new connection waits for a slot on a server at its connection limit (as the pool's connect timeout). */
const SLOT_WAIT_MS = 5000;

/**
 * Runs fn (which opens a connection) again while the server refuses new connections for its limit
 * (53300: max_connections, or a role's or database's CONNECTION LIMIT), for up to SLOT_WAIT_MS: a
 * slot is usually freed within moments (another instance's pool shrinking, a report ending), and
 * the request then succeeds instead of answering 503. The error arises when the connection starts,
 * before any statement runs, so trying again never repeats a write.
 */
async function waitForSlot<T>(fn: () => Promise<T>): Promise<T> {
  const until = Date.now() + SLOT_WAIT_MS;
  for (let pause = 50; ; pause = Math.min(pause * 2, 500)) {
    try {
      return await fn();
    } catch (e) {
      if ((e as { code?: string }).code !== '53300' || Date.now() + pause > until) throw e;
      await new Promise((r) => setTimeout(r, pause * (0.5 + Math.random() / 2)));
    }
  }
}

export function createPostgres(url: string, poolSize: number): Db {
  const typeParsers: Record<number, (v: string) => unknown> = {
    [INT8]: (v) => v,
    [NUMERIC]: finiteOrNull,
    [FLOAT4]: finiteOrNull,
    [FLOAT8]: finiteOrNull,
  };
  const pool = new pg.Pool({
    connectionString: url,
    max: poolSize,
    connectionTimeoutMillis: 5000,
    idleTimeoutMillis: 30_000,
    // A session idle inside a transaction holds the event log's horizon back for every
    // integration: the server ends it (the service never waits on the network inside one).
    idle_in_transaction_session_timeout: 60_000,
    // No JIT compilation: the service's statements are short, but the planner's estimates of the
    // CTE-heavy ones (a store with its hooks' writes, the rollups' fold) crossed jit_above_cost,
    // and compiling took over 100 ms of a 35 ms statement (measured with EXPLAIN ANALYZE).
    options: '-c jit=off',
    types: {
      getTypeParser: ((oid: number, format?: string) =>
        typeParsers[oid] ?? pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
    },
  });
  // An idle client losing its server (database restart) must not crash the process.
  pool.on('error', () => {});
  const notifier = new Notifier(url);
  const counts = { statements: 0 };
  const wrap = (c: pg.ClientBase | pg.Pool): Queryable => ({
    async query(text, params, name) {
      counts.statements++;
      const run = () => (name ? c.query({ name, text, values: params as unknown[] }) : c.query(text, params as unknown[]));
      // A query on the pool opens a connection when none is idle: wait for a slot as checkout does.
      const r = c instanceof pg.Pool ? await waitForSlot(run) : await run();
      return { rows: r.rows, rowCount: r.rowCount ?? 0 };
    },
  });
  // A checked-out client has no listener of the pool's: a server that goes away while the client
  // sits between two queries would emit an unhandled 'error' and end the process. The next query
  // on it fails instead (and the caller's error handling applies).
  const quiet = () => {};
  const checkout = async () => {
    const client = await waitForSlot(() => pool.connect());
    client.on('error', quiet);
    return {
      client,
      release: (broken: boolean) => {
        client.removeListener('error', quiet);
        client.release(broken);
      },
    };
  };
  return {
    kind: 'postgres',
    counts,
    ...wrap(pool),
    listen: (channel, fn) => notifier.subscribe(channel, fn),
    wake: (channel) => notifier.wake(channel),
    async tx(fn) {
      const { client, release } = await checkout();
      let broken = false;
      try {
        counts.statements += 2; // BEGIN and COMMIT
        await client.query('BEGIN');
        const result = await fn(wrap(client));
        await client.query('COMMIT');
        return result;
      } catch (e) {
        await client.query('ROLLBACK').catch(() => {
          broken = true;
        });
        throw e;
      } finally {
        release(broken);
      }
    },
    async session(fn) {
      const { client, release } = await checkout();
      try {
        return await fn({
          ...wrap(client),
          exec: async (sql) => {
            counts.statements++;
            await client.query(sql);
          },
        });
      } finally {
        release(false);
      }
    },
    async serialized(keys, fn) {
      const { client, release } = await checkout();
      let broken = false;
      try {
        // In hash order, so two callers never wait on each other crosswise.
        counts.statements += 2; // the locks and their release
        await client.query(
          `SELECT pg_advisory_lock(${ASSET_LOCK_SPACE}, h) FROM (SELECT DISTINCT hashtext(k) AS h FROM unnest($1::text[]) k ORDER BY 1) s`,
          [keys],
        );
        const q = wrap(client);
        const atomic: Atomic = async (first, more) => {
          counts.statements += 2; // BEGIN and COMMIT
          await client.query('BEGIN');
          try {
            const out = await first(q);
            await more(q);
            await client.query('COMMIT');
            return out;
          } catch (e) {
            await client.query('ROLLBACK').catch(() => {
              broken = true;
            });
            throw e;
          }
        };
        return await fn(q, atomic);
      } finally {
        // A connection whose locks cannot be released is not given back to the pool.
        await client.query('SELECT pg_advisory_unlock_all()').catch(() => {
          broken = true;
        });
        release(broken);
      }
    },
    async copyOut(sql) {
      const { client, release } = await checkout();
      try {
        counts.statements++;
        const stream = client.query(copyTo(sql));
        let released = false;
        // Ended whole: the connection is fit for the pool; cut short or failed: it is closed.
        const done = (broken: boolean) => {
          if (released) return;
          released = true;
          release(broken);
        };
        stream.once('end', () => done(false));
        stream.once('error', () => done(true));
        stream.once('close', () => done(!stream.readableEnded));
        return stream;
      } catch (e) {
        release(true);
        throw e;
      }
    },
    async close() {
      await notifier.close();
      await pool.end();
    },
  };
}

export class DataDirLockedError extends Error {
  readonly code = 'DATA_DIR_LOCKED';
}

/** Takes DATA_DIR/service.lock for this process; a live holder refuses us (API guide 10). */
export function lockDataDir(dir: string): () => void {
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, 'service.lock');
  for (let i = 0; i < 2; i++) {
    try {
      const fd = fs.openSync(file, 'wx');
      fs.writeSync(fd, `${process.pid}\n`);
      fs.closeSync(fd);
      return () => {
        try {
          if (fs.readFileSync(file, 'utf8').trim() === String(process.pid)) fs.unlinkSync(file);
        } catch {
          /* already gone */
        }
      };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      const pid = Number.parseInt(fs.readFileSync(file, 'utf8'), 10);
      if (Number.isInteger(pid) && pid > 0 && isAlive(pid)) {
        throw new DataDirLockedError(
          `The data folder ${dir} is in use by another process (pid ${pid}). ` +
            'The embedded database allows one process; stop it first, or use PostgreSQL (DATABASE_URL) for several instances.',
        );
      }
      fs.unlinkSync(file); // stale: its process is gone
    }
  }
  throw new DataDirLockedError(`Could not take the lock file ${file}`);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * dataDir undefined = in memory (tests). `template`: a data folder saved with dumpDataDir to start
 * from instead of an empty one (tests: a migrated database in a quarter of the time of initdb).
 * `sharedBuffersMb`: PostgreSQL's buffer cache, in the process's memory (PGlite's own default
 * when unset: 128 MB).
 */
export async function createPglite(dataDir: string | undefined, template?: Blob, opts: { sharedBuffersMb?: number } = {}): Promise<Db> {
  const unlock = dataDir ? lockDataDir(dataDir) : () => {};
  let db: Awaited<ReturnType<typeof openInThread>>;
  try {
    // In the database thread (pglite-thread.ts): its statements never run on this event loop.
    db = await openInThread({
      ...(dataDir ? { dataDir } : {}),
      ...(template ? { template } : {}),
      ...(opts.sharedBuffersMb ? { sharedBuffersMb: opts.sharedBuffersMb } : {}),
    });
  } catch (e) {
    unlock();
    throw e;
  }
  const wrap = (c: Pick<PgliteQueries, 'query'>): Queryable => ({
    async query(text, params) {
      const r = await c.query(text, params as unknown[] | undefined);
      return { rows: r.rows as any[], rowCount: r.affectedRows ?? r.rows.length };
    },
  });
  let closed = false;
  const keyLocks = new KeyLocks();
  const notifier = new Notifier(); // one process: this process's wake-ups are all there are
  return {
    kind: 'pglite',
    ...wrap(db),
    listen: (channel, fn) => notifier.subscribe(channel, fn),
    wake: (channel) => notifier.wake(channel),
    // PGlite's transaction() holds the single connection exclusively until fn settles.
    tx: (fn) => db.transaction((t) => fn(wrap(t))),
    session: (fn) => fn({ ...wrap(db), exec: async (sql) => void (await db.exec(sql)) }),
    // One connection in one process: a transaction holds it exclusively, which serialises
    // (session advisory locks would not: every caller shares the one session).
    // The keys are also locked in this process (keyLocks) for the statements an Atomic runs after
    // the transaction.
    async serialized(keys, fn) {
      const release = await keyLocks.acquire(keys);
      try {
        const later: ((q: Queryable) => Promise<void>)[] = [];
        const out = await db.transaction((t) => {
          const atomic: Atomic = async (first, more) => {
            const value = await first(wrap(t));
            later.push(more);
            return value;
          };
          return fn(wrap(t), atomic);
        });
        for (const more of later) await more(wrap(db));
        return out;
      } finally {
        release();
      }
    },
    async close() {
      if (closed) return;
      closed = true;
      try {
        await db.close(Boolean(dataDir));
      } finally {
        unlock();
      }
    },
  };
}

/** Locks on keys within this process (PGlite: one process), taken in one order so two callers never wait crosswise. */
class KeyLocks {
  private readonly held = new Map<string, Promise<void>>();

  async acquire(keys: string[]): Promise<() => void> {
    const mine = [...new Set(keys)].sort();
    let free!: () => void;
    const done = new Promise<void>((r) => {
      free = r;
    });
    const taken: string[] = [];
    for (const k of mine) {
      for (let h = this.held.get(k); h; h = this.held.get(k)) await h;
      this.held.set(k, done);
      taken.push(k);
    }
    return () => {
      for (const k of taken) this.held.delete(k);
      free();
    };
  }
}
