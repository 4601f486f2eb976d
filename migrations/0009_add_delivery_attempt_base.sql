-- Redelivery continues an event's attempt numbering (attempt 4 follows attempt 3) while giving it
-- a fresh budget: `attempts` keeps counting, and the retry policy counts from `attempt_base`, the
-- attempts made before the last redelivery.
ALTER TABLE deliveries ADD COLUMN attempt_base integer NOT NULL DEFAULT 0;
