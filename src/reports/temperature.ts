// The temperature report (the cold-chain figure): for each asset's REEFER and GENSET
// specification, each sensor it gives a numeric range, the excursions, gaps and share of time in
// range of that sensor's readings in reefer (or genset) data, read where the engine reads them
// (`data.<key>`, else `data.<group>.sensors.<key>`). An excursion is reported however short: the
// specification's duration decides alerts, not excursions. The range and set point are the
// specification's as it stands (no history of specifications is kept).
//
// Before the raw records' expiry the hourly rollups know a temperature's minimum and maximum per
// hour: each row then counts the hours in which it left the range (`rollupHoursOutOfRange`).
import type { Db } from '../db/db.js';
import { numeric } from '../alerts/evaluation.js';
import { LEVEL_SENSORS, type RangesValue } from '../alerts/model.js';
import { iso } from '../http/schemas.js';
import { foldRollups } from '../rollups/rollups.js';
import { type RollupRow, readRollups } from '../rollups/routes.js';
import { ExcursionTracker, type Span } from './excursions.js';
import { inRanges } from './read.js';
import type { ReportScope } from './scope.js';

const MIN = 60_000;
const HOUR = 3_600_000;

/** The set point a specification's settings give a sensor, by its key. */
const SETPOINTS: Record<string, 'temperatureSetpoint' | 'humiditySetpoint' | 'co2Setpoint' | 'o2Setpoint'> = {
  returnAirTemperature: 'temperatureSetpoint',
  returnAir2Temperature: 'temperatureSetpoint',
  supplyAirTemperature: 'temperatureSetpoint',
  supplyAir2Temperature: 'temperatureSetpoint',
  usda1Temperature: 'temperatureSetpoint',
  usda2Temperature: 'temperatureSetpoint',
  usda3Temperature: 'temperatureSetpoint',
  usda4Temperature: 'temperatureSetpoint',
  humidity: 'humiditySetpoint',
  co2: 'co2Setpoint',
  o2: 'o2Setpoint',
};

interface Sensor {
  key: string;
  group: 'cargo' | 'hardware';
  min: number | null;
  max: number | null;
}

export interface TemperatureItem extends Record<string, unknown> {
  assetId: string;
  type: 'REEFER' | 'GENSET';
  sensor: string;
  range: [number | null, number | null];
  setpoint: number | null;
  excursions: { start: string; end: string; durationSeconds: number; min: number; max: number }[];
  minutesOutOfRange: number;
  shareInRange: number | null;
  gaps: { start: string; end: string; durationSeconds: number }[];
  rollupHoursOutOfRange: number | null;
}

export const TEMPERATURE_COLUMNS = [
  'assetId',
  'type',
  'sensor',
  'range',
  'setpoint',
  'excursions',
  'minutesOutOfRange',
  'shareInRange',
  'gaps',
  'rollupHoursOutOfRange',
];

/** The sensors a specification gives a numeric range. */
function sensorsOf(ranges: RangesValue | null): Sensor[] {
  const out: Sensor[] = [];
  for (const group of ['cargo', 'hardware'] as const) {
    for (const [key, range] of Object.entries(ranges?.[group]?.sensors ?? {})) {
      if (LEVEL_SENSORS.includes(key) || !Array.isArray(range)) continue;
      const [min, max] = range as (number | null)[];
      out.push({ key, group, min: min ?? null, max: max ?? null });
    }
  }
  return out;
}

const span = (x: Span) => ({
  start: iso(new Date(x.start))!,
  end: iso(new Date(x.end))!,
  durationSeconds: Math.round((x.end - x.start) / 1000),
});

/**
 * Assets worked on at once: one's readings parsed while the database reads the others' (the
 * benchmark's 100 reefers over 30 days: 4.7 s with 2, 4.1 s with 3, on two cores).
 */
const IN_FLIGHT = 3;

/** The rows of every asset of the scope, in the assets' order (IN_FLIGHT of them computed at a time). */
export async function* temperature(db: Db, s: ReportScope, gapMinutes: number): AsyncGenerator<TemperatureItem> {
  // The deltas so far folded into the rollups once, for every asset.
  await foldRollups(db, s.rollupDays);
  const pending: Promise<TemperatureItem[]>[] = [];
  const start = (n: number) => {
    const asset = s.assets[n];
    if (!asset) return;
    const p = assetRows(db, s, asset.id, gapMinutes);
    p.catch(() => {}); // awaited in turn below; not an unhandled rejection meanwhile
    pending.push(p);
  };
  for (let n = 0; n < IN_FLIGHT; n++) start(n);
  for (let n = 0; n < s.assets.length; n++) {
    const rows = await pending.shift()!;
    start(n + IN_FLIGHT);
    yield* rows;
  }
}

/** One asset's rows: per specification, per ranged sensor. */
async function assetRows(db: Db, s: ReportScope, assetId: string, gapMinutes: number): Promise<TemperatureItem[]> {
  const gapMs = gapMinutes * MIN;
  const from = s.rawFrom ?? s.from;
  const out: TemperatureItem[] = [];
  const specs = await db.query<{ type: 'REEFER' | 'GENSET'; ranges: RangesValue | null; settings: any }>(
    'SELECT type, ranges, settings FROM specifications WHERE asset_id = $1 ORDER BY type',
    [assetId],
  );
  for (const spec of specs.rows) {
    const sensors = sensorsOf(spec.ranges);
    if (!sensors.length) continue;
    const table = spec.type === 'REEFER' ? 'reefer_data' : 'genset_data';
    const trackers = sensors.map((x) => new ExcursionTracker(x.min, x.max, gapMs, from, s.end));
    // Each record's reading of each sensor, where the engine reads it (null where it has none).
    const columns = (params: unknown[]) =>
      sensors
        .map((x, n) => {
          const k = `$${params.push(x.key)}::text`;
          return `COALESCE(data -> ${k}, data -> '${x.group}' -> 'sensors' -> ${k}) #>> '{}' AS v${n}`;
        })
        .join(', ');
    const feed = (r: Record<string, unknown> & { t: number }) => {
      for (const [n, tracker] of trackers.entries()) {
        const raw = r[`v${n}`];
        const v = raw == null ? undefined : numeric(raw);
        if (v !== undefined) tracker.push(r.t, v);
      }
    };
    // From a gap before the range (the reading in force at its start) to a gap after it (the
    // reading that ends the last one's time): the raw readings, except in the whole hours the
    // rollups show were in range throughout (plan below), which stand for themselves.
    const plan = await hoursPlan(db, s, assetId, spec.type, sensors, { from, to: s.end }, gapMs);
    const raw = inRanges<Record<string, unknown>>(db, s, table, assetId, plan.raw, columns);
    let next = await raw.next();
    let at = 0;
    const rawUntil = (t: number) => {
      // The raw rows before `t` (the ranges come in order, so do their rows).
      const page = next.done ? [] : next.value;
      while (at < page.length && page[at]!.t < t) feed(page[at++]!);
      return at < page.length || next.done;
    };
    for (const clean of plan.clean) {
      while (!rawUntil(clean.first)) {
        next = await raw.next();
        at = 0;
      }
      for (const [n, tracker] of trackers.entries()) tracker.pushSpan(clean.first, clean.last, clean.inRange[n]!);
    }
    while (!next.done) {
      rawUntil(Number.POSITIVE_INFINITY);
      next = await raw.next();
      at = 0;
    }
    const expired = s.rawFrom !== null ? await rollupHours(db, s, assetId, spec.type, sensors) : null;
    for (const [n, x] of sensors.entries()) {
      const result = trackers[n]!.finish();
      const covered = result.inMs + result.outMs;
      const setpoint = SETPOINTS[x.key] ? spec.settings?.cargo?.settings?.[SETPOINTS[x.key]!] : null;
      out.push({
        assetId,
        type: spec.type,
        sensor: x.key,
        range: [x.min, x.max],
        setpoint: typeof setpoint === 'number' ? setpoint : null,
        excursions: result.excursions.map((e) => ({ ...span(e), min: e.min, max: e.max })),
        minutesOutOfRange: Math.round((result.outMs / MIN) * 1000) / 1000,
        shareInRange: covered > 0 ? Math.round((result.inMs / covered) * 1e6) / 1e6 : null,
        gaps: result.gaps.map(span),
        rollupHoursOutOfRange: expired?.get(x.key) ?? null,
      });
    }
  }
  return out;
}

/** An hour whose every reading of every sensor was in range, one step after another within the gap. */
interface CleanHour {
  first: number;
  last: number;
  /** Per sensor, a value it read in that hour (all were in range). */
  inRange: number[];
}

/**
 * Which hours of [range.from, range.to) need their raw readings, and which the rollups answer:
 * an hour is answered when its one rollup row shows every record carrying a number for every
 * sensor (the count of each equal to the records'), all of them within the range, and no two
 * records further apart than the gap. Within such an hour each reading holds until the next in
 * range, so its first and last reading stand for all (the steps into and out of it are the
 * tracker's to judge). Everything else, and the partial hours at the ends with a gap's margin, is
 * read raw. A sensor the rollups do not keep (not a temperature) makes every hour raw.
 */
async function hoursPlan(
  db: Db,
  s: ReportScope,
  assetId: string,
  type: 'REEFER' | 'GENSET',
  sensors: Sensor[],
  range: { from: number; to: number },
  gapMs: number,
): Promise<{ raw: { from: number; to: number }[]; clean: CleanHour[] }> {
  const lo = Math.ceil(range.from / HOUR) * HOUR;
  const hi = Math.floor(range.to / HOUR) * HOUR;
  const all = { raw: [{ from: range.from - gapMs, to: range.to + gapMs }], clean: [] };
  if (hi <= lo) return all;
  const kind = type === 'REEFER' ? 'reeferdata' : 'gensetdata';
  const keys = sensors.map((x) => x.key);
  const rows = await readRollups(db, {
    owners: s.owners,
    assetId,
    from: lo,
    to: hi,
    keepDays: s.rollupDays,
    types: [kind],
    keys,
    folded: true,
  });
  const byHour = new Map<number, RollupRow[]>();
  for (const r of rows) byHour.set(r.hour, [...(byHour.get(r.hour) ?? []), r]);
  const raw: { from: number; to: number }[] = [];
  const clean: CleanHour[] = [];
  const addRaw = (from: number, to: number) => {
    const last = raw[raw.length - 1];
    if (last && last.to >= from) last.to = Math.max(last.to, to);
    else raw.push({ from, to });
  };
  addRaw(range.from - gapMs, lo);
  for (const [hour, found] of byHour) {
    const r = found.length === 1 ? found[0]! : null;
    const inRange =
      r && r.max_step_us !== null && r.max_step_us <= gapMs * 1000
        ? sensors.map((x) => {
            const st = r.stats?.[x.key]?.map(Number);
            const ok = st && st[0] === r.count && (x.min === null || st[1]! >= x.min) && (x.max === null || st[2]! <= x.max);
            return ok ? st[1]! : null;
          })
        : null;
    if (r && inRange?.every((v) => v !== null)) clean.push({ first: r.first_at, last: r.last_at, inRange: inRange as number[] });
    else addRaw(hour, hour + HOUR);
  }
  addRaw(hi, range.to + gapMs);
  return { raw, clean };
}

/**
 * Per sensor the rollups keep (temperatures), the hours before the raw records' expiry in which
 * its minimum or maximum left the range.
 */
async function rollupHours(db: Db, s: ReportScope, assetId: string, type: 'REEFER' | 'GENSET', sensors: Sensor[]) {
  const kind = type === 'REEFER' ? 'reeferdata' : 'gensetdata';
  const from = Math.floor(s.from / HOUR) * HOUR;
  const keys = sensors.map((x) => x.key);
  const rows = await readRollups(db, {
    owners: s.owners,
    assetId,
    from,
    to: s.rawFrom!,
    keepDays: s.rollupDays,
    types: [kind],
    keys,
    folded: true,
  });
  const out = new Map<string, number>();
  for (const x of sensors) {
    let hours: number | null = null;
    for (const r of rows) {
      const st = r.type === kind ? r.stats?.[x.key] : undefined;
      if (!st) continue;
      const [, min, max] = st.map(Number) as [number, number, number, number];
      hours = (hours ?? 0) + ((x.min !== null && min < x.min) || (x.max !== null && max > x.max) ? 1 : 0);
    }
    if (hours !== null) out.set(x.key, hours);
  }
  return out;
}
