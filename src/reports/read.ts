// The raw records a report reads: one asset's rows of one table in the range, oldest first by
// (when_created, id), a page at a time by keyset, so a report over months of data holds one page.
import type { Queryable } from '../db/db.js';
import type { ReportScope } from './scope.js';

const PAGE = 10_000;

/**
 * The rows of `table` for `assetId` with from <= when_created < to that the scope may read:
 * `t` (epoch ms) and the columns `columns` selects (it may push parameters).
 */
export async function* timeOrdered<R>(
  db: Queryable,
  s: ReportScope,
  table: string,
  assetId: string,
  range: { from: number; to: number },
  columns: (params: unknown[]) => string,
  pageRows = PAGE,
): AsyncGenerator<(R & { t: number })[]> {
  let after: { us: string; id: string } | null = null;
  for (;;) {
    const params: unknown[] = [assetId, new Date(range.from), new Date(range.to)];
    const owners = await s.owners.where('owner_id', params);
    const select = columns(params);
    const cursor: string = after
      ? `AND (when_created, id) > (timestamptz 'epoch' + $${params.push(after.us)}::int8 * interval '1 microsecond', $${params.push(after.id)}::int8)`
      : '';
    const { rows }: { rows: (R & { t: number; _us: string; _id: string })[] } = await db.query(
      `SELECT (extract(epoch FROM when_created) * 1000)::float8 AS t, ${select},
              (extract(epoch FROM when_created) * 1000000)::int8::text AS _us, id::text AS _id
         FROM ${table} WHERE asset_id = $1 AND ${owners} AND when_created >= $2 AND when_created < $3 ${cursor}
        ORDER BY when_created, id LIMIT ${pageRows}`,
      params,
    );
    if (rows.length) yield rows;
    if (rows.length < pageRows) return;
    const last: { _us: string; _id: string } = rows[rows.length - 1]!;
    after = { us: last._us, id: last._id };
  }
}

/** Ranges of one query: at most this long together (at one record a second, 86,400 rows), and this many. */
const RANGES_MS = 24 * 3_600_000;
const RANGES_MAX = 64;

/**
 * The rows of `table` for `assetId` in each of `ranges` (sorted, not overlapping), oldest first:
 * the ranges a query at a time, as many as add up to RANGES_MS (a long one alone, paged). The
 * ranges are conditions of the query itself, so the planner leaves out the partitions none reaches.
 */
export async function* inRanges<R>(
  db: Queryable,
  s: ReportScope,
  table: string,
  assetId: string,
  ranges: { from: number; to: number }[],
  columns: (params: unknown[]) => string,
): AsyncGenerator<(R & { t: number })[]> {
  for (let i = 0; i < ranges.length; ) {
    if (ranges[i]!.to - ranges[i]!.from >= RANGES_MS) {
      yield* timeOrdered<R>(db, s, table, assetId, ranges[i]!, columns);
      i++;
      continue;
    }
    const params: unknown[] = [assetId];
    const conditions: string[] = [];
    let total = 0;
    while (i < ranges.length && conditions.length < RANGES_MAX) {
      const r = ranges[i]!;
      if (r.to - r.from >= RANGES_MS || total + (r.to - r.from) > RANGES_MS) break;
      total += r.to - r.from;
      conditions.push(`(when_created >= $${params.push(new Date(r.from))} AND when_created < $${params.push(new Date(r.to))})`);
      i++;
    }
    const owners = await s.owners.where('owner_id', params);
    const select = columns(params);
    const { rows }: { rows: (R & { t: number })[] } = await db.query(
      `SELECT (extract(epoch FROM when_created) * 1000)::float8 AS t, ${select}
         FROM ${table} WHERE asset_id = $1 AND ${owners} AND (${conditions.join(' OR ')})
        ORDER BY when_created, id`,
      params,
    );
    if (rows.length) yield rows;
  }
}
