// The zones report: each confirmed visit of each zone in the range, read from the zone visits the
// zone rules keep (alerts/visits.ts: the same computation the Entered/Left events and the dwell
// alert come from; not under retention). A visit is in the range when it was entered before `to`
// and had not left by `from`; one that had not left by `to` is open: `leftAt` null, `open` true,
// its duration counted to `to` (or now).
import type { Queryable } from '../db/db.js';
import { iso } from '../http/schemas.js';
import type { ReportScope } from './scope.js';

export interface VisitItem extends Record<string, unknown> {
  assetId: string;
  zoneId: string;
  zoneName: string | null;
  enteredAt: string;
  leftAt: string | null;
  durationSeconds: number;
  open: boolean;
}

export const VISIT_COLUMNS = ['assetId', 'zoneId', 'zoneName', 'enteredAt', 'leftAt', 'durationSeconds', 'open'];

export async function* zoneVisits(db: Queryable, s: ReportScope): AsyncGenerator<VisitItem> {
  for (const asset of s.assets) {
    const params: unknown[] = [asset.id, new Date(s.from), new Date(s.to)];
    const owners = await s.owners.where('v.owner_id', params);
    const { rows } = await db.query<{ zone_id: string; name: string | null; entered_at: Date; left_at: Date | null }>(
      `SELECT v.zone_id::text, z.name, v.entered_at, v.left_at
         FROM zone_visits v LEFT JOIN zones z ON z.id = v.zone_id
        WHERE v.asset_id = $1 AND ${owners} AND v.confirmed_at IS NOT NULL
          AND v.entered_at < $3 AND (v.left_at IS NULL OR v.left_at > $2)
        ORDER BY v.entered_at, v.zone_id`,
      params,
    );
    for (const r of rows) {
      const left = r.left_at && r.left_at.getTime() <= s.to ? r.left_at.getTime() : null;
      yield {
        assetId: asset.id,
        zoneId: r.zone_id,
        zoneName: r.name,
        enteredAt: iso(r.entered_at)!,
        leftAt: left === null ? null : iso(new Date(left)),
        durationSeconds: Math.round(((left ?? s.end) - r.entered_at.getTime()) / 1000),
        open: left === null,
      };
    }
  }
}
