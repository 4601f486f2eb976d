// The rollups' SQL (migration 0020 holds the table and its functions: rollup_hour, rollup_mm,
// rollup_temperatures, rollup_merge). One definition of what an hour adds up to, used by the
// store's statement (over the records it inserts), by the fill of an upgraded database (over the
// whole tables) and by the repair of a stale distance (over one hour's raw locations).
import type { ObjectType } from '../delivery/objects.js';

export type RollupType = Extract<ObjectType, 'location' | 'sensordata' | 'reeferdata' | 'gensetdata' | 'oemdata'>;

export const ROLLUP_TABLES: Record<RollupType, string> = {
  location: 'locations',
  sensordata: 'sensor_data',
  reeferdata: 'reefer_data',
  gensetdata: 'genset_data',
  oemdata: 'oem_data',
};

export const ROLLUP_COLUMNS =
  'asset_id, hour, type, owner_id, count, first_at, last_at, first_id, last_id, first_lat, first_lon, last_lat, last_lon, distance_mm, max_step_us, stats';

/** The record types whose rows keep their hour's longest step between records. */
const STEPPED: readonly RollupType[] = ['reeferdata', 'gensetdata'];

/** The numeric series of a record type's rows in `source`: (asset_id, owner_id, when_created, k, v). */
function values(type: RollupType, source: string): string | null {
  switch (type) {
    case 'sensordata':
      return `SELECT asset_id, owner_id, when_created, type || '/' || sensor_id AS k, value_number AS v FROM ${source}
               WHERE value_number IS NOT NULL AND value_number NOT IN ('NaN', 'Infinity', '-Infinity')`;
    case 'reeferdata':
    case 'gensetdata':
      return `SELECT asset_id, owner_id, when_created, t.k, t.v FROM ${source} CROSS JOIN LATERAL rollup_temperatures(data) AS t`;
    default:
      return null;
  }
}

/**
 * The rollup rows (ROLLUP_COLUMNS, in key order) of the `type` records in `source`, a relation
 * with the records table's columns: the table itself, or the store statement's inserted rows.
 * `series` may give the numeric series already taken from the records (asset_id, owner_id,
 * when_created, k, v) instead of reading them out of `source`.
 */
export function aggregate(type: RollupType, source: string, series: string | null = values(type, source)): string {
  if (type === 'location') {
    return `SELECT asset_id, hour, 'location', owner_id, count(*)::int8, min(when_created), max(when_created),
                   max(id) FILTER (WHERE n = 1), max(id) FILTER (WHERE n = total),
                   max(latitude) FILTER (WHERE n = 1), max(longitude) FILTER (WHERE n = 1),
                   max(latitude) FILTER (WHERE n = total), max(longitude) FILTER (WHERE n = total),
                   COALESCE(sum(rollup_mm(plat, plon, latitude, longitude)), 0)::int8, NULL::int8, NULL::jsonb
              FROM (SELECT asset_id, owner_id, rollup_hour(when_created) AS hour, when_created, id, latitude, longitude,
                           lag(latitude) OVER w AS plat, lag(longitude) OVER w AS plon, row_number() OVER w AS n,
                           count(*) OVER (PARTITION BY asset_id, owner_id, rollup_hour(when_created)) AS total
                      FROM ${source}
                    WINDOW w AS (PARTITION BY asset_id, owner_id, rollup_hour(when_created) ORDER BY when_created, id)) p
             GROUP BY asset_id, hour, owner_id
             ORDER BY asset_id, hour, owner_id`;
  }
  const stats = series
    ? `(SELECT asset_id, owner_id, hour, jsonb_object_agg(k, jsonb_build_array(c, mn, mx, sm)) AS stats
          FROM (SELECT asset_id, owner_id, rollup_hour(when_created) AS hour, k, count(*) AS c, min(v) AS mn, max(v) AS mx,
                       sum(v::numeric) AS sm
                  FROM (${series}) v GROUP BY 1, 2, 3, 4) x
         GROUP BY 1, 2, 3)`
    : '(SELECT NULL::uuid AS asset_id, NULL::uuid AS owner_id, NULL::timestamptz AS hour, NULL::jsonb AS stats WHERE false)';
  const stepped = STEPPED.includes(type);
  // The hour's records (with the step from the one before in the hour, where steps are kept).
  const records = stepped
    ? `(SELECT asset_id, owner_id, rollup_hour(when_created) AS hour, when_created,
               when_created - lag(when_created) OVER (PARTITION BY asset_id, owner_id, rollup_hour(when_created) ORDER BY when_created) AS step
          FROM ${source})`
    : `(SELECT asset_id, owner_id, rollup_hour(when_created) AS hour, when_created, NULL::interval AS step FROM ${source})`;
  return `SELECT g.asset_id, g.hour, '${type}', g.owner_id, g.count, g.first_at, g.last_at,
                 NULL::int8, NULL::int8, NULL::float8, NULL::float8, NULL::float8, NULL::float8, NULL::int8, g.max_step_us, s.stats
            FROM (SELECT asset_id, owner_id, hour, count(*)::int8 AS count, min(when_created) AS first_at, max(when_created) AS last_at,
                         ${stepped ? 'COALESCE((extract(epoch FROM max(step)) * 1000000)::int8, 0)' : 'NULL::int8'} AS max_step_us
                    FROM ${records} r GROUP BY 1, 2, 3) g
            LEFT JOIN ${stats} s USING (asset_id, owner_id, hour)
           ORDER BY g.asset_id, g.hour, g.owner_id`;
}

/**
 * Adding a store's rollup rows to the stored ones. Counts and sums add, minima and maxima meet; a
 * location row's distance grows by the store's steps and the step that joins them to the stored
 * ones when they all come after (or all before) the stored positions of that hour; otherwise the
 * row is marked stale for the repair (the steps between interleaved positions are not known here).
 * Rows are upserted in key order, so two stores never wait on each other crosswise.
 */
export function upsert(type: RollupType): string {
  const common = `count = r.count + EXCLUDED.count, first_at = least(r.first_at, EXCLUDED.first_at), last_at = greatest(r.last_at, EXCLUDED.last_at)`;
  if (STEPPED.includes(type)) {
    // The longest step grows by the store's own and the one that joins them to the stored records.
    const us = (a: string, b: string) => `(extract(epoch FROM ${b} - ${a}) * 1000000)::int8`;
    const after = 'EXCLUDED.first_at >= r.last_at';
    const before = 'EXCLUDED.last_at <= r.first_at';
    return `ON CONFLICT (asset_id, hour, type, owner_id) DO UPDATE SET ${common}, stats = rollup_merge(r.stats, EXCLUDED.stats),
              max_step_us = CASE
                WHEN ${after} THEN greatest(r.max_step_us, EXCLUDED.max_step_us, ${us('r.last_at', 'EXCLUDED.first_at')})
                WHEN ${before} THEN greatest(r.max_step_us, EXCLUDED.max_step_us, ${us('EXCLUDED.last_at', 'r.first_at')})
                ELSE r.max_step_us END,
              stale = r.stale OR NOT (${after} OR ${before})`;
  }
  if (type !== 'location')
    return `ON CONFLICT (asset_id, hour, type, owner_id) DO UPDATE SET ${common}, stats = rollup_merge(r.stats, EXCLUDED.stats)`;
  const after = '(EXCLUDED.first_at, EXCLUDED.first_id) > (r.last_at, r.last_id)';
  const before = '(EXCLUDED.last_at, EXCLUDED.last_id) < (r.first_at, r.first_id)';
  const earlier = '(EXCLUDED.first_at, EXCLUDED.first_id) < (r.first_at, r.first_id)';
  const later = '(EXCLUDED.last_at, EXCLUDED.last_id) > (r.last_at, r.last_id)';
  const pick = (cond: string, col: string) => `${col} = CASE WHEN ${cond} THEN EXCLUDED.${col} ELSE r.${col} END`;
  return `ON CONFLICT (asset_id, hour, type, owner_id) DO UPDATE SET ${common},
            distance_mm = CASE
              WHEN ${after} THEN r.distance_mm + rollup_mm(r.last_lat, r.last_lon, EXCLUDED.first_lat, EXCLUDED.first_lon) + EXCLUDED.distance_mm
              WHEN ${before} THEN EXCLUDED.distance_mm + rollup_mm(EXCLUDED.last_lat, EXCLUDED.last_lon, r.first_lat, r.first_lon) + r.distance_mm
              ELSE r.distance_mm END,
            stale = r.stale OR NOT (${after} OR ${before}),
            ${['first_id', 'first_lat', 'first_lon'].map((c) => pick(earlier, c)).join(', ')},
            ${['last_id', 'last_lat', 'last_lon'].map((c) => pick(later, c)).join(', ')}`;
}

/**
 * What a stale row's store could not extend, recomputed from the raw rows of its hour: the
 * distance of a location row, the longest step of a reefer or genset row. `keys` is a relation of
 * three columns (asset id, hour, owner id) of rows of `type`; the answer: (asset_id, hour,
 * owner_id, count, distance_mm, max_step_us).
 */
export function recompute(type: RollupType, keys: string): string {
  const loc = type === 'location';
  return `SELECT k.asset_id, k.hour, k.owner_id, count(l.when_created)::int8 AS count,
                 ${loc ? 'COALESCE(sum(rollup_mm(l.plat, l.plon, l.latitude, l.longitude)), 0)::int8' : 'NULL::int8'} AS distance_mm,
                 ${loc ? 'NULL::int8' : 'COALESCE((extract(epoch FROM max(l.step)) * 1000000)::int8, 0)'} AS max_step_us
            FROM ${keys} AS k(asset_id, hour, owner_id)
            LEFT JOIN LATERAL (
              SELECT when_created, ${loc ? 'latitude, longitude, lag(latitude) OVER w AS plat, lag(longitude) OVER w AS plon' : 'when_created - lag(when_created) OVER w AS step'}
                FROM ${ROLLUP_TABLES[type]}
               WHERE asset_id = k.asset_id AND owner_id = k.owner_id AND when_created >= k.hour AND when_created < k.hour + interval '1 hour'
              WINDOW w AS (ORDER BY when_created, id)) l ON true
           GROUP BY 1, 2, 3`;
}
