// The time-partitioned tables (docs/DESIGN.md, "Storage"): each is a partitioned parent keeping its old
// name, range-partitioned by one timestamp column, with partitions of PARTITION_INTERVAL (UTC).

export type PartitionInterval = 'day' | 'week' | 'month';
export const PARTITION_INTERVALS = ['day', 'week', 'month'] as const;

/**
 * How a table's rows expire:
 * - `owned`: by the retention of the owner each row was stored for (records, events, notifications);
 * - `log`: the event log, only below every reader and every delivery that may still need a row;
 * - `attempts`: delivery results, by DELIVERY_*_RETENTION_DAYS;
 * - `rollups`: hourly rollups, by ROLLUP_RETENTION_DAYS from the hour they cover, whatever the
 *   raw data's retention.
 */
export type Expiry = 'owned' | 'log' | 'attempts' | 'rollups';

export interface PartitionedTable {
  name: string;
  /** The partition key: a timestamptz column, part of the primary key (id, key). */
  key: string;
  expiry: Expiry;
  /** Created partitioned by its own migration (not converted in place by migration 0014). */
  bornPartitioned?: boolean;
}

export const PARTITIONED: readonly PartitionedTable[] = [
  { name: 'locations', key: 'when_created', expiry: 'owned' },
  { name: 'sensor_data', key: 'when_created', expiry: 'owned' },
  { name: 'reefer_data', key: 'when_created', expiry: 'owned' },
  { name: 'genset_data', key: 'when_created', expiry: 'owned' },
  { name: 'oem_data', key: 'when_created', expiry: 'owned' },
  { name: 'events', key: 'when_created', expiry: 'owned' },
  { name: 'notifications', key: 'when_created', expiry: 'owned' },
  { name: 'event_log', key: 'when_created', expiry: 'log' },
  { name: 'delivery_attempts', key: 'when_attempted', expiry: 'attempts' },
  { name: 'rollups', key: 'hour', expiry: 'rollups', bornPartitioned: true },
];

export const tableNamed = (name: string) => PARTITIONED.find((t) => t.name === name);

const DAY = 86_400_000;

/** Date.UTC without its two-digit-year rule (year 1 is year 1, not 1901); months may overflow. */
function utc(year: number, month: number, day: number, ms = 0): number {
  const d = new Date(0);
  d.setUTCFullYear(year, month, day);
  return d.getTime() + ms;
}

/** The start (UTC) of the interval holding `t` (ms): a day, an ISO week (Monday) or a month. */
export function periodStart(t: number, interval: PartitionInterval): number {
  const d = new Date(t);
  const day = utc(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
  if (interval === 'day') return day;
  if (interval === 'week') return day - ((d.getUTCDay() + 6) % 7) * DAY;
  return utc(d.getUTCFullYear(), d.getUTCMonth(), 1);
}

/** The start of the interval after the one starting at `start`. */
export function periodEnd(start: number, interval: PartitionInterval): number {
  if (interval === 'day') return start + DAY;
  if (interval === 'week') return start + 7 * DAY;
  const d = new Date(start);
  return utc(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
}

/**
 * A timestamptz as PostgreSQL prints it ('2026-11-25 00:00:00+00', '1971-03-04 10:00:00.5+01:30')
 * to ms; NaN when it is not one (BC dates, infinity).
 */
export function parsePgTime(text: string): number {
  const m = /^'?(\d{4,})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(\.\d+)?(?:([+-])(\d\d)(?::?(\d\d))?(?::?(\d\d))?)?'?$/.exec(text.trim());
  if (!m) return Number.NaN;
  const [, y, mo, d, h, mi, s, frac, sign, oh, om, os] = m;
  const time = ((Number(h) * 60 + Number(mi)) * 60 + Number(s)) * 1000 + Math.round(Number(frac ?? 0) * 1000);
  const offset = sign ? (Number(oh) * 3600 + Number(om ?? 0) * 60 + Number(os ?? 0)) * 1000 * (sign === '-' ? -1 : 1) : 0;
  return utc(Number(y), Number(mo) - 1, Number(d), time) - offset;
}

/** A partition's range: [lo, hi), -Infinity for MINVALUE and Infinity for MAXVALUE. */
export interface Range {
  lo: number;
  hi: number;
}

/** Parses `FOR VALUES FROM (...) TO (...)` (pg_get_expr of relpartbound). */
export function parseBound(bound: string): Range | null {
  const m = /FROM \((.+?)\) TO \((.+?)\)/.exec(bound);
  if (!m) return null;
  const side = (v: string) => (v === 'MINVALUE' ? -Infinity : v === 'MAXVALUE' ? Infinity : parsePgTime(v));
  const r = { lo: side(m[1]!), hi: side(m[2]!) };
  return Number.isNaN(r.lo) || Number.isNaN(r.hi) ? null : r;
}

/**
 * The range a new partition for `t` gets: its interval, clipped to the gap between the existing
 * partitions around it (a legacy partition, or partitions made with another interval).
 */
export function rangeFor(t: number, existing: readonly Range[], interval: PartitionInterval): Range {
  let lo = periodStart(t, interval);
  let hi = periodEnd(lo, interval);
  for (const r of existing) {
    if (r.hi <= t && r.hi > lo) lo = r.hi;
    if (r.lo > t && r.lo < hi) hi = r.lo;
  }
  return { lo, hi };
}

/** The partition's name: the table and its lower bound (UTC), to the minute when not midnight. */
export function partitionName(table: string, lo: number): string {
  const iso = new Date(lo).toISOString();
  const day = iso.slice(0, 10).replaceAll('-', '');
  const time = iso.slice(11, 16).replace(':', '');
  return `${table}_p${day}${time === '0000' ? '' : `_${time}`}`;
}

/** A SQL timestamptz literal of ms (UTC). */
export const sqlTime = (t: number) => `'${new Date(t).toISOString()}'`;
