-- DCSA Track & Trace 3.0 (src/dcsa/): an asset's equipment identity, a booking's references, and
-- which boxes carry a booking over which time range.
--
-- equipment_reference: an ISO 6346 container number (check digit verified by the API), unique
-- within an owner tree (checked by the API under an advisory lock on the tree's root, since the
-- tree is not a column). iso_equipment_code: the ISO 6346 size-type (e.g. 45R1). An asset yields
-- DCSA events only with both.
ALTER TABLE assets
  ADD COLUMN equipment_reference text,
  ADD COLUMN iso_equipment_code text;
CREATE INDEX assets_equipment_reference_idx ON assets (equipment_reference, owner_id) WHERE equipment_reference IS NOT NULL;

ALTER TABLE booking_data
  ADD COLUMN carrier_booking_reference text,
  ADD COLUMN transport_document_reference text;
CREATE INDEX booking_data_cbr_idx ON booking_data (carrier_booking_reference, owner_id) WHERE carrier_booking_reference IS NOT NULL;
CREATE INDEX booking_data_tdr_idx ON booking_data (transport_document_reference, owner_id) WHERE transport_document_reference IS NOT NULL;

-- A booking carried by an asset from valid_from to valid_to (half-open). One asset carries one
-- booking at a time: the API refuses a range overlapping another of the asset's links (409).
-- owner_id: the booking's owner, for the tenancy filter. Goes with its booking and its asset.
CREATE TABLE booking_assets (
  id            uuid PRIMARY KEY,
  booking_id    uuid NOT NULL REFERENCES booking_data (id) ON DELETE CASCADE,
  asset_id      uuid NOT NULL REFERENCES assets (id) ON DELETE CASCADE,
  owner_id      uuid NOT NULL,
  valid_from    timestamptz NOT NULL,
  valid_to      timestamptz NOT NULL,
  who_created   text NOT NULL,
  when_created  timestamptz NOT NULL DEFAULT now(),
  CHECK (valid_from < valid_to)
);
CREATE INDEX booking_assets_booking_idx ON booking_assets (booking_id, valid_from);
CREATE INDEX booking_assets_asset_idx ON booking_assets (asset_id, valid_from);
