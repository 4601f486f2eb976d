// Hourly rollups kept up to date as records arrive (README, "Reports and rollups"): a records hook
// that adds each store's hours to the rollups in the store's own statement (so they commit, or
// fail, with the records), and the repair of a row whose distance or longest step the statement
// could not extend (a store whose records fall between the hour's stored ones: a late record).
// The repair runs right after such a store commits and, for a process that died in between, on a
// sweep. Several instances may repair at once: each takes the rows it fixes with SKIP LOCKED.
import type { Db } from '../db/db.js';
import type { WriteStatement } from '../db/statement.js';
import type { RecordHook, StoredItem } from '../records/hooks.js';
import { aggregate, recompute, ROLLUP_COLUMNS, ROLLUP_TABLES, type RollupType, upsert } from './sql.js';
import { temperatureValues } from './values.js';

/** Stale rows one repair transaction takes. */
const REPAIR_BATCH = 200;

/** The hook for one record type: its rows' hours upserted in the store's statement. */
export function rollupHook(type: RollupType): RecordHook<void> {
  return {
    name: `rollups:${type}`,
    types: [type],
    write: async (_q, stmt: WriteStatement, rows, _c, records) => {
      let series: string | undefined;
      if (type === 'reeferdata' || type === 'gensetdata') {
        // The temperatures, taken from the records in hand (values.ts), joined to their rows.
        const ids: string[] = [];
        const keys: string[] = [];
        const values: number[] = [];
        for (const r of rows) {
          temperatureValues(r.item.data, (k, v) => {
            ids.push(r.id);
            keys.push(k);
            values.push(v);
          });
        }
        series = `SELECT i.asset_id, i.owner_id, i.when_created, u.k, u.v
                    FROM unnest(${stmt.param(ids, 'int8[]')}, ${stmt.param(keys, 'text[]')}, ${stmt.param(values, 'float8[]')}) AS u(id, k, v)
                    JOIN ${records} i USING (id)`;
      }
      const rolled = series === undefined ? aggregate(type, records) : aggregate(type, records, series);
      const up = stmt.with(`INSERT INTO rollups AS r (${ROLLUP_COLUMNS}) ${rolled} ${upsert(type)} RETURNING stale`);
      // The rows this store left stale, for the repair after the commit.
      return stmt.with(`SELECT 1 FROM ${up} WHERE stale`);
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
 * Recomputes what stale rows (of `assetIds`, or of all) could not extend, from the raw rows, until
 * none is left that another repair does not hold. A row whose raw records are no longer all there
 * (retention removed some) keeps what it has: it is as exact as can be known. Returns the rows
 * repaired.
 */
export async function repairRollups(db: Db, assetIds?: string[]): Promise<number> {
  let repaired = 0;
  for (;;) {
    const n = await db.tx(async (q) => {
      const params: unknown[] = [];
      const scope = assetIds ? `AND asset_id = ANY($${params.push(assetIds)}::uuid[])` : '';
      // Locked until the commit: a store of the same hour waits, then adds to the repaired row.
      const { rows } = await q.query<{ asset_id: string; hour: Date; owner_id: string; type: RollupType }>(
        `SELECT asset_id, hour, owner_id, type FROM rollups WHERE stale ${scope}
          ORDER BY asset_id, hour, type, owner_id LIMIT ${REPAIR_BATCH} FOR UPDATE SKIP LOCKED`,
        params,
      );
      for (const type of new Set(rows.map((r) => r.type))) {
        const mine = rows.filter((r) => r.type === type);
        // A statement of its own: its snapshot holds every store committed before the locks.
        await q.query(
          `WITH x AS (${recompute(type, 'unnest($1::uuid[], $2::timestamptz[], $3::uuid[])')})
           UPDATE rollups r SET distance_mm = CASE WHEN x.count = r.count THEN x.distance_mm ELSE r.distance_mm END,
                                max_step_us = CASE WHEN x.count = r.count THEN x.max_step_us ELSE r.max_step_us END, stale = false
             FROM x WHERE r.asset_id = x.asset_id AND r.hour = x.hour AND r.owner_id = x.owner_id AND r.type = $4`,
          [mine.map((r) => r.asset_id), mine.map((r) => r.hour), mine.map((r) => r.owner_id), type],
        );
      }
      return rows.length;
    });
    repaired += n;
    if (n < REPAIR_BATCH) return repaired;
  }
}
