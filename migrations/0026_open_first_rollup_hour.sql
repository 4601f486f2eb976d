-- A new database's current hour is an open hour. Migration 0020 set `rollup_state.materialized` to
-- the start of the next hour, so that the hour the fill (0021) summed from the records already
-- stored counted as summed. On a database that had no records, that made every record of its
-- first hour a late record: folded into its row every 10 seconds, and, where stores committed out
-- of order, the row's distance or longest step summed again from all of the hour's raw rows at
-- each fold (seconds of CPU a minute at a few thousand records a second). Where nothing has been
-- summed or stored yet, the current hour is open instead, as every later hour is: its parts are
-- combined in memory and its row is written once, after it closes.
UPDATE rollup_state
   SET materialized = date_trunc('hour', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
 WHERE materialized > date_trunc('hour', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
   AND NOT EXISTS (SELECT 1 FROM rollups)
   AND NOT EXISTS (SELECT 1 FROM rollup_batches);
