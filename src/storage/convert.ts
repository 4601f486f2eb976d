// Turning the plain tables into partitioned ones in place (migration 0014), without copying a row
// and without holding an exclusive lock for longer than a few catalog changes:
//   1. the table's newest time bounds the first partition: [MINVALUE, B), B the start of the
//      interval after both now and that time;
//   2. a CHECK (key < B) is added NOT VALID (instant) and validated (a scan that lets reads and
//      writes go on), and a unique index on (id, key), the partitioned primary key, is built
//      CONCURRENTLY;
//   3. one short transaction renames the table to <table>_legacy, creates the partitioned parent
//      under the old name (same columns, defaults, indexes and keys; its identity continues the
//      old sequence) and attaches the old table as its first partition. The valid CHECK proves the
//      partition's range, so ATTACH reads no row, and the old indexes match the parent's and are
//      attached as they are.
// An empty table (every new installation) is simply replaced in step 3. Every step can run again
// after a crash. Rows keep their ids; rows arriving during the conversion land in the old table.
import type { Session } from '../db/db.js';
import { PARTITIONED, type PartitionInterval, type PartitionedTable, periodEnd, periodStart, sqlTime } from './tables.js';

/** Ids skipped between the old sequence and the parent's: stores that took ids just before the swap. */
const ID_GAP = 10_000n;

export interface ConvertOptions {
  interval: PartitionInterval;
  /** CREATE INDEX CONCURRENTLY (PostgreSQL); PGlite has one connection and builds it plainly. */
  concurrently: boolean;
  now?: () => number;
}

export async function convertToPartitions(s: Session, o: ConvertOptions): Promise<void> {
  for (const t of PARTITIONED) if (!t.bornPartitioned) await convertTable(s, t, o);
}

const isPartitioned = async (s: Session, table: string) =>
  (await s.query<{ k: string }>(`SELECT relkind::text AS k FROM pg_class WHERE oid = to_regclass($1)`, [table])).rows[0]?.k === 'p';

async function inTransaction<T>(s: Session, fn: () => Promise<T>): Promise<T> {
  await s.exec('BEGIN');
  try {
    // Waits for a lock at most 5 s (then the step fails and runs again at the next start) rather
    // than queueing every other session behind it.
    await s.exec("SET LOCAL lock_timeout = '5s'");
    const out = await fn();
    await s.exec('COMMIT');
    return out;
  } catch (e) {
    await s.exec('ROLLBACK');
    throw e;
  }
}

async function convertTable(s: Session, t: PartitionedTable, o: ConvertOptions): Promise<void> {
  if (await isPartitioned(s, t.name)) return;
  // An empty table is replaced at once.
  if (await inTransaction(s, () => swap(s, t, null))) return;

  const check = `${t.name}_partition_check`;
  const key = `${t.name}_legacy_key`;
  const { rows } = await s.query<{ newest: Date | null }>(`SELECT max(${t.key}) AS newest FROM ${t.name}`);
  const now = o.now?.() ?? Date.now();
  const newest = Math.max(now, rows[0]?.newest?.getTime() ?? now);
  const bound = periodEnd(periodStart(newest, o.interval), o.interval);
  await inTransaction(s, async () => {
    await s.exec(`ALTER TABLE ${t.name} DROP CONSTRAINT IF EXISTS ${check}`);
    await s.exec(`ALTER TABLE ${t.name} ADD CONSTRAINT ${check} CHECK (${t.key} < ${sqlTime(bound)}) NOT VALID`);
  });
  await s.exec(`ALTER TABLE ${t.name} VALIDATE CONSTRAINT ${check}`);
  const index = await s.query<{ valid: boolean }>('SELECT i.indisvalid AS valid FROM pg_index i WHERE i.indexrelid = to_regclass($1)', [
    key,
  ]);
  if (index.rows[0] && !index.rows[0].valid) await s.exec(`DROP INDEX ${key}`); // a concurrent build that died
  if (!index.rows[0]?.valid) {
    await s.exec(`CREATE UNIQUE INDEX ${o.concurrently ? 'CONCURRENTLY ' : ''}${key} ON ${t.name} (id, ${t.key})`);
  }
  await inTransaction(s, () => swap(s, t, bound));
}

/**
 * Step 3. `bound` null: only when the table is empty (answers false otherwise, changing nothing).
 */
async function swap(s: Session, t: PartitionedTable, bound: number | null): Promise<boolean> {
  const legacy = `${t.name}_legacy`;
  await s.exec(`LOCK TABLE ${t.name} IN ACCESS EXCLUSIVE MODE`);
  if (bound === null && (await s.query(`SELECT 1 FROM ${t.name} LIMIT 1`)).rows.length) return false;
  const seq = await s.query<{ last: string; called: boolean }>(
    `SELECT last_value::text AS last, is_called AS called FROM ${(await s.query<{ s: string }>(`SELECT pg_get_serial_sequence($1, 'id') AS s`, [t.name])).rows[0]!.s}`,
  );
  const next = BigInt(seq.rows[0]!.last) + (seq.rows[0]!.called ? 1n : 0n) + (bound === null ? 0n : ID_GAP);
  const indexes = await s.query<{ name: string; def: string; unique: boolean }>(
    `SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS def, i.indisunique AS unique
       FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
      WHERE i.indrelid = to_regclass($1) AND NOT i.indisprimary AND c.relname <> $2`,
    [t.name, `${t.name}_legacy_key`],
  );
  const fks = await s.query<{ name: string; def: string }>(
    `SELECT conname AS name, pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conrelid = to_regclass($1) AND contype = 'f'`,
    [t.name],
  );
  await s.exec(`ALTER TABLE ${t.name} RENAME TO ${legacy}`);
  for (const i of indexes.rows) await s.exec(`ALTER INDEX ${i.name} RENAME TO ${i.name}_legacy`);
  for (const f of fks.rows) await s.exec(`ALTER TABLE ${legacy} RENAME CONSTRAINT ${f.name} TO ${f.name}_legacy`);
  if (bound === null) {
    await s.exec(`ALTER TABLE ${legacy} RENAME CONSTRAINT ${t.name}_pkey TO ${legacy}_pkey`);
  } else {
    await s.exec(`ALTER TABLE ${legacy} DROP CONSTRAINT ${t.name}_pkey`);
    await s.exec(`ALTER TABLE ${legacy} ADD CONSTRAINT ${legacy}_pkey PRIMARY KEY USING INDEX ${t.name}_legacy_key`);
  }
  await s.exec(`ALTER TABLE ${legacy} ALTER COLUMN id DROP IDENTITY`);
  await s.exec(`CREATE TABLE ${t.name} (LIKE ${legacy} INCLUDING DEFAULTS) PARTITION BY RANGE (${t.key})`);
  await s.exec(`ALTER TABLE ${t.name} ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (START WITH ${next})`);
  await s.exec(`ALTER TABLE ${t.name} ADD CONSTRAINT ${t.name}_pkey PRIMARY KEY (id, ${t.key})`);
  for (const i of indexes.rows) {
    // A unique index must hold the partition key to be enforced on a partitioned table: the one
    // such index (the event log's event_id) is not carried over (docs/DESIGN.md, "Storage": event ids).
    if (i.unique && !i.def.includes(t.key)) continue;
    await s.exec(i.def);
  }
  for (const f of fks.rows) await s.exec(`ALTER TABLE ${t.name} ADD CONSTRAINT ${f.name} ${f.def}`);
  if (bound === null) {
    await s.exec(`DROP TABLE ${legacy}`);
  } else {
    await s.exec(`ALTER TABLE ${t.name} ATTACH PARTITION ${legacy} FOR VALUES FROM (MINVALUE) TO (${sqlTime(bound)})`);
    await s.exec(`ALTER TABLE ${legacy} DROP CONSTRAINT ${t.name}_partition_check`);
  }
  return true;
}
