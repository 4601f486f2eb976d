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
import { readRollups } from '../rollups/routes.js';
import { ExcursionTracker, type Span } from './excursions.js';
import { timeOrdered } from './read.js';
import type { ReportScope } from './scope.js';

const MIN = 60_000;

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

/** The rows of every asset of the scope, asset by asset. */
export async function* temperature(db: Db, s: ReportScope, gapMinutes: number): AsyncGenerator<TemperatureItem> {
  const gapMs = gapMinutes * MIN;
  const from = s.rawFrom ?? s.from;
  for (const asset of s.assets) {
    const specs = await db.query<{ type: 'REEFER' | 'GENSET'; ranges: RangesValue | null; settings: any }>(
      'SELECT type, ranges, settings FROM specifications WHERE asset_id = $1 ORDER BY type',
      [asset.id],
    );
    for (const spec of specs.rows) {
      const sensors = sensorsOf(spec.ranges);
      if (!sensors.length) continue;
      const table = spec.type === 'REEFER' ? 'reefer_data' : 'genset_data';
      const trackers = sensors.map((x) => new ExcursionTracker(x.min, x.max, gapMs, from, s.end));
      // From a gap before the range (the reading in force at its start) to a gap after it (the
      // reading that ends the last one's time).
      // Each record's reading of each sensor, where the engine reads it (null where it has none).
      const columns = (params: unknown[]) =>
        sensors
          .map((x, n) => {
            const k = `$${params.push(x.key)}::text`;
            return `COALESCE(data -> ${k}, data -> '${x.group}' -> 'sensors' -> ${k}) #>> '{}' AS v${n}`;
          })
          .join(', ');
      const pages = timeOrdered<Record<string, string | null>>(db, s, table, asset.id, { from: from - gapMs, to: s.end + gapMs }, columns);
      for await (const page of pages) {
        for (const r of page) {
          for (const [n, tracker] of trackers.entries()) {
            const raw = r[`v${n}`];
            const v = raw == null ? undefined : numeric(raw);
            if (v !== undefined) tracker.push(r.t, v);
          }
        }
      }
      const expired = s.rawFrom !== null ? await rollupHours(db, s, asset.id, spec.type, sensors) : null;
      for (const [n, x] of sensors.entries()) {
        const result = trackers[n]!.finish();
        const covered = result.inMs + result.outMs;
        const setpoint = SETPOINTS[x.key] ? spec.settings?.cargo?.settings?.[SETPOINTS[x.key]!] : null;
        yield {
          assetId: asset.id,
          type: spec.type,
          sensor: x.key,
          range: [x.min, x.max],
          setpoint: typeof setpoint === 'number' ? setpoint : null,
          excursions: result.excursions.map((e) => ({ ...span(e), min: e.min, max: e.max })),
          minutesOutOfRange: Math.round((result.outMs / MIN) * 1000) / 1000,
          shareInRange: covered > 0 ? Math.round((result.inMs / covered) * 1e6) / 1e6 : null,
          gaps: result.gaps.map(span),
          rollupHoursOutOfRange: expired?.get(x.key) ?? null,
        };
      }
    }
  }
}

/**
 * Per sensor the rollups keep (temperatures), the hours before the raw records' expiry in which
 * its minimum or maximum left the range.
 */
async function rollupHours(db: Db, s: ReportScope, assetId: string, type: 'REEFER' | 'GENSET', sensors: Sensor[]) {
  const rows = await readRollups(db, s.owners, assetId, Math.floor(s.from / 3_600_000) * 3_600_000, s.rawFrom!);
  const kind = type === 'REEFER' ? 'reeferdata' : 'gensetdata';
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
