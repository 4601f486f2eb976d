// What retention must keep of the event log in the Kafka mode (API guide 17, "Retention"), and
// what the consumer group lost to the topic's own retention.
//
// The integrations' positions follow the relay: they say what was published, not what the
// consumer group handed over. So the consumer records, per partition, the log position of the
// last event it handed over with every earlier one of that partition (recordConsumed, with the
// offsets it commits); the relay publishes in the log's order, so what that partition still holds
// for the group comes after it. Retention keeps every event-log row above the floor: the lowest of
// those positions over the partitions whose committed offset is behind their end (a partition
// never recorded: everything), and never above the relay's position read before the offsets were
// (what the relay published later is above it). Parked events are deliveries waiting: retention
// keeps their rows by the PostgreSQL mode's rule.
import type { Db, Queryable } from '../db/db.js';
import type { Position } from './log.js';
import { type EventLogConfig, groupOffsets, type PartitionOffsets } from './kafka.js';

/** Keeps every row of the event log (a floor below every position). */
export const KEEP_ALL: Position = { tx: '-1', id: '-1' };

/**
 * A partition whose messages Kafka deleted before the group read them: its committed offset (or,
 * never committed, its start) is below the partition's earliest offset. Those events were never
 * handed over by the topic (their rows stay in PostgreSQL, kept by the floor).
 */
export const offsetsLost = (p: PartitionOffsets) => (p.committed ?? 0n) < p.earliest;

/** Records what the group handed over, per partition (the consumer, before it commits the offsets). */
export async function recordConsumed(q: Queryable, handed: { partition: number; pos: Position }[]): Promise<void> {
  if (!handed.length) return;
  await q.query(
    `INSERT INTO event_log_consumed (partition, log_tx, log_id)
     SELECT * FROM unnest($1::int[], $2::int8[], $3::int8[])
     ON CONFLICT (partition) DO UPDATE SET log_tx = excluded.log_tx, log_id = excluded.log_id, when_updated = now()`,
    [handed.map((h) => h.partition), handed.map((h) => h.pos.tx), handed.map((h) => h.pos.id)],
    'eventlog_consumed',
  );
}

const below = (a: Position, b: Position) => BigInt(a.tx) < BigInt(b.tx) || (a.tx === b.tx && BigInt(a.id) < BigInt(b.id));

/**
 * The position retention keeps every event-log row above (null: the PostgreSQL mode's rule alone,
 * nothing was ever published), and the partitions whose offsets were lost. Throws when the cluster
 * cannot be asked (the caller keeps everything).
 */
export async function consumerFloor(db: Db, cfg: EventLogConfig): Promise<{ floor: Position | null; lost: number[] }> {
  // The relay's position first: whatever it publishes after this read is above it.
  const relay = (await db.query<{ log_tx: string; log_id: string }>('SELECT log_tx, log_id FROM event_log_relay WHERE range_id = 0'))
    .rows[0];
  if (!relay) return { floor: null, lost: [] };
  const parts = await groupOffsets(cfg);
  const consumed = new Map(
    (
      await db.query<{ partition: number; log_tx: string; log_id: string }>('SELECT partition, log_tx, log_id FROM event_log_consumed')
    ).rows.map((r) => [r.partition, { tx: r.log_tx, id: r.log_id }]),
  );
  let floor: Position = { tx: relay.log_tx, id: relay.log_id };
  for (const p of parts) {
    if ((p.committed ?? p.earliest) >= p.latest && !offsetsLost(p)) continue; // read to its end
    const at = consumed.get(p.partition) ?? KEEP_ALL;
    if (below(at, floor)) floor = at;
  }
  return { floor, lost: parts.filter(offsetsLost).map((p) => p.partition) };
}
