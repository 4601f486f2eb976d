// The assets page (#/assets, API guide 12): the asset overview (GET /assets/overview), one row per
// asset saying who needs attention: last seen, last position and the zone it is in, the last
// temperature against its specification's range (out of range in the warning colour), open alarms
// and its devices. Sorted by a click on a column's header (again: the other way), searched by name
// and tag, filtered to the assets needing attention or by state; its state is kept in the address
// (`#/assets?q=fish&sort=temperature&order=desc&attention=true`). "Download CSV" saves the same
// rows. Each name links to the asset's page. Read again every minute while the tab is seen.
import { useCallback, useEffect, useState } from 'preact/hooks';
import { ApiError, authorization, plural, time, usePolling } from './api.js';
import { setHashParams, useRoute } from './router.js';
import { DownloadCsv, ErrorLine } from './ui.js';

type Sort = 'name' | 'lastSeen' | 'openAlarms' | 'temperature' | 'attention';
type Reason = 'outOfRange' | 'openAlarms' | 'notSeen';

interface Row {
  id: string;
  name: string;
  tags: string | null;
  disabled: boolean;
  lastSeen: string | null;
  position: { latitude: number; longitude: number; time: string; place: string | null } | null;
  temperature: { value: number; time: string; min: number | null; max: number | null; inRange: boolean | null } | null;
  openAlarms: number;
  devices: { count: number; enabled: number; lastContact: string | null; lastError: string | null };
  attention: Reason[];
}

/** The columns that sort, with the order a first click gives (the most urgent first). */
const SORTS: { key: Sort; label: string; first: 'asc' | 'desc' }[] = [
  { key: 'name', label: 'name', first: 'asc' },
  { key: 'attention', label: 'attention', first: 'desc' },
  { key: 'lastSeen', label: 'last seen', first: 'desc' },
  { key: 'temperature', label: 'temperature', first: 'desc' },
  { key: 'openAlarms', label: 'open alarms', first: 'desc' },
];
const REASONS: Record<Reason, string> = { outOfRange: 'out of range', openAlarms: 'open alarms', notSeen: 'not seen for a day' };
/** The overview answers up to OVERVIEW_MAX_ASSETS rows (1000 by default): one page of 1000 holds them. */
const LIMIT = 1000;

const isSort = (s: string): s is Sort => SORTS.some((x) => x.key === s);
const range = (min: number | null, max: number | null) =>
  min === null && max === null ? 'no range' : `${min ?? '−∞'} to ${max ?? '+∞'} °C`;
const place = (p: NonNullable<Row['position']>) => p.place ?? `${p.latitude.toFixed(3)}, ${p.longitude.toFixed(3)}`;

function devicesText(d: Row['devices']): string {
  if (d.count === 0) return 'none';
  const state = d.enabled === d.count ? (d.count === 1 ? 'enabled' : 'all enabled') : `${d.enabled} of ${d.count} enabled`;
  return `${d.count === 1 ? '' : `${d.count} · `}${state}`;
}

/** A header that sorts: a button, with aria-sort saying how the rows are ordered now. */
function SortHeader({ col, sort, order, onSort }: { col: (typeof SORTS)[number]; sort: Sort; order: string; onSort: (s: Sort) => void }) {
  const active = sort === col.key;
  return (
    <th aria-sort={active ? (order === 'asc' ? 'ascending' : 'descending') : 'none'} data-sort={col.key}>
      <button type="button" class="sort" onClick={() => onSort(col.key)}>
        {col.label}
        {active ? (order === 'asc' ? ' ▲' : ' ▼') : ''}
      </button>
    </th>
  );
}

export function AssetList() {
  const { params } = useRoute();
  const q = params.get('q') ?? '';
  const sort: Sort = isSort(params.get('sort') ?? '') ? (params.get('sort') as Sort) : 'name';
  const order = params.get('order') === 'asc' || params.get('order') === 'desc' ? params.get('order')! : sort === 'name' ? 'asc' : 'desc';
  const attention = params.get('attention') === 'true';
  const disabled = params.get('disabled') ?? '';
  // The search box as typed; the address (and the request) follow it once typing pauses.
  const [typed, setTyped] = useState(q);
  useEffect(() => setTyped(q), [q]);
  useEffect(() => {
    if (typed.trim() === q) return;
    const t = window.setTimeout(() => setHashParams({ q: typed.trim() }), 300);
    return () => window.clearTimeout(t);
  }, [typed, q]);

  const query = new URLSearchParams({ sort, order });
  if (q) query.set('q', q);
  if (attention) query.set('attention', 'true');
  if (disabled === 'true' || disabled === 'false') query.set('disabled', disabled);
  const qs = query.toString();

  const [rows, setRows] = useState<Row[] | null>(null);
  const [truncated, setTruncated] = useState(false);
  const [error, setError] = useState('');
  const load = useCallback(async () => {
    try {
      const r = await fetch(`/api/v1/assets/overview?limit=${LIMIT}&${qs}`, { headers: authorization() });
      const text = await r.text();
      const body = text ? JSON.parse(text) : undefined;
      if (!r.ok) throw new ApiError(r.status, body?.message ?? `${r.status}`);
      setRows(body as Row[]);
      setTruncated(r.headers.get('overview-truncated') === 'true' || /rel="next"/.test(r.headers.get('link') ?? ''));
      setError('');
    } catch (x) {
      setError(`The assets could not be read: ${(x as Error).message}`);
    }
  }, [qs]);
  usePolling(load, 60_000);

  const onSort = (s: Sort) => {
    const col = SORTS.find((x) => x.key === s)!;
    const next = s === sort ? (order === 'asc' ? 'desc' : 'asc') : col.first;
    setHashParams({
      sort: s === 'name' && next === 'asc' ? undefined : s,
      order: next === (s === 'name' ? 'asc' : 'desc') ? undefined : next,
    });
  };
  const needing = rows?.filter((r) => r.attention.length > 0).length ?? 0;
  const header = (key: Sort) => <SortHeader col={SORTS.find((x) => x.key === key)!} sort={sort} order={order} onSort={onSort} />;
  return (
    <section class="assets-overview">
      <div class="toolbar">
        <h2>Assets</h2>
        <span class="hint" role="status">
          {rows ? `${plural(rows.length, 'asset')}${attention ? '' : `, ${needing} needing attention`}` : 'Loading…'}
        </span>
        <DownloadCsv path={`/assets/overview?format=csv&${qs}`} name="assets-overview.csv" />
      </div>
      <div class="filters">
        <input
          type="search"
          name="q"
          aria-label="Search by name or tag"
          placeholder="Search by name or tag"
          value={typed}
          maxLength={255}
          onInput={(e) => setTyped((e.target as HTMLInputElement).value)}
        />
        <label>
          <input
            type="checkbox"
            name="attention"
            checked={attention}
            onChange={(e) => setHashParams({ attention: (e.target as HTMLInputElement).checked ? 'true' : undefined })}
          />{' '}
          needs attention
        </label>
        <label>
          State{' '}
          <select name="disabled" value={disabled} onChange={(e) => setHashParams({ disabled: (e.target as HTMLSelectElement).value })}>
            <option value="">any</option>
            <option value="false">enabled</option>
            <option value="true">disabled</option>
          </select>
        </label>
      </div>
      <ErrorLine error={error} />
      {truncated ? <p class="hint">Only the first {LIMIT} assets by name are shown: search or filter to reach the others.</p> : null}
      {rows && rows.length === 0 ? <p class="hint">No assets{q || attention || disabled ? ' for this search or filter' : ''}.</p> : null}
      {rows && rows.length > 0 ? (
        <table class="grid compact overview">
          <thead>
            <tr>
              {header('name')}
              {header('attention')}
              {header('lastSeen')}
              <th>last position</th>
              {header('temperature')}
              {header('openAlarms')}
              <th>devices</th>
              <th>state</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((r) => {
              const t = r.temperature;
              return (
                <tr key={r.id} class={r.attention.length ? 'attention' : ''} data-id={r.id}>
                  <td>
                    <a href={`#/assets/${r.id}`}>{r.name}</a>
                    {r.tags ? <div class="tags">{r.tags}</div> : null}
                  </td>
                  <td class="reasons">{r.attention.map((x) => REASONS[x]).join(', ') || '–'}</td>
                  <td class={r.attention.includes('notSeen') ? 'warn' : ''}>{time(r.lastSeen)}</td>
                  <td title={r.position ? `at ${time(r.position.time)}` : undefined}>{r.position ? place(r.position) : '–'}</td>
                  <td
                    class={t?.inRange === false ? 'num warn' : 'num'}
                    title={t ? `${range(t.min, t.max)}, at ${time(t.time)}` : undefined}
                  >
                    {t ? `${t.value} °C` : '–'}
                    {t && t.inRange !== null ? <div class="range">{range(t.min, t.max)}</div> : null}
                  </td>
                  <td class={r.openAlarms > 0 ? 'num alarms-open' : 'num'}>{r.openAlarms}</td>
                  <td title={r.devices.lastError ?? undefined}>
                    {devicesText(r.devices)}
                    {r.devices.lastContact ? <div class="range">last contact {time(r.devices.lastContact)}</div> : null}
                  </td>
                  <td>{r.disabled ? 'disabled' : 'enabled'}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      ) : null}
    </section>
  );
}
