-- Hourly rollups (README, "Reports and rollups"): per asset, hour and record type, what the hour's
-- records add up to, kept for ROLLUP_RETENTION_DAYS whatever the raw data's retention. One row
-- per (asset, hour, type, owner): the owner a record was stored for, as the records keep it (a
-- moved asset's history stays its former owner's).
--
-- - every type: `count`, `first_at`, `last_at` (the hour's first and last record time);
-- - locations: the hour's first and last position (time, id, latitude, longitude) and
--   `distance_mm`, the great-circle distance between its consecutive positions in millimetres
--   (each step rounded to the millimetre, so sums in any order are exact). The step from the
--   previous hour's last position into this hour is added when read;
-- - reefer and genset data: `max_step_us`, the longest time between consecutive records of the
--   hour (with which a report knows an hour whose every reading was in range needs no raw read);
-- - sensor, reefer and genset data: `stats`, per key `[count, min, max, sum]` (the sum as an exact
--   decimal, so a mean does not depend on the order records arrived in). Sensor data: each numeric
--   sensor, keyed `<type>/<sensorId>`. Reefer and genset data: each numeric member whose name holds
--   "temperature" (any case), read where the alert engine reads it (rollup_temperatures).
--
-- How they are kept (src/rollups/): a store adds what its records add up to (computed from the
-- records in hand) to `rollup_batches`, one row per store in the store's own statement. An hour
-- is written once, after it has closed (`rollup_state.materialized`: the hours before it are
-- summed in `rollups`); a read sums the hours after that from the raw rows as it reads. A fold
-- every second combines the parts of open hours per asset and hour, and those of hours summed
-- already (late records) into their rows.
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
  -- Reefer and genset data: the longest time between two consecutive records of the hour, in
  -- microseconds (the step from the previous hour's last record is read with it).
  max_step_us  bigint,
  stats        jsonb,
  PRIMARY KEY (asset_id, hour, type, owner_id)
) PARTITION BY RANGE (hour);

-- Where the summing stands (one row): the hours before `materialized` are summed in `rollups`.
CREATE TABLE rollup_state (
  one           boolean PRIMARY KEY DEFAULT true CHECK (one),
  materialized  timestamptz NOT NULL
);
INSERT INTO rollup_state (materialized)
  VALUES ((date_trunc('hour', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC') + interval '1 hour');

-- What stores added, not folded yet: per store, its parts (JSON: per asset, owner, hour and type,
-- what its records add up to), with the range of hours they cover. `compacted`: the fold's own
-- row of the open hours' parts, combined.
CREATE TABLE rollup_batches (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  min_hour   timestamptz NOT NULL,
  max_hour   timestamptz NOT NULL,
  parts      text NOT NULL,
  compacted  boolean NOT NULL DEFAULT false
);
-- LZ4 where the server has it (a store's parts compress 3.7 times either way; pglz took 5.5 ms
-- for the parts of 1000 reefers, LZ4 under 1 ms).
DO $$ BEGIN
  ALTER TABLE rollup_batches ALTER COLUMN parts SET COMPRESSION lz4;
EXCEPTION WHEN OTHERS THEN NULL;
END $$;

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

-- The temperature members of a reefer or genset record's data (see above): (key, value). A key is
-- read where the alert engine reads it: `data.<key>` when present, else under the sensors of its
-- group (the specification's cargo and hardware sensors), else, for a key of neither, under cargo's
-- then hardware's sensors. Numbers only. The store computes the same in JavaScript (src/rollups/values.ts).
CREATE FUNCTION rollup_temperatures(data jsonb) RETURNS TABLE (k text, v double precision)
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$
    SELECT x.k, x.j::numeric::double precision
      FROM (SELECT keys.k,
                   CASE WHEN data ? keys.k THEN data -> keys.k
                        WHEN keys.k = ANY (ARRAY['compressorTemperature', 'condenserTemperature', 'evaporatorTemperature', 'defrostTemperature', 'dischargeTemperature', 'engineCoolantTemperature', 'suctionTemperature']) THEN data -> 'hardware' -> 'sensors' -> keys.k
                        WHEN keys.k = ANY (ARRAY['ambientTemperature', 'returnAirTemperature', 'returnAir2Temperature', 'supplyAirTemperature', 'supplyAir2Temperature', 'usda1Temperature', 'usda2Temperature', 'usda3Temperature', 'usda4Temperature']) THEN data -> 'cargo' -> 'sensors' -> keys.k
                        ELSE COALESCE(data -> 'cargo' -> 'sensors' -> keys.k, data -> 'hardware' -> 'sensors' -> keys.k) END AS j
              FROM (SELECT jsonb_object_keys(data)
                    UNION SELECT jsonb_object_keys(CASE WHEN jsonb_typeof(data -> 'cargo' -> 'sensors') = 'object' THEN data -> 'cargo' -> 'sensors' ELSE '{}' END)
                    UNION SELECT jsonb_object_keys(CASE WHEN jsonb_typeof(data -> 'hardware' -> 'sensors') = 'object' THEN data -> 'hardware' -> 'sensors' ELSE '{}' END)) AS keys(k)
             WHERE jsonb_typeof(data) = 'object' AND keys.k ~* 'temperature') x
     WHERE jsonb_typeof(x.j) = 'number' AND abs(x.j::numeric) < 1e300
  $$;
