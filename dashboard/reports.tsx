// The asset page's report tables (GET /reports/{summary,trips,stops,zones,temperature}): compact,
// the first ROWS rows of each, each with "Download CSV" (the same report with format=csv, every row).
import type { ComponentChildren } from 'preact';

import { DownloadCsv } from './ui.js';

export const REPORT_KINDS = ['summary', 'trips', 'stops', 'zones', 'temperature'] as const;
export type ReportKind = (typeof REPORT_KINDS)[number];

export interface Report<I = any> {
  kind: string;
  from: string;
  to: string;
  rawDataFrom: string | null;
  sources: string[];
  notes: string[];
  items: I[];
}
export type ReportState = { report?: Report; error?: string } | undefined;

export interface Excursion {
  start: string;
  end: string;
  durationSeconds: number;
  min: number;
  max: number;
}
export interface TemperatureItem {
  assetId: string;
  type: string;
  sensor: string;
  range: [number | null, number | null];
  setpoint: number | null;
  excursions: Excursion[];
  minutesOutOfRange: number;
  shareInRange: number | null;
  gaps: { start: string; end: string; durationSeconds: number }[];
  rollupHoursOutOfRange: number | null;
}

/** A time in a table: short, local, 24-hour. */
const time = (iso: string | null | undefined) =>
  iso
    ? new Date(iso).toLocaleString(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', hour12: false })
    : '–';

/** Rows shown of a table; the CSV has them all. */
const ROWS = 50;

export const SENSOR_LABELS: Record<string, string> = {
  supplyAirTemperature: 'Supply air',
  returnAirTemperature: 'Return air',
};
const sensorLabel = (key: string) => SENSOR_LABELS[key] ?? key;

export function duration(seconds: number | null | undefined): string {
  if (seconds == null) return '–';
  const s = Math.round(seconds);
  if (s < 60) return `${s} s`;
  const m = Math.round(s / 60);
  if (m < 60) return `${m} min`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${h} h ${String(m % 60).padStart(2, '0')} min`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}
const km = (m: number | null | undefined) => (m == null ? '–' : m < 1000 ? `${Math.round(m)} m` : `${(m / 1000).toFixed(1)} km`);
const num = (v: number | null | undefined, digits = 1) => (v == null ? '–' : v.toFixed(digits));
export const rangeText = (r: [number | null, number | null] | null | undefined) =>
  !r ? '–' : r[0] != null && r[1] != null ? `${r[0]} to ${r[1]} °C` : r[0] != null ? `≥ ${r[0]} °C` : r[1] != null ? `≤ ${r[1]} °C` : 'any';

interface Column<I> {
  head: string;
  cell: (item: I, index: number) => string | number;
  numeric?: boolean;
}

function Table<I>({ columns, items, empty }: { columns: Column<I>[]; items: I[]; empty: string }) {
  if (!items.length) return <p class="hint">{empty}</p>;
  return (
    <>
      <table class="grid compact">
        <thead>
          <tr>
            {columns.map((c) => (
              <th key={c.head} class={c.numeric ? 'num' : ''}>
                {c.head}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {items.slice(0, ROWS).map((item, i) => (
            <tr key={i}>
              {columns.map((c) => (
                <td key={c.head} class={c.numeric ? 'num' : ''}>
                  {c.cell(item, i)}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
      {items.length > ROWS ? (
        <p class="hint">
          The first {ROWS} of {items.length}: the CSV has them all.
        </p>
      ) : null}
    </>
  );
}

/** A report's section: its title, "Download CSV", its table (or what went wrong). */
function Section({
  kind,
  title,
  state,
  csv,
  children,
}: {
  kind: ReportKind | 'excursions';
  title: string;
  state: ReportState;
  csv: { path: string; name: string };
  children: (r: Report) => ComponentChildren;
}) {
  const rows = state?.report ? (kind === 'excursions' ? excursionsOf(state.report.items).length : state.report.items.length) : 0;
  return (
    <section class="report" data-report={kind} data-state={state ? (state.error ? 'error' : 'loaded') : 'loading'} data-rows={rows}>
      <div class="report-head">
        <h3>{title}</h3>
        <DownloadCsv path={csv.path} name={csv.name} />
      </div>
      {state?.error ? <p class="error">{state.error}</p> : state?.report ? children(state.report) : <p class="hint">Loading…</p>}
    </section>
  );
}

const excursionsOf = (items: TemperatureItem[]) =>
  items.flatMap((t) => t.excursions.map((e) => ({ ...e, sensor: t.sensor }))).sort((a, b) => (a.start < b.start ? -1 : 1));

export function ReportTables({
  states,
  csv,
}: {
  states: Partial<Record<ReportKind, ReportState>>;
  /** The path and file name of a report's CSV. */
  csv: (kind: ReportKind) => { path: string; name: string };
}) {
  return (
    <div class="reports">
      <Section kind="summary" title="Summary" state={states.summary} csv={csv('summary')}>
        {(r) => (
          <Table
            items={r.items}
            empty="Nothing in this range."
            columns={[
              { head: 'distance', cell: (s) => km(s.distanceMeters), numeric: true },
              {
                head: 'records',
                cell: (s) =>
                  Object.entries(s.records as Record<string, number>)
                    .filter(([, n]) => n > 0)
                    .map(([k, n]) => `${k} ${n}`)
                    .join(' · ') || 'none',
              },
              { head: 'first record', cell: (s) => time(s.firstRecord) },
              { head: 'last record', cell: (s) => time(s.lastRecord) },
              { head: 'alerts raised', cell: (s) => s.alertsRaised, numeric: true },
            ]}
          />
        )}
      </Section>
      <Section kind="trips" title="Trips" state={states.trips} csv={csv('trips')}>
        {(r) => (
          <Table
            items={r.items}
            empty="No trips in this range."
            columns={[
              { head: 'from', cell: (t) => time(t.start.time) },
              { head: 'to', cell: (t) => time(t.end.time) },
              { head: 'duration', cell: (t) => duration(t.durationSeconds), numeric: true },
              { head: 'distance', cell: (t) => km(t.distanceMeters), numeric: true },
              { head: 'avg km/h', cell: (t) => num(t.averageSpeed), numeric: true },
              { head: 'max km/h', cell: (t) => num(t.maxSpeed), numeric: true },
            ]}
          />
        )}
      </Section>
      <Section kind="stops" title="Stops" state={states.stops} csv={csv('stops')}>
        {(r) => (
          <Table
            items={r.items}
            empty="No stops in this range."
            columns={[
              { head: '#', cell: (_s, i) => i + 1, numeric: true },
              { head: 'from', cell: (s) => time(s.start) },
              { head: 'to', cell: (s) => time(s.end) },
              { head: 'duration', cell: (s) => duration(s.durationSeconds), numeric: true },
              { head: 'where', cell: (s) => `${s.latitude.toFixed(5)}, ${s.longitude.toFixed(5)}` },
            ]}
          />
        )}
      </Section>
      <Section kind="zones" title="Zone visits" state={states.zones} csv={csv('zones')}>
        {(r) => (
          <Table
            items={r.items}
            empty="No zone visits in this range."
            columns={[
              { head: 'zone', cell: (v) => v.zoneName ?? v.zoneId },
              { head: 'entered', cell: (v) => time(v.enteredAt) },
              { head: 'left', cell: (v) => (v.open ? 'still there' : time(v.leftAt)) },
              { head: 'dwell', cell: (v) => duration(v.durationSeconds), numeric: true },
            ]}
          />
        )}
      </Section>
      <Section kind="temperature" title="Temperature" state={states.temperature} csv={csv('temperature')}>
        {(r) => (
          <Table<TemperatureItem>
            items={r.items}
            empty="No specification gives this asset a temperature range."
            columns={[
              { head: 'sensor', cell: (t) => `${sensorLabel(t.sensor)} (${t.type.toLowerCase()})` },
              { head: 'range', cell: (t) => rangeText(t.range) },
              { head: 'set point', cell: (t) => (t.setpoint == null ? '–' : `${t.setpoint} °C`), numeric: true },
              { head: 'excursions', cell: (t) => t.excursions.length, numeric: true },
              { head: 'minutes out', cell: (t) => num(t.minutesOutOfRange, 0), numeric: true },
              { head: 'in range', cell: (t) => (t.shareInRange == null ? '–' : `${(t.shareInRange * 100).toFixed(1)} %`), numeric: true },
              { head: 'gaps', cell: (t) => t.gaps.length, numeric: true },
            ]}
          />
        )}
      </Section>
      <Section kind="excursions" title="Temperature excursions" state={states.temperature} csv={csv('temperature')}>
        {(r) => (
          <Table
            items={excursionsOf(r.items)}
            empty="No excursions in this range."
            columns={[
              { head: 'sensor', cell: (e) => sensorLabel(e.sensor) },
              { head: 'from', cell: (e) => time(e.start) },
              { head: 'to', cell: (e) => time(e.end) },
              { head: 'duration', cell: (e) => duration(e.durationSeconds), numeric: true },
              { head: 'min °C', cell: (e) => num(e.min), numeric: true },
              { head: 'max °C', cell: (e) => num(e.max), numeric: true },
            ]}
          />
        )}
      </Section>
    </div>
  );
}
