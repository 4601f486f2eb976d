-- The e-mail channel's own state (src/email): recipients and their confirmation, every SMTP
-- transaction with each recipient's reply, the alerts held for a digest, escalations waiting for
-- their time, and the single-use acknowledgement links mailed with alerts.

ALTER TABLE integrations DROP CONSTRAINT integrations_channel_check,
  ADD CONSTRAINT integrations_channel_check CHECK (channel IN ('webhook', 'mqtt', 'kafka', 'email'));

-- A customer-made integration's recipients confirm once before they receive alerts; an
-- operator-made integration's are confirmed when saved. token_hash: the confirmation link's token
-- (SHA-256), cleared once used; mailed_at: when the confirmation request was mailed (its link
-- expires EMAIL_LINK_HOURS later). An address taken out of the settings stays, inactive, so
-- putting it back does not mail it another request (a customer cannot spam a stranger by saving).
CREATE TABLE email_recipients (
  integration_id uuid NOT NULL REFERENCES integrations (id),
  address        text NOT NULL,
  confirmed_at   timestamptz,
  token_hash     bytea UNIQUE,
  mailed_at      timestamptz,
  active         boolean NOT NULL DEFAULT true,
  requested_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (integration_id, address)
);

-- One row per message sent (an alert, a digest, an escalation, a confirmation): its request (an
-- alert's event id; a digest's or escalation's own), and per recipient the server's reply
-- ({"ops@example.com": {"code": 250, "reply": "250 OK"}}). A retry sends only to recipients whose
-- last reply was 4xx (or who got none); the hour's count caps messages per integration.
CREATE TABLE email_messages (
  id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  integration_id uuid NOT NULL,
  kind           text NOT NULL CHECK (kind IN ('alert', 'digest', 'escalation', 'confirmation')),
  request_id     text NOT NULL,
  replies        jsonb NOT NULL DEFAULT '{}',
  at             timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX email_messages_request ON email_messages (integration_id, request_id);
CREATE INDEX email_messages_at ON email_messages (integration_id, at);
CREATE INDEX email_messages_confirmations ON email_messages (request_id, at) WHERE kind = 'confirmation';

-- The last message about an asset per integration: at most one per minIntervalMinutes.
CREATE TABLE email_asset_sent (
  integration_id uuid NOT NULL,
  asset_id       uuid NOT NULL,
  sent_at        timestamptz NOT NULL,
  PRIMARY KEY (integration_id, asset_id)
);

-- Alerts that arrived inside an asset's interval: told in its next message, or in a digest when
-- the interval ends with none. Deleted only in the transaction that records the message sent.
CREATE TABLE email_held (
  id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  integration_id uuid NOT NULL,
  asset_id       uuid NOT NULL,
  request_id     text NOT NULL,
  alert          jsonb NOT NULL,
  held_at        timestamptz NOT NULL DEFAULT now(),
  UNIQUE (integration_id, request_id)
);
CREATE INDEX email_held_integration ON email_held (integration_id, asset_id);

-- An alert mailed to an integration with escalateTo: sent there once at due_at unless it was
-- acknowledged or cleared by then. done_at: escalated or found settled.
CREATE TABLE email_escalations (
  integration_id  uuid NOT NULL,
  notification_id bigint NOT NULL,
  due_at          timestamptz NOT NULL,
  done_at         timestamptz,
  outcome         text,
  PRIMARY KEY (integration_id, notification_id)
);
CREATE INDEX email_escalations_due ON email_escalations (due_at) WHERE done_at IS NULL;

-- The acknowledgement link of one alert mailed to one recipient: signed, single use, expiring.
CREATE TABLE email_ack_links (
  id              uuid PRIMARY KEY,
  notification_id bigint NOT NULL,
  recipient       text NOT NULL,
  expires_at      timestamptz NOT NULL,
  used_at         timestamptz
);
