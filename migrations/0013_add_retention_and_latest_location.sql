-- The storage lifecycle (issue 19), the parts plain SQL can do; 0014 partitions the tables.
--
-- Retention per owner: a whole number of days, or NULL to inherit the parent's (RETENTION_DAYS at
-- the top). Only an operator sets it.
ALTER TABLE owners ADD COLUMN retention_days integer CHECK (retention_days BETWEEN 1 AND 36500);

-- A retention that was made shorter still protects the data until `until` (RETENTION_GRACE_SECONDS
-- after the change): the setting it replaced, for one owner (NULL days: it inherited) or, with
-- owner_id NULL, for the whole service (RETENTION_DAYS; NULL days: forever).
CREATE TABLE retention_holds (
  owner_id  uuid,
  days      integer,
  until     timestamptz NOT NULL
);
CREATE INDEX retention_holds_until_idx ON retention_holds (until);

-- The latest location of each asset is kept whole here, so /locations/latest answers after the
-- row behind it expired. owner_id: the owner it was stored for, like the row.
ALTER TABLE asset_positions
  ADD COLUMN owner_id      uuid,
  ADD COLUMN latitude      double precision,
  ADD COLUMN longitude     double precision,
  ADD COLUMN altitude      double precision,
  ADD COLUMN heading       double precision,
  ADD COLUMN speed         double precision,
  ADD COLUMN zone_id       text,
  ADD COLUMN when_received timestamptz;
UPDATE asset_positions p
   SET owner_id = l.owner_id, latitude = l.latitude, longitude = l.longitude, altitude = l.altitude, heading = l.heading,
       speed = l.speed, zone_id = l.zone_id, when_received = l.when_received
  FROM locations l WHERE l.id = p.location_id;
-- A position whose location is gone (never, before retention) cannot be shown.
DELETE FROM asset_positions WHERE owner_id IS NULL;
ALTER TABLE asset_positions ALTER COLUMN owner_id SET NOT NULL, ALTER COLUMN latitude SET NOT NULL,
  ALTER COLUMN longitude SET NOT NULL, ALTER COLUMN when_received SET NOT NULL;
CREATE INDEX asset_positions_owner_time_idx ON asset_positions (owner_id, when_created);

-- Retention asks whether a delivery that may still be sent or redelivered points into a range of
-- the event log (the event log's partitions; queue/pruning.ts before).
CREATE INDEX deliveries_log_idx ON deliveries (log_id) WHERE status <> 'SUCCEEDED';
