-- Devices (issue 23, src/ingest/): trackers that send their data straight to the service, each
-- feeding one asset. `unique_id` is what the device sends to name itself (an IMEI, or a random
-- string that is then its only credential: the OsmAnd protocol carries no other), unique across
-- the service. Tenancy is the asset's: a device is its asset owner's.
CREATE TABLE devices (
  id             uuid PRIMARY KEY,
  unique_id      text NOT NULL UNIQUE,
  asset_id       uuid NOT NULL REFERENCES assets (id) ON DELETE CASCADE,
  protocol       text NOT NULL CHECK (protocol IN ('osmand', 'mqtt', 'traccar')),
  disabled       boolean NOT NULL DEFAULT false,
  last_seen_at   timestamptz,
  last_error     text,
  last_error_at  timestamptz,
  when_created   timestamptz NOT NULL DEFAULT now(),
  when_updated   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX devices_asset_idx ON devices (asset_id);

-- What the adapters could not store (an unknown or disabled device, a bad value, a message that is
-- not JSON), for the operator: kept 7 days. `sample`: the first 1 KiB of what was received.
CREATE TABLE ingest_errors (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at         timestamptz NOT NULL DEFAULT now(),
  protocol   text NOT NULL,
  unique_id  text,
  device_id  uuid,
  reason     text NOT NULL,
  sample     text
);
CREATE INDEX ingest_errors_at_idx ON ingest_errors (at);
