// The rollups' SQL (migration 0020 holds the tables and their functions: rollup_hour, rollup_mm,
// rollup_temperatures). One definition of what an hour adds up to, used by the
// store's statement (over the records it inserts, into rollup_deltas), by the fill of an upgraded
// database (over the whole tables), by the fold of the deltas into the rollups, and by the repair
// of a stale row (over one hour's raw records).
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
  'asset_id, hour, type, owner_id, count, first_at, last_at, first_id, last_id, first_lat, first_lon, last_lat, last_lon, distance_mm, max_step_us, stats, stale';

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
                   COALESCE(sum(rollup_mm(plat, plon, latitude, longitude)), 0)::int8, NULL::int8, NULL::jsonb, false
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
                 NULL::int8, NULL::int8, NULL::float8, NULL::float8, NULL::float8, NULL::float8, NULL::int8, g.max_step_us, s.stats, false
            FROM (SELECT asset_id, owner_id, hour, count(*)::int8 AS count, min(when_created) AS first_at, max(when_created) AS last_at,
                         ${stepped ? 'COALESCE((extract(epoch FROM max(step)) * 1000000)::int8, 0)' : 'NULL::int8'} AS max_step_us
                    FROM ${records} r GROUP BY 1, 2, 3) g
            LEFT JOIN ${stats} s USING (asset_id, owner_id, hour)
           ORDER BY g.asset_id, g.hour, g.owner_id`;
}

/**
 * One fold of up to `batch` deltas into the rollups, as one statement (its result: `n` deltas
 * folded, `stale` rows that came out stale). Each hour's stored row is just one more span to
 * combine with its deltas: taken in time order, counts add, minima and maxima meet, and a
 * location row's distance (a reefer or genset row's longest step) is the spans' own plus the
 * steps from each span's last record to the next one's first. Spans that overlap in time (a late
 * record inside another's span) make the row stale: the steps between interleaved records are not
 * known here, and the repair recomputes them from the raw rows. The stats are merged set-based
 * (each span's members unnested and aggregated per key), with no function call per row. Deltas of
 * hours past `keepDays` are dropped: retention let those hours go. The caller holds the fold's
 * lock, so no other fold writes these rows meanwhile; the stored rows are locked for the repair.
 */
export function foldStatement(batch: number, keepDays: number): string {
  const key = 'asset_id, hour, type, owner_id';
  const cols =
    'asset_id, hour, type, owner_id, count, first_at, last_at, first_id, last_id, first_lat, first_lon, last_lat, last_lon, distance_mm, max_step_us, stats, stale';
  const first = (col: string) => `(array_agg(${col} ORDER BY first_at, first_id))[1]`;
  const last = (col: string) => `(array_agg(${col} ORDER BY last_at DESC, last_id DESC))[1]`;
  const us = (interval: string) => `(extract(epoch FROM ${interval}) * 1000000)::int8`;
  return `WITH d AS (
      DELETE FROM rollup_deltas WHERE id IN (SELECT id FROM rollup_deltas ORDER BY id LIMIT ${batch} FOR UPDATE SKIP LOCKED)
      RETURNING ${cols}
    ), kept AS (
      SELECT * FROM d WHERE hour >= now() - ${Math.trunc(keepDays)} * interval '1 day'
    ), cur AS (
      SELECT ${cols
        .split(', ')
        .map((c) => `r.${c}`)
        .join(', ')}
        FROM rollups r JOIN (SELECT DISTINCT ${key} FROM kept) k USING (${key})
       FOR UPDATE OF r
    ), spans AS (
      SELECT *, false AS stored FROM kept UNION ALL SELECT *, true FROM cur
    ), ordered AS (
      SELECT *, lag(last_at) OVER w AS p_at, lag(last_id) OVER w AS p_id, lag(last_lat) OVER w AS p_lat, lag(last_lon) OVER w AS p_lon
        FROM spans WINDOW w AS (PARTITION BY ${key} ORDER BY first_at, first_id, last_at)
    ), merged AS (
      SELECT ${key}, sum(count)::int8 AS count, min(first_at) AS first_at, max(last_at) AS last_at,
             ${first('first_id')} AS first_id, ${last('last_id')} AS last_id, ${first('first_lat')} AS first_lat,
             ${first('first_lon')} AS first_lon, ${last('last_lat')} AS last_lat, ${last('last_lon')} AS last_lon,
             CASE WHEN type = 'location' THEN (sum(distance_mm) + COALESCE(sum(rollup_mm(p_lat, p_lon, first_lat, first_lon)), 0))::int8 END AS distance_mm,
             CASE WHEN type IN (${STEPPED.map((t) => `'${t}'`).join(', ')})
                  THEN greatest(max(max_step_us), COALESCE(${us('max(first_at - p_at)')}, 0)) END AS max_step_us,
             bool_or(stale OR CASE type
                               WHEN 'location' THEN COALESCE((first_at, first_id) <= (p_at, p_id), false)
                               WHEN 'reeferdata' THEN COALESCE(first_at < p_at, false)
                               WHEN 'gensetdata' THEN COALESCE(first_at < p_at, false)
                               ELSE false END) AS stale,
             bool_or(stored) AS stored
        FROM ordered GROUP BY ${key}
    ), stats AS (
      SELECT ${key}, jsonb_object_agg(k, jsonb_build_array(n, mn, mx, sm)) AS stats
        FROM (SELECT ${key}, e.key AS k, sum((e.value ->> 0)::int8) AS n, min((e.value -> 1)::numeric) AS mn,
                     max((e.value -> 2)::numeric) AS mx, sum((e.value -> 3)::numeric) AS sm
                FROM spans CROSS JOIN LATERAL jsonb_each(spans.stats) e GROUP BY ${key}, e.key) x
       GROUP BY ${key}
    ), rows AS (
      SELECT m.*, s.stats FROM merged m LEFT JOIN stats s USING (${key})
    ), upd AS (
      UPDATE rollups r SET count = x.count, first_at = x.first_at, last_at = x.last_at, first_id = x.first_id, last_id = x.last_id,
             first_lat = x.first_lat, first_lon = x.first_lon, last_lat = x.last_lat, last_lon = x.last_lon,
             distance_mm = x.distance_mm, max_step_us = x.max_step_us, stats = x.stats, stale = x.stale
        FROM rows x
       WHERE x.stored AND r.asset_id = x.asset_id AND r.hour = x.hour AND r.type = x.type AND r.owner_id = x.owner_id
      RETURNING r.stale
    ), ins AS (
      INSERT INTO rollups (${cols}) SELECT ${cols} FROM rows WHERE NOT stored ORDER BY ${key}
      RETURNING stale
    )
    SELECT (SELECT count(*) FROM d)::int AS n,
           ((SELECT count(*) FROM upd WHERE stale) + (SELECT count(*) FROM ins WHERE stale))::int AS stale`;
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
