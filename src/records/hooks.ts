// Storing data records, and the one place other modules plug into it (zones, alerts, ...),
// registered by the app: the records module knows the hook shape, never the modules behind it.
//
// A store is three steps, and no transaction stays open across any of them:
//   1. reads: the caller's (assets, owner paths, new ids) and each hook's `before` (a location's
//      zones), outside any transaction;
//   2. when a hook keeps per-asset state (a position with zones, alert states), the batch's assets
//      are locked (Db.serialized: advisory locks, no transaction) and the hook reads that state;
//   3. one statement writes everything: the records, their event log rows and each hook's writes,
//      as CTEs of one WriteStatement. Run alone it commits within its one round trip, so a busy
//      event loop never holds an open transaction, and with it the event log's horizon, back.
//      A hook whose writes would make that statement too large (a bulk entering many zones) returns
//      the rest as further statements of bounded size (`More`), run after it under the same locks
//      and, on PostgreSQL, in one transaction with it (Db.serialized's Atomic).
// Every write commits or fails with the records themselves.
import type { Atomic, Db, Queryable } from '../db/db.js';
import { WriteStatement } from '../db/statement.js';
import type { ObjectType } from '../eventlog/objects.js';
import type { OwnerPaths } from '../eventlog/log.js';

/** An item about to be stored: the validated body, its asset's owner and its record time. */
export interface PreparedItem<I = any> {
  item: I;
  /** Where the item is in the request body, as a JSON pointer prefix: '' for one record, '/3' in a bulk. */
  at: string;
  ownerId: string;
  whenCreated: string;
}

/** An item with the id its row will have and its record time as a Date. */
export interface StoredItem<I = any> extends PreparedItem<I> {
  id: string;
  time: Date;
}

export interface RecordHook<C = unknown> {
  /** For logs and errors. */
  name: string;
  /** The record types it sees. */
  types: readonly ObjectType[];
  /**
   * Step 1, outside any lock: checks and reads; may replace an entry's `item` with one carrying
   * derived fields (a location's zone ids). Returns what the later steps need.
   */
  before?(q: Queryable, batch: PreparedItem[]): Promise<C>;
  /** Whether `write` reads per-asset state, so the batch's assets must be locked around it. */
  serial?(context: C): boolean;
  /**
   * Steps 2 and 3: may read (under the assets' locks when `serial`), and adds its writes to the
   * store's statement, whose records CTE is `records` (the rows as stored, RETURNING *). `paths`:
   * the ancestries of the batch's owners, for what it pushes (eventlog/log.ts appendToLog).
   */
  write?(q: Queryable, stmt: WriteStatement, rows: StoredItem[], context: C, records: string, paths: OwnerPaths): Promise<More | undefined>;
}

/** Further statements of a hook, each of a bounded size, run after the store's statement (with the records stored). */
export type More = (q: Queryable) => Promise<void>;

/** The records' own part of the statement: adds their insert; returns the final query. */
export type RecordInsert = (stmt: WriteStatement, rows: StoredItem[]) => { records: string; final: string };

export class RecordHooks {
  private readonly hooks: RecordHook<any>[] = [];

  register<C>(hook: RecordHook<C>): this {
    this.hooks.push(hook);
    return this;
  }

  /** Takes out the hooks whose name starts with `prefix` (a benchmark measuring what they cost). */
  remove(prefix: string): number {
    const before = this.hooks.length;
    this.hooks.splice(0, this.hooks.length, ...this.hooks.filter((h) => !h.name.startsWith(prefix)));
    return before - this.hooks.length;
  }

  /**
   * Stores `batch` (ids allocated, in input order) with every hook for `type`, in one statement;
   * returns what the final query returns.
   */
  async store(db: Db, type: ObjectType, batch: PreparedItem[], ids: string[], insert: RecordInsert, paths: OwnerPaths): Promise<any[]> {
    const active = this.hooks.filter((h) => h.types.includes(type));
    const contexts: unknown[] = [];
    for (const h of active) contexts.push(await h.before?.(db, batch));
    const rows: StoredItem[] = batch.map((p, n) => ({ ...p, id: ids[n]!, time: new Date(p.whenCreated) }));
    const write = async (q: Queryable, atomic: Atomic) => {
      const stmt = new WriteStatement();
      const { records, final } = insert(stmt, rows);
      const more: More[] = [];
      for (const [n, h] of active.entries()) {
        const m = await h.write?.(q, stmt, rows, contexts[n], records, paths);
        if (m) more.push(m);
      }
      const run = async (on: Queryable) => (await stmt.run(on, final)).rows;
      if (!more.length) return run(q);
      return atomic(run, async (after) => {
        for (const m of more) await m(after);
      });
    };
    const serial = active.some((h, n) => h.serial?.(contexts[n]) ?? false);
    if (serial) return db.serialized([...new Set(rows.map((r) => r.item.assetId as string))], write);
    // Without locks, a hook's further statements go in one transaction with the store's.
    return write(db, (first, more) =>
      db.tx(async (t) => {
        const out = await first(t);
        await more(t);
        return out;
      }),
    );
  }
}
