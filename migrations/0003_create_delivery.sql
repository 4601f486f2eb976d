-- Push delivery (issue 4): integrations, one delivery per (event, matching integration), the
-- attempt log, and per-integration shared state (pause, token bucket) for every instance.

CREATE TABLE integrations (
  id            uuid PRIMARY KEY,
  name          text NOT NULL,
  channel       text NOT NULL,
  enabled       boolean NOT NULL DEFAULT true,
  owner_ids     uuid[] NOT NULL,
  object_types  text[] NOT NULL,
  destination   text NOT NULL,
  destinations  jsonb NOT NULL DEFAULT '{}',
  retry         jsonb NOT NULL,
  settings      jsonb NOT NULL,
  secrets       text,            -- AES-256-GCM (SECRETS_KEY) of a JSON object; never returned
  when_created  timestamptz NOT NULL DEFAULT now(),
  when_updated  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX integrations_name_key ON integrations (name);

-- Shared across instances: a 429 pause, and the maxItemsPerMinute token bucket.
CREATE TABLE integration_state (
  integration_id  uuid PRIMARY KEY REFERENCES integrations (id) ON DELETE CASCADE,
  paused_until    timestamptz,
  tokens          double precision NOT NULL DEFAULT 0,
  refilled_at     timestamptz NOT NULL DEFAULT now()
);

-- Batch mode: a request body made once and retried byte for byte with the same webhook-id.
CREATE TABLE delivery_batches (
  id              uuid PRIMARY KEY,
  integration_id  uuid NOT NULL REFERENCES integrations (id) ON DELETE CASCADE,
  object_type     text NOT NULL,
  body            text NOT NULL,
  when_created    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE deliveries (
  id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  integration_id   uuid NOT NULL REFERENCES integrations (id) ON DELETE CASCADE,
  outbox_id        bigint NOT NULL REFERENCES outbox (id),   -- the event: payload, event id
  event_id         uuid NOT NULL,
  object_type      text NOT NULL,
  status           text NOT NULL DEFAULT 'PENDING',
  attempts         integer NOT NULL DEFAULT 0,
  next_attempt_at  timestamptz NOT NULL DEFAULT now(),
  lease_until      timestamptz,
  batch_id         uuid,            -- batch mode: the request it went out in, retried as it was
  first_attempt_at timestamptz,
  last_attempt_at  timestamptz,
  receipt_id       text,
  when_created     timestamptz NOT NULL DEFAULT now(),
  completed_at     timestamptz
);
-- The claim query's path: pending work of an integration in due order.
CREATE INDEX deliveries_due_idx ON deliveries (integration_id, next_attempt_at, id) WHERE status = 'PENDING';
-- Requests in flight (leased), and batches waiting for a retry: both small sets, read on every
-- claim, so each gets a partial index instead of scanning the integration's whole backlog.
CREATE INDEX deliveries_leased_idx ON deliveries (integration_id) INCLUDE (lease_until, batch_id)
  WHERE status = 'PENDING' AND lease_until IS NOT NULL;
CREATE INDEX deliveries_batched_idx ON deliveries (integration_id, batch_id) WHERE status = 'PENDING' AND batch_id IS NOT NULL;
CREATE INDEX deliveries_integration_created_idx ON deliveries (integration_id, when_created, id);
CREATE INDEX deliveries_event_idx ON deliveries (event_id);
CREATE INDEX deliveries_completed_idx ON deliveries (completed_at) WHERE completed_at IS NOT NULL;

CREATE TABLE delivery_attempts (
  id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  delivery_id         bigint NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
  integration_id      uuid NOT NULL,
  attempt             integer NOT NULL,
  when_attempted      timestamptz NOT NULL,
  success             boolean NOT NULL,
  http_status         integer,
  response_time_ms    integer,
  receipt_id          text,
  error               text,
  response_headers    jsonb,
  response_body       text,
  response_body_bytes integer,
  truncated           boolean NOT NULL DEFAULT false,
  batch_id            uuid
);
CREATE INDEX delivery_attempts_delivery_idx ON delivery_attempts (delivery_id, attempt);
CREATE INDEX delivery_attempts_time_idx ON delivery_attempts (when_attempted, id);
