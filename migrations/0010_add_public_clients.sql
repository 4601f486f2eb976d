-- Authorization code with PKCE (API.md 2, 9) for the dashboard: a public client (no secret; it
-- proves itself with the PKCE verifier) and the redirect URIs a client may name, and the codes
-- the authorization endpoint hands out (their digest, single use, short-lived).
ALTER TABLE clients ADD COLUMN public boolean NOT NULL DEFAULT false;
ALTER TABLE clients ADD COLUMN redirect_paths text[] NOT NULL DEFAULT '{}';

CREATE TABLE auth_codes (
  code_digest     text PRIMARY KEY,
  client_id       uuid NOT NULL REFERENCES clients (id) ON DELETE CASCADE,
  user_id         uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  redirect_uri    text NOT NULL,
  code_challenge  text NOT NULL,
  expires_at      timestamptz NOT NULL,
  used_at         timestamptz
);
CREATE INDEX auth_codes_expires_idx ON auth_codes (expires_at);
