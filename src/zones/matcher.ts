// Matching stored locations to an owner's zones (API guide 8), fast and without holding the event
// loop: the answer is geo.ts contains()'s, point for point, but
//   - each zone's stored bounding box (zones.min_lat ...) is the prefilter, never recomputed;
//   - a polygon zone is indexed once per store, when a point first falls in its box: its edges are
//     bucketed into horizontal bands, so a point is tested against the edges of its band (the only
//     ones a horizontal ray or a boundary test can meet), not against every vertex;
//   - the work runs in slices (slices.ts) that give the event loop back every SLICE_MS.
import { type BBox, bbox, type Circle, circleContains, EDGE_EPS_DEG, type Geometry, inBBox, onSegment, polygons } from './geo.js';
import type { Slices } from './slices.js';

/** A zone as the matcher reads it: its shape and its stored box (null columns: computed). */
export interface MatchZone {
  id: string;
  /** The geometry, or its JSON text (parsed when a point first falls in the zone's box). */
  geometry: Geometry | string | null;
  circle: Circle | null;
  min_lat: number | null;
  max_lat: number | null;
  min_lon: number | null;
  max_lon: number | null;
}

/** Widening of an edge's band range, in degrees: covers onSegment's tolerance on every side. */
const BAND_MARGIN_DEG = 10 * EDGE_EPS_DEG;
/** Most bands of one polygon zone, and the most band entries per edge on average (else fewer bands). */
const MAX_BANDS = 1024;
const MAX_ENTRIES_PER_EDGE = 8;

/** A polygon zone's edges in horizontal bands; `contains` equals geo.ts geometryContains. */
export class PolygonIndex {
  private readonly xy: Float64Array; // ax, ay, bx, by per edge
  private readonly ringOf: Int32Array; // the ring of each edge
  private readonly polygonOf: Int32Array; // the polygon of each ring
  private readonly firstRing: Int32Array; // per polygon, its exterior ring; its holes follow it
  private readonly parity: Uint8Array; // per ring, during one query
  private readonly minY: number;
  private readonly height: number;
  private readonly bands: number;
  private readonly offsets: Uint32Array; // band b's edges: entries[offsets[b] .. offsets[b + 1])
  private readonly entries: Uint32Array;

  constructor(g: Geometry) {
    const polys = polygons(g);
    let edges = 0;
    let rings = 0;
    for (const poly of polys) {
      for (const ring of poly) edges += ring.length;
      rings += poly.length;
    }
    this.xy = new Float64Array(edges * 4);
    this.ringOf = new Int32Array(edges);
    this.polygonOf = new Int32Array(rings);
    this.firstRing = new Int32Array(polys.length + 1);
    this.parity = new Uint8Array(rings);
    let e = 0;
    let r = 0;
    let minY = Infinity;
    let maxY = -Infinity;
    for (const [p, poly] of polys.entries()) {
      this.firstRing[p] = r;
      for (const ring of poly) {
        this.polygonOf[r] = p;
        // The same edges as geo.ts: (ring[i-1], ring[i]), the first closing from the last.
        for (let i = 0, j = ring.length - 1; i < ring.length; j = i++) {
          const a = ring[j] as number[];
          const b = ring[i] as number[];
          const ay = a[1] as number;
          this.xy[e * 4] = a[0] as number;
          this.xy[e * 4 + 1] = ay;
          this.xy[e * 4 + 2] = b[0] as number;
          this.xy[e * 4 + 3] = b[1] as number;
          this.ringOf[e++] = r;
          if (ay < minY) minY = ay;
          if (ay > maxY) maxY = ay;
        }
        r++;
      }
    }
    this.firstRing[polys.length] = r;
    this.minY = minY - BAND_MARGIN_DEG;
    const span = Math.max(maxY + BAND_MARGIN_DEG - this.minY, EDGE_EPS_DEG);
    // As many bands as keep the entries (an edge is in every band it spans) within bounds.
    let bands = Math.max(1, Math.min(MAX_BANDS, Math.ceil(edges / 4)));
    let total = 0;
    for (;;) {
      total = 0;
      for (let k = 0; k < edges; k++) {
        const [lo, hi] = this.range(k, span / bands, bands);
        total += hi - lo + 1;
      }
      if (total <= MAX_ENTRIES_PER_EDGE * edges || bands === 1) break;
      bands = Math.max(1, bands >> 1);
    }
    this.bands = bands;
    this.height = span / bands;
    this.offsets = new Uint32Array(bands + 1);
    for (let k = 0; k < edges; k++) {
      const [lo, hi] = this.range(k, this.height, bands);
      for (let b = lo; b <= hi; b++) this.offsets[b + 1]!++;
    }
    for (let b = 0; b < bands; b++) this.offsets[b + 1]! += this.offsets[b]!;
    this.entries = new Uint32Array(total);
    const fill = this.offsets.slice(0, bands);
    for (let k = 0; k < edges; k++) {
      const [lo, hi] = this.range(k, this.height, bands);
      for (let b = lo; b <= hi; b++) this.entries[fill[b]!++] = k;
    }
  }

  private band(y: number, height: number, bands: number): number {
    const b = Math.floor((y - this.minY) / height);
    return b < 0 ? 0 : b >= bands ? bands - 1 : b;
  }

  /** The bands edge k spans, widened by BAND_MARGIN_DEG (band() is monotonic, so a point within it is in one of them). */
  private range(k: number, height: number, bands: number): [number, number] {
    const ay = this.xy[k * 4 + 1]!;
    const by = this.xy[k * 4 + 3]!;
    return [this.band(Math.min(ay, by) - BAND_MARGIN_DEG, height, bands), this.band(Math.max(ay, by) + BAND_MARGIN_DEG, height, bands)];
  }

  /** geo.ts geometryContains: on any edge, or inside a polygon's exterior and none of its holes (even-odd per ring). */
  contains(lat: number, lon: number): boolean {
    const x = lon;
    const y = lat;
    const b = this.band(y, this.height, this.bands);
    const xy = this.xy;
    const touched: number[] = [];
    let onEdge = false;
    for (let n = this.offsets[b]!; n < this.offsets[b + 1]!; n++) {
      const k = this.entries[n]!;
      const ax = xy[k * 4]!;
      const ay = xy[k * 4 + 1]!;
      const bx = xy[k * 4 + 2]!;
      const by = xy[k * 4 + 3]!;
      if (
        x >= Math.min(ax, bx) - BAND_MARGIN_DEG &&
        x <= Math.max(ax, bx) + BAND_MARGIN_DEG &&
        y >= Math.min(ay, by) - BAND_MARGIN_DEG &&
        y <= Math.max(ay, by) + BAND_MARGIN_DEG &&
        onSegment(x, y, ax, ay, bx, by)
      ) {
        onEdge = true;
        break;
      }
      if (ay > y !== by > y && x < ((bx - ax) * (y - ay)) / (by - ay) + ax) {
        const r = this.ringOf[k]!;
        if (this.parity[r] === 0) touched.push(r);
        this.parity[r] = this.parity[r]! ^ 1;
      }
    }
    let inside = onEdge;
    if (!inside) {
      for (const r of touched) {
        const p = this.polygonOf[r]!;
        if (r !== this.firstRing[p] || this.parity[r] !== 1) continue;
        let hole = false;
        for (let h = r + 1; h < this.firstRing[p + 1]! && !hole; h++) hole = this.parity[h] === 1;
        if (!hole) {
          inside = true;
          break;
        }
      }
    }
    for (const r of touched) this.parity[r] = 0;
    return inside;
  }
}

interface Prepared {
  id: string;
  box: BBox;
  circle: Circle | null;
  geometry: Geometry | string | null;
  index?: PolygonIndex;
}

/** One owner's zones, for many points. */
export class ZoneMatcher {
  private readonly zones: Prepared[];

  constructor(zones: MatchZone[]) {
    this.zones = zones
      .filter((z) => z.geometry || z.circle)
      .map((z) => {
        const stored = z.min_lat !== null && z.max_lat !== null && z.min_lon !== null && z.max_lon !== null;
        const box = stored
          ? { minLat: z.min_lat!, maxLat: z.max_lat!, minLon: z.min_lon!, maxLon: z.max_lon! }
          : bbox({ geometry: typeof z.geometry === 'string' ? (JSON.parse(z.geometry) as Geometry) : z.geometry, circle: z.circle });
        return { id: z.id, box, circle: z.circle, geometry: z.geometry };
      });
  }

  /** The ids of the zones that contain the point (geo.ts contains(), boundaries included); indexes a polygon on first use. */
  async inside(lat: number, lon: number, slices: Slices): Promise<string[]> {
    const out: string[] = [];
    if (!Number.isFinite(lat) || !Number.isFinite(lon)) return out;
    // Longitude 180 and -180 are the same meridian: a point on it is tested at both.
    const lons = Math.abs(lon) === 180 ? [180, -180] : [lon];
    for (const z of this.zones) {
      for (const x of lons) {
        if (!inBBox(z.box, lat, x)) continue;
        let hit: boolean;
        if (z.geometry) {
          if (!z.index) {
            if (typeof z.geometry === 'string') {
              z.geometry = JSON.parse(z.geometry) as Geometry;
              await slices.tick();
            }
            z.index = new PolygonIndex(z.geometry);
            await slices.tick(); // parsing and indexing a 10,000-vertex zone are a few ms each
          }
          hit = z.index.contains(lat, x);
        } else hit = circleContains(z.circle!, lat, x);
        if (hit) {
          out.push(z.id);
          break;
        }
      }
    }
    return out;
  }
}
