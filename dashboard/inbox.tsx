// The alarm inbox: the open alerts of the whole fleet this credential sees (ALERT events neither
// acknowledged nor cleared: GET /events?open=true), newest first, a page at a time; acknowledge one,
// or the ones ticked at once (POST /events/acknowledge); filter by kind (words of the subject), by
// asset and by zone (assets inside it now). An acknowledged alert stays in view, saying who, until
// the next reload; the header's count (useOpenAlerts) follows, read again on each acknowledgement
// and on the live stream's alerts, never on a timer. The filters are in the address
// (`#/alarms?kind=…&asset=…&zone=…`): a bookmark or a reload keeps them.
import { useEffect, useMemo, useState } from 'preact/hooks';
import { all, api, authorization, time } from './api.js';
import { setHashParams, useRoute } from './router.js';
import { Acknowledge, ErrorLine } from './ui.js';

interface Alert {
  id: string;
  subject: string;
  assetId: string;
  severity: string;
  currentData: { value: string; whenCreated: string };
  whenCreated: string;
  acknowledgedAt: string | null;
  acknowledgedBy: string | null;
}

/** The kinds of alert the rules raise, by the words their subjects carry (API guide 8). */
const KINDS: [label: string, words: string][] = [
  ['Set point mismatch', 'SETPOINT_MISMATCH'],
  ['Above maximum', 'above maximum'],
  ['Below minimum', 'below minimum'],
  ['Power off', 'Power off'],
  ['Controller alarm', 'Alarm '],
  ['No data (silent asset)', 'No data for more than'],
  ['Too long in a zone', 'In zone '],
];
/** The first page: more than a screen of alerts, fewer than would make the page slow to draw. */
const PAGE = 100;

const query = (f: { kind: string; assetId: string; zoneId: string }) => {
  const q = new URLSearchParams({ open: 'true', severity: 'ALERT', limit: String(PAGE) });
  if (f.kind) q.set('subject', f.kind);
  if (f.assetId) q.set('assetId', f.assetId);
  if (f.zoneId) q.set('zoneId', f.zoneId);
  return `/events?${q}`;
};

/**
 * How many alerts are open (up to 100, then "99+"), for the header: read when signed in and again
 * each time `changed` changes (the live stream's reconnects and alerts raised or cleared: live.ts),
 * never on a timer. Also when the inbox acknowledges (refreshOpenAlerts).
 */
export function useOpenAlerts(enabled: boolean, changed: string): string {
  const [count, setCount] = useState('');
  const [acks, setAcks] = useState(0);
  useEffect(() => {
    const on = () => setAcks((n) => n + 1);
    addEventListener(OPEN_ALERTS_CHANGED, on);
    return () => removeEventListener(OPEN_ALERTS_CHANGED, on);
  }, []);
  useEffect(() => {
    if (!enabled) return;
    let gone = false;
    // A burst of alerts is one read: after the last of them.
    const t = window.setTimeout(() => {
      api<Alert[]>('GET', `/events?open=true&severity=ALERT&limit=${PAGE}`).then(
        (open) => {
          if (!gone) setCount(open.length >= PAGE ? `${PAGE - 1}+` : String(open.length));
        },
        () => undefined,
      );
    }, 300);
    return () => {
      gone = true;
      clearTimeout(t);
    };
  }, [enabled, changed, acks]);
  return count;
}

/** Said when an alert was acknowledged here: the header's count reads again. */
const OPEN_ALERTS_CHANGED = 'tracking:open-alerts';
export const refreshOpenAlerts = () => dispatchEvent(new Event(OPEN_ALERTS_CHANGED));

export function Inbox() {
  const { params } = useRoute();
  const [kind, assetId, zoneId] = ['kind', 'asset', 'zone'].map((k) => params.get(k) ?? '') as [string, string, string];
  const filter = useMemo(() => ({ kind, assetId, zoneId }), [kind, assetId, zoneId]);
  const setFilter = (f: typeof filter) => setHashParams({ kind: f.kind, asset: f.assetId, zone: f.zoneId });
  const [alerts, setAlerts] = useState<Alert[] | null>(null);
  const [more, setMore] = useState(false);
  const [ticked, setTicked] = useState<Set<string>>(new Set());
  const [assets, setAssets] = useState<Map<string, string>>(new Map());
  const [zones, setZones] = useState<{ id: string; name: string }[]>([]);
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    void all<{ id: string; name: string }>('/assets').then(
      (l) => setAssets(new Map(l.map((a) => [a.id, a.name]))),
      () => undefined,
    );
    void all<{ id: string; name: string }>('/zones').then(setZones, () => undefined);
  }, []);
  useEffect(() => {
    let gone = false;
    setAlerts(null);
    setTicked(new Set());
    fetch(`/api/v1${query(filter)}`, { headers: authorization() })
      .then(async (r) => {
        if (!r.ok) throw new Error(`${r.status}`);
        const page = (await r.json()) as Alert[];
        if (gone) return;
        setAlerts(page);
        setMore(/rel="next"/.test(r.headers.get('link') ?? ''));
      })
      .catch((x: Error) => !gone && setError(`The open alerts could not be read: ${x.message}`));
    return () => {
      gone = true;
    };
  }, [filter]);
  const replace = (updated: Alert[]) => {
    setAlerts((cur) => cur?.map((a) => updated.find((u) => u.id === a.id) ?? a) ?? null);
    refreshOpenAlerts();
  };
  const open = alerts?.filter((a) => !a.acknowledgedAt) ?? [];
  const acknowledgeTicked = async () => {
    setBusy(true);
    setError('');
    try {
      replace(await api<Alert[]>('POST', '/events/acknowledge', { ids: [...ticked] }));
      setTicked(new Set());
    } catch (x) {
      setError(`Acknowledging failed: ${(x as Error).message}`);
    } finally {
      setBusy(false);
    }
  };
  const tick = (id: string, on: boolean) =>
    setTicked((cur) => {
      const next = new Set(cur);
      if (on) next.add(id);
      else next.delete(id);
      return next;
    });
  return (
    <section class="inbox">
      <h2>Open alerts</h2>
      <p class="hint">Alerts of the whole fleet that nobody has acknowledged and whose condition has not ended, newest first.</p>
      <div class="filters">
        <label>
          Kind{' '}
          <select name="kind" value={filter.kind} onChange={(e) => setFilter({ ...filter, kind: (e.target as HTMLSelectElement).value })}>
            <option value="">any</option>
            {KINDS.map(([label, words]) => (
              <option value={words}>{label}</option>
            ))}
          </select>
        </label>
        <label>
          Asset{' '}
          <select
            name="asset"
            value={filter.assetId}
            onChange={(e) => setFilter({ ...filter, assetId: (e.target as HTMLSelectElement).value })}
          >
            <option value="">any</option>
            {[...assets]
              .sort((a, b) => a[1].localeCompare(b[1]))
              .map(([id, name]) => (
                <option value={id}>{name}</option>
              ))}
          </select>
        </label>
        <label>
          Zone{' '}
          <select
            name="zone"
            value={filter.zoneId}
            onChange={(e) => setFilter({ ...filter, zoneId: (e.target as HTMLSelectElement).value })}
          >
            <option value="">any</option>
            {zones.map((z) => (
              <option value={z.id}>{z.name}</option>
            ))}
          </select>
        </label>
        <button type="button" class="primary" disabled={busy || ticked.size === 0} onClick={() => void acknowledgeTicked()}>
          Acknowledge {ticked.size ? `${ticked.size} alert${ticked.size === 1 ? '' : 's'}` : 'ticked'}
        </button>
      </div>
      <ErrorLine error={error} />
      {alerts === null ? (
        <p class="hint">Reading the open alerts…</p>
      ) : alerts.length === 0 ? (
        <p class="hint">No open alerts{filter.kind || filter.assetId || filter.zoneId ? ' for this filter' : ''}.</p>
      ) : (
        <table class="alerts">
          <thead>
            <tr>
              <th>
                <input
                  type="checkbox"
                  aria-label="Tick every open alert"
                  checked={open.length > 0 && open.every((a) => ticked.has(a.id))}
                  onChange={(e) => setTicked(new Set((e.target as HTMLInputElement).checked ? open.map((a) => a.id) : []))}
                />
              </th>
              <th>when</th>
              <th>asset</th>
              <th>alert</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {alerts.map((a) => (
              <tr key={a.id} class={a.acknowledgedAt ? 'done' : ''}>
                <td>
                  {a.acknowledgedAt ? null : (
                    <input
                      type="checkbox"
                      aria-label={`Tick ${a.subject}`}
                      checked={ticked.has(a.id)}
                      onChange={(e) => tick(a.id, (e.target as HTMLInputElement).checked)}
                    />
                  )}
                </td>
                <td>{time(a.whenCreated)}</td>
                <td>
                  <a href={`#/assets/${a.assetId}`}>{assets.get(a.assetId) ?? a.assetId.slice(0, 8)}</a>
                </td>
                <td class="text">{a.subject}</td>
                <td>
                  <Acknowledge kind="events" item={a} onDone={(u) => replace([u])} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {more ? <p class="hint">The newest {PAGE} are shown; acknowledge these, or filter, to see the rest.</p> : null}
    </section>
  );
}
