// The temperature chart of the asset page: one canvas, drawn by the page. Each series (supply and
// return air) is binned into the plot's pixel columns (series.ts) and drawn as its mean line and
// a min-max envelope, so a month of minute readings costs the same as a day: at most two values a
// column, never a DOM node a reading. The specification's range is a shaded band, the set point a
// dashed line, what lies outside a series' own range is drawn in red, each excursion (from the
// temperature report) a red span over the plot and a tick on the strip above it (at least two
// pixels wide, however short), the report's data gaps grey. Time labels in local time, °C on the
// left. Hovering shows the values under the pointer; dragging across the plot selects a span of
// time, and letting go zooms to it (onZoom).
//
// For tests, the canvas says what it drew: data-draw-ms (binning and drawing, rasterized),
// data-columns (pixel columns), data-samples (samples binned), data-excursions (spans drawn),
// data-drawn (the key of the data drawn), data-hover (a readout shown) and data-total-ms (from the start of its load to its
// first frame).
import { bin, type Columns, DAY, HOUR, MIN, type Sample } from './series.js';

export interface ChartSeries {
  key: string;
  label: string;
  color: string;
  envelope: string;
  samples: Sample[];
  maxGapMs: number;
  /** The specification's range for this series, [min, max] (null: unbounded), or null. */
  range: [number | null, number | null] | null;
}

export interface ChartData {
  /** Names the data (data-drawn once drawn); t0: when its load began (data-total-ms: from then to its first frame). */
  key: string;
  t0: number;
  from: number;
  to: number;
  series: ChartSeries[];
  /** The band shaded: the specification's range of the first series that has one. */
  band: [number | null, number | null] | null;
  setpoint: number | null;
  excursions: { start: number; end: number }[];
  gaps: { start: number; end: number }[];
}

const PAD = { left: 52, right: 16, top: 24, bottom: 30 };
const STRIP = { top: 6, height: 10 };
const COLORS = {
  grid: '#e3e8ec',
  axis: '#6b7a86',
  text: '#1d2730',
  band: 'rgba(64,192,87,0.14)',
  bandEdge: '#5c940d',
  setpoint: '#495057',
  out: '#e03131',
  outEnvelope: 'rgba(224,49,49,0.55)',
  excursion: 'rgba(224,49,49,0.12)',
  gap: 'rgba(134,142,150,0.22)',
};
const FONT = '11px system-ui, sans-serif';
const TIME_STEPS = [MIN, 5 * MIN, 15 * MIN, 30 * MIN, HOUR, 2 * HOUR, 3 * HOUR, 6 * HOUR, 12 * HOUR, DAY, 2 * DAY, 7 * DAY, 14 * DAY];

const dayLabel = (t: number) => new Date(t).toLocaleDateString(undefined, { month: 'short', day: 'numeric' });
const clockLabel = (t: number) => new Date(t).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit', hour12: false });
const isMidnight = (t: number) => {
  const d = new Date(t);
  return d.getHours() === 0 && d.getMinutes() === 0;
};

/** Time ticks in local time, at least `minPx` apart over a plot `width` pixels wide. */
export function timeTicks(from: number, to: number, width: number, minPx: number): { step: number; ticks: number[] } {
  const span = to - from;
  const step = TIME_STEPS.find((s) => (s / span) * width >= minPx) ?? 30 * DAY;
  const ticks: number[] = [];
  if (step < HOUR) {
    for (let t = Math.ceil(from / step) * step; t <= to; t += step) ticks.push(t);
    return { step, ticks };
  }
  // Hours of each local day (whatever its length), or every n-th local midnight.
  const d = new Date(from);
  let day = new Date(d.getFullYear(), d.getMonth(), d.getDate());
  for (let k = 0; day.getTime() <= to; k++) {
    if (step < DAY) {
      for (let h = 0; h < 24; h += step / HOUR) {
        const t = new Date(day.getFullYear(), day.getMonth(), day.getDate(), h).getTime();
        if (t >= from && t <= to) ticks.push(t);
      }
    } else if (k % (step / DAY) === 0 && day.getTime() >= from) ticks.push(day.getTime());
    day = new Date(day.getFullYear(), day.getMonth(), day.getDate() + 1);
  }
  return { step, ticks };
}

/** Value ticks: a round step (1, 2, 2.5 or 5 times a power of ten) giving about `count` of them. */
export function valueTicks(lo: number, hi: number, count: number): number[] {
  const raw = (hi - lo) / Math.max(1, count);
  const pow = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * pow).find((s) => s >= raw)!;
  const out: number[] = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Math.round(v / step) * step);
  return out;
}

const fmt = (v: number) => (Math.abs(v) >= 100 ? v.toFixed(0) : v.toFixed(1));
/** The narrowest drag that zooms: anything less is a click. */
const DRAG_MIN_PX = 6;

/** A value tick's label: as many decimals as its step needs. */
const tickLabel = (v: number, step: number) => v.toFixed(step >= 1 ? 0 : step >= 0.1 ? 1 : 2);

export class TemperatureChart {
  private data: ChartData | undefined;
  private binned: { s: ChartSeries; c: Columns }[] = [];
  private binnedFor = '';
  private hoverX: number | undefined;
  /** Where a drag began (pixels from the canvas's left), while the pointer is down. */
  private dragX: number | undefined;
  /** The last frame's plot and times, to read a drag's pixels as times. */
  private geometry: { x: number; w: number; from: number; to: number } | undefined;
  /** Called with the span a drag selected (at least DRAG_MIN_PX wide and a minute long). */
  onZoom: ((from: number, to: number) => void) | undefined;
  private firstFrame = false;
  private frame = 0;
  private w = 0;
  private h = 0;
  private resize = new ResizeObserver(() => this.redraw());

  constructor(private readonly c: HTMLCanvasElement) {
    c.addEventListener('pointermove', this.onMove);
    c.addEventListener('pointerleave', this.onLeave);
    c.addEventListener('pointerdown', this.onDown);
    c.addEventListener('pointerup', this.onUp);
    this.resize.observe(c);
  }

  destroy() {
    cancelAnimationFrame(this.frame);
    this.resize.disconnect();
  }

  set(data: ChartData | undefined) {
    this.data = data;
    this.binnedFor = '';
    this.firstFrame = data !== undefined && data.key !== this.c.dataset.drawn;
    this.redraw();
  }

  redraw = () => {
    this.frame ||= requestAnimationFrame(() => {
      this.frame = 0;
      this.draw();
    });
  };

  private onMove = (e: PointerEvent) => {
    const r = this.c.getBoundingClientRect();
    this.hoverX = e.clientX - r.left - this.c.clientLeft;
    this.redraw();
  };

  private onLeave = () => {
    this.hoverX = undefined;
    this.dragX = undefined;
    this.redraw();
  };

  private onDown = (e: PointerEvent) => {
    const r = this.c.getBoundingClientRect();
    this.dragX = e.clientX - r.left - this.c.clientLeft;
    this.c.setPointerCapture?.(e.pointerId);
  };

  private onUp = (e: PointerEvent) => {
    const start = this.dragX;
    this.dragX = undefined;
    const g = this.geometry;
    if (start === undefined || !g) return;
    const r = this.c.getBoundingClientRect();
    const end = e.clientX - r.left - this.c.clientLeft;
    const clamp = (x: number) => Math.min(g.x + g.w, Math.max(g.x, x));
    const [a, b] = [clamp(Math.min(start, end)), clamp(Math.max(start, end))];
    this.redraw();
    if (b - a < DRAG_MIN_PX) return;
    const at = (x: number) => g.from + ((x - g.x) / g.w) * (g.to - g.from);
    const [from, to] = [Math.floor(at(a) / MIN) * MIN, Math.ceil(at(b) / MIN) * MIN];
    if (to - from >= MIN) this.onZoom?.(from, to);
  };

  private draw() {
    const t0 = performance.now();
    const c = this.c;
    const dpr = devicePixelRatio || 1;
    const [w, h] = [c.clientWidth, c.clientHeight];
    if (!w || !h) return;
    if (w !== this.w || h !== this.h || c.width !== Math.round(w * dpr)) {
      [this.w, this.h] = [w, h];
      c.width = Math.round(w * dpr);
      c.height = Math.round(h * dpr);
      this.binnedFor = '';
    }
    const g = c.getContext('2d')!;
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.fillStyle = '#fff';
    g.fillRect(0, 0, w, h);
    const d = this.data;
    const plot = { x: PAD.left, y: PAD.top, w: Math.max(10, w - PAD.left - PAD.right), h: Math.max(10, h - PAD.top - PAD.bottom) };
    const n = Math.floor(plot.w);
    if (!d) {
      g.fillStyle = COLORS.axis;
      g.font = '14px system-ui, sans-serif';
      g.textAlign = 'center';
      g.textBaseline = 'middle';
      g.fillText('Loading…', w / 2, h / 2);
      return;
    }
    // Binned once per data and size: a hover only redraws.
    const key = `${n}`;
    if (this.binnedFor !== key) {
      this.binned = d.series.map((s) => ({ s, c: bin(s.samples, d.from, d.to, n) }));
      this.binnedFor = key;
    }

    // The value range: the data's, the band's and the set point's.
    let lo = Number.POSITIVE_INFINITY;
    let hi = Number.NEGATIVE_INFINITY;
    for (const { c: col } of this.binned) {
      for (let i = 0; i < n; i++) {
        if (!col.count[i]) continue;
        lo = Math.min(lo, col.min[i]!);
        hi = Math.max(hi, col.max[i]!);
      }
    }
    const hasData = lo <= hi;
    for (const v of [d.band?.[0], d.band?.[1], d.setpoint]) {
      if (v == null) continue;
      lo = Math.min(lo, v);
      hi = Math.max(hi, v);
    }
    if (!(lo <= hi)) [lo, hi] = [0, 10];
    const pad = Math.max(0.5, (hi - lo) * 0.08);
    [lo, hi] = [lo - pad, hi + pad];
    const x = (t: number) => plot.x + ((t - d.from) / (d.to - d.from)) * plot.w;
    const y = (v: number) => plot.y + ((hi - v) / (hi - lo)) * plot.h;
    const colX = (i: number) => plot.x + i + 0.5;

    // The band, gaps and excursions behind the lines.
    if (d.band) {
      const top = d.band[1] == null ? plot.y : Math.max(plot.y, y(d.band[1]));
      const bottom = d.band[0] == null ? plot.y + plot.h : Math.min(plot.y + plot.h, y(d.band[0]));
      g.fillStyle = COLORS.band;
      g.fillRect(plot.x, top, plot.w, bottom - top);
    }
    const spans = (list: { start: number; end: number }[], color: string) => {
      let drawn = 0;
      for (const s of list) {
        const a = Math.max(plot.x, x(s.start));
        const b = Math.min(plot.x + plot.w, x(s.end));
        if (b < plot.x || a > plot.x + plot.w) continue;
        const mid = (a + b) / 2;
        const width = Math.max(2, b - a);
        // On white: a span over the band reads as its own colour, not as a mix with the band's.
        g.fillStyle = '#fff';
        g.fillRect(mid - width / 2, plot.y, width, plot.h);
        g.fillStyle = color;
        g.fillRect(mid - width / 2, plot.y, width, plot.h);
        drawn++;
      }
      return drawn;
    };
    spans(d.gaps, COLORS.gap);
    const excursions = spans(d.excursions, COLORS.excursion);

    // Grid and value labels.
    g.font = FONT;
    g.lineWidth = 1;
    g.strokeStyle = COLORS.grid;
    g.fillStyle = COLORS.axis;
    g.textAlign = 'right';
    g.textBaseline = 'middle';
    const vt = valueTicks(lo, hi, Math.max(2, Math.floor(plot.h / 36)));
    const vstep = vt.length > 1 ? vt[1]! - vt[0]! : 1;
    for (const v of vt) {
      const yy = Math.round(y(v)) + 0.5;
      g.beginPath();
      g.moveTo(plot.x, yy);
      g.lineTo(plot.x + plot.w, yy);
      g.stroke();
      g.fillText(tickLabel(v, vstep), plot.x - 6, yy);
    }
    g.save();
    g.translate(12, plot.y + plot.h / 2);
    g.rotate(-Math.PI / 2);
    g.textAlign = 'center';
    g.fillText('°C', 0, 0);
    g.restore();

    // Time ticks and labels (a date at each midnight, bold).
    const { step, ticks } = timeTicks(d.from, d.to, plot.w, 84);
    g.textAlign = 'center';
    g.textBaseline = 'top';
    let lastRight = Number.NEGATIVE_INFINITY;
    for (const t of ticks) {
      const xx = Math.round(x(t)) + 0.5;
      g.strokeStyle = COLORS.grid;
      g.beginPath();
      g.moveTo(xx, plot.y);
      g.lineTo(xx, plot.y + plot.h + 4);
      g.stroke();
      const date = step >= DAY || isMidnight(t);
      const label = date ? dayLabel(t) : clockLabel(t);
      g.font = date && step < DAY ? `600 ${FONT}` : FONT;
      const half = g.measureText(label).width / 2;
      const cx = Math.min(Math.max(xx, plot.x + half), w - half - 2);
      if (cx - half < lastRight + 8) continue;
      g.fillStyle = date ? COLORS.text : COLORS.axis;
      g.fillText(label, cx, plot.y + plot.h + 7);
      lastRight = cx + half;
    }
    g.font = FONT;
    g.strokeStyle = COLORS.axis;
    g.strokeRect(plot.x + 0.5, plot.y + 0.5, plot.w - 1, plot.h - 1);

    // The series: envelopes, then lines; then again in red where a series is out of its range.
    const runs = (col: Columns, maxGap: number, each: (run: number[]) => void) => {
      let run: number[] = [];
      for (let i = 0; i < n; i++) {
        if (!col.count[i]) continue;
        const prev = run[run.length - 1];
        if (prev !== undefined && col.first[i]! - col.last[prev]! > maxGap) {
          each(run);
          run = [];
        }
        run.push(i);
      }
      if (run.length) each(run);
    };
    const drawSeries = (s: ChartSeries, col: Columns, line: string, envelope: string, bars: boolean) => {
      g.fillStyle = envelope;
      // Out of range: each column's span as a bar, so that an hour whose maximum left the range shows however thin.
      if (bars) {
        for (let i = 0; i < n; i++) {
          if (col.count[i]) g.fillRect(colX(i) - 1, y(col.max[i]!), 2, Math.max(1, y(col.min[i]!) - y(col.max[i]!)));
        }
      }
      runs(col, s.maxGapMs, (run) => {
        if (run.length === 1) {
          const i = run[0]!;
          g.fillRect(colX(i) - 1, y(col.max[i]!), 2, Math.max(1, y(col.min[i]!) - y(col.max[i]!)));
          return;
        }
        g.beginPath();
        run.forEach((i, k) => (k ? g.lineTo(colX(i), y(col.max[i]!)) : g.moveTo(colX(i), y(col.max[i]!))));
        for (let k = run.length - 1; k >= 0; k--) g.lineTo(colX(run[k]!), y(col.min[run[k]!]!));
        g.closePath();
        g.fill();
      });
      g.strokeStyle = line;
      g.fillStyle = line;
      g.lineWidth = 1.5;
      g.lineJoin = 'round';
      runs(col, s.maxGapMs, (run) => {
        const mean = (i: number) => y(col.sum[i]! / col.count[i]!);
        if (run.length === 1) {
          g.fillRect(colX(run[0]!) - 1.5, mean(run[0]!) - 1.5, 3, 3);
          return;
        }
        g.beginPath();
        run.forEach((i, k) => (k ? g.lineTo(colX(i), mean(i)) : g.moveTo(colX(i), mean(i))));
        g.stroke();
      });
    };
    g.save();
    g.beginPath();
    g.rect(plot.x, plot.y, plot.w, plot.h);
    g.clip();
    for (const { s, c: col } of this.binned) drawSeries(s, col, s.color, s.envelope, false);
    for (const { s, c: col } of this.binned) {
      if (!s.range || (s.range[0] == null && s.range[1] == null)) continue;
      g.save();
      g.beginPath();
      if (s.range[1] != null) g.rect(plot.x, plot.y, plot.w, y(s.range[1]) - plot.y);
      if (s.range[0] != null) g.rect(plot.x, y(s.range[0]), plot.w, plot.y + plot.h - y(s.range[0]));
      g.clip();
      drawSeries(s, col, COLORS.out, COLORS.outEnvelope, true);
      g.restore();
    }
    // The band's edges and the set point.
    g.setLineDash([5, 4]);
    g.lineWidth = 1;
    for (const v of d.band ?? []) {
      if (v == null) continue;
      g.strokeStyle = COLORS.bandEdge;
      g.beginPath();
      g.moveTo(plot.x, Math.round(y(v)) + 0.5);
      g.lineTo(plot.x + plot.w, Math.round(y(v)) + 0.5);
      g.stroke();
    }
    if (d.setpoint != null) {
      g.strokeStyle = COLORS.setpoint;
      g.lineWidth = 1.5;
      g.setLineDash([8, 4]);
      g.beginPath();
      g.moveTo(plot.x, y(d.setpoint));
      g.lineTo(plot.x + plot.w, y(d.setpoint));
      g.stroke();
    }
    g.setLineDash([]);
    g.restore();

    // The excursion strip above the plot.
    g.fillStyle = '#f1f3f5';
    g.fillRect(plot.x, STRIP.top, plot.w, STRIP.height);
    g.fillStyle = COLORS.out;
    for (const s of d.excursions) {
      const a = Math.max(plot.x, x(s.start));
      const b = Math.min(plot.x + plot.w, x(s.end));
      if (b < plot.x || a > plot.x + plot.w) continue;
      const width = Math.max(2, b - a);
      g.fillRect((a + b) / 2 - width / 2, STRIP.top, width, STRIP.height);
    }
    g.fillStyle = COLORS.axis;
    g.textAlign = 'right';
    g.textBaseline = 'middle';
    g.font = '10px system-ui, sans-serif';
    g.fillText('out', plot.x - 6, STRIP.top + STRIP.height / 2);

    if (!hasData) {
      g.fillStyle = COLORS.axis;
      g.font = '14px system-ui, sans-serif';
      g.textAlign = 'center';
      g.fillText('No reefer data in this range', plot.x + plot.w / 2, plot.y + plot.h / 2);
    }
    this.geometry = { x: plot.x, w: plot.w, from: d.from, to: d.to };
    // A drag under way: the span it selects, shaded.
    if (this.dragX !== undefined && this.hoverX !== undefined) {
      const a = Math.max(plot.x, Math.min(this.dragX, this.hoverX));
      const b = Math.min(plot.x + plot.w, Math.max(this.dragX, this.hoverX));
      g.fillStyle = 'rgba(24,100,171,0.15)';
      g.fillRect(a, plot.y, Math.max(0, b - a), plot.h);
    }
    c.toggleAttribute('data-hover', this.hoverX !== undefined && hasData && this.drawHover(g, plot, n));

    g.getImageData(0, 0, 1, 1); // waits for the canvas to be painted: the time below includes it
    c.dataset.drawMs = (performance.now() - t0).toFixed(1);
    c.dataset.columns = String(n);
    c.dataset.samples = String(d.series.reduce((k, s) => k + s.samples.length, 0));
    c.dataset.excursions = String(excursions);
    c.dataset.drawn = d.key;
    if (this.firstFrame) c.dataset.totalMs = (performance.now() - d.t0).toFixed(0);
    this.firstFrame = false;
  }

  /** A vertical line at the pointer and the values of its column (the nearest column with data, 4 px either side). */
  private drawHover(g: CanvasRenderingContext2D, plot: { x: number; y: number; w: number; h: number }, n: number): boolean {
    const i0 = Math.round(this.hoverX! - plot.x - 0.5);
    if (i0 < 0 || i0 >= n) return false;
    const lines: { text: string; color: string }[] = [];
    let at: number | undefined;
    for (const { s, c: col } of this.binned) {
      let best = -1;
      for (let k = 0; k <= 4 && best < 0; k++) {
        if (col.count[i0 - k]) best = i0 - k;
        else if (col.count[i0 + k]) best = i0 + k;
      }
      if (best < 0) continue;
      at ??= (col.first[best]! + col.last[best]!) / 2;
      const mean = col.sum[best]! / col.count[best]!;
      const spread = col.max[best]! - col.min[best]! > 0.05 ? ` (${fmt(col.min[best]!)} to ${fmt(col.max[best]!)})` : '';
      lines.push({ text: `${s.label}: ${fmt(mean)} °C${spread}`, color: s.color });
    }
    if (at === undefined) return false;
    const xx = plot.x + i0 + 0.5;
    g.strokeStyle = 'rgba(29,39,48,0.5)';
    g.lineWidth = 1;
    g.beginPath();
    g.moveTo(xx, plot.y);
    g.lineTo(xx, plot.y + plot.h);
    g.stroke();
    const title = new Date(at).toLocaleString(undefined, {
      month: 'short',
      day: 'numeric',
      hour: '2-digit',
      minute: '2-digit',
      hour12: false,
    });
    g.font = FONT;
    const width = Math.max(g.measureText(title).width, ...lines.map((l) => g.measureText(l.text).width)) + 16;
    const height = 8 + 15 * (lines.length + 1);
    const bx = xx + 10 + width > plot.x + plot.w ? xx - 10 - width : xx + 10;
    const by = plot.y + 8;
    g.fillStyle = 'rgba(255,255,255,0.94)';
    g.strokeStyle = '#c9d3db';
    g.fillRect(bx, by, width, height);
    g.strokeRect(bx + 0.5, by + 0.5, width - 1, height - 1);
    g.textAlign = 'left';
    g.textBaseline = 'top';
    g.fillStyle = COLORS.text;
    g.fillText(title, bx + 8, by + 5);
    lines.forEach((l, k) => {
      g.fillStyle = l.color;
      g.fillText(l.text, bx + 8, by + 5 + 15 * (k + 1));
    });
    return true;
  }
}
