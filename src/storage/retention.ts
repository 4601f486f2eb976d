// Retention (docs/DESIGN.md, "Storage"): what expired goes, in bulk, never row by row on the hot path.
// - Data records, events and notifications expire by the retention of the owner each row was
//   stored for: own `retentionDays`, else the parent's (recursively), else RETENTION_DAYS, and
//   never longer than RETENTION_DAYS. A partition is dropped once every owner with rows in it has
//   passed it; before that, the rows of owners whose retention is shorter than the longest among
//   them are deleted in batches.
// - A retention made shorter (an owner's, a parent's move, RETENTION_DAYS) counts only after
//   RETENTION_GRACE_SECONDS: until then the longer one it replaced still protects the data
//   (retention_holds), so a typo can be undone before anything is lost.
// - The event log's partitions go once past the delivery results' retention and once nothing
//   still needs a row of them: every live integration has read past them, no delivery waits on or
//   may be redelivered from them (parked events included), no live claim holds them, and with the
//   event log on Kafka the consumer group has handed every event of them over (logFloor). A log
//   position is a transaction id, not a time: these are checked on the rows, not on the partition's dates.
// - Delivery results' partitions go past the longer of the two result retentions.
// - Hourly rollups' partitions go once every hour they cover is ROLLUP_RETENTION_DAYS old,
//   whatever the retention of the raw data they sum.
// Never removed here: the latest position of an asset (asset_positions holds its location),
// alert state, anything outside these tables.
import type { Db } from '../db/db.js';
import { listPartitions, type PartitionInfo, type Partitions, STORAGE_LOCK_SPACE } from './partitions.js';
import { PARTITIONED, type PartitionedTable } from './tables.js';

const DAY = 86_400_000;
const BATCH = 10_000;

export interface RetentionSettings {
  /** RETENTION_DAYS: null keeps forever. */
  systemDays: number | null;
  succeededDays: number;
  failedDays: number;
  /** ROLLUP_RETENTION_DAYS. */
  rollupDays: number;
}

/** Days per owner (null: forever), as retention applies them now (holds included). */
export interface OwnerDays {
  of(ownerId: string): number | null;
  /** Whether any owner's data can expire at all (false: nothing to look at in the owned tables). */
  expires: boolean;
}

const longest = (values: (number | null)[]) => (values.some((v) => v === null) ? null : Math.max(...(values as number[])));

/**
 * Each owner's retention as it applies to deletion: the longest of its setting and every setting a
 * hold still protects (the same for RETENTION_DAYS), resolved through the tree.
 */
export async function ownerDays(db: Db, systemDays: number | null): Promise<OwnerDays> {
  const owners = await db.query<{ id: string; parent_id: string | null; retention_days: number | null }>(
    'SELECT id, parent_id, retention_days FROM owners',
  );
  const holds = await db.query<{ owner_id: string | null; days: number | null }>(
    'SELECT owner_id, days FROM retention_holds WHERE until > now()',
  );
  const cap = longest([systemDays, ...holds.rows.filter((h) => !h.owner_id).map((h) => h.days)]);
  const own = new Map<string, (number | null)[]>();
  const parent = new Map<string, string | null>();
  for (const o of owners.rows) {
    own.set(o.id, [o.retention_days]);
    parent.set(o.id, o.parent_id);
  }
  for (const h of holds.rows) if (h.owner_id && own.has(h.owner_id)) own.get(h.owner_id)!.push(h.days);
  const memo = new Map<string, number | null>();
  const resolve = (id: string, depth: number): number | null => {
    if (memo.has(id)) return memo.get(id)!;
    const p = parent.get(id);
    const inherited = () => (p && depth < 100 ? resolve(p, depth + 1) : cap);
    const v = longest((own.get(id) ?? [null]).map((c) => (c === null ? inherited() : c)));
    const out = cap === null ? v : v === null ? cap : Math.min(v, cap);
    memo.set(id, out);
    return out;
  };
  // An owner deleted since (its history stays) is treated as a top-level owner: RETENTION_DAYS.
  const of = (id: string) => (parent.has(id) ? resolve(id, 0) : cap);
  return { of, expires: cap !== null || owners.rows.some((o) => of(o.id) !== null) };
}

export interface RetentionResult {
  /** Rows removed, by table. */
  removed: Record<string, number>;
  dropped: string[];
}

export class Retention {
  /** Rows removed and partitions dropped since start, by table (metrics). */
  readonly removed = new Map<string, number>();
  readonly dropped = new Map<string, number>();

  /** Runs before anything is removed (the rollups sum what they still need of the raw rows). */
  before: (() => Promise<unknown>) | null = null;

  /**
   * The event log on Kafka (EVENT_LOG=kafka): the log position above which every row is kept
   * besides the PostgreSQL mode's rule, as the consumer group stands (eventlog/floor.ts: what it has
   * not handed over); null: that rule alone. Asked once a pass, before the event log's partitions.
   */
  logFloor: (() => Promise<{ tx: string; id: string } | null>) | null = null;

  constructor(
    private readonly db: Db,
    private readonly partitions: Partitions,
    private readonly s: RetentionSettings,
  ) {}

  async run(now = Date.now()): Promise<RetentionResult> {
    const out: RetentionResult = { removed: {}, dropped: [] };
    await this.before?.();
    const days = await ownerDays(this.db, this.s.systemDays);
    // The consumer group's floor: asked once a pass, when a partition of the event log is old enough.
    let asked: Promise<{ tx: string; id: string } | null> | undefined;
    const floor = () => (asked ??= this.logFloor?.() ?? Promise.resolve(null));
    for (const t of PARTITIONED) {
      const parts = await listPartitions(this.db, t.name);
      for (const p of parts.filter((x) => x.detaching)) await this.drop(t, p, out);
      if (t.expiry === 'owned' && !days.expires) continue; // everything is kept forever
      for (const p of parts.filter((x) => !x.detaching && x.lo < now)) {
        if (t.expiry === 'owned') await this.owned(t, p, days, now, out);
        else if (await this.expired(t, p, now, floor)) await this.drop(t, p, out);
      }
    }
    return out;
  }

  private count(table: string, n: number, out: RetentionResult) {
    if (n === 0) return;
    out.removed[table] = (out.removed[table] ?? 0) + n;
    this.removed.set(table, (this.removed.get(table) ?? 0) + n);
  }

  /** Data of owners: drop the partition once all its owners passed it, else delete the shorter-lived owners' rows. */
  private async owned(t: PartitionedTable, p: PartitionInfo, days: OwnerDays, now: number, out: RetentionResult) {
    // The partition's owners, one index descent each (a loose scan of the (owner_id, time) index).
    const { rows } = await this.db.query<{ owner_id: string }>(
      `WITH RECURSIVE o AS (
         (SELECT owner_id FROM ${p.name} ORDER BY owner_id LIMIT 1)
         UNION ALL
         SELECT (SELECT x.owner_id FROM ${p.name} x WHERE x.owner_id > o.owner_id ORDER BY x.owner_id LIMIT 1) FROM o WHERE o.owner_id IS NOT NULL
       ) SELECT owner_id FROM o WHERE owner_id IS NOT NULL`,
    );
    const owners = rows.map((r) => ({ id: r.owner_id, days: days.of(r.owner_id) }));
    const max = owners.length ? longest(owners.map((o) => o.days)) : days.of('');
    if (max !== null && p.hi + max * DAY <= now) {
      await this.drop(t, p, out);
      return;
    }
    for (const o of owners) {
      if (o.days === null || (max !== null && o.days >= max)) continue;
      const cutoff = now - o.days * DAY;
      if (cutoff <= p.lo) continue;
      for (;;) {
        const { rowCount } = await this.db.query(
          `DELETE FROM ${p.name} WHERE ctid = ANY(ARRAY(
             SELECT ctid FROM ${p.name} WHERE owner_id = $1 AND ${t.key} < $2 LIMIT ${BATCH}))`,
          [o.id, new Date(cutoff)],
        );
        this.count(t.name, rowCount, out);
        if (rowCount < BATCH) break;
      }
    }
  }

  /** The event log's, the delivery results' and the rollups' partitions. */
  private async expired(
    t: PartitionedTable,
    p: PartitionInfo,
    now: number,
    floorOf: () => Promise<{ tx: string; id: string } | null>,
  ): Promise<boolean> {
    const keep = (t.expiry === 'rollups' ? this.s.rollupDays : Math.max(this.s.succeededDays, this.s.failedDays)) * DAY;
    if (p.hi + keep > now) return false;
    if (t.expiry !== 'log') return true;
    const floor = await floorOf();
    const { rows } = await this.db.query<{ needed: boolean }>(
      `WITH r AS (SELECT min(id) AS lo, max(id) AS hi FROM ${p.name})
       SELECT EXISTS (
                SELECT 1 FROM integration_state s JOIN integrations i ON i.id = s.integration_id
                 WHERE i.deleted_at IS NULL
                   AND EXISTS (SELECT 1 FROM ${p.name} o WHERE (o.tx_id, o.id) > (s.log_tx, s.log_id)))
           OR EXISTS (SELECT 1 FROM deliveries d JOIN integrations i ON i.id = d.integration_id AND i.deleted_at IS NULL, r
                       WHERE d.status <> 'SUCCEEDED' AND d.log_id BETWEEN r.lo AND r.hi)
           OR EXISTS (SELECT 1 FROM delivery_claims c, unnest(c.log_ids) x, r WHERE x BETWEEN r.lo AND r.hi)
           OR ($1::bigint IS NOT NULL AND EXISTS (SELECT 1 FROM ${p.name} o WHERE (o.tx_id, o.id) > ($1::bigint, $2::bigint))) AS needed`,
      [floor?.tx ?? null, floor?.id ?? null],
    );
    return !rows[0]!.needed;
  }

  /**
   * Detaches the partition (CONCURRENTLY on PostgreSQL: reads and writes go on) and drops it.
   * Under the table's lock, so no partition is made for its range meanwhile.
   */
  private async drop(t: PartitionedTable, p: PartitionInfo, out: RetentionResult) {
    // The rows it held: the planner's estimate for a large partition (counting millions of rows
    // about to be dropped would cost more than the drop), an exact count for a small one.
    const estimate = Number(
      (await this.db.query<{ n: number }>('SELECT reltuples AS n FROM pg_class WHERE oid = to_regclass($1)', [p.name])).rows[0]?.n ?? -1,
    );
    const n =
      estimate >= 100_000
        ? Math.round(estimate)
        : Number((await this.db.query<{ n: string }>(`SELECT count(*) AS n FROM ${p.name}`)).rows[0]!.n);
    await this.db.session(async (s) => {
      await s.query(`SELECT pg_advisory_lock(${STORAGE_LOCK_SPACE}, hashtext($1))`, [t.name]);
      try {
        if (this.db.kind === 'postgres') {
          await s.exec(`ALTER TABLE ${t.name} DETACH PARTITION ${p.name} ${p.detaching ? 'FINALIZE' : 'CONCURRENTLY'}`);
          await s.exec(`DROP TABLE ${p.name}`);
        } else {
          await s.exec(`BEGIN; ALTER TABLE ${t.name} DETACH PARTITION ${p.name}; DROP TABLE ${p.name}; COMMIT`);
        }
      } finally {
        await s.query(`SELECT pg_advisory_unlock(${STORAGE_LOCK_SPACE}, hashtext($1))`, [t.name]);
      }
    });
    this.partitions.forget(t.name);
    this.count(t.name, n, out);
    this.dropped.set(t.name, (this.dropped.get(t.name) ?? 0) + 1);
    out.dropped.push(p.name);
  }
}
