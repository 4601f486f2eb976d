-- One name for one thing: the table that "outbox", "the log" and "delivery log" all named is the
-- event log, and what points into it is a log id (an event's position, the delivery's API id).
ALTER TABLE outbox RENAME TO event_log;
ALTER INDEX outbox_pkey RENAME TO event_log_pkey;
ALTER INDEX outbox_event_id_key RENAME TO event_log_event_id_key;
ALTER INDEX outbox_position_idx RENAME TO event_log_position_idx;
ALTER INDEX outbox_created_idx RENAME TO event_log_created_idx;
ALTER SEQUENCE outbox_id_seq RENAME TO event_log_id_seq;
ALTER TABLE deliveries RENAME COLUMN outbox_id TO log_id;
ALTER TABLE delivery_claims RENAME COLUMN outbox_ids TO log_ids;
ALTER TABLE delivery_attempts RENAME COLUMN outbox_ids TO log_ids;
