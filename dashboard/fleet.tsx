// The fleet page: every asset on a world map with the zones, a clicked asset's track, and the latest
// events and notifications. Everything moving comes from the live stream (live.ts), which the app
// holds open from sign-in: the map draws at once from its snapshot, positions move as they are
// stored, and the feeds take each new event and notification as it comes. Requests of this page:
// the zones and the two feeds once (and the feeds again after a reconnect, for what was missed), a
// clicked asset's track (again when its position moves); nothing periodic.
import { useEffect, useMemo, useState } from 'preact/hooks';
import { all, api, plural, time } from './api.js';
import { refreshOpenAlerts } from './inbox.js';
import type { Live, LivePosition } from './live.js';
import { FleetMap, type MapZone } from './map.js';
import { Acknowledge, DownloadCsv, ErrorLine } from './ui.js';

const FEED = 20;
const monthAgo = () => encodeURIComponent(new Date(Date.now() - 30 * 86400_000).toISOString());

/** The stream's items first (newest first), then the list read once, each id once, FEED of them. */
const merged = (fresh: any[], read: any[]) => {
  const seen = new Set<string>();
  const out: any[] = [];
  // A row read later (an acknowledgement since) is newer than the stream's copy of it.
  const reread = new Map(read.map((x) => [String(x.id), x]));
  for (const x of [...fresh, ...read]) {
    if (seen.has(String(x.id))) continue;
    seen.add(String(x.id));
    out.push(reread.get(String(x.id)) ?? x);
    if (out.length >= FEED) break;
  }
  return out;
};

const STATE_TEXT = { connecting: 'connecting…', live: 'live', retrying: 'reconnecting…' } as const;

export function Fleet({ live }: { live: Live }) {
  const [zones, setZones] = useState<MapZone[]>([]);
  const [events, setEvents] = useState<any[]>([]);
  const [notifications, setNotifications] = useState<any[]>([]);
  const [showDisabled, setShowDisabled] = useState(false);
  const [selected, setSelected] = useState<string | null>(null);
  const [track, setTrack] = useState<LivePosition[]>([]);
  const [error, setError] = useState('');
  // Zones once: they change rarely, and a reload reads them again.
  useEffect(() => {
    all<MapZone>('/zones').then(setZones, (x: Error) => setError(x.message));
  }, []);
  // The feeds once, and again after each reconnect (the stream's new items are merged in). Also after
  // an acknowledgement here (the page's own change).
  const [reads, setReads] = useState(0);
  useEffect(() => {
    if (!live.ready) return;
    Promise.all([api<any[]>('GET', `/events?limit=${FEED}`), api<any[]>('GET', `/notifications?limit=${FEED}`)]).then(
      ([e, n]) => {
        setEvents(e);
        setNotifications(n);
      },
      (x: Error) => setError(x.message),
    );
  }, [live.generation, live.ready, reads]);
  const position = selected ? live.positions.get(selected) : undefined;
  useEffect(() => {
    if (!selected) return;
    const since = new Date(Date.now() - 86400_000).toISOString();
    api<LivePosition[]>('GET', `/locations?assetId=${selected}&from=${encodeURIComponent(since)}&order=asc&limit=1000`).then(setTrack, () =>
      setTrack([]),
    );
  }, [selected, position?.id]);
  const { assets } = live;
  const positions = useMemo(
    () =>
      [...live.positions.values()]
        .filter((l) => showDisabled || !assets.get(l.assetId)?.disabled)
        .map((l) => ({ ...l, name: assets.get(l.assetId)?.name ?? l.assetId })),
    [live.positions, assets, showDisabled],
  );
  const chosen = selected ? assets.get(selected) : undefined;
  const shownEvents = merged(live.events, events);
  const shownNotifications = merged(live.notifications, notifications);
  const reread = () => {
    setReads((n) => n + 1);
    refreshOpenAlerts();
  };
  return (
    <section
      class="fleet"
      data-stream={live.state}
      data-last-position={live.last ? `${live.last.assetId} ${live.last.latitude},${live.last.longitude}` : undefined}
    >
      <div class="toolbar">
        <h2>Fleet</h2>
        <span>
          {live.ready ? `${positions.length} of ${assets.size} assets on the map` : 'Loading the fleet…'}
          {live.truncated ? ' (the first view holds the most recently seen assets only)' : ''}
        </span>
        <span class={`live ${live.state}`} title={live.problem || undefined}>
          {STATE_TEXT[live.state]}
        </span>
        <label>
          <input type="checkbox" checked={showDisabled} onChange={(e) => setShowDisabled((e.target as HTMLInputElement).checked)} /> show
          disabled assets
        </label>
      </div>
      <ErrorLine error={error || (live.state === 'retrying' ? `Live updates interrupted: ${live.problem}` : '')} />
      <FleetMap positions={positions} zones={zones} track={track} selected={selected} onSelect={setSelected} />
      {chosen ? (
        <p class="selected">
          {chosen.name}: {plural(track.length, 'position')} in the last 24 h · <a href={`#/assets/${chosen.id}`}>Open asset page</a>
        </p>
      ) : (
        <p class="hint">Click an asset for its track, a cluster to zoom into it. Drag to pan; wheel, pinch or + and - to zoom.</p>
      )}
      <div class="columns">
        <div>
          <div class="report-head">
            <h3>Latest events</h3>
            <DownloadCsv path={`/events?from=${monthAgo()}&format=csv`} name="events_last-30-days.csv" label="Download CSV (30 days)" />
          </div>
          <ul class="feed">
            {shownEvents.map((e) => (
              <li key={e.id} class={e.severity === 'ALERT' ? 'alert' : ''}>
                {time(e.whenCreated)} · {assets.get(e.assetId)?.name ?? e.assetId} · {e.subject}
                {e.severity === 'ALERT' ? <Acknowledge kind="events" item={e} onDone={reread} /> : null}
              </li>
            ))}
          </ul>
        </div>
        <div>
          <div class="report-head">
            <h3>Latest notifications</h3>
            <DownloadCsv
              path={`/notifications?from=${monthAgo()}&format=csv`}
              name="notifications_last-30-days.csv"
              label="Download CSV (30 days)"
            />
          </div>
          <ul class="feed">
            {shownNotifications.map((n) => (
              <li key={n.id}>
                {time(n.whenCreated)} · {n.assetName} · {n.subject}
                <Acknowledge kind="notifications" item={n} onDone={reread} />
              </li>
            ))}
          </ul>
        </div>
      </div>
    </section>
  );
}
