// Per-credential limits (API guide 7): N requests per rolling window (a sliding
// log, so the N+1st request inside any window is refused) and M requests in flight. In memory for
// one instance; in Redis (one Lua script, atomic) when REDIS_URL is set, so instances share them.
import crypto from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { BOUNDS } from '../bounds.js';
import { ApiError } from './errors.js';

export interface LimitSettings {
  max: number;
  windowMs: number;
  concurrent: number;
}

export type Admission =
  | { ok: true; remaining: number; resetSeconds: number; release: () => void }
  | { ok: false; reason: 'rate' | 'concurrency'; remaining: number; resetSeconds: number; retryAfterSeconds: number };

export interface Limiter {
  admit(credential: string): Promise<Admission>;
  close(): Promise<void>;
}

export class MemoryLimiter implements Limiter {
  private hits = new Map<string, number[]>();
  private inFlight = new Map<string, number>();

  constructor(private readonly s: LimitSettings) {}

  async admit(credential: string): Promise<Admission> {
    const now = Date.now();
    // The log is in time order: drop what left the window from its front, in place.
    let log = this.hits.get(credential);
    if (!log) {
      log = [];
      this.hits.set(credential, log);
    }
    let expired = 0;
    while (expired < log.length && log[expired]! <= now - this.s.windowMs) expired++;
    if (expired) log.splice(0, expired);
    const resetFrom = (oldest: number | undefined) => Math.max(1, Math.ceil(((oldest ?? now) + this.s.windowMs - now) / 1000));
    if (log.length >= this.s.max) {
      const reset = resetFrom(log[0]);
      return { ok: false, reason: 'rate', remaining: 0, resetSeconds: reset, retryAfterSeconds: reset };
    }
    const busy = this.inFlight.get(credential) ?? 0;
    if (busy >= this.s.concurrent) {
      return {
        ok: false,
        reason: 'concurrency',
        remaining: this.s.max - log.length,
        resetSeconds: resetFrom(log[0]),
        retryAfterSeconds: 1,
      };
    }
    log.push(now);
    this.inFlight.set(credential, busy + 1);
    let released = false;
    return {
      ok: true,
      remaining: this.s.max - log.length,
      resetSeconds: resetFrom(log[0]),
      release: () => {
        if (released) return;
        released = true;
        const n = (this.inFlight.get(credential) ?? 1) - 1;
        if (n <= 0) this.inFlight.delete(credential);
        else this.inFlight.set(credential, n);
      },
    };
  }

  async close(): Promise<void> {}
}

// KEYS: hits zset, in-flight zset. ARGV: now ms, window ms, max, concurrent, request id, lease ms.
// In-flight entries carry a lease so a crashed instance's requests stop counting after it.
const ADMIT_LUA = `
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local max = tonumber(ARGV[3])
local concurrent = tonumber(ARGV[4])
local lease = tonumber(ARGV[6])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - lease)
local count = redis.call('ZCARD', KEYS[1])
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local first = now
if oldest[2] then first = tonumber(oldest[2]) end
if count >= max then return {1, count, first} end
if redis.call('ZCARD', KEYS[2]) >= concurrent then return {2, count, first} end
redis.call('ZADD', KEYS[1], now, ARGV[5])
redis.call('ZADD', KEYS[2], now, ARGV[5])
redis.call('PEXPIRE', KEYS[1], window)
redis.call('PEXPIRE', KEYS[2], lease)
return {0, count + 1, first}
`;

export class RedisLimiter implements Limiter {
  private readonly redis: Redis;
  private static readonly LEASE_MS = 10 * 60_000;

  private constructor(
    redis: Redis,
    private readonly s: LimitSettings,
    private readonly onError: (e: Error) => void,
    private readonly prefix = 'tracking:limits:',
  ) {
    this.redis = redis;
    this.redis.defineCommand('admit', { numberOfKeys: 2, lua: ADMIT_LUA });
  }

  /** Connects first, so a wrong REDIS_URL stops the start with a clear error. */
  static async connect(url: string, s: LimitSettings, onError: (e: Error) => void): Promise<RedisLimiter> {
    // A call waits at most ~1 s (one retry) while Redis is away; then the request is admitted.
    // Loaded only with REDIS_URL (about 25 MB resident).
    const { Redis } = await import('ioredis');
    const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, commandTimeout: 1000, connectTimeout: 3000 });
    redis.on('error', () => {}); // reported per call below
    try {
      await redis.connect();
    } catch (e) {
      redis.disconnect();
      throw new Error(`Redis at REDIS_URL does not answer: ${(e as Error).message}`, { cause: e });
    }
    return new RedisLimiter(redis, s, onError);
  }

  async admit(credential: string): Promise<Admission> {
    const id = crypto.randomUUID();
    const now = Date.now();
    const keys = [`${this.prefix}${credential}:hits`, `${this.prefix}${credential}:inflight`] as const;
    let r: [number, number, number];
    try {
      r = (await (this.redis as any).admit(
        keys[0],
        keys[1],
        now,
        this.s.windowMs,
        this.s.max,
        this.s.concurrent,
        id,
        RedisLimiter.LEASE_MS,
      )) as [number, number, number];
    } catch (e) {
      // Redis down: serve rather than refuse everyone; the error is logged.
      this.onError(e as Error);
      return { ok: true, remaining: this.s.max, resetSeconds: Math.ceil(this.s.windowMs / 1000), release: () => {} };
    }
    const [status, count, first] = r;
    const resetSeconds = Math.max(1, Math.ceil((first + this.s.windowMs - now) / 1000));
    if (status === 1) return { ok: false, reason: 'rate', remaining: 0, resetSeconds, retryAfterSeconds: resetSeconds };
    if (status === 2) return { ok: false, reason: 'concurrency', remaining: this.s.max - count, resetSeconds, retryAfterSeconds: 1 };
    let released = false;
    return {
      ok: true,
      remaining: this.s.max - count,
      resetSeconds,
      release: () => {
        if (released) return;
        released = true;
        this.redis.zrem(keys[1], id).catch((e: Error) => this.onError(e));
      },
    };
  }

  async close(): Promise<void> {
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Who the limits and idempotency count by: set by authentication, null on public routes. */
    credential: string | null;
    /** Ends this request's in-flight count early (a long-lived stream, once its headers are out). */
    leaveInFlight: () => void;
  }
}

/**
 * Counts every authenticated request (API guide 7): 429 with Retry-After past the rolling window's
 * limit or the requests in flight, RateLimit-* headers on every answer. Register after authentication.
 */
export function installLimits(app: FastifyInstance, deps: { limiter: Limiter; rateLimitMax: number }): void {
  app.decorateRequest('credential', null);
  app.decorateRequest('leaveInFlight', null as unknown as () => void);
  app.addHook('onRequest', async (req, reply) => {
    if (req.credential === null) return;
    const admission = await deps.limiter.admit(req.credential);
    reply.header('RateLimit-Limit', String(deps.rateLimitMax));
    reply.header('RateLimit-Remaining', String(admission.remaining));
    reply.header('RateLimit-Reset', String(admission.resetSeconds));
    if (!admission.ok) {
      throw new ApiError(
        admission.reason === 'rate' ? 'RATE_LIMITED' : 'TOO_MANY_CONCURRENT',
        admission.reason === 'rate'
          ? `Request limit reached for this credential; retry in ${admission.retryAfterSeconds} s.`
          : 'Too many requests in flight for this credential; wait for one to finish.',
        { headers: { 'Retry-After': String(admission.retryAfterSeconds) } },
      );
    }
    // In flight from received to response finished (or the connection closed), or until a stream
    // leaves early (API guide 7): released once either way.
    let released = false;
    req.leaveInFlight = () => {
      if (released) return;
      released = true;
      admission.release();
    };
    reply.raw.once('close', req.leaveInFlight);
  });
}

/**
 * Large bodies in flight (API guide 7, `recordBodyBytesPerCredential` and `recordBodyBytesInFlight`):
 * a body over BOUNDS.bodyBytes (only the data-record creates take one, up to 8 MiB) is held in the
 * heap several times over while it is parsed, checked, stored and answered: one 8 MiB bulk took the
 * heap of `npm start` (128 MB) from about 70 to 120 MB, and ten at once from one credential ran it
 * out. Such a body counts its declared length (its route's limit when it declares none) from before
 * it is read until its answer is sent; past a credential's share the request is a 429, past the
 * instance's budget a 503, both with Retry-After and before a byte of the body is read. Smaller
 * bodies are not counted, so other callers' everyday requests never wait for someone's bulks.
 */
/** Weighted shares per key (bytes per credential): a share of `weight`, or null when the key would hold more than `max`. */
export type TakeShare = (key: string, weight: number, max: number) => Promise<(() => void) | null>;

/** Shares counted in this process's memory. */
export function localShares(): TakeShare {
  const take = localSlots();
  return async (key, weight, max) => take(key, weight, max);
}

/**
 * Shares counted in this process's memory, taken at once: a share of `weight`, or null when the key
 * would hold more than `max`; the returned function gives it back (once, however often called).
 */
export function localSlots(): (key: string, weight: number, max: number) => (() => void) | null {
  const held = new Map<string, number>();
  return (key, weight, max) => {
    const mine = held.get(key) ?? 0;
    if (mine + weight > max) return null;
    held.set(key, mine + weight);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (held.get(key) ?? 0) - weight;
      if (left > 0) held.set(key, left);
      else held.delete(key);
    };
  };
}

/**
 * `shares`: where a credential's bytes in flight are counted (the instance's coordinator when there
 * are several HTTP processes); the process's total (`maxBytes`) is this process's, whose heap holds them.
 */
export function installBodyBudget(app: FastifyInstance, deps: { maxBytes: number; shares?: TakeShare }): void {
  const small = BOUNDS.bodyBytes.value;
  const share = BOUNDS.recordBodyBytesPerCredential.value;
  const shares = deps.shares ?? localShares();
  let total = 0;
  app.addHook('preParsing', async (req, reply, payload) => {
    const limit = req.routeOptions.bodyLimit ?? small;
    if (limit <= small) return payload;
    const declared = Number(req.headers['content-length']);
    const bytes = Number.isFinite(declared) && declared >= 0 ? Math.min(declared, limit) : limit;
    if (bytes <= small) return payload;
    const who = req.credential ?? `address ${req.ip}`;
    const retry = { headers: { 'Retry-After': '1' } };
    const release = await shares(who, bytes, share);
    if (!release) {
      throw new ApiError(
        'TOO_MANY_CONCURRENT',
        'A large body of this credential is being stored; send the next when it is answered.',
        retry,
      );
    }
    if (total + bytes > deps.maxBytes) {
      release();
      throw new ApiError('SERVICE_BUSY', 'The service is storing as many large bodies as it takes at once; retry in a second.', retry);
    }
    total += bytes;
    reply.raw.once('close', () => {
      total -= bytes;
      release();
    });
    return payload;
  });
}
