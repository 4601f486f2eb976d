-- GIN indexes take each insert into their tree (`fastupdate = off`). With PostgreSQL's default, an
-- insert goes to the index's pending list, and the insert that finds the list full (4 MB) merges
-- all of it into the tree first: at 2,000 deliveries a second, one delivery-result write in about
-- 80 seconds took 450-600 ms doing that (211,000 WAL records for 37 attempt rows), and everything
-- that write's transaction held waited with it. The one GIN index is delivery_attempts' event
-- index (log_ids), one per partition: partitions made from now on get the same setting where the
-- storage module attaches them (src/storage/partitions.ts); the pending lists are merged here.
DO $$
DECLARE
  r record;
BEGIN
  FOR r IN
    SELECT c.oid::regclass AS idx
      FROM pg_class c JOIN pg_am a ON a.oid = c.relam
     WHERE c.relkind = 'i' AND a.amname = 'gin' AND c.relnamespace = current_schema()::regnamespace
  LOOP
    EXECUTE format('ALTER INDEX %s SET (fastupdate = off)', r.idx);
    PERFORM gin_clean_pending_list(r.idx);
  END LOOP;
END
$$;
