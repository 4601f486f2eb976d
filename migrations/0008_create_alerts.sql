-- Specifications and the alert engine (spec 2.8, 2.10, 2.11; API.md 8).
--
-- A specification belongs to an asset (its owner is the asset's, read through the join, so a
-- moved asset takes its specifications along). It also holds that asset's alert state: the
-- engine locks the row while it evaluates a batch, and writes the new state in the same
-- transaction as the records that changed it, so a crash can neither forget a violation nor
-- notify twice. One row per asset and type (REEFER evaluates reefer data, GENSET genset data).
CREATE TABLE specifications (
  id             uuid PRIMARY KEY,
  asset_id       uuid NOT NULL REFERENCES assets (id) ON DELETE CASCADE,
  type           text NOT NULL CHECK (type IN ('REEFER', 'GENSET')),
  name           text,
  settings       jsonb,
  ranges         jsonb,
  notification   jsonb,
  who_created    text NOT NULL,
  when_created   timestamptz NOT NULL DEFAULT now(),
  when_updated   timestamptz NOT NULL DEFAULT now(),
  -- Alert state: per condition its last reading, the violation's start and its next due time.
  alert_state    jsonb NOT NULL DEFAULT '{}',
  -- The newest evaluated record (record time, id): older records are stored, not evaluated.
  evaluated_at   timestamptz,
  evaluated_id   bigint,
  -- When the newest evaluated record was received (server time): the sweep waits for silence.
  received_at    timestamptz,
  -- The earliest time a violation falls due (duration passed or repeat due); null when none.
  next_due       timestamptz,
  CONSTRAINT specifications_asset_type_key UNIQUE (asset_id, type)
);
CREATE INDEX specifications_created_idx ON specifications (when_created, id);
CREATE INDEX specifications_due_idx ON specifications (next_due) WHERE next_due IS NOT NULL;

CREATE TABLE notifications (
  id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  owner_id            uuid NOT NULL,
  asset_id            uuid NOT NULL REFERENCES assets (id),
  asset_name          text NOT NULL,
  type                text NOT NULL,
  subject             text NOT NULL,
  event_id            bigint,
  -- Kept as text: a notification outlives the specification that raised it.
  specification_id    uuid NOT NULL,
  specification_name  text,
  location            jsonb,
  reefer_data         jsonb,
  asset_state         jsonb,
  cm_data             jsonb,
  when_created        timestamptz NOT NULL,
  when_received       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX notifications_owner_time_idx ON notifications (owner_id, when_created, id);
CREATE INDEX notifications_asset_time_idx ON notifications (asset_id, when_created, id);
