-- The audit log (issue 21): who changed what, written in the transaction of the change. Kept for
-- AUDIT_RETENTION_DAYS (deleted in batches by the oldest first). owner_id is the owner of the
-- changed resource (NULL: only the operator sees the entry, e.g. a failed sign-in of an unknown user).
CREATE TABLE audit_log (
  id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at             timestamptz NOT NULL DEFAULT clock_timestamp(),
  actor_type     text NOT NULL CHECK (actor_type IN ('user', 'apiKey', 'client', 'system')),
  actor_id       text,
  owner_id       uuid,
  address        text,
  action         text NOT NULL,
  resource_type  text NOT NULL,
  resource_id    text,
  changes        jsonb
);
CREATE INDEX audit_log_at_idx ON audit_log (at, id);
CREATE INDEX audit_log_owner_idx ON audit_log (owner_id, at, id);
