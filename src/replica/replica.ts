// Reads from a streaming replica (API guide 16). With DATABASE_READ_URL set, a GET of a credential
// that has not written in the last READ_AFTER_WRITE_SECONDS may read its lists, exports and
// reports there (db/reads.ts readDb), while the replica's lag is at most REPLICA_MAX_LAG_SECONDS.
// Everything else stays on the primary: writes, authentication, idempotency, single reads. With
// REDIS_URL the read-after-write window holds across instances (writes.ts).
//
// The lag is read from the replica every second: 0 when it has replayed all it received, else the
// time since the last transaction it replayed was committed (an overestimate after a quiet spell:
// it errs toward the primary). A replica that cannot be reached counts as lagging for ever, and a
// read that meets a broken connection runs again on the primary, so a replica that stops costs
// no request.
import type { FastifyInstance } from 'fastify';
import { createPostgres, type Db } from '../db/db.js';
import type { SharedWrites } from './writes.js';

const CHECK_MS = 1000;
/** Errors of a connection, not of the statement: the replica went away (the read runs on the primary). */
const CONNECTION_ERRORS = /^(08|57P0[1-3]|53300)/;
const NETWORK = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOENT', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH']);

export interface ReplicaSettings {
  url: string;
  poolSize: number;
  maxLagSeconds: number;
  readAfterWriteSeconds: number;
}

export class ReadReplica {
  /** Seconds behind the primary at the last check; null while the replica cannot be reached. */
  lag: number | null = null;
  /** Reads served from each, for /metrics. */
  readonly served = { replica: 0, primary: 0 };
  private readonly replica: Db;
  /** The replica, with every read that meets a broken connection run again on the primary. */
  readonly db: Db;
  private readonly writes = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly primary: Db,
    private readonly s: ReplicaSettings,
    /** Writes noted across instances (Redis), or none: this instance's own only. */
    private readonly shared: SharedWrites | null = null,
    private readonly onError: (e: unknown) => void = () => {},
  ) {
    this.replica = createPostgres(s.url, s.poolSize);
    const broken = (e: unknown) => {
      const code = String((e as { code?: unknown }).code ?? '');
      if (
        !CONNECTION_ERRORS.test(code) &&
        !NETWORK.has(code) &&
        !/Connection terminated|timeout exceeded when trying to connect/i.test(String(e))
      ) {
        return false;
      }
      this.lag = null;
      return true;
    };
    this.db = {
      ...primary,
      query: async (text, params, name) => {
        try {
          return await this.replica.query(text, params, name);
        } catch (e) {
          if (!broken(e)) throw e;
          return primary.query(text, params, name);
        }
      },
      copyOut: async (sql) => {
        try {
          return await this.replica.copyOut!(sql);
        } catch (e) {
          if (!broken(e)) throw e;
          return primary.copyOut!(sql);
        }
      },
    };
  }

  /** Reads the replica's lag (null: not reachable). */
  async check(): Promise<void> {
    try {
      const { rows } = await this.replica.query<{ lag: number }>(
        `SELECT CASE WHEN NOT pg_is_in_recovery() OR pg_last_wal_receive_lsn() IS NULL
                       OR pg_last_wal_receive_lsn() <= pg_last_wal_replay_lsn() THEN 0
                     ELSE extract(epoch FROM now() - pg_last_xact_replay_timestamp()) END::float8 AS lag`,
      );
      this.lag = Math.max(0, rows[0]?.lag ?? 0);
    } catch {
      this.lag = null;
    }
  }

  start(): void {
    void this.check();
    this.timer = setInterval(() => void this.check(), CHECK_MS);
    this.timer.unref();
  }

  /**
   * Notes a credential's write: its reads stay on the primary for READ_AFTER_WRITE_SECONDS, on
   * every instance when the writes are shared (noted before the write runs, so a read that follows
   * its answer finds the note).
   */
  async wrote(credential: string): Promise<void> {
    const ms = this.s.readAfterWriteSeconds * 1000;
    if (!ms) return;
    if (this.writes.size > 100_000) {
      const old = Date.now() - ms;
      for (const [k, at] of this.writes) if (at < old) this.writes.delete(k);
    }
    this.writes.set(credential, Date.now());
    await this.shared?.wrote(credential, ms).catch((e) => this.onError(e));
  }

  /** The database for a read of `credential`: the replica when it may serve it, else the primary. */
  async choose(credential: string): Promise<Db> {
    const wroteAt = this.writes.get(credential);
    let fresh = wroteAt !== undefined && wroteAt + this.s.readAfterWriteSeconds * 1000 > Date.now();
    const lagging = this.lag === null || this.lag > this.s.maxLagSeconds;
    // Another instance's write; when the shared note cannot be read, the primary (never a stale read).
    if (!fresh && !lagging && this.shared && this.s.readAfterWriteSeconds) {
      fresh = await this.shared.recent(credential).catch((e) => {
        this.onError(e);
        return true;
      });
    }
    if (fresh || lagging) {
      this.served.primary++;
      return this.primary;
    }
    this.served.replica++;
    return this.db;
  }

  /**
   * Routes each authenticated request (register after authentication): a GET or HEAD reads where
   * choose() says; anything else is a write of its credential.
   */
  install(app: FastifyInstance): void {
    app.addHook('onRequest', async (req) => {
      if (!req.credential) return;
      if (req.method === 'GET' || req.method === 'HEAD') req.reads = await this.choose(req.credential);
      else await this.wrote(req.credential);
    });
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.shared?.close();
    await this.replica.close();
  }
}
