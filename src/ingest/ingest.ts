// What the device adapters (OsmAnd, Traccar's forward, MQTT) share: the device a message names,
// refused unless it is known, enabled and of that protocol; a limit of its own; the store every
// way in uses (records.ts storeRecords, so zones, alerts and push are the REST API's); and the
// ingest error log for what could not be stored (API guide 15).
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { Config } from '../config.js';
import type { Db } from '../db/db.js';
import { ApiError } from '../http/errors.js';
import type { Limiter } from '../http/limits.js';
import { listPage } from '../http/paging.js';
import { DateTime, iso, Nullable, Uuid } from '../http/schemas.js';
import { applyFilters, filters, listQuery } from '../http/filters.js';
import type { RecordHooks } from '../records/hooks.js';
import { MAX_BULK, type RecordDef, storeRecords } from '../records/records.js';
import { Tenancy } from '../tenancy/tenancy.js';
import { DEVICES, type DeviceRow, type Protocol } from './devices.js';
import { BOUNDS } from '../bounds.js';

/** How long the ingest error log keeps an entry. */
export const ERROR_DAYS = 7;
/** The most of a message the error log keeps. */
const SAMPLE_BYTES = 1024;
/** How long a device read is used again (a change made on another instance takes this long to be seen). */
export const DEVICE_CACHE_MS = 2000;
/**
 * Error log rows one instance writes a second at most for known devices (a flood of bad messages is
 * counted, not logged). Unknown ids have budgets of their own (INGEST_UNKNOWN_ERRORS_PER_ADDRESS,
 * INGEST_UNKNOWN_ERRORS_PER_MINUTE), so guessing never uses this one up.
 */
const ERROR_LOG_PER_SECOND: number = BOUNDS.ingestErrorRowsPerSecond.value;
/** Client addresses whose unknown-id rows are counted in one minute at most (past it, a new address is over budget). */
const MAX_UNKNOWN_ADDRESSES = 10_000;
/** A device's last-seen time is written at most this often per instance (it is not a clock). */
const SEEN_EVERY_MS = 10_000;

export interface IngestDeps {
  db: Db;
  cfg: Config;
  hooks: RecordHooks;
  limiter: Limiter;
  /**
   * Whether the error log takes one more row, where the instance counts them (the coordinator of
   * several HTTP processes); by default this process's budgets (`logBudget`).
   */
  budget?: (known: boolean, address: string) => Promise<boolean>;
}

/** Counts for /metrics: records stored and messages refused, by protocol (and reason). */
export class IngestCounters {
  readonly stored = new Map<string, number>();
  readonly refused = new Map<string, number>();
  /** Refusals the error log did not keep (over a budget), by protocol and whose: `known` or `unknown` device. */
  readonly unlogged = new Map<string, number>();
  count(map: Map<string, number>, key: string, n = 1) {
    map.set(key, (map.get(key) ?? 0) + n);
  }
}

export type Refusal = 'unknown device' | 'disabled device' | 'wrong protocol' | 'bad message' | 'too large' | 'rate limited';

/** Why a message was not stored: the answer's error, and what the error log keeps. */
export class IngestRefused extends ApiError {
  constructor(
    readonly reason: Refusal,
    code: ConstructorParameters<typeof ApiError>[0],
    message: string,
    extra: ConstructorParameters<typeof ApiError>[2] = {},
  ) {
    super(code, message, extra);
  }
}

interface Waiting {
  items: { assetId: string }[];
  resolve: () => void;
  reject: (e: unknown) => void;
}
interface Batch {
  waiting: Waiting[];
  running: boolean;
}

/**
 * A store error the records caused, theirs alone and not the database's: bad data or a constraint
 * (SQLSTATE classes 22, 23), a limit of the database's they exceed (54: too deeply nested, too
 * large), or a RangeError of this process (a call stack or string too long for them). Anything else
 * is taken for the database being away, and the records are tried again.
 */
export const messageFault = (e: unknown) =>
  e instanceof ApiError || e instanceof RangeError || /^(22|23|54)/.test(String((e as { code?: unknown }).code ?? ''));

export class Ingest {
  readonly counters = new IngestCounters();
  /** The MQTT subscriber (src/ingest/mqtt.ts), when INGEST_MQTT_URL is set and it has started. */
  mqtt: { readonly connected: boolean; close(): Promise<void> } | null = null;
  private readonly lastSeen = new Map<string, number>();
  private readonly cache = new Map<string, { row: DeviceRow; at: number }>();
  /** Calls of store() waiting for the next store of their type. */
  private readonly batches = new Map<RecordDef<any>, Batch>();
  /** Stores act for every owner: each record's asset is its device's, read from the devices table. */
  private readonly tenancy: Tenancy;
  /** Error log rows written in the current second for known devices (ERROR_LOG_PER_SECOND at most; the rest are counted). */
  private logged = { second: 0, rows: 0 };
  /** Error log rows written in the current minute for unknown devices: in all, and by client address. */
  private unknownLogged = { minute: 0, rows: 0, byAddress: new Map<string, number>() };

  constructor(readonly deps: IngestDeps) {
    this.tenancy = new Tenancy(deps.db, { credential: 'ingest', ownerId: '', scopes: ['admin'], actor: 'ingest' });
  }

  /**
   * The devices named by `uniqueIds` (one query for a batch of messages). A device read is kept
   * DEVICE_CACHE_MS: one query less per message. A change through the API is seen at once by the
   * instance that made it (forget()), by the others within DEVICE_CACHE_MS; an unknown id is
   * never kept, so a device registered a moment ago is found.
   */
  async lookup(uniqueIds: string[]): Promise<Map<string, DeviceRow>> {
    const out = new Map<string, DeviceRow>();
    const now = Date.now();
    const missing: string[] = [];
    for (const id of uniqueIds) {
      const hit = this.cache.get(id);
      if (hit && hit.at + DEVICE_CACHE_MS > now) out.set(id, hit.row);
      else missing.push(id);
    }
    if (!missing.length) return out;
    const { rows } = await this.deps.db.query<DeviceRow>(
      `SELECT id, unique_id, asset_id, owner_id, protocol, disabled FROM ${DEVICES} WHERE unique_id = ANY($1::text[])`,
      [missing],
    );
    if (this.cache.size > 100_000) this.cache.clear();
    for (const r of rows) {
      out.set(r.unique_id, r);
      this.cache.set(r.unique_id, { row: r, at: now });
    }
    return out;
  }

  /** Drops devices from the lookup's cache (they changed). */
  forget(uniqueIds: string[]): void {
    for (const id of uniqueIds) this.cache.delete(id);
  }

  /** The device when it may send over `protocol`: known, enabled, of that protocol, within its limit. */
  async admit(protocol: Protocol, device: DeviceRow | undefined): Promise<DeviceRow> {
    // The same answer for unknown, disabled and another protocol's: a uniqueId is not confirmed to a guesser.
    if (!device) throw new IngestRefused('unknown device', 'NOT_FOUND', 'No enabled device has this id.');
    if (device.disabled) throw new IngestRefused('disabled device', 'NOT_FOUND', 'No enabled device has this id.');
    if (device.protocol !== protocol) throw new IngestRefused('wrong protocol', 'NOT_FOUND', 'No enabled device has this id.');
    const admission = await this.deps.limiter.admit(`device:${device.id}`);
    if (!admission.ok) {
      throw new IngestRefused(
        'rate limited',
        'RATE_LIMITED',
        `Request limit reached for this device; retry in ${admission.retryAfterSeconds} s.`,
        {
          headers: { 'Retry-After': String(admission.retryAfterSeconds) },
        },
      );
    }
    // The limit is on the rate: a message is not held in flight against it.
    admission.release();
    return device;
  }

  /** The enabled device of `protocol` named `uniqueId`, within its limit. */
  async device(protocol: Protocol, uniqueId: string): Promise<DeviceRow> {
    return this.admit(protocol, (await this.lookup([uniqueId])).get(uniqueId));
  }

  /** Notes that these devices sent something (written at most every SEEN_EVERY_MS per device). */
  async seen(deviceIds: Iterable<string>): Promise<void> {
    const now = Date.now();
    const due: string[] = [];
    for (const id of new Set(deviceIds)) {
      if ((this.lastSeen.get(id) ?? 0) + SEEN_EVERY_MS > now) continue;
      this.lastSeen.set(id, now);
      due.push(id);
    }
    if (due.length) await this.deps.db.query('UPDATE devices SET last_seen_at = now() WHERE id = ANY($1::uuid[])', [due]);
  }

  /**
   * Stores records of one type for a device's asset (checked: the device's own), through the one
   * store. Calls that arrive while a store of their type runs are stored together by the next one
   * (one statement and one commit for many devices' messages); each call stays all or nothing, and
   * one that fails alone gets its own error (the batch is stored again call by call).
   */
  async store<I extends { assetId: string }>(device: DeviceRow, def: RecordDef<I>, items: I[], protocol: Protocol): Promise<void> {
    if (!items.length) return;
    await new Promise<void>((resolve, reject) => {
      let b = this.batches.get(def);
      if (!b) {
        b = { waiting: [], running: false };
        this.batches.set(def, b);
      }
      b.waiting.push({ items, resolve, reject });
      if (!b.running) void this.flush(def, b);
    });
    this.counters.count(this.counters.stored, `${protocol}:${def.type}`, items.length);
    await this.seen([device.id]);
  }

  private async flush(def: RecordDef<any>, b: Batch): Promise<void> {
    b.running = true;
    try {
      while (b.waiting.length) {
        // Whole calls, up to MAX_BULK records (a call larger than that alone).
        let n = 0;
        let size = 0;
        while (n < b.waiting.length && (n === 0 || size + b.waiting[n]!.items.length <= MAX_BULK)) size += b.waiting[n++]!.items.length;
        await this.storeTogether(def, b.waiting.splice(0, n));
      }
    } finally {
      b.running = false;
    }
  }

  private async storeTogether(def: RecordDef<any>, calls: Waiting[]): Promise<void> {
    try {
      await this.storeApart(def, calls, (i, e) => (e === null ? calls[i]!.resolve() : calls[i]!.reject(e)));
    } catch (e) {
      for (const w of calls) w.reject(e); // the database: those settled already ignore it
    }
  }

  /**
   * Stores several messages' records of one type in one statement, each message all or nothing:
   * when the records are at fault (messageFault), message by message, so each gets its own
   * outcome. `settle(i, null)`: message i is stored; `settle(i, error)`: refused. A database error
   * throws, after settling what was stored before it (a retry stores the rest).
   */
  async storeApart(
    def: RecordDef<any>,
    messages: { items: { assetId: string }[] }[],
    settle: (i: number, error: unknown) => unknown,
  ): Promise<void> {
    const { db, cfg, hooks } = this.deps;
    const store = (items: { assetId: string }[], bulk: boolean) => storeRecords(db, this.tenancy, cfg, hooks, def, items, bulk);
    if (messages.length > 1) {
      try {
        await store(
          messages.flatMap((m) => m.items),
          true,
        );
        for (let i = 0; i < messages.length; i++) await settle(i, null);
        return;
      } catch (e) {
        if (!messageFault(e)) throw e;
      }
    }
    for (const [i, m] of messages.entries()) {
      try {
        await store(m.items, m.items.length > 1 || messages.length > 1);
      } catch (e) {
        if (!messageFault(e)) throw e;
        await settle(i, e);
        continue;
      }
      await settle(i, null);
    }
  }

  /**
   * Notes what could not be stored: the error log (and the device's last error, when the device is
   * known), and the count. Never throws: a failing log must not stop an adapter. `address`: the
   * client's (null for MQTT, whose publishers the broker knows). A message naming no known device
   * comes from nobody the service knows: its rows have budgets of their own, per address and in
   * all, checked before anything is written; a known device's error is logged within
   * ERROR_LOG_PER_SECOND, which no flood of unknown ids touches.
   */
  async refused(protocol: Protocol, e: unknown, uniqueId: string | null, sample: string, address: string | null = null): Promise<void> {
    const reason = e instanceof IngestRefused ? e.reason : 'bad message';
    const message = e instanceof Error ? e.message : String(e);
    this.counters.count(this.counters.refused, `${protocol}:${reason}`);
    if (reason === 'rate limited') return; // counted; a flood must not become a flood of log rows
    try {
      const known = await this.known(reason, uniqueId);
      const from = address ?? `(${protocol})`;
      if (!(await (this.deps.budget ? this.deps.budget(known, from) : this.logBudget(known, from)))) {
        this.counters.count(this.counters.unlogged, `${protocol}:${known ? 'known' : 'unknown'}`);
        return;
      }
      const text = `${reason}: ${message}`.slice(0, 500);
      await this.deps.db.query(
        `WITH d AS (UPDATE devices SET last_error = $4, last_error_at = now() WHERE unique_id = $2 RETURNING id)
         INSERT INTO ingest_errors (protocol, unique_id, device_id, reason, sample) VALUES ($1, $2, (SELECT id FROM d), $4, $3)`,
        [protocol, uniqueId?.slice(0, 200) ?? null, Buffer.from(sample).subarray(0, SAMPLE_BYTES).toString(), text],
      );
    } catch {
      /* the database is away: the count stays */
    }
  }

  /** Whether a refused message names a device that exists (disabled, of another protocol, or its message bad). */
  private async known(reason: Refusal, uniqueId: string | null): Promise<boolean> {
    if (reason === 'disabled device' || reason === 'wrong protocol') return true;
    if (reason === 'unknown device' || uniqueId === null) return false;
    return (await this.lookup([uniqueId])).has(uniqueId);
  }

  /** One more row of the error log, if its budget has room: for a known device, or for an unknown one from `address`. */
  logBudget(known: boolean, address: string): boolean {
    return known ? this.knownBudget() : this.unknownBudget(address);
  }

  /** One more row for known devices this second, if the budget has room. */
  private knownBudget(): boolean {
    const second = Math.floor(Date.now() / 1000);
    if (this.logged.second !== second) this.logged = { second, rows: 0 };
    return ++this.logged.rows <= ERROR_LOG_PER_SECOND;
  }

  /** One more row for an unknown device from `address` this minute, if both its budgets have room. */
  private unknownBudget(address: string): boolean {
    const { INGEST_UNKNOWN_ERRORS_PER_ADDRESS: perAddress, INGEST_UNKNOWN_ERRORS_PER_MINUTE: perMinute } = this.deps.cfg;
    const minute = Math.floor(Date.now() / 60_000);
    if (this.unknownLogged.minute !== minute) this.unknownLogged = { minute, rows: 0, byAddress: new Map() };
    const w = this.unknownLogged;
    const mine = w.byAddress.get(address) ?? 0;
    if (w.rows >= perMinute || mine >= perAddress) return false;
    if (mine === 0 && w.byAddress.size >= MAX_UNKNOWN_ADDRESSES) return false;
    w.byAddress.set(address, mine + 1);
    w.rows++;
    return true;
  }
}

/** Removes ingest error log entries older than ERROR_DAYS. */
export async function pruneIngestErrors(db: Db): Promise<void> {
  await db.query(`DELETE FROM ingest_errors WHERE at < now() - interval '${ERROR_DAYS} days'`);
}

const IngestError = Type.Object(
  {
    id: Type.String(),
    at: DateTime,
    protocol: Type.String(),
    uniqueId: Nullable(Type.String()),
    deviceId: Nullable(Uuid),
    reason: Type.String(),
    sample: Nullable(Type.String({ description: 'The first 1 KiB of what was received' })),
  },
  { title: 'IngestError' },
);
const ERROR_FILTERS = {
  protocol: filters.equals('protocol', Type.String({ maxLength: 20 })),
  uniqueId: filters.equals('unique_id', Type.String({ maxLength: 200 })),
};

/** GET /ingest/errors (admin): what the adapters could not store, newest first, kept 7 days. */
export const ingestErrorRoutes: FastifyPluginAsyncTypebox<{ db: Db }> = async (app, { db }) => {
  app.get('/ingest/errors', {
    schema: {
      tags: ['devices'],
      summary: `What the device adapters could not store (admin), kept ${ERROR_DAYS} days`,
      querystring: listQuery(ERROR_FILTERS),
      response: { 200: Type.Array(IngestError) },
    },
    handler: async (req, reply) => {
      if (!req.tenancy.isAdmin) throw new ApiError('FORBIDDEN', 'The ingest error log needs the admin scope.');
      type Row = {
        id: string;
        at: Date;
        protocol: string;
        unique_id: string | null;
        device_id: string | null;
        reason: string;
        sample: string | null;
      };
      const rows = await listPage<Row>(db, req, reply, {
        select: 'id::text AS id, at, protocol, unique_id, device_id, reason, sample',
        from: 'ingest_errors',
        owners: null,
        defaultOrder: 'desc',
        idType: 'int8',
        timeColumn: 'at',
        filters: (params, where) => applyFilters(ERROR_FILTERS, req.query, params, where),
      });
      return rows.map((r) => ({
        id: r.id,
        at: iso(r.at)!,
        protocol: r.protocol,
        uniqueId: r.unique_id,
        deviceId: r.device_id,
        reason: r.reason,
        sample: r.sample,
      }));
    },
  });
};
