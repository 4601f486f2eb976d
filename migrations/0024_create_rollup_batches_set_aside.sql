-- Poison in the rollups (README, "Reports and rollups"; API guide 4): a rollup_batches row the fold
-- cannot take (its parts do not decode, or hold a value no rollup row can have) is moved here with
-- its reason, in the fold's own transaction, so the fold goes on with every other batch instead of
-- failing on that one forever. Kept for an operator to look at (and delete): nothing reads it.
CREATE TABLE rollup_batches_set_aside (
  id            bigint PRIMARY KEY,
  min_hour      timestamptz NOT NULL,
  max_hour      timestamptz NOT NULL,
  parts         text NOT NULL,
  compacted     boolean NOT NULL,
  reason        text NOT NULL,
  set_aside_at  timestamptz NOT NULL DEFAULT now()
);
