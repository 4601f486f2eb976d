// The built-in OpenID Connect issuer's keys and tokens (API guide 2), and verification of
// tokens from an external issuer (a real Keycloak). Signing keys live in the database, private half
// encrypted with SECRETS_KEY, so every instance on one database issues and accepts the same tokens.
import crypto from 'node:crypto';
import * as jose from 'jose';
import type { Config } from '../config.js';
import type { Db } from '../db/db.js';
import { getAtPath } from '../http/dotted-path.js';
import { ApiError } from '../http/errors.js';
import { isScope, type Scope } from '../tenancy/tenancy.js';
import { decrypt, encrypt } from './crypto.js';
import { Sessions } from './sessions.js';

const ALG = 'ES256';

interface KeyRow {
  kid: string;
  private_key: string;
  public_jwk: jose.JWK;
}

export interface TokenSubject {
  sub: string; // user id, or the client's id for client_credentials
  clientId: string;
  ownerId: string;
  scopes: Scope[];
  username?: string;
}

export interface VerifiedToken extends TokenSubject {
  external: boolean;
  /** The login (auth_sessions row) of a built-in token; none for an external issuer's. */
  sid?: string;
  /** Refresh tokens: their id, which rotation compares with the login's newest. */
  jti?: string;
}

export class TokenService {
  /** Read at use: the public URL names the bound port only once listening (PORT=0). */
  get issuer(): string {
    return `${this.cfg.publicUrl}/auth/realms/${this.cfg.AUTH_REALM}`;
  }
  private signing?: { kid: string; key: CryptoKey | Uint8Array };
  private publicKeys = new Map<string, CryptoKey | Uint8Array>();
  private jwks: jose.JWK[] = [];
  private external?: { issuer: string; keySet: ReturnType<typeof jose.createRemoteJWKSet> };
  private externalInit?: Promise<void>;
  readonly sessions: Sessions;

  /**
   * `now` (epoch ms) is the clock for `iat`/`exp`, expiry checks and the token endpoint's throttle
   * windows: tests replace it to move time instead of waiting.
   */
  constructor(
    private readonly db: Db,
    private readonly cfg: Config,
    private readonly secretsKey: Buffer,
    public now: () => number = Date.now,
  ) {
    this.sessions = new Sessions(db, cfg.AUTH_SESSION_CACHE_MS);
  }

  /** Loads the keys, creating the first signing key on an empty database. */
  async init(): Promise<void> {
    await this.loadKeys();
    if (!this.signing) {
      const { privateKey, publicKey } = await jose.generateKeyPair(ALG, { extractable: true });
      const kid = crypto.randomUUID();
      const publicJwk = { ...(await jose.exportJWK(publicKey)), kid, alg: ALG, use: 'sig' };
      const privatePem = await jose.exportPKCS8(privateKey);
      await this.db.query('INSERT INTO signing_keys (kid, alg, private_key, public_jwk) VALUES ($1, $2, $3, $4)', [
        kid,
        ALG,
        encrypt(this.secretsKey, privatePem),
        JSON.stringify(publicJwk),
      ]);
      await this.loadKeys();
    }
  }

  private async loadKeys(): Promise<void> {
    const { rows } = await this.db.query<KeyRow>(
      'SELECT kid, private_key, public_jwk FROM signing_keys WHERE retired_at IS NULL ORDER BY when_created DESC, kid',
    );
    const newest = rows[0];
    if (newest) {
      this.signing = { kid: newest.kid, key: await jose.importPKCS8(decrypt(this.secretsKey, newest.private_key), ALG) };
    }
    for (const r of rows) {
      if (!this.publicKeys.has(r.kid)) this.publicKeys.set(r.kid, await jose.importJWK(r.public_jwk, ALG));
    }
    this.jwks = rows.map((r) => r.public_jwk);
  }

  jwksDocument(): { keys: jose.JWK[] } {
    return { keys: this.jwks };
  }

  /** Signs a token of the login `sid`; a refresh token's `jti` is what rotation checks. */
  async issue(subject: TokenSubject, kind: 'access' | 'refresh', sid: string, jti: string = crypto.randomUUID()): Promise<string> {
    if (!this.signing) throw new Error('token service not initialised');
    const life = kind === 'access' ? this.cfg.TOKEN_LIFE_SECONDS : this.cfg.REFRESH_TOKEN_LIFE_SECONDS;
    const now = Math.floor(this.now() / 1000);
    const claims: jose.JWTPayload & Record<string, unknown> = {
      typ: kind === 'access' ? 'Bearer' : 'Refresh',
      azp: subject.clientId,
      sid,
      scope: kind === 'access' ? `openid profile ${subject.scopes.join(' ')}` : subject.scopes.join(' '),
      owner_id: subject.ownerId,
      roles: subject.scopes,
    };
    if (subject.username) claims.preferred_username = subject.username;
    return new jose.SignJWT(claims)
      .setProtectedHeader({ alg: ALG, kid: this.signing.kid, typ: 'JWT' })
      .setIssuer(this.issuer)
      .setSubject(subject.sub)
      .setAudience(kind === 'access' ? 'tracking-api' : this.issuer)
      .setIssuedAt(now)
      .setExpirationTime(now + life)
      .setJti(jti)
      .sign(this.signing.key);
  }

  private async keyFor(header: jose.JWSHeaderParameters): Promise<CryptoKey | Uint8Array> {
    const kid = header.kid ?? '';
    let key = this.publicKeys.get(kid);
    if (!key) {
      await this.loadKeys(); // another instance may have added a key
      key = this.publicKeys.get(kid);
    }
    if (!key) throw new ApiError('UNAUTHENTICATED', 'The token was signed with an unknown key.');
    return key;
  }

  /** Verifies a bearer JWT from the built-in issuer or the configured external one. */
  async verify(token: string, kind: 'access' | 'refresh' = 'access'): Promise<VerifiedToken> {
    const t = await this.verifySigned(token, kind);
    // API guide 2: a revoked login's access tokens stop at once (refresh tokens are checked, with
    // rotation, by the token endpoint in a transaction). Outside the try below: a database
    // failure here is a 503, not a refused token.
    if (kind === 'access' && t.sid && !(await this.sessions.isActive(t.sid))) {
      throw new ApiError(
        'UNAUTHENTICATED',
        'The token was revoked: its login ended, or its user or client was changed, disabled or deleted.',
      );
    }
    return t;
  }

  private async verifySigned(token: string, kind: 'access' | 'refresh'): Promise<VerifiedToken> {
    let iss: string | undefined;
    try {
      iss = jose.decodeJwt(token).iss;
    } catch {
      throw new ApiError('UNAUTHENTICATED', 'The bearer token is not a valid JWT.');
    }
    try {
      if (iss === this.issuer) {
        const { payload } = await jose.jwtVerify(token, (h) => this.keyFor(h), {
          issuer: this.issuer,
          audience: kind === 'access' ? 'tracking-api' : this.issuer,
          algorithms: [ALG],
          typ: 'JWT',
          requiredClaims: ['exp', 'sub'],
          currentDate: new Date(this.now()),
        });
        if (payload.typ !== (kind === 'access' ? 'Bearer' : 'Refresh')) {
          throw new ApiError('UNAUTHENTICATED', `This is not ${kind === 'access' ? 'an access' : 'a refresh'} token.`);
        }
        const sid = payload.sid;
        if (typeof sid !== 'string' || !/^[0-9a-f-]{36}$/.test(sid)) {
          throw new ApiError('UNAUTHENTICATED', 'The token predates revocable logins; request a new one.');
        }
        return {
          external: false,
          sid,
          ...(typeof payload.jti === 'string' ? { jti: payload.jti } : {}),
          sub: payload.sub!,
          clientId: String(payload.azp ?? ''),
          ownerId: String(payload.owner_id ?? ''),
          scopes: (Array.isArray(payload.roles) ? payload.roles : []).filter(isScope),
          ...(typeof payload.preferred_username === 'string' ? { username: payload.preferred_username } : {}),
        };
      }
      if (kind === 'access' && this.cfg.AUTH_EXTERNAL_ISSUER && iss === this.cfg.AUTH_EXTERNAL_ISSUER) {
        return await this.verifyExternal(token);
      }
    } catch (e) {
      if (e instanceof ApiError) throw e;
      if (e instanceof jose.errors.JWTExpired) throw new ApiError('TOKEN_EXPIRED', 'The access token has expired; request a new one.');
      throw new ApiError('UNAUTHENTICATED', `The bearer token was refused: ${(e as Error).message}`);
    }
    throw new ApiError('UNAUTHENTICATED', 'The token was not issued by a trusted issuer.');
  }

  private async verifyExternal(token: string): Promise<VerifiedToken> {
    const issuer = this.cfg.AUTH_EXTERNAL_ISSUER!;
    if (!this.external) {
      this.externalInit ??= (async () => {
        let jwksUrl = this.cfg.AUTH_EXTERNAL_JWKS_URL;
        if (!jwksUrl) {
          const res = await fetch(`${issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`, {
            signal: AbortSignal.timeout(5000),
          });
          if (!res.ok) throw new Error(`discovery of ${issuer} answered ${res.status}`);
          jwksUrl = ((await res.json()) as { jwks_uri: string }).jwks_uri;
        }
        this.external = { issuer, keySet: jose.createRemoteJWKSet(new URL(jwksUrl)) };
      })().catch((e) => {
        this.externalInit = undefined;
        throw e;
      });
      await this.externalInit;
    }
    const { payload } = await jose.jwtVerify(token, this.external!.keySet, {
      issuer,
      algorithms: ['RS256', 'RS384', 'RS512', 'ES256', 'ES384', 'PS256'],
      requiredClaims: ['exp', 'sub'],
      currentDate: new Date(this.now()),
      ...(this.cfg.AUTH_EXTERNAL_AUDIENCE ? { audience: this.cfg.AUTH_EXTERNAL_AUDIENCE } : {}),
    });
    const owner = claimAt(payload, this.cfg.AUTH_OWNER_CLAIM);
    const ownerId = Array.isArray(owner) ? owner[0] : owner;
    if (typeof ownerId !== 'string' || !/^[0-9a-f-]{36}$/i.test(ownerId)) {
      throw new ApiError('UNAUTHENTICATED', `The token has no owner id in its "${this.cfg.AUTH_OWNER_CLAIM}" claim.`);
    }
    const roles = claimAt(payload, this.cfg.AUTH_ROLES_CLAIM);
    return {
      external: true,
      sub: payload.sub!,
      clientId: String(payload.azp ?? payload.client_id ?? ''),
      ownerId: ownerId.toLowerCase(),
      scopes: (Array.isArray(roles) ? roles : typeof roles === 'string' ? roles.split(/[ ,]+/) : []).filter(isScope),
    };
  }
}

/**
 * Reads a claim by name, or by dotted path as Keycloak nests roles (realm_access.roles), following
 * own members only.
 */
const claimAt = (payload: Record<string, unknown>, dotted: string): unknown =>
  Object.hasOwn(payload, dotted) ? payload[dotted] : getAtPath(payload, dotted.split('.'));
