-- Telemetry and domain records (issue 3): append-only data records, zones, events, commands,
-- booking data, and the outbox every stored record is handed to for push delivery.
--
-- Data records carry the owner of their asset (denormalised: the tenancy filter and the owner-wide
-- lists need no join) and are read by (asset_id, when_created, id) ranges: the composite B-tree
-- makes "one asset, last day" an index range scan whatever the table's size. No time
-- partitioning: nothing deletes data records by age, so partitions would only add planning cost
-- (see README, "Storage").

CREATE TABLE locations (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  asset_id      uuid NOT NULL REFERENCES assets (id),
  owner_id      uuid NOT NULL,
  latitude      double precision NOT NULL,
  longitude     double precision NOT NULL,
  altitude      double precision,
  heading       double precision,
  speed         double precision,
  zone_id       text,
  when_created  timestamptz NOT NULL,
  when_received timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX locations_asset_time_idx ON locations (asset_id, when_created, id);
CREATE INDEX locations_owner_time_idx ON locations (owner_id, when_created, id);

CREATE TABLE sensor_data (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  asset_id      uuid NOT NULL REFERENCES assets (id),
  owner_id      uuid NOT NULL,
  sensor_id     text NOT NULL,
  type          text NOT NULL,
  value_number  double precision,
  value_text    text,
  sensor_type   text,
  when_created  timestamptz NOT NULL,
  when_received timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sensor_data_asset_time_idx ON sensor_data (asset_id, when_created, id);
CREATE INDEX sensor_data_owner_time_idx ON sensor_data (owner_id, when_created, id);

CREATE TABLE reefer_data (
  id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  asset_id            uuid NOT NULL REFERENCES assets (id),
  owner_id            uuid NOT NULL,
  reefer_class        text,
  genset_manufacturer text,
  data                jsonb NOT NULL,
  when_created        timestamptz NOT NULL,
  when_received       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX reefer_data_asset_time_idx ON reefer_data (asset_id, when_created, id);
CREATE INDEX reefer_data_owner_time_idx ON reefer_data (owner_id, when_created, id);

CREATE TABLE genset_data (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  asset_id      uuid NOT NULL REFERENCES assets (id),
  owner_id      uuid NOT NULL,
  genset_type   text NOT NULL,
  box_id        text,
  data          jsonb NOT NULL,
  when_created  timestamptz NOT NULL,
  when_received timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX genset_data_asset_time_idx ON genset_data (asset_id, when_created, id);
CREATE INDEX genset_data_owner_time_idx ON genset_data (owner_id, when_created, id);

CREATE TABLE oem_data (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  asset_id      uuid NOT NULL REFERENCES assets (id),
  owner_id      uuid NOT NULL,
  payload_type  integer NOT NULL,
  box_id        text,
  data          jsonb NOT NULL,
  when_created  timestamptz NOT NULL,
  when_received timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX oem_data_asset_time_idx ON oem_data (asset_id, when_created, id);
CREATE INDEX oem_data_owner_time_idx ON oem_data (owner_id, when_created, id);

-- The newest location of each asset and the zones it is in: the latest-location list, and the
-- state zone enter/leave events are computed from. Locked per asset while locations are stored.
CREATE TABLE asset_positions (
  asset_id          uuid PRIMARY KEY REFERENCES assets (id) ON DELETE CASCADE,
  location_id       bigint NOT NULL,
  when_created      timestamptz NOT NULL,
  zone_ids          bigint[] NOT NULL DEFAULT '{}'
);

CREATE TABLE zones (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  owner_id      uuid NOT NULL REFERENCES owners (id),
  name          text NOT NULL,
  type          text,
  note          text,
  geometry      jsonb,
  circle        jsonb,
  min_lat       double precision,
  max_lat       double precision,
  min_lon       double precision,
  max_lon       double precision,
  when_created  timestamptz NOT NULL DEFAULT now(),
  when_updated  timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT zones_owner_name_key UNIQUE (owner_id, name)
);
CREATE INDEX zones_owner_created_idx ON zones (owner_id, when_created, id);

CREATE TABLE events (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  owner_id      uuid NOT NULL,
  asset_id      uuid NOT NULL REFERENCES assets (id),
  subject       text NOT NULL,
  severity      text NOT NULL,
  current_data  jsonb NOT NULL,
  prev_data     jsonb,
  when_created  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_owner_time_idx ON events (owner_id, when_created, id);
CREATE INDEX events_asset_time_idx ON events (asset_id, when_created, id);

CREATE TABLE commands (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  asset_id      uuid NOT NULL REFERENCES assets (id),
  owner_id      uuid NOT NULL,
  type          text NOT NULL,
  parameters    jsonb,
  status        text NOT NULL,
  unique_id     text NOT NULL,
  ttl_seconds   integer NOT NULL,
  expires_at    timestamptz NOT NULL,
  who_created   text NOT NULL,
  when_created  timestamptz NOT NULL DEFAULT now(),
  when_updated  timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT commands_asset_unique_id_key UNIQUE (asset_id, unique_id)
);
CREATE INDEX commands_owner_time_idx ON commands (owner_id, when_created, id);
CREATE INDEX commands_asset_status_idx ON commands (asset_id, status, when_created);

CREATE TABLE booking_data (
  id            uuid PRIMARY KEY,
  owner_id      uuid NOT NULL REFERENCES owners (id),
  name          text,
  type          text NOT NULL,
  json_data     jsonb,
  who_created   text NOT NULL,
  when_created  timestamptz NOT NULL DEFAULT now(),
  when_updated  timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT booking_data_owner_name_key UNIQUE (owner_id, name)
);
CREATE INDEX booking_data_owner_created_idx ON booking_data (owner_id, when_created, id);

-- The seam to push delivery: every stored asset change and data record, in its push shape
-- (spec 2.12), with its event id, written in the same transaction as the record itself.
CREATE TABLE outbox (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  event_id      uuid NOT NULL DEFAULT gen_random_uuid(),
  object_type   text NOT NULL,
  object_id     text NOT NULL,
  owner_id      uuid NOT NULL,
  payload       jsonb NOT NULL,
  when_created  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX outbox_event_id_key ON outbox (event_id);
