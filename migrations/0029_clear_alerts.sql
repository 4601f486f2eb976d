-- An alert ends: the INFO event that ends an ALERT names it (clears_event_id), and the same
-- statement sets the ALERT's cleared_at to the INFO's time (src/events/events.ts insertEvents).
-- The rules keep the id of the ALERT they raised while it lasts, for its INFO: a specification in
-- its alert_state (JSON), a silence in asset_activity.silent_event_id (also returned by the
-- upsert that ends it), a dwell alert on its visit. Rows from before keep NULL: their INFO names
-- nothing. Nullable, no default: adding them rewrites no partition.
ALTER TABLE events ADD COLUMN cleared_at timestamptz, ADD COLUMN clears_event_id bigint;
ALTER TABLE asset_activity ADD COLUMN silent_event_id bigint;
ALTER TABLE zone_visits ADD COLUMN dwell_event_id bigint;
