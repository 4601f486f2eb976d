-- The built-in issuer's sign-in session (issue 21), as Keycloak's SSO session: kept in the
-- browser as an HttpOnly, SameSite=Strict cookie holding a random value whose digest is stored
-- here, so a dashboard reloaded (and holding no token) signs in again without the password. The
-- logins (auth_sessions) made through it end with it: signing out ends them all.
CREATE TABLE sign_in_sessions (
  id          uuid PRIMARY KEY,
  digest      text NOT NULL UNIQUE,
  user_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  created_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL,
  ended_at    timestamptz
);
CREATE INDEX sign_in_sessions_user_idx ON sign_in_sessions (user_id);
CREATE INDEX sign_in_sessions_expires_idx ON sign_in_sessions (expires_at);

ALTER TABLE auth_codes ADD COLUMN sign_in_id uuid REFERENCES sign_in_sessions (id) ON DELETE CASCADE;
ALTER TABLE auth_sessions ADD COLUMN sign_in_id uuid REFERENCES sign_in_sessions (id) ON DELETE CASCADE;
CREATE INDEX auth_sessions_sign_in_idx ON auth_sessions (sign_in_id) WHERE sign_in_id IS NOT NULL;
