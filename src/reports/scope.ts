// What a report covers (API guide 5, "Reports"): one asset (`assetId`: its records the caller
// sees) or one owner's assets (`ownerId`: the records stored for that owner), over from..to (at
// most REPORT_MAX_DAYS), and where in that range the raw records have expired under the owner's
// retention, so that the reports use the hourly rollups before it and say so.
import { type Static, Type } from '@sinclair/typebox';
import type { Db } from '../db/db.js';
import { ApiError, badRequest } from '../http/errors.js';
import { iso, Uuid } from '../http/schemas.js';
import type { OwnerScope } from '../http/paging.js';
import { ownerDays } from '../storage/retention.js';
import type { Tenancy } from '../tenancy/tenancy.js';
import { FormatParam } from '../exports/formats.js';

const DAY = 86_400_000;
const HOUR = 3_600_000;

export const ReportQuery = Type.Object({
  assetId: Type.Optional(Uuid),
  ownerId: Type.Optional(Uuid),
  from: Type.Optional(Type.String({ format: 'date-time', description: 'Default: 7 days before to' })),
  to: Type.Optional(Type.String({ format: 'date-time', description: 'Default: now' })),
  format: Type.Optional(FormatParam),
  stopRadiusMeters: Type.Optional(Type.Number({ minimum: 1, maximum: 100_000, default: 200, description: 'trips, stops' })),
  stopMinutes: Type.Optional(Type.Number({ minimum: 0.1, maximum: 10_080, default: 10, description: 'trips, stops' })),
  gapMinutes: Type.Optional(Type.Number({ minimum: 0.1, maximum: 10_080, default: 30, description: 'temperature' })),
});
export type ReportQuery = Static<typeof ReportQuery>;

export interface ReportAsset {
  id: string;
  name: string;
}

export interface ReportScope {
  assets: ReportAsset[];
  /** The condition on a record table's owner column: the records this report may read. */
  owners: OwnerScope;
  from: number;
  /** The end of the range. */
  to: number;
  /** What counts as the end of the data: `to`, or now when `to` is later. */
  end: number;
  /**
   * Where the raw records start to be all there (an hour boundary): before it they expired under
   * the owner's retention and only the rollups remain. Null: none in the range expired.
   */
  rawFrom: number | null;
  /** ROLLUP_RETENTION_DAYS. */
  rollupDays: number;
}

/** The range, the assets and the owners a report request covers; 400 or 404 as the lists answer. */
export async function reportScope(
  db: Db,
  tenancy: Tenancy,
  q: ReportQuery,
  { maxDays, systemDays, rollupDays }: { maxDays: number; systemDays: number | null; rollupDays: number },
): Promise<ReportScope> {
  if (!q.assetId === !q.ownerId) throw badRequest('Give assetId (one asset) or ownerId (its assets), not both.', '/assetId');
  const now = Date.now();
  const to = q.to ? Date.parse(q.to) : now;
  const from = q.from ? Date.parse(q.from) : to - 7 * DAY;
  if (from >= to) throw badRequest('from must be before to.', '/from');
  if (to - from > maxDays * DAY) throw badRequest(`A report covers at most ${maxDays} days (REPORT_MAX_DAYS); narrow from..to.`, '/from');

  let assets: ReportAsset[];
  let owner: string;
  let owners: OwnerScope;
  if (q.assetId) {
    const asset = await tenancy
      .one<{ id: string; name: string; owner_id: string }>(
        db,
        { select: 'id, name, owner_id', from: 'assets', ownerColumn: 'owner_id' },
        q.assetId,
        'asset',
      )
      .catch((e: unknown) => {
        throw e instanceof ApiError ? new ApiError('NOT_FOUND', `asset ${q.assetId} not found`, { field: '/assetId' }) : e;
      });
    assets = [{ id: asset.id, name: asset.name }];
    owner = asset.owner_id;
    owners = tenancy;
  } else {
    owner = q.ownerId!;
    await tenancy.assertOwner(owner);
    const { rows } = await db.query<ReportAsset>('SELECT id, name FROM assets WHERE owner_id = $1 ORDER BY name, id', [owner]);
    assets = rows;
    owners = {
      where: async (column, params) => `${column} = $${params.push(owner)}::uuid`,
    };
  }
  const days = (await ownerDays(db, systemDays)).of(owner);
  // Rows older than the retention may be gone; the hour after the cutoff is whole in the raw rows.
  const cutoff = days === null ? null : Math.ceil((now - days * DAY) / HOUR) * HOUR;
  return {
    assets,
    owners,
    from,
    to,
    end: Math.min(to, now),
    rawFrom: cutoff !== null && cutoff > from ? Math.min(cutoff, to) : null,
    rollupDays,
  };
}

/** What a report says of its sources (JSON members; CSV and GeoJSON answer them as headers). */
export interface ReportHead {
  kind: string;
  from: string;
  to: string;
  /** Before this, the raw records have expired (null: the whole range is raw). */
  rawDataFrom: string | null;
  sources: ('raw' | 'rollups')[];
  notes: string[];
}

export function reportHead(kind: string, s: ReportScope, rollups: string | null): ReportHead {
  const notes: string[] = [];
  if (s.rawFrom !== null) {
    notes.push(
      `Records before ${iso(new Date(s.rawFrom))} have expired under the owner's retention. ${rollups ?? 'This report covers the raw records after that time only.'}`,
    );
  }
  return {
    kind,
    from: iso(new Date(s.from))!,
    to: iso(new Date(s.to))!,
    rawDataFrom: s.rawFrom === null ? null : iso(new Date(s.rawFrom)),
    sources: s.rawFrom !== null && rollups ? ['rollups', 'raw'] : ['raw'],
    notes,
  };
}
