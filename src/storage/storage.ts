// The storage lifecycle of one service process: the partition cache every write goes through
// (withPartitions), the records hook that makes a bulk's partitions before its store, and the
// background task that makes partitions ahead of time and applies retention, one instance at a
// time (a session advisory lock; the others skip their turn).
import { record as audit } from '../audit/audit.js';
import type { Db } from '../db/db.js';
import type { MigrationProgram } from '../db/migrate.js';
import type { ObjectType } from '../eventlog/objects.js';
import type { PreparedItem, RecordHook } from '../records/hooks.js';
import { fillRollups } from '../rollups/fill.js';
import { convertToPartitions } from './convert.js';
import { Partitions, STORAGE_LOCK_SPACE, withPartitions } from './partitions.js';
import { Retention, type RetentionSettings } from './retention.js';
import { PARTITIONED, type PartitionInterval } from './tables.js';

export interface StorageSettings extends RetentionSettings {
  interval: PartitionInterval;
  /** How often retention runs (RETENTION_CHECK_SECONDS). */
  checkSeconds: number;
  /** RETENTION_GRACE_SECONDS. */
  graceSeconds: number;
  /** How far ahead of now a record may be dated (FUTURE_TOLERANCE_SECONDS): partitions exist that far. */
  aheadSeconds: number;
}

/** The migrations' programs (migrate.ts): the partitioning of the existing tables; the rollups of their rows. */
export const migrationPrograms = (kind: Db['kind'], interval: PartitionInterval): Record<string, MigrationProgram> => ({
  'partition-by-time': (s) => convertToPartitions(s, { interval, concurrently: kind === 'postgres' }),
  'fill-rollups': fillRollups,
});

/** The task's lock key in STORAGE_LOCK_SPACE (a table's partition changes use hashtext(its name)). */
const TASK_KEY = 0;

export class Storage {
  readonly partitions: Partitions;
  readonly retention: Retention;
  /** The database every module uses: a write lacking a partition gets it made and runs again. */
  readonly db: Db;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<unknown> | null = null;
  lastRun: Date | null = null;

  constructor(
    private readonly raw: Db,
    private readonly s: StorageSettings,
    private readonly log: { warn: (o: object, m: string) => void },
  ) {
    this.partitions = new Partitions(raw, s.interval);
    this.retention = new Retention(raw, this.partitions, s);
    this.db = withPartitions(raw, this.partitions);
  }

  /**
   * Before a store: the partitions of the records' times in their table, in the rollups they add
   * to, and in events and notifications they may raise.
   */
  hook(type: ObjectType, table: string): RecordHook<void> {
    return {
      name: `storage:${table}`,
      types: [type],
      before: async (_q, batch: PreparedItem[]) => {
        const times = batch.map((p) => Date.parse(p.whenCreated));
        for (const t of [table, 'rollups', 'events', 'notifications']) await this.partitions.ensure(t, times);
      },
    };
  }

  /**
   * Records a change of RETENTION_DAYS since the last start: a shorter one waits for the grace
   * like an owner's (a hold of the old value).
   */
  private async noteSystemRetention(): Promise<void> {
    await this.raw.tx(async (q) => {
      await q.query(`SELECT pg_advisory_xact_lock(${STORAGE_LOCK_SPACE}, 1)`);
      const { rows } = await q.query<{ value: { days: number | null } }>("SELECT value FROM service_state WHERE name = 'retention'");
      const before = rows[0]?.value.days;
      if (before === this.s.systemDays) return;
      if (rows[0]) {
        await q.query('INSERT INTO retention_holds (owner_id, days, until) VALUES (NULL, $1, now() + make_interval(secs => $2))', [
          before,
          this.s.graceSeconds,
        ]);
        // A change of the service's configuration, made by whoever started it with a new value.
        await audit(q, {
          actor: { type: 'system', id: 'RETENTION_DAYS' },
          address: null,
          ownerId: null,
          action: 'update',
          resource: { type: 'retention', id: 'system' },
          changes: { days: { from: before ?? null, to: this.s.systemDays } },
        });
      }
      await q.query(
        `INSERT INTO service_state (name, value) VALUES ('retention', $1) ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value`,
        [JSON.stringify({ days: this.s.systemDays })],
      );
    });
  }

  /**
   * How far ahead partitions are made: the future tolerance, and at least a day, so the next
   * interval's partitions exist a day before it starts.
   */
  private get aheadMs(): number {
    return Math.max(this.s.aheadSeconds * 1000, 86_400_000);
  }

  /**
   * At start (before serving): the partitions the periodic task would make (this interval's, and
   * the next one's within a day of it: made here, not by the first turn while requests are served),
   * then the periodic task.
   */
  async start(): Promise<void> {
    await this.noteSystemRetention();
    await this.partitions.prepare(
      PARTITIONED.map((t) => t.name),
      Date.now(),
      this.aheadMs,
    );
    const every = Math.min(this.s.checkSeconds, 3600) * 1000;
    this.timer = setInterval(() => void this.tick(), every);
    this.timer.unref();
    void this.tick();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running?.catch(() => {});
  }

  private due = 0;

  /** One turn of the task: partitions ahead every time; retention every RETENTION_CHECK_SECONDS. */
  tick(now = Date.now()): Promise<unknown> {
    this.running ??= this.exclusive(async () => {
      await this.partitions.prepare(
        PARTITIONED.map((t) => t.name),
        now,
        this.aheadMs,
      );
      if (now >= this.due) {
        await this.retention.run(now);
        this.due = now + this.s.checkSeconds * 1000;
        this.lastRun = new Date(now);
      }
    })
      .catch((e) => this.log.warn({ err: e }, 'storage maintenance failed'))
      .finally(() => {
        this.running = null;
      });
    return this.running;
  }

  /** Runs retention now, in this instance, whoever holds the task (tests and operators' scripts). */
  runRetention(now = Date.now()) {
    return this.exclusive(() => this.retention.run(now), true);
  }

  /** fn under the task's lock; skipped (undefined) when another instance holds it, unless `wait`. */
  private exclusive<T>(fn: () => Promise<T>, wait = false): Promise<T | undefined> {
    return this.raw.session(async (s) => {
      const got = await s.query<{ ok: boolean }>(
        wait
          ? `SELECT true AS ok FROM pg_advisory_lock(${STORAGE_LOCK_SPACE}, ${TASK_KEY})`
          : `SELECT pg_try_advisory_lock(${STORAGE_LOCK_SPACE}, ${TASK_KEY}) AS ok`,
      );
      if (!got.rows[0]?.ok) return undefined;
      try {
        return await fn();
      } finally {
        await s.query(`SELECT pg_advisory_unlock(${STORAGE_LOCK_SPACE}, ${TASK_KEY})`);
      }
    });
  }

  /** Per table: partitions and bytes on disk (table, indexes and TOAST of every partition), in one query. */
  async sizes(): Promise<{ table: string; partitions: number; bytes: number }[]> {
    const { rows } = await this.raw.query<{ table: string; partitions: number; bytes: string }>(
      `SELECT t.name AS table, (count(*) FILTER (WHERE p.level = 1))::int AS partitions,
              COALESCE(sum(pg_total_relation_size(p.relid)) FILTER (WHERE p.isleaf), 0)::int8 AS bytes
         FROM unnest($1::text[]) AS t(name) CROSS JOIN LATERAL pg_partition_tree(to_regclass(t.name)) p
        GROUP BY t.name`,
      [PARTITIONED.map((t) => t.name)],
    );
    return rows.map((r) => ({ table: r.table, partitions: r.partitions, bytes: Number(r.bytes) }));
  }
}
