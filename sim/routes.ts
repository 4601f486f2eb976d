// Where the simulated fleet goes: real ports and inland depots, sea lanes drawn through waypoints
// that keep to the water (straits, canals, capes), and road legs to inland depots. A route is a
// polyline in degrees; positions along it are interpolated by distance, on the great circle between
// two points, so a km along the leg is a km between the positions reported (a straight line in
// degrees would be up to 3% longer or shorter than the distance it is credited with). Longitudes on
// a lane crossing the antimeridian are unwrapped (190 = -170) and wrapped back when reported.

export type LatLon = readonly [lat: number, lon: number];

export const PLACES = {
  shanghai: [31.35, 121.62],
  ningbo: [29.93, 121.85],
  hongKong: [22.3, 114.17],
  singapore: [1.26, 103.84],
  busan: [35.1, 129.04],
  yokohama: [35.45, 139.65],
  colombo: [6.95, 79.84],
  jebelAli: [25.01, 55.06],
  portSaid: [31.26, 32.31],
  algeciras: [36.13, -5.44],
  valencia: [39.44, -0.32],
  rotterdam: [51.95, 4.14],
  antwerp: [51.26, 4.4],
  hamburg: [53.54, 9.97],
  newYork: [40.67, -74.15],
  savannah: [32.08, -81.09],
  losAngeles: [33.74, -118.26],
  santos: [-23.96, -46.3],
  durban: [-29.87, 31.03],
  // Inland depots, reached by road.
  duisburg: [51.43, 6.76],
  frankfurt: [50.11, 8.68],
  chicago: [41.88, -87.63],
  phoenix: [33.45, -112.07],
  wuhan: [30.59, 114.31],
  saoPaulo: [-23.55, -46.63],
  johannesburg: [-26.2, 28.05],
} as const satisfies Record<string, LatLon>;
export type Place = keyof typeof PLACES;

export interface Leg {
  mode: 'sea' | 'road';
  from: Place;
  to: Place;
  /** Every point, from the departure to the arrival. */
  path: LatLon[];
}

const P = PLACES;
/** Down the English Channel and across the North Atlantic: the last stretch of two lanes. */
const CHANNEL_TO_NEW_YORK: LatLon[] = [
  [51.2, 1.9],
  [50.1, -1],
  [49.3, -6],
  [46, -25],
  [42, -50],
  [40.3, -70],
];
/** Sea lanes: waypoints between two ports, through the straits and canals ships use. */
const SEA: [Place, Place, LatLon[]][] = [
  [
    'shanghai',
    'rotterdam',
    [
      [30.5, 123.5],
      [25, 121],
      [22, 115.5],
      [12, 110],
      [2.5, 105],
      [1.2, 103.9],
      [4, 99],
      [6, 94],
      [6, 80.5],
      [12.5, 53],
      [12.6, 45],
      [12.7, 43.3],
      [20, 38.5],
      [27.7, 33.9],
      [29.9, 32.55],
      [31.4, 32.35],
      [34, 25],
      [37.3, 11],
      [36.5, 1],
      [36, -5.3],
      [36.8, -9.3],
      [43.5, -9.6],
      [48.5, -5.5],
      [50.1, -1],
      [51.2, 1.9],
    ],
  ],
  [
    'shanghai',
    'losAngeles',
    [
      [31, 125],
      [33.5, 135],
      [36, 145],
      [41, 160],
      [43, 180],
      [42, 200],
      [38, 220],
      [34.5, 235],
    ],
  ],
  [
    'busan',
    'losAngeles',
    [
      [34, 131],
      [36.5, 142],
      [42, 165],
      [43, 190],
      [39, 215],
      [34.5, 235],
    ],
  ],
  ['rotterdam', 'newYork', [[51.9, 3.5], ...CHANNEL_TO_NEW_YORK]],
  [
    'santos',
    'algeciras',
    [
      [-24.5, -45],
      [-20, -38.5],
      [-8, -33.5],
      [5, -30],
      [20, -22],
      [33, -11],
      [35.9, -6],
    ],
  ],
  [
    'singapore',
    'durban',
    [
      [1.2, 103.9],
      [4, 99],
      [5.8, 94.5],
      [-5, 80],
      [-20, 57],
      [-30, 37],
    ],
  ],
  [
    'jebelAli',
    'colombo',
    [
      [26.2, 56.4],
      [22.5, 60],
      [15, 65],
      [7.5, 77],
    ],
  ],
  ['hamburg', 'newYork', [[54, 8.5], [53.8, 6], [51.9, 3], ...CHANNEL_TO_NEW_YORK]],
];

/** Road legs between a port and an inland depot (a few waypoints along the highway). */
const ROAD: [Place, Place, LatLon[]][] = [
  ['rotterdam', 'duisburg', [[51.85, 5.2]]],
  [
    'duisburg',
    'frankfurt',
    [
      [50.93, 6.96],
      [50.35, 7.6],
    ],
  ],
  [
    'newYork',
    'chicago',
    [
      [40.9, -77.5],
      [41.4, -81.7],
      [41.6, -86.2],
    ],
  ],
  [
    'losAngeles',
    'phoenix',
    [
      [34.06, -117.3],
      [33.72, -116.2],
      [33.6, -114.6],
    ],
  ],
  [
    'shanghai',
    'wuhan',
    [
      [31.5, 120],
      [31.8, 117.2],
      [30.6, 115.5],
    ],
  ],
  ['santos', 'saoPaulo', [[-23.8, -46.45]]],
  [
    'durban',
    'johannesburg',
    [
      [-29.6, 30.4],
      [-27.9, 29.5],
    ],
  ],
];

/** Unwraps `lon` to the side of `ref` (|difference| <= 180), so a lane never jumps around the globe. */
const near = (lon: number, ref: number) => lon + 360 * Math.round((ref - lon) / 360);

function leg(mode: Leg['mode'], from: Place, to: Place, via: LatLon[], reverse: boolean): Leg {
  const points: LatLon[] = [P[from], ...via, P[to]];
  const ordered = reverse ? [...points].reverse() : points;
  const path: LatLon[] = [];
  for (const [lat, lon] of ordered) path.push([lat, path.length ? near(lon, path[path.length - 1]![1]) : lon]);
  return { mode, from: reverse ? to : from, to: reverse ? from : to, path };
}

/** Every lane and road, both ways. */
export const LEGS: Leg[] = [
  ...SEA.flatMap(([a, b, via]) => [leg('sea', a, b, via, false), leg('sea', a, b, via, true)]),
  ...ROAD.flatMap(([a, b, via]) => [leg('road', a, b, via, false), leg('road', a, b, via, true)]),
];

const EARTH_KM = 6371.0088;
const RAD = Math.PI / 180;
/** Great-circle distance in km (haversine). */
export function distanceKm(a: LatLon, b: LatLon): number {
  const dLat = (b[0] - a[0]) * RAD;
  const dLon = (b[1] - a[1]) * RAD;
  const h = Math.sin(dLat / 2) ** 2 + Math.cos(a[0] * RAD) * Math.cos(b[0] * RAD) * Math.sin(dLon / 2) ** 2;
  return 2 * EARTH_KM * Math.asin(Math.min(1, Math.sqrt(h)));
}

/** Initial bearing from a to b, degrees 0-360. */
export function bearing(a: LatLon, b: LatLon): number {
  const y = Math.sin((b[1] - a[1]) * RAD) * Math.cos(b[0] * RAD);
  const x = Math.cos(a[0] * RAD) * Math.sin(b[0] * RAD) - Math.sin(a[0] * RAD) * Math.cos(b[0] * RAD) * Math.cos((b[1] - a[1]) * RAD);
  return (((Math.atan2(y, x) / RAD) % 360) + 360) % 360;
}

/** The point a fraction `f` (0..1) of the way from a to b on the great circle between them. */
export function between(a: LatLon, b: LatLon, f: number): LatLon {
  const angle = distanceKm(a, b) / EARTH_KM;
  if (angle < 1e-12) return [a[0], a[1]];
  const [wa, wb] = [Math.sin((1 - f) * angle) / Math.sin(angle), Math.sin(f * angle) / Math.sin(angle)];
  const [pa, la, pb, lb] = [a[0] * RAD, a[1] * RAD, b[0] * RAD, b[1] * RAD];
  const x = wa * Math.cos(pa) * Math.cos(la) + wb * Math.cos(pb) * Math.cos(lb);
  const y = wa * Math.cos(pa) * Math.sin(la) + wb * Math.cos(pb) * Math.sin(lb);
  const z = wa * Math.sin(pa) + wb * Math.sin(pb);
  return [Math.atan2(z, Math.hypot(x, y)) / RAD, Math.atan2(y, x) / RAD];
}

/** A longitude back in -180..180. */
export const wrapLon = (lon: number) => ((((lon + 180) % 360) + 360) % 360) - 180;

/** A leg measured once: cumulative distances for interpolation. */
export class Track {
  readonly cumulative: number[] = [0];
  readonly lengthKm: number;

  constructor(readonly leg: Leg) {
    for (let i = 1; i < leg.path.length; i++) this.cumulative.push(this.cumulative[i - 1]! + distanceKm(leg.path[i - 1]!, leg.path[i]!));
    this.lengthKm = this.cumulative[this.cumulative.length - 1]!;
  }

  /** The position `km` along the leg (clamped), with its heading (towards the segment's end). */
  at(km: number): { lat: number; lon: number; heading: number } {
    const d = Math.max(0, Math.min(km, this.lengthKm));
    let i = 1;
    while (i < this.cumulative.length - 1 && this.cumulative[i]! < d) i++;
    const a = this.leg.path[i - 1]!;
    const b = this.leg.path[i]!;
    const span = this.cumulative[i]! - this.cumulative[i - 1]!;
    const f = span > 0 ? (d - this.cumulative[i - 1]!) / span : 1;
    const p = between(a, b, f);
    return { lat: p[0], lon: wrapLon(p[1]), heading: f < 1 ? bearing(p, b) : bearing(a, b) };
  }
}

/** The legs that leave from a place. */
export const legsFrom = (place: Place) => LEGS.filter((l) => l.from === place);
