// The fleet map's geometry: Web Mercator in world units (the whole world is the square 0..1, x
// east from longitude -180, y south from latitude 85.05), the world's land from world-atlas at
// three resolutions (110m, 50m, 10m: TopoJSON served by the service at /dashboard/land-*.json,
// fetched when first needed), and tracing rings onto a canvas path with what lies off the view
// left out.
//
// Land is decoded once per resolution straight from the TopoJSON arcs into projected coordinates
// (no GeoJSON objects in between): each polygon keeps its rings as flat x,y arrays and its bounding
// box, so a frame only visits the polygons in view. A ring that crosses the antimeridian is
// unwrapped (its x runs on past 1 or below 0), so the map can wrap around; the ring around the
// South Pole (Antarctica) is closed along the bottom of the world.

export const EARTH_CIRCUMFERENCE = 40_075_016.686; // metres at the equator (Web Mercator's sphere)
export const MAX_LATITUDE = 85.051_128_78;

const RAD = Math.PI / 180;
export const mercX = (lon: number) => (lon + 180) / 360;
export function mercY(lat: number): number {
  const phi = Math.max(-MAX_LATITUDE, Math.min(MAX_LATITUDE, lat)) * RAD;
  return 0.5 - Math.log(Math.tan(Math.PI / 4 + phi / 2)) / (2 * Math.PI);
}
export const lonOf = (x: number) => (((x % 1) + 1) % 1) * 360 - 180;
export const latOf = (y: number) => (2 * Math.atan(Math.exp((0.5 - y) * 2 * Math.PI)) - Math.PI / 2) / RAD;

/**
 * Longitudes and latitudes as a flat projected x,y array, unwrapped at the antimeridian: a step of
 * more than 180° continues on the next copy of the world instead.
 */
export function project(lonLat: ArrayLike<number>): Float64Array {
  const out = new Float64Array(lonLat.length);
  let shift = 0;
  let prev = Number.NaN;
  for (let i = 0; i < lonLat.length; i += 2) {
    const lon = lonLat[i]!;
    if (lon - prev > 180) shift -= 1;
    else if (prev - lon > 180) shift += 1;
    prev = lon;
    out[i] = mercX(lon) + shift;
    out[i + 1] = mercY(lonLat[i + 1]!);
  }
  return out;
}

export interface Shape {
  /** minX, minY, maxX, maxY of the outer ring, in world units. */
  bbox: Float64Array;
  rings: Float64Array[];
  /** Per ring, the edges (i to i+1) that are not coastline: along the antimeridian, or closing a polar ring. */
  cuts: (Uint8Array | null)[];
}
export interface Land {
  level: LandLevel;
  shapes: Shape[];
  points: number;
}

export type LandLevel = '110m' | '50m' | '10m';
/** The land drawn from each zoom factor up (the coarser one stays until the finer one has loaded). */
export const LAND_LEVELS: { level: LandLevel; fromZoom: number }[] = [
  { level: '110m', fromZoom: 0 },
  { level: '50m', fromZoom: 2.5 },
  { level: '10m', fromZoom: 6 },
];

interface Topology {
  transform?: { scale: [number, number]; translate: [number, number] };
  arcs: number[][][];
  objects: { land: { type: 'GeometryCollection'; geometries: { type: string; arcs: any }[] } };
}

/** Decodes the land object of a TopoJSON topology into projected, unwrapped polygons. */
export function decodeLand(level: LandLevel, topo: Topology): Land {
  const [sx, sy] = topo.transform?.scale ?? [1, 1];
  const [tx, ty] = topo.transform?.translate ?? [0, 0];
  // Each arc once, as absolute longitude, latitude pairs (quantized arcs are delta-encoded).
  const delta = topo.transform ? 1 : 0;
  const arcs = topo.arcs.map((arc) => {
    const out = new Float64Array(arc.length * 2);
    let x = 0;
    let y = 0;
    for (let i = 0; i < arc.length; i++) {
      const p = arc[i]!;
      x = x * delta + p[0]!;
      y = y * delta + p[1]!;
      out[2 * i] = x * sx + tx;
      out[2 * i + 1] = y * sy + ty;
    }
    return out;
  });
  // A ring's arcs end to end (each arc starts where the previous one ended), as flat lon, lat.
  const ringLonLat = (indexes: number[]): Float64Array => {
    let n = 1;
    for (const index of indexes) n += arcs[index < 0 ? ~index : index]!.length / 2 - 1;
    const out = new Float64Array(2 * n);
    let o = 0;
    for (const index of indexes) {
      const arc = arcs[index < 0 ? ~index : index]!;
      const m = arc.length / 2;
      for (let k = o ? 1 : 0; k < m; k++) {
        const j = index < 0 ? m - 1 - k : k;
        out[o++] = arc[2 * j]!;
        out[o++] = arc[2 * j + 1]!;
      }
    }
    return out.subarray(0, o);
  };
  const shapes: Shape[] = [];
  let points = 0;
  for (const g of topo.objects.land.geometries) {
    const polygons: number[][][] = g.type === 'Polygon' ? [g.arcs] : g.type === 'MultiPolygon' ? g.arcs : [];
    for (const polygon of polygons) {
      const shape: Shape = { bbox: new Float64Array([Infinity, Infinity, -Infinity, -Infinity]), rings: [], cuts: [] };
      for (const indexes of polygon) {
        const lonLat = ringLonLat(indexes);
        let ring = project(lonLat);
        let cuts: Uint8Array | null = null;
        const cut = (i: number) => {
          cuts ??= new Uint8Array(ring.length / 2);
          cuts[i] = 1;
        };
        for (let i = 0; i + 3 < lonLat.length; i += 2) {
          if (Math.abs(lonLat[i]!) > 179.9999 && Math.abs(lonLat[i + 2]!) > 179.9999) cut(i / 2);
        }
        // Around a pole: the unwrapped ring ends a world away from where it began. Closed along the pole's edge.
        const n = ring.length;
        const drift = n ? ring[n - 2]! - ring[0]! : 0;
        if (Math.abs(drift) > 0.5) {
          let lat = 0;
          for (let i = 1; i < lonLat.length; i += 2) lat += lonLat[i]!;
          const south = lat < 0;
          const edge = south ? 1 : 0;
          const closed = new Float64Array(n + 4);
          closed.set(ring);
          closed.set([ring[n - 2]!, edge, ring[0]!, edge], n);
          const old = cuts as Uint8Array | null;
          cuts = new Uint8Array(closed.length / 2);
          if (old) cuts.set(old);
          cuts[n / 2 - 1] = cuts[n / 2] = cuts[n / 2 + 1] = 1;
          ring = closed;
        }
        if (!shape.rings.length) {
          const b = shape.bbox;
          for (let i = 0; i < ring.length; i += 2) {
            b[0] = Math.min(b[0]!, ring[i]!);
            b[1] = Math.min(b[1]!, ring[i + 1]!);
            b[2] = Math.max(b[2]!, ring[i]!);
            b[3] = Math.max(b[3]!, ring[i + 1]!);
          }
        }
        shape.rings.push(ring);
        shape.cuts.push(cuts);
        points += ring.length / 2;
      }
      if (shape.rings.length) shapes.push(shape);
    }
  }
  return { level, shapes, points };
}

const lands = new Map<LandLevel, Promise<Land>>();
const ready = new Map<LandLevel, Land>();
/** The land of a resolution, fetched and decoded once; a failed fetch is tried again at the next call. */
export function loadLand(level: LandLevel): Promise<Land> {
  let p = lands.get(level);
  if (!p) {
    p = fetch(`/dashboard/land-${level}.json`)
      .then((r) => {
        if (!r.ok) throw new Error(`land ${level}: ${r.status}`);
        return r.json() as Promise<Topology>;
      })
      .then((topo) => {
        const land = decodeLand(level, topo);
        ready.set(level, land);
        return land;
      });
    p.catch(() => lands.delete(level));
    lands.set(level, p);
  }
  return p;
}

/**
 * The land to draw at a zoom factor: the resolution that zoom wants when loaded, else the finest
 * loaded one below it (else any loaded one), and the resolution wanted (to load when missing).
 */
export function landFor(zoom: number): { land: Land | undefined; wanted: LandLevel } {
  let want = 0;
  LAND_LEVELS.forEach((l, i) => {
    if (zoom >= l.fromZoom) want = i;
  });
  const wanted = LAND_LEVELS[want]!.level;
  for (let i = want; i >= 0; i--) {
    const land = ready.get(LAND_LEVELS[i]!.level);
    if (land) return { land, wanted };
  }
  return { land: [...ready.values()][0], wanted };
}

/** The view in screen pixels: x_screen = x * scale + ox, y_screen = y * scale + oy; the canvas is w by h. */
export interface Frame {
  scale: number;
  ox: number;
  oy: number;
  w: number;
  h: number;
}

const MARGIN = 4; // px beyond the canvas still traced as they are
const LEFT = 1;
const RIGHT = 2;
const TOP = 4;
const BOTTOM = 8;

/**
 * Traces a flat x,y ring (or line) onto `fill` (and onto `stroke`, broken at the edges `cuts`
 * marks), shifted by `dx` world units. Off the view, a run of points all beyond one edge of it is
 * traced as its first and last point: the straight edge between them stays beyond that edge, so
 * what is filled inside the view does not change. Points closer than half a pixel to the last one
 * traced are skipped.
 */
export function trace(fill: Path2D, stroke: Path2D | null, ring: Float64Array, f: Frame, dx: number, cuts: Uint8Array | null = null) {
  const { scale } = f;
  const ox = f.ox + dx * scale;
  const x0 = -MARGIN;
  const y0 = -MARGIN;
  const x1 = f.w + MARGIN;
  const y1 = f.h + MARGIN;
  let started = false;
  let penUp = true; // the stroke's next point starts a new piece
  let lx = 0;
  let ly = 0;
  let mask = 0; // the edges every point of the current off-view run lies beyond
  let runLength = 0;
  let rx = 0;
  let ry = 0;
  let ri = 0;
  const emit = (x: number, y: number, i: number, force: boolean) => {
    if (!started) {
      fill.moveTo(x, y);
      stroke?.moveTo(x, y);
      started = true;
      penUp = false;
    } else if (force || Math.abs(x - lx) + Math.abs(y - ly) >= 0.5) {
      fill.lineTo(x, y);
      if (stroke) {
        if (penUp) stroke.moveTo(x, y);
        else stroke.lineTo(x, y);
        penUp = false;
      }
    } else {
      if (cuts?.[i]) penUp = true;
      return;
    }
    lx = x;
    ly = y;
    // The edge from this point on is no coastline: the stroke lifts its pen.
    if (cuts?.[i]) penUp = true;
  };
  const n = ring.length / 2;
  for (let i = 0; i < n; i++) {
    const x = ring[2 * i]! * scale + ox;
    const y = ring[2 * i + 1]! * scale + f.oy;
    const code = (x < x0 ? LEFT : x > x1 ? RIGHT : 0) | (y < y0 ? TOP : y > y1 ? BOTTOM : 0);
    if (code && runLength && mask & code) {
      mask &= code;
      rx = x;
      ry = y;
      ri = i;
      runLength++;
      continue;
    }
    if (runLength > 1) emit(rx, ry, ri, true);
    runLength = 0;
    if (code) {
      mask = code;
      runLength = 1;
    }
    emit(x, y, i, i === n - 1);
  }
  if (runLength > 1) emit(rx, ry, ri, true);
}
