// The dashboard (API guide 12): a page over the public API. Signed in through the built-in
// issuer (authorization code with PKCE for the public `dashboard` client, on the issuer's own
// sign-in page) or with an API key pasted for the session. Tokens live in memory only, renewed with
// the refresh token before they expire; a reload signs in again with no click through the issuer's
// sign-in session (its HttpOnly cookie; session.ts), a pasted key is asked for again, and signing
// out ends that session. Every page has its address (router.ts), a reload returns to it. Anyone sees the
// integrations it may see and manages its own (integrations.tsx), its fleet, events,
// notifications, its assets and each asset's page (asset.tsx: temperatures, trips and stops,
// reports), its devices (devices.tsx: last seen, last error) and the audit log of its owners
// (audit.tsx). Lists the API also answers as CSV have
// "Download CSV".
//
// Everything a customer endpoint answered (response bodies, errors) is shown as text: Preact sets
// text content, and no file of the dashboard sets HTML.
import { render } from 'preact';
import { useEffect, useMemo, useState } from 'preact/hooks';
import { ApiError, api, type Me, me, plural, setCredential } from './api.js';
import { AssetPage } from './asset.js';
import { AssetList } from './assets.js';
import { useAttemptStream } from './attempts.js';
import { AuditLog } from './audit.js';
import { Devices } from './devices.js';
import { Inbox, useOpenAlerts } from './inbox.js';
import { IntegrationPage, Integrations } from './integrations.js';
import { useRoute } from './router.js';
import { endSession, forgetAccount, sessionToStart, startAccountSignIn, startSession } from './session.js';
import { Fleet } from './fleet.js';
import { useLive } from './live.js';
import { ErrorLine } from './ui.js';

// ---- sign-in (session.ts: the issuer, the silent sign-in of a reload) ------------------------

/** Operator or not (GET /me); a credential the API refuses throws, as any call would. */
async function isAdmin(): Promise<boolean> {
  const m = await api<Me>('GET', '/me');
  return m.admin;
}

function SignIn({ onSignedIn, error: initialError, notice }: { onSignedIn: (admin: boolean) => void; error: string; notice: string }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState(initialError);
  useEffect(() => setError(initialError), [initialError]);
  const submit = async (e: Event) => {
    e.preventDefault();
    setCredential(key.trim());
    try {
      const admin = await isAdmin();
      // A key is never stored: the next load asks for it again (no silent account sign-in).
      forgetAccount();
      onSignedIn(admin);
    } catch (x) {
      setCredential('');
      setError(x instanceof ApiError && x.status === 401 ? 'That key was not accepted.' : `Sign-in failed: ${(x as Error).message}`);
    }
  };
  const account = () => startAccountSignIn().catch((x: Error) => setError(x.message));
  return (
    <main class="signin">
      <h1>Asset tracking</h1>
      {notice ? <p class="hint">{notice}</p> : null}
      <button type="button" class="primary" onClick={account}>
        Sign in with your account
      </button>
      <p class="hint">While your sign-in lasts, a reload signs you in again by itself.</p>
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

// ---- fleet: fleet.tsx, on the live stream (live.ts) ------------------------------------------

// ---- the app ------------------------------------------------------------------------------------

/** Who is signed in, as the header says it: the name, and "operator" for one (said once). */
const who = (name: string | null, admin: boolean) => {
  const role = admin ? 'operator' : 'customer';
  return !name ? role : admin && name !== role ? `${name} · ${role}` : name;
};

function App() {
  const [session, setSession] = useState<{ admin: boolean } | null>(null);
  const [signInError, setSignInError] = useState('');
  // While there is a first step to take (session.ts: back from the issuer, a silent sign-in) the
  // page says it is signing in, rather than flash the card; without one the card shows at once.
  const [card, setCard] = useState<{ notice: string } | null>(() => (sessionToStart() ? null : { notice: '' }));
  // The page, without its state: `#/fleet`, `#/assets/<id>` (router.ts).
  const hash = useRoute().path;
  useEffect(() => {
    if (card) return;
    startSession()
      .then(async (start) => {
        if (start.to === 'app') setSession({ admin: await isAdmin() });
        else if (start.to === 'card') setCard({ notice: start.notice ?? '' });
      })
      .catch((x: Error) => {
        setCredential('');
        setSignInError(x.message);
        setCard({ notice: '' });
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
  // The live fleet, held open while signed in: the fleet page's first view and updates, and what
  // makes the header's alarm count read again (no polling).
  const live = useLive(session !== null);
  const openAlerts = useOpenAlerts(session !== null, `${live.generation}.${live.alerts}`);
  if (!session && !card) {
    return (
      <main class="signin">
        <h1>Asset tracking</h1>
        <p class="hint" role="status">
          Signing in…
        </p>
      </main>
    );
  }
  if (!session) return <SignIn onSignedIn={(admin) => setSession({ admin })} error={signInError} notice={card?.notice ?? ''} />;
  const integration = /^#\/integrations\/([\w-]+)$/.exec(hash)?.[1];
  const asset = /^#\/assets\/([\w-]+)$/.exec(hash)?.[1];
  const signOut = async () => {
    // The issuer's sign-in session ends too, and with it every login made through it: the next
    // sign-in asks for the password, and a reload makes no silent try.
    await endSession();
    setSignInError('');
    setCard({ notice: '' });
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
        <Fleet live={live} />
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
