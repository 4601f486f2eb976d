-- MQTT and Kafka (API.md 9): a Kafka request carries many messages, each to the partition its key
-- (or the round robin) chose; the attempt keeps one partition per event, aligned with outbox_ids.
-- `partition` stays for a request that went to one partition (and for what was written before).
ALTER TABLE delivery_attempts ADD COLUMN partitions int[];
ALTER TABLE integrations ADD CONSTRAINT integrations_channel_check CHECK (channel IN ('webhook', 'mqtt', 'kafka'));
