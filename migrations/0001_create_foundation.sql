-- Owners, assets, credentials, token signing keys, idempotency records (issue 2).

CREATE TABLE owners (
  id            uuid PRIMARY KEY,
  name          text NOT NULL,
  note          text,
  disabled      boolean NOT NULL DEFAULT false,
  parent_id     uuid REFERENCES owners (id),
  when_created  timestamptz NOT NULL DEFAULT now(),
  when_updated  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX owners_name_key ON owners (name);
CREATE INDEX owners_parent_idx ON owners (parent_id);
CREATE INDEX owners_created_idx ON owners (when_created, id);

CREATE TABLE assets (
  id            uuid PRIMARY KEY,
  owner_id      uuid NOT NULL REFERENCES owners (id),
  name          text NOT NULL,
  disabled      boolean NOT NULL DEFAULT false,
  note          text,
  tags          text,
  box_id        text,
  when_created  timestamptz NOT NULL DEFAULT now(),
  when_updated  timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT assets_owner_name_key UNIQUE (owner_id, name)
);
CREATE INDEX assets_owner_created_idx ON assets (owner_id, when_created, id);

CREATE TABLE users (
  id             uuid PRIMARY KEY,
  username       text NOT NULL,
  password_hash  text NOT NULL,
  owner_id       uuid NOT NULL REFERENCES owners (id) ON DELETE CASCADE,
  scopes         text[] NOT NULL,
  disabled       boolean NOT NULL DEFAULT false,
  when_created   timestamptz NOT NULL DEFAULT now(),
  when_updated   timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_username_key ON users (username);
CREATE INDEX users_owner_idx ON users (owner_id, when_created, id);

CREATE TABLE clients (
  id             uuid PRIMARY KEY,
  client_id      text NOT NULL,
  name           text,
  secret_digest  text NOT NULL,
  grants         text[] NOT NULL,
  owner_id       uuid NOT NULL REFERENCES owners (id) ON DELETE CASCADE,
  scopes         text[] NOT NULL,
  when_created   timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX clients_client_id_key ON clients (client_id);

CREATE TABLE api_keys (
  id            uuid PRIMARY KEY,
  name          text NOT NULL,
  owner_id      uuid NOT NULL REFERENCES owners (id) ON DELETE CASCADE,
  scopes        text[] NOT NULL,
  digest        text NOT NULL,
  prefix        text NOT NULL,
  created_by    text NOT NULL,
  when_created  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX api_keys_digest_key ON api_keys (digest);
CREATE INDEX api_keys_owner_idx ON api_keys (owner_id, when_created, id);

-- JWT signing keys: private half encrypted with SECRETS_KEY; every instance signs with the newest.
CREATE TABLE signing_keys (
  kid           text PRIMARY KEY,
  alg           text NOT NULL,
  private_key   text NOT NULL,
  public_jwk    jsonb NOT NULL,
  when_created  timestamptz NOT NULL DEFAULT now(),
  retired_at    timestamptz
);

-- API.md section 4: a create with Idempotency-Key is remembered per (credential, method, path, key).
CREATE TABLE idempotency_keys (
  credential        text NOT NULL,
  method            text NOT NULL,
  path              text NOT NULL,
  key               text NOT NULL,
  body_hash         text NOT NULL,
  response_status   integer,
  response_headers  jsonb,
  response_body     text,
  when_created      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (credential, method, path, key)
);
CREATE INDEX idempotency_keys_created_idx ON idempotency_keys (when_created);

-- Small facts of the service itself (first-start bootstrap done, ...).
CREATE TABLE service_state (
  name   text PRIMARY KEY,
  value  jsonb NOT NULL
);
