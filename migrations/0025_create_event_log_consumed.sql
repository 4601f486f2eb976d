-- The event log on Kafka (EVENT_LOG=kafka, API guide 17): what the delivery processes' consumer
-- group handed over, per partition of the topic. A row holds the log position of the last event of
-- its partition that the group handed over with every event before it (recorded with the offsets
-- the group commits): the events of that partition not yet handed over come after it in the log's
-- order. Retention keeps every event-log row above the lowest of them, for each partition the group
-- has not read to its end (storage/retention.ts, eventlog/floor.ts).
CREATE TABLE event_log_consumed (
  partition    int PRIMARY KEY,
  log_tx       bigint NOT NULL,
  log_id       bigint NOT NULL,
  when_updated timestamptz NOT NULL DEFAULT now()
);
