-- Customers run their own integrations (issue 21): who manages each one, and which credential and
-- owner made it. An operator-made integration is read-only to customers; a customer-made one may be
-- changed by any credential of the owners that see the owner it was made from.
ALTER TABLE integrations
  ADD COLUMN managed_by text NOT NULL DEFAULT 'operator' CHECK (managed_by IN ('operator', 'customer')),
  ADD COLUMN created_by text,
  ADD COLUMN creator_owner_id uuid;
CREATE INDEX integrations_creator_idx ON integrations (creator_owner_id) WHERE deleted_at IS NULL AND managed_by = 'customer';
