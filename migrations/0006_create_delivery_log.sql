-- Delivery engine v2 (issue 8): the outbox becomes a log that each integration reads from its own
-- position, as a Kafka consumer group reads a topic. Only events that need a state of their own
-- (waiting for a retry, failed, cancelled, redelivered) get a `deliveries` row; a first attempt
-- that succeeds costs one insert-only attempt row per request and nothing per event.
--
-- Positions are (tx_id, id): the id of the transaction that stored the event, then the event id.
-- A reader only reads events whose transaction is older than the oldest one still running
-- (pg_snapshot_xmin), so an event committed late behind a newer one is never passed over: its
-- transaction held the horizon back until it committed, and everything after the position is read.

ALTER TABLE outbox ADD COLUMN tx_id bigint NOT NULL DEFAULT (pg_current_xact_id()::text::bigint);
-- The owner and its ancestors when the event was stored: which integrations cover the event.
ALTER TABLE outbox ADD COLUMN owner_path uuid[];
WITH RECURSIVE anc(owner_id, ancestor) AS (
  SELECT id, id FROM owners
  UNION
  SELECT anc.owner_id, o.parent_id FROM anc JOIN owners o ON o.id = anc.ancestor WHERE o.parent_id IS NOT NULL
), paths AS (SELECT owner_id, array_agg(ancestor) AS path FROM anc GROUP BY owner_id)
UPDATE outbox SET owner_path = COALESCE(paths.path, ARRAY[outbox.owner_id]) FROM paths WHERE paths.owner_id = outbox.owner_id;
UPDATE outbox SET owner_path = ARRAY[owner_id] WHERE owner_path IS NULL;
ALTER TABLE outbox ALTER COLUMN owner_path SET NOT NULL;
CREATE INDEX outbox_position_idx ON outbox (tx_id, id);
-- Pruning by age: BRIN, nearly free to keep up on the ingest path (the log is appended in time order).
CREATE INDEX outbox_created_idx ON outbox USING brin (when_created);

-- Each integration's position in the log, and what it must not read at its start: events of
-- transactions that had committed when it was created (those below start_xmax and not in start_xip).
ALTER TABLE integration_state ADD COLUMN log_tx bigint NOT NULL DEFAULT 0;
ALTER TABLE integration_state ADD COLUMN log_id bigint NOT NULL DEFAULT 0;
ALTER TABLE integration_state ADD COLUMN start_xmax bigint NOT NULL DEFAULT 0;
ALTER TABLE integration_state ADD COLUMN start_xip bigint[] NOT NULL DEFAULT '{}';
INSERT INTO integration_state (integration_id) SELECT id FROM integrations ON CONFLICT DO NOTHING;
-- Every event stored so far already has its deliveries (below): integrations start after them.
UPDATE integration_state SET log_tx = pg_current_xact_id()::text::bigint, log_id = COALESCE((SELECT max(id) FROM outbox), 0),
       start_xmax = pg_current_xact_id()::text::bigint;

-- A backlog event older than this becomes FAILED ("backlog expired") instead of being sent.
ALTER TABLE integrations ADD COLUMN max_backlog_hours double precision NOT NULL DEFAULT 72;

-- Claims of the log: the events a worker took from an integration's position, under a lease that
-- the worker renews while it sends. When the lease runs out (the worker died) another worker takes
-- the claim over and sends what has no attempt yet. `requests` counts the claim's requests not yet
-- finished; the worker sends at most `slots` of them at a time, so the requests in flight of an
-- integration are sum(least(requests, slots)) over its live claims (maxConcurrentRequests).
CREATE TABLE delivery_claims (
  id              uuid PRIMARY KEY,
  integration_id  uuid NOT NULL REFERENCES integrations (id) ON DELETE CASCADE,
  outbox_ids      bigint[] NOT NULL,
  requests        integer NOT NULL,
  slots           integer NOT NULL,
  generation      integer NOT NULL DEFAULT 0,   -- +1 at each takeover: a late worker's results don't count
  lease_until     timestamptz NOT NULL,
  when_created    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX delivery_claims_integration_idx ON delivery_claims (integration_id, lease_until);

-- The first engine's tables make way; their rows are carried over below.
ALTER TABLE deliveries RENAME TO deliveries_v1;
ALTER TABLE delivery_attempts RENAME TO delivery_attempts_v1;
ALTER TABLE deliveries_v1 RENAME CONSTRAINT deliveries_pkey TO deliveries_v1_pkey;
ALTER TABLE delivery_attempts_v1 RENAME CONSTRAINT delivery_attempts_pkey TO delivery_attempts_v1_pkey;
DROP INDEX deliveries_due_idx, deliveries_leased_idx, deliveries_batched_idx, deliveries_integration_created_idx,
  deliveries_event_idx, deliveries_completed_idx, delivery_attempts_delivery_idx, delivery_attempts_time_idx;

-- Events of an integration with a state of their own. The delivery's API id is the outbox id.
CREATE TABLE deliveries (
  integration_id   uuid NOT NULL REFERENCES integrations (id) ON DELETE CASCADE,
  outbox_id        bigint NOT NULL,
  event_id         uuid NOT NULL,
  object_type      text NOT NULL,
  object_id        text NOT NULL,
  status           text NOT NULL,
  attempts         integer NOT NULL DEFAULT 0,
  next_attempt_at  timestamptz NOT NULL DEFAULT now(),
  lease_until      timestamptz,
  batch_id         uuid,            -- batch mode: the request it went out in, retried as it was
  first_attempt_at timestamptz,
  last_attempt_at  timestamptz,
  receipt_id       text,
  last_error       text,
  when_created     timestamptz NOT NULL,   -- when the event was stored
  completed_at     timestamptz,
  PRIMARY KEY (integration_id, outbox_id)
);
CREATE INDEX deliveries_due_idx ON deliveries (integration_id, next_attempt_at) WHERE status = 'PENDING';
CREATE INDEX deliveries_leased_idx ON deliveries (integration_id) INCLUDE (lease_until, batch_id)
  WHERE status = 'PENDING' AND lease_until IS NOT NULL;
CREATE INDEX deliveries_batched_idx ON deliveries (integration_id, batch_id) WHERE status = 'PENDING' AND batch_id IS NOT NULL;
CREATE INDEX deliveries_created_idx ON deliveries (integration_id, when_created);
CREATE INDEX deliveries_event_idx ON deliveries (event_id);
CREATE INDEX deliveries_completed_idx ON deliveries (completed_at) WHERE completed_at IS NOT NULL;

-- One row per request (a batch request carries many events), insert-only. tx_id orders the result
-- stream the way the log is ordered, so a follower never misses an attempt committed late.
CREATE TABLE delivery_attempts (
  id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  tx_id               bigint NOT NULL DEFAULT (pg_current_xact_id()::text::bigint),
  integration_id      uuid NOT NULL,
  request_id          uuid NOT NULL,
  claim_id            uuid,
  outbox_ids          bigint[] NOT NULL,
  attempt             integer NOT NULL,
  when_attempted      timestamptz NOT NULL,
  success             boolean NOT NULL,
  http_status         integer,
  response_time_ms    integer,
  receipt_id          text,
  topic               text,
  partition           integer,
  qos                 integer,
  error               text,
  response_headers    jsonb,
  response_body       text,
  response_body_bytes integer,
  truncated           boolean NOT NULL DEFAULT false,
  latency_ms          integer          -- store -> this attempt's end, for the request's oldest event
);
CREATE INDEX delivery_attempts_position_idx ON delivery_attempts (tx_id, id);
CREATE INDEX delivery_attempts_integration_idx ON delivery_attempts (integration_id, id);
CREATE INDEX delivery_attempts_events_idx ON delivery_attempts USING gin (outbox_ids);
-- Retention by age: BRIN (appended in time order). A claim's attempts are found through the GIN index.
CREATE INDEX delivery_attempts_time_idx ON delivery_attempts USING brin (when_attempted);

INSERT INTO deliveries (integration_id, outbox_id, event_id, object_type, object_id, status, attempts, next_attempt_at,
                        batch_id, first_attempt_at, last_attempt_at, receipt_id, when_created, completed_at)
SELECT d.integration_id, d.outbox_id, d.event_id, d.object_type, o.object_id, d.status, d.attempts, d.next_attempt_at,
       d.batch_id, d.first_attempt_at, d.last_attempt_at, d.receipt_id, o.when_created, d.completed_at
  FROM deliveries_v1 d JOIN outbox o ON o.id = d.outbox_id
ON CONFLICT DO NOTHING;
INSERT INTO delivery_attempts (tx_id, integration_id, request_id, outbox_ids, attempt, when_attempted, success, http_status,
                               response_time_ms, receipt_id, error, response_headers, response_body, response_body_bytes, truncated)
SELECT 0, a.integration_id, COALESCE(a.batch_id, gen_random_uuid()), ARRAY[d.outbox_id], a.attempt, a.when_attempted, a.success,
       a.http_status, a.response_time_ms, a.receipt_id, a.error, a.response_headers, a.response_body, a.response_body_bytes, a.truncated
  FROM delivery_attempts_v1 a JOIN deliveries_v1 d ON d.id = a.delivery_id
 ORDER BY a.id;
DROP TABLE delivery_attempts_v1;
DROP TABLE deliveries_v1;
