// Logins and revocation (API guide 2). Every token of the built-in issuer carries the id of
// its row in auth_sessions (`sid`): a login of the password grant, kept through its rotating refresh
// tokens, or one client_credentials grant. An access token is accepted only while its row exists and
// is not revoked, so deleting or disabling a user or a client, a new password or narrower scopes
// (which revoke or delete the rows) end its tokens.
//
// Cost per request: each instance caches a row's state for AUTH_SESSION_CACHE_MS (a map lookup on
// the hot path, one primary-key query per login and interval). A change made here clears the cache
// at once; other instances see it when their entry runs out, within 10 s by construction.
import crypto from 'node:crypto';
import type { Db, Queryable } from '../db/db.js';

interface Entry {
  active: boolean;
  untilMs: number;
}

// A bound on the cache so a flood of distinct logins cannot grow it without limit.
const MAX_ENTRIES = 50_000;
const SWEEP_EVERY_MS = 10 * 60_000;

export type RotateResult = { status: 'ok'; userId: string | null } | { status: 'gone' | 'replayed' };

export class Sessions {
  private cache = new Map<string, Entry>();
  private pending = new Map<string, Promise<boolean>>();
  // Bumped by every local revocation: a lookup that started before it must not refill the cache.
  private epoch = 0;
  private lastSweepMs = 0;

  constructor(
    private readonly db: Db,
    private readonly cacheMs: number,
  ) {}

  /** A new login (password grant, with its first refresh token id) or a client_credentials grant. */
  async open(
    s: { clientRowId: string; userId: string | null; refreshJti: string | null; lifeSeconds: number; signInId?: string | null },
    q: Queryable = this.db,
  ): Promise<string> {
    await this.sweepIfDue(q);
    const id = crypto.randomUUID();
    await q.query(
      `INSERT INTO auth_sessions (id, client_id, user_id, refresh_jti, expires_at, sign_in_id)
       VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5), $6)`,
      [id, s.clientRowId, s.userId, s.refreshJti, s.lifeSeconds, s.signInId ?? null],
    );
    return id;
  }

  /**
   * Refresh token rotation (OAuth 2.0 Security BCP 4.14): the presented refresh token must be the
   * newest of its login; then `nextJti` becomes the newest. An older one means it was copied: the
   * whole login is revoked.
   */
  async rotate(sid: string, presentedJti: string, nextJti: string, lifeSeconds: number): Promise<RotateResult> {
    const result = await this.db.tx(async (q): Promise<RotateResult> => {
      const { rows } = await q.query<{ user_id: string | null; refresh_jti: string | null; revoked: boolean }>(
        'SELECT user_id, refresh_jti, revoked_at IS NOT NULL AS revoked FROM auth_sessions WHERE id = $1 FOR UPDATE',
        [sid],
      );
      const row = rows[0];
      if (!row || row.revoked || !row.refresh_jti) return { status: 'gone' };
      if (row.refresh_jti !== presentedJti) {
        await q.query("UPDATE auth_sessions SET revoked_at = now(), revoked_why = 'refresh token reused' WHERE id = $1", [sid]);
        return { status: 'replayed' };
      }
      await q.query(
        `UPDATE auth_sessions SET refresh_jti = $2, expires_at = greatest(expires_at, now() + make_interval(secs => $3))
          WHERE id = $1`,
        [sid, nextJti, lifeSeconds],
      );
      return { status: 'ok', userId: row.user_id };
    });
    if (result.status === 'replayed') this.forget();
    return result;
  }

  /**
   * Revokes every login of a user or a client, inside the caller's transaction (so a change and its
   * revocation commit together). Call forget() once that transaction has committed.
   */
  async revoke(q: Queryable, who: { userId: string } | { clientRowId: string }, why: string): Promise<void> {
    const [column, id] = 'userId' in who ? ['user_id', who.userId] : ['client_id', who.clientRowId];
    await q.query(`UPDATE auth_sessions SET revoked_at = now(), revoked_why = $2 WHERE ${column} = $1 AND revoked_at IS NULL`, [id, why]);
    // A user's sign-in session in the browser ends too: the next sign-in asks for the password.
    if ('userId' in who)
      await q.query('UPDATE sign_in_sessions SET ended_at = now() WHERE user_id = $1 AND ended_at IS NULL', [who.userId]);
  }

  /**
   * Ends a sign-in session (signing out) and every login made through it, in the caller's
   * transaction; the user it was, or null when it had already ended. Call forget() after the commit.
   */
  async endSignIn(q: Queryable, signInId: string): Promise<{ userId: string; ownerId: string } | null> {
    const { rows } = await q.query<{ user_id: string; owner_id: string }>(
      `UPDATE sign_in_sessions s SET ended_at = now() FROM users u
        WHERE s.id = $1 AND s.ended_at IS NULL AND u.id = s.user_id RETURNING s.user_id, u.owner_id`,
      [signInId],
    );
    await q.query("UPDATE auth_sessions SET revoked_at = now(), revoked_why = 'signed out' WHERE sign_in_id = $1 AND revoked_at IS NULL", [
      signInId,
    ]);
    const row = rows[0];
    return row ? { userId: row.user_id, ownerId: row.owner_id } : null;
  }

  /** Told when forget() runs: the instance's other HTTP processes drop their views too. */
  onForget: (() => void) | null = null;

  /** Drops this instance's cached view: local revocations take effect at once. */
  forget(): void {
    this.clear();
    this.onForget?.();
  }

  /** Drops this process's cached view (another process of the instance revoked something). */
  clear(): void {
    this.epoch++;
    this.cache.clear();
    this.pending.clear();
  }

  /** Whether tokens of this login are still accepted (the per-request check). */
  async isActive(sid: string): Promise<boolean> {
    const now = performance.now();
    const hit = this.cache.get(sid);
    if (hit && hit.untilMs > now) return hit.active;
    let p = this.pending.get(sid);
    if (!p) {
      const epoch = this.epoch;
      // Valid until the interval has passed since the question was asked, not since it was answered.
      const untilMs = now + this.cacheMs;
      p = this.db
        .query<{ active: boolean }>('SELECT revoked_at IS NULL AS active FROM auth_sessions WHERE id = $1', [sid])
        .then(({ rows }) => {
          const active = rows[0]?.active === true;
          if (epoch === this.epoch && this.cacheMs > 0) {
            if (this.cache.size >= MAX_ENTRIES) this.prune();
            this.cache.set(sid, { active, untilMs });
          }
          return active;
        })
        .finally(() => {
          if (this.pending.get(sid) === p) this.pending.delete(sid);
        });
      this.pending.set(sid, p);
    }
    return p;
  }

  private prune(): void {
    const now = performance.now();
    for (const [k, v] of this.cache) if (v.untilMs <= now) this.cache.delete(k);
    if (this.cache.size >= MAX_ENTRIES) this.cache.clear();
  }

  /** Forgets logins whose last token has expired (off the hot path). */
  private async sweepIfDue(q: Queryable): Promise<void> {
    const now = performance.now();
    if (this.lastSweepMs && now - this.lastSweepMs < SWEEP_EVERY_MS) return;
    this.lastSweepMs = now;
    await q.query("DELETE FROM auth_sessions WHERE expires_at < now() - interval '1 hour'");
    await q.query("DELETE FROM sign_in_sessions WHERE expires_at < now() - interval '1 hour'");
  }
}
