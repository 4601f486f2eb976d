// The trips and stops reports: each asset's raw positions in the range, a page at a time in time
// order, through the stop detector (movement.ts). Where the raw positions expired, rollups cannot
// say where an asset stopped: the report covers the raw positions after that time and says so.
import type { Queryable } from '../db/db.js';
import { iso } from '../http/schemas.js';
import { MovementDetector, type Point, type Stop, type Trip } from './movement.js';
import { timeOrdered } from './read.js';
import type { ReportScope } from './scope.js';

const MIN = 60_000;

export interface StopItem extends Record<string, unknown> {
  assetId: string;
  start: string;
  end: string;
  durationSeconds: number;
  latitude: number;
  longitude: number;
}

interface Place {
  time: string;
  latitude: number;
  longitude: number;
}
export interface TripItem extends Record<string, unknown> {
  assetId: string;
  start: Place;
  end: Place;
  durationSeconds: number;
  distanceMeters: number;
  averageSpeed: number | null;
  maxSpeed: number | null;
  /** Its positions, for GeoJSON only (not a member of the item). */
  path?: Point[];
}

export const STOP_COLUMNS = ['assetId', 'start', 'end', 'durationSeconds', 'latitude', 'longitude'];
export const TRIP_COLUMNS = [
  'assetId',
  'start.time',
  'start.latitude',
  'start.longitude',
  'end.time',
  'end.latitude',
  'end.longitude',
  'durationSeconds',
  'distanceMeters',
  'averageSpeed',
  'maxSpeed',
];

const r6 = (x: number) => Math.round(x * 1e6) / 1e6;
const r3 = (x: number) => Math.round(x * 1e3) / 1e3;
const place = (p: Point): Place => ({ time: iso(new Date(p.t))!, latitude: p.latitude, longitude: p.longitude });
const stopItem = (assetId: string, s: Stop): StopItem => ({
  assetId,
  start: iso(new Date(s.start))!,
  end: iso(new Date(s.end))!,
  durationSeconds: Math.round((s.end - s.start) / 1000),
  latitude: r6(s.latitude),
  longitude: r6(s.longitude),
});
const tripItem = (assetId: string, t: Trip): TripItem => {
  const seconds = (t.end.t - t.start.t) / 1000;
  return {
    assetId,
    start: place(t.start),
    end: place(t.end),
    durationSeconds: Math.round(seconds),
    distanceMeters: r3(t.distanceMeters),
    // km/h, as positions report speed.
    averageSpeed: seconds > 0 ? r3((t.distanceMeters / seconds) * 3.6) : null,
    maxSpeed: t.maxSpeed,
    ...(t.path ? { path: t.path } : {}),
  };
};

/** The stops or the trips of every asset of the scope, as they are found. */
export async function* movement(
  db: Queryable,
  s: ReportScope,
  kind: 'trips' | 'stops',
  opts: { radiusMeters: number; minutes: number; paths: boolean },
): AsyncGenerator<StopItem | TripItem> {
  const from = s.rawFrom ?? s.from;
  for (const asset of s.assets) {
    const found: (StopItem | TripItem)[] = [];
    const detector = new MovementDetector(
      opts.radiusMeters,
      opts.minutes * MIN,
      kind === 'stops' ? { stop: (x) => found.push(stopItem(asset.id, x)) } : { trip: (x) => found.push(tripItem(asset.id, x)) },
      opts.paths,
    );
    // Positions are small rows: a month of one a minute is one page.
    const pages = timeOrdered<Point>(db, s, 'locations', asset.id, { from, to: s.to }, () => 'latitude, longitude, speed', 50_000);
    for await (const page of pages) {
      for (const p of page) detector.push(p);
      yield* found.splice(0);
    }
    detector.finish();
    yield* found.splice(0);
  }
}
