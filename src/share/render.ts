// The share page's HTML (API guide 8, "Share links"), written on the server with no script at all:
// the assets' latest positions on a small map (Web Mercator, fitted to what it draws, with a
// graticule) and as coordinates, the chosen asset's track on it, and its temperatures as a line
// chart, both inline SVG drawn with presentation attributes (the page's Content-Security-Policy
// allows no inline style or script). Every text from the database is escaped.
import { type MapTiles, tileUrl } from '../dashboard/tiles.js';
import { readable, type Reading, type SharedAsset, type TrackPoint, type View } from './read.js';

export const esc = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** The page's stylesheet, served at /share/share.css (style-src 'self'). */
export const SHARE_CSS = `:root{color-scheme:light;font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2933;background:#f5f7fa}
body{margin:0}
main{max-width:780px;margin:0 auto;padding:16px}
h1{font-size:1.4rem;margin:8px 0 4px}
h2{font-size:1.15rem;margin:20px 0 6px}
.muted{color:#616e7c;font-size:.9rem;margin:4px 0}
.card{background:#fff;border:1px solid #d9e2ec;border-radius:8px;padding:12px 14px;margin:12px 0}
.error{color:#b42318;font-weight:600}
table{border-collapse:collapse;width:100%;font-size:.92rem}
th,td{text-align:left;padding:6px 8px;border-bottom:1px solid #e4e7eb;vertical-align:top}
th{color:#52606d;font-weight:600}
tr.chosen td{background:#eef4ff}
svg{display:block;width:100%;height:auto;max-width:100%}
ul.legend{list-style:none;padding:0;margin:6px 0 0;display:flex;flex-wrap:wrap;gap:4px 16px;font-size:.9rem}
ul.legend li{display:block}
ul.legend svg{display:inline-block;width:12px;height:12px;vertical-align:-1px;margin-right:6px}
.card h2{margin-top:0}
.coords{font-variant-numeric:tabular-nums}
a{color:#1d4ed8}
footer{margin:24px 0 8px;color:#7b8794;font-size:.8rem}
@media (max-width:480px){main{padding:10px}th,td{padding:5px 4px}}
`;

/** A whole page around `body`. */
export function pageHtml(title: string, body: string): string {
  return (
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">` +
    `<meta name="robots" content="noindex, nofollow"><title>${esc(title)} · Shared</title>` +
    `<link rel="icon" href="data:,"><link rel="stylesheet" href="/share/share.css"></head>` +
    `<body><main>${body}<footer>A read-only view shared with you by the asset tracking service.</footer></main></body></html>`
  );
}

export const refusedHtml = (status: number, why: string) =>
  pageHtml(
    status === 410 ? 'Link no longer valid' : status === 429 ? 'Too many views' : 'Link not valid',
    `<h1>${status === 410 ? 'This link no longer works' : status === 429 ? 'Please wait a moment' : 'This link does not work'}</h1>` +
      `<p class="error" role="alert" data-status="${status}">${esc(why)}</p>`,
  );

const fmt = (n: number, digits: number) => (Math.round(n * 10 ** digits) / 10 ** digits).toFixed(digits);
const coords = (lat: number, lon: number) => `${fmt(lat, 5)}, ${fmt(lon, 5)}`;
const osm = (lat: number, lon: number) =>
  `https://www.openstreetmap.org/?mlat=${fmt(lat, 5)}&amp;mlon=${fmt(lon, 5)}#map=13/${fmt(lat, 5)}/${fmt(lon, 5)}`;
const when = (iso: string) => readable(new Date(iso));

// ---- the map ----

const MAX_LAT = 85.051_128_78;
const mercX = (lon: number) => (lon + 180) / 360;
const mercY = (lat: number) => {
  const phi = (Math.max(-MAX_LAT, Math.min(MAX_LAT, lat)) * Math.PI) / 180;
  return 0.5 - Math.log(Math.tan(Math.PI / 4 + phi / 2)) / (2 * Math.PI);
};
const latOf = (y: number) => ((2 * Math.atan(Math.exp((0.5 - y) * 2 * Math.PI)) - Math.PI / 2) * 180) / Math.PI;
const STEPS = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, 45, 90];
/** A round step giving at most `most` lines over `span`. */
const stepFor = (span: number, most: number) => STEPS.find((s) => span / s <= most) ?? 90;

interface Marker {
  latitude: number;
  longitude: number;
  label: string;
}

/**
 * An SVG map of a track (oldest first) and markers, fitted to them. Longitudes are unwrapped from
 * the first point on, so a track across the antimeridian stays one line. With street tiles
 * (MAP_TILE_URL), the tiles under it as SVG images (the zoom level whose tiles come closest to
 * 256 of the picture's units) and their attribution, instead of the graticule.
 */
export function mapSvg(track: TrackPoint[], markers: Marker[], tiles: MapTiles | null = null): string {
  const W = 720;
  const H = 360;
  const PAD = 28;
  const all = [...track, ...markers];
  if (!all.length) return '';
  let shift = 0;
  let prev = Number.NaN;
  const unwrap = (lon: number) => {
    if (lon - prev > 180) shift -= 1;
    else if (prev - lon > 180) shift += 1;
    prev = lon;
    return mercX(lon) + shift;
  };
  const t = track.map((p) => [unwrap(p.longitude), mercY(p.latitude)] as const);
  const ref = t.length ? t[0]![0] : mercX(all[0]!.longitude);
  // Markers sit on the copy of the world nearest the track's start.
  const m = markers.map((p) => {
    let x = mercX(p.longitude);
    x += Math.round(ref - x);
    return [x, mercY(p.latitude), p.label] as const;
  });
  const xs = [...t.map((p) => p[0]), ...m.map((p) => p[0])];
  const ys = [...t.map((p) => p[1]), ...m.map((p) => p[1])];
  let [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
  // At least about 20 km across; the box's shape the picture's.
  const MIN = 0.0005;
  const grow = (a: number, b: number, span: number) => [(a + b) / 2 - span / 2, (a + b) / 2 + span / 2] as const;
  let sx = Math.max(x1 - x0, MIN);
  let sy = Math.max(y1 - y0, MIN);
  const aspect = (W - 2 * PAD) / (H - 2 * PAD);
  if (sx / sy > aspect) sy = sx / aspect;
  else sx = sy * aspect;
  [x0, x1] = grow(x0, x1, sx);
  [y0, y1] = grow(y0, y1, sy);
  const px = (x: number) => PAD + ((x - x0) / sx) * (W - 2 * PAD);
  const py = (y: number) => PAD + ((y - y0) / sy) * (H - 2 * PAD);
  const parts: string[] = [];
  // Graticule: round degrees, labelled at the edges.
  const left = x0 - (PAD / (W - 2 * PAD)) * sx;
  const right = x1 + (PAD / (W - 2 * PAD)) * sx;
  const top = y0 - (PAD / (H - 2 * PAD)) * sy;
  const bottom = y1 + (PAD / (H - 2 * PAD)) * sy;
  if (tiles) parts.push(tileImages(tiles, { left, right, top, bottom }, px, py));
  const lonStep = stepFor((right - left) * 360, 6);
  for (let lon = Math.ceil((left * 360 - 180) / lonStep) * lonStep; !tiles && lon <= right * 360 - 180; lon += lonStep) {
    const x = px(mercX(lon)).toFixed(1);
    const shown = ((((lon + 180) % 360) + 360) % 360) - 180;
    parts.push(`<line x1="${x}" y1="0" x2="${x}" y2="${H}" stroke="#d5dee8" stroke-width="1"/>`);
    parts.push(
      `<text x="${x}" y="${H - 6}" font-size="10" fill="#7b8794" text-anchor="middle">${fmt(shown, lonStep < 0.01 ? 3 : 2)}°</text>`,
    );
  }
  const latTop = latOf(top);
  const latBottom = latOf(bottom);
  const latStep = stepFor(latTop - latBottom, 5);
  for (let lat = Math.ceil(latBottom / latStep) * latStep; !tiles && lat <= latTop; lat += latStep) {
    const y = py(mercY(lat)).toFixed(1);
    parts.push(`<line x1="0" y1="${y}" x2="${W}" y2="${y}" stroke="#d5dee8" stroke-width="1"/>`);
    parts.push(`<text x="4" y="${(Number(y) - 3).toFixed(1)}" font-size="10" fill="#7b8794">${fmt(lat, latStep < 0.01 ? 3 : 2)}°</text>`);
  }
  if (t.length > 1) {
    const pts = t.map(([x, y]) => `${px(x).toFixed(1)},${py(y).toFixed(1)}`).join(' ');
    parts.push(`<polyline class="track" points="${pts}" fill="none" stroke="#2563eb" stroke-width="2.5" stroke-linejoin="round"/>`);
    const [sx0, sy0] = t[0]!;
    parts.push(`<circle cx="${px(sx0).toFixed(1)}" cy="${py(sy0).toFixed(1)}" r="4" fill="#fff" stroke="#2563eb" stroke-width="2"/>`);
  }
  for (const [x, y, label] of m) {
    const cx = px(x).toFixed(1);
    const cy = py(y).toFixed(1);
    parts.push(`<circle class="marker" cx="${cx}" cy="${cy}" r="7" fill="#dc2626" stroke="#fff" stroke-width="2"/>`);
    if (label) {
      parts.push(
        `<text x="${(Number(cx) + 10).toFixed(1)}" y="${(Number(cy) + 4).toFixed(1)}" font-size="12" font-weight="600" fill="#1f2933" stroke="#fff" stroke-width="3" paint-order="stroke">${esc(label)}</text>`,
      );
    }
  }
  if (tiles?.attribution)
    parts.push(
      `<text class="attribution" x="${W - 4}" y="${H - 5}" font-size="10" fill="#333" stroke="#fff" stroke-width="3" paint-order="stroke" text-anchor="end">${esc(tiles.attribution)}</text>`,
    );
  return (
    `<svg class="map" viewBox="0 0 ${W} ${H}" role="img" aria-label="Map" data-track-points="${t.length}" data-markers="${m.length}" xmlns="http://www.w3.org/2000/svg">` +
    `<rect width="${W}" height="${H}" fill="#eaf1f8"/>${parts.join('')}</svg>`
  );
}

/** The street tiles covering a box (world units), as SVG images placed by px and py. */
function tileImages(
  tiles: MapTiles,
  box: { left: number; right: number; top: number; bottom: number },
  px: (x: number) => number,
  py: (y: number) => number,
): string {
  const unitsPerWorld = px(1) - px(0);
  const z = Math.max(0, Math.min(18, Math.round(Math.log2(unitsPerWorld / 256))));
  const n = 2 ** z;
  const out: string[] = [];
  const size = (unitsPerWorld / n).toFixed(2);
  for (let ty = Math.max(0, Math.floor(box.top * n)); ty <= Math.min(n - 1, Math.floor(box.bottom * n)); ty++) {
    for (let tx = Math.floor(box.left * n); tx <= Math.floor(box.right * n); tx++) {
      const href = esc(tileUrl(tiles, z, ((tx % n) + n) % n, ty));
      out.push(
        `<image class="tile" href="${href}" x="${px(tx / n).toFixed(2)}" y="${py(ty / n).toFixed(2)}" width="${size}" height="${size}" preserveAspectRatio="none"/>`,
      );
    }
  }
  return out.join('');
}

// ---- the temperature chart ----

const COLOURS = ['#2563eb', '#dc2626', '#059669', '#d97706', '#7c3aed', '#db2777'];
const MIN_MS = 60_000;
const HOUR_MS = 3_600_000;
const TIME_STEPS = [10, 15, 30, 60, 120, 180, 360, 720, 1440, 2880].map((m) => m * MIN_MS);

/** A line chart of the series over from..to, a gap where readings are far apart. */
export function chartSvg(series: { name: string; points: Reading[] }[], from: number, to: number): string {
  const W = 720;
  const H = 260;
  const [L, R, T, B] = [44, 12, 12, 26];
  const values = series.flatMap((s) => s.points.map((p) => p.value));
  if (!values.length) return '';
  let lo = Math.min(...values);
  let hi = Math.max(...values);
  if (hi - lo < 1) [lo, hi] = [(lo + hi) / 2 - 0.5, (lo + hi) / 2 + 0.5];
  const pad = (hi - lo) * 0.08;
  lo -= pad;
  hi += pad;
  const span = Math.max(to - from, MIN_MS);
  const x = (t: number) => L + ((t - from) / span) * (W - L - R);
  const y = (v: number) => T + ((hi - v) / (hi - lo)) * (H - T - B);
  const parts: string[] = [];
  const vStep = [0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500].find((s) => (hi - lo) / s <= 6) ?? 1000;
  for (let v = Math.ceil(lo / vStep) * vStep; v <= hi; v += vStep) {
    const yy = y(v).toFixed(1);
    parts.push(`<line x1="${L}" y1="${yy}" x2="${W - R}" y2="${yy}" stroke="#e4e7eb" stroke-width="1"/>`);
    parts.push(
      `<text x="${L - 6}" y="${(Number(yy) + 3.5).toFixed(1)}" font-size="10" fill="#7b8794" text-anchor="end">${fmt(v, vStep < 1 ? 1 : 0)}</text>`,
    );
  }
  const tStep = TIME_STEPS.find((s) => span / s <= 7) ?? 7 * 24 * HOUR_MS;
  for (let t = Math.ceil(from / tStep) * tStep; t <= to; t += tStep) {
    const xx = x(t).toFixed(1);
    const d = new Date(t).toISOString();
    const label = tStep >= 24 * HOUR_MS || d.slice(11, 16) === '00:00' ? d.slice(5, 10) : d.slice(11, 16);
    parts.push(`<line x1="${xx}" y1="${T}" x2="${xx}" y2="${H - B}" stroke="#f0f2f5" stroke-width="1"/>`);
    parts.push(`<text x="${xx}" y="${H - 8}" font-size="10" fill="#7b8794" text-anchor="middle">${label}</text>`);
  }
  parts.push(`<line x1="${L}" y1="${H - B}" x2="${W - R}" y2="${H - B}" stroke="#9aa5b1" stroke-width="1"/>`);
  series.forEach((s, i) => {
    const ts = s.points.map((p) => Date.parse(p.time));
    const gaps = ts
      .slice(1)
      .map((t, k) => t - ts[k]!)
      .sort((a, b) => a - b);
    const gap = Math.max(30 * MIN_MS, 4 * (gaps[Math.floor(gaps.length / 2)] ?? 0));
    let d = '';
    s.points.forEach((p, k) => {
      const move = k === 0 || ts[k]! - ts[k - 1]! > gap;
      d += `${move ? 'M' : 'L'}${x(ts[k]!).toFixed(1)} ${y(p.value).toFixed(1)}`;
    });
    parts.push(
      `<path class="series" data-name="${esc(s.name)}" data-points="${s.points.length}" d="${d}" fill="none" stroke="${COLOURS[i % COLOURS.length]}" stroke-width="2" stroke-linejoin="round"/>`,
    );
    // A lone reading (between gaps) would draw nothing: a dot for it.
    if (s.points.length === 1) {
      parts.push(
        `<circle cx="${x(ts[0]!).toFixed(1)}" cy="${y(s.points[0]!.value).toFixed(1)}" r="3" fill="${COLOURS[i % COLOURS.length]}"/>`,
      );
    }
  });
  return (
    `<svg class="chart" viewBox="0 0 ${W} ${H}" role="img" aria-label="Temperatures, °C" xmlns="http://www.w3.org/2000/svg">` +
    `<rect width="${W}" height="${H}" fill="#fff"/>${parts.join('')}</svg>`
  );
}

// ---- the page ----

const positionText = (a: SharedAsset) =>
  a.position
    ? `<span class="coords">${coords(a.position.latitude, a.position.longitude)}</span>` +
      (a.position.speed !== null ? ` · ${fmt(a.position.speed, 0)} km/h` : '') +
      `<br><span class="muted">${when(a.position.time)} · <a href="${osm(a.position.latitude, a.position.longitude)}" rel="noopener noreferrer nofollow" target="_blank">OpenStreetMap</a></span>`
    : '<span class="muted">no position yet</span>';

/** The page of a use: the assets, then the chosen one's track and temperatures. */
export function viewHtml(v: View, tiles: MapTiles | null = null): string {
  const shows = (s: string) => v.show.includes(s as never);
  const detail = shows('track') || shows('temperature');
  const chosen = v.assets.find((a) => a.index === v.asset);
  const title = v.assets.length === 1 ? v.assets[0]!.name : `${v.assets.length} shared assets`;
  const out: string[] = [`<h1>${esc(title)}</h1>`];
  out.push(
    `<p class="muted">Shared until ${esc(readable(new Date(v.expiresAt)))}. ` +
      (detail ? `Track and temperatures of the last ${v.windowHours} h. ` : '') +
      'Times in UTC; reload for the latest.</p>',
  );
  if (!v.assets.length) {
    out.push('<p class="card">Nothing to show: the assets of this link are no longer shared.</p>');
    return pageHtml(title, out.join(''));
  }
  if (v.assets.length > 1 || shows('position')) {
    const rows = v.assets.map((a) => {
      const name = detail && a.index !== v.asset ? `<a href="?asset=${a.index}">${esc(a.name)}</a>` : esc(a.name);
      return `<tr class="${a.index === v.asset ? 'chosen' : ''}" data-index="${a.index}"><td>${v.assets.length > 1 ? `${a.index + 1}. ` : ''}${name}</td>${shows('position') ? `<td>${positionText(a)}</td>` : ''}</tr>`;
    });
    out.push(
      `<div class="card"><table class="assets"><thead><tr><th>Asset</th>${shows('position') ? '<th>Last position</th>' : ''}</tr></thead><tbody>${rows.join('')}</tbody></table></div>`,
    );
  }
  // The overview map: every asset's position (the chosen one's track below has its own).
  const placed = v.assets.filter((a) => a.position);
  if (shows('position') && placed.length && !(shows('track') && v.assets.length === 1)) {
    const markers = placed.map((a) => ({
      latitude: a.position!.latitude,
      longitude: a.position!.longitude,
      label: v.assets.length > 1 ? String(a.index + 1) : '',
    }));
    out.push(`<div class="card">${mapSvg([], markers, tiles)}</div>`);
  }
  if (chosen && detail) {
    if (v.assets.length > 1) out.push(`<h2>${esc(chosen.name)}</h2>`);
    if (v.track) {
      const pts = v.track.points;
      const marker = chosen.position ? [{ latitude: chosen.position.latitude, longitude: chosen.position.longitude, label: '' }] : [];
      const map = mapSvg(pts, marker.length ? marker : pts.length ? [{ ...pts[pts.length - 1]!, label: '' }] : [], tiles);
      out.push(
        `<div class="card track" data-points="${pts.length}"><h2>Track</h2>` +
          (pts.length
            ? `${map}<p class="muted">${pts.length} positions from ${esc(when(pts[0]!.time))} to ${esc(when(pts[pts.length - 1]!.time))}.</p>`
            : `<p class="muted">No positions since ${esc(when(v.track.from))}.</p>`) +
          '</div>',
      );
    }
    if (v.temperature) {
      const s = v.temperature.series;
      // The chart fits the readings there are (from the first of them to now), not the whole window.
      const to = Date.parse(v.temperature.to);
      const first = Math.min(to, ...s.map((x) => Date.parse(x.points[0]!.time)));
      const chart = chartSvg(s, Math.min(first, to - 3_600_000), to);
      const legend = s
        .map((x, i) => {
          const last = x.points[x.points.length - 1]!;
          return `<li><svg viewBox="0 0 12 12" aria-hidden="true"><rect width="12" height="12" rx="2" fill="${COLOURS[i % COLOURS.length]}"/></svg>${esc(x.name)}: <strong>${fmt(last.value, 1)} °C</strong> <span class="muted">at ${esc(when(last.time))}</span></li>`;
        })
        .join('');
      out.push(
        `<div class="card temperature" data-series="${s.length}"><h2>Temperature</h2>` +
          (s.length
            ? `${chart}<ul class="legend">${legend}</ul>`
            : `<p class="muted">No temperatures since ${esc(when(v.temperature.from))}.</p>`) +
          '</div>',
      );
    }
  }
  return pageHtml(title, out.join(''));
}
