// API guide 8: the pure geometry core for zone geofencing. No I/O, no database.
//
// A zone is either a GeoJSON Polygon/MultiPolygon (RFC 7946, positions are [longitude, latitude],
// first ring exterior, further rings holes, planar lon/lat edges) or a circle with a haversine
// radius. Boundaries count as inside: polygon edges and vertices, hole edges, and the circle at
// exactly radiusMeters. Longitudes 180 and -180 are the same meridian.
import { BOUNDS } from '../bounds.js';

export type Geometry = { type: 'Polygon'; coordinates: number[][][] } | { type: 'MultiPolygon'; coordinates: number[][][][] };

export type Circle = { latitude: number; longitude: number; radiusMeters: number };

/** A zone; `box`, when given, is its stored bounding box (bbox() of it), used instead of recomputing one. */
export type Zone = { geometry?: Geometry | null; circle?: Circle | null; box?: BBox | null };

export type BBox = { minLat: number; maxLat: number; minLon: number; maxLon: number };

export type ValidationResult<T> = { ok: true; value: T } | { ok: false; field: string; message: string };

/** Mean Earth radius in metres (IUGG), used by haversineMeters. */
export const EARTH_RADIUS_M = 6_371_008.8;
/** Half the Earth's circumference at EARTH_RADIUS_M, rounded down: the largest accepted circle radius. */
export const MAX_RADIUS_M = 20_037_509;
/** DoS bound: at most this many positions in one geometry, over all rings and polygons. */
export const MAX_POSITIONS: number = BOUNDS.zonePositions.value;

/** Tolerance, in degrees, for a point lying on a polygon edge (about 0.01 mm). */
export const EDGE_EPS_DEG = 1e-10;
/** Tolerance, in metres, for a point lying on a circle's boundary. */
const CIRCLE_EPS_M = 1e-6;
/** Margin, in degrees, added around every bounding box so boundary points are never cut off. */
const BBOX_MARGIN_DEG = 1e-9;

const DEG = Math.PI / 180;
const METRES_PER_DEGREE = EARTH_RADIUS_M * DEG;

// ---------------------------------------------------------------------------------------------
// Validation

type Fail = { ok: false; field: string; message: string };
const fail = (field: string, message: string): Fail => ({ ok: false, field, message });

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Validates one position; returns a failure or null. */
function checkPosition(p: unknown, ptr: string): Fail | null {
  if (!Array.isArray(p)) return fail(ptr, 'a position must be an array [longitude, latitude]');
  if (p.length < 2 || p.length > 3) {
    return fail(ptr, 'a position must have 2 or 3 elements: [longitude, latitude] or [longitude, latitude, altitude]');
  }
  for (let i = 0; i < p.length; i++) {
    const v: unknown = p[i];
    if (typeof v !== 'number' || !Number.isFinite(v)) return fail(`${ptr}/${i}`, 'must be a finite number');
  }
  const lon = p[0] as number;
  const lat = p[1] as number;
  if (lon < -180 || lon > 180) return fail(`${ptr}/0`, 'longitude must be between -180 and 180');
  if (lat < -90 || lat > 90) return fail(`${ptr}/1`, 'latitude must be between -90 and 90');
  return null;
}

/** Validates the rings of one polygon; `count` is shared across the geometry for the DoS bound. */
function checkPolygon(rings: unknown, ptr: string, count: { n: number }): Fail | null {
  if (!Array.isArray(rings)) return fail(ptr, 'a polygon must be an array of linear rings');
  if (rings.length < 1) return fail(ptr, 'a polygon must have at least an exterior ring');
  for (let r = 0; r < rings.length; r++) {
    const ring: unknown = rings[r];
    const rptr = `${ptr}/${r}`;
    if (!Array.isArray(ring)) return fail(rptr, 'a linear ring must be an array of positions');
    if (count.n + ring.length > MAX_POSITIONS) {
      return fail('/coordinates', `a geometry may have at most ${MAX_POSITIONS} positions`);
    }
    count.n += ring.length;
    if (ring.length < 4) return fail(rptr, 'a linear ring must have at least 4 positions');
    for (let i = 0; i < ring.length; i++) {
      const bad = checkPosition(ring[i], `${rptr}/${i}`);
      if (bad) return bad;
    }
    const first = ring[0] as number[];
    const last = ring[ring.length - 1] as number[];
    if (first[0] !== last[0] || first[1] !== last[1]) {
      return fail(rptr, 'a linear ring must be closed: its first and last positions must be equal');
    }
  }
  return null;
}

/**
 * Validates a GeoJSON Polygon or MultiPolygon. `field` in a failure is a JSON pointer relative to
 * the geometry object: `/type`, `/coordinates` (not an array, empty MultiPolygon, or more than
 * MAX_POSITIONS positions), `/coordinates/r` or `/coordinates/p/r` (a ring that is not an array,
 * has fewer than 4 positions or is not closed), `/coordinates/r/i` (a malformed position) and
 * `/coordinates/r/i/0|1` (a non-finite or out-of-range longitude or latitude).
 */
export function validateGeometry(g: unknown): ValidationResult<Geometry> {
  if (!isObject(g)) return fail('', 'geometry must be an object');
  const type = g.type;
  if (type !== 'Polygon' && type !== 'MultiPolygon') {
    return fail('/type', "type must be 'Polygon' or 'MultiPolygon'");
  }
  const coordinates = g.coordinates;
  if (!Array.isArray(coordinates)) return fail('/coordinates', 'coordinates must be an array');
  const count = { n: 0 };
  if (type === 'Polygon') {
    const bad = checkPolygon(coordinates, '/coordinates', count);
    if (bad) return bad;
    return { ok: true, value: { type, coordinates: coordinates as number[][][] } };
  }
  if (coordinates.length < 1) return fail('/coordinates', 'a MultiPolygon must have at least one polygon');
  for (let p = 0; p < coordinates.length; p++) {
    const bad = checkPolygon(coordinates[p], `/coordinates/${p}`, count);
    if (bad) return bad;
  }
  return { ok: true, value: { type, coordinates: coordinates as number[][][][] } };
}

/** Validates a circle; failures name `/latitude`, `/longitude` or `/radiusMeters` (or '' for a non-object). */
export function validateCircle(c: unknown): ValidationResult<Circle> {
  if (!isObject(c)) return fail('', 'circle must be an object');
  const { latitude, longitude, radiusMeters } = c;
  if (typeof latitude !== 'number' || !Number.isFinite(latitude)) return fail('/latitude', 'must be a finite number');
  if (latitude < -90 || latitude > 90) return fail('/latitude', 'latitude must be between -90 and 90');
  if (typeof longitude !== 'number' || !Number.isFinite(longitude)) return fail('/longitude', 'must be a finite number');
  if (longitude < -180 || longitude > 180) return fail('/longitude', 'longitude must be between -180 and 180');
  if (typeof radiusMeters !== 'number' || !Number.isFinite(radiusMeters)) {
    return fail('/radiusMeters', 'must be a finite number');
  }
  if (radiusMeters <= 0 || radiusMeters > MAX_RADIUS_M) {
    return fail('/radiusMeters', `radiusMeters must be greater than 0 and at most ${MAX_RADIUS_M}`);
  }
  return { ok: true, value: { latitude, longitude, radiusMeters } };
}

// ---------------------------------------------------------------------------------------------
// Distance and bounding boxes

/** Great-circle distance in metres (haversine, Earth radius 6,371,008.8 m). */
export function haversineMeters(lat1: number, lon1: number, lat2: number, lon2: number): number {
  const dLat = (lat2 - lat1) * DEG;
  const dLon = (lon2 - lon1) * DEG;
  const s = Math.sin(dLat / 2) ** 2 + Math.cos(lat1 * DEG) * Math.cos(lat2 * DEG) * Math.sin(dLon / 2) ** 2;
  return 2 * EARTH_RADIUS_M * Math.asin(Math.sqrt(Math.min(1, Math.max(0, s))));
}

export function polygons(g: Geometry): number[][][][] {
  return g.type === 'Polygon' ? [g.coordinates] : g.coordinates;
}

function circleBBox(c: Circle): BBox {
  const delta = c.radiusMeters / EARTH_RADIUS_M; // angular radius, radians
  const dLat = delta / DEG + BBOX_MARGIN_DEG;
  const minLat = c.latitude - dLat;
  const maxLat = c.latitude + dLat;
  if (minLat <= -90 || maxLat >= 90) {
    // The cap reaches a pole: every meridian passes through it.
    return { minLat: Math.max(-90, minLat), maxLat: Math.min(90, maxLat), minLon: -180, maxLon: 180 };
  }
  const cosLat = Math.cos(c.latitude * DEG);
  // radius / (cos(lat) * metres-per-degree) as API guide 8 puts it, widened to the exact
  // half-width of a spherical cap, asin(sin δ / cos φ), which is larger for big circles.
  const simple = c.radiusMeters / (cosLat * METRES_PER_DEGREE);
  const ratio = Math.sin(delta) / cosLat;
  const exact = ratio >= 1 ? 180 : Math.asin(ratio) / DEG;
  const dLon = Math.max(simple, exact) + BBOX_MARGIN_DEG;
  const minLon = c.longitude - dLon;
  const maxLon = c.longitude + dLon;
  if (minLon < -180 || maxLon > 180) {
    // Crosses the antimeridian: the prefilter cannot express a wrapped range, so take all of it.
    return { minLat, maxLat, minLon: -180, maxLon: 180 };
  }
  return { minLat, maxLat, minLon, maxLon };
}

/**
 * A conservative bounding box for a zone, for use as a fast prefilter (a point outside it is
 * certainly outside the zone). Throws if the zone has neither geometry nor circle.
 */
export function bbox(zone: Zone): BBox {
  if (zone.geometry) {
    let minLat = Infinity;
    let maxLat = -Infinity;
    let minLon = Infinity;
    let maxLon = -Infinity;
    for (const poly of polygons(zone.geometry)) {
      for (const ring of poly) {
        for (const p of ring) {
          const lon = p[0] as number;
          const lat = p[1] as number;
          if (lat < minLat) minLat = lat;
          if (lat > maxLat) maxLat = lat;
          if (lon < minLon) minLon = lon;
          if (lon > maxLon) maxLon = lon;
        }
      }
    }
    return {
      minLat: Math.max(-90, minLat - BBOX_MARGIN_DEG),
      maxLat: Math.min(90, maxLat + BBOX_MARGIN_DEG),
      minLon: Math.max(-180, minLon - BBOX_MARGIN_DEG),
      maxLon: Math.min(180, maxLon + BBOX_MARGIN_DEG),
    };
  }
  if (zone.circle) return circleBBox(zone.circle);
  throw new Error('zone has neither geometry nor circle');
}

export function inBBox(b: BBox, lat: number, lon: number): boolean {
  return lat >= b.minLat && lat <= b.maxLat && lon >= b.minLon && lon <= b.maxLon;
}

// ---------------------------------------------------------------------------------------------
// Point in polygon (planar lon/lat)

/** True if (x, y) lies on segment a-b within EDGE_EPS_DEG. */
export function onSegment(x: number, y: number, ax: number, ay: number, bx: number, by: number): boolean {
  const dx = bx - ax;
  const dy = by - ay;
  const px = x - ax;
  const py = y - ay;
  const len2 = dx * dx + dy * dy;
  if (len2 === 0) return px * px + py * py <= EDGE_EPS_DEG * EDGE_EPS_DEG;
  const len = Math.sqrt(len2);
  const cross = dx * py - dy * px; // = distance from the line * len
  if (Math.abs(cross) > EDGE_EPS_DEG * len) return false;
  const dot = dx * px + dy * py; // = projection onto the segment * len
  return dot >= -EDGE_EPS_DEG * len && dot <= len2 + EDGE_EPS_DEG * len;
}

function onRing(ring: number[][], x: number, y: number): boolean {
  for (let i = 0, j = ring.length - 1; i < ring.length; j = i++) {
    const a = ring[j] as number[];
    const b = ring[i] as number[];
    if (onSegment(x, y, a[0] as number, a[1] as number, b[0] as number, b[1] as number)) return true;
  }
  return false;
}

/** Even-odd ray casting; only meaningful for points not on the ring's boundary. */
function insideRing(ring: number[][], x: number, y: number): boolean {
  let inside = false;
  for (let i = 0, j = ring.length - 1; i < ring.length; j = i++) {
    const a = ring[j] as number[];
    const b = ring[i] as number[];
    const ax = a[0] as number;
    const ay = a[1] as number;
    const bx = b[0] as number;
    const by = b[1] as number;
    if (ay > y !== by > y && x < ((bx - ax) * (y - ay)) / (by - ay) + ax) inside = !inside;
  }
  return inside;
}

/** True if the point is in the circle, its boundary included. */
export function circleContains(c: Circle, lat: number, lon: number): boolean {
  return haversineMeters(c.latitude, c.longitude, lat, lon) <= c.radiusMeters + CIRCLE_EPS_M;
}

function polygonContains(rings: number[][][], x: number, y: number): boolean {
  // Boundary first: any edge of any ring, holes included, is inside.
  for (const ring of rings) if (onRing(ring, x, y)) return true;
  const [exterior, ...holes] = rings;
  if (!exterior || !insideRing(exterior, x, y)) return false;
  for (const hole of holes) if (insideRing(hole, x, y)) return false;
  return true;
}

function geometryContains(g: Geometry, lat: number, lon: number): boolean {
  for (const poly of polygons(g)) if (polygonContains(poly, lon, lat)) return true;
  return false;
}

// ---------------------------------------------------------------------------------------------
// The authoritative test

/** The number of positions of a zone's shape, as the per-owner limit counts them: a circle is one. */
export function vertexCount(zone: Zone): number {
  if (zone.geometry) {
    let n = 0;
    for (const poly of polygons(zone.geometry)) for (const ring of poly) n += ring.length;
    return n;
  }
  return zone.circle ? 1 : 0;
}

/**
 * True if the point is in the zone, boundaries included. Longitude 180 and -180 are the same
 * meridian, so a point on it is tested at both. A zone with neither geometry nor circle contains
 * nothing. If a zone somehow has both, the geometry is authoritative.
 */
export function contains(zone: Zone, latitude: number, longitude: number): boolean {
  if (!Number.isFinite(latitude) || !Number.isFinite(longitude)) return false;
  if (!zone.geometry && !zone.circle) return false;
  const box = zone.box ?? bbox(zone);
  const lons = Math.abs(longitude) === 180 ? [180, -180] : [longitude];
  for (const lon of lons) {
    if (!inBBox(box, latitude, lon)) continue;
    if (zone.geometry) {
      if (geometryContains(zone.geometry, latitude, lon)) return true;
    } else if (zone.circle) {
      if (circleContains(zone.circle, latitude, lon)) return true;
    }
  }
  return false;
}
