// The summary report: per asset, the distance it covered (the great-circle steps between its
// consecutive positions in the range), its records by type, its first and last record, and the
// alerts raised for it. Where the raw records have expired, the hourly rollups give the distance,
// the counts and the first and last record time for the whole hours before the expiry; alerts
// raised then are not known (events expire with the records) and are not counted.
import type { Db } from '../db/db.js';
import { iso } from '../http/schemas.js';
import { foldRollups } from '../rollups/rollups.js';
import { readRollups } from '../rollups/routes.js';
import { ROLLUP_TABLES, type RollupType } from '../rollups/sql.js';
import type { ReportScope } from './scope.js';

export interface SummaryItem extends Record<string, unknown> {
  assetId: string;
  assetName: string;
  distanceMeters: number;
  records: Record<RollupType, number>;
  firstRecord: string | null;
  lastRecord: string | null;
  alertsRaised: number;
}

const TYPES = Object.keys(ROLLUP_TABLES) as RollupType[];
export const SUMMARY_COLUMNS = [
  'assetId',
  'assetName',
  'distanceMeters',
  ...TYPES.map((t) => `records.${t}`),
  'firstRecord',
  'lastRecord',
  'alertsRaised',
];

export async function* summary(db: Db, s: ReportScope): AsyncGenerator<SummaryItem> {
  const from = s.rawFrom ?? s.from;
  if (s.rawFrom !== null) await foldRollups(db, s.rollupDays);
  for (const asset of s.assets) {
    const params: unknown[] = [asset.id, new Date(from), new Date(s.to)];
    const owners = await s.owners.where('owner_id', params);
    const range = `asset_id = $1 AND ${owners} AND when_created >= $2 AND when_created < $3`;
    const { rows } = await db.query<{ type: string; n: number; first: Date | null; last: Date | null; mm: number | null }>(
      `SELECT 'location' AS type, count(*)::float8 AS n, min(when_created) AS first, max(when_created) AS last,
              COALESCE(sum(rollup_mm(plat, plon, latitude, longitude)), 0)::float8 AS mm
         FROM (SELECT when_created, latitude, longitude, lag(latitude) OVER w AS plat, lag(longitude) OVER w AS plon
                 FROM locations WHERE ${range} WINDOW w AS (ORDER BY when_created, id)) l
       ${TYPES.filter((t) => t !== 'location')
         .map(
           (t) =>
             `UNION ALL SELECT '${t}', count(*)::float8, min(when_created), max(when_created), NULL FROM ${ROLLUP_TABLES[t]} WHERE ${range}`,
         )
         .join('\n')}
       UNION ALL SELECT 'alerts', count(*)::float8, NULL, NULL, NULL FROM events WHERE ${range} AND severity = 'ALERT'`,
      params,
    );
    const item: SummaryItem = {
      assetId: asset.id,
      assetName: asset.name,
      distanceMeters: 0,
      records: Object.fromEntries(TYPES.map((t) => [t, 0])) as Record<RollupType, number>,
      firstRecord: null,
      lastRecord: null,
      alertsRaised: 0,
    };
    let first: number | null = null;
    let last: number | null = null;
    const seen = (a: Date | null, b: Date | null) => {
      if (a && (first === null || a.getTime() < first)) first = a.getTime();
      if (b && (last === null || b.getTime() > last)) last = b.getTime();
    };
    for (const r of rows) {
      if (r.type === 'alerts') item.alertsRaised = r.n;
      else item.records[r.type as RollupType] += r.n;
      if (r.type === 'location') item.distanceMeters += (r.mm ?? 0) / 1000;
      seen(r.first, r.last);
    }
    if (s.rawFrom !== null) {
      // The whole hours before the expiry, from the rollups (the one step from their last position to the first raw one is in neither).
      const from = Math.floor(s.from / 3_600_000) * 3_600_000;
      for (const h of await readRollups(db, {
        owners: s.owners,
        assetId: asset.id,
        from,
        to: s.rawFrom,
        keepDays: s.rollupDays,
        folded: true,
      })) {
        item.records[h.type] += h.count;
        if (h.type === 'location') item.distanceMeters += (h.distance_mm ?? 0) / 1000;
        seen(new Date(h.first_at), new Date(h.last_at));
      }
    }
    item.distanceMeters = Math.round(item.distanceMeters * 1000) / 1000;
    item.firstRecord = first === null ? null : iso(new Date(first));
    item.lastRecord = last === null ? null : iso(new Date(last));
    yield item;
  }
}
