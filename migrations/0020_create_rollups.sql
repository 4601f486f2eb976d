-- Hourly rollups (README, "Reports and rollups"): per asset, hour and record type, what the hour's
-- records add up to, kept up to date by the store's own statement (src/rollups/) and kept for
-- ROLLUP_RETENTION_DAYS whatever the raw data's retention. One row per (asset, hour, type, owner):
-- the owner a record was stored for, as the records keep it (a moved asset's history stays its
-- former owner's).
--
-- - every type: `count`, `first_at`, `last_at` (the hour's first and last record time);
-- - locations: the hour's first and last position (time, id, latitude, longitude) and
--   `distance_mm`, the great-circle distance between its consecutive positions in millimetres
--   (each step rounded to the millimetre, so sums in any order are exact). The step from the
--   previous hour's last position into this hour is added when read. A store whose positions
--   fall between the hour's stored ones cannot add its steps: it marks the row `stale`, and the
--   rollups module recomputes its distance from the raw rows right after the commit (or on its
--   sweep after a crash);
-- - sensor, reefer and genset data: `stats`, per key `[count, min, max, sum]` (the sum as an exact
--   decimal, so a mean does not depend on the order records arrived in). Sensor data: each numeric
--   sensor, keyed `<type>/<sensorId>`. Reefer and genset data: each numeric member whose name holds
--   "temperature" (any case) at the top of `data`, or under `data.cargo.sensors` or
--   `data.hardware.sensors` (the first found, in that order).
-- Time-partitioned like the records (by `hour`); partitions are made ahead and on demand by the
-- storage module. The rows that exist when this migration runs are summed by the next one.
CREATE TABLE rollups (
  asset_id     uuid NOT NULL,
  hour         timestamptz NOT NULL,
  type         text NOT NULL,
  owner_id     uuid NOT NULL,
  count        bigint NOT NULL,
  first_at     timestamptz NOT NULL,
  last_at      timestamptz NOT NULL,
  first_id     bigint,
  last_id      bigint,
  first_lat    double precision,
  first_lon    double precision,
  last_lat     double precision,
  last_lon     double precision,
  distance_mm  bigint,
  stale        boolean NOT NULL DEFAULT false,
  stats        jsonb,
  PRIMARY KEY (asset_id, hour, type, owner_id)
) PARTITION BY RANGE (hour);
CREATE INDEX rollups_stale_idx ON rollups (hour) WHERE stale;

-- The hour a time falls in, in UTC whatever the session's time zone.
CREATE FUNCTION rollup_hour(t timestamptz) RETURNS timestamptz
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  RETURN date_bin('1 hour', t, timestamptz '2000-01-01 00:00:00+00');

-- One step between two positions, in whole millimetres (haversine on a sphere of 6,371,008.8 m;
-- safe across the antimeridian). NULL when either end is missing.
CREATE FUNCTION rollup_mm(lat1 double precision, lon1 double precision, lat2 double precision, lon2 double precision)
  RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE
  RETURN round(2 * 6371008.8 * 1000 * asin(sqrt(least(1, greatest(0,
           sin(radians(lat2 - lat1) / 2) ^ 2 + cos(radians(lat1)) * cos(radians(lat2)) * sin(radians(lon2 - lon1) / 2) ^ 2)))))::bigint;

-- The temperature members of a reefer or genset record's data (see above): (key, value).
CREATE FUNCTION rollup_temperatures(data jsonb) RETURNS TABLE (k text, v double precision)
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$
    SELECT DISTINCT ON (e.key) e.key, e.value::numeric::double precision
      FROM (SELECT 1 AS p, key, value FROM jsonb_each(CASE WHEN jsonb_typeof(data) = 'object' THEN data END)
            UNION ALL
            SELECT 2, key, value FROM jsonb_each(CASE WHEN jsonb_typeof(data -> 'cargo' -> 'sensors') = 'object' THEN data -> 'cargo' -> 'sensors' END)
            UNION ALL
            SELECT 3, key, value FROM jsonb_each(CASE WHEN jsonb_typeof(data -> 'hardware' -> 'sensors') = 'object' THEN data -> 'hardware' -> 'sensors' END)) e
     WHERE e.key ILIKE '%temperature%' AND jsonb_typeof(e.value) = 'number' AND abs(e.value::numeric) < 1e300
     ORDER BY e.key, e.p
  $$;

-- Two `stats` objects as one: per key the counts and sums added, the lower min and the higher max.
CREATE FUNCTION rollup_merge(a jsonb, b jsonb) RETURNS jsonb
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$
    SELECT CASE WHEN a IS NULL THEN b WHEN b IS NULL THEN a ELSE (
      SELECT jsonb_object_agg(k, CASE
               WHEN a -> k IS NULL THEN b -> k
               WHEN b -> k IS NULL THEN a -> k
               ELSE jsonb_build_array((a -> k ->> 0)::bigint + (b -> k ->> 0)::bigint,
                                      least((a -> k -> 1)::numeric, (b -> k -> 1)::numeric),
                                      greatest((a -> k -> 2)::numeric, (b -> k -> 2)::numeric),
                                      (a -> k -> 3)::numeric + (b -> k -> 3)::numeric) END)
        FROM (SELECT jsonb_object_keys(a) UNION SELECT jsonb_object_keys(b)) AS keys(k)) END
  $$;
