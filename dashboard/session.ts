// Signing the dashboard in through the built-in issuer (API guide 2 and 12): authorization code
// with PKCE for the public `dashboard` client. Tokens live in this module's memory only (api.ts
// holds the access token), renewed with the refresh token before they expire.
//
// A reload, or a bookmark opened in a new tab, signs in again without a click: after a sign-in
// through the issuer the page keeps one word in localStorage (MARKER: that the last sign-in was an
// account's; never a token), and a page loaded with it goes to the authorization endpoint with
// `prompt=none`. The issuer's sign-in session (its HttpOnly cookie) answers with a code at once, or
// with `error=login_required` when it has ended; then the sign-in card shows, the marker is
// forgotten, and no second silent try is made. Either way the page comes back to the address it
// was on (its hash waits with the PKCE verifier in sessionStorage). A pasted API key is never
// stored: signing in with one forgets the marker, and a reload asks for the key again. Signing out
// forgets the marker and ends the issuer's session.
import { setCredential } from './api.js';
import { replaceAddress } from './router.js';

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

/** localStorage: 'account' while the last sign-in in this browser was through the issuer. */
export const MARKER = 'dashboard.signIn';
const remembered = () => {
  try {
    return localStorage.getItem(MARKER) === 'account';
  } catch {
    return false; // storage refused (a privacy setting): a reload shows the card
  }
};
const remember = (on: boolean) => {
  try {
    if (on) localStorage.setItem(MARKER, 'account');
    else localStorage.removeItem(MARKER);
  } catch {
    // storage refused: nothing remembered
  }
};
/** A sign-in that is not an account's (a pasted key): the next load asks again. */
export const forgetAccount = () => remember(false);

/** What waits in sessionStorage across the redirect: never a token. */
interface Pending {
  verifier: string;
  state: string;
  /** The page to come back to. */
  hash: string;
  /** A `prompt=none` try, made by the page itself. */
  silent?: boolean;
}
const PENDING = 'pkce';
const takePending = (): Pending | null => {
  const saved = sessionStorage.getItem(PENDING);
  sessionStorage.removeItem(PENDING);
  try {
    return saved ? (JSON.parse(saved) as Pending) : null;
  } catch {
    return null;
  }
};

/**
 * Authorization code with PKCE (S256): the verifier waits in sessionStorage across the redirect,
 * with the page to come back to. Silent: `prompt=none`, replacing this history entry (back and
 * forward never land on the issuer's redirect).
 */
export async function startAccountSignIn(silent = false): Promise<void> {
  if (!crypto.subtle) throw new Error('Signing in with an account needs https (or localhost); paste an API key instead.');
  const cfg = await authConfig();
  const verifier = b64url(crypto.getRandomValues(new Uint8Array(32)));
  const state = b64url(crypto.getRandomValues(new Uint8Array(16)));
  const challenge = b64url(new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier))));
  const pending: Pending = { verifier, state, hash: location.hash, ...(silent ? { silent } : {}) };
  sessionStorage.setItem(PENDING, JSON.stringify(pending));
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: cfg.clientId,
    redirect_uri: redirectUri(),
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state,
    scope: 'openid',
    ...(silent ? { prompt: 'none' } : {}),
  });
  const to = `${cfg.authorizationEndpoint}?${q}`;
  if (silent) location.replace(to);
  else location.assign(to);
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
 * What an error code in the address bar means (RFC 6749 4.1.2.1; OpenID Connect Core 3.1.2.6 for
 * `prompt=none`). The text next to it (error_description) is never shown: anyone can put a link
 * with words of theirs on this origin.
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
/** The words for a silent try's refusal: the sign-in session has ended (or never was). */
const SIGN_IN_ENDED = 'Your sign-in has ended: sign in again.';

/**
 * Whether the page has a first step to take (back from the issuer, a silent try to make or one to
 * give up): known at once, so that without one the card shows with the first render.
 */
export function sessionToStart(): boolean {
  const params = new URLSearchParams(location.search);
  return params.has('code') || params.has('error') || sessionStorage.getItem(PENDING) !== null || remembered();
}

/** How the page starts: signed in, on its way to the issuer, or showing the sign-in card. */
export type Start = { to: 'app' } | { to: 'issuer' } | { to: 'card'; notice?: string };

/**
 * The page's first step. Back from the issuer: exchange the code (once), clean the address bar and
 * return to the page the sign-in began on. Else, after an account's sign-in in this browser: one
 * silent try (`prompt=none`). Else the card. Throws what the card should say.
 */
export async function startSession(): Promise<Start> {
  const params = new URLSearchParams(location.search);
  const pending = takePending();
  if (params.has('code') || params.has('error')) {
    replaceAddress(`/dashboard/${pending?.hash ?? location.hash}`);
    const error = params.get('error');
    if (error) {
      if (pending?.silent) {
        // One silent try per load: the card, with no second try until an account signs in again.
        remember(false);
        return {
          to: 'card',
          notice: /^(login|interaction|consent|account_selection)_required$/.test(error) ? SIGN_IN_ENDED : SIGN_IN_ERRORS[error],
        };
      }
      throw new Error(SIGN_IN_ERRORS[error] ?? 'Sign-in failed; start again.');
    }
    if (!pending || params.get('state') !== pending.state) {
      // A code this page did not ask for (back to the issuer's address after a sign-in, a link):
      // never exchanged. With an account's sign-in behind it, the page signs in as on a reload.
      if (remembered()) return silently();
      throw new Error('This sign-in was not started here; start again.');
    }
    try {
      await tokenRequest(await authConfig(), {
        grant_type: 'authorization_code',
        code: params.get('code')!,
        redirect_uri: redirectUri(),
        code_verifier: pending.verifier,
      });
    } catch (x) {
      remember(false);
      throw x;
    }
    remember(true);
    return { to: 'app' };
  }
  // A silent try that never came back (the issuer's address left with back): no second one.
  if (pending?.silent) {
    remember(false);
    return { to: 'card' };
  }
  return remembered() ? silently() : { to: 'card' };
}

async function silently(): Promise<Start> {
  if (!crypto.subtle) return { to: 'card' };
  try {
    await startAccountSignIn(true);
    return { to: 'issuer' };
  } catch {
    remember(false);
    return { to: 'card' };
  }
}

/** Signing out: the credential and the marker forgotten, the issuer's sign-in session ended (its cookie goes with this same-origin request). */
export async function endSession(): Promise<void> {
  setCredential('');
  clearTimeout(refreshTimer);
  remember(false);
  const cfg = await authConfig().catch(() => null);
  if (cfg) await fetch(cfg.logoutEndpoint, { method: 'POST' }).catch(() => undefined);
}
