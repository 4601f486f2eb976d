-- Alerts pushed, and the silent-asset and zone rules (issue 20).
--
-- An integration's filter: as given ({field: [allowed values]}), and compiled per object type
-- ({type: {field: [values]}}, only the types that have the field) for the event log's readers.
ALTER TABLE integrations ADD COLUMN filter jsonb, ADD COLUMN type_filters jsonb;

-- Silence: minutes without a record of any type before an asset raises an alert. On owners
-- (inherited by descendants) and assets (overriding); NULL inherits, 0 turns it off.
ALTER TABLE owners ADD COLUMN silent_alert_minutes integer CHECK (silent_alert_minutes BETWEEN 0 AND 525600);
ALTER TABLE assets ADD COLUMN silent_alert_minutes integer CHECK (silent_alert_minutes BETWEEN 0 AND 525600);
-- The sweep asks first whether any is set at all.
CREATE INDEX owners_silent_idx ON owners (id) WHERE silent_alert_minutes > 0;
CREATE INDEX assets_silent_idx ON assets (id) WHERE silent_alert_minutes > 0;

-- Zone rules: how long an asset must stay inside / outside before the enter / leave event fires,
-- and how long it may stay inside before a dwell alert (NULL: never).
ALTER TABLE zones
  ADD COLUMN enter_after_seconds integer NOT NULL DEFAULT 0 CHECK (enter_after_seconds BETWEEN 0 AND 604800),
  ADD COLUMN leave_after_seconds integer NOT NULL DEFAULT 0 CHECK (leave_after_seconds BETWEEN 0 AND 604800),
  ADD COLUMN dwell_alert_minutes integer CHECK (dwell_alert_minutes BETWEEN 1 AND 525600);

-- A notification raised by a rule has no specification; a dwell alert names its zone.
ALTER TABLE notifications ALTER COLUMN specification_id DROP NOT NULL;
ALTER TABLE notifications ADD COLUMN zone_id bigint;

-- The newest record time of each asset (any type), written by every store in its own statement;
-- silent_since: the last_at a silence alert was raised for (NULL: none open); resumed_from: set by
-- the store that ended an alerted silence, to the last_at before it (that store's INFO event reads it).
CREATE TABLE asset_activity (
  asset_id      uuid PRIMARY KEY REFERENCES assets (id) ON DELETE CASCADE,
  last_at       timestamptz NOT NULL,
  silent_since  timestamptz,
  resumed_from  timestamptz
);
-- Seeded from the latest locations: an asset silent since before the upgrade is noticed too.
INSERT INTO asset_activity (asset_id, last_at) SELECT asset_id, when_created FROM asset_positions;

-- Zone visits: one row per stay of an asset in a zone, from its first location inside to its
-- first location outside, both confirmed by the zone's enterAfterSeconds / leaveAfterSeconds (a
-- stay shorter than enterAfterSeconds is dropped: a pass-by). The rules and the zone report read them.
CREATE TABLE zone_visits (
  id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  asset_id          uuid NOT NULL REFERENCES assets (id) ON DELETE CASCADE,
  zone_id           bigint NOT NULL,
  owner_id          uuid NOT NULL,
  entered_at        timestamptz NOT NULL,
  -- When the Entered event fired (NULL: not yet confirmed).
  confirmed_at      timestamptz,
  -- The first location outside while the visit is open (NULL: inside).
  leaving_at        timestamptz,
  -- The end of a confirmed leave: leaving_at (NULL: the visit is open).
  left_at           timestamptz,
  last_inside_at    timestamptz NOT NULL,
  dwell_alerted_at  timestamptz,
  -- The earliest time the alert sweep has something to do for it (NULL: nothing).
  next_due          timestamptz,
  when_updated      timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX zone_visits_open_idx ON zone_visits (asset_id, zone_id) WHERE left_at IS NULL;
CREATE INDEX zone_visits_due_idx ON zone_visits (next_due) WHERE next_due IS NOT NULL;
CREATE INDEX zone_visits_zone_time_idx ON zone_visits (zone_id, entered_at);
CREATE INDEX zone_visits_asset_time_idx ON zone_visits (asset_id, entered_at);
-- The zones each asset's latest location is in are open, confirmed visits (entered, as far as
-- anyone knows, at that location's time): the next location inside fires no second Entered event.
INSERT INTO zone_visits (asset_id, zone_id, owner_id, entered_at, confirmed_at, last_inside_at)
SELECT p.asset_id, z.id, p.owner_id, p.when_created, p.when_created, p.when_created
  FROM asset_positions p CROSS JOIN LATERAL unnest(p.zone_ids) AS u(zone_id)
  JOIN zones z ON z.id = u.zone_id AND z.owner_id = p.owner_id;

-- Open commands past their time-to-live, for the sweep that turns them EXPIRED (and pushes that).
CREATE INDEX commands_open_expiry_idx ON commands (expires_at) WHERE status IN ('PENDING', 'SENT');
