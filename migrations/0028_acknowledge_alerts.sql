-- An alert is acknowledged once, by someone: who and when, on its ALERT event and on the
-- notification raised with it (acknowledging either acknowledges both; src/alerts/acknowledge.ts).
-- Nullable, no default: adding them rewrites no partition.
ALTER TABLE events ADD COLUMN acknowledged_at timestamptz, ADD COLUMN acknowledged_by text;
ALTER TABLE notifications ADD COLUMN acknowledged_at timestamptz, ADD COLUMN acknowledged_by text;
