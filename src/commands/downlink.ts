// Commands to MQTT devices (API guide 8, "Commands to MQTT devices"). With MQTT ingest on, each
// instance publishes the commands of assets that have an enabled MQTT device to
// `<prefix>/<uniqueId>/commands` at QoS 1, through the ingest's own connection, and takes the
// devices' answers from `<prefix>/<uniqueId>/commandstatus` (src/ingest/mqtt.ts hands them here).
//
// Nothing is lost between the database and the broker: a command is leased (publish_after moved to
// the lease's end, leased_by this instance) in a short transaction, published, and only the
// broker's PUBACK stores SENT and ends the lease. An instance that dies between the two leaves the
// lease to run out (COMMAND_LEASE_SECONDS), or takes it back itself when it starts again; the
// command is then published again: a device may get a command twice, never not at all, and
// answers it by id (a repeated answer changes nothing).
//
// Order: one asset's commands are leased together, in id order, by one instance at a time (an
// advisory lock per asset around the lease, and no lease while an earlier one is outstanding), and
// published in that order on one connection, which MQTT keeps to the device.
//
// An offline device: every publish carries the MQTT 5 message expiry interval (what is left until
// expiresAt), so a broker that holds it for a device's kept session never hands it over late, and
// no instance publishes an expired command. A device without a kept session (or whose broker lost
// it) misses what was published meanwhile: a SENT command still unanswered COMMAND_REPUBLISH_SECONDS
// after its last publish is published again when the device next sends anything.
import type { FastifyBaseLogger } from 'fastify';
import { BOUNDS } from '../bounds.js';
import type { Config } from '../config.js';
import type { Db, Queryable } from '../db/db.js';
import { wakeReaders } from '../eventlog/log.js';
import { ApiError, badRequest } from '../http/errors.js';
import { isInt8Id, iso } from '../http/schemas.js';
import { after, DOWNLINK_CHANNEL, effective, pushCommands, type Row, SELECT } from './commands.js';

/** The first key of the downlink's per-asset advisory locks ("cmdd"), beside the other lock spaces. */
const DOWNLINK_LOCK_SPACE = 1668113508;
/** Assets leased per claim; the rest wait for the next turn (at once when this one was full). */
const CLAIM_ASSETS = 100;
/** Publishes waiting for their PUBACK at once, per instance: past it, no new lease until some come back. */
const MAX_IN_FLIGHT = 1000;
/** A refused publish waits this long, doubling per publish, before the next (at most REFUSED_MAX_MS). */
const REFUSED_MIN_MS = 30_000;
const REFUSED_MAX_MS = 600_000;
/** How often one asset's activity is looked at for commands to publish again, per instance. */
const ACTIVE_EVERY_MS = 5000;
const MAX_ATTEMPTS: number = BOUNDS.commandAttempts.value;
/** The longest message an answer may carry (more is cut). */
const MAX_MESSAGE = 500;

/** What the downlink publishes through (the MQTT ingest's connection). */
export interface CommandPublisher {
  readonly connected: boolean;
  /** Resolves when the broker acknowledged the message (PUBACK); rejects when it refused it or the connection ended. */
  publish(topic: string, payload: string, expirySeconds: number): Promise<void>;
}

/** A device's answer, as read from its `commandstatus` message. */
export interface CommandAnswer {
  id: string;
  status: 'ACKNOWLEDGED' | 'FAILED';
  message: string | null;
}

/** The device an answer came from, or a publish goes to. */
export interface DownlinkDevice {
  unique_id: string;
  asset_id: string;
}

/** Reads an answer, or throws why it is refused (a 400 the ingest error log keeps). */
export function readAnswer(payload: Buffer): CommandAnswer {
  let body: unknown;
  try {
    body = JSON.parse(payload.toString('utf8'));
  } catch {
    throw badRequest('The payload is not JSON.');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw badRequest('An answer is an object {id, status, message?}.', '/');
  const b = body as Record<string, unknown>;
  const extra = Object.keys(b).filter((k) => k !== 'id' && k !== 'status' && k !== 'message');
  if (extra.length)
    throw badRequest(`An answer has id, status and message only, not ${extra[0]!.slice(0, 40)}.`, `/${extra[0]!.slice(0, 40)}`);
  const id = typeof b.id === 'number' && Number.isSafeInteger(b.id) ? String(b.id) : b.id;
  if (typeof id !== 'string' || !isInt8Id(id)) throw badRequest("id must be the command's id (a decimal string).", '/id');
  if (b.status !== 'ACKNOWLEDGED' && b.status !== 'FAILED') throw badRequest('status must be ACKNOWLEDGED or FAILED.', '/status');
  if (b.message !== undefined && b.message !== null && typeof b.message !== 'string')
    throw badRequest('message must be a string.', '/message');
  const message = typeof b.message === 'string' ? b.message.slice(0, MAX_MESSAGE) : null;
  return { id, status: b.status, message };
}

interface Leased {
  id: string;
  asset_id: string;
  type: string;
  parameters: unknown;
  when_created: Date;
  expires_at: Date;
  publishes: number;
  expiry_seconds: number;
}

/** Counts for /metrics. */
export interface DownlinkCounters {
  published: number;
  refused: number;
  answers: number;
  /** Attempts past BOUNDS.commandAttempts, not stored. */
  unrecorded: number;
}

export class CommandDownlink {
  readonly counters: DownlinkCounters = { published: 0, refused: 0, answers: 0, unrecorded: 0 };
  private publisher: CommandPublisher | null = null;
  private inFlight = 0;
  private closing = false;
  private wake: (() => void) | null = null;
  private again = false;
  private running: Promise<void> | null = null;
  private readonly activeAt = new Map<string, number>();
  private unlisten: (() => void) | null = null;

  constructor(
    private readonly db: Db,
    private readonly cfg: Config,
    private readonly log: FastifyBaseLogger,
    /** This instance's name in leases: stable across restarts, so a restart takes back its own. */
    private readonly instance: string,
  ) {}

  /** Starts publishing through `publisher`: leases this instance held before a restart are free at once. */
  start(publisher: CommandPublisher): void {
    this.publisher = publisher;
    this.unlisten = this.db.listen(DOWNLINK_CHANNEL, () => this.poke());
    this.running = this.run();
  }

  /** Looks for due commands now (a command was made, the connection came back). */
  poke(): void {
    this.again = true;
    const w = this.wake;
    this.wake = null;
    w?.();
  }

  async close(): Promise<void> {
    this.closing = true;
    this.unlisten?.();
    this.poke();
    await this.running;
  }

  private async run(): Promise<void> {
    let freed = false;
    while (!this.closing) {
      this.again = false;
      let full = false;
      try {
        if (!freed) {
          await this.db.query(
            'UPDATE commands SET publish_after = now(), leased_by = NULL WHERE leased_by = $1 AND publish_after IS NOT NULL',
            [this.instance],
          );
          freed = true;
        }
        if (this.publisher?.connected && this.inFlight < MAX_IN_FLIGHT) full = await this.turn();
      } catch (e) {
        this.log.warn({ err: e }, 'MQTT downlink: looking for commands failed; trying again shortly');
      }
      if (this.closing) break;
      if (full || this.again) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          this.wake = null;
          resolve();
        }, this.cfg.COMMAND_POLL_MS);
        timer.unref();
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  }

  /** One claim and its publishes: true when it was full (more may be due). */
  private async turn(): Promise<boolean> {
    const { leased, devices, assets } = await this.db.tx(async (q) => {
      const { rows: due } = await q.query<{ asset_id: string }>(
        `SELECT DISTINCT asset_id FROM commands WHERE publish_after <= now() LIMIT ${CLAIM_ASSETS}`,
      );
      if (!due.length) return { leased: [] as Leased[], devices: new Map<string, string[]>(), assets: 0 };
      // One claimer per asset at a time (here and on every instance), and none while an earlier lease is out.
      const { rows: mine } = await q.query<{ asset_id: string }>(
        `SELECT a AS asset_id FROM unnest($1::uuid[]) a
          WHERE pg_try_advisory_xact_lock(${DOWNLINK_LOCK_SPACE}, hashtext(a::text))
            AND NOT EXISTS (SELECT 1 FROM commands l WHERE l.asset_id = a AND l.leased_by IS NOT NULL AND l.publish_after > now())`,
        [due.map((r) => r.asset_id)],
      );
      const ids = mine.map((r) => r.asset_id);
      if (!ids.length) return { leased: [] as Leased[], devices: new Map<string, string[]>(), assets: due.length };
      const { rows: devs } = await q.query<{ asset_id: string; unique_id: string }>(
        `SELECT asset_id, unique_id FROM devices WHERE asset_id = ANY($1::uuid[]) AND protocol = 'mqtt' AND NOT disabled ORDER BY unique_id`,
        [ids],
      );
      const devices = new Map<string, string[]>();
      for (const d of devs) devices.set(d.asset_id, [...(devices.get(d.asset_id) ?? []), d.unique_id]);
      // Nothing more to publish: ended, out of publishes, no MQTT device any longer, or expired: with
      // less than a second left (MQTT's least expiry interval) it would land expired. The expiry
      // published is the whole seconds left, rounded down, so no broker holds it past expiresAt.
      await q.query(
        `UPDATE commands SET publish_after = NULL, leased_by = NULL
          WHERE asset_id = ANY($1::uuid[]) AND publish_after <= now()
            AND (status NOT IN ('PENDING', 'SENT') OR expires_at < now() + interval '1 second' OR publishes >= $2
                 OR NOT (asset_id = ANY($3::uuid[])))`,
        [ids, this.cfg.COMMAND_MAX_PUBLISHES, [...devices.keys()]],
      );
      const { rows } = await q.query<Leased>(
        `UPDATE commands SET publish_after = now() + $2 * interval '1 second', leased_by = $3, publishes = publishes + 1
          WHERE asset_id = ANY($1::uuid[]) AND publish_after <= now()
          RETURNING id, asset_id, type, parameters, when_created, expires_at, publishes,
                    floor(extract(epoch FROM expires_at - now()))::int AS expiry_seconds`,
        [[...devices.keys()], this.cfg.COMMAND_LEASE_SECONDS, this.instance],
      );
      return { leased: rows, devices, assets: due.length };
    });
    // In id order: one asset's commands reach its device in the order they were made.
    leased.sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1));
    for (const c of leased) for (const uniqueId of devices.get(c.asset_id) ?? []) this.publish(c, uniqueId);
    return assets >= CLAIM_ASSETS;
  }

  private publish(c: Leased, uniqueId: string): void {
    const payload = JSON.stringify({
      id: c.id,
      type: c.type,
      parameters: c.parameters,
      whenCreated: iso(c.when_created),
      expiresAt: iso(c.expires_at),
    });
    this.inFlight++;
    const topic = `${this.cfg.INGEST_MQTT_TOPIC_PREFIX}/${uniqueId}/commands`;
    this.publisher!.publish(topic, payload, c.expiry_seconds).then(
      () => this.settle(c, uniqueId, null),
      (e: unknown) => this.settle(c, uniqueId, e instanceof Error ? e : new Error(String(e))),
    );
  }

  /** The broker's answer to a publish: SENT (PUBACK), or the lease ended so that it is tried again later. */
  private async settle(c: Leased, uniqueId: string, error: Error | null): Promise<void> {
    try {
      if (error) this.counters.refused++;
      else this.counters.published++;
      // A connection that ended is no refusal of the broker's: the command is published again at once.
      const lost = error !== null && (this.closing || !this.publisher?.connected);
      const pushed = await this.db.tx(async (q) => {
        const { rows: cur } = await q.query<Row & { leased_by: string | null }>(
          `SELECT ${SELECT}, leased_by FROM commands WHERE id = $1 FOR UPDATE`,
          [c.id],
        );
        const row = cur[0];
        if (!row) return [];
        const mine = row.leased_by === this.instance;
        if (error) {
          if (!lost) await this.attempt(q, c.id, 'publish', uniqueId, 'REFUSED', error.message.slice(0, MAX_MESSAGE));
          if (mine) {
            const wait = lost ? 0 : Math.min(REFUSED_MIN_MS * 2 ** (c.publishes - 1), REFUSED_MAX_MS);
            await q.query(`UPDATE commands SET publish_after = now() + $2 * interval '1 millisecond', leased_by = NULL WHERE id = $1`, [
              c.id,
              wait,
            ]);
          }
          return [];
        }
        await this.attempt(q, c.id, 'publish', uniqueId, 'PUBACK', null);
        const sent = effective(row) === 'PENDING';
        const { rows } = await q.query<Row>(
          `UPDATE commands
              SET published_at = clock_timestamp(),
                  publish_after = CASE WHEN leased_by = $2 THEN NULL ELSE publish_after END,
                  leased_by = CASE WHEN leased_by = $2 THEN NULL ELSE leased_by END
                  ${sent ? `, status = 'SENT', when_updated = ${after('clock_timestamp()')}` : ''}
            WHERE id = $1 RETURNING ${SELECT}`,
          [c.id, this.instance],
        );
        if (sent) await pushCommands(q, rows);
        return sent ? rows : [];
      });
      if (pushed.length) wakeReaders(this.db);
    } catch (e) {
      // The lease runs out and the command is published again: a duplicate for the device, never a loss.
      this.log.warn({ err: e }, `MQTT downlink: storing the broker's answer for command ${c.id} failed; it is published again`);
    } finally {
      this.inFlight--;
      if (error && !this.closing) this.poke();
    }
  }

  /** Adds to a command's history, up to BOUNDS.commandAttempts entries (the rest are counted). */
  private async attempt(q: Queryable, id: string, kind: 'publish' | 'answer', device: string, status: string, message: string | null) {
    const { rowCount } = await q.query(
      `INSERT INTO command_attempts (command_id, kind, device, status, message)
       SELECT $1, $2, $3, $4, $5 WHERE (SELECT count(*) FROM command_attempts WHERE command_id = $1) < ${MAX_ATTEMPTS}`,
      [id, kind, device, status, message],
    );
    if (!rowCount) this.counters.unrecorded++;
  }

  /**
   * A device's answer: moves its command (through SENT when it was still PENDING) to ACKNOWLEDGED
   * or FAILED and pushes each change. An answer for a command already ended changes nothing (it is
   * in the history). Throws an ApiError (refused into the ingest error log) when the command is not
   * this device's asset's; anything else is the database's (the message is tried again).
   */
  async answer(device: DownlinkDevice, a: CommandAnswer): Promise<void> {
    this.counters.answers++;
    const pushed = await this.db.tx(async (q) => {
      const { rows: cur } = await q.query<Row>(`SELECT ${SELECT} FROM commands WHERE id = $1 FOR UPDATE`, [a.id]);
      const row = cur[0];
      // The same words whether the command is another asset's or none at all: nothing of another fleet shows.
      if (!row || row.asset_id !== device.asset_id) {
        throw new ApiError('NOT_FOUND', `Command ${a.id} is not a command of this device's asset.`, { field: '/id' });
      }
      const from = effective(row);
      await this.attempt(q, a.id, 'answer', device.unique_id, a.status, a.message);
      if (from !== 'PENDING' && from !== 'SENT') return [];
      const moved: Row[] = [];
      if (from === 'PENDING') {
        const { rows } = await q.query<Row>(
          `UPDATE commands SET status = 'SENT', when_updated = ${after('clock_timestamp()')} WHERE id = $1 RETURNING ${SELECT}`,
          [a.id],
        );
        moved.push(rows[0]!);
      }
      const { rows } = await q.query<Row>(
        `UPDATE commands SET status = $2, message = $3, when_updated = ${after('clock_timestamp()')},
                publish_after = NULL, leased_by = NULL
          WHERE id = $1 RETURNING ${SELECT}`,
        [a.id, a.status, a.message],
      );
      moved.push(rows[0]!);
      for (const r of moved) await pushCommands(q, [r]);
      return moved;
    });
    if (pushed.length) wakeReaders(this.db);
  }

  /**
   * Devices that sent something: their SENT commands still unanswered COMMAND_REPUBLISH_SECONDS
   * after the last publish are due again (a device that came back without its session missed them).
   * Looked at once per ACTIVE_EVERY_MS per asset.
   */
  async active(assetIds: string[]): Promise<void> {
    const now = Date.now();
    if (this.activeAt.size > 100_000) this.activeAt.clear();
    const fresh = [...new Set(assetIds)].filter((id) => now - (this.activeAt.get(id) ?? 0) >= ACTIVE_EVERY_MS);
    if (!fresh.length) return;
    for (const id of fresh) this.activeAt.set(id, now);
    const { rowCount } = await this.db.query(
      `UPDATE commands SET publish_after = now()
        WHERE asset_id = ANY($1::uuid[]) AND status = 'SENT' AND publish_after IS NULL AND expires_at > now()
          AND published_at <= now() - $2 * interval '1 second' AND publishes < $3`,
      [fresh, this.cfg.COMMAND_REPUBLISH_SECONDS, this.cfg.COMMAND_MAX_PUBLISHES],
    );
    if (rowCount) this.poke();
  }
}
