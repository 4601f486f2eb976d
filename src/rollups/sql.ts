// The rollups' SQL (migration 0020 holds the tables and their functions: rollup_hour, rollup_mm,
// rollup_temperatures). One definition of what an hour adds up to, used by the fill of an
// upgraded database (over the whole tables) and by a read of the hours not summed yet (over the
// raw rows); parts.ts computes the same from the records a store has in hand.
import type { ObjectType } from '../eventlog/objects.js';

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
                       sum(v::text::numeric) AS sm
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
 * What depends on the order of an hour's records, summed from its raw rows: the distance of a
 * location row, the longest step of a reefer or genset row. `keys` is a relation of three columns
 * (asset id, hour, owner id) of rows of `type`; the answer: (asset_id, hour, owner_id, count,
 * distance_mm, max_step_us).
 */
export function orderMembers(type: RollupType, keys: string): string {
  const loc = type === 'location';
  return `SELECT k.asset_id, k.hour, k.owner_id, count(l.when_created)::int8 AS count,
                 ${loc ? 'COALESCE(sum(rollup_mm(l.plat, l.plon, l.latitude, l.longitude)), 0)::int8' : 'NULL::int8'} AS distance_mm,
                 ${loc ? 'NULL::int8' : 'COALESCE((extract(epoch FROM max(l.step)) * 1000000)::int8, 0)'} AS max_step_us
            FROM ${keys} AS k(asset_id, hour, owner_id)
            LEFT JOIN LATERAL (
              SELECT when_created, ${loc ? 'latitude, longitude, lag(latitude) OVER w AS plat, lag(longitude) OVER w AS plon' : 'when_created - lag(when_created) OVER w AS step'}
                FROM ${ROLLUP_TABLES[type]}
               -- The (asset, time) index, in the window's order: owner_id compared as text so the planner
               -- cannot pick the (owner, time) index and filter out every other asset of the owner
               -- (11 ms a key for 1000 assets of one owner, 30 s for a fold of loose hours).
               WHERE asset_id = k.asset_id AND owner_id::text = k.owner_id::text
                 AND when_created >= k.hour AND when_created < k.hour + interval '1 hour'
              WINDOW w AS (ORDER BY when_created, id)) l ON true
           GROUP BY 1, 2, 3`;
}

/** Stores rows (ROLLUP_COLUMNS, from `rows`) in the rollups, replacing those of the same key. */
export function upsert(rows: string): string {
  const set = ROLLUP_COLUMNS.split(', ')
    .filter((c) => !['asset_id', 'hour', 'type', 'owner_id'].includes(c))
    .map((c) => `${c} = EXCLUDED.${c}`)
    .join(', ');
  return `INSERT INTO rollups (${ROLLUP_COLUMNS}) SELECT * FROM (${rows}) AS x ORDER BY 1, 2, 3, 4
          ON CONFLICT (asset_id, hour, type, owner_id) DO UPDATE SET ${set}`;
}
