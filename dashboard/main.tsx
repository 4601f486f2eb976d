// The dashboard (API guide 9): a page over the public API. Signed in through the built-in
// issuer (authorization code with PKCE for the public `dashboard` client, on the issuer's own
// sign-in page) or with an API key pasted for the session; tokens live in memory only (a reload
// signs out), renewed with the refresh token before they expire. An operator sees every
// integration with its stats; anyone sees its fleet, events, notifications and, read-only, the
// attempts of the integrations covering only its owners (from the result stream).
//
// Everything a customer endpoint answered (response bodies, errors) is shown as text: Preact sets
// text content, and this file never sets HTML. Live attempts arrive over fetch (the credential in a
// header), are rendered in batches (a few a second) and capped, so hundreds a second stay smooth.
import { render } from 'preact';
import { useCallback, useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { feature } from 'topojson-client';

// ---- API ----------------------------------------------------------------------------------------

let credential = '';
class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}
async function api<T = any>(method: string, path: string, body?: unknown): Promise<T> {
  const r = await fetch(`/api/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${credential}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await r.text();
  const parsed = text ? JSON.parse(text) : undefined;
  if (!r.ok) throw new ApiError(r.status, parsed?.message ?? `${r.status}`);
  return parsed as T;
}
/** Every page of a list (Link rel="next"), up to `max` rows. */
async function all<T = any>(path: string, max = 5000): Promise<T[]> {
  const out: T[] = [];
  let url = `/api/v1${path}${path.includes('?') ? '&' : '?'}limit=1000`;
  while (url && out.length < max) {
    const r = await fetch(url, { headers: { authorization: `Bearer ${credential}` } });
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
 * the fleet 2 to 4 times.
 */
export function usePolling(load: () => Promise<void>, intervalMs: number) {
  useEffect(() => {
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
  }, [load, intervalMs]);
}

// ---- the result stream ----------------------------------------------------------------------------

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

const MAX_ATTEMPTS = 2000;
/** The table shows the newest this many of the attempts kept (filters apply to all kept). */
const SHOWN_ROWS = 100;
const FLUSH_MS = 400;

/** Follows the SSE result stream over fetch; renders what arrived a few times a second. */
function useAttemptStream(enabled: boolean, since: string) {
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
          const r = await fetch(`/api/v1/deliveries/stream?since=${encodeURIComponent(since)}`, {
            headers: { authorization: `Bearer ${credential}`, accept: 'text/event-stream', ...(last ? { 'last-event-id': last } : {}) },
            signal: abort.signal,
          });
          if (!r.ok || !r.body) throw new Error(String(r.status));
          setState('live');
          const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
          let buf = '';
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            buf += value;
            let end = buf.indexOf('\n\n');
            while (end >= 0) {
              const block = buf.slice(0, end);
              buf = buf.slice(end + 2);
              const data = block
                .split('\n')
                .filter((l) => l.startsWith('data: '))
                .map((l) => l.slice(6))
                .join('\n');
              const id = /^id: (.*)$/m.exec(block)?.[1];
              if (id) last = id;
              if (data) pending.push(JSON.parse(data) as Attempt);
              end = buf.indexOf('\n\n');
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

// ---- small pieces -------------------------------------------------------------------------------

const time = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString() : '–');
const ms = (n: number | null | undefined) => (n == null ? '–' : `${Math.round(n)} ms`);

function Badge({ ok, text }: { ok: boolean; text: string }) {
  return <span class={ok ? 'badge ok' : 'badge bad'}>{text}</span>;
}

function ErrorLine({ error }: { error: string }) {
  return error ? (
    <p class="error" role="alert">
      {error}
    </p>
  ) : null;
}

// ---- sign-in ------------------------------------------------------------------------------------

interface AuthConfig {
  clientId: string;
  authorizationEndpoint: string;
  tokenEndpoint: string;
}
const authConfig = (): Promise<AuthConfig> => fetch('/dashboard/config.json').then((r) => r.json() as Promise<AuthConfig>);
const redirectUri = () => `${location.origin}/dashboard/`;
const b64url = (bytes: Uint8Array) =>
  btoa(String.fromCharCode(...bytes))
    .replace(/\+/g, '-')
    .replace(/\//g, '_')
    .replace(/=+$/, '');

/** Authorization code with PKCE (S256): the verifier waits in sessionStorage across the redirect, never a token. */
async function startAccountSignIn(): Promise<void> {
  if (!crypto.subtle) throw new Error('Signing in with an account needs https (or localhost); paste an API key instead.');
  const cfg = await authConfig();
  const verifier = b64url(crypto.getRandomValues(new Uint8Array(32)));
  const state = b64url(crypto.getRandomValues(new Uint8Array(16)));
  const challenge = b64url(new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier))));
  sessionStorage.setItem('pkce', JSON.stringify({ verifier, state, hash: location.hash }));
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: cfg.clientId,
    redirect_uri: redirectUri(),
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state,
    scope: 'openid',
  });
  location.assign(`${cfg.authorizationEndpoint}?${q}`);
}

let refreshTimer = 0;
/** Tokens from the token endpoint: the access token becomes the credential, renewed before it expires. */
async function tokenRequest(cfg: AuthConfig, form: Record<string, string>): Promise<void> {
  const r = await fetch(cfg.tokenEndpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ client_id: cfg.clientId, ...form }).toString(),
  });
  const body = (await r.json()) as { access_token?: string; refresh_token?: string; expires_in?: number; error_description?: string };
  if (!r.ok || !body.access_token) throw new Error(body.error_description ?? `sign-in failed (${r.status})`);
  credential = body.access_token;
  clearTimeout(refreshTimer);
  if (body.refresh_token && body.expires_in) {
    const refresh = body.refresh_token;
    refreshTimer = window.setTimeout(
      () => void tokenRequest(cfg, { grant_type: 'refresh_token', refresh_token: refresh }).catch(() => undefined),
      Math.max(10, body.expires_in - 60) * 1000,
    );
  }
}

/**
 * What an error code in the address bar means (RFC 6749 4.1.2.1). The text next to it
 * (error_description) is never shown: anyone can put a link with words of theirs on this origin.
 */
const SIGN_IN_ERRORS: Record<string, string> = {
  access_denied: 'Sign-in was cancelled or refused.',
  invalid_request: 'The sign-in request was refused as malformed; start again.',
  unauthorized_client: 'This dashboard may not sign users in here; ask the operator.',
  unsupported_response_type: 'The sign-in request was refused; start again.',
  invalid_scope: 'The sign-in request asked for access the service does not grant.',
  server_error: 'The sign-in service failed; try again shortly.',
  temporarily_unavailable: 'The sign-in service is busy; try again shortly.',
};

/** Back from the issuer's sign-in page: exchange the code (once) and clean the address bar. */
async function finishAccountSignIn(): Promise<boolean> {
  const params = new URLSearchParams(location.search);
  const saved = sessionStorage.getItem('pkce');
  if (!params.has('code') && !params.has('error')) return false;
  sessionStorage.removeItem('pkce');
  const pending = saved ? (JSON.parse(saved) as { verifier: string; state: string; hash: string }) : null;
  history.replaceState(null, '', `/dashboard/${pending?.hash ?? ''}`);
  if (params.has('error')) throw new Error(SIGN_IN_ERRORS[params.get('error')!] ?? 'Sign-in failed; start again.');
  if (!pending || params.get('state') !== pending.state) throw new Error('This sign-in was not started here; start again.');
  await tokenRequest(await authConfig(), {
    grant_type: 'authorization_code',
    code: params.get('code')!,
    redirect_uri: redirectUri(),
    code_verifier: pending.verifier,
  });
  return true;
}

/** Operator or not: only an operator may list users (customers may list their integrations too). */
async function isAdmin(): Promise<boolean> {
  await api('GET', '/owners?limit=1');
  try {
    await api('GET', '/users?limit=1');
    return true;
  } catch (x) {
    if (x instanceof ApiError && x.status === 403) return false;
    throw x;
  }
}

function SignIn({ onSignedIn, error: initialError }: { onSignedIn: (admin: boolean) => void; error: string }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState(initialError);
  useEffect(() => setError(initialError), [initialError]);
  const submit = async (e: Event) => {
    e.preventDefault();
    credential = key.trim();
    try {
      onSignedIn(await isAdmin());
    } catch (x) {
      credential = '';
      setError(x instanceof ApiError && x.status === 401 ? 'That key was not accepted.' : `Sign-in failed: ${(x as Error).message}`);
    }
  };
  const account = () => startAccountSignIn().catch((x: Error) => setError(x.message));
  return (
    <main class="signin">
      <h1>Asset tracking</h1>
      <button type="button" class="primary" onClick={account}>
        Sign in with your account
      </button>
      <p class="hint">or</p>
      <form onSubmit={submit}>
        <label for="key">API key or access token</label>
        <input
          id="key"
          type="password"
          autocomplete="off"
          value={key}
          onInput={(e) => setKey((e.target as HTMLInputElement).value)}
          placeholder="atk_..."
        />
        <button type="submit" disabled={!key.trim()}>
          Sign in with the key
        </button>
        <p class="hint">Kept in this tab's memory only: a reload signs you out.</p>
      </form>
      <ErrorLine error={error} />
    </main>
  );
}

// ---- integrations -------------------------------------------------------------------------------

interface Integration {
  id: string;
  name: string;
  channel: string;
  enabled: boolean;
  destination?: string;
  health?: 'ok' | 'failing' | 'disabled';
  disabledReason?: string | null;
  healthLog?: { at: string; status: string; detail: string }[];
  stats?: {
    pending: number;
    delivered: { lastHour: number; lastDay: number };
    failed: { lastHour: number; lastDay: number };
    lastError: string | null;
    lastErrorAt: string | null;
    lastSuccessAt: string | null;
    pausedUntil: string | null;
    p50LatencyMs: number | null;
    p99LatencyMs: number | null;
  };
}

function Integrations({ admin, attempts }: { admin: boolean; attempts: Attempt[] }) {
  const [list, setList] = useState<Integration[] | null>(null);
  const [error, setError] = useState('');
  const load = useCallback(async () => {
    if (!admin) return;
    try {
      // One request for the list and every integration's stats.
      setList(await all<Integration>('/integrations?stats=true'));
    } catch (x) {
      setError((x as Error).message);
    }
  }, [admin]);
  usePolling(load, 15_000);
  const toggle = async (i: Integration) => {
    await api('PATCH', `/integrations/${i.id}`, { enabled: !i.enabled }).catch((x: Error) => setError(x.message));
    void load();
  };
  // A customer's credential lists no integrations: it sees those its stream shows.
  const seen = useMemo(() => {
    const m = new Map<string, { channel: string; ok: number; failed: number; last: string }>();
    for (const a of attempts) {
      const s = m.get(a.integrationId) ?? { channel: a.channel, ok: 0, failed: 0, last: a.whenAttempted };
      if (a.success) s.ok++;
      else s.failed++;
      m.set(a.integrationId, s);
    }
    return m;
  }, [attempts]);
  const byChannel = (ch: string) => (list ?? []).filter((i) => i.channel === ch);
  return (
    <section>
      <h2>Integrations</h2>
      <ErrorLine error={error} />
      {admin ? (
        ['webhook', 'mqtt', 'kafka'].map((ch) =>
          byChannel(ch).length ? (
            <div key={ch}>
              <h3>{ch}</h3>
              <table class="grid">
                <thead>
                  <tr>
                    <th>name</th>
                    <th>state</th>
                    <th>backlog</th>
                    <th>delivered 1 h / 24 h</th>
                    <th>failed 1 h / 24 h</th>
                    <th>p50 / p99</th>
                    <th>last error</th>
                    <th />
                  </tr>
                </thead>
                <tbody>
                  {byChannel(ch).map((i) => (
                    <tr key={i.id}>
                      <td>
                        <a href={`#/integrations/${i.id}`}>{i.name}</a>
                      </td>
                      <td>
                        {i.stats?.pausedUntil && Date.parse(i.stats.pausedUntil) > Date.now() ? (
                          <Badge ok={false} text={`paused until ${time(i.stats.pausedUntil)}`} />
                        ) : (
                          <Badge ok={i.enabled} text={i.enabled ? 'enabled' : 'disabled'} />
                        )}
                      </td>
                      <td>{i.stats?.pending ?? '–'}</td>
                      <td>
                        {i.stats?.delivered.lastHour ?? '–'} / {i.stats?.delivered.lastDay ?? '–'}
                      </td>
                      <td>
                        {i.stats?.failed.lastHour ?? '–'} / {i.stats?.failed.lastDay ?? '–'}
                      </td>
                      <td>
                        {ms(i.stats?.p50LatencyMs)} / {ms(i.stats?.p99LatencyMs)}
                      </td>
                      <td class="text">{i.stats?.lastError ? `${time(i.stats.lastErrorAt)}: ${i.stats.lastError}` : '–'}</td>
                      <td>
                        <button type="button" onClick={() => toggle(i)}>
                          {i.enabled ? 'Disable' : 'Enable'}
                        </button>
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          ) : null,
        )
      ) : (
        <table class="grid">
          <thead>
            <tr>
              <th>integration</th>
              <th>channel</th>
              <th>succeeded / failed (streamed here)</th>
            </tr>
          </thead>
          <tbody>
            {[...seen].map(([id, s]) => (
              <tr key={id}>
                <td>
                  <a href={`#/integrations/${id}`}>{id}</a>
                </td>
                <td>{s.channel}</td>
                <td>
                  {s.ok} / {s.failed}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {admin && list?.length === 0 ? <p>No integrations yet.</p> : null}
    </section>
  );
}

function IntegrationPage({ id, admin, attempts }: { id: string; admin: boolean; attempts: Attempt[] }) {
  const [integration, setIntegration] = useState<Integration | null>(null);
  const [status, setStatus] = useState<'all' | 'ok' | 'failed'>('all');
  const [from, setFrom] = useState('');
  const [to, setTo] = useState('');
  const [message, setMessage] = useState('');
  useEffect(() => {
    if (admin) api<Integration>('GET', `/integrations/${id}`).then(setIntegration, (x: Error) => setMessage(x.message));
  }, [id, admin]);
  const shown = attempts.filter(
    (a) =>
      a.integrationId === id &&
      (status === 'all' || (status === 'ok') === a.success) &&
      (!from || a.whenAttempted >= new Date(from).toISOString()) &&
      (!to || a.whenAttempted < new Date(to).toISOString()),
  );
  const redeliver = async (a: Attempt) => {
    try {
      await api('POST', `/integrations/${id}/deliveries/${a.deliveryId}/redeliver`);
      setMessage(`Delivery ${a.deliveryId} queued again.`);
    } catch (x) {
      setMessage(`Redeliver failed: ${(x as Error).message}`);
    }
  };
  const redeliverRange = async () => {
    try {
      const f = from ? new Date(from) : new Date(Date.now() - 86400_000);
      const t = to ? new Date(to) : new Date(Date.now() + 60_000);
      const r = await api<{ count: number }>('POST', `/integrations/${id}/deliveries/redeliver`, {
        status: 'FAILED',
        from: f.toISOString(),
        to: t.toISOString(),
      });
      setMessage(`${r.count} failed deliveries queued again.`);
    } catch (x) {
      setMessage(`Redeliver failed: ${(x as Error).message}`);
    }
  };
  const test = async () => {
    const url = integration?.destination;
    if (!url) return;
    try {
      const r = await api<{ success: boolean; status: number | null; responseTimeMs: number; error: string | null }>(
        'POST',
        '/webhooks/test',
        {
          url,
          integrationId: id,
        },
      );
      setMessage(r.success ? `Test event delivered: ${r.status} in ${r.responseTimeMs} ms.` : `Test event failed: ${r.error ?? r.status}`);
    } catch (x) {
      setMessage(`Test failed: ${(x as Error).message}`);
    }
  };
  return (
    <section>
      <h2>{integration?.name ?? `Integration ${id}`}</h2>
      {integration ? (
        <p class="text">
          {integration.channel} to {integration.destination ?? '(broker)'}
        </p>
      ) : null}
      {integration?.health && integration.health !== 'ok' ? (
        <p class={`health ${integration.health}`}>
          {integration.health === 'disabled'
            ? `Disabled: ${integration.disabledReason ?? ''}`
            : 'Failing: every attempt has failed for an hour or more'}
        </p>
      ) : null}
      {integration?.healthLog?.length ? (
        <details>
          <summary>Health changes</summary>
          <ul>
            {integration.healthLog.map((h) => (
              <li key={`${h.at}${h.status}`}>
                {h.at} {h.status}: {h.detail}
              </li>
            ))}
          </ul>
        </details>
      ) : null}
      <div class="filters">
        <label>
          status{' '}
          <select value={status} onChange={(e) => setStatus((e.target as HTMLSelectElement).value as typeof status)}>
            <option value="all">all</option>
            <option value="ok">succeeded</option>
            <option value="failed">failed</option>
          </select>
        </label>
        <label>
          from <input type="datetime-local" value={from} onInput={(e) => setFrom((e.target as HTMLInputElement).value)} />
        </label>
        <label>
          to <input type="datetime-local" value={to} onInput={(e) => setTo((e.target as HTMLInputElement).value)} />
        </label>
        {admin ? (
          <button type="button" onClick={redeliverRange}>
            Redeliver failed in range
          </button>
        ) : null}
        {admin && integration?.channel === 'webhook' ? (
          <button type="button" onClick={test}>
            Send test event
          </button>
        ) : null}
      </div>
      <p class="status" role="status">
        {message}
      </p>
      <table class="grid attempts">
        <thead>
          <tr>
            <th>time</th>
            <th>event</th>
            <th>attempt</th>
            <th>result</th>
            <th>response time</th>
            <th>receipt</th>
            <th>error / response</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {shown.slice(0, SHOWN_ROWS).map((a) => (
            <tr key={`${a.requestId ?? ''}${a.deliveryId}.${a.attempt}.${a.whenAttempted}`} class={a.success ? '' : 'failed'}>
              <td>{time(a.whenAttempted)}</td>
              <td>
                {a.objectType} {a.deliveryId}
              </td>
              <td>{a.attempt}</td>
              <td>
                <Badge ok={a.success} text={a.success ? `OK ${a.httpStatus ?? ''}` : `failed ${a.httpStatus ?? ''}`} />
              </td>
              <td>{ms(a.responseTimeMs)}</td>
              <td class="text">{a.receiptId ?? '–'}</td>
              <td class="text excerpt" title={[a.error, a.responseBody?.slice(0, 2000)].filter(Boolean).join('\n')}>
                {[a.error, a.responseBody?.slice(0, 300)].filter(Boolean).join(' · ') || '–'}
              </td>
              <td>
                {admin ? (
                  <button type="button" onClick={() => redeliver(a)}>
                    Redeliver
                  </button>
                ) : null}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {shown.length === 0 ? <p>No attempts in this window yet; new ones appear as they happen.</p> : null}
    </section>
  );
}

// ---- fleet --------------------------------------------------------------------------------------

interface Loc {
  assetId: string;
  latitude: number;
  longitude: number;
  whenCreated: string;
}
interface Asset {
  id: string;
  name: string;
  disabled: boolean;
}
interface Zone {
  id: string;
  name: string;
  geometry: { type: 'Polygon' | 'MultiPolygon'; coordinates: any } | null;
  circle: { latitude: number; longitude: number; radiusMeters: number } | null;
}

let land: any = null;
async function loadLand() {
  if (!land) {
    const topo = await (await fetch('/dashboard/land-110m.json')).json();
    land = feature(topo, topo.objects.land);
  }
  return land;
}

function FleetMap({
  positions,
  zones,
  track,
  selected,
  onSelect,
}: {
  positions: (Loc & { name: string })[];
  zones: Zone[];
  track: Loc[];
  selected: string | null;
  onSelect: (id: string) => void;
}) {
  const canvas = useRef<HTMLCanvasElement>(null);
  const [geo, setGeo] = useState<any>(null);
  useEffect(() => {
    void loadLand().then(setGeo);
  }, []);
  useEffect(() => {
    const c = canvas.current;
    if (!c) return;
    const w = c.clientWidth;
    const h = c.clientHeight;
    c.width = w * devicePixelRatio;
    c.height = h * devicePixelRatio;
    const g = c.getContext('2d')!;
    g.scale(devicePixelRatio, devicePixelRatio);
    const x = (lon: number) => ((lon + 180) / 360) * w;
    const y = (lat: number) => ((90 - lat) / 180) * h;
    g.fillStyle = '#dfeaf3';
    g.fillRect(0, 0, w, h);
    // A ring cut at the antimeridian has edges along it (lon 180 to -180): never drawn across the map.
    const ring = (coords: number[][]) => {
      let prev: number | undefined;
      for (const [lon, lat] of coords) {
        if (prev === undefined || Math.abs(lon! - prev) > 180) g.moveTo(x(lon!), y(lat!));
        else g.lineTo(x(lon!), y(lat!));
        prev = lon;
      }
    };
    if (geo) {
      g.fillStyle = '#f6f3ea';
      g.strokeStyle = '#c9c2ad';
      g.beginPath();
      for (const f of geo.features) {
        const polys = f.geometry.type === 'Polygon' ? [f.geometry.coordinates] : f.geometry.coordinates;
        for (const p of polys) for (const r of p) ring(r);
      }
      g.fill('evenodd');
      g.stroke();
    }
    g.strokeStyle = '#7a4fc9';
    g.fillStyle = 'rgba(122,79,201,0.15)';
    for (const z of zones) {
      g.beginPath();
      if (z.circle) {
        const r = (z.circle.radiusMeters / 111_320) * (w / 360);
        g.arc(x(z.circle.longitude), y(z.circle.latitude), Math.max(r, 3), 0, 2 * Math.PI);
      } else if (z.geometry) {
        const polys = z.geometry.type === 'Polygon' ? [z.geometry.coordinates] : z.geometry.coordinates;
        for (const p of polys) for (const r of p) ring(r);
      }
      g.fill();
      g.stroke();
    }
    if (track.length > 1) {
      g.strokeStyle = '#d9480f';
      g.lineWidth = 2;
      g.beginPath();
      track.forEach((p, i) => (i ? g.lineTo(x(p.longitude), y(p.latitude)) : g.moveTo(x(p.longitude), y(p.latitude))));
      g.stroke();
      g.lineWidth = 1;
    }
    for (const p of positions) {
      g.fillStyle = p.assetId === selected ? '#d9480f' : '#1864ab';
      g.beginPath();
      g.arc(x(p.longitude), y(p.latitude), p.assetId === selected ? 5 : 3, 0, 2 * Math.PI);
      g.fill();
    }
  }, [geo, positions, zones, track, selected]);
  const click = (e: MouseEvent) => {
    const c = canvas.current!;
    const rect = c.getBoundingClientRect();
    const px = e.clientX - rect.left;
    const py = e.clientY - rect.top;
    let best: string | null = null;
    let bestD = 64;
    for (const p of positions) {
      const dx = ((p.longitude + 180) / 360) * rect.width - px;
      const dy = ((90 - p.latitude) / 180) * rect.height - py;
      if (dx * dx + dy * dy < bestD) {
        bestD = dx * dx + dy * dy;
        best = p.assetId;
      }
    }
    if (best) onSelect(best);
  };
  return <canvas ref={canvas} class="map" data-assets={positions.length} onClick={click} aria-label="Fleet map" />;
}

function Fleet() {
  const [assets, setAssets] = useState<Asset[]>([]);
  const [latest, setLatest] = useState<Loc[]>([]);
  const [zones, setZones] = useState<Zone[]>([]);
  const [events, setEvents] = useState<any[]>([]);
  const [notifications, setNotifications] = useState<any[]>([]);
  const [showDisabled, setShowDisabled] = useState(false);
  const [selected, setSelected] = useState<string | null>(null);
  const [track, setTrack] = useState<Loc[]>([]);
  const [error, setError] = useState('');
  // Positions, events and notifications every 30 s; assets and zones, which change rarely, every 5 minutes.
  const round = useRef(0);
  const load = useCallback(async () => {
    try {
      const full = round.current++ % 10 === 0;
      const [l, e, n, a, z] = await Promise.all([
        all<Loc>('/locations/latest'),
        api<any[]>('GET', '/events?limit=20'),
        api<any[]>('GET', '/notifications?limit=20'),
        full ? all<Asset>('/assets') : undefined,
        full ? all<Zone>('/zones') : undefined,
      ]);
      setLatest(l);
      setEvents(e);
      setNotifications(n);
      if (a) setAssets(a);
      if (z) setZones(z);
    } catch (x) {
      setError((x as Error).message);
    }
  }, []);
  usePolling(load, 30_000);
  useEffect(() => {
    if (!selected) return;
    const since = new Date(Date.now() - 86400_000).toISOString();
    api<Loc[]>('GET', `/locations?assetId=${selected}&from=${encodeURIComponent(since)}&order=asc&limit=1000`).then(setTrack, () =>
      setTrack([]),
    );
  }, [selected, latest]);
  const byId = useMemo(() => new Map(assets.map((a) => [a.id, a])), [assets]);
  const positions = latest
    .filter((l) => showDisabled || !byId.get(l.assetId)?.disabled)
    .map((l) => ({ ...l, name: byId.get(l.assetId)?.name ?? l.assetId }));
  const chosen = selected ? byId.get(selected) : undefined;
  return (
    <section class="fleet">
      <div class="toolbar">
        <h2>Fleet</h2>
        <span>
          {positions.length} of {assets.length} assets on the map
        </span>
        <label>
          <input type="checkbox" checked={showDisabled} onChange={(e) => setShowDisabled((e.target as HTMLInputElement).checked)} /> show
          disabled assets
        </label>
      </div>
      <ErrorLine error={error} />
      <FleetMap positions={positions} zones={zones} track={track} selected={selected} onSelect={setSelected} />
      {chosen ? (
        <p class="selected">
          {chosen.name}: {track.length} positions in the last 24 h
        </p>
      ) : (
        <p class="hint">Click an asset for its track.</p>
      )}
      <div class="columns">
        <div>
          <h3>Latest events</h3>
          <ul class="feed">
            {events.map((e) => (
              <li key={e.id} class={e.severity === 'ALERT' ? 'alert' : ''}>
                {time(e.whenCreated)} · {byId.get(e.assetId)?.name ?? e.assetId} · {e.subject}
              </li>
            ))}
          </ul>
        </div>
        <div>
          <h3>Latest notifications</h3>
          <ul class="feed">
            {notifications.map((n) => (
              <li key={n.id}>
                {time(n.whenCreated)} · {n.assetName} · {n.subject}
              </li>
            ))}
          </ul>
        </div>
      </div>
    </section>
  );
}

// ---- the app ------------------------------------------------------------------------------------

function useHash() {
  const [hash, setHash] = useState(location.hash || '#/integrations');
  useEffect(() => {
    const on = () => setHash(location.hash || '#/integrations');
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return hash;
}

function App() {
  const [session, setSession] = useState<{ admin: boolean } | null>(null);
  const [signInError, setSignInError] = useState('');
  const hash = useHash();
  useEffect(() => {
    finishAccountSignIn()
      .then(async (done) => {
        if (done) setSession({ admin: await isAdmin() });
      })
      .catch((x: Error) => {
        credential = '';
        setSignInError(x.message);
      });
  }, []);
  const since = useMemo(() => new Date(Date.now() - 3600_000).toISOString(), [session]);
  const { attempts, state } = useAttemptStream(session !== null, since);
  if (!session) return <SignIn onSignedIn={(admin) => setSession({ admin })} error={signInError} />;
  const integration = /^#\/integrations\/([\w-]+)$/.exec(hash)?.[1];
  const signOut = () => {
    credential = '';
    clearTimeout(refreshTimer);
    setSession(null);
  };
  return (
    <div class="app">
      <header>
        <strong>Asset tracking</strong>
        <nav>
          <a href="#/integrations" class={hash.startsWith('#/integrations') ? 'active' : ''}>
            Deliveries
          </a>
          <a href="#/fleet" class={hash === '#/fleet' ? 'active' : ''}>
            Fleet
          </a>
        </nav>
        <span class="stream">
          stream: {state} · {attempts.length} attempts
        </span>
        <span>{session.admin ? 'operator' : 'customer'}</span>
        <button type="button" onClick={signOut}>
          Sign out
        </button>
      </header>
      {hash === '#/fleet' ? (
        <Fleet />
      ) : integration ? (
        <IntegrationPage id={integration} admin={session.admin} attempts={attempts} />
      ) : (
        <Integrations admin={session.admin} attempts={attempts} />
      )}
    </div>
  );
}

render(<App />, document.getElementById('app')!);
