// The temperature chart's data: a reefer's supply and return air over a time range, from the
// hourly rollups (GET /rollups: each hour's count, min, max and mean) or, for a short range with
// few records, from the raw reefer data (every page of GET /reefer-data); then binned into the
// chart's pixel columns, each column keeping the min, max and mean of what falls in it. Whatever
// the number of records, the chart draws at most a mean and a min-max span per column.
import { authorization, ApiError, api } from './api.js';

export const MIN = 60_000;
export const HOUR = 3_600_000;
export const DAY = 86_400_000;

/** Raw data is read for ranges up to this long, with at most RAW_MAX_RECORDS records; else the rollups. */
export const RAW_MAX_RANGE = 2 * DAY;
export const RAW_MAX_RECORDS = 5000;

/** A reading, or a bucket of them: its time (a bucket's middle), min, max, sum and count. */
export interface Sample {
  t: number;
  min: number;
  max: number;
  sum: number;
  count: number;
}

export interface SeriesData {
  key: string;
  samples: Sample[];
  /** Two samples further apart than this are not joined by the line. */
  maxGapMs: number;
}

export interface Loaded {
  source: 'rollups' | 'raw';
  /** Reefer data records: read (raw), or in the rollups' hours (rollups). */
  records: number;
  series: SeriesData[];
}

interface Stat {
  count: number;
  min: number;
  max: number;
  mean: number;
}
interface Bucket {
  start: string;
  records: Record<string, number>;
  reefer: Record<string, Stat>;
}

/** A reading of `key` in reefer data, where the alert engine reads it (`data.<key>`, else `data.cargo.sensors.<key>`). */
export function reading(data: any, key: string): number | undefined {
  const v = data?.[key] ?? data?.cargo?.sensors?.[key] ?? data?.hardware?.sensors?.[key];
  const n = typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : Number.NaN;
  return Number.isFinite(n) ? n : undefined;
}

/**
 * The series `keys` of an asset's reefer data over from..to: the rollups first (one request, which
 * also counts the records); the raw records instead when the range is short and they are few.
 * `signal` aborts a load a newer one replaced.
 */
export async function loadTemperatures(assetId: string, from: number, to: number, keys: string[], signal: AbortSignal): Promise<Loaded> {
  const interval = to - from > 9000 * HOUR ? 'day' : 'hour';
  const width = interval === 'day' ? DAY : HOUR;
  const q = new URLSearchParams({ assetId, from: new Date(from).toISOString(), to: new Date(to).toISOString(), interval });
  const buckets = await api<Bucket[]>('GET', `/rollups?${q}`);
  signal.throwIfAborted();
  const records = buckets.reduce((n, b) => n + (b.records.reeferdata ?? 0), 0);
  if (to - from <= RAW_MAX_RANGE && records <= RAW_MAX_RECORDS) {
    const samples = new Map(keys.map((k) => [k, [] as Sample[]]));
    const raw = new URLSearchParams({
      assetId,
      from: new Date(from).toISOString(),
      to: new Date(to).toISOString(),
      order: 'asc',
      limit: '1000',
    });
    let url = `/api/v1/reefer-data?${raw}`;
    let read = 0;
    while (url) {
      const r = await fetch(url, { headers: authorization(), signal });
      if (!r.ok) throw new ApiError(r.status, `reefer data: ${r.status}`);
      for (const rec of (await r.json()) as { whenCreated: string; data: unknown }[]) {
        read++;
        const t = Date.parse(rec.whenCreated);
        for (const k of keys) {
          const v = reading(rec.data, k);
          if (v !== undefined) samples.get(k)!.push({ t, min: v, max: v, sum: v, count: 1 });
        }
      }
      const next = /<([^>]+)>;\s*rel="next"/.exec(r.headers.get('link') ?? '');
      url = next ? new URL(next[1]!).pathname + new URL(next[1]!).search : '';
    }
    // Readings further apart than half an hour (the temperature report's gap) are a gap.
    return { source: 'raw', records: read, series: keys.map((key) => ({ key, samples: samples.get(key)!, maxGapMs: 30 * MIN })) };
  }
  const series = keys.map((key) => ({
    key,
    samples: buckets.flatMap((b) => {
      const s = b.reefer[key];
      return s ? [{ t: Date.parse(b.start) + width / 2, min: s.min, max: s.max, sum: s.mean * s.count, count: s.count }] : [];
    }),
    maxGapMs: 1.5 * width,
  }));
  return { source: 'rollups', records, series };
}

/** Samples binned into `n` columns over from..to: per column the min, max, sum and count, and the first and last time. */
export interface Columns {
  n: number;
  min: Float64Array;
  max: Float64Array;
  sum: Float64Array;
  count: Float64Array;
  first: Float64Array;
  last: Float64Array;
}

export function bin(samples: Sample[], from: number, to: number, n: number): Columns {
  const c: Columns = {
    n,
    min: new Float64Array(n).fill(Number.POSITIVE_INFINITY),
    max: new Float64Array(n).fill(Number.NEGATIVE_INFINITY),
    sum: new Float64Array(n),
    count: new Float64Array(n),
    first: new Float64Array(n).fill(Number.POSITIVE_INFINITY),
    last: new Float64Array(n).fill(Number.NEGATIVE_INFINITY),
  };
  const perMs = n / (to - from);
  for (const s of samples) {
    if (s.t < from || s.t > to) continue;
    const i = Math.min(n - 1, Math.floor((s.t - from) * perMs));
    if (s.min < c.min[i]!) c.min[i] = s.min;
    if (s.max > c.max[i]!) c.max[i] = s.max;
    c.sum[i]! += s.sum;
    c.count[i]! += s.count;
    if (s.t < c.first[i]!) c.first[i] = s.t;
    if (s.t > c.last[i]!) c.last[i] = s.t;
  }
  return c;
}
