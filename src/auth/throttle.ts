// Token endpoint and sign-in throttling (API guide 2): after AUTH_THROTTLE_FAILURES failed attempts
// for one username from one client address (or one client id from one address) within
// AUTH_THROTTLE_WINDOW_SECONDS, that pair is refused with 429 until the window opened by its first
// failure has passed. Per pair, so an attacker elsewhere cannot lock the operator out.
//
// Names that exist (a user, a client) are counted in the database: the one store every instance
// shares even without REDIS_URL, so the bound on guessing their secrets is exact across instances;
// a token request already costs a scrypt hash, next to which one indexed query is noise. Names that
// do not exist are counted too, so a refusal looks the same for both (no enumeration), but in this
// instance's memory with a bound: nobody can grow the database, one row per made-up name, before
// signing in. There is nothing to guess behind an unknown name, so a per-instance count loses nothing.
// This module is the only writer of auth_throttle, its sweep included.
import { digest } from './crypto.js';
import type { Db } from '../db/db.js';

export type ThrottleKind = 'user' | 'client';

/** Unknown (kind, name, address) triples counted in memory at most; the oldest go first. */
const MAX_UNKNOWN = 10_000;
const SWEEP_EVERY_MS = 10 * 60_000;

export class FailureThrottle {
  private readonly unknown = new Map<string, { failures: number; start: number }>();
  private lastSweepMs = 0;

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
   * `known`: the user or client exists. Answers the seconds this pair must wait: 0 when the
   * attempt may go on.
   */
  async attempt(kind: ThrottleKind, name: string, address: string, known: boolean): Promise<number> {
    const now = this.now();
    const key = this.key(kind, name, address);
    if (!known) return this.countUnknown(key, now);
    await this.sweepIfDue(now);
    // A first attempt after the window has passed starts a new window.
    const { rows } = await this.db.query<{ failures: number; window_start: Date }>(
      `INSERT INTO auth_throttle AS t (key, failures, window_start) VALUES ($1, 1, $2::timestamptz)
       ON CONFLICT (key) DO UPDATE SET
         failures = CASE WHEN t.window_start <= $2::timestamptz - make_interval(secs => $3) THEN 1 ELSE t.failures + 1 END,
         window_start = CASE WHEN t.window_start <= $2::timestamptz - make_interval(secs => $3) THEN $2::timestamptz ELSE t.window_start END
       RETURNING failures, window_start`,
      [key, new Date(now).toISOString(), this.windowSeconds],
    );
    const row = rows[0]!;
    return this.wait(row.failures, row.window_start.getTime(), now);
  }

  private countUnknown(key: string, now: number): number {
    let e = this.unknown.get(key);
    if (!e || e.start <= now - this.windowSeconds * 1000) {
      this.unknown.delete(key);
      if (this.unknown.size >= MAX_UNKNOWN) this.evict(now);
      e = { failures: 0, start: now };
      this.unknown.set(key, e);
    }
    e.failures++;
    return this.wait(e.failures, e.start, now);
  }

  /** Makes room: windows that are over go first, else the oldest tenth (a Map keeps insertion order). */
  private evict(now: number): void {
    for (const [k, v] of this.unknown) if (v.start <= now - this.windowSeconds * 1000) this.unknown.delete(k);
    if (this.unknown.size < MAX_UNKNOWN) return;
    let drop = Math.ceil(MAX_UNKNOWN / 10);
    for (const k of this.unknown.keys()) {
      if (drop-- <= 0) break;
      this.unknown.delete(k);
    }
  }

  private wait(failures: number, start: number, now: number): number {
    if (failures <= this.maxFailures) return 0;
    return Math.max(1, Math.ceil((start + this.windowSeconds * 1000 - now) / 1000));
  }

  /** A success clears the pair's count. */
  async succeeded(kind: ThrottleKind, name: string, address: string): Promise<void> {
    await this.db.query('DELETE FROM auth_throttle WHERE key = $1', [this.key(kind, name, address)]);
  }

  /** Forgets windows long over (off the hot path: at most every ten minutes). */
  private async sweepIfDue(now: number): Promise<void> {
    if (this.lastSweepMs && now - this.lastSweepMs < SWEEP_EVERY_MS) return;
    this.lastSweepMs = now;
    await this.db.query("DELETE FROM auth_throttle WHERE window_start < now() - interval '1 day'");
  }
}
