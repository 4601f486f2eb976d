// The fleet map: a zoomable, pannable Web Mercator map on a canvas (land.ts has the projection
// and the land, cluster.ts the clustering). The mouse wheel zooms about the cursor, a drag pans,
// two fingers pinch (pointer events); + and - (keys or buttons) zoom about the centre, the arrow
// keys pan, 0 shows the world again, and "Fit fleet" fits every asset on the map. The world
// repeats east and west, so a fleet on both sides of the antimeridian sits together. From the
// whole world (zoom 1: its width across the canvas) down to a port (zoom 2^14, about a metre a
// pixel).
//
// Assets closer than CLUSTER_PX on screen are drawn as one circle with their count, clustered
// again at each frame (greedy, in screen pixels: an asset joins the nearest cluster whose first
// asset is within reach, else starts one; then clusters whose circles would overlap merge); a
// click on a cluster zooms into it, a click on an asset selects it. Zones are drawn with their
// true radius, the selected asset's track as a line.
//
// On the asset page the map shows a route instead: the trips' paths as lines and the stops as
// numbered markers (the numbers of the stops table), fitted to them whenever they change, and the
// button fits the route ("Fit route").
//
// A frame is drawn on requestAnimationFrame, only when something changed. For tests, the canvas
// says what it shows: data-zoom, data-center ("lat,lon"), data-clusters (clusters of 2 or more
// assets drawn), data-land (the land's resolution), data-animating (while a zoom moves on by
// itself) and data-draw-ms (the last frame's drawing time; with a data-measure attribute it
// includes the canvas's rasterization).
import { useEffect, useRef } from 'preact/hooks';
import { cluster, type Dot, fitView, type Point, type View } from './cluster.js';
import { EARTH_CIRCUMFERENCE, type Frame, landFor, latOf, loadLand, lonOf, mercX, mercY, project, trace } from './land.js';

export interface MapAsset {
  assetId: string;
  name: string;
  latitude: number;
  longitude: number;
}
export interface MapZone {
  id: string;
  name: string;
  geometry: { type: 'Polygon' | 'MultiPolygon'; coordinates: any } | null;
  circle: { latitude: number; longitude: number; radiusMeters: number } | null;
}
export interface TrackPoint {
  latitude: number;
  longitude: number;
}
export interface MapStop {
  latitude: number;
  longitude: number;
  /** Written in its marker (a number). */
  label: string;
}
interface Props {
  positions: MapAsset[];
  zones: MapZone[];
  track: TrackPoint[];
  selected: string | null;
  onSelect: (id: string) => void;
  /** A route (the asset page): trips' paths and stops, fitted when they change. */
  trips?: TrackPoint[][];
  stops?: MapStop[];
}

const MAX_ZOOM = 2 ** 14;
/** "Fit fleet" goes no closer than this (a few km across the canvas), e.g. for a single asset. */
const FIT_MAX_ZOOM = 2 ** 12;
const CLUSTER_PX = 20;
/** The world: its width across the canvas, centred on 13°N (most land shows, from about 70°N to 57°S). */
const WORLD: View = { cx: 0.5, cy: mercY(13), zoom: 1 };
const COLORS = { sea: '#dfeaf3', land: '#f6f3ea', coast: '#c9c2ad', zone: '#7a4fc9', track: '#d9480f', asset: '#1864ab', stop: '#862e9c' };

interface Outline {
  rings: Float64Array[];
  minX: number;
  maxX: number;
}

const clamp = (v: number, lo: number, hi: number) => Math.max(lo, Math.min(hi, v));
const outline = (rings: Float64Array[]): Outline => {
  let minX = Infinity;
  let maxX = -Infinity;
  for (const r of rings) {
    for (let i = 0; i < r.length; i += 2) {
      minX = Math.min(minX, r[i]!);
      maxX = Math.max(maxX, r[i]!);
    }
  }
  return { rings, minX, maxX };
};

/** The copies of the world (shifts in world units) in which x from minX to maxX shows in the frame. */
function copies(minX: number, maxX: number, f: Frame): number[] {
  const out: number[] = [];
  for (let k = Math.ceil(-f.ox / f.scale - maxX); k <= Math.floor((f.w - f.ox) / f.scale - minX); k++) out.push(k);
  return out;
}

/** The map itself: owns the canvas's view, its input and its frames. */
class MapView {
  view: View = { ...WORLD };
  props: Props = { positions: [], zones: [], track: [], selected: null, onSelect: () => undefined };
  private assets: Point[] = [];
  private zones: { circle?: Point & { meters: number; lat: number }; shape?: Outline }[] = [];
  private track: Outline | undefined;
  private trips: Outline[] = [];
  private stops: (Point & { label: string })[] = [];
  /** Fit the route at the next frame (once the canvas has its size). */
  private fitPending = false;
  private dots: Dot[] = [];
  private w = 0;
  private h = 0;
  private dpr = 1;
  private frame = 0;
  private anim: { from: View; to: View; dx: number; t0: number } | undefined;
  private pointers = new Map<number, Point>();
  private press: (Point & { moved: boolean }) | undefined;
  private resize = new ResizeObserver(() => this.redraw());

  constructor(private readonly c: HTMLCanvasElement) {
    c.addEventListener('wheel', this.onWheel, { passive: false });
    c.addEventListener('pointerdown', this.onDown);
    c.addEventListener('pointermove', this.onMove);
    c.addEventListener('pointerup', this.onUp);
    c.addEventListener('pointercancel', this.onUp);
    (c.parentElement ?? c).addEventListener('keydown', this.onKey); // the canvas's and the buttons' keys
    this.resize.observe(c);
    loadLand('110m').then(this.redraw, () => undefined); // (a failed fetch is tried again at the next frame)
  }

  destroy() {
    cancelAnimationFrame(this.frame);
    this.resize.disconnect();
  }

  setProps(p: Props) {
    const changed = (k: keyof Props) => p[k] !== this.props[k];
    if (changed('positions')) this.assets = p.positions.map((a) => ({ x: mercX(a.longitude), y: mercY(a.latitude) }));
    if (changed('zones')) {
      this.zones = p.zones.map((z) => {
        if (z.circle) {
          const { latitude: lat, longitude, radiusMeters: meters } = z.circle;
          return { circle: { x: mercX(longitude), y: mercY(lat), meters, lat } };
        }
        const polygons: number[][][][] = z.geometry?.type === 'Polygon' ? [z.geometry.coordinates] : (z.geometry?.coordinates ?? []);
        return { shape: outline(polygons.flatMap((rings) => rings.map((r) => project(r.flat())))) };
      });
    }
    if (changed('track'))
      this.track = p.track.length > 1 ? outline([project(p.track.flatMap((t) => [t.longitude, t.latitude]))]) : undefined;
    if (changed('trips') || changed('stops')) {
      this.trips = (p.trips ?? []).filter((t) => t.length > 1).map((t) => outline([project(t.flatMap((q) => [q.longitude, q.latitude]))]));
      this.stops = (p.stops ?? []).map((q) => ({ x: mercX(q.longitude), y: mercY(q.latitude), label: q.label }));
      this.fitPending = this.trips.length > 0 || this.stops.length > 0;
    }
    this.props = p;
    this.redraw();
  }

  // ---- the view ---------------------------------------------------------------------------------

  redraw = () => {
    this.frame ||= requestAnimationFrame(() => {
      this.frame = 0;
      this.draw();
    });
  };

  private clampView(v: View) {
    v.zoom = clamp(v.zoom, 1, MAX_ZOOM);
    v.cx = ((v.cx % 1) + 1) % 1;
    const half = this.h / (2 * this.w * v.zoom); // half the view's height, in world units
    v.cy = half >= 0.5 ? 0.5 : clamp(v.cy, half, 1 - half);
  }

  /** Zooms by `factor` keeping the world under the screen point (px, py) where it is. */
  private zoomAt(factor: number, px: number, py: number) {
    const v = this.view;
    const before = this.w * v.zoom;
    const wx = v.cx + (px - this.w / 2) / before;
    const wy = v.cy + (py - this.h / 2) / before;
    v.zoom = clamp(v.zoom * factor, 1, MAX_ZOOM);
    const after = this.w * v.zoom;
    v.cx = wx - (px - this.w / 2) / after;
    v.cy = wy - (py - this.h / 2) / after;
    this.clampView(v);
  }

  private panBy(dx: number, dy: number) {
    const scale = this.w * this.view.zoom;
    this.view.cx -= dx / scale;
    this.view.cy -= dy / scale;
    this.clampView(this.view);
  }

  /** Moves to `to` in a third of a second. */
  animateTo(to: View) {
    this.clampView(to);
    const from = { ...this.view };
    this.anim = { from, to, dx: to.cx - from.cx - Math.round(to.cx - from.cx), t0: performance.now() };
    this.redraw();
  }

  /** Zooms about the centre (from where a zoom under way is going). */
  zoomBy(factor: number) {
    const v = this.anim?.to ?? this.view;
    this.animateTo({ ...v, zoom: v.zoom * factor });
  }

  /** What "Fit" fits: the route when there is one, else the assets. */
  private fitted(): View | undefined {
    if (this.props.trips || this.props.stops) {
      const points: Point[] = [...this.stops, ...this.assets];
      for (const t of this.trips)
        for (let i = 0; i < t.rings[0]!.length; i += 2) points.push({ x: t.rings[0]![i]!, y: t.rings[0]![i + 1]! });
      if (points.length) return fitView(points, this.w, this.h, 48, FIT_MAX_ZOOM);
    }
    return fitView(this.assets, this.w, this.h, 48, FIT_MAX_ZOOM);
  }

  fit() {
    this.animateTo(this.fitted() ?? { ...WORLD });
  }

  // ---- input ------------------------------------------------------------------------------------

  private at(e: MouseEvent): Point {
    const r = this.c.getBoundingClientRect();
    return { x: e.clientX - r.left - this.c.clientLeft, y: e.clientY - r.top - this.c.clientTop };
  }

  private onWheel = (e: WheelEvent) => {
    e.preventDefault();
    this.anim = undefined;
    const pixels = e.deltaY * (e.deltaMode === 1 ? 33 : e.deltaMode === 2 ? this.h : 1);
    const p = this.at(e);
    this.zoomAt(2 ** clamp(-pixels / 100, -2, 2), p.x, p.y); // a wheel's notch (100 px) doubles or halves
    this.redraw();
  };

  private onDown = (e: PointerEvent) => {
    if (e.pointerType === 'mouse' && e.button !== 0) return;
    this.c.setPointerCapture(e.pointerId);
    const p = this.at(e);
    this.pointers.set(e.pointerId, p);
    this.anim = undefined;
    this.press = this.pointers.size === 1 ? { ...p, moved: false } : undefined; // two fingers never click
    this.c.classList.add('dragging');
  };

  private onMove = (e: PointerEvent) => {
    const p = this.at(e);
    const prev = this.pointers.get(e.pointerId);
    if (!prev) {
      this.c.classList.toggle('over', this.hit(p) !== undefined);
      return;
    }
    if (this.pointers.size === 1) {
      this.panBy(p.x - prev.x, p.y - prev.y);
      if (this.press && Math.hypot(p.x - this.press.x, p.y - this.press.y) > 4) this.press.moved = true;
    } else if (this.pointers.size === 2) {
      // A pinch: zoom by the change in the fingers' distance about their midpoint, and follow the midpoint.
      const other = [...this.pointers].find(([id]) => id !== e.pointerId)![1];
      const d0 = Math.hypot(prev.x - other.x, prev.y - other.y);
      const d1 = Math.hypot(p.x - other.x, p.y - other.y);
      const m0 = { x: (prev.x + other.x) / 2, y: (prev.y + other.y) / 2 };
      if (d0 > 0) this.zoomAt(d1 / d0, m0.x, m0.y);
      this.panBy((p.x - prev.x) / 2, (p.y - prev.y) / 2);
    }
    this.pointers.set(e.pointerId, p);
    this.redraw();
  };

  private onUp = (e: PointerEvent) => {
    if (!this.pointers.delete(e.pointerId)) return;
    if (e.type === 'pointerup' && this.press && !this.press.moved && !this.pointers.size) this.click(this.at(e));
    this.press = undefined;
    if (!this.pointers.size) this.c.classList.remove('dragging');
  };

  private onKey = (e: KeyboardEvent) => {
    const step = 100;
    const keys: Record<string, () => void> = {
      '+': () => this.zoomBy(2),
      '=': () => this.zoomBy(2),
      '-': () => this.zoomBy(0.5),
      _: () => this.zoomBy(0.5),
      '0': () => this.animateTo({ ...WORLD }),
      ArrowLeft: () => this.panBy(step, 0),
      ArrowRight: () => this.panBy(-step, 0),
      ArrowUp: () => this.panBy(0, step),
      ArrowDown: () => this.panBy(0, -step),
    };
    const act = keys[e.key];
    if (!act || e.ctrlKey || e.metaKey || e.altKey) return;
    e.preventDefault();
    act();
    this.redraw();
  };

  /** The asset or cluster drawn at a screen point, if any. */
  private hit(p: Point): Dot | undefined {
    let best: Dot | undefined;
    let bestD = Infinity;
    for (const d of this.dots) {
      const dist = Math.hypot(d.x - p.x, d.y - p.y);
      if (dist <= Math.max(10, d.radius + 4) && dist < bestD) {
        best = d;
        bestD = dist;
      }
    }
    return best;
  }

  private click(p: Point) {
    const dot = this.hit(p);
    if (!dot) return;
    const { positions, onSelect } = this.props;
    if (dot.members.length === 1 || this.view.zoom >= MAX_ZOOM) {
      onSelect(positions[dot.members[0]!]!.assetId);
      return;
    }
    // A cluster: its assets fill the middle half of the canvas, at least twice as close as now.
    const fit = fitView(
      dot.members.map((i) => this.assets[i]!),
      this.w,
      this.h,
      Math.min(this.w, this.h) / 4,
      MAX_ZOOM,
    )!;
    this.animateTo({ ...fit, zoom: Math.max(fit.zoom, this.view.zoom * 2) });
  }

  // ---- drawing ----------------------------------------------------------------------------------

  private draw() {
    const t0 = performance.now();
    const c = this.c;
    const dpr = devicePixelRatio || 1;
    const [w, h] = [c.clientWidth, c.clientHeight];
    if (!w || !h) return;
    if (w !== this.w || h !== this.h || dpr !== this.dpr) {
      [this.w, this.h, this.dpr] = [w, h, dpr];
      c.width = Math.round(w * dpr);
      c.height = Math.round(h * dpr);
    }
    if (this.fitPending) {
      this.fitPending = false;
      this.anim = undefined;
      this.view = this.fitted() ?? { ...WORLD };
    }
    if (this.anim) {
      const { from, to, dx, t0: start } = this.anim;
      const t = Math.min(1, (t0 - start) / 330);
      const e = 1 - (1 - t) ** 3;
      this.view = { cx: from.cx + dx * e, cy: from.cy + (to.cy - from.cy) * e, zoom: from.zoom * (to.zoom / from.zoom) ** e };
      if (t < 1) this.redraw();
      else this.anim = undefined;
    }
    this.clampView(this.view);
    const v = this.view;
    const scale = w * v.zoom;
    const f: Frame = { scale, ox: w / 2 - v.cx * scale, oy: h / 2 - v.cy * scale, w, h };
    const g = c.getContext('2d')!;
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.fillStyle = COLORS.sea;
    g.fillRect(0, 0, w, h);

    // Land: the polygons (and the copies of the world) in view only.
    const { land, wanted } = landFor(v.zoom);
    if (land?.level !== wanted) void loadLand(wanted).then(this.redraw, () => undefined);
    if (land) {
      const fill = new Path2D();
      const coast = new Path2D();
      const top = -f.oy / scale;
      const bottom = (h - f.oy) / scale;
      for (const s of land.shapes) {
        if (s.bbox[3]! < top || s.bbox[1]! > bottom) continue;
        for (const k of copies(s.bbox[0]!, s.bbox[2]!, f)) s.rings.forEach((r, i) => trace(fill, coast, r, f, k, s.cuts[i]));
      }
      g.fillStyle = COLORS.land;
      g.fill(fill, 'evenodd');
      g.strokeStyle = COLORS.coast;
      g.lineWidth = 1;
      g.stroke(coast);
    }

    // Zones: circles of their true radius (Web Mercator stretches a metre by 1 / cos(latitude)), polygons.
    g.strokeStyle = COLORS.zone;
    g.fillStyle = 'rgba(122,79,201,0.15)';
    for (const z of this.zones) {
      const p = new Path2D();
      if (z.circle) {
        const { x, y, meters, lat } = z.circle;
        const r = Math.max(3, (meters / (EARTH_CIRCUMFERENCE * Math.cos((lat * Math.PI) / 180))) * scale);
        for (const k of copies(x - r / scale, x + r / scale, f)) p.arc((x + k) * scale + f.ox, y * scale + f.oy, r, 0, 2 * Math.PI);
      } else if (z.shape) {
        for (const k of copies(z.shape.minX, z.shape.maxX, f)) for (const r of z.shape.rings) trace(p, null, r, f, k);
      }
      g.fill(p, 'evenodd');
      g.stroke(p);
    }

    if (this.track) {
      const p = new Path2D();
      for (const k of copies(this.track.minX, this.track.maxX, f)) trace(p, null, this.track.rings[0]!, f, k);
      g.strokeStyle = COLORS.track;
      g.lineWidth = 2;
      g.stroke(p);
    }
    this.drawRoute(g, f);

    // Assets, each on the copy of the world nearest the centre (the only one in view from zoom 1 up).
    const margin = 30;
    const screen = this.assets.map(({ x, y }) => {
      const sx = (x - Math.round(x - v.cx)) * scale + f.ox;
      const sy = y * scale + f.oy;
      return sx > -margin && sx < w + margin && sy > -margin && sy < h + margin ? { x: sx, y: sy } : undefined;
    });
    this.dots = cluster(screen, CLUSTER_PX);
    this.drawDots(g);
    this.drawScale(g);

    if (c.hasAttribute('data-measure')) g.getImageData(0, 0, 1, 1); // waits for the canvas to be painted
    c.dataset.zoom = String(+v.zoom.toPrecision(6));
    c.dataset.center = `${latOf(v.cy).toFixed(5)},${lonOf(v.cx).toFixed(5)}`;
    c.dataset.clusters = String(this.dots.filter((d) => d.members.length > 1).length);
    c.dataset.land = land?.level ?? '';
    c.dataset.trips = String(this.trips.length);
    c.dataset.stops = String(this.stops.length);
    c.dataset.drawMs = (performance.now() - t0).toFixed(2);
    c.toggleAttribute('data-animating', this.anim !== undefined);
  }

  /** The route: each trip a line (on a white casing), each stop a numbered marker on the copy of the world nearest the centre. */
  private drawRoute(g: CanvasRenderingContext2D, f: Frame) {
    if (this.trips.length) {
      const p = new Path2D();
      for (const t of this.trips) for (const k of copies(t.minX, t.maxX, f)) trace(p, null, t.rings[0]!, f, k);
      g.lineJoin = 'round';
      g.lineCap = 'round';
      g.strokeStyle = 'rgba(255,255,255,0.9)';
      g.lineWidth = 5;
      g.stroke(p);
      g.strokeStyle = COLORS.track;
      g.lineWidth = 3;
      g.stroke(p);
      g.lineCap = 'butt';
    }
    g.font = '600 11px system-ui, sans-serif';
    g.textAlign = 'center';
    g.textBaseline = 'middle';
    for (const s of this.stops) {
      const sx = (s.x - Math.round(s.x - this.view.cx)) * f.scale + f.ox;
      const sy = s.y * f.scale + f.oy;
      if (sx < -20 || sx > f.w + 20 || sy < -20 || sy > f.h + 20) continue;
      g.beginPath();
      g.arc(sx, sy, 9, 0, 2 * Math.PI);
      g.fillStyle = COLORS.stop;
      g.fill();
      g.strokeStyle = '#fff';
      g.lineWidth = 2;
      g.stroke();
      g.fillStyle = '#fff';
      g.fillText(s.label, sx, sy + 0.5);
    }
  }

  private drawDots(g: CanvasRenderingContext2D) {
    const { positions, selected } = this.props;
    const singles = this.dots.filter((d) => d.members.length === 1);
    g.textBaseline = 'middle';
    for (const d of this.dots) {
      const chosen = d.members.some((i) => positions[i]!.assetId === selected);
      g.beginPath();
      if (d.members.length === 1) {
        g.arc(d.x, d.y, chosen ? 7 : 5, 0, 2 * Math.PI);
        g.fillStyle = chosen ? COLORS.track : COLORS.asset;
        g.fill();
        g.strokeStyle = '#fff';
        g.lineWidth = 1.5;
        g.stroke();
        continue;
      }
      g.arc(d.x, d.y, d.radius, 0, 2 * Math.PI);
      g.fillStyle = 'rgba(24,100,171,0.88)';
      g.fill();
      g.strokeStyle = chosen ? COLORS.track : '#fff';
      g.lineWidth = chosen ? 3 : 2;
      g.stroke();
      g.fillStyle = '#fff';
      g.font = '600 12px system-ui, sans-serif';
      g.textAlign = 'center';
      g.fillText(String(d.members.length), d.x, d.y + 0.5);
    }
    // Names, while few assets stand alone.
    if (singles.length > 40) return;
    g.font = '12px system-ui, sans-serif';
    g.textAlign = 'left';
    g.lineJoin = 'round';
    for (const d of singles) {
      const name = positions[d.members[0]!]!.name;
      g.strokeStyle = 'rgba(255,255,255,0.85)';
      g.lineWidth = 3;
      g.strokeText(name, d.x + 9, d.y);
      g.fillStyle = '#1d2730';
      g.fillText(name, d.x + 9, d.y);
    }
  }

  /** A scale bar at the bottom left: a round length near 100 pixels at the centre's latitude. */
  private drawScale(g: CanvasRenderingContext2D) {
    const metresPerPx = (EARTH_CIRCUMFERENCE * Math.cos((latOf(this.view.cy) * Math.PI) / 180)) / (this.w * this.view.zoom);
    const raw = metresPerPx * 100;
    const pow = 10 ** Math.floor(Math.log10(raw));
    const metres = [5, 2, 1].map((m) => m * pow).find((m) => m <= raw)!;
    const len = metres / metresPerPx;
    const [x, y] = [12, this.h - 12];
    g.strokeStyle = '#1d2730';
    g.lineWidth = 1.5;
    g.beginPath();
    g.moveTo(x, y - 5);
    g.lineTo(x, y);
    g.lineTo(x + len, y);
    g.lineTo(x + len, y - 5);
    g.stroke();
    g.fillStyle = '#1d2730';
    g.font = '11px system-ui, sans-serif';
    g.textAlign = 'left';
    g.textBaseline = 'bottom';
    g.fillText(metres >= 1000 ? `${metres / 1000} km` : `${metres} m`, x + 4, y - 3);
  }
}

export function FleetMap(props: Props) {
  const canvas = useRef<HTMLCanvasElement>(null);
  const map = useRef<MapView>();
  useEffect(() => {
    const m = new MapView(canvas.current!);
    map.current = m;
    return () => m.destroy();
  }, []);
  useEffect(() => map.current?.setProps(props));
  return (
    <div class="map-frame">
      <canvas
        ref={canvas}
        class="map"
        tabIndex={0}
        data-assets={props.positions.length}
        aria-label="Fleet map: drag to pan, wheel or pinch to zoom, + and - keys to zoom"
      />
      <div class="map-controls">
        <button type="button" aria-label="Zoom in" title="Zoom in" onClick={() => map.current?.zoomBy(2)}>
          +
        </button>
        <button type="button" aria-label="Zoom out" title="Zoom out" onClick={() => map.current?.zoomBy(0.5)}>
          −
        </button>
        <button type="button" onClick={() => map.current?.fit()}>
          {props.trips || props.stops ? 'Fit route' : 'Fit fleet'}
        </button>
      </div>
    </div>
  );
}
