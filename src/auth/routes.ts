// The built-in OpenID Connect issuer on Keycloak-compatible paths (API guide 2):
// token endpoint (password, refresh_token, client_credentials, and authorization_code with PKCE
// for public clients: authorize.ts), discovery document and JWKS.
// Served under /auth/realms/{realm} and, as newer Keycloak does, /realms/{realm}.
import crypto from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import formbody from '@fastify/formbody';
import { Type, type Static } from '@sinclair/typebox';
import type { Config } from '../config.js';
import type { Db, Queryable } from '../db/db.js';
import { type Actor, record as audit } from '../audit/audit.js';
import type { SignInFailures } from '../audit/unknown-sign-ins.js';
import { digest, safeEqual, refreshPasswordHash, unknownPasswordHash, verifyPassword } from './crypto.js';
import { FailureThrottle } from './throttle.js';
import { authorizeRoutes, verifierMatches } from './authorize.js';
import { isScope } from '../tenancy/tenancy.js';
import type { TokenService, TokenSubject, VerifiedToken } from './tokens.js';

const TokenBody = Type.Object({
  grant_type: Type.String({ maxLength: 64 }),
  username: Type.Optional(Type.String({ maxLength: 255 })),
  password: Type.Optional(Type.String({ maxLength: 1024 })),
  refresh_token: Type.Optional(Type.String({ maxLength: 8192 })),
  scope: Type.Optional(Type.String({ maxLength: 1024 })),
  client_id: Type.Optional(Type.String({ maxLength: 255 })),
  client_secret: Type.Optional(Type.String({ maxLength: 1024 })),
  code: Type.Optional(Type.String({ maxLength: 256 })),
  redirect_uri: Type.Optional(Type.String({ maxLength: 2048 })),
  code_verifier: Type.Optional(Type.String({ maxLength: 256 })),
});
type TokenBody = Static<typeof TokenBody>;

const TokenResponse = Type.Object({
  access_token: Type.String(),
  token_type: Type.Literal('Bearer'),
  expires_in: Type.Integer(),
  refresh_token: Type.Optional(Type.String()),
  refresh_expires_in: Type.Optional(Type.Integer()),
  scope: Type.String(),
});

const Realm = Type.Object({ realm: Type.String({ maxLength: 64 }) });

class OAuthError extends Error {
  constructor(
    readonly status: number,
    readonly error: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

interface ClientRow {
  id: string;
  client_id: string;
  secret_digest: string;
  grants: string[];
  owner_id: string;
  scopes: string[];
  disabled: boolean;
  public: boolean;
}

interface UserRow {
  id: string;
  username: string;
  password_hash: string;
  owner_id: string;
  scopes: string[];
  disabled: boolean;
}

const findUser = async (db: Db, where: string, value: string): Promise<UserRow | undefined> =>
  (await db.query<UserRow>(`SELECT id, username, password_hash, owner_id, scopes, disabled FROM users WHERE ${where}`, [value])).rows[0];

const userSubject = (user: UserRow, client: ClientRow): TokenSubject => ({
  sub: user.id,
  clientId: client.client_id,
  ownerId: user.owner_id,
  scopes: user.scopes.filter(isScope),
  username: user.username,
});

// Stand-ins checked when the user or client is unknown, so a refusal costs the same either way.
const UNKNOWN_CLIENT_DIGEST = digest(crypto.randomBytes(32).toString('hex'));

/**
 * Client credentials from HTTP Basic (user:password in the URL, as curl sends it) or the form body; a
 * public client (the dashboard) names itself with client_id alone (secret null).
 */
function clientCredentials(req: FastifyRequest<{ Body: TokenBody }>): { id: string; secret: string | null } {
  const auth = req.headers.authorization;
  if (auth && /^Basic\s+/i.test(auth)) {
    const raw = Buffer.from(auth.replace(/^Basic\s+/i, ''), 'base64').toString('utf8');
    const i = raw.indexOf(':');
    if (i < 0) throw new OAuthError(401, 'invalid_client', 'Malformed Basic credentials.');
    const dec = (s: string) => {
      try {
        return decodeURIComponent(s.replace(/\+/g, ' '));
      } catch {
        return s;
      }
    };
    return { id: dec(raw.slice(0, i)), secret: dec(raw.slice(i + 1)) };
  }
  if (req.body.client_id && req.body.client_secret !== undefined) return { id: req.body.client_id, secret: req.body.client_secret };
  if (req.body.client_id) return { id: req.body.client_id, secret: null };
  throw new OAuthError(401, 'invalid_client', 'Client authentication is required (HTTP Basic or client_id/client_secret).');
}

export async function authRoutes(
  app: FastifyInstance,
  opts: { db: Db; cfg: Config; tokens: TokenService; unknownSignIns: SignInFailures },
): Promise<void> {
  const { db, cfg, tokens, unknownSignIns } = opts;
  await app.register(formbody);

  const checkRealm = (realm: string, reply: FastifyReply) => {
    if (realm === cfg.AUTH_REALM) return true;
    void reply.code(404).send({ error: 'Not Found', message: `Realm "${realm}" does not exist.`, code: 'NOT_FOUND' });
    return false;
  };

  const throttle = new FailureThrottle(db, cfg.AUTH_THROTTLE_FAILURES, cfg.AUTH_THROTTLE_WINDOW_SECONDS, () => tokens.now());
  const refused = (retryAfterSeconds: number, what: string) =>
    new OAuthError(
      429,
      'too_many_attempts',
      `Too many failed attempts for this ${what} from this address; retry in ${retryAfterSeconds} s.`,
      {
        'Retry-After': String(retryAfterSeconds),
      },
    );

  const token = async (req: FastifyRequest<{ Body: TokenBody; Params: { realm: string } }>, reply: FastifyReply) => {
    if (!checkRealm(req.params.realm, reply)) return reply;
    const signedIn = (q: Queryable, actor: Actor, ownerId: string, resource: { type: string; id: string }, grant: string) =>
      audit(q, { actor, address: req.ip, ownerId, action: 'signIn', resource, changes: { grant: { to: grant } } });
    const signInFailed = (actor: Actor, ownerId: string | null, what: Record<string, string>) =>
      audit(db, {
        actor,
        address: req.ip,
        ownerId,
        action: 'signInFailed',
        resource: { type: actor.type, id: actor.id },
        changes: Object.fromEntries(Object.entries(what).map(([k, v]) => [k, { to: v }])),
      });
    reply.header('Cache-Control', 'no-store').header('Pragma', 'no-cache');
    try {
      const address = req.ip;
      const cred = clientCredentials(req);
      const { rows } = await db.query<ClientRow>(
        'SELECT id, client_id, secret_digest, grants, owner_id, scopes, disabled, public FROM clients WHERE client_id = $1',
        [cred.id],
      );
      const client = rows[0];
      // API guide 2: throttled pairs are refused before any secret is checked, a right one included.
      const clientWait = await throttle.attempt('client', cred.id, address, client !== undefined);
      if (clientWait) throw refused(clientWait, 'client');
      // Compare against a digest even for an unknown client, so both take the same time. A public
      // client has no secret: it proves itself with the PKCE verifier (and may present no secret).
      const secretOk =
        cred.secret === null
          ? client?.public === true
          : !client?.public && safeEqual(client?.secret_digest ?? UNKNOWN_CLIENT_DIGEST, digest(cred.secret));
      const clientFailed = (c: ClientRow, why: string) =>
        signInFailed({ type: 'client', id: c.id }, c.owner_id, { clientId: cred.id, reason: why });
      if (!client || !secretOk) {
        if (client) await clientFailed(client, 'wrong secret');
        else await unknownSignIns.failed('client', address, cred.id, 'unknown client');
        throw new OAuthError(401, 'invalid_client', 'Unknown client or wrong client secret.');
      }
      await throttle.succeeded('client', cred.id, address);
      if (client.disabled) {
        await clientFailed(client, 'client disabled');
        throw new OAuthError(401, 'invalid_client', 'This client is disabled.');
      }
      const grant = req.body.grant_type;
      if (!['password', 'refresh_token', 'client_credentials', 'authorization_code'].includes(grant)) {
        throw new OAuthError(400, 'unsupported_grant_type', `Grant type "${grant}" is not supported.`);
      }
      if (!client.grants.includes(grant)) throw new OAuthError(400, 'unauthorized_client', `This client may not use the ${grant} grant.`);
      const refreshLife = Math.max(cfg.REFRESH_TOKEN_LIFE_SECONDS, cfg.TOKEN_LIFE_SECONDS);
      let subject: TokenSubject;
      let sid: string;
      let refreshJti: string | null = null;
      if (grant === 'client_credentials') {
        subject = { sub: client.id, clientId: client.client_id, ownerId: client.owner_id, scopes: client.scopes.filter(isScope) };
        sid = await db.tx(async (q) => {
          const opened = await tokens.sessions.open(
            { clientRowId: client.id, userId: null, refreshJti: null, lifeSeconds: cfg.TOKEN_LIFE_SECONDS },
            q,
          );
          await signedIn(q, { type: 'client', id: client.id }, client.owner_id, { type: 'client', id: client.id }, 'client_credentials');
          return opened;
        });
      } else if (grant === 'password') {
        const { username, password } = req.body;
        if (!username || password === undefined) {
          throw new OAuthError(400, 'invalid_request', 'The password grant needs username and password.');
        }
        const user = await findUser(db, 'username = $1', username);
        const userWait = await throttle.attempt('user', username, address, user !== undefined);
        if (userWait) throw refused(userWait, 'user');
        // scrypt runs for an unknown user too (against a hash of nothing anyone knows) and for a
        // disabled one: every refusal takes the time of a wrong password (no enumeration by timing).
        const passwordOk = await verifyPassword(password, user?.password_hash ?? (await unknownPasswordHash(cfg.PASSWORD_HASH_COST)));
        if (!user) {
          await unknownSignIns.failed('user', address, username, 'unknown username');
          throw new OAuthError(400, 'invalid_grant', 'Invalid user credentials.');
        }
        if (!passwordOk || user.disabled) {
          // A user's own name, as it is: it names someone.
          await signInFailed({ type: 'user', id: user.id }, user.owner_id, {
            username,
            reason: user.disabled && passwordOk ? 'user disabled' : 'invalid username or password',
          });
          throw new OAuthError(400, 'invalid_grant', 'Invalid user credentials.');
        }
        await throttle.succeeded('user', username, address);
        await refreshPasswordHash(db, user, password, cfg.PASSWORD_HASH_COST);
        subject = userSubject(user, client);
        const jti = crypto.randomUUID();
        refreshJti = jti;
        sid = await db.tx(async (q) => {
          const opened = await tokens.sessions.open(
            { clientRowId: client.id, userId: user.id, refreshJti: jti, lifeSeconds: refreshLife },
            q,
          );
          await signedIn(q, { type: 'user', id: user.id }, user.owner_id, { type: 'user', id: user.id }, 'password');
          return opened;
        });
      } else if (grant === 'authorization_code') {
        const { code, redirect_uri: redirectUri, code_verifier: verifier } = req.body;
        if (!code || !redirectUri || !verifier) {
          throw new OAuthError(400, 'invalid_request', 'The authorization_code grant needs code, redirect_uri and code_verifier.');
        }
        // Single use: the first exchange marks it, whatever follows.
        const { rows: codes } = await db.query<{
          client_id: string;
          user_id: string;
          redirect_uri: string;
          code_challenge: string;
          sign_in_id: string | null;
        }>(
          `UPDATE auth_codes SET used_at = now() WHERE code_digest = $1 AND used_at IS NULL AND expires_at > now()
           RETURNING client_id, user_id, redirect_uri, code_challenge, sign_in_id`,
          [digest(code)],
        );
        const granted = codes[0];
        if (!granted || granted.client_id !== client.id)
          throw new OAuthError(400, 'invalid_grant', 'The code is unknown, used or expired.');
        if (granted.redirect_uri !== redirectUri)
          throw new OAuthError(400, 'invalid_grant', 'redirect_uri differs from the one the code was issued for.');
        if (!verifierMatches(verifier, granted.code_challenge))
          throw new OAuthError(400, 'invalid_grant', 'The code_verifier does not match the code_challenge.');
        const user = await findUser(db, 'id = $1::uuid', granted.user_id);
        if (!user || user.disabled) throw new OAuthError(400, 'invalid_grant', 'The user no longer exists or is disabled.');
        subject = userSubject(user, client);
        refreshJti = crypto.randomUUID();
        sid = await tokens.sessions.open({
          clientRowId: client.id,
          userId: user.id,
          refreshJti,
          lifeSeconds: refreshLife,
          signInId: granted.sign_in_id,
        });
      } else {
        if (!req.body.refresh_token) throw new OAuthError(400, 'invalid_request', 'The refresh_token grant needs refresh_token.');
        let refreshed: VerifiedToken;
        try {
          refreshed = await tokens.verify(req.body.refresh_token, 'refresh');
        } catch (e) {
          throw new OAuthError(400, 'invalid_grant', `Refresh token refused: ${(e as Error).message}`);
        }
        if (refreshed.clientId !== client.client_id)
          throw new OAuthError(400, 'invalid_grant', 'The refresh token was issued to another client.');
        if (!refreshed.sid || !refreshed.jti) throw new OAuthError(400, 'invalid_grant', 'The refresh token has no login.');
        // Rotation (API guide 2): each refresh token works once; a second use revokes the whole login.
        refreshJti = crypto.randomUUID();
        const rotated = await tokens.sessions.rotate(refreshed.sid, refreshed.jti, refreshJti, refreshLife);
        if (rotated.status === 'replayed') {
          throw new OAuthError(400, 'invalid_grant', 'This refresh token was already used; every token of its login is now revoked.');
        }
        if (rotated.status !== 'ok' || rotated.userId !== refreshed.sub) {
          throw new OAuthError(400, 'invalid_grant', 'The login of this refresh token has ended (revoked, expired or its user changed).');
        }
        const user = await findUser(db, 'id = $1::uuid', refreshed.sub);
        if (!user || user.disabled) throw new OAuthError(400, 'invalid_grant', 'The user no longer exists or is disabled.');
        subject = userSubject(user, client);
        sid = refreshed.sid;
      }
      const access = await tokens.issue(subject, 'access', sid);
      const body: Static<typeof TokenResponse> = {
        access_token: access,
        token_type: 'Bearer',
        expires_in: cfg.TOKEN_LIFE_SECONDS,
        scope: ['openid', 'profile', ...subject.scopes].join(' '),
      };
      if (refreshJti) {
        body.refresh_token = await tokens.issue(subject, 'refresh', sid, refreshJti);
        body.refresh_expires_in = cfg.REFRESH_TOKEN_LIFE_SECONDS;
      }
      return body;
    } catch (e) {
      if (!(e instanceof OAuthError)) throw e;
      if (e.status === 401) reply.header('WWW-Authenticate', `Basic realm="${cfg.AUTH_REALM}"`);
      for (const [h, v] of Object.entries(e.headers)) reply.header(h, v);
      // OAuth 2.0 error shape (error, error_description) inside the service's envelope (message).
      return reply
        .code(e.status)
        .send({ error: e.error, error_description: e.message, message: e.message, code: `OAUTH_${e.error.toUpperCase()}` });
    }
  };

  const discovery = async (req: FastifyRequest<{ Params: { realm: string } }>, reply: FastifyReply) => {
    if (!checkRealm(req.params.realm, reply)) return reply;
    const base = tokens.issuer;
    return {
      issuer: base,
      token_endpoint: `${base}/protocol/openid-connect/token`,
      authorization_endpoint: `${base}/protocol/openid-connect/auth`,
      code_challenge_methods_supported: ['S256'],
      jwks_uri: `${base}/protocol/openid-connect/certs`,
      grant_types_supported: ['password', 'refresh_token', 'client_credentials', 'authorization_code'],
      token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'none'],
      id_token_signing_alg_values_supported: ['ES256'],
      response_types_supported: ['code'],
      subject_types_supported: ['public'],
      scopes_supported: ['openid', 'profile', 'read', 'write', 'admin'],
      claims_supported: ['iss', 'sub', 'aud', 'exp', 'iat', 'jti', 'scope', 'owner_id', 'roles', 'sid'],
    };
  };

  await authorizeRoutes(app, {
    db,
    realm: () => cfg.AUTH_REALM,
    publicOrigin: () => new URL(cfg.publicUrl).origin,
    throttle,
    unknownSignIns,
    prefixes: ['/auth/realms/:realm', '/realms/:realm'],
    sessions: tokens.sessions,
    signInHours: cfg.SIGN_IN_SESSION_HOURS,
    passwordCost: cfg.PASSWORD_HASH_COST,
  });

  for (const prefix of ['/auth/realms/:realm', '/realms/:realm']) {
    const hide = prefix.startsWith('/realms');
    app.post(`${prefix}/protocol/openid-connect/token`, {
      config: { public: true },
      schema: {
        tags: ['auth'],
        summary: 'Token endpoint (API guide 2): password, refresh_token, client_credentials and authorization_code (PKCE) grants',
        hide,
        security: [],
        params: Realm,
        consumes: ['application/x-www-form-urlencoded'],
        body: TokenBody,
        response: { 200: TokenResponse },
      },
      handler: token,
    });
    app.get(`${prefix}/.well-known/openid-configuration`, {
      config: { public: true },
      schema: {
        tags: ['auth'],
        summary: 'OpenID Connect discovery document',
        hide,
        security: [],
        params: Realm,
        response: {
          200: Type.Object(
            { issuer: Type.String(), token_endpoint: Type.String(), jwks_uri: Type.String() },
            { additionalProperties: true },
          ),
        },
      },
      handler: discovery,
    });
    app.get(`${prefix}/protocol/openid-connect/certs`, {
      config: { public: true },
      schema: {
        tags: ['auth'],
        summary: 'JSON Web Key Set of the token signing keys',
        hide,
        security: [],
        params: Realm,
        response: { 200: Type.Object({ keys: Type.Array(Type.Object({}, { additionalProperties: true })) }) },
      },
      handler: async (req: FastifyRequest<{ Params: { realm: string } }>, reply) => {
        if (!checkRealm(req.params.realm, reply)) return reply;
        return tokens.jwksDocument();
      },
    });
  }
}
