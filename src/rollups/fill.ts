// Migration 0021 (a program): the rollups of the records stored before rollups existed, summed by
// the same SQL that sums a closed hour, in one transaction (a crash leaves nothing behind, and the
// migration runs again at the next start). Every hour up to the newest record's (or now's): the
// later ones are summed as they close.
import type { Session } from '../db/db.js';
import { aggregate, ROLLUP_COLUMNS, ROLLUP_TABLES, type RollupType } from './sql.js';

export async function fillRollups(s: Session): Promise<void> {
  await s.exec('BEGIN');
  try {
    const tables = Object.values(ROLLUP_TABLES);
    const { rows } = await s.query<{ bound: string | null }>(
      `SELECT (rollup_hour(greatest(max(t), now())) + interval '1 hour')::text AS bound
         FROM (${tables.map((t) => `SELECT max(when_created) AS t FROM ${t}`).join(' UNION ALL ')}) x
        HAVING max(t) IS NOT NULL`,
    );
    const bound = rows[0]?.bound;
    if (bound) {
      // Every hour with a record so far in one partition; the storage module makes the later ones.
      await s.exec(`CREATE TABLE rollups_before PARTITION OF rollups FOR VALUES FROM (MINVALUE) TO ('${bound}')`);
      for (const [type, table] of Object.entries(ROLLUP_TABLES)) {
        await s.exec(`INSERT INTO rollups (${ROLLUP_COLUMNS}) ${aggregate(type as RollupType, table)}`);
      }
      await s.query('UPDATE rollup_state SET materialized = greatest(materialized, $1)', [bound]);
    }
    await s.exec('COMMIT');
  } catch (e) {
    await s.exec('ROLLBACK');
    throw e;
  }
}
