// The one place other modules plug into storing data records (zones, alerts, ...), registered by
// the app: the records module knows the hook shape, never the modules behind it. Every hook runs
// inside the storing transaction, so what it derives or writes commits or rolls back with the
// records themselves.
import type { Queryable } from '../db/db.js';
import type { ObjectType } from '../delivery/objects.js';

/** An item about to be stored: the validated body, its asset's owner and its record time. */
export interface PreparedItem<I = any> {
  item: I;
  /** Where the item is in the request body, as a JSON pointer prefix: '' for one record, '/3' in a bulk. */
  at: string;
  ownerId: string;
  whenCreated: string;
}

export interface RecordHook<C = unknown> {
  /** For logs and errors. */
  name: string;
  /** The record types it sees. */
  types: readonly ObjectType[];
  /**
   * Before the insert: may replace an entry's `item` with one carrying derived fields (a
   * location's zone ids). Returns what `after` needs from this step.
   */
  before?(q: Queryable, batch: PreparedItem[]): Promise<C>;
  /** After the insert, same transaction: the stored rows in input order. */
  after?(q: Queryable, rows: any[], context: C): Promise<void>;
}

export class RecordHooks {
  private readonly hooks: RecordHook<any>[] = [];

  register<C>(hook: RecordHook<C>): this {
    this.hooks.push(hook);
    return this;
  }

  /** Runs every hook for `type` around `insert`, in registration order. */
  async store(q: Queryable, type: ObjectType, batch: PreparedItem[], insert: (batch: PreparedItem[]) => Promise<any[]>): Promise<any[]> {
    const active = this.hooks.filter((h) => h.types.includes(type));
    const contexts: unknown[] = [];
    for (const h of active) contexts.push(await h.before?.(q, batch));
    const rows = await insert(batch);
    for (const [n, h] of active.entries()) await h.after?.(q, rows, contexts[n]);
    return rows;
  }
}
