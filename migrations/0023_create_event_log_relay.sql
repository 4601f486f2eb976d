-- The event log on Kafka (EVENT_LOG=kafka, issue 24): the relay's position in the event log and its
-- lease. One row per row range; today one range (0) covers the whole log. A relay that holds the
-- lease publishes the committed rows after the position to the topic and moves the position only
-- once the brokers acknowledged them (acks=all). The rows stay: claims, retries and redelivery read
-- their payloads, and they go a partition at a time as in the PostgreSQL mode.
CREATE TABLE event_log_relay (
  range_id     int PRIMARY KEY,
  log_tx       bigint NOT NULL,
  log_id       bigint NOT NULL,
  holder       text,
  lease_until  timestamptz NOT NULL DEFAULT '-infinity',
  published    bigint NOT NULL DEFAULT 0,
  when_updated timestamptz NOT NULL DEFAULT now()
);
