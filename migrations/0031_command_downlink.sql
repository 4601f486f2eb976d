-- Commands reach MQTT devices (src/commands/downlink.ts). A command made while its asset has an
-- enabled MQTT device is due for publishing at once (publish_after = now()); the instance that
-- claims it leases it (leased_by, publish_after moved to the lease's end) and, once the broker's
-- PUBACK comes, stores SENT and clears the lease. A SENT command still unanswered is due again
-- when its device shows itself after COMMAND_REPUBLISH_SECONDS. publish_after NULL: nothing to
-- publish (no MQTT device, answered, ended). message: what the device said with its answer.
ALTER TABLE commands
  ADD COLUMN publish_after timestamptz,
  ADD COLUMN leased_by text,
  ADD COLUMN published_at timestamptz,
  ADD COLUMN publishes integer NOT NULL DEFAULT 0,
  ADD COLUMN message text;
CREATE INDEX commands_publish_idx ON commands (publish_after) WHERE publish_after IS NOT NULL;

-- A command's history (GET /commands/{id}): each publish (the broker's answer to it) and each
-- answer of the device, at most COMMAND_MAX_ATTEMPTS per command. Goes with its command.
CREATE TABLE command_attempts (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  command_id  bigint NOT NULL REFERENCES commands (id) ON DELETE CASCADE,
  at          timestamptz NOT NULL DEFAULT clock_timestamp(),
  kind        text NOT NULL CHECK (kind IN ('publish', 'answer')),
  device      text NOT NULL,
  status      text NOT NULL,
  message     text
);
CREATE INDEX command_attempts_command_idx ON command_attempts (command_id, id);
