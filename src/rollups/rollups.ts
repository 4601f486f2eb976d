// Hourly rollups kept up to date as records arrive (README, "Reports and rollups"): a records hook
// that adds each store's hours to the rollups in the store's own statement (so they commit, or
// fail, with the records), and the repair of a location row whose distance the statement could
// not extend (a store whose positions fall between the hour's stored ones: a late record). The
// repair runs right after such a store commits and, for a process that died in between, on a
// sweep. Several instances may repair at once: each takes the rows it fixes with SKIP LOCKED.
import type { Db } from '../db/db.js';
import type { WriteStatement } from '../db/statement.js';
import type { RecordHook, StoredItem } from '../records/hooks.js';
import { aggregate, recomputeDistance, ROLLUP_COLUMNS, ROLLUP_TABLES, type RollupType, upsert } from './sql.js';

/** Stale rows one repair transaction takes. */
const REPAIR_BATCH = 200;

/** The hook for one record type: its rows' hours upserted in the store's statement. */
export function rollupHook(type: RollupType): RecordHook<void> {
  return {
    name: `rollups:${type}`,
    types: [type],
    write: async (_q, stmt: WriteStatement, _rows, _c, records) => {
      const up = stmt.with(`INSERT INTO rollups AS r (${ROLLUP_COLUMNS}) ${aggregate(type, records)} ${upsert(type)} RETURNING stale`);
      // Locations: the rows this store left stale, for the repair after the commit.
      return type === 'location' ? stmt.with(`SELECT 1 FROM ${up} WHERE stale`) : undefined;
    },
    after: async (db, stale, rows) => {
      // The records are stored: a failed repair must not fail their request (a client would send
      // them again). The row stays stale, and the sweep (which logs its failures) repairs it.
      if (stale > 0) await repairRollups(db, [...new Set(rows.map((r: StoredItem) => r.item.assetId as string))]).catch(() => {});
    },
  };
}

/** Every record type's hook. */
export const rollupHooks = () => (Object.keys(ROLLUP_TABLES) as RollupType[]).map(rollupHook);

/**
 * Recomputes the distance of stale location rows (of `assetIds`, or of all) from the raw rows,
 * until none is left that another repair does not hold. A row whose raw positions are no longer
 * all there (retention removed some) keeps the distance it has: it is as exact as can be known.
 * Returns the rows repaired.
 */
export async function repairRollups(db: Db, assetIds?: string[]): Promise<number> {
  let repaired = 0;
  for (;;) {
    const n = await db.tx(async (q) => {
      const params: unknown[] = [];
      const scope = assetIds ? `AND asset_id = ANY($${params.push(assetIds)}::uuid[])` : '';
      // Locked until the commit: a store of the same hour waits, then adds to the repaired row.
      const { rows } = await q.query<{ asset_id: string; hour: Date; owner_id: string }>(
        `SELECT asset_id, hour, owner_id FROM rollups WHERE stale AND type = 'location' ${scope}
          ORDER BY asset_id, hour, owner_id LIMIT ${REPAIR_BATCH} FOR UPDATE SKIP LOCKED`,
        params,
      );
      if (!rows.length) return 0;
      // A statement of its own: its snapshot holds every store committed before the locks.
      await q.query(
        `WITH x AS (${recomputeDistance('unnest($1::uuid[], $2::timestamptz[], $3::uuid[])')})
         UPDATE rollups r SET distance_mm = CASE WHEN x.count = r.count THEN x.distance_mm ELSE r.distance_mm END, stale = false
           FROM x WHERE r.asset_id = x.asset_id AND r.hour = x.hour AND r.owner_id = x.owner_id AND r.type = 'location'`,
        [rows.map((r) => r.asset_id), rows.map((r) => r.hour), rows.map((r) => r.owner_id)],
      );
      return rows.length;
    });
    repaired += n;
    if (n < REPAIR_BATCH) return repaired;
  }
}
