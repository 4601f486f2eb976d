-- The alarm inbox (GET /events?open=true): ALERT events neither acknowledged nor cleared, newest
-- first per owner. A partial index holds only those, so the inbox reads what is open, however many
-- years of events an owner has; an event leaves it when it is acknowledged or cleared.
CREATE INDEX events_open_idx ON events (owner_id, when_created, id)
  WHERE severity = 'ALERT' AND acknowledged_at IS NULL AND cleared_at IS NULL;
