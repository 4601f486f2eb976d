// The authorization endpoint of the built-in issuer (authorization code with PKCE, RFC 6749 4.1
// and RFC 7636), for public clients such as the dashboard: GET shows the issuer's own sign-in page,
// POST checks the user and redirects back with a one-time code, which the token endpoint exchanges
// for tokens against the PKCE verifier. Only S256; a redirect goes only to a path the client lists,
// on the service's configured public origin (PUBLIC_URL), never on one taken from the request's
// Host header (whoever points a name of theirs at the service would collect codes); the form is
// accepted only when its Origin is that origin (no sign-in posted from another site).
//
// A sign-in also opens a sign-in session (as Keycloak's SSO session): a random value in an
// HttpOnly, SameSite=Strict cookie scoped to the issuer's paths, its digest in sign_in_sessions.
// While it lasts (SIGN_IN_SESSION_HOURS) the authorization endpoint answers with a code at once,
// without the form (prompt=login asks anyway; prompt=none never shows the form: login_required
// without a session, OpenID Connect Core 3.1.2.6), so a reloaded dashboard, which keeps its tokens
// in memory only, signs in again with no click (it asks with prompt=none). The logout endpoint ends
// it and every login made through it.
import crypto from 'node:crypto';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import type { Db } from '../db/db.js';
import { digest, refreshPasswordHash, unknownPasswordHash, verifyPassword } from './crypto.js';
import type { FailureThrottle } from './throttle.js';
import type { Sessions } from './sessions.js';
import { record as audit } from '../audit/audit.js';
import type { SignInFailures } from '../audit/unknown-sign-ins.js';

/** A code is exchanged within this many seconds, once. */
export const CODE_LIFE_SECONDS = 60;

const AuthorizeQuery = Type.Object({
  response_type: Type.Optional(Type.String({ maxLength: 32 })),
  client_id: Type.Optional(Type.String({ maxLength: 255 })),
  redirect_uri: Type.Optional(Type.String({ maxLength: 2048 })),
  state: Type.Optional(Type.String({ maxLength: 1024 })),
  scope: Type.Optional(Type.String({ maxLength: 1024 })),
  code_challenge: Type.Optional(Type.String({ maxLength: 128 })),
  code_challenge_method: Type.Optional(Type.String({ maxLength: 16 })),
  prompt: Type.Optional(Type.String({ maxLength: 32 })),
});
type AuthorizeQuery = Static<typeof AuthorizeQuery>;
const LoginBody = Type.Object({
  ...AuthorizeQuery.properties,
  username: Type.Optional(Type.String({ maxLength: 255 })),
  password: Type.Optional(Type.String({ maxLength: 1024 })),
});

const RealmParam = Type.Object({ realm: Type.String({ maxLength: 64 }) });

// img-src data: only: the page's icon is `data:,` (an empty icon: the browser asks for no /favicon.ico).
const LOGIN_CSP = "default-src 'none'; style-src 'self'; img-src data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

interface Client {
  id: string;
  client_id: string;
  public: boolean;
  grants: string[];
  redirect_paths: string[];
}

/** The sign-in session's cookie. */
export const SIGN_IN_COOKIE = 'atk_signin';

/** One cookie's value from a Cookie header (RFC 6265 5.4), or undefined. */
export function cookieValue(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const i = part.indexOf('=');
    if (i > 0 && part.slice(0, i).trim() === name) return part.slice(i + 1).trim();
  }
  return undefined;
}

export async function authorizeRoutes(
  app: FastifyInstance,
  deps: {
    db: Db;
    realm: () => string;
    publicOrigin: () => string;
    throttle: FailureThrottle;
    /** Failed sign-ins naming no user: one audit entry per address and window (API guide 14). */
    unknownSignIns: SignInFailures;
    prefixes: string[];
    sessions: Sessions;
    signInHours: number;
    /** PASSWORD_HASH_COST. */
    passwordCost: number;
  },
): Promise<void> {
  const { db, throttle, sessions } = deps;
  const secure = () => deps.publicOrigin().startsWith('https:');
  /** The cookie for the issuer's paths under the prefix the request came by. */
  const cookie = (req: FastifyRequest, value: string, maxAge: number) => {
    const path = req.url.split('?')[0]!.replace(/\/protocol\/openid-connect\/.*$/, '/protocol/openid-connect');
    return `${SIGN_IN_COOKIE}=${value}; Path=${path}; Max-Age=${maxAge}; HttpOnly; SameSite=Strict${secure() ? '; Secure' : ''}`;
  };
  /** The live sign-in session the request's cookie names, with its user (enabled), or undefined. */
  const signInOf = async (req: FastifyRequest) => {
    const value = cookieValue(req.headers.cookie, SIGN_IN_COOKIE);
    if (!value || !/^[A-Za-z0-9_-]{43}$/.test(value)) return undefined;
    const { rows } = await db.query<{ id: string; user_id: string; owner_id: string }>(
      `SELECT s.id, s.user_id, u.owner_id FROM sign_in_sessions s JOIN users u ON u.id = s.user_id
        WHERE s.digest = $1 AND s.ended_at IS NULL AND s.expires_at > now() AND NOT u.disabled`,
      [digest(value)],
    );
    return rows[0];
  };
  /** A one-time code for the user, back to the client's redirect. */
  const codeRedirect = async (
    reply: FastifyReply,
    p: AuthorizeQuery,
    checked: { client: Client; redirect: URL },
    userId: string,
    signInId: string,
  ) => {
    const code = crypto.randomBytes(32).toString('base64url');
    await db.query(
      `INSERT INTO auth_codes (code_digest, client_id, user_id, redirect_uri, code_challenge, expires_at, sign_in_id)
       VALUES ($1, $2, $3, $4, $5, now() + make_interval(secs => $6), $7)`,
      [digest(code), checked.client.id, userId, p.redirect_uri, p.code_challenge, CODE_LIFE_SECONDS, signInId],
    );
    // Old codes go in the same breath (a handful at most: each lives a minute).
    await db.query("DELETE FROM auth_codes WHERE expires_at < now() - interval '1 hour'");
    const to = new URL(checked.redirect);
    to.searchParams.set('code', code);
    if (p.state !== undefined) to.searchParams.set('state', p.state);
    return reply.redirect(to.toString(), 303);
  };

  /** The checks before anything may be redirected: a known public client and one of its own redirects. */
  const checkRequest = async (p: AuthorizeQuery): Promise<{ client: Client; redirect: URL } | string> => {
    if (!p.client_id) return 'client_id is missing.';
    const { rows } = await db.query<Client>('SELECT id, client_id, public, grants, redirect_paths FROM clients WHERE client_id = $1', [
      p.client_id,
    ]);
    const client = rows[0];
    if (!client?.grants.includes('authorization_code')) return `Client "${p.client_id}" may not sign users in here.`;
    let redirect: URL;
    try {
      redirect = new URL(p.redirect_uri ?? '');
    } catch {
      return 'redirect_uri is missing or not a URL.';
    }
    if (redirect.origin !== deps.publicOrigin() || !client.redirect_paths.includes(redirect.pathname) || redirect.hash) {
      return 'redirect_uri is not one this client may use.';
    }
    return { client, redirect };
  };

  /** Errors after the redirect is known go back to the client (RFC 6749 4.1.2.1). */
  const redirectError = (reply: FastifyReply, redirect: URL, error: string, description: string, state?: string) => {
    const to = new URL(redirect);
    to.searchParams.set('error', error);
    to.searchParams.set('error_description', description);
    if (state !== undefined) to.searchParams.set('state', state);
    return reply.redirect(to.toString(), 303);
  };

  const page = (reply: FastifyReply, status: number, body: string) =>
    reply
      .code(status)
      .header('Content-Security-Policy', LOGIN_CSP)
      .header('Cache-Control', 'no-store')
      .header('X-Frame-Options', 'DENY')
      // same-origin, not no-referrer: under no-referrer a browser sends "Origin: null" with the form.
      .header('Referrer-Policy', 'same-origin')
      .type('text/html; charset=utf-8')
      .send(
        `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">` +
          `<title>Sign in · Asset tracking</title><link rel="icon" href="data:,"><link rel="stylesheet" href="/dashboard/app.css"></head>` +
          `<body><main class="signin"><h1>Asset tracking</h1>${body}</main></body></html>`,
      );

  const loginForm = (p: AuthorizeQuery, action: string, message = '', username = '') => {
    const hidden = (['response_type', 'client_id', 'redirect_uri', 'state', 'scope', 'code_challenge', 'code_challenge_method'] as const)
      .filter((k) => p[k] !== undefined)
      .map((k) => `<input type="hidden" name="${k}" value="${esc(p[k]!)}">`)
      .join('');
    return (
      `<form method="post" action="${esc(action)}">${hidden}` +
      `<label for="username">Username</label><input id="username" name="username" autocomplete="username" required value="${esc(username)}">` +
      `<label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password" required>` +
      `<button type="submit">Sign in</button>${message ? `<p class="error" role="alert">${esc(message)}</p>` : ''}</form>`
    );
  };

  /** The PKCE and response type checks, after the redirect is trusted. */
  const pkceProblem = (p: AuthorizeQuery): [string, string] | undefined => {
    if (p.response_type !== 'code') return ['unsupported_response_type', 'Only response_type=code is supported.'];
    if (p.code_challenge_method !== 'S256') return ['invalid_request', 'PKCE is required, with code_challenge_method=S256.'];
    if (!p.code_challenge || !/^[A-Za-z0-9_-]{43}$/.test(p.code_challenge)) {
      return ['invalid_request', 'code_challenge must be the base64url SHA-256 of the code verifier (43 characters).'];
    }
    return undefined;
  };

  const api = app.withTypeProvider<TypeBoxTypeProvider>();
  for (const prefix of deps.prefixes) {
    const path = `${prefix}/protocol/openid-connect/auth`;
    const realmOk = (req: FastifyRequest<{ Params: Static<typeof RealmParam> }>, reply: FastifyReply) => {
      if (req.params.realm === deps.realm()) return true;
      void page(reply, 404, '<p class="error">No such realm.</p>');
      return false;
    };
    const common = { config: { public: true }, schema: { hide: true, params: RealmParam } };

    /** Realm, client, redirect and PKCE, for the page and its form alike: the client and redirect, or null once answered. */
    const accepted = async (req: FastifyRequest<{ Params: Static<typeof RealmParam> }>, reply: FastifyReply, p: AuthorizeQuery) => {
      if (!realmOk(req, reply)) return null;
      const checked = await checkRequest(p);
      if (typeof checked === 'string') {
        await page(reply, 400, `<p class="error" role="alert">${esc(checked)}</p>`);
        return null;
      }
      const problem = pkceProblem(p);
      if (problem) {
        await redirectError(reply, checked.redirect, problem[0], problem[1], p.state);
        return null;
      }
      return checked;
    };

    api.get(path, { ...common, schema: { ...common.schema, querystring: AuthorizeQuery } }, async (req, reply) => {
      const p = req.query;
      const checked = await accepted(req, reply, p);
      if (!checked) return reply;
      // prompt is a space-separated list (OpenID Connect Core 3.1.2.1); none goes with no other value.
      const prompts = (p.prompt ?? '').split(' ').filter(Boolean);
      if (prompts.includes('none') && prompts.length > 1) {
        return redirectError(reply, checked.redirect, 'invalid_request', 'prompt=none cannot be combined with another value.', p.state);
      }
      // Signed in already (the cookie): a code at once, unless the client asks for the form.
      const session = prompts.includes('login') ? undefined : await signInOf(req);
      if (session) return codeRedirect(reply, p, checked, session.user_id, session.id);
      if (prompts.includes('none')) return redirectError(reply, checked.redirect, 'login_required', 'No sign-in session.', p.state);
      const { prompt: _prompt, ...form } = p;
      return page(reply, 200, loginForm(form, req.url.split('?')[0]!));
    });

    api.post(path, { ...common, schema: { ...common.schema, body: LoginBody } }, async (req, reply) => {
      const p = req.body;
      // A form posted from another site (login CSRF) is refused before anything is looked at.
      const origin = req.headers.origin;
      if (origin !== deps.publicOrigin()) {
        return page(reply, 403, '<p class="error" role="alert">Sign in from this service\'s own sign-in page.</p>');
      }
      const checked = await accepted(req, reply, p);
      if (!checked) return reply;
      const action = req.url.split('?')[0]!;
      const username = p.username ?? '';
      const { rows } = await db.query<{ id: string; password_hash: string; disabled: boolean; owner_id: string }>(
        'SELECT id, password_hash, disabled, owner_id FROM users WHERE username = $1',
        [username],
      );
      const user = rows[0];
      const wait = await throttle.attempt('user', username, req.ip, user !== undefined);
      if (wait)
        return page(
          reply.header('Retry-After', String(wait)),
          429,
          loginForm(p, action, `Too many failed attempts; retry in ${wait} s.`, username),
        );
      // scrypt runs for an unknown user too: every refusal costs the same (no enumeration by timing).
      const ok = await verifyPassword(p.password ?? '', user?.password_hash ?? (await unknownPasswordHash(deps.passwordCost)));
      if (!user) {
        await deps.unknownSignIns.failed('user', req.ip, username, 'unknown username');
        return page(reply, 401, loginForm(p, action, 'Invalid username or password.', username));
      }
      if (!ok || user.disabled) {
        await audit(db, {
          actor: { type: 'user', id: user.id },
          address: req.ip,
          ownerId: user.owner_id,
          action: 'signInFailed',
          resource: { type: 'user', id: user.id },
          changes: { username: { to: username }, reason: { to: user.disabled && ok ? 'user disabled' : 'invalid username or password' } },
        });
        return page(reply, 401, loginForm(p, action, 'Invalid username or password.', username));
      }
      await throttle.succeeded('user', username, req.ip);
      await refreshPasswordHash(db, user, p.password ?? '', deps.passwordCost);
      const value = crypto.randomBytes(32).toString('base64url');
      const signInId = crypto.randomUUID();
      await db.tx(async (q) => {
        await q.query(
          `INSERT INTO sign_in_sessions (id, digest, user_id, expires_at) VALUES ($1, $2, $3, now() + make_interval(hours => $4))`,
          [signInId, digest(value), user.id, deps.signInHours],
        );
        await audit(q, {
          actor: { type: 'user', id: user.id },
          address: req.ip,
          ownerId: user.owner_id,
          action: 'signIn',
          resource: { type: 'user', id: user.id },
          changes: { client: { to: checked.client.client_id } },
        });
      });
      reply.header('Set-Cookie', cookie(req, value, deps.signInHours * 3600));
      return codeRedirect(reply, p, checked, user.id, signInId);
    });

    // Signing out (OpenID Connect RP-initiated logout, POST only): ends the sign-in session the
    // cookie names and every login made through it, and clears the cookie. Same-origin only, as the
    // sign-in form (no one signs a user out from another site).
    const logout = `${prefix}/protocol/openid-connect/logout`;
    api.post(logout, { ...common }, async (req, reply) => {
      if (!realmOk(req, reply)) return reply;
      if (req.headers.origin !== deps.publicOrigin()) {
        return reply.code(403).send({ error: 'Forbidden', message: "Sign out from this service's own pages.", code: 'FORBIDDEN' });
      }
      const session = await signInOf(req);
      if (session) {
        await db.tx(async (q) => {
          const ended = await sessions.endSignIn(q, session.id);
          if (ended) {
            await audit(q, {
              actor: { type: 'user', id: ended.userId },
              address: req.ip,
              ownerId: ended.ownerId,
              action: 'signOut',
              resource: { type: 'user', id: ended.userId },
              changes: null,
            });
          }
        });
        sessions.forget();
      }
      return reply
        .header('Set-Cookie', cookie(req, '', 0))
        .header('Cache-Control', 'no-store')
        .code(204)
        .send();
    });
  }
}

/** RFC 7636 S256: base64url(SHA-256(verifier)), compared in constant time. */
export function verifierMatches(verifier: string, challenge: string): boolean {
  if (!/^[A-Za-z0-9._~-]{43,128}$/.test(verifier)) return false;
  const computed = Buffer.from(crypto.createHash('sha256').update(verifier).digest('base64url'));
  const expected = Buffer.from(challenge);
  return computed.length === expected.length && crypto.timingSafeEqual(computed, expected);
}
