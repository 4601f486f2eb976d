// What a share link's page and data show (API guide 8, "Share links"), read through the tables the
// API reads, for the link's assets only. A use is counted (uses, last_used_at) by the one statement
// that finds the link live and within its minute's budget (SHARE_MAX_USES_PER_MINUTE, counted in
// the row, so every process counts one link's uses together); a refused use counts nothing.
//
// An asset shows as its current owner sees it: while that owner is in the link owner's tree, its
// name and the records stored for that owner (a moved asset's history stays with the owner it was
// recorded for, API guide 3; an asset moved out of the tree, or deleted, drops out of the page).
// Nothing else leaves here: no owner, asset or device id, no record id, nothing the link does not
// name. Each series reads at most BOUNDS.shareRowsRead records (the newest of the window) and
// carries at most BOUNDS.sharePoints points, thinned evenly.
import { BOUNDS } from '../bounds.js';
import type { Queryable } from '../db/db.js';
import { iso } from '../http/schemas.js';
import { type Shown, tokenDigest } from './links.js';

export interface LiveLink {
  id: string;
  ownerId: string;
  assetIds: string[];
  show: Shown[];
  windowHours: number;
  expiresAt: Date;
}

/** A use answered, or why not (a page's status and words). */
export type Use = { ok: true; link: LiveLink } | { ok: false; status: 404 | 410 | 429; why: string; retryAfter?: number };

interface UseRow {
  id: string;
  owner_id: string;
  asset_ids: string[];
  show: Shown[];
  window_hours: number;
  expires_at: Date;
}

/** Counts one use of the link of `token` when it is live and within its minute's budget. */
export async function useLink(db: Queryable, token: string, perMinute: number): Promise<Use> {
  const d = tokenDigest(token);
  const { rows } = await db.query<UseRow>(
    `UPDATE share_links SET uses = uses + 1, last_used_at = now(),
            minute_uses = CASE WHEN minute_start > now() - interval '1 minute' THEN minute_uses + 1 ELSE 1 END,
            minute_start = CASE WHEN minute_start > now() - interval '1 minute' THEN minute_start ELSE now() END
      WHERE digest = $1 AND revoked_at IS NULL AND expires_at > now()
        AND NOT (minute_start IS NOT NULL AND minute_start > now() - interval '1 minute' AND minute_uses >= $2)
      RETURNING id, owner_id, asset_ids::text[] AS asset_ids, show, window_hours, expires_at`,
    [d, perMinute],
  );
  const r = rows[0];
  if (r) {
    return {
      ok: true,
      link: { id: r.id, ownerId: r.owner_id, assetIds: r.asset_ids, show: r.show, windowHours: r.window_hours, expiresAt: r.expires_at },
    };
  }
  const { rows: why } = await db.query<{ revoked_at: Date | null; expires_at: Date; retry: number | null }>(
    `SELECT revoked_at, expires_at,
            ceil(extract(epoch FROM minute_start + interval '1 minute' - now()))::int AS retry
       FROM share_links WHERE digest = $1`,
    [d],
  );
  const w = why[0];
  if (!w) return { ok: false, status: 404, why: 'This link is not one this service made, or it was removed long after it ended.' };
  if (w.revoked_at) return { ok: false, status: 410, why: `This link was revoked on ${readable(w.revoked_at)}.` };
  if (w.expires_at.getTime() <= Date.now()) return { ok: false, status: 410, why: `This link expired on ${readable(w.expires_at)}.` };
  const retryAfter = Math.max(1, Math.min(60, w.retry ?? 60));
  return {
    ok: false,
    status: 429,
    why: `This link has been opened too often in the last minute; try again in ${retryAfter} s.`,
    retryAfter,
  };
}

/** A time as the page writes it: 2026-11-29 07:12 UTC. */
export const readable = (d: Date) => `${d.toISOString().slice(0, 16).replace('T', ' ')} UTC`;

export interface Position {
  time: string;
  latitude: number;
  longitude: number;
  speed: number | null;
  heading: number | null;
}
export interface SharedAsset {
  /** Its place in the link's list (the page's `?asset=`): never its id. */
  index: number;
  name: string;
  /** Only when the link shows the position; null before its first location. */
  position?: Position | null;
}
export interface Series<P> {
  /** The window's start, or later when the series read its most records (BOUNDS.shareRowsRead). */
  from: string;
  to: string;
  points: P[];
}
export interface TrackPoint {
  time: string;
  latitude: number;
  longitude: number;
}
export interface Reading {
  time: string;
  value: number;
}
export interface TemperatureSeries extends Series<Reading> {
  name: string;
}
/** What one use shows: only the members the link names. */
export interface View {
  expiresAt: string;
  show: Shown[];
  windowHours: number;
  assets: SharedAsset[];
  /** The asset the track and temperatures are of (its index), when the link shows either. */
  asset?: number;
  track?: Series<TrackPoint>;
  temperature?: { from: string; to: string; series: TemperatureSeries[] };
}

/** Evenly every n-th of `rows` (oldest first), at most `max`, the newest always kept. */
export function thin<T>(rows: T[], max: number): T[] {
  if (rows.length <= max) return rows;
  const step = Math.ceil((rows.length - 1) / (max - 1));
  const out: T[] = [];
  for (let i = 0; i < rows.length; i += step) out.push(rows[i]!);
  if (out[out.length - 1] !== rows[rows.length - 1]) out.push(rows[rows.length - 1]!);
  return out;
}

/** The owners of `$1`'s tree. */
const TREE = `WITH RECURSIVE tree(id) AS (SELECT $1::uuid UNION ALL SELECT o.id FROM owners o JOIN tree ON o.parent_id = tree.id)`;
/** Reefer data's temperatures, where the alert engine reads them (flat, or under cargo.sensors). */
const REEFER_SERIES = [
  { key: 'supplyAirTemperature', name: 'Supply air' },
  { key: 'returnAirTemperature', name: 'Return air' },
] as const;
/** Temperature sensors (sensor data of type TEMPERATURE) drawn per asset, the first by sensorId. */
export const MAX_SENSOR_SERIES = 4;

const finite = (v: unknown): number | null => {
  const n = typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : Number.NaN;
  return Number.isFinite(n) ? n : null;
};

/**
 * What the link shows, for its asset at `index` (the first when not given); null when the link
 * has no asset at that index to show.
 */
export async function readView(db: Queryable, link: LiveLink, index: number | undefined): Promise<View | null> {
  const { rows: assets } = await db.query<{ index: number; id: string; name: string; owner_id: string }>(
    `${TREE} SELECT (l.n - 1)::int AS index, a.id, a.name, a.owner_id
       FROM unnest($2::uuid[]) WITH ORDINALITY AS l(id, n) JOIN assets a ON a.id = l.id
      WHERE a.owner_id IN (SELECT id FROM tree) ORDER BY l.n`,
    [link.ownerId, link.assetIds],
  );
  const view: View = { expiresAt: iso(link.expiresAt)!, show: link.show, windowHours: link.windowHours, assets: [] };
  const shows = (s: Shown) => link.show.includes(s);
  let positions = new Map<string, Position>();
  if (shows('position') && assets.length) {
    const { rows } = await db.query<{
      asset_id: string;
      owner_id: string;
      latitude: number;
      longitude: number;
      speed: number | null;
      heading: number | null;
      when_created: Date;
    }>(
      `SELECT asset_id, owner_id, latitude, longitude, speed, heading, when_created FROM asset_positions WHERE asset_id = ANY($1::uuid[])`,
      [assets.map((a) => a.id)],
    );
    const owner = new Map(assets.map((a) => [a.id, a.owner_id]));
    positions = new Map(
      rows
        .filter((p) => owner.get(p.asset_id) === p.owner_id)
        .map((p) => [
          p.asset_id,
          { time: iso(p.when_created)!, latitude: p.latitude, longitude: p.longitude, speed: p.speed, heading: p.heading },
        ]),
    );
  }
  for (const a of assets) {
    view.assets.push({ index: a.index, name: a.name, ...(shows('position') ? { position: positions.get(a.id) ?? null } : {}) });
  }
  if (!shows('track') && !shows('temperature')) return index === undefined || assets.some((a) => a.index === index) ? view : null;
  const chosen = index === undefined ? assets[0] : assets.find((a) => a.index === index);
  if (!chosen) return index === undefined ? view : null;
  view.asset = chosen.index;
  const now = new Date();
  const from = new Date(now.getTime() - link.windowHours * 3_600_000);
  const read = BOUNDS.shareRowsRead.value;
  const points = BOUNDS.sharePoints.value;
  const params = [chosen.id, chosen.owner_id, from, read];
  /** A series' start: the window's, or its oldest record's when it read all it may. */
  const startOf = (count: number, oldest: Date | undefined) => iso(count >= read && oldest ? oldest : from)!;
  if (shows('track')) {
    const { rows } = await db.query<{ t: Date; latitude: number; longitude: number }>(
      `SELECT when_created AS t, latitude, longitude FROM locations
        WHERE asset_id = $1 AND owner_id = $2 AND when_created >= $3 ORDER BY when_created DESC, id DESC LIMIT $4`,
      params,
    );
    const oldestFirst = [...rows].reverse();
    view.track = {
      from: startOf(rows.length, oldestFirst[0]?.t),
      to: iso(now)!,
      points: thin(oldestFirst, points).map((r) => ({ time: iso(r.t)!, latitude: r.latitude, longitude: r.longitude })),
    };
  }
  if (shows('temperature')) {
    const series: TemperatureSeries[] = [];
    const reefer = await db.query<{ t: Date; supplyAirTemperature: string | null; returnAirTemperature: string | null }>(
      `SELECT when_created AS t,
              COALESCE(data->>'supplyAirTemperature', data#>>'{cargo,sensors,supplyAirTemperature}') AS "supplyAirTemperature",
              COALESCE(data->>'returnAirTemperature', data#>>'{cargo,sensors,returnAirTemperature}') AS "returnAirTemperature"
         FROM reefer_data WHERE asset_id = $1 AND owner_id = $2 AND when_created >= $3 ORDER BY when_created DESC, id DESC LIMIT $4`,
      params,
    );
    const reeferFrom = startOf(reefer.rows.length, reefer.rows[reefer.rows.length - 1]?.t);
    for (const { key, name } of REEFER_SERIES) {
      const readings: Reading[] = [];
      for (let i = reefer.rows.length - 1; i >= 0; i--) {
        const r = reefer.rows[i]!;
        const v = finite(r[key]);
        if (v !== null) readings.push({ time: iso(r.t)!, value: v });
      }
      if (readings.length) series.push({ name, from: reeferFrom, to: iso(now)!, points: thin(readings, points) });
    }
    const sensors = await db.query<{ t: Date; sensor_id: string; value_number: number }>(
      `SELECT when_created AS t, sensor_id, value_number FROM sensor_data
        WHERE asset_id = $1 AND owner_id = $2 AND when_created >= $3 AND type = 'TEMPERATURE' AND value_number IS NOT NULL
        ORDER BY when_created DESC, id DESC LIMIT $4`,
      params,
    );
    const sensorFrom = startOf(sensors.rows.length, sensors.rows[sensors.rows.length - 1]?.t);
    const bySensor = new Map<string, Reading[]>();
    for (let i = sensors.rows.length - 1; i >= 0; i--) {
      const r = sensors.rows[i]!;
      const list = bySensor.get(r.sensor_id) ?? [];
      if (!list.length) bySensor.set(r.sensor_id, list);
      list.push({ time: iso(r.t)!, value: r.value_number });
    }
    for (const id of [...bySensor.keys()].sort().slice(0, MAX_SENSOR_SERIES)) {
      series.push({ name: `Sensor ${id}`, from: sensorFrom, to: iso(now)!, points: thin(bySensor.get(id)!, points) });
    }
    view.temperature = { from: iso(from)!, to: iso(now)!, series };
  }
  return view;
}
