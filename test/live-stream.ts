// A live fleet stream (GET /api/v1/locations/live) as the tests read it: opened with a key, its
// events collected as they arrive (each with the moment it came), read with the dashboard's own
// parser (dashboard/sse.ts).
import { SseParser } from '../dashboard/sse.js';
import { waitFor } from './helpers.js';

export interface SseEvent {
  event: string;
  data: any;
  /** performance.now() when it arrived. */
  at: number;
}

/** Opens a live stream of `key` at `base` and collects its events; `close` ends it. */
export async function openLive(base: string, key: string, query = '') {
  const abort = new AbortController();
  const r = await fetch(`${base}/api/v1/locations/live${query}`, {
    headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream' },
    signal: abort.signal,
  });
  const events: SseEvent[] = [];
  let ended = false;
  let raw = '';
  if (r.status === 200) {
    void (async () => {
      const reader = r.body!.pipeThrough(new TextDecoderStream()).getReader();
      const sse = new SseParser();
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          raw += value;
          for (const m of sse.push(value)) {
            if (m.event) events.push({ event: m.event, data: JSON.parse(m.data), at: performance.now() });
          }
        }
      } catch {
        /* aborted */
      }
      ended = true;
    })();
  }
  return {
    status: r.status,
    body: r.status === 200 ? undefined : await r.json(),
    headers: r.headers,
    events,
    raw: () => raw,
    get ended() {
      return ended;
    },
    close: () => abort.abort(),
    snapshot: () =>
      waitFor(
        () => 'the snapshot',
        async () => events.find((e) => e.event === 'snapshot')?.data,
        10_000,
      ),
  };
}
