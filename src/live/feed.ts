// The live fleet (API guide 9, "Live fleet"): what is stored reaches every open live stream of the
// process through ONE reader, whatever the number of streams. The reader follows the event log
// (eventlog/log.ts) as an integration does, from its own position below the horizon, so what any
// instance stores is seen here: woken at once by this process's stores and by other instances'
// notifications (pg_notify, sent while integrations exist), else every LIVE_POLL_MS. Each read is
// one statement over at most SCAN_ROWS rows of the log, and the positions among them one more
// (only those still the asset's latest: a late record never moves the map); then the batch is
// handed to each stream whose credential sees the owner, in slices with a turn of the event loop
// between them. A stream keeps what waits for its client bounded: positions one per asset (the
// latest replaces the one waiting), other messages up to a count; a client past that, or past the
// bytes its socket may buffer, is ended with a reason. The streams' credentials are checked again
// every LIVE_RECHECK_SECONDS, once per distinct credential: one revoked or expired ends its streams.
import type { FastifyBaseLogger } from 'fastify';
import type { Db } from '../db/db.js';
import { EVENT_LOG_CHANNEL, HORIZON, type Position } from '../eventlog/log.js';
import { Waker } from '../eventlog/waker.js';
import { yieldTurn } from '../http/backpressure.js';
import { localSlots } from '../http/limits.js';
import { ApiError } from '../http/errors.js';
import { locations } from '../records/records.js';
import { BOUNDS } from '../bounds.js';

export interface LiveLimits {
  /** Streams open at once per owner, in the instance (all its HTTP processes). */
  maxOpenPerOwner: number;
  /** Streams open at once in this process. */
  maxOpen: number;
  /** How often the reader looks at the event log when nothing woke it. */
  pollMs: number;
  /** How often each stream's credential is checked again. */
  recheckSeconds: number;
}

/** Rows of the event log one read looks at (all types; only a few types are kept). */
const SCAN_ROWS = 2000;
/** What a stream waits before writing what came, so a burst for one asset is one message. */
export const COALESCE_MS = 250;
/** Subscriber-message checks between two turns of the event loop while a batch is handed out. */
const FANOUT_SLICE = 2000;
const INT8_MAX = '9223372036854775807';
const TYPES = ['location', 'event', 'notification', 'asset'];

export const MAX_QUEUED: number = BOUNDS.liveQueuedMessages.value;
export const MAX_BUFFERED: number = BOUNDS.liveBufferedBytes.value;

/** An asset as the map draws it, and its latest position (the location's API shape) or null. */
export interface LiveAsset {
  id: string;
  name: string;
  disabled: boolean;
  ownerId: string;
}

export type LiveMessage =
  | { kind: 'position'; ownerId: string; assetId: string; data: { asset: LiveAsset; position: Record<string, unknown> } }
  | { kind: 'event' | 'notification' | 'asset'; ownerId: string; data: unknown };

/** Why a stream ended, as its `end` event says. */
export type EndReason = 'SLOW_CLIENT' | 'UNAUTHENTICATED' | 'SHUTDOWN' | 'ERROR';

/** One open stream, as the reader sees it. */
export interface Subscriber {
  /** The owners it sees (null: every owner, an operator), narrowed by its `ownerId` filter. */
  visible: Set<string> | null;
  /** Only this owner's records (the `ownerId` query parameter), or null. */
  ownerFilter: string | null;
  /** The Authorization header it was opened with (checked again every recheckSeconds). */
  authorization: string;
  /** Takes messages meant for it (already filtered by owner). */
  deliver(messages: LiveMessage[]): void;
  /** Ends it, saying why. */
  end(reason: EndReason, message: string): void;
}

/** A share taker (http/limits.ts TakeShare): a slot of `key` out of `max`, or null. */
export type Take = (key: string, max: number) => Promise<(() => void) | null>;

/** Checks a credential again: its owners seen now ('all' for an operator); throws when it is no longer valid. */
export type Recheck = (authorization: string) => Promise<string[] | 'all'>;

export class LiveFeed {
  private readonly subscribers = new Set<Subscriber>();
  private readonly perOwner = localSlots();
  private readonly waker = new Waker();
  private cursor: Position | null = null;
  private loop: Promise<void> | null = null;
  private starting: Promise<void> | null = null;
  private unlisten: (() => void) | null = null;
  private recheckTimer: NodeJS.Timeout | null = null;
  private closed = false;
  /** Reads of the event log and of positions since the start (for tests and /metrics). */
  readonly counts = { reads: 0, positionReads: 0, delivered: 0 };

  constructor(
    private readonly db: Db,
    readonly limits: LiveLimits,
    private readonly log: FastifyBaseLogger,
    private readonly recheck: Recheck,
    /** Where the per-owner count is kept: by default here. */
    private readonly take: Take = async (o, max) => this.takeHere(o, max),
  ) {}

  /** Streams open in this process. */
  get open(): number {
    return this.subscribers.size;
  }

  /** A slot of the owner counted in this process, or null when it has `max` open. */
  takeHere(ownerId: string, max: number): (() => void) | null {
    return this.perOwner(ownerId, 1, max);
  }

  /** Takes a slot of the owner and of the process, or refuses (429 / 503); the returned function gives it back. */
  async admit(ownerId: string): Promise<() => void> {
    if (this.closed) throw new ApiError('SERVICE_BUSY', 'The service is stopping; reconnect.', { headers: { 'Retry-After': '5' } });
    if (this.subscribers.size >= this.limits.maxOpen) {
      throw new ApiError('SERVICE_BUSY', `This process has ${this.limits.maxOpen} live streams open; try again shortly.`, {
        headers: { 'Retry-After': '5' },
      });
    }
    const release = await this.take(ownerId, this.limits.maxOpenPerOwner);
    if (release) return release;
    throw new ApiError(
      'TOO_MANY_CONCURRENT',
      `At most ${this.limits.maxOpenPerOwner} live streams may be open per owner; close one first.`,
      { headers: { 'Retry-After': '5' } },
    );
  }

  /**
   * Adds a stream: resolves once the reader follows the log from a position no later than now, so
   * a snapshot read after this misses nothing (what comes twice is the same latest position).
   */
  async subscribe(sub: Subscriber): Promise<() => void> {
    this.subscribers.add(sub);
    const gone = () => {
      this.subscribers.delete(sub);
    };
    try {
      await this.ensureRunning();
    } catch (e) {
      gone();
      throw e;
    }
    return gone;
  }

  /** Ends every stream (the process is stopping) and the reader. */
  async close(): Promise<void> {
    this.closed = true;
    for (const s of [...this.subscribers]) s.end('SHUTDOWN', 'The service is stopping; reconnect.');
    this.subscribers.clear();
    this.waker.wake();
    await this.loop;
  }

  private ensureRunning(): Promise<void> {
    if (this.starting) return this.starting;
    const starting = (async () => {
      // Everything below the horizon has committed, and is in what a snapshot read now sees.
      const { rows } = await this.db.query<{ h: string }>(`SELECT (${HORIZON})::text AS h`);
      this.cursor = { tx: String(BigInt(rows[0]!.h) - 1n), id: INT8_MAX };
    })();
    this.starting = starting;
    this.loop = starting.then(
      () => this.run(),
      () => {
        this.starting = null;
        this.loop = null;
      },
    );
    return starting;
  }

  private async run(): Promise<void> {
    this.unlisten = this.db.listen(EVENT_LOG_CHANNEL, () => this.waker.wake());
    this.recheckTimer = setInterval(() => void this.recheckAll(), this.limits.recheckSeconds * 1000);
    this.recheckTimer.unref();
    try {
      while (this.subscribers.size > 0 && !this.closed) {
        this.waker.clear();
        let full = false;
        try {
          full = await this.readOnce();
        } catch (e) {
          this.log.warn({ err: e }, 'the live fleet reader failed; it reads again shortly');
        }
        if (!full) await this.waker.sleep(this.limits.pollMs);
        else await yieldTurn();
      }
    } finally {
      this.unlisten?.();
      this.unlisten = null;
      if (this.recheckTimer) clearInterval(this.recheckTimer);
      this.recheckTimer = null;
      // In the same turn as the last check of the loop: a stream added later starts a new reader.
      this.cursor = null;
      this.starting = null;
      this.loop = null;
    }
  }

  /** One read of the log and its hand-out; whether the read was full (more may wait). */
  private async readOnce(): Promise<boolean> {
    const at = this.cursor!;
    this.counts.reads++;
    const { rows } = await this.db.query<{
      tx: string;
      id: string;
      object_type: string;
      object_id: string | null;
      owner_id: string | null;
      payload: any;
    }>(
      `WITH s AS (
         SELECT tx_id, id, object_type, object_id, owner_id, payload FROM event_log
          WHERE (tx_id, id) > ($1::int8, $2::int8) AND tx_id < ${HORIZON}
          ORDER BY tx_id, id LIMIT ${SCAN_ROWS})
       SELECT tx_id::text AS tx, id::text AS id, object_type, object_id, owner_id::text AS owner_id, payload FROM s
        WHERE object_type = ANY($3::text[])
       UNION ALL
       SELECT * FROM (SELECT tx_id::text, id::text, '', (SELECT count(*) FROM s)::text, NULL::text, NULL::jsonb FROM s
                       ORDER BY tx_id DESC, id DESC LIMIT 1) AS last`,
      [at.tx, at.id, TYPES],
      'live_feed_read',
    );
    const marker = rows.find((r) => r.object_type === '');
    if (!marker) return false;
    this.cursor = { tx: marker.tx, id: marker.id };
    const scanned = Number(marker.object_id);
    const kept = rows.filter((r) => r.object_type !== '');
    if (!kept.length || this.subscribers.size === 0) return scanned >= SCAN_ROWS;

    // Positions: only those still the asset's latest (asset_positions names that location).
    const messages: LiveMessage[] = [];
    const locs = kept.filter((r) => r.object_type === 'location');
    if (locs.length) {
      this.counts.positionReads++;
      const { rows: pos } = await this.db.query<any>(
        `SELECT p.location_id::text AS id, p.asset_id, p.owner_id, p.latitude, p.longitude, p.altitude, p.heading, p.speed, p.zone_id,
                p.when_created, a.name, a.disabled, a.owner_id AS asset_owner
           FROM asset_positions p JOIN assets a ON a.id = p.asset_id
          WHERE p.asset_id = ANY($1::uuid[]) AND p.location_id = ANY($2::int8[])`,
        [[...new Set(locs.map((r) => String(r.payload?.assetId)))], locs.map((r) => r.object_id)],
        'live_feed_positions',
      );
      for (const p of pos) {
        const asset: LiveAsset = { id: p.asset_id, name: p.name, disabled: p.disabled, ownerId: p.asset_owner };
        messages.push({ kind: 'position', ownerId: p.owner_id, assetId: p.asset_id, data: { asset, position: locations.toApi(p) } });
      }
    }
    for (const r of kept) {
      if (r.object_type === 'location' || !r.owner_id) continue;
      messages.push({ kind: r.object_type as 'event' | 'notification' | 'asset', ownerId: r.owner_id, data: r.payload });
    }
    await this.fanOut(messages);
    return scanned >= SCAN_ROWS;
  }

  /** Hands each message to the streams that see its owner, a slice at a time. */
  private async fanOut(messages: LiveMessage[]): Promise<void> {
    let work = 0;
    for (const sub of [...this.subscribers]) {
      const mine: LiveMessage[] = [];
      for (const m of messages) {
        if (sub.ownerFilter !== null && m.ownerId !== sub.ownerFilter) continue;
        if (sub.visible !== null && !sub.visible.has(m.ownerId)) continue;
        mine.push(m);
      }
      if (mine.length) {
        this.counts.delivered += mine.length;
        sub.deliver(mine);
      }
      work += messages.length;
      if (work >= FANOUT_SLICE) {
        work = 0;
        await yieldTurn();
      }
    }
  }

  /** Checks each distinct credential once; ends the streams of one no longer valid, narrows the others' owners. */
  private async recheckAll(): Promise<void> {
    const byCredential = new Map<string, Subscriber[]>();
    for (const s of this.subscribers) {
      const list = byCredential.get(s.authorization);
      if (list) list.push(s);
      else byCredential.set(s.authorization, [s]);
    }
    for (const [authorization, subs] of byCredential) {
      let visible: string[] | 'all';
      try {
        visible = await this.recheck(authorization);
      } catch (e) {
        if (!(e instanceof ApiError)) {
          this.log.warn({ err: e }, 'checking a live stream credential failed; checked again later');
          continue;
        }
        for (const s of subs) s.end('UNAUTHENTICATED', e.message);
        continue;
      }
      const set = visible === 'all' ? null : new Set(visible);
      for (const s of subs) {
        if (s.ownerFilter !== null && set !== null && !set.has(s.ownerFilter)) {
          s.end('UNAUTHENTICATED', 'This credential no longer sees the owner the stream follows.');
        } else s.visible = set;
      }
    }
  }
}
