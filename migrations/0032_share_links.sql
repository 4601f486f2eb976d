-- Share links (src/share, API guide 8 "Share links"): a read-only page with no sign-in that shows
-- some assets' position, track or temperature until it expires or is revoked. The token in the
-- link's URL is shown once, at creation; only its SHA-256 (hex, as API keys) is kept here.
--
-- owner_id: the lowest owner whose tree holds every asset of the link (its tenancy, and the tree
-- whose links SHARE_MAX_LINKS_PER_OWNER counts). asset_ids: in the order given, which is the page's
-- order. revoked_at: set by DELETE; the row stays, so the page says the link was revoked (410).
-- uses, last_used_at: every answered use of the page or its data. minute_start, minute_uses: the
-- current minute of SHARE_MAX_USES_PER_MINUTE, counted here so that every process and instance
-- counts one link's uses together.
CREATE TABLE share_links (
  id            uuid PRIMARY KEY,
  owner_id      uuid NOT NULL REFERENCES owners (id) ON DELETE CASCADE,
  digest        text NOT NULL UNIQUE,
  asset_ids     uuid[] NOT NULL,
  show          text[] NOT NULL,
  window_hours  integer NOT NULL CHECK (window_hours BETWEEN 1 AND 168),
  note          text,
  expires_at    timestamptz NOT NULL,
  revoked_at    timestamptz,
  uses          bigint NOT NULL DEFAULT 0,
  last_used_at  timestamptz,
  minute_start  timestamptz,
  minute_uses   integer NOT NULL DEFAULT 0,
  created_by    text NOT NULL,
  when_created  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX share_links_owner_created_idx ON share_links (owner_id, when_created, id);
