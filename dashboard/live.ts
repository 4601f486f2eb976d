// The live fleet (API guide 9, "Live fleet"): one stream per signed-in page, GET /locations/live,
// followed over fetch (the credential in a header, which EventSource cannot send). Its snapshot is
// the fleet's first view (every asset, its name and latest position: one request, drawn at once),
// then each asset's new latest position, each new event and notification, and asset changes come as
// they are stored: the fleet page and the header's alarm count ask for nothing periodically. A
// dropped stream is opened again with backoff (1 s, doubling to 30 s) and starts from a fresh
// snapshot; `state` says where it is.
import { useEffect, useState } from 'preact/hooks';
import { authorization } from './api.js';
import { SseParser } from './sse.js';

export interface LiveAsset {
  id: string;
  name: string;
  disabled: boolean;
  ownerId: string;
}
export interface LivePosition {
  id: string;
  assetId: string;
  ownerId: string;
  latitude: number;
  longitude: number;
  whenCreated: string;
}
export type LiveState = 'connecting' | 'live' | 'retrying';

export interface Live {
  state: LiveState;
  /** Why the last stream ended, when it did (an `end` event's message or the error). */
  problem: string;
  /** Whether the first snapshot has come (the map can draw). */
  ready: boolean;
  truncated: boolean;
  assets: Map<string, LiveAsset>;
  positions: Map<string, LivePosition>;
  /** Events and notifications that came on the stream since it (re)started, newest first. */
  events: any[];
  notifications: any[];
  /** Counts up at each (re)connect: what was missed meanwhile is read again once. */
  generation: number;
  /** Counts up when an alert is raised or cleared: the alarm count is read again. */
  alerts: number;
  /** The last position that came on the stream (for the page's data-last-position). */
  last: LivePosition | null;
}

/** Events and notifications kept from the stream (the feeds show 20). */
const KEEP = 50;
const MAX_BACKOFF_MS = 30_000;

const empty = (): Live => ({
  state: 'connecting',
  problem: '',
  ready: false,
  truncated: false,
  assets: new Map(),
  positions: new Map(),
  events: [],
  notifications: [],
  generation: 0,
  alerts: 0,
  last: null,
});

/** Follows the live stream while `enabled`; the state re-renders once per chunk read. */
export function useLive(enabled: boolean): Live {
  const [live, setLive] = useState<Live>(empty);
  useEffect(() => {
    if (!enabled) return;
    const abort = new AbortController();
    let cur = empty();
    const publish = () => setLive({ ...cur });
    const apply = (event: string, data: any) => {
      if (event === 'snapshot') {
        const assets = new Map<string, LiveAsset>();
        const positions = new Map<string, LivePosition>();
        for (const a of data.assets as (LiveAsset & { position: LivePosition | null })[]) {
          const { position, ...asset } = a;
          assets.set(a.id, asset);
          if (position) positions.set(a.id, position);
        }
        cur = {
          ...cur,
          state: 'live',
          problem: '',
          ready: true,
          truncated: data.truncated,
          assets,
          positions,
          events: [],
          notifications: [],
          generation: cur.generation + 1,
        };
      } else if (event === 'position') {
        const { asset, position } = data as { asset: LiveAsset; position: LivePosition };
        const had = cur.positions.get(asset.id);
        cur.assets = new Map(cur.assets).set(asset.id, asset);
        if (!had || had.whenCreated <= position.whenCreated) cur.positions = new Map(cur.positions).set(asset.id, position);
        cur.last = position;
      } else if (event === 'asset') {
        const a = data as LiveAsset;
        cur.assets = new Map(cur.assets).set(a.id, { id: a.id, name: a.name, disabled: a.disabled, ownerId: a.ownerId });
      } else if (event === 'event') {
        cur.events = [data, ...cur.events].slice(0, KEEP);
        if (data.severity === 'ALERT' || data.clearsEventId) cur.alerts++;
      } else if (event === 'notification') {
        cur.notifications = [data, ...cur.notifications].slice(0, KEEP);
      } else if (event === 'end') {
        cur.problem = String(data.message ?? data.reason ?? '');
      }
    };
    const run = async () => {
      let backoff = 1000;
      for (;;) {
        try {
          const r = await fetch('/api/v1/locations/live', {
            headers: { ...authorization(), accept: 'text/event-stream' },
            signal: abort.signal,
          });
          if (!r.ok || !r.body) {
            const body = (await r.json().catch(() => null)) as { message?: string } | null;
            throw new Error(body?.message ?? `HTTP ${r.status}`);
          }
          const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
          const sse = new SseParser();
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            let changed = false;
            for (const m of sse.push(value)) {
              if (!m.event || !m.data) continue;
              apply(m.event, JSON.parse(m.data));
              changed = true;
            }
            if (changed) {
              backoff = 1000;
              publish();
            }
          }
        } catch (x) {
          if (abort.signal.aborted) return;
          cur.problem = (x as Error).message;
        }
        if (abort.signal.aborted) return;
        cur.state = 'retrying';
        publish();
        await new Promise((res) => setTimeout(res, backoff));
        backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
        if (abort.signal.aborted) return;
      }
    };
    setLive(cur);
    void run();
    return () => abort.abort();
  }, [enabled]);
  return live;
}
