// The fleet map's clusters and fits, in screen pixels and world units (see land.ts): which assets
// are drawn as one circle at the current zoom, and the view that shows a set of points.

export interface View {
  cx: number;
  cy: number;
  zoom: number;
}

export interface Point {
  x: number;
  y: number;
}

/** What a frame drew at one place: one asset, or a cluster of them (indexes into the positions). */
export interface Dot extends Point {
  members: number[];
  radius: number;
}

/** Screen points (undefined: off the view) grouped greedily: each joins the nearest cluster seeded within `reach`. */
export function cluster(points: (Point | undefined)[], reach: number): Dot[] {
  const cells = new Map<number, { seed: Point; dot: Dot }[]>();
  const dots: Dot[] = [];
  points.forEach((p, i) => {
    if (!p) return;
    const gx = Math.floor(p.x / reach);
    const gy = Math.floor(p.y / reach);
    let best: Dot | undefined;
    let bestD = reach * reach;
    for (let ix = gx - 1; ix <= gx + 1; ix++) {
      for (let iy = gy - 1; iy <= gy + 1; iy++) {
        for (const c of cells.get(ix * 65_536 + iy) ?? []) {
          const d = (c.seed.x - p.x) ** 2 + (c.seed.y - p.y) ** 2;
          if (d <= bestD) {
            bestD = d;
            best = c.dot;
          }
        }
      }
    }
    if (best) {
      const n = best.members.push(i);
      best.x += (p.x - best.x) / n;
      best.y += (p.y - best.y) / n;
    } else {
      const dot = { x: p.x, y: p.y, members: [i], radius: 0 };
      dots.push(dot);
      const key = gx * 65_536 + gy;
      cells.set(key, [...(cells.get(key) ?? []), { seed: p, dot }]);
    }
  });
  for (const d of dots) d.radius = dotRadius(d.members.length);
  return separate(dots);
}

export const dotRadius = (n: number) => (n > 1 ? Math.min(24, 11 + 2.5 * Math.log2(n)) : 5);

/** Merges the dots whose circles would overlap (a cluster grows with its count), until none does. */
function separate(dots: Dot[]): Dot[] {
  const cell = 52; // more than the widest two circles apart
  for (let merged = true; merged; ) {
    merged = false;
    const cells = new Map<number, Dot[]>();
    const kept: Dot[] = [];
    for (const d of dots) {
      const [gx, gy] = [Math.floor(d.x / cell), Math.floor(d.y / cell)];
      let into: Dot | undefined;
      for (let ix = gx - 1; ix <= gx + 1 && !into; ix++) {
        for (let iy = gy - 1; iy <= gy + 1 && !into; iy++) {
          into = cells.get(ix * 65_536 + iy)?.find((o) => Math.hypot(o.x - d.x, o.y - d.y) < o.radius + d.radius + 2);
        }
      }
      if (into) {
        const [a, b] = [into.members.length, d.members.length];
        into.x = (into.x * a + d.x * b) / (a + b);
        into.y = (into.y * a + d.y * b) / (a + b);
        into.members.push(...d.members);
        into.radius = dotRadius(into.members.length);
        merged = true;
        continue;
      }
      const key = gx * 65_536 + gy;
      cells.set(key, [...(cells.get(key) ?? []), d]);
      kept.push(d);
    }
    dots = kept;
  }
  return dots;
}

/** The view that shows `points` (world units) with `margin` pixels around them, no closer than `maxZoom`. */
export function fitView(points: Point[], w: number, h: number, margin: number, maxZoom: number): View | undefined {
  if (!points.length) return undefined;
  // East-west, the shortest stretch holding every point: the world less the widest gap between two of them.
  const xs = points.map((p) => ((p.x % 1) + 1) % 1).sort((a, b) => a - b);
  let gap = 1 - xs.at(-1)! + xs[0]!;
  let start = xs[0]!;
  for (let i = 1; i < xs.length; i++) {
    if (xs[i]! - xs[i - 1]! > gap) {
      gap = xs[i]! - xs[i - 1]!;
      start = xs[i]!;
    }
  }
  const width = 1 - gap;
  const ys = points.map((p) => p.y);
  const top = Math.min(...ys);
  const height = Math.max(...ys) - top;
  const zoom = Math.min((w - 2 * margin) / (width * w), (h - 2 * margin) / (height * w), maxZoom);
  return { cx: start + width / 2, cy: top + height / 2, zoom: Math.max(1, zoom) };
}
