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

  /** Seconds this pair must wait (0 when it may try), and its failures so far. */
  async check(kind: ThrottleKind, name: string, address: string): Promise<{ retryAfterSeconds: number; failures: number }> {
    const { rows } = await this.db.query<{ failures: number; window_start: Date }>(
      'SELECT failures, window_start FROM auth_throttle WHERE key = $1',
      [this.key(kind, name, address)],
    );
    const row = rows[0];
    if (!row) return { retryAfterSeconds: 0, failures: 0 };
    const leftMs = row.window_start.getTime() + this.windowSeconds * 1000 - this.now();
    if (leftMs <= 0) return { retryAfterSeconds: 0, failures: 0 };
    return { retryAfterSeconds: row.failures >= this.maxFailures ? Math.ceil(leftMs / 1000) : 0, failures: row.failures };
  }

  async failed(kind: ThrottleKind, name: string, address: string): Promise<void> {
    // A failure after the window starts a new one.
    await this.db.query(
      `INSERT INTO auth_throttle AS t (key, failures, window_start) VALUES ($1, 1, $2::timestamptz)
       ON CONFLICT (key) DO UPDATE SET
         failures = CASE WHEN t.window_start <= $2::timestamptz - make_interval(secs => $3) THEN 1 ELSE t.failures + 1 END,
         window_start = CASE WHEN t.window_start <= $2::timestamptz - make_interval(secs => $3) THEN $2::timestamptz ELSE t.window_start END`,
      [this.key(kind, name, address), new Date(this.now()).toISOString(), this.windowSeconds],
    );
  }

  /** A success clears the pair's count. */
  async succeeded(kind: ThrottleKind, name: string, address: string): Promise<void> {
    await this.db.query('DELETE FROM auth_throttle WHERE key = $1', [this.key(kind, name, address)]);
  }
}
