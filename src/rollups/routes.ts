// GET /rollups (API guide 5, "Rollups"): one asset's hourly rollups, by hour or summed by UTC day.
// Also the read the reports use where the raw rows have expired.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { type Static, Type } from '@sinclair/typebox';
import type { Db } from '../db/db.js';
import { badRequest } from '../http/errors.js';
import { DateTime, iso, Literals, Nullable, Uuid } from '../http/schemas.js';
import type { OwnerScope } from '../http/paging.js';
import { foldRollups } from './rollups.js';
import { aggregate, ROLLUP_COLUMNS, ROLLUP_TABLES, type RollupType } from './sql.js';

const HOUR = 3_600_000;
const DAY = 86_400_000;
/** The most buckets one answer holds. */
export const MAX_BUCKETS = 10_000;

/** One hour of one type, as read (stats: key -> [count, min, max, sum]). */
export interface RollupRow {
  type: RollupType;
  /** Times in epoch milliseconds (a report reads thousands of rows: no Date parsing). */
  hour: number;
  count: number;
  first_at: number;
  last_at: number;
  /** Locations: the hour's steps, with the one from the previous hour's last position. */
  distance_mm: number | null;
  /** Reefer and genset data: the longest step between the hour's records, in microseconds. */
  max_step_us: number | null;
  stats: Record<string, [number, number, number, number]> | null;
}

export interface RollupRead {
  owners: OwnerScope;
  assetId: string;
  from: number;
  to: number;
  /** ROLLUP_RETENTION_DAYS (the fold drops what retention let go). */
  keepDays: number;
  /** Only these types (default: all). */
  types?: RollupType[];
  /** Only these members of `stats` (default: all). */
  keys?: string[];
  /** The caller folded the late records already (a report over many assets folds once). */
  folded?: boolean;
}

const ms = (column: string) => `(extract(epoch FROM ${column}) * 1000)::float8`;

/**
 * The rollup rows of `assetId` with `from <= hour < to` of the owners `owners` lets through (the
 * caller's tenancy, or one owner), oldest first, counting every record committed so far: the hours
 * late records went to summed again first, the summed hours read from the rollups and the hours
 * not summed yet (the last hour or so) from the raw rows, by the same SQL. A location row's
 * distance includes the step from the previous hour's last position.
 */
export async function readRollups(db: Db, r: RollupRead): Promise<RollupRow[]> {
  if (!r.folded) await foldRollups(db, r.keepDays);
  const types = r.types ?? (Object.keys(ROLLUP_TABLES) as RollupType[]);
  const locations = types.includes('location');
  const params: unknown[] = [r.assetId, new Date(r.from), new Date(r.to), types];
  const visible = await r.owners.where('owner_id', params);
  const summed = '(SELECT materialized FROM rollup_state)';
  const live = types.map(
    (type) =>
      `SELECT * FROM (${aggregate(
        type,
        `(SELECT * FROM ${ROLLUP_TABLES[type]} WHERE asset_id = $1 AND when_created >= greatest($2, ${summed}) AND when_created < $3 AND ${visible}) AS src`,
      )}) AS ${type}`,
  );
  const stats = r.keys
    ? `(SELECT jsonb_object_agg(k, r.stats -> k) FROM unnest($${params.push(r.keys)}::text[]) AS k WHERE r.stats ? k) AS stats`
    : 'r.stats';
  const { rows } = await db.query<RollupRow>(
    `WITH hours AS (
       SELECT ${ROLLUP_COLUMNS} FROM rollups
        WHERE asset_id = $1 AND hour >= $2 AND hour < $3 AND hour < ${summed} AND type = ANY($4::text[]) AND ${visible}
       UNION ALL
       SELECT * FROM (${live.join(' UNION ALL ')}) AS l(${ROLLUP_COLUMNS})
     ), loc AS (
       (SELECT * FROM (
          (SELECT hour, owner_id, NULL::float8 AS first_lat, NULL::float8 AS first_lon, last_lat, last_lon FROM rollups
            WHERE ${locations} AND asset_id = $1 AND type = 'location' AND hour < $2 AND hour < ${summed} AND ${visible}
            ORDER BY hour DESC LIMIT 1)
          UNION ALL
          (SELECT rollup_hour(when_created), owner_id, NULL, NULL, latitude, longitude FROM locations
            WHERE ${locations} AND asset_id = $1 AND when_created >= ${summed} AND when_created < $2 AND ${visible}
            ORDER BY when_created DESC, id DESC LIMIT 1)) p
        ORDER BY hour DESC LIMIT 1)
       UNION ALL
       SELECT hour, owner_id, first_lat, first_lon, last_lat, last_lon FROM hours WHERE type = 'location'
     ), steps AS (
       SELECT hour, owner_id, CASE WHEN lag(owner_id) OVER w = owner_id
                THEN rollup_mm(lag(last_lat) OVER w, lag(last_lon) OVER w, first_lat, first_lon) ELSE 0 END AS step_mm
         FROM loc WINDOW w AS (ORDER BY hour, owner_id)
     )
     SELECT r.type, ${ms('r.hour')} AS hour, r.count::float8 AS count, ${ms('r.first_at')} AS first_at, ${ms('r.last_at')} AS last_at,
            ${stats}, r.max_step_us::float8 AS max_step_us, (r.distance_mm + COALESCE(s.step_mm, 0))::float8 AS distance_mm
       FROM hours r LEFT JOIN steps s ON r.type = 'location' AND s.hour = r.hour AND s.owner_id = r.owner_id
      ORDER BY r.hour, r.type`,
    params,
  );
  return rows;
}

const Stat = Type.Object({ count: Type.Integer(), min: Type.Number(), max: Type.Number(), mean: Type.Number() });
const Bucket = Type.Object(
  {
    assetId: Uuid,
    start: DateTime,
    interval: Literals(['hour', 'day'] as const),
    records: Type.Record(Type.String(), Type.Integer(), { description: 'Records stored, by type (location, sensordata, ...)' }),
    distanceMeters: Nullable(Type.Number({ description: 'Great-circle distance between its consecutive positions; null without any' })),
    reefer: Type.Record(Type.String(), Stat, { description: 'Per temperature member of reefer data' }),
    genset: Type.Record(Type.String(), Stat, { description: 'Per temperature member of genset data' }),
    sensors: Type.Record(Type.String(), Type.Object({ type: Type.String(), ...Stat.properties }), {
      description: 'Per numeric sensor, by sensorId',
    }),
  },
  { title: 'Rollup' },
);
type Bucket = Static<typeof Bucket>;
const RollupQuery = Type.Object({
  assetId: Uuid,
  from: Type.Optional(Type.String({ format: 'date-time', description: 'Default: to minus 7 days (hour) or 90 days (day)' })),
  to: Type.Optional(Type.String({ format: 'date-time', description: 'Default: now' })),
  interval: Type.Optional(Literals(['hour', 'day'] as const, { description: 'Bucket width (UTC); default hour' })),
});

type Acc = { count: number; min: number; max: number; sum: number };
const add = (into: Map<string, Acc>, key: string, [count, min, max, sum]: [number, number, number, number]) => {
  const a = into.get(key);
  if (!a) into.set(key, { count, min, max, sum });
  else {
    a.count += count;
    a.min = Math.min(a.min, min);
    a.max = Math.max(a.max, max);
    a.sum += sum;
  }
};
const stat = (a: Acc) => ({ count: a.count, min: a.min, max: a.max, mean: a.sum / a.count });
const mapOf = <T>(m: Map<string, T>) => Object.fromEntries([...m].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));

/** Hour rows into buckets of `width` ms (UTC), oldest first; only buckets with data. */
export function buckets(assetId: string, rows: RollupRow[], interval: 'hour' | 'day'): Bucket[] {
  const width = interval === 'day' ? DAY : HOUR;
  type Open = {
    start: number;
    records: Map<string, number>;
    mm: number | null;
    series: Record<'reefer' | 'genset' | 'sensors', Map<string, Acc>>;
  };
  const out: Open[] = [];
  for (const r of rows) {
    const start = Math.floor(r.hour / width) * width;
    let b = out[out.length - 1];
    if (!b || b.start !== start) {
      b = { start, records: new Map(), mm: null, series: { reefer: new Map(), genset: new Map(), sensors: new Map() } };
      out.push(b);
    }
    b.records.set(r.type, (b.records.get(r.type) ?? 0) + r.count);
    if (r.type === 'location') b.mm = (b.mm ?? 0) + (r.distance_mm ?? 0);
    const series =
      r.type === 'reeferdata'
        ? b.series.reefer
        : r.type === 'gensetdata'
          ? b.series.genset
          : r.type === 'sensordata'
            ? b.series.sensors
            : null;
    if (series) for (const [k, v] of Object.entries(r.stats ?? {})) add(series, k, v.map(Number) as [number, number, number, number]);
  }
  return out.map((b) => ({
    assetId,
    start: iso(new Date(b.start))!,
    interval,
    records: mapOf(b.records),
    distanceMeters: b.mm === null ? null : b.mm / 1000,
    reefer: mapOf(new Map([...b.series.reefer].map(([k, a]) => [k, stat(a)]))),
    genset: mapOf(new Map([...b.series.genset].map(([k, a]) => [k, stat(a)]))),
    // Keyed <type>/<sensorId> in the table: shown by sensorId, with its type.
    sensors: mapOf(
      new Map(
        [...b.series.sensors].map(([k, a]) => {
          const cut = k.indexOf('/');
          return [k.slice(cut + 1), { type: k.slice(0, cut), ...stat(a) }];
        }),
      ),
    ),
  }));
}

export const rollupRoutes: FastifyPluginAsyncTypebox<{ db: Db }> = async (app, { db }) => {
  app.get('/rollups', {
    schema: {
      tags: ['rollups'],
      summary: "One asset's hourly rollups (kept for ROLLUP_RETENTION_DAYS), by hour or by UTC day",
      querystring: RollupQuery,
      response: { 200: Type.Array(Bucket) },
    },
    handler: async (req) => {
      const q = req.query;
      const interval = q.interval ?? 'hour';
      const width = interval === 'day' ? DAY : HOUR;
      const to = q.to ? Date.parse(q.to) : Date.now();
      const from = q.from ? Date.parse(q.from) : to - (interval === 'day' ? 90 : 7) * DAY;
      if (from > to) throw badRequest('from must not be after to.', '/from');
      const start = Math.floor(from / width) * width;
      const end = Math.ceil(to / width) * width;
      if ((end - start) / width > MAX_BUCKETS) {
        throw badRequest(`At most ${MAX_BUCKETS} ${interval}s per request; narrow from..to or use interval=day.`, '/from');
      }
      await req.tenancy.one(db, { select: 'id', from: 'assets', ownerColumn: 'owner_id' }, q.assetId, 'asset');
      const keepDays = req.server.services.cfg.ROLLUP_RETENTION_DAYS;
      return buckets(
        q.assetId,
        await readRollups(db, { owners: req.tenancy, assetId: q.assetId, from: start, to: end, keepDays }),
        interval,
      );
    },
  });
};
