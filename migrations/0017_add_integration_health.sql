-- Integration health (issue 21): an integration whose every attempt has failed for
-- auto_disable_after_hours (0: never) is disabled, saying why and when; each change of health is
-- kept in integration_health and pushed (object type integrationStatus).
ALTER TABLE integrations
  ADD COLUMN auto_disable_after_hours double precision NOT NULL DEFAULT 48 CHECK (auto_disable_after_hours >= 0),
  ADD COLUMN health text NOT NULL DEFAULT 'ok' CHECK (health IN ('ok', 'failing', 'disabled')),
  ADD COLUMN disabled_reason text,
  ADD COLUMN disabled_at timestamptz;

-- The first failed attempt since the integration's last success (NULL: its last attempt succeeded),
-- written with the attempts.
ALTER TABLE integration_state ADD COLUMN failing_since timestamptz;

CREATE TABLE integration_health (
  id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  integration_id  uuid NOT NULL REFERENCES integrations (id) ON DELETE CASCADE,
  at              timestamptz NOT NULL DEFAULT now(),
  status          text NOT NULL CHECK (status IN ('failing', 'disabled', 'recovered', 'enabled')),
  detail          text NOT NULL
);
CREATE INDEX integration_health_integration_idx ON integration_health (integration_id, at);
