-- Revocation and token endpoint throttling (API.md section 2, issue 7).

-- One row per login (password grant, kept through its refresh tokens) or per client_credentials
-- grant. Every access token carries its row's id (`sid`) and is accepted only while the row exists
-- and is not revoked; deleting the user or the client removes the rows, and so its tokens.
CREATE TABLE auth_sessions (
  id            uuid PRIMARY KEY,
  client_id     uuid NOT NULL REFERENCES clients (id) ON DELETE CASCADE,
  user_id       uuid REFERENCES users (id) ON DELETE CASCADE,
  -- The jti of the one refresh token that may be used next (rotation); a used one revokes the row.
  refresh_jti   uuid,
  revoked_at    timestamptz,
  revoked_why   text,
  when_created  timestamptz NOT NULL DEFAULT now(),
  -- When the last token issued from it expires: swept some time after.
  expires_at    timestamptz NOT NULL
);
CREATE INDEX auth_sessions_user_idx ON auth_sessions (user_id) WHERE user_id IS NOT NULL;
CREATE INDEX auth_sessions_client_idx ON auth_sessions (client_id);
CREATE INDEX auth_sessions_expires_idx ON auth_sessions (expires_at);

-- A client can be disabled (its tokens revoked, its grants refused) without deleting it.
ALTER TABLE clients ADD COLUMN disabled boolean NOT NULL DEFAULT false;

-- Failed token requests per (username, client address) and per (client id, client address):
-- a fixed window opened by the first failure. The key is a digest, so no username is kept.
CREATE TABLE auth_throttle (
  key           text PRIMARY KEY,
  failures      integer NOT NULL,
  window_start  timestamptz NOT NULL
);
CREATE INDEX auth_throttle_window_idx ON auth_throttle (window_start);
