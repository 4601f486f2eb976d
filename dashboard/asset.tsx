// The asset page (#/assets/<id>), reached from the fleet map and the assets list: over a range
// (the last 24 hours, 7 or 30 days, or from..to), a reefer's supply and return air against its
// specification (chart.ts: one canvas, from the hourly rollups or, for a short range, the raw
// records binned to pixel columns), the trips and stops on the map, and the reports (summary,
// trips, stops, zone visits, temperature and its excursions) with "Download CSV" each; the
// asset's events and raw records of the range as CSV too; and its commands (commands.tsx: send one
// after a confirmation, follow its status, the specification's set point for a mismatch alert).
// The range chosen is in the address (`?range=7d`, or `?from=<ISO>&to=<ISO>`; none for "Its
// data"): a bookmark or a reload shows the same range.
import { useCallback, useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { all, api, fileSafe, mayWrite, plural, time } from './api.js';
import { type ChartData, TemperatureChart } from './chart.js';
import { CommandsPanel, isOpenSetpointMismatch, type Proposal, SendSpecSetpoint } from './commands.js';
import { FleetMap, type MapAsset, type MapStop, type MapZone, type TrackPoint } from './map.js';
import { SharePanel } from './share.js';
import { REPORT_KINDS, type Report, type ReportKind, type ReportState, ReportTables, rangeText, type TemperatureItem } from './reports.js';
import { parseHash, setHashParams } from './router.js';
import { DAY, type Loaded, loadTemperatures } from './series.js';
import { Acknowledge, DownloadCsv, ErrorLine } from './ui.js';

const PRESETS = [
  { id: '24h', label: 'Last 24 h', ms: DAY },
  { id: '7d', label: '7 days', ms: 7 * DAY },
  { id: '30d', label: '30 days', ms: 30 * DAY },
];
interface Range {
  preset: string;
  from: number;
  to: number;
  /** 'fit': how far before the first record it begins. */
  pad?: number;
}
/**
 * The range that fits an asset's data: from a little before its first record (of the last 30
 * days) to now; 7 days when it has none.
 */
function fitted(first: number): Range {
  const to = Date.now();
  if (!Number.isFinite(first) || first >= to) return preset('7d');
  const pad = Math.max((to - first) * 0.05, 5 * 60_000);
  return { preset: 'fit', from: Math.max(first - pad, to - 30 * DAY), to, pad };
}
const preset = (id: string): Range => {
  const to = Date.now();
  return { preset: id, from: to - PRESETS.find((p) => p.id === id)!.ms, to };
};

/** The series charted, with their colours (app.css has the legend's). */
const SERIES = [
  { key: 'supplyAirTemperature', label: 'Supply air', color: '#1864ab', envelope: 'rgba(24,100,171,0.20)' },
  { key: 'returnAirTemperature', label: 'Return air', color: '#e67700', envelope: 'rgba(230,119,0,0.20)' },
];

/** What the page's header shows of the asset. */
interface AssetHead {
  id: string;
  name: string;
  equipmentReference?: string | null;
  isoEquipmentCode?: string | null;
}

/** An ISO 6346 number as it is painted on a box: owner and category, serial, check digit (`APZU 481209 0`). */
const containerNumber = (ref: string) => (ref.length === 11 ? `${ref.slice(0, 4)} ${ref.slice(4, 10)} ${ref.slice(10)}` : ref);

interface Spec {
  ranges: any;
  settings: any;
}
/** A sensor's range in a specification ([min, max, minutes, frequency]; null is unbounded). */
function specRange(spec: Spec | null | undefined, key: string): [number | null, number | null] | null {
  const r = spec?.ranges?.cargo?.sensors?.[key] ?? spec?.ranges?.hardware?.sensors?.[key];
  return Array.isArray(r) ? [typeof r[0] === 'number' ? r[0] : null, typeof r[1] === 'number' ? r[1] : null] : null;
}
const setpointOf = (spec: Spec | null | undefined) => {
  const v = spec?.settings?.cargo?.settings?.temperatureSetpoint;
  return typeof v === 'number' ? v : null;
};

/** datetime-local input values (local time) to and from epoch ms. */
const toLocalInput = (t: number) => new Date(t - new Date(t).getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
const MINUTE = 60_000;
const fromLocalInput = (s: string) => (s ? new Date(s).getTime() : Number.NaN);
const day = (t: number) => toLocalInput(t).slice(0, 10);

/** The range the address asks for (a preset, to now; or from..to); null for the default, "Its data". */
function rangeOf(params: URLSearchParams): Range | null {
  const p = params.get('range');
  if (p && PRESETS.some((x) => x.id === p)) return preset(p);
  const from = Date.parse(params.get('from') ?? '');
  const to = Date.parse(params.get('to') ?? '');
  return Number.isFinite(from) && Number.isFinite(to) && from < to ? { preset: 'custom', from, to } : null;
}
/** A range chosen, into the address (replacing the history entry: back leaves the page). */
const showRange = (r: Range) =>
  setHashParams(
    r.preset === 'custom'
      ? { range: undefined, from: new Date(r.from).toISOString(), to: new Date(r.to).toISOString() }
      : { range: r.preset === 'fit' ? undefined : r.preset, from: undefined, to: undefined },
  );

/** A trips GeoJSON (LineString or MultiLineString per trip) as paths. */
function pathsOf(fc: { features?: { geometry: { type: string; coordinates: any } | null }[] }): TrackPoint[][] {
  const out: TrackPoint[][] = [];
  for (const f of fc.features ?? []) {
    const g = f.geometry;
    const lines: number[][][] = g?.type === 'LineString' ? [g.coordinates] : g?.type === 'MultiLineString' ? g.coordinates : [];
    // A trip cut at the antimeridian is one path again: the map unwraps it.
    const path = lines.flat().map(([longitude, latitude]) => ({ latitude: latitude!, longitude: longitude! }));
    if (path.length > 1) out.push(path);
  }
  return out;
}

function Chart({ data, onZoom }: { data: ChartData | undefined; onZoom: (from: number, to: number) => void }) {
  const canvas = useRef<HTMLCanvasElement>(null);
  const chart = useRef<TemperatureChart>();
  useEffect(() => {
    const c = new TemperatureChart(canvas.current!);
    chart.current = c;
    return () => c.destroy();
  }, []);
  useEffect(() => chart.current?.set(data), [data]);
  useEffect(() => {
    if (chart.current) chart.current.onZoom = onZoom;
  }, [onZoom]);
  return <canvas ref={canvas} class="chart" role="img" aria-label="Supply and return air temperature against the specification" />;
}

export function AssetPage({ id }: { id: string }) {
  const [asset, setAsset] = useState<AssetHead | null>(null);
  const [spec, setSpec] = useState<Spec | null | undefined>(undefined);
  const [zones, setZones] = useState<MapZone[]>([]);
  // The range first shown fits the asset's data (fitted below); null until that is known.
  const [chosen, setRange] = useState<Range | null>(null);
  const [fit, setFit] = useState<Range | null>(null);
  // Whether the viewer has chosen a range on this page: the fitted range, when it comes later
  // (a slow first-record read), must not take the place of their choice.
  const picked = useRef(false);
  const waiting = useMemo(() => preset('7d'), [id]);
  const range = chosen ?? waiting;
  const [custom, setCustom] = useState({ from: '', to: '' });
  const [temps, setTemps] = useState<{ key: string; t0: number; loaded?: Loaded; error?: string }>();
  const [reports, setReports] = useState<Partial<Record<ReportKind, ReportState>>>({});
  const [paths, setPaths] = useState<TrackPoint[][]>([]);
  const [last, setLast] = useState<MapAsset | null>(null);
  const [events, setEvents] = useState<any[] | undefined>();
  const [error, setError] = useState('');
  // Whether the credential may send commands; undefined until known (neither form nor read-only note meanwhile).
  const [write, setWrite] = useState<boolean>();
  const [proposal, setProposal] = useState<Proposal | null>(null);

  useEffect(() => {
    void mayWrite().then(setWrite);
    api<AssetHead>('GET', `/assets/${id}`).then(setAsset, (x: Error) => setError(`The asset could not be read: ${x.message}`));
    api<Spec[]>('GET', `/specifications?assetId=${id}&type=REEFER`).then(
      (list) => setSpec(list[0] ?? null),
      () => setSpec(null),
    );
    all<MapZone>('/zones').then(setZones, () => undefined);
    // The first view fits the data: from the asset's first record of the last 30 days (a little
    // before it) to now, so that a few minutes of data fill the chart instead of a sliver of 7 days.
    let gone = false;
    setRange(null);
    picked.current = false;
    const asked = rangeOf(parseHash(location.hash).params);
    if (asked) {
      setRange(asked);
      setCustom({ from: toLocalInput(asked.from), to: toLocalInput(asked.to) });
    }
    const since = new Date(Date.now() - 30 * DAY).toISOString();
    const first = (path: string) =>
      api<{ whenCreated: string }[]>('GET', `/${path}?assetId=${id}&from=${encodeURIComponent(since)}&order=asc&limit=1`).then(
        (l) => (l[0] ? Date.parse(l[0].whenCreated) : Number.POSITIVE_INFINITY),
        () => Number.POSITIVE_INFINITY,
      );
    void Promise.all([first('reefer-data'), first('locations')]).then(([r, l]) => {
      if (gone) return;
      const r0 = fitted(Math.min(r, l));
      setFit(r0);
      if (asked || picked.current) return;
      setRange(r0);
      setCustom({ from: toLocalInput(r0.from), to: toLocalInput(r0.to) });
    });
    return () => {
      gone = true;
    };
  }, [id]);

  const q = `assetId=${id}&from=${encodeURIComponent(new Date(range.from).toISOString())}&to=${encodeURIComponent(new Date(range.to).toISOString())}`;
  useEffect(() => {
    if (!chosen) return;
    const ctl = new AbortController();
    const live = () => !ctl.signal.aborted;
    const key = `${range.preset}:${range.from}:${range.to}`;
    const t0 = performance.now();
    setTemps({ key, t0 });
    setReports({});
    setPaths([]);
    setLast(null);
    setEvents(undefined);
    loadTemperatures(
      id,
      range.from,
      range.to,
      SERIES.map((s) => s.key),
      ctl.signal,
    ).then(
      (loaded) => live() && setTemps({ key, t0, loaded }),
      (x: Error) => live() && setTemps({ key, t0, error: x.message }),
    );
    for (const kind of REPORT_KINDS) {
      api<Report>('GET', `/reports/${kind}?${q}`).then(
        (report) => live() && setReports((cur) => ({ ...cur, [kind]: { report } })),
        (x: Error) => live() && setReports((cur) => ({ ...cur, [kind]: { error: x.message } })),
      );
    }
    api('GET', `/reports/trips?${q}&format=geojson`).then(
      (fc) => live() && setPaths(pathsOf(fc)),
      () => undefined,
    );
    api<any[]>('GET', `/locations?${q}&order=desc&limit=1`).then(
      ([l]) => live() && setLast(l ? { assetId: id, name: '', latitude: l.latitude, longitude: l.longitude } : null),
      () => undefined,
    );
    api<any[]>('GET', `/events?${q}&limit=50`).then(
      (e) => live() && setEvents(e),
      (x: Error) => live() && setError(`Events: ${x.message}`),
    );
    return () => ctl.abort();
  }, [id, q, chosen === null]);

  const temperature = reports.temperature?.report?.items as TemperatureItem[] | undefined;
  const chartData = useMemo((): ChartData | undefined => {
    if (!temps?.loaded || spec === undefined) return undefined;
    const reefer = (temperature ?? []).filter((t) => t.type === 'REEFER' && SERIES.some((s) => s.key === t.sensor));
    const gapsOf = reefer.find((t) => t.sensor === SERIES[0]!.key) ?? reefer[0];
    return {
      key: temps.key,
      t0: temps.t0,
      from: range.from,
      to: range.to,
      series: SERIES.map((s) => {
        const loaded = temps.loaded!.series.find((x) => x.key === s.key)!;
        return { ...s, samples: loaded.samples, maxGapMs: loaded.maxGapMs, range: specRange(spec, s.key) };
      }).filter((s) => s.samples.length > 0),
      band: specRange(spec, SERIES[0]!.key) ?? specRange(spec, SERIES[1]!.key),
      setpoint: setpointOf(spec),
      excursions: reefer.flatMap((t) => t.excursions.map((e) => ({ start: Date.parse(e.start), end: Date.parse(e.end) }))),
      gaps: (gapsOf?.gaps ?? []).map((g) => ({ start: Date.parse(g.start), end: Date.parse(g.end) })),
    };
  }, [temps, spec, temperature, range]);

  const stops: MapStop[] = useMemo(
    () =>
      (reports.stops?.report?.items ?? []).map((s: any, i: number) => ({
        latitude: s.latitude,
        longitude: s.longitude,
        label: String(i + 1),
      })),
    [reports.stops],
  );
  const positions = useMemo(() => (last ? [{ ...last, name: asset?.name ?? '' }] : []), [last, asset]);
  const notes = [...new Set(Object.values(reports).flatMap((r) => r?.report?.notes ?? []))];
  const name = asset?.name ?? id;
  const file = (what: string) => `${fileSafe(name)}_${what}_${day(range.from)}_${day(range.to)}.csv`;
  const customFrom = fromLocalInput(custom.from);
  const customTo = fromLocalInput(custom.to);
  const customOk = customFrom < customTo;
  /** A span chosen on the chart (a drag): shown as a custom range, its inputs filled in. */
  const choose = useCallback((r: Range, fillInputs = true) => {
    picked.current = true;
    setRange(r);
    showRange(r);
    if (fillInputs) setCustom({ from: toLocalInput(r.from), to: toLocalInput(r.to) });
  }, []);
  const zoom = useCallback((from: number, to: number) => choose({ preset: 'custom', from, to }), [choose]);
  const band = specRange(spec, SERIES[0]!.key);
  const setpoint = setpointOf(spec);
  const loaded = temps?.loaded;

  return (
    <section class="asset-page" data-asset={id}>
      <div class="toolbar">
        <a href="#/fleet">← Fleet</a>
        <h2>{name}</h2>
        {asset?.equipmentReference ? (
          <span class="equipment" title="Container number (ISO 6346) and size-type">
            {containerNumber(asset.equipmentReference)}
            {asset.isoEquipmentCode ? ` · ${asset.isoEquipmentCode}` : ''}
          </span>
        ) : null}
        <span class="hint">
          {spec === undefined
            ? ''
            : spec
              ? `Reefer specification: supply air ${rangeText(band)}${setpoint == null ? '' : `, set point ${setpoint} °C`}`
              : 'No reefer specification'}
        </span>
      </div>
      <ErrorLine error={error} />
      <fieldset class="range-bar" aria-label="Range">
        {fit && fit.preset === 'fit' ? (
          <button
            type="button"
            class={range.preset === 'fit' ? 'active' : ''}
            aria-pressed={range.preset === 'fit'}
            onClick={() => choose(fitted(fit.from + fit.pad!))}
          >
            Its data
          </button>
        ) : null}
        {PRESETS.map((p) => (
          <button
            key={p.id}
            type="button"
            class={range.preset === p.id ? 'active' : ''}
            aria-pressed={range.preset === p.id}
            onClick={() => choose(preset(p.id))}
          >
            {p.label}
          </button>
        ))}
        <label>
          from{' '}
          <input
            type="datetime-local"
            name="from"
            value={custom.from}
            onInput={(e) => setCustom({ ...custom, from: (e.target as HTMLInputElement).value })}
          />
        </label>
        <label>
          to{' '}
          <input
            type="datetime-local"
            name="to"
            value={custom.to}
            onInput={(e) => setCustom({ ...custom, to: (e.target as HTMLInputElement).value })}
          />
        </label>
        <button
          type="button"
          disabled={!customOk}
          class={range.preset === 'custom' ? 'active' : ''}
          // "to" names a minute: the range keeps all of it (to its last millisecond).
          onClick={() => choose({ preset: 'custom', from: customFrom, to: customTo + MINUTE - 1 }, false)}
        >
          Show range
        </button>
      </fieldset>
      {notes.map((n) => (
        <p class="note" key={n}>
          {n}
        </p>
      ))}

      <h3>Temperature</h3>
      <div
        class="chart-frame"
        data-state={temps?.error ? 'error' : loaded ? 'loaded' : 'loading'}
        data-source={loaded?.source ?? ''}
        data-range={range.preset}
      >
        <Chart data={chartData} onZoom={zoom} />
        <div class="legend">
          {SERIES.map((s) => (
            <span key={s.key}>
              <i class={`swatch ${s.key}`} />
              {s.label} (mean, min–max)
            </span>
          ))}
          {band ? (
            <span>
              <i class="swatch band" />
              specification {rangeText(band)}
            </span>
          ) : null}
          {setpoint != null ? (
            <span>
              <i class="swatch setpoint" />
              set point {setpoint} °C
            </span>
          ) : null}
          <span>
            <i class="swatch excursion" />
            out of range, excursion
          </span>
          {chartData?.gaps.length ? (
            <span>
              <i class="swatch gap" />
              no data
            </span>
          ) : null}
        </div>
        <p class="hint source">
          {temps?.error
            ? `The temperatures could not be read: ${temps.error}`
            : loaded
              ? loaded.source === 'rollups'
                ? `From the hourly rollups: ${plural(loaded.records, 'reading', 'readings', loaded.records.toLocaleString())} in ${plural(loaded.series[0]?.samples.length ?? 0, 'hour')}.`
                : `${plural(loaded.records, 'raw reading', 'raw readings', loaded.records.toLocaleString())}, drawn as the mean and min–max of each pixel column.`
              : 'Loading…'}
        </p>
      </div>

      <CommandsPanel assetId={id} name={name} setpoint={setpoint} write={write} proposal={proposal} onPropose={setProposal} />
      <SharePanel assetId={id} name={name} write={write} />

      <div class="report-head">
        <h3>Trips and stops</h3>
        <DownloadCsv path={`/locations?${q}&format=csv`} name={file('locations')} label="Locations CSV" />
        <DownloadCsv path={`/reefer-data?${q}&format=csv`} name={file('reefer-data')} label="Reefer data CSV" />
      </div>
      <FleetMap positions={positions} zones={zones} track={[]} selected={id} onSelect={() => undefined} trips={paths} stops={stops} />

      <ReportTables states={reports} csv={(kind) => ({ path: `/reports/${kind}?${q}&format=csv`, name: file(kind) })} />

      <section class="report" data-report="events" data-state={events ? 'loaded' : 'loading'} data-rows={events?.length ?? 0}>
        <div class="report-head">
          <h3>Events</h3>
          <DownloadCsv path={`/events?${q}&format=csv`} name={file('events')} />
        </div>
        {!events ? (
          <p class="hint">Loading…</p>
        ) : events.length ? (
          <ul class="feed">
            {events.map((e) => (
              <li key={e.id} class={e.severity === 'ALERT' ? 'alert' : ''}>
                {time(e.whenCreated)} · {e.subject}
                {e.severity === 'ALERT' ? (
                  <Acknowledge kind="events" item={e} onDone={(u) => setEvents((all) => all?.map((x) => (x.id === u.id ? u : x)))} />
                ) : null}
                {write && isOpenSetpointMismatch(e) ? <SendSpecSetpoint setpoint={setpoint} alert={e} onPropose={setProposal} /> : null}
              </li>
            ))}
          </ul>
        ) : (
          <p class="hint">No events in this range.</p>
        )}
      </section>
    </section>
  );
}
