// The fleet map, drawn by Leaflet (bundled from npm with its stylesheet; no CDN, no WebGL). The
// base map is the service's own unless an operator configured street tiles (MAP_TILE_URL, learnt
// from /dashboard/config.json): the world's land from world-atlas (land.ts: 110m, 50m and 10m,
// fetched from the service as the zoom needs them) drawn on canvas tiles over the sea's colour, so
// nothing is asked of another machine; with MAP_TILE_URL, the operator's raster tiles and their
// attribution (MAP_ATTRIBUTION).
//
// Over the base map: zones as their circles and polygons (and, while one is smaller than a few
// pixels, a ring of a minimum size on it, so a zone is never a speck), the selected asset's track,
// the assets, clustered again after each move (cluster.ts: greedy, in screen pixels; a cluster's
// circle grows with its count and never overlaps another), and their names, placed greedily (the
// selected asset's first, then in the fleet's order) only where a name overlaps no other name, no
// cluster and no asset; a name left out shows when the pointer is on its asset. A click on an asset
// selects it, a click on a cluster zooms into it. The world repeats east and west; the assets, the
// track and the zones are drawn on the copy of the world nearest the map's centre.
//
// On the asset page the map shows a route instead: the trips' paths as lines and the stops as
// numbered markers (the numbers of the stops table), fitted to them whenever they change, and the
// button fits the route ("Fit route").
//
// For tests, the map's element says what it shows: data-zoom (Leaflet's zoom level), data-center
// ("lat,lon"), data-clusters (clusters of 2 or more assets drawn), data-labels (names shown),
// data-land (the land's resolution drawn, empty with street tiles), data-tiles (street tiles
// loaded), data-trips, data-stops, and data-animating while the map moves.
import * as L from 'leaflet';
import { useEffect, useRef } from 'preact/hooks';
import { cluster, type Dot, type Point } from './cluster.js';
import { type Frame, type Land, landFor, loadLand, trace } from './land.js';

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

/** The street tiles an operator configured (GET /dashboard/config.json), or null: the built-in map. */
interface TileConfig {
  url: string;
  attribution: string;
  subdomains: string;
}
let tileConfig: Promise<TileConfig | null> | undefined;
const mapConfig = (): Promise<TileConfig | null> => {
  tileConfig ??= fetch('/dashboard/config.json')
    .then((r) => r.json() as Promise<{ map?: { tiles: TileConfig | null } }>)
    .then((c) => c.map?.tiles ?? null)
    .catch(() => {
      tileConfig = undefined;
      return null;
    });
  return tileConfig;
};

const MAX_ZOOM = 18;
/** "Fit fleet" goes no closer than this (a few km across the map), e.g. for a single asset. */
const FIT_MAX_ZOOM = 15;
const CLUSTER_PX = 20;
const COLORS = { sea: '#dfeaf3', land: '#f6f3ea', coast: '#c9c2ad', zone: '#7a4fc9', track: '#d9480f', asset: '#1864ab', stop: '#862e9c' };
/** A zone drawn smaller than this (pixels across) gets a ring of MIN_ZONE_RADIUS on it too. */
const MIN_ZONE_PX = 10;
const MIN_ZONE_RADIUS = 6;
/** Names: their font (as app.css's .map-label), height and padding, to measure them before placing. */
const LABEL_FONT = '12px system-ui, sans-serif';
const LABEL_H = 16;
const LABEL_PAD = 3;
/** Past this many single assets in view, only the selected one's name is placed. */
const MAX_LABELS = 400;

const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
/** The longitude moved by whole turns to lie within 180° of `ref`. */
const near = (lon: number, ref: number) => lon - 360 * Math.round((lon - ref) / 360);
/** A line's longitudes unwrapped (no step over 180°), then moved as one to lie near `ref`. */
function unwrapLine(points: TrackPoint[], ref: number): L.LatLngTuple[] {
  const out: L.LatLngTuple[] = [];
  let prev = Number.NaN;
  for (const p of points) {
    const lon = Number.isNaN(prev) ? p.longitude : near(p.longitude, prev);
    out.push([p.latitude, lon]);
    prev = lon;
  }
  if (!out.length) return out;
  const shift = near(out[0]![1], ref) - out[0]![1];
  return shift ? out.map(([a, o]) => [a, o + shift]) : out;
}

/** The land's resolution for a zoom level (land.ts's levels are in widths of a ~800 px canvas). */
const landAt = (zoom: number) => landFor((256 * 2 ** zoom) / 800);

/** The built-in base map: the land drawn on 256 px canvas tiles, redrawn when a finer land arrives. */
const LandLayer = L.GridLayer.extend({
  createTile(this: L.GridLayer, coords: L.Coords) {
    const tile = document.createElement('canvas');
    const size = this.getTileSize();
    const dpr = Math.min(2, devicePixelRatio || 1);
    tile.width = size.x * dpr;
    tile.height = size.y * dpr;
    const { land, wanted } = landAt(coords.z);
    if (land?.level !== wanted)
      void loadLand(wanted).then(
        () => this.redraw(),
        () => undefined,
      );
    if (land) drawLand(tile.getContext('2d')!, land, coords, size.x, dpr);
    return tile;
  },
});

function drawLand(g: CanvasRenderingContext2D, land: Land, c: L.Coords, size: number, dpr: number) {
  const n = 2 ** c.z;
  const f: Frame = { scale: size * n, ox: -c.x * size, oy: -c.y * size, w: size, h: size };
  const [x0, x1, y0, y1] = [c.x / n, (c.x + 1) / n, c.y / n, (c.y + 1) / n];
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  const fill = new Path2D();
  const coast = new Path2D();
  for (const s of land.shapes) {
    if (s.bbox[3]! < y0 || s.bbox[1]! > y1) continue;
    // Rings run on past the antimeridian (x below 0 or above 1): the copies that reach this tile.
    for (const k of [-1, 0, 1]) {
      if (s.bbox[2]! + k < x0 || s.bbox[0]! + k > x1) continue;
      s.rings.forEach((r, i) => trace(fill, coast, r, f, k, s.cuts[i]));
    }
  }
  g.fillStyle = COLORS.land;
  g.fill(fill, 'evenodd');
  g.strokeStyle = COLORS.coast;
  g.lineWidth = 1;
  g.stroke(coast);
}

let measurer: CanvasRenderingContext2D | null | undefined;
const labelWidth = (text: string) => {
  measurer ??= document.createElement('canvas').getContext('2d');
  if (!measurer) return text.length * 7 + 2 * LABEL_PAD;
  measurer.font = LABEL_FONT;
  return Math.ceil(measurer.measureText(text).width) + 2 * LABEL_PAD + 2;
};

interface Box {
  x0: number;
  y0: number;
  x1: number;
  y1: number;
}
const overlaps = (a: Box, b: Box) => a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1;

/**
 * Where each single asset's name goes (its offset from the asset), or nowhere: greedy, in the
 * order given, each name at the first of right, left, above and below its asset that overlaps no
 * name placed before, no cluster and no other asset, and lies inside the map.
 */
export function placeLabels(
  singles: { x: number; y: number; width: number }[],
  obstacles: (Box & { owner?: number })[],
  order: number[],
  w: number,
  h: number,
): (Point | null)[] {
  const placed: Box[] = [];
  const out: (Point | null)[] = singles.map(() => null);
  for (const i of order) {
    const s = singles[i]!;
    const half = LABEL_H / 2;
    const candidates: Point[] = [
      { x: 9, y: -half },
      { x: -9 - s.width, y: -half },
      { x: -s.width / 2, y: -8 - LABEL_H },
      { x: -s.width / 2, y: 8 },
    ];
    for (const c of candidates) {
      const b = { x0: s.x + c.x, y0: s.y + c.y, x1: s.x + c.x + s.width, y1: s.y + c.y + LABEL_H };
      if (b.x0 < 0 || b.y0 < 0 || b.x1 > w || b.y1 > h) continue;
      if (placed.some((p) => overlaps(p, b))) continue;
      if (obstacles.some((o) => o.owner !== i && overlaps(o, b))) continue;
      placed.push(b);
      out[i] = c;
      break;
    }
  }
  return out;
}

/** The map itself: a Leaflet map and the layers drawn from the props. */
class MapView {
  props: Props = { positions: [], zones: [], track: [], selected: null, onSelect: () => undefined };
  readonly map: L.Map;
  private base: L.GridLayer | L.TileLayer | undefined;
  private zoneLayer = L.layerGroup();
  private routeLayer = L.layerGroup();
  private dotLayer = L.layerGroup();
  private dots: Dot[] = [];
  private drawnShift = Number.NaN;
  private fitPending = false;
  private tilesLoaded = 0;
  private resize: ResizeObserver;
  private destroyed = false;

  constructor(private readonly el: HTMLDivElement) {
    this.map = L.map(el, {
      center: [25, 10],
      zoom: Math.max(1, Math.round(Math.log2(Math.max(el.clientWidth, 256) / 256))),
      minZoom: 1,
      maxZoom: MAX_ZOOM,
      worldCopyJump: true,
      zoomControl: false,
      attributionControl: false,
      maxBounds: [
        [-88, -1e5],
        [88, 1e5],
      ],
      maxBoundsViscosity: 1,
    });
    L.control.scale({ imperial: false, position: 'bottomleft' }).addTo(this.map);
    this.zoneLayer.addTo(this.map);
    this.routeLayer.addTo(this.map);
    this.dotLayer.addTo(this.map);
    this.map.on('movestart zoomstart', () => el.setAttribute('data-animating', ''));
    this.map.on('zoomend', this.zoomed);
    const drop = () => {
      this.zoomTarget = undefined;
    };
    this.map.on('dragstart', drop);
    el.addEventListener('wheel', drop, { passive: true });
    this.map.on('moveend', () => {
      el.removeAttribute('data-animating');
      this.draw();
    });
    el.addEventListener('keydown', this.onKey);
    this.resize = new ResizeObserver(() => {
      this.map.invalidateSize();
      if (this.fitPending) this.fit(false);
    });
    this.resize.observe(el);
    void mapConfig().then((tiles) => {
      if (!this.destroyed) this.setBase(tiles);
    });
  }

  destroy() {
    this.destroyed = true;
    this.resize.disconnect();
    this.map.remove();
  }

  private setBase(tiles: TileConfig | null) {
    if (tiles) {
      const layer = L.tileLayer(tiles.url, { subdomains: tiles.subdomains, maxZoom: MAX_ZOOM, attribution: esc(tiles.attribution) });
      layer.on('tileload', () => {
        this.tilesLoaded++;
        this.el.dataset.tiles = String(this.tilesLoaded);
      });
      this.base = layer;
      L.control.attribution({ prefix: false }).addTo(this.map);
    } else {
      this.base = new (LandLayer as unknown as new (o: L.GridLayerOptions) => L.GridLayer)({ tileSize: 256, maxZoom: MAX_ZOOM });
      this.base.on('tileload', () => {
        this.el.dataset.land = landAt(this.map.getZoom()).land?.level ?? '';
      });
    }
    this.base.addTo(this.map);
    this.base.bringToBack();
  }

  setProps(p: Props) {
    const changed = (k: keyof Props) => p[k] !== this.props[k];
    const route = changed('trips') || changed('stops');
    const redraw = route || changed('zones') || changed('track') || changed('positions') || changed('selected');
    this.props = p;
    if (route) this.fitPending = (p.trips?.length ?? 0) > 0 || (p.stops?.length ?? 0) > 0;
    if (redraw) {
      this.drawnShift = Number.NaN; // the zones and lines again
      this.draw();
    }
    if (this.fitPending) this.fit(false);
    this.el.dataset.trips = String((p.trips ?? []).filter((t) => t.length > 1).length);
    this.el.dataset.stops = String((p.stops ?? []).length);
  }

  /** The centre's longitude, whole turns from the world's middle copy (what the layers are drawn near). */
  private ref() {
    return Math.round(this.map.getCenter().lng / 360) * 360;
  }

  // ---- the view ---------------------------------------------------------------------------------

  /** Zooms about the centre, from where a zoom under way is going (clicks in a row add up). */
  zoomBy(delta: number) {
    const m = this.map;
    this.zoomTarget = Math.max(m.getMinZoom(), Math.min(MAX_ZOOM, (this.zoomTarget ?? m.getZoom()) + delta));
    m.setZoom(this.zoomTarget);
  }
  private zoomTarget: number | undefined;
  /** After a zoom: on to the target when clicks came during it (Leaflet drops a zoom asked for mid-zoom). */
  private zoomed = () => {
    const target = this.zoomTarget;
    if (target === undefined || target === this.map.getZoom()) this.zoomTarget = undefined;
    else this.map.setZoom(target);
  };

  /** The bounds of points, on the shortest stretch of longitudes that holds them all. */
  private boundsOf(points: TrackPoint[]): L.LatLngBounds | undefined {
    if (!points.length) return undefined;
    const lons = points.map((p) => ((((p.longitude + 180) % 360) + 360) % 360) - 180).sort((a, b) => a - b);
    let gap = 360 - lons.at(-1)! + lons[0]!;
    let start = lons[0]!;
    for (let i = 1; i < lons.length; i++) {
      if (lons[i]! - lons[i - 1]! > gap) {
        gap = lons[i]! - lons[i - 1]!;
        start = lons[i]!;
      }
    }
    const lats = points.map((p) => p.latitude);
    const west = near(start, this.map.getCenter().lng);
    return L.latLngBounds([Math.min(...lats), west], [Math.max(...lats), west + 360 - gap]);
  }

  /** "Fit": the route when there is one, else the assets; the world when there is nothing. */
  fit(animate = true) {
    if (!this.el.clientWidth || !this.el.clientHeight) return;
    const { trips, stops, positions } = this.props;
    const route = [...(trips ?? []).flat(), ...(stops ?? [])];
    const b = this.boundsOf(route.length ? [...route, ...positions] : positions);
    this.fitPending = false;
    this.zoomTarget = undefined;
    if (!b) {
      this.map.setView([25, 10], this.map.getMinZoom(), { animate });
      return;
    }
    this.map.fitBounds(b, { padding: [48, 48], maxZoom: FIT_MAX_ZOOM, animate });
  }

  private onKey = (e: KeyboardEvent) => {
    if (e.key !== '0' || e.ctrlKey || e.metaKey || e.altKey) return;
    e.preventDefault();
    this.map.setView([25, 10], Math.max(1, Math.round(Math.log2(Math.max(this.el.clientWidth, 256) / 256))));
  };

  // ---- drawing ----------------------------------------------------------------------------------

  /** Zones and lines (again when the centre moved to another copy of the world), then the assets. */
  private draw() {
    if (!this.el.clientWidth) return;
    const ref = this.ref();
    if (ref !== this.drawnShift) {
      this.drawnShift = ref;
      this.drawZones(ref);
      this.drawLines(ref);
    }
    this.sizeZones();
    this.drawDots();
    const c = this.map.getCenter();
    this.el.dataset.zoom = String(this.map.getZoom());
    this.el.dataset.center = `${c.lat.toFixed(5)},${(((((c.lng + 180) % 360) + 360) % 360) - 180).toFixed(5)}`;
    if (this.base && !(this.base instanceof L.TileLayer)) this.el.dataset.land = landAt(this.map.getZoom()).land?.level ?? '';
  }

  private zoneShapes: { layer: L.Path; ring: L.CircleMarker }[] = [];

  private drawZones(ref: number) {
    this.zoneLayer.clearLayers();
    this.zoneShapes = [];
    const style = { color: COLORS.zone, weight: 1.5, fillColor: COLORS.zone, fillOpacity: 0.15, className: 'zone' };
    for (const z of this.props.zones) {
      let layer: L.Path;
      if (z.circle) {
        const { latitude, longitude, radiusMeters } = z.circle;
        layer = L.circle([latitude, near(longitude, ref)], { ...style, radius: radiusMeters });
      } else if (z.geometry) {
        const polygons: number[][][][] = z.geometry.type === 'Polygon' ? [z.geometry.coordinates] : z.geometry.coordinates;
        const first = polygons[0]?.[0]?.[0];
        if (!first) continue;
        const shift = near(first[0]!, ref) - first[0]!;
        layer = L.polygon(
          polygons.map((rings) =>
            rings.map((r) =>
              unwrapLine(
                r.map(([lon, lat]) => ({ latitude: lat!, longitude: lon! + shift })),
                ref,
              ),
            ),
          ),
          style,
        );
      } else continue;
      layer.bindTooltip(z.name);
      layer.addTo(this.zoneLayer);
      const ring = L.circleMarker([0, 0], {
        radius: MIN_ZONE_RADIUS,
        color: COLORS.zone,
        weight: 2,
        fillColor: COLORS.zone,
        fillOpacity: 0.25,
        className: 'zone zone-min',
        interactive: true,
      }).bindTooltip(z.name);
      this.zoneShapes.push({ layer, ring });
    }
  }

  /** A zone smaller than MIN_ZONE_PX at this zoom also gets its ring of a minimum size. */
  private sizeZones() {
    for (const { layer, ring } of this.zoneShapes) {
      const b = (layer as L.Polygon).getBounds();
      const sw = this.map.latLngToLayerPoint(b.getSouthWest());
      const ne = this.map.latLngToLayerPoint(b.getNorthEast());
      const small = Math.max(Math.abs(ne.x - sw.x), Math.abs(ne.y - sw.y)) < MIN_ZONE_PX;
      if (small && !this.zoneLayer.hasLayer(ring)) ring.setLatLng(b.getCenter()).addTo(this.zoneLayer);
      if (!small && this.zoneLayer.hasLayer(ring)) this.zoneLayer.removeLayer(ring);
    }
  }

  private drawLines(ref: number) {
    this.routeLayer.clearLayers();
    const { track, trips, stops } = this.props;
    if (track.length > 1)
      L.polyline(unwrapLine(track, ref), { color: COLORS.track, weight: 2.5, className: 'track', interactive: false }).addTo(
        this.routeLayer,
      );
    for (const t of (trips ?? []).filter((t) => t.length > 1)) {
      const line = unwrapLine(t, ref);
      L.polyline(line, { color: '#fff', weight: 5, opacity: 0.9, interactive: false }).addTo(this.routeLayer);
      L.polyline(line, { color: COLORS.track, weight: 3, className: 'trip', interactive: false }).addTo(this.routeLayer);
    }
    for (const s of stops ?? []) {
      const label = document.createElement('span');
      label.textContent = s.label;
      L.marker([s.latitude, near(s.longitude, ref)], {
        icon: L.divIcon({ className: 'map-stop', html: label, iconSize: [18, 18] }),
        keyboard: false,
        interactive: false,
      }).addTo(this.routeLayer);
    }
  }

  /** The assets in view, clustered; the clusters; the names that fit. */
  private drawDots() {
    const m = this.map;
    const size = m.getSize();
    const { positions, selected, onSelect } = this.props;
    const lng = m.getCenter().lng;
    const margin = 30;
    const where = positions.map((a) => L.latLng(a.latitude, near(a.longitude, lng)));
    const screen = where.map((ll) => {
      const p = m.latLngToContainerPoint(ll);
      return p.x > -margin && p.x < size.x + margin && p.y > -margin && p.y < size.y + margin ? { x: p.x, y: p.y } : undefined;
    });
    this.dots = cluster(screen, CLUSTER_PX);
    this.dotLayer.clearLayers();
    const singles: { x: number; y: number; width: number; dot: Dot }[] = [];
    // The scale bar (bottom left) and the attribution (bottom right) keep their corners.
    const obstacles: (Box & { owner?: number })[] = [
      { x0: 0, y0: size.y - 32, x1: 130, y1: size.y },
      { x0: size.x - 320, y0: size.y - 20, x1: size.x, y1: size.y },
    ];
    let clusters = 0;
    for (const d of this.dots) {
      const chosen = d.members.some((i) => positions[i]!.assetId === selected);
      const at = m.containerPointToLatLng([d.x, d.y]);
      if (d.members.length === 1) {
        const i = d.members[0]!;
        const a = positions[i]!;
        const r = chosen ? 7 : 5;
        obstacles.push({ x0: d.x - r - 1, y0: d.y - r - 1, x1: d.x + r + 1, y1: d.y + r + 1, owner: singles.length });
        singles.push({ x: d.x, y: d.y, width: labelWidth(a.name), dot: d });
        L.circleMarker(where[i]!, {
          radius: r,
          color: '#fff',
          weight: 1.5,
          fillColor: chosen ? COLORS.track : COLORS.asset,
          fillOpacity: 1,
          className: chosen ? 'map-asset chosen' : 'map-asset',
        })
          .bindTooltip(a.name, { direction: 'top', offset: [0, -6] })
          .on('click', () => onSelect(a.assetId))
          .addTo(this.dotLayer);
        continue;
      }
      clusters++;
      obstacles.push({ x0: d.x - d.radius, y0: d.y - d.radius, x1: d.x + d.radius, y1: d.y + d.radius });
      const count = document.createElement('span');
      count.textContent = String(d.members.length);
      const names = d.members.slice(0, 8).map((i) => positions[i]!.name);
      L.marker(at, {
        icon: L.divIcon({ className: chosen ? 'map-cluster chosen' : 'map-cluster', html: count, iconSize: [2 * d.radius, 2 * d.radius] }),
        title: `${d.members.length} assets: ${names.join(', ')}${d.members.length > names.length ? ', …' : ''}`,
        keyboard: false,
        riseOnHover: true,
      })
        .on('click', () => this.zoomInto(d))
        .addTo(this.dotLayer);
    }
    // Names: the selected asset's first, then in the fleet's order.
    const order = singles
      .map((_, i) => i)
      .filter((i) => singles.length <= MAX_LABELS || positions[singles[i]!.dot.members[0]!]!.assetId === selected)
      .sort((a, b) => {
        const sa = positions[singles[a]!.dot.members[0]!]!.assetId === selected ? 0 : 1;
        const sb = positions[singles[b]!.dot.members[0]!]!.assetId === selected ? 0 : 1;
        return sa - sb || singles[a]!.dot.members[0]! - singles[b]!.dot.members[0]!;
      });
    const spots = placeLabels(singles, obstacles, order, size.x, size.y);
    let labels = 0;
    spots.forEach((spot, i) => {
      if (!spot) return;
      labels++;
      const s = singles[i]!;
      const a = positions[s.dot.members[0]!]!;
      const text = document.createElement('span');
      text.textContent = a.name;
      L.marker(where[s.dot.members[0]!]!, {
        icon: L.divIcon({
          className: a.assetId === selected ? 'map-label chosen' : 'map-label',
          html: text,
          iconSize: [s.width, LABEL_H],
          iconAnchor: [-spot.x, -spot.y],
        }),
        keyboard: false,
        interactive: false,
        pane: 'tooltipPane',
      }).addTo(this.dotLayer);
    });
    this.el.dataset.clusters = String(clusters);
    this.el.dataset.labels = String(labels);
  }

  /** A cluster's assets fill the middle half of the map, at least one zoom level closer than now. */
  private zoomInto(d: Dot) {
    const m = this.map;
    const { positions, onSelect } = this.props;
    if (m.getZoom() >= MAX_ZOOM) {
      onSelect(positions[d.members[0]!]!.assetId);
      return;
    }
    this.zoomTarget = undefined;
    const b = this.boundsOf(d.members.map((i) => positions[i]!))!;
    const size = m.getSize();
    const zoom = Math.min(MAX_ZOOM, Math.max(m.getZoom() + 1, m.getBoundsZoom(b, false, L.point(size.x / 2, size.y / 2))));
    m.setView(b.getCenter(), zoom);
  }
}

export function FleetMap(props: Props) {
  const el = useRef<HTMLDivElement>(null);
  const map = useRef<MapView>();
  useEffect(() => {
    const m = new MapView(el.current!);
    map.current = m;
    return () => m.destroy();
  }, []);
  useEffect(() => map.current?.setProps(props));
  return (
    <div class="map-frame">
      <div
        ref={el}
        class="map"
        role="application"
        data-assets={props.positions.length}
        aria-label="Fleet map: drag to pan, wheel or pinch to zoom, + and - keys to zoom"
      />
      <div class="map-controls">
        <button type="button" aria-label="Zoom in" title="Zoom in" onClick={() => map.current?.zoomBy(1)}>
          +
        </button>
        <button type="button" aria-label="Zoom out" title="Zoom out" onClick={() => map.current?.zoomBy(-1)}>
          −
        </button>
        <button type="button" onClick={() => map.current?.fit()}>
          {props.trips || props.stops ? 'Fit route' : 'Fit fleet'}
        </button>
      </div>
    </div>
  );
}
