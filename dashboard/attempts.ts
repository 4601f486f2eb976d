// The result stream (API guide 9): every delivery attempt of the integrations the credential sees,
// followed over fetch (the credential in a header, which EventSource cannot send) and rendered a
// few times a second, the newest MAX_ATTEMPTS kept, so hundreds a second stay smooth. The replay asks
// for those only (`last`): an hour of a busy service is tens of megabytes the page would throw away.
import { useEffect, useState } from 'preact/hooks';
import { authorization } from './api.js';
import { SseParser } from './sse.js';

export interface Attempt {
  integrationId: string;
  channel: string;
  deliveryId: string;
  eventId: string;
  objectType: string;
  attempt: number;
  whenAttempted: string;
  success: boolean;
  httpStatus: number | null;
  responseTimeMs: number | null;
  receiptId: string | null;
  error: string | null;
  responseBody: string | null;
  truncated: boolean;
  requestId?: string;
}

export const MAX_ATTEMPTS = 2000;
/** The table shows the newest this many of the attempts kept (filters apply to all kept). */
export const SHOWN_ROWS = 100;
const FLUSH_MS = 400;

/** Follows the SSE result stream over fetch; renders what arrived a few times a second. */
export function useAttemptStream(enabled: boolean, since: string) {
  const [attempts, setAttempts] = useState<Attempt[]>([]);
  const [state, setState] = useState<'connecting' | 'live' | 'retrying'>('connecting');
  useEffect(() => {
    if (!enabled) return;
    const abort = new AbortController();
    let pending: Attempt[] = [];
    let frame = 0;
    let lastFlush = 0;
    // At most a few renders a second, on an animation frame: hundreds of attempts a second arrive
    // as a handful of batches, not hundreds of renders.
    const flush = () => {
      frame = 0;
      lastFlush = performance.now();
      const batch = pending;
      pending = [];
      setAttempts((cur) => [...batch.reverse(), ...cur].slice(0, MAX_ATTEMPTS));
    };
    let last = '';
    const run = async () => {
      for (;;) {
        try {
          const r = await fetch(`/api/v1/deliveries/stream?since=${encodeURIComponent(since)}&last=${MAX_ATTEMPTS}`, {
            headers: { ...authorization(), accept: 'text/event-stream', ...(last ? { 'last-event-id': last } : {}) },
            signal: abort.signal,
          });
          if (!r.ok || !r.body) throw new Error(String(r.status));
          setState('live');
          const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
          const sse = new SseParser();
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            for (const m of sse.push(value)) {
              if (m.id) last = m.id;
              if (m.data) pending.push(JSON.parse(m.data) as Attempt);
            }
            if (pending.length && !frame) {
              const wait = Math.max(0, FLUSH_MS - (performance.now() - lastFlush));
              frame = window.setTimeout(() => requestAnimationFrame(flush), wait);
            }
          }
        } catch {
          if (abort.signal.aborted) return;
        }
        setState('retrying');
        await new Promise((res) => setTimeout(res, 2000));
      }
    };
    void run();
    return () => {
      abort.abort();
      clearTimeout(frame);
    };
  }, [enabled, since]);
  return { attempts, state };
}
