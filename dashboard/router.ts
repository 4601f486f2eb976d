// Where the dashboard is, in its address (API guide 12, "Links"): the hash names the page and,
// after a `?`, the state of it a bookmark should keep: `#/fleet`, `#/assets/<id>?range=7d`,
// `#/alarms?kind=Power%20off&zone=<id>`. Going to another page adds a history entry (a link or
// the nav sets the hash), so back and forward move between pages; changing a page's filters or
// range replaces the current entry, so back leaves the page rather than undoing a filter. A
// reload, a bookmark or a sign-in that comes back from the issuer returns to the same address.
import { useEffect, useMemo, useState } from 'preact/hooks';

/** The page shown for an empty hash. */
export const HOME = '#/integrations';

export interface Route {
  /** The page: `#/fleet`, `#/assets/<id>`, ... */
  path: string;
  /** The page's state after the `?`. */
  params: URLSearchParams;
}

export function parseHash(hash: string): Route {
  const h = hash && hash !== '#' && hash !== '#/' ? hash : HOME;
  const i = h.indexOf('?');
  return i < 0 ? { path: h, params: new URLSearchParams() } : { path: h.slice(0, i), params: new URLSearchParams(h.slice(i + 1)) };
}

/** Said on this window when the address changed without a hashchange (history.replaceState). */
const CHANGED = 'dashboard:address';

/** Replaces the current history entry's address (no new entry) and tells every useRoute. */
export function replaceAddress(url: string): void {
  history.replaceState(history.state, '', url);
  dispatchEvent(new Event(CHANGED));
}

/** The page and its state, followed through links, back and forward, and replaced addresses. */
export function useRoute(): Route {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const on = () => setHash(location.hash);
    const events = ['hashchange', 'popstate', CHANGED];
    for (const e of events) addEventListener(e, on);
    // The address may have changed between the first render and now.
    on();
    return () => {
      for (const e of events) removeEventListener(e, on);
    };
  }, []);
  return useMemo(() => parseHash(hash), [hash]);
}

/**
 * Sets some of the current page's state in the address ('' or undefined removes one), replacing
 * the history entry. Names keep their order; the page stays the same.
 */
export function setHashParams(values: Record<string, string | undefined>): void {
  const { path, params } = parseHash(location.hash);
  for (const [k, v] of Object.entries(values)) {
    if (v) params.set(k, v);
    else params.delete(k);
  }
  const q = params.toString();
  replaceAddress(`${location.pathname}${location.search}${path}${q ? `?${q}` : ''}`);
}

/** One piece of the page's state kept in the address: its value ('' when absent) and its setter. */
export function useHashParam(name: string): [string, (value: string) => void] {
  const value = useRoute().params.get(name) ?? '';
  return [value, (v: string) => setHashParams({ [name]: v })];
}
