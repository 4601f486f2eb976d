// What a bulk of records adds to the hourly rollups, computed in JavaScript from the records in
// hand (no database work per record), and how such parts combine. One definition with the SQL of
// sql.ts `aggregate`, which sums an hour from the raw rows: the same members, the same exact sums
// (each value's shortest decimal, added as decimals), the same rounding of each step to the
// millimetre, times to the microsecond, so a rollup made of parts equals the hour summed from its
// rows (test/rollups.test.ts compares them row by row).
import type { StoredItem } from '../records/hooks.js';
import { round } from '../records/records.js';
import type { RollupType } from './sql.js';
import { temperatureValues } from './values.js';

/**
 * An exact decimal: m x 10^-s. The mantissa is a plain number while it is an integer below 2^53
 * (readings with a few decimals: sums stay exact and cheap), a bigint beyond.
 */
export interface Dec {
  m: number | bigint;
  s: number;
}

const SAFE = Number.MAX_SAFE_INTEGER;
const POW10 = Array.from({ length: 16 }, (_, i) => 10 ** i);
const big = (m: number | bigint) => (typeof m === 'bigint' ? m : BigInt(m));
/** An integer's digits as a mantissa: a number when it is exact as one. */
const mantissa = (digits: string) => (digits.length <= 15 ? Number(digits) : BigInt(digits));

/** A number's shortest decimal (what PostgreSQL's float8 text and JavaScript's String() give). */
export function decOf(v: number): Dec {
  const text = String(v);
  const e = text.indexOf('e');
  const mant = e < 0 ? text : text.slice(0, e);
  const exp = e < 0 ? 0 : Number(text.slice(e + 1));
  const dot = mant.indexOf('.');
  const digits = dot < 0 ? mant : mant.slice(0, dot) + mant.slice(dot + 1);
  const s = (dot < 0 ? 0 : mant.length - dot - 1) - exp;
  return s >= 0 ? { m: mantissa(digits), s } : { m: BigInt(digits) * 10n ** BigInt(-s), s: 0 };
}

/** m x 10^k, exactly. */
function scale(m: number | bigint, k: number): number | bigint {
  if (k === 0) return m;
  if (typeof m === 'number' && k < 16) {
    const r = m * POW10[k]!;
    if (Math.abs(r) <= SAFE) return r;
  }
  return big(m) * 10n ** BigInt(k);
}

export function decAdd(a: Dec, b: Dec): Dec {
  const s = Math.max(a.s, b.s);
  const x = scale(a.m, s - a.s);
  const y = scale(b.m, s - b.s);
  if (typeof x === 'number' && typeof y === 'number') {
    const r = x + y;
    if (Math.abs(r) <= SAFE) return { m: r, s };
  }
  return { m: big(x) + big(y), s };
}

/** As decimal text (a JSON number). */
export function decText(d: Dec): string {
  const m = big(d.m);
  const neg = m < 0n;
  const digits = (neg ? -m : m).toString().padStart(d.s + 1, '0');
  const int = digits.slice(0, digits.length - d.s);
  const frac = digits.slice(digits.length - d.s);
  return `${neg ? '-' : ''}${int}${d.s ? `.${frac}` : ''}`;
}

/** Decimal text (a stored sum: PostgreSQL's numeric, never with an exponent) back into a Dec. */
export function decParse(text: string): Dec {
  const dot = text.indexOf('.');
  return dot < 0 ? { m: mantissa(text), s: 0 } : { m: mantissa(text.slice(0, dot) + text.slice(dot + 1)), s: text.length - dot - 1 };
}

/**
 * A record time as epoch microseconds (PostgreSQL keeps microseconds; Date.parse milliseconds).
 * `ms`: the time already parsed, if at hand.
 */
export function epochMicros(iso: string, ms = Date.parse(iso)): number {
  // The usual form (toISOString's) has milliseconds at most.
  if (iso.length === 24 && iso.charCodeAt(23) === 90 /* Z */ && iso.charCodeAt(19) === 46 /* . */) return ms * 1000;
  const t = iso.indexOf('T');
  const m = /\.(\d+)/.exec(t < 0 ? iso : iso.slice(t));
  const us = m ? Math.round(Number(`0.${m[1]}`) * 1e6) : 0;
  return Math.floor(ms / 1000) * 1_000_000 + us;
}

/** rint(): PostgreSQL's round() of a double (ties to even). */
const rint = (x: number) => {
  const r = Math.round(x);
  return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r;
};
const rad = (d: number) => d * (Math.PI / 180);

/** One step in whole millimetres: the SQL function rollup_mm (migration 0020). */
export function stepMm(lat1: number, lon1: number, lat2: number, lon2: number): number {
  const h = Math.sin(rad(lat2 - lat1) / 2) ** 2 + Math.cos(rad(lat1)) * Math.cos(rad(lat2)) * Math.sin(rad(lon2 - lon1) / 2) ** 2;
  return rint(2 * 6371008.8 * 1000 * Math.asin(Math.sqrt(Math.min(1, Math.max(0, h)))));
}

/** Per key: count, min, max and the exact sum (null while the count is 1: the sum is the value). */
export interface Stat {
  n: number;
  min: number;
  max: number;
  sum: Dec | null;
}
export type Stats = Map<string, Stat>;
const sumOf = (s: Stat): Dec => s.sum ?? decOf(s.min);

/** What some records of one asset, owner, hour and type add up to. */
export interface Part {
  type: RollupType;
  asset: string;
  owner: string;
  /** The hour, epoch ms. */
  hour: number;
  n: number;
  /** First and last record time, epoch µs, and (locations) id and position. */
  first: number;
  last: number;
  firstId: bigint | null;
  lastId: bigint | null;
  firstLat: number | null;
  firstLon: number | null;
  lastLat: number | null;
  lastLon: number | null;
  /** Locations: the steps between its positions, mm. */
  mm: number | null;
  /** Reefer and genset data: the longest step between its records, µs. */
  step: number | null;
  stats: Stats | null;
  /**
   * Records of parts combined into it interleave in time, so `mm` (`step`) is not known: it is
   * summed from the hour's raw rows when the row is written. Everything else is exact.
   */
  loose: boolean;
}

export const partKey = (p: Pick<Part, 'type' | 'asset' | 'owner' | 'hour'>) => `${p.type}|${p.asset}|${p.owner}|${p.hour}`;
const HOUR = 3_600_000;
const STEPPED: readonly RollupType[] = ['reeferdata', 'gensetdata'];

/** A group's records, in arrival order (sorted by time once, when it has more than one). */
interface Group {
  p: Part;
  at: number[];
  ids: bigint[];
  lats: number[];
  lons: number[];
}

/** Adds one value to a key's stat. */
function addOne(stats: Stats, k: string, v: number) {
  const s = stats.get(k);
  if (!s) stats.set(k, { n: 1, min: v, max: v, sum: null });
  else {
    s.sum = decAdd(sumOf(s), decOf(v));
    s.n++;
    if (v < s.min) s.min = v;
    if (v > s.max) s.max = v;
  }
}

/** The parts of one store's records of `type` (rows as stored: ids, owners, times). */
export function partsOf(type: RollupType, rows: StoredItem[]): Part[] {
  const loc = type === 'location';
  const stepped = type === 'reeferdata' || type === 'gensetdata';
  const groups = new Map<string, Group>();
  for (const r of rows) {
    const at = epochMicros(r.whenCreated, r.time.getTime());
    const hour = Math.floor(at / 1000 / HOUR) * HOUR;
    const item = r.item;
    const key = `${item.assetId}|${r.ownerId}|${hour}`;
    let g = groups.get(key);
    if (!g) {
      g = {
        p: {
          type,
          asset: item.assetId,
          owner: r.ownerId,
          hour,
          n: 0,
          first: at,
          last: at,
          firstId: null,
          lastId: null,
          firstLat: null,
          firstLon: null,
          lastLat: null,
          lastLon: null,
          mm: loc ? 0 : null,
          step: stepped ? 0 : null,
          stats: type === 'sensordata' || stepped ? new Map() : null,
          loose: false,
        },
        at: [],
        ids: [],
        lats: [],
        lons: [],
      };
      groups.set(key, g);
    }
    g.p.n++;
    g.at.push(at);
    if (loc) {
      g.ids.push(BigInt(r.id));
      // Positions as the locations table keeps them (6 decimals).
      g.lats.push(round(item.latitude, 6)!);
      g.lons.push(round(item.longitude, 6)!);
    }
    const stats = g.p.stats;
    if (type === 'sensordata') {
      if (typeof item.value === 'number' && Number.isFinite(item.value)) addOne(stats!, `${item.type}/${item.sensorId}`, item.value);
    } else if (stepped) temperatureValues(item.data, (k, v) => addOne(stats!, k, v));
  }
  const out: Part[] = [];
  for (const g of groups.values()) {
    const p = g.p;
    // Time order (then id: locations), as the SQL's window orders them.
    let order: number[] | null = null;
    if (g.at.length > 1) {
      order = g.at.map((_, i) => i);
      order.sort((i, j) => g.at[i]! - g.at[j]! || (loc ? (g.ids[i]! < g.ids[j]! ? -1 : g.ids[i]! > g.ids[j]! ? 1 : 0) : 0));
    }
    const at = (n: number) => g.at[order ? order[n]! : n]!;
    const last = g.at.length - 1;
    p.first = at(0);
    p.last = at(last);
    if (loc) {
      const ix = (n: number) => (order ? order[n]! : n);
      p.firstId = g.ids[ix(0)]!;
      p.lastId = g.ids[ix(last)]!;
      p.firstLat = g.lats[ix(0)]!;
      p.firstLon = g.lons[ix(0)]!;
      p.lastLat = g.lats[ix(last)]!;
      p.lastLon = g.lons[ix(last)]!;
      let mm = 0;
      for (let n = 1; n <= last; n++) mm += stepMm(g.lats[ix(n - 1)]!, g.lons[ix(n - 1)]!, g.lats[ix(n)]!, g.lons[ix(n)]!);
      p.mm = mm;
    }
    if (stepped) {
      let step = 0;
      for (let n = 1; n <= last; n++) step = Math.max(step, at(n) - at(n - 1));
      p.step = step;
    }
    out.push(p);
  }
  return out;
}

function addValue(stats: Stats, k: string, v: Stat) {
  const s = stats.get(k);
  if (!s) stats.set(k, { n: v.n, min: v.min, max: v.max, sum: v.sum });
  else {
    s.sum = decAdd(sumOf(s), sumOf(v));
    s.n += v.n;
    if (v.min < s.min) s.min = v.min;
    if (v.max > s.max) s.max = v.max;
  }
}

const before = (a: Part, b: Part) =>
  a.first - b.first || (a.firstId !== null && b.firstId !== null ? (a.firstId < b.firstId ? -1 : a.firstId > b.firstId ? 1 : 0) : 0);

/**
 * The parts of one key combined, taken in time order: counts add, minima and maxima meet, sums add
 * exactly, and a location's distance (a reefer's or genset's longest step) is the parts' own plus
 * the steps from each part's last record to the next one's first. When parts interleave (a late
 * record inside another part's span, or concurrent stores committing out of order) that member
 * cannot be known from the parts: the result is `loose`.
 */
export function combine(parts: Part[]): Part {
  if (parts.length === 1) return parts[0]!;
  const sorted = [...parts].sort(before);
  const out: Part = { ...sorted[0]!, stats: sorted[0]!.stats ? new Map() : null };
  let loose = false;
  out.n = 0;
  out.mm = out.mm === null ? null : 0;
  out.step = out.step === null ? null : 0;
  let prev: Part | null = null;
  for (const p of sorted) {
    out.n += p.n;
    if (p.loose) loose = true;
    if (p.mm !== null) out.mm = (out.mm ?? 0) + p.mm;
    if (p.step !== null) out.step = Math.max(out.step ?? 0, p.step);
    if (prev) {
      if (p.type === 'location') {
        const overlap = p.first < prev.last || (p.first === prev.last && p.firstId! <= prev.lastId!);
        if (overlap) loose = true;
        else out.mm = (out.mm ?? 0) + stepMm(prev.lastLat!, prev.lastLon!, p.firstLat!, p.firstLon!);
      } else if (STEPPED.includes(p.type)) {
        if (p.first < prev.last) loose = true;
        else out.step = Math.max(out.step ?? 0, p.first - prev.last);
      }
    }
    if (p.stats) for (const [k, s] of p.stats) addValue(out.stats!, k, s);
    // The latest end so far (a part inside another's span ends before it).
    if (!prev || p.last > prev.last || (p.last === prev.last && p.lastId !== null && p.lastId > prev.lastId!)) {
      out.last = p.last;
      out.lastId = p.lastId;
      out.lastLat = p.lastLat;
      out.lastLon = p.lastLon;
      prev = p;
    }
  }
  out.loose = loose;
  return out;
}

/** Strings listed once, each named by its index. */
class Dictionary {
  readonly list: string[] = [];
  private readonly at = new Map<string, number>();
  index(v: string): number {
    let i = this.at.get(v);
    if (i === undefined) {
      i = this.list.push(v) - 1;
      this.at.set(v, i);
    }
    return i;
  }
}

/** One part as its batch row (see encodeParts), owners and stats' keys named by index. */
function partRow(p: Part, owners: Dictionary, keys: Dictionary): unknown[] {
  const row: unknown[] = [p.asset, owners.index(p.owner), p.hour, p.n, p.first, p.last];
  if (p.type === 'location') row.push(p.firstId!.toString(), p.lastId!.toString(), p.firstLat, p.firstLon, p.lastLat, p.lastLon, p.mm);
  else if (STEPPED.includes(p.type)) row.push(p.step);
  if (p.stats) {
    const stats: unknown[] = [];
    for (const [k, st] of p.stats) {
      const i = keys.index(k);
      stats.push(st.n === 1 ? [i, st.min] : [i, st.n, st.min, st.max, decText(sumOf(st))]);
    }
    row.push(stats);
  }
  if (p.loose) row.push(1);
  return row;
}

/**
 * Parts as a rollup_batches row's text: per record type, the owners and the stats' keys once, then
 * per part [asset, owner index, hour, count, first, last, ...] with, for locations, the first and
 * last id and position and the distance; for reefer and genset data the longest step and the
 * stats; for sensor data the stats. A stat is [key index, value] for one value, else [key index,
 * count, min, max, sum as decimal text]. A loose part ends with 1.
 */
export function encodeParts(parts: Part[]): string {
  const groups = new Map<RollupType, { t: RollupType; owners: Dictionary; keys: Dictionary; p: unknown[][] }>();
  for (const p of parts) {
    let g = groups.get(p.type);
    if (!g) {
      g = { t: p.type, owners: new Dictionary(), keys: new Dictionary(), p: [] };
      groups.set(p.type, g);
    }
    g.p.push(partRow(p, g.owners, g.keys));
  }
  return JSON.stringify([...groups.values()].map(({ t, owners, keys, p }) => ({ t, o: owners.list, k: keys.list, p })));
}

/**
 * One store's records of `type` encoded as encodeParts(partsOf(type, rows)) encodes them, the
 * usual case straight: a record alone in its asset's hour (a bulk of one reading per asset) is its
 * own part, written without the part objects; groups of several records go through partsOf.
 */
export function encodeStore(type: RollupType, rows: StoredItem[]): string {
  const loc = type === 'location';
  const stepped = type === 'reeferdata' || type === 'gensetdata';
  const keyed = new Map<string, number | number[]>();
  const ats: number[] = new Array(rows.length);
  const hours: number[] = new Array(rows.length);
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i]!;
    const at = epochMicros(r.whenCreated, r.time.getTime());
    const hour = Math.floor(at / 1000 / HOUR) * HOUR;
    ats[i] = at;
    hours[i] = hour;
    const key = `${r.item.assetId}|${r.ownerId}|${hour}`;
    const seen = keyed.get(key);
    if (seen === undefined) keyed.set(key, i);
    else if (typeof seen === 'number') keyed.set(key, [seen, i]);
    else seen.push(i);
  }
  const owners = new Dictionary();
  const keys = new Dictionary();
  // Written as text straight (no arrays per record): ids are UUIDs and digits, numbers finite, so
  // a template gives what JSON.stringify would.
  const out: string[] = [];
  const several: StoredItem[] = [];
  for (const at of keyed.values()) {
    if (typeof at !== 'number') {
      for (const i of at) several.push(rows[i]!);
      continue;
    }
    const r = rows[at]!;
    const item = r.item;
    let row = `["${item.assetId}",${owners.index(r.ownerId)},${hours[at]},1,${ats[at]},${ats[at]}`;
    if (loc) {
      const lat = round(item.latitude, 6);
      const lon = round(item.longitude, 6);
      row += `,"${r.id}","${r.id}",${lat},${lon},${lat},${lon},0`;
    } else if (stepped) row += ',0';
    if (type === 'sensordata') {
      row +=
        typeof item.value === 'number' && Number.isFinite(item.value)
          ? `,[[${keys.index(`${item.type}/${item.sensorId}`)},${item.value}]]`
          : ',[]';
    } else if (stepped) {
      let stats = '';
      temperatureValues(item.data, (k, v) => {
        stats += `${stats ? ',' : ''}[${keys.index(k)},${v}]`;
      });
      row += `,[${stats}]`;
    }
    out.push(`${row}]`);
  }
  for (const p of partsOf(type, several)) out.push(JSON.stringify(partRow(p, owners, keys)));
  return `[{"t":"${type}","o":${JSON.stringify(owners.list)},"k":${JSON.stringify(keys.list)},"p":[${out.join(',')}]}]`;
}

export function decodeParts(text: string): Part[] {
  const out: Part[] = [];
  for (const g of JSON.parse(text) as { t: RollupType; o: string[]; k: string[]; p: any[][] }[]) {
    const loc = g.t === 'location';
    const stepped = STEPPED.includes(g.t);
    const withStats = g.t === 'sensordata' || stepped;
    const size = loc ? 13 : stepped ? 8 : withStats ? 7 : 6;
    for (const r of g.p) {
      const raw = withStats ? (r[stepped ? 7 : 6] as any[][]) : null;
      out.push({
        type: g.t,
        asset: r[0],
        owner: g.o[r[1]]!,
        hour: r[2],
        n: r[3],
        first: r[4],
        last: r[5],
        firstId: loc ? BigInt(r[6]) : null,
        lastId: loc ? BigInt(r[7]) : null,
        firstLat: loc ? r[8] : null,
        firstLon: loc ? r[9] : null,
        lastLat: loc ? r[10] : null,
        lastLon: loc ? r[11] : null,
        mm: loc ? r[12] : null,
        step: stepped ? r[6] : null,
        stats: raw
          ? new Map(
              raw.map((x): [string, Stat] =>
                x.length === 2
                  ? [g.k[x[0]]!, { n: 1, min: x[1], max: x[1], sum: null }]
                  : [g.k[x[0]]!, { n: x[1], min: x[2], max: x[3], sum: decParse(x[4]) }],
              ),
            )
          : null,
        loose: r[size] === 1,
      });
    }
  }
  return out;
}

/** The stats as the rollups' JSON text: per key [count, min, max, sum], the sum exact. */
export function statsJson(stats: Stats | null): string | null {
  if (!stats) return null;
  const members = [...stats].map(
    ([k, s]) => `${JSON.stringify(k)}:[${s.n},${JSON.stringify(s.min)},${JSON.stringify(s.max)},${decText(sumOf(s))}]`,
  );
  return `{${members.join(',')}}`;
}
