// Stops and trips (API guide 5, "Reports"), without a database: one asset's positions in time
// order in, stops and the trips between them out, as they become known.
//
// A stop is the asset staying within `radiusMeters` of the position where it arrived (the anchor)
// for at least `minMs`: it runs from the anchor's time to the last position within the radius, at
// the mean of those positions. When a position leaves the radius before `minMs` has passed, the
// anchor was a point of a trip, and the next position becomes the candidate anchor (the positions
// after the old anchor are looked at again). A trip runs between stops: from a stop's last position
// to the next stop's first, or from the first position of the range, or to its last, when the
// asset was moving there. Its distance is the great-circle distance over its positions (haversine,
// safe across the antimeridian), its average speed that distance over its duration, its maximum
// speed the highest `speed` its positions reported (null when none did).
//
// Memory: only the positions of the candidate stop that has not yet lasted `minMs` (and, when a
// trip's path is asked for, the trip's positions).
import { haversineMeters } from '../zones/geo.js';

export interface Point {
  t: number;
  latitude: number;
  longitude: number;
  /** km/h as reported, or null. */
  speed: number | null;
}

export interface Stop {
  start: number;
  end: number;
  latitude: number;
  longitude: number;
}

export interface Trip {
  start: Point;
  end: Point;
  distanceMeters: number;
  maxSpeed: number | null;
  /** The trip's positions, when `paths` was asked for. */
  path?: Point[];
}

const DEG = Math.PI / 180;

/** The mean position of points given as sums of unit vectors (right across the antimeridian). */
function meanOf(x: number, y: number, z: number): { latitude: number; longitude: number } {
  const h = Math.hypot(x, y);
  return { latitude: Math.atan2(z, h) / DEG, longitude: h < 1e-12 ? 0 : Math.atan2(y, x) / DEG };
}

export class MovementDetector {
  /** The candidate stop: its anchor first, then the positions within the radius (until confirmed). */
  private candidate: Point[] = [];
  /** The candidate has lasted minMs: a stop, growing. */
  private confirmed: { start: Point; last: Point; x: number; y: number; z: number } | null = null;
  /** The trip under way: where it started (a stop's last position, or the first position). */
  private trip: { start: Point; last: Point; distance: number; maxSpeed: number | null; path?: Point[] } | null = null;

  constructor(
    private readonly radiusMeters: number,
    private readonly minMs: number,
    private readonly emit: { stop?: (s: Stop) => void; trip?: (t: Trip) => void },
    private readonly paths = false,
  ) {}

  /** The next position (time order). */
  push(p: Point): void {
    const anchor = this.candidate[0];
    if (!anchor) {
      this.candidate.push(p);
      return;
    }
    if (haversineMeters(anchor.latitude, anchor.longitude, p.latitude, p.longitude) <= this.radiusMeters) {
      if (this.confirmed) {
        this.add(this.confirmed, p);
        this.confirmed.last = p;
        return;
      }
      this.candidate.push(p);
      if (p.t - anchor.t >= this.minMs) this.confirm();
      return;
    }
    if (this.confirmed) {
      this.endStop();
      this.candidate = [p];
      return;
    }
    // The anchor was no stop: it belongs to a trip; the rest are candidates again.
    const rest = this.candidate.slice(1);
    this.candidate = [];
    this.travel(anchor);
    for (const q of rest) this.push(q);
    this.push(p);
  }

  /** The end of the positions: what is open is emitted. */
  finish(): void {
    if (this.confirmed) this.endStop();
    else for (const q of this.candidate) this.travel(q);
    this.candidate = [];
    if (this.trip && this.trip.last !== this.trip.start) this.emitTrip();
    this.trip = null;
  }

  private add(s: { x: number; y: number; z: number }, p: Point) {
    const c = Math.cos(p.latitude * DEG);
    s.x += c * Math.cos(p.longitude * DEG);
    s.y += c * Math.sin(p.longitude * DEG);
    s.z += Math.sin(p.latitude * DEG);
  }

  private confirm() {
    const start = this.candidate[0]!;
    // The trip that led here ends where the stop begins.
    this.travel(start);
    if (this.trip && this.trip.last !== this.trip.start) this.emitTrip();
    this.trip = null;
    const s = { start, last: start, x: 0, y: 0, z: 0 };
    for (const q of this.candidate) {
      this.add(s, q);
      s.last = q;
    }
    this.confirmed = s;
    this.candidate = [start];
  }

  private endStop() {
    const s = this.confirmed!;
    this.emit.stop?.({ start: s.start.t, end: s.last.t, ...meanOf(s.x, s.y, s.z) });
    this.confirmed = null;
    this.trip = { start: s.last, last: s.last, distance: 0, maxSpeed: null, ...(this.paths ? { path: [s.last] } : {}) };
  }

  /** A position of a trip, in time order. */
  private travel(p: Point) {
    const t = this.trip;
    if (!t) {
      this.trip = { start: p, last: p, distance: 0, maxSpeed: p.speed, ...(this.paths ? { path: [p] } : {}) };
      return;
    }
    if (p === t.last) return;
    t.distance += haversineMeters(t.last.latitude, t.last.longitude, p.latitude, p.longitude);
    if (p.speed !== null && (t.maxSpeed === null || p.speed > t.maxSpeed)) t.maxSpeed = p.speed;
    t.last = p;
    t.path?.push(p);
  }

  private emitTrip() {
    const t = this.trip!;
    this.emit.trip?.({
      start: t.start,
      end: t.last,
      distanceMeters: t.distance,
      maxSpeed: t.maxSpeed,
      ...(t.path ? { path: t.path } : {}),
    });
  }
}
