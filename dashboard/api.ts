// The dashboard's calls to the public API: the credential signed in with (kept in this module's
// memory only, never in browser storage), JSON in and out, every page of a list, and polling that
// stops while the tab is hidden.
import { useEffect } from 'preact/hooks';

let credential = '';
export const setCredential = (c: string) => {
  credential = c;
};
export const authorization = () => ({ authorization: `Bearer ${credential}` });
/** Who the signed-in credential acts as (`user:<sub>`), to say "you" of what it did; '' for an API key. */
export function actor(): string {
  try {
    const part = credential.split('.')[1]!.replace(/-/g, '+').replace(/_/g, '/');
    return `user:${JSON.parse(atob(part)).sub}`;
  } catch {
    return '';
  }
}

/** The signed-in credential as `GET /me` tells it: its actor, owner, scopes and a name to show. */
export interface Me {
  actor: string;
  ownerId: string;
  scopes: string[];
  admin: boolean;
  name: string | null;
}
let meAsked: { credential: string; answer: Promise<Me | null> } | null = null;
/**
 * Who the signed-in credential is (`GET /me`), asked once per credential; null while it cannot be
 * asked (a network failure, a 5xx: asked again next time).
 */
export function me(): Promise<Me | null> {
  if (meAsked?.credential !== credential) {
    const answer: Promise<Me | null> = fetch('/api/v1/me', { headers: authorization() }).then(
      async (r) => {
        if (r.ok) return (await r.json()) as Me;
        if (meAsked?.answer === answer) meAsked = null;
        return null;
      },
      () => {
        if (meAsked?.answer === answer) meAsked = null;
        return null;
      },
    );
    meAsked = { credential, answer };
  }
  return meAsked.answer;
}

/** Whether the signed-in credential has the `write` scope, so a view shows only the forms it may use. */
export async function mayWrite(): Promise<boolean> {
  const m = await me();
  return m !== null && (m.scopes.includes('write') || m.admin);
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export async function api<T = any>(method: string, path: string, body?: unknown): Promise<T> {
  const r = await fetch(`/api/v1${path}`, {
    method,
    headers: { ...authorization(), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await r.text();
  const parsed = text ? JSON.parse(text) : undefined;
  if (!r.ok) throw new ApiError(r.status, parsed?.message ?? `${r.status}`);
  return parsed as T;
}

/** Every page of a list (Link rel="next"), up to `max` rows. */
export async function all<T = any>(path: string, max = 5000): Promise<T[]> {
  const out: T[] = [];
  let url = `/api/v1${path}${path.includes('?') ? '&' : '?'}limit=1000`;
  while (url && out.length < max) {
    const r = await fetch(url, { headers: authorization() });
    if (!r.ok) throw new ApiError(r.status, `${r.status}`);
    out.push(...((await r.json()) as T[]));
    const next = /<([^>]+)>;\s*rel="next"/.exec(r.headers.get('link') ?? '');
    url = next ? new URL(next[1]!).pathname + new URL(next[1]!).search : '';
  }
  return out;
}

/**
 * Calls `load` now and every `intervalMs` while the page is visible; a hidden tab asks for nothing
 * and catches up once when shown again. Each request counts in the credential's hourly limit (1000
 * by default), so a few open tabs must not use it up: the integrations view asks 4 times a minute,
 * the fleet 2 to 4 times. While `enabled` is false it asks for nothing (an asset's commands are
 * followed only while one of them is still on its way).
 */
export function usePolling(load: () => Promise<void>, intervalMs: number, enabled = true) {
  useEffect(() => {
    if (!enabled) return;
    let timer = 0;
    let last = 0;
    let stopped = false;
    const run = () => {
      window.clearTimeout(timer);
      if (stopped || document.visibilityState === 'hidden') return;
      last = Date.now();
      void load().finally(() => {
        if (!stopped && document.visibilityState !== 'hidden') timer = window.setTimeout(run, intervalMs);
      });
    };
    const onVisibility = () => {
      if (document.visibilityState === 'hidden') window.clearTimeout(timer);
      else if (Date.now() - last >= intervalMs) run();
      else timer = window.setTimeout(run, intervalMs - (Date.now() - last));
    };
    run();
    document.addEventListener('visibilitychange', onVisibility);
    return () => {
      stopped = true;
      window.clearTimeout(timer);
      document.removeEventListener('visibilitychange', onVisibility);
    };
  }, [load, intervalMs, enabled]);
}

export const time = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString() : '–');
/** A count and its noun, in the singular for one: "1 hour", "3 hours" (`count` as shown, e.g. with separators). */
export const plural = (n: number, one: string, many = `${one}s`, count = String(n)) => `${count} ${n === 1 ? one : many}`;
export const ms = (n: number | null | undefined) => (n == null ? '–' : `${Math.round(n)} ms`);

/** A file name's safe characters: letters, digits, dot, dash and underscore. */
export const fileSafe = (s: string) => s.replace(/[^\w.-]+/g, '_').replace(/^_+|_+$/g, '') || 'export';

/**
 * Downloads what a list or report answers as a file (`format=csv` in `path`): fetched with the
 * credential (a plain link could not carry it), then saved through a Blob's object URL and an
 * `<a download>` click, under `name` (else the name the answer's Content-Disposition gives).
 */
export async function download(path: string, name?: string): Promise<void> {
  const r = await fetch(`/api/v1${path}`, { headers: authorization() });
  if (!r.ok) {
    const text = await r.text();
    let message = `${r.status}`;
    try {
      message = (JSON.parse(text) as { message?: string }).message ?? message;
    } catch {
      /* not JSON */
    }
    throw new ApiError(r.status, message);
  }
  const blob = await r.blob();
  const given = /filename="([^"]+)"/.exec(r.headers.get('content-disposition') ?? '')?.[1];
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = fileSafe(name ?? given ?? 'export.csv');
  a.hidden = true;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}
