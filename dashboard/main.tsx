// The dashboard (API guide 12): a page over the public API. Signed in through the built-in
// issuer (authorization code with PKCE for the public `dashboard` client, on the issuer's own
// sign-in page) or with an API key pasted for the session. Tokens live in memory only, renewed with
// the refresh token before they expire; a reload signs in again with one click through the issuer's
// sign-in session (its HttpOnly cookie), and signing out ends that session. Anyone sees the
// integrations it may see and manages its own (integrations.tsx), its fleet, events,
// notifications, its assets and each asset's page (asset.tsx: temperatures, trips and stops,
// reports), its devices (devices.tsx: last seen, last error) and the audit log of its owners
// (audit.tsx). Lists the API also answers as CSV have
// "Download CSV".
//
// Everything a customer endpoint answered (response bodies, errors) is shown as text: Preact sets
// text content, and no file of the dashboard sets HTML.
import { render } from 'preact';
import { useCallback, useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { ApiError, all, api, type Me, me, plural, setCredential, time, usePolling } from './api.js';
import { AssetList, AssetPage } from './asset.js';
import { useAttemptStream } from './attempts.js';
import { AuditLog } from './audit.js';
import { Devices } from './devices.js';
import { Inbox, useOpenAlerts } from './inbox.js';
import { IntegrationPage, Integrations } from './integrations.js';
import { FleetMap, type MapZone } from './map.js';
import { Acknowledge, DownloadCsv, ErrorLine } from './ui.js';

// ---- sign-in ------------------------------------------------------------------------------------

interface AuthConfig {
  clientId: string;
  authorizationEndpoint: string;
  tokenEndpoint: string;
  logoutEndpoint: string;
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
  setCredential(body.access_token);
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

/** Operator or not (GET /me); a credential the API refuses throws, as any call would. */
async function isAdmin(): Promise<boolean> {
  const m = await api<Me>('GET', '/me');
  return m.admin;
}

function SignIn({ onSignedIn, error: initialError }: { onSignedIn: (admin: boolean) => void; error: string }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState(initialError);
  useEffect(() => setError(initialError), [initialError]);
  const submit = async (e: Event) => {
    e.preventDefault();
    setCredential(key.trim());
    try {
      onSignedIn(await isAdmin());
    } catch (x) {
      setCredential('');
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
      <p class="hint">While your sign-in lasts, this one click is all a reload needs.</p>
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
        <p class="hint">A key is kept in this tab's memory only: a reload asks for it again.</p>
      </form>
      <ErrorLine error={error} />
    </main>
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
const monthAgo = () => encodeURIComponent(new Date(Date.now() - 30 * 86400_000).toISOString());

function Fleet() {
  const [assets, setAssets] = useState<Asset[]>([]);
  const [latest, setLatest] = useState<Loc[]>([]);
  const [zones, setZones] = useState<MapZone[]>([]);
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
        full ? all<MapZone>('/zones') : undefined,
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
            {events.map((e) => (
              <li key={e.id} class={e.severity === 'ALERT' ? 'alert' : ''}>
                {time(e.whenCreated)} · {byId.get(e.assetId)?.name ?? e.assetId} · {e.subject}
                {e.severity === 'ALERT' ? <Acknowledge kind="events" item={e} onDone={() => void load()} /> : null}
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
            {notifications.map((n) => (
              <li key={n.id}>
                {time(n.whenCreated)} · {n.assetName} · {n.subject}
                <Acknowledge kind="notifications" item={n} onDone={() => void load()} />
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

/** Who is signed in, as the header says it: the name, and "operator" for one (said once). */
const who = (name: string | null, admin: boolean) => {
  const role = admin ? 'operator' : 'customer';
  return !name ? role : admin && name !== role ? `${name} · ${role}` : name;
};

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
        setCredential('');
        setSignInError(x.message);
      });
  }, []);
  const since = useMemo(() => new Date(Date.now() - 3600_000).toISOString(), [session]);
  // The header names who is signed in (GET /me, asked once per credential): a user's name, a key's.
  const [name, setName] = useState<string | null>(null);
  useEffect(() => {
    setName(null);
    if (session) void me().then((m) => setName(m?.name ?? null));
  }, [session]);
  const { attempts, state } = useAttemptStream(session !== null, since);
  const openAlerts = useOpenAlerts(session !== null);
  if (!session) return <SignIn onSignedIn={(admin) => setSession({ admin })} error={signInError} />;
  const integration = /^#\/integrations\/([\w-]+)$/.exec(hash)?.[1];
  const asset = /^#\/assets\/([\w-]+)$/.exec(hash)?.[1];
  const signOut = async () => {
    setCredential('');
    clearTimeout(refreshTimer);
    // The issuer's sign-in session ends too (its cookie goes with this same-origin request), and
    // with it every login made through it: the next sign-in asks for the password.
    const cfg = await authConfig().catch(() => null);
    if (cfg) await fetch(cfg.logoutEndpoint, { method: 'POST' }).catch(() => undefined);
    setSession(null);
  };
  return (
    <div class="app">
      <header>
        <strong>Asset tracking</strong>
        <nav>
          <a href="#/integrations" class={hash.startsWith('#/integrations') ? 'active' : ''}>
            Integrations
          </a>
          <a href="#/fleet" class={hash === '#/fleet' ? 'active' : ''}>
            Fleet
          </a>
          <a href="#/assets" class={hash.startsWith('#/assets') ? 'active' : ''}>
            Assets
          </a>
          <a href="#/devices" class={hash === '#/devices' ? 'active' : ''}>
            Devices
          </a>
          <a href="#/alarms" class={hash === '#/alarms' ? 'active' : ''}>
            Alarms{openAlerts && openAlerts !== '0' ? <span class="count"> {openAlerts}</span> : null}
          </a>
          <a href="#/audit" class={hash === '#/audit' ? 'active' : ''}>
            Audit log
          </a>
        </nav>
        <span class="stream">
          stream: {state} · {plural(attempts.length, 'attempt')}
        </span>
        <span class="who" title={session.admin ? 'Operator: sees every owner' : 'Customer: sees its own owners'}>
          {who(name, session.admin)}
        </span>
        <button type="button" onClick={signOut}>
          Sign out
        </button>
      </header>
      {hash === '#/fleet' ? (
        <Fleet />
      ) : hash === '#/alarms' ? (
        <Inbox />
      ) : asset ? (
        <AssetPage key={asset} id={asset} />
      ) : hash === '#/assets' ? (
        <AssetList />
      ) : hash === '#/devices' ? (
        <Devices admin={session.admin} />
      ) : hash === '#/audit' ? (
        <AuditLog admin={session.admin} />
      ) : integration ? (
        <IntegrationPage id={integration} admin={session.admin} attempts={attempts} />
      ) : (
        <Integrations admin={session.admin} attempts={attempts} />
      )}
    </div>
  );
}

render(<App />, document.getElementById('app')!);
