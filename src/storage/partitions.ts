// Making and removing partitions. A partition is made ahead of time by the maintenance task and,
// for a record whose time has none (a device's backlog, a clock ahead), on demand: before a
// store (the records hook) and, for any other write, when PostgreSQL answers "no partition of
// relation ... found for row" (withPartitions retries the statement once the partition exists).
// What input can ask for is bounded by the one record time window (records/time-window.ts): the
// only times callers choose are records' (rollups, events and notifications follow them).
//
// There is no DEFAULT partition: rows would land in it and every later partition made for their
// range would have to move them out under a lock, and a DEFAULT partition forbids
// `DETACH PARTITION ... CONCURRENTLY`, which is how retention lets a partition go without blocking
// reads and writes.
import type { Db, Queryable } from '../db/db.js';
import {
  type PartitionInterval,
  type Range,
  parseBound,
  parsePgTime,
  partitionName,
  periodEnd,
  periodStart,
  rangeFor,
  sqlTime,
  tableNamed,
} from './tables.js';

/** The advisory lock space of partition changes: (this, hashtext(table)) per table. */
export const STORAGE_LOCK_SPACE = 1937011311;

export interface PartitionInfo extends Range {
  name: string;
  /** A DETACH ... CONCURRENTLY that did not finish (the process died): retention finalises it. */
  detaching: boolean;
}

/** The partitions of `table`, by lower bound. */
export async function listPartitions(q: Queryable, table: string): Promise<PartitionInfo[]> {
  const { rows } = await q.query<{ name: string; bound: string; detaching: boolean }>(
    `SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound, i.inhdetachpending AS detaching
       FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
      WHERE i.inhparent = to_regclass($1)`,
    [table],
  );
  const out: PartitionInfo[] = [];
  for (const r of rows) {
    const range = parseBound(r.bound);
    if (range) out.push({ name: r.name, detaching: r.detaching, ...range });
  }
  return out.sort((a, b) => a.lo - b.lo);
}

/** Partitions of this process's tables, cached: a write checks its times against the cache. */
export class Partitions {
  private readonly known = new Map<string, Range[]>();
  /** Partitions this process made, by table (metrics). */
  readonly created = new Map<string, number>();

  constructor(
    private readonly db: Db,
    readonly interval: PartitionInterval,
  ) {}

  private covered(table: string, t: number): boolean {
    return (this.known.get(table) ?? []).some((r) => r.lo <= t && t < r.hi);
  }

  /** Forgets what it knew of `table` (a partition dropped here or by another instance). */
  forget(table: string): void {
    this.known.delete(table);
  }

  /** Makes sure a partition of `table` holds each of `times` (ms). */
  async ensure(table: string, times: Iterable<number>): Promise<void> {
    // One check per interval, not per record: a bulk of a thousand falls in one or two.
    const missing = new Map<number, number>();
    for (const t of times) {
      if (!this.covered(table, t)) missing.set(periodStart(t, this.interval), t);
    }
    if (missing.size === 0) return;
    if (!this.known.has(table)) {
      const { rows } = await this.db.query<{ kind: string }>('SELECT relkind::text AS kind FROM pg_class WHERE oid = to_regclass($1)', [
        table,
      ]);
      // A table not (yet) partitioned holds every time: nothing to make (a database whose upgrade
      // has not run, or a layout kept unpartitioned for comparison: bench/storage.ts).
      this.known.set(table, rows[0]?.kind === 'p' ? await listPartitions(this.db, table) : [{ lo: -Infinity, hi: Infinity }]);
      for (const [k, t] of missing) if (this.covered(table, t)) missing.delete(k);
    }
    for (const t of missing.values()) await this.create(table, t);
  }

  /** Creates the partition for `t` unless one holds it (every instance may race for it). */
  private async create(table: string, t: number): Promise<void> {
    if (!tableNamed(table)) throw new Error(`${table} is not a partitioned table`);
    const made = await this.db.tx(async (q) => {
      await q.query(`SELECT pg_advisory_xact_lock(${STORAGE_LOCK_SPACE}, hashtext($1))`, [table]);
      const existing = await listPartitions(q, table);
      this.known.set(table, existing);
      if (existing.some((r) => r.lo <= t && t < r.hi)) return false;
      const range = rangeFor(t, existing, this.interval);
      const taken = new Set(existing.map((p) => p.name));
      let name = partitionName(table, range.lo);
      for (let n = 2; taken.has(name) || (await q.query('SELECT to_regclass($1) AS r', [name])).rows[0]!.r; n++) {
        name = `${partitionName(table, range.lo)}_${n}`;
      }
      // Not CREATE TABLE ... PARTITION OF: that takes an exclusive lock on the parent, queued
      // behind every running read. ATTACH takes SHARE UPDATE EXCLUSIVE, which lets reads and writes
      // go on; the empty table is checked in no time, and gets the parent's indexes and keys.
      await q.query(`CREATE TABLE ${name} (LIKE ${table} INCLUDING DEFAULTS)`);
      await q.query(`ALTER TABLE ${table} ATTACH PARTITION ${name} FOR VALUES FROM (${sqlTime(range.lo)}) TO (${sqlTime(range.hi)})`);
      // Its GIN indexes take each insert into their tree (migration 0027: a full pending list
      // stalls the insert that finds it so for half a second).
      const { rows: gin } = await q.query<{ idx: string }>(
        `SELECT i.indexrelid::regclass::text AS idx FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
          WHERE i.indrelid = $1::regclass AND a.amname = 'gin'`,
        [name],
      );
      for (const g of gin) await q.query(`ALTER INDEX ${g.idx} SET (fastupdate = off)`);
      this.known.get(table)!.push(range);
      return true;
    });
    if (made) this.created.set(table, (this.created.get(table) ?? 0) + 1);
  }

  /** The partitions every table needs soon: from the current interval to `ahead` ms from now. */
  async prepare(tables: Iterable<string>, now: number, ahead: number): Promise<void> {
    const times: number[] = [];
    for (let t = periodStart(now, this.interval); t <= now + ahead; t = periodEnd(t, this.interval)) times.push(t);
    times.push(now + ahead);
    for (const table of tables) await this.ensure(table, times);
  }
}

/** The table and key of PostgreSQL's "no partition of relation ... found for row", else null. */
export function missingPartition(e: unknown): { table: string; time: number } | null {
  const err = e as { code?: string; message?: string; detail?: string };
  if (err?.code !== '23514') return null;
  const table = /no partition of relation "([^"]+)" found for row/.exec(err.message ?? '')?.[1];
  const value = /\) = \((.+)\)\.?$/.exec(err.detail ?? '')?.[1];
  if (!table || !value || !tableNamed(table)) return null;
  const time = parsePgTime(value);
  return Number.isNaN(time) ? null : { table, time };
}

/**
 * The database with one more guarantee: a write whose row has no partition yet gets one made,
 * then runs again (a failed statement, or transaction, changed nothing). Each retry makes at least
 * one partition; a statement spanning more intervals than `MAX_RETRIES` is refused as it was.
 */
export function withPartitions(db: Db, partitions: Partitions): Db {
  const MAX_RETRIES = 64;
  const retry = async <T>(run: () => Promise<T>): Promise<T> => {
    for (let n = 0; ; n++) {
      try {
        return await run();
      } catch (e) {
        const miss = missingPartition(e);
        if (!miss || n >= MAX_RETRIES) throw e;
        partitions.forget(miss.table);
        await partitions.ensure(miss.table, [miss.time]);
      }
    }
  };
  return {
    ...db,
    query: (text, params, name) => retry(() => db.query(text, params, name)),
    tx: (fn) => retry(() => db.tx(fn)),
    serialized: (keys, fn) => retry(() => db.serialized(keys, fn)),
  };
}
