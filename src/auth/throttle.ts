// Token endpoint throttling (API.md section 2): after AUTH_THROTTLE_FAILURES failed attempts for
// one username from one client address (or one client id from one address) within
// AUTH_THROTTLE_WINDOW_SECONDS, that pair is refused with 429 until the window opened by its first
// failure has passed. Per pair, so an attacker elsewhere cannot lock the operator out.
//
// The counters live in the database, not in the Redis limiter: the database is the one store every
// instance shares even without REDIS_URL, so the bound is exact across instances; a token request
// already costs a scrypt hash (tens of ms), next to which one indexed query is noise; and the
// limiter's admit() counts every request and its time in flight, where this counts failures only.
import { digest } from './crypto.js';
import type { Db } from '../db/db.js';

export type ThrottleKind = 'user' | 'client';

export class FailureThrottle {
  constructor(
    private readonly db: Db,
    private readonly maxFailures: number,
    private readonly windowSeconds: number,
    private readonly now: () => number,
  ) {}

  private key(kind: ThrottleKind, name: string, address: string): string {
    return digest(`${kind}\n${name}\n${address}`);
  }

  /**
   * Counts this attempt as a failure before any secret is checked (a success clears it again), so
   * that many attempts sent at once cannot all pass a check made before the first of them failed.
   * Answers the seconds this pair must wait: 0 when the attempt may go on.
   */
  async attempt(kind: ThrottleKind, name: string, address: string): Promise<number> {
    // A first attempt after the window has passed starts a new window.
    const { rows } = await this.db.query<{ failures: number; window_start: Date }>(
      `INSERT INTO auth_throttle AS t (key, failures, window_start) VALUES ($1, 1, $2::timestamptz)
       ON CONFLICT (key) DO UPDATE SET
         failures = CASE WHEN t.window_start <= $2::timestamptz - make_interval(secs => $3) THEN 1 ELSE t.failures + 1 END,
         window_start = CASE WHEN t.window_start <= $2::timestamptz - make_interval(secs => $3) THEN $2::timestamptz ELSE t.window_start END
       RETURNING failures, window_start`,
      [this.key(kind, name, address), new Date(this.now()).toISOString(), this.windowSeconds],
    );
    const row = rows[0]!;
    if (row.failures <= this.maxFailures) return 0;
    return Math.max(1, Math.ceil((row.window_start.getTime() + this.windowSeconds * 1000 - this.now()) / 1000));
  }

  /** A success clears the pair's count. */
  async succeeded(kind: ThrottleKind, name: string, address: string): Promise<void> {
    await this.db.query('DELETE FROM auth_throttle WHERE key = $1', [this.key(kind, name, address)]);
  }
}
