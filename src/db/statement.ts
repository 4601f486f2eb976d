// One write statement built from parts that several modules add: data-modifying CTEs over
// parameters. Run outside a transaction it is its own transaction, opened and committed by the
// server within the one round trip, so no transaction of the service ever sits open while its
// event loop is busy (the event log's horizon waits for open transactions: eventlog/log.ts).
import crypto from 'node:crypto';
import type { Queryable } from './db.js';

export class WriteStatement {
  readonly params: unknown[] = [];
  private readonly parts: string[] = [];
  private readonly reads: string[] = [];
  private names = 0;

  /** Adds a parameter; returns its placeholder with the cast, e.g. `$3::uuid[]`. */
  param(value: unknown, type: string): string {
    this.params.push(value);
    return `$${this.params.length}::${type}`;
  }

  /**
   * One array parameter per column of `items`, for `unnest(...)`: `[f, type]` makes the array
   * `items.map(f)` cast to `type[]`. Returns the placeholders, comma-separated, in column order.
   */
  arrays<T>(items: readonly T[], columns: [(item: T) => unknown, string][]): string {
    return columns.map(([f, type]) => this.param(items.map(f), `${type}[]`)).join(', ');
  }

  /**
   * Adds a CTE and returns its name. A data-modifying one runs whether or not anything reads it;
   * a plain SELECT runs only when the final query reads it.
   */
  with(sql: string, name = `w${++this.names}`): string {
    this.parts.push(`${name} AS (${sql})`);
    return name;
  }

  /**
   * A plain SELECT CTE that must run (a notification at commit): run() without a final query
   * reads it. A caller with a final query of its own reads what it needs there.
   */
  mustRun(name: string): void {
    this.reads.push(name);
  }

  get empty(): boolean {
    return this.parts.length === 0;
  }

  /** The statement's text, ending with `final`. */
  text(final: string): string {
    return this.parts.length ? `WITH ${this.parts.join(',\n')}\n${final}` : final;
  }

  run<R = Record<string, any>>(q: Queryable, final?: string): Promise<{ rows: R[]; rowCount: number }> {
    const last =
      final ?? (this.reads.length ? `SELECT ${this.reads.map((n) => `(SELECT count(*) FROM ${n})`).join(' + ')} AS ran` : 'SELECT 1');
    const text = this.text(last);
    return q.query<R>(text, this.params, preparedName(text));
  }
}

/**
 * A name for a statement's text, so that PostgreSQL parses it once per connection instead of at
 * every store (a location bulk's write statement is about 4 KB of text: parsing and sending it each
 * time cost the store path more than its data). For texts built from a few fixed parts (the write
 * statements' hooks over `unnest` arrays, a caller's tenancy condition), so there are few of them;
 * past MAX_PREPARED distinct texts in a process the rest run unnamed, so a text that varied with its
 * input could not fill each connection with prepared statements.
 */
export function preparedName(text: string): string | undefined {
  let name = preparedNames.get(text);
  if (name === undefined && preparedNames.size < MAX_PREPARED) {
    name = `ws_${crypto.createHash('sha1').update(text).digest('hex').slice(0, 20)}`;
    preparedNames.set(text, name);
  }
  return name;
}
const MAX_PREPARED = 200;
const preparedNames = new Map<string, string>();

/**
 * `n` new ids of `table`'s identity column, ascending. Taken by a statement of their own (a
 * sequence is not transactional, so a failed store only leaves a gap), so that the writes can name
 * their rows before they exist.
 */
export async function allocateIds(q: Queryable, table: string, n: number): Promise<string[]> {
  if (n === 0) return [];
  const { rows } = await q.query<{ ids: string }>(
    `SELECT string_agg(nextval(pg_get_serial_sequence($1, 'id'))::text, ',' ORDER BY g) AS ids FROM generate_series(1, $2) g`,
    [table, n],
  );
  return sortIds(rows[0]!.ids.split(','));
}

/** Sorts positive int64 decimal strings ascending (shorter is smaller; then as text), in place. */
export const sortIds = (ids: string[]) => ids.sort((a, b) => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0));
