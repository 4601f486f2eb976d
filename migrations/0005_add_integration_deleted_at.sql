-- Deleting an integration (API.md 9) stops delivery at once and marks what was pending CANCELLED,
-- while its deliveries and attempts stay in the history and the result stream for the retention
-- period: the row stays, marked deleted, without credentials. Its name is free for a new one.

ALTER TABLE integrations ADD COLUMN deleted_at timestamptz;
DROP INDEX integrations_name_key;
CREATE UNIQUE INDEX integrations_name_key ON integrations (name) WHERE deleted_at IS NULL;
