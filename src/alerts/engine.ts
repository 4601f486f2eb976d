// The alert engine (API guide 8): evaluates each stored batch of reefer (or genset) data against
// its assets' specifications (evaluation.ts) in the records' own transaction, stores the events
// and notifications raised, and runs the sweep that raises what fell due on assets gone silent.
//
// The state lives in the specification's row, read under the batch's asset locks and written by the
// records' own statement, so a crash neither forgets a violation nor notifies twice. Records
// older than the asset's newest evaluated one are stored but not evaluated. A sweep on the server
// clock fires what fell due on assets that went silent, as if their last reading persisted.
//
// Cost per stored batch: one read of whether its assets have specifications (nothing else when
// none); else, under the assets' locks, one read of them, and their new states, events and
// notifications as part of the records' one statement (events' ids taken first when any fired).
import type { FastifyBaseLogger } from 'fastify';
import { assetXactLock, type Db, type Queryable } from '../db/db.js';
import { WriteStatement } from '../db/statement.js';
import type { ObjectType } from '../eventlog/objects.js';
import type { OwnerPaths } from '../eventlog/log.js';
import { getAtPath } from '../http/dotted-path.js';
import { badRequest } from '../http/errors.js';
import { countPoison, isRefusal, setAside } from '../ops/poison.js';
import type { RecordHook, StoredItem } from '../records/hooks.js';
import { type AlertLimits, type AlertState, Evaluation, rulesOf } from './evaluation.js';
import type { NotificationValue, RangesValue, SettingsValue, SpecType } from './model.js';
import { type Raised, raise } from './raise.js';
import { sweepSilence } from './silence.js';
import { sweepVisits } from './visits.js';

interface SpecRow {
  id: string;
  asset_id: string;
  owner_id: string;
  name: string | null;
  /** Its set point, which the set point rule (opt-in in `notification`) judges by. */
  settings: SettingsValue | null;
  ranges: RangesValue | null;
  notification: NotificationValue | null;
  alert_state: Partial<AlertState>;
  evaluated_at: Date | null;
  evaluated_id: string | null;
}

const SPEC_TYPE: Partial<Record<ObjectType, SpecType>> = { reeferdata: 'REEFER', gensetdata: 'GENSET' };
/** The code lists a record's data may carry (API guide 8), each bounded by maxCodesPerList. */
const CODE_LISTS = ['alarms', 'caAlarms', 'schedulerAlarms'] as const;

export interface AlertSettings extends AlertLimits {
  sweepSeconds: number;
  silenceSeconds: number;
}

/** Specifications one transaction of the sweep takes at most. */
const SWEEP_BATCH = 100;
/** The sweep's due specifications ($1 now, $2 ALERT_SILENCE_SECONDS, $3 those held back). */
const DUE = `s.next_due <= $1 AND (s.received_at IS NULL OR s.received_at <= $1::timestamptz - make_interval(secs => $2))
             AND NOT (s.id = ANY($3::uuid[]))`;

/** A specification's evaluation, or null (and a log line) when its rows cannot make one: one bad row never stops the rest. */
type Result = { s: SpecRow; e: Evaluation };

export class AlertEngine {
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<number> | undefined;

  constructor(
    private readonly db: Db,
    private readonly opts: AlertSettings,
    private readonly log: FastifyBaseLogger,
  ) {}

  private evaluationOf(s: SpecRow): Evaluation {
    return new Evaluation(
      { c: s.alert_state.c ?? {}, a: s.alert_state.a ?? {} },
      rulesOf(s.ranges, s.notification, s.settings),
      { at: s.evaluated_at?.getTime() ?? null, id: s.evaluated_id },
      this.opts,
    );
  }

  /**
   * Runs `step` on each specification's evaluation. One that throws (a state no check foresaw) is
   * left out and logged, and the caller parks it: the others are evaluated and saved all the same.
   */
  private each(specs: SpecRow[], step: (e: Evaluation, s: SpecRow) => void): { results: Result[]; broken: string[] } {
    const results: Result[] = [];
    const broken: string[] = [];
    for (const s of specs) {
      try {
        const e = this.evaluationOf(s);
        step(e, s);
        // What save() will write must be writable: every time a real date.
        for (const t of [e.evaluatedAt, e.nextDue(), ...e.fired.map((f) => f.at)]) if (t !== null) new Date(t).toISOString();
        results.push({ s, e });
      } catch (err) {
        broken.push(s.id);
        this.log.error(
          { err, specificationId: s.id, assetId: s.asset_id },
          'alert evaluation failed for this specification; it is skipped',
        );
      }
    }
    return { results, broken };
  }

  /** The records hook for one record type (reeferdata or gensetdata). */
  hook(type: 'reeferdata' | 'gensetdata'): RecordHook<boolean> {
    const specType = SPEC_TYPE[type]!;
    return {
      name: `alerts:${type}`,
      types: [type],
      // With a specification among the batch's assets, its state is read and written under the assets' locks.
      serial: (specified) => specified,
      // API guide 8: one record raises a bounded number of alerts: each code list has at most maxCodesPerList codes.
      before: async (q, batch) => {
        for (const p of batch) {
          const data = (p.item as { data?: unknown }).data;
          for (const list of CODE_LISTS) {
            const v = getAtPath(data, [list]);
            if (Array.isArray(v) && v.length > this.opts.maxCodesPerList) {
              throw badRequest(
                `${p.at}/data/${list} holds ${v.length} codes; at most ${this.opts.maxCodesPerList} are accepted in one record.`,
                `${p.at}/data/${list}`,
              );
            }
          }
        }
        const { rows } = await q.query<{ specified: boolean }>(
          'SELECT EXISTS (SELECT 1 FROM specifications WHERE asset_id = ANY($1::uuid[]) AND type = $2) AS specified',
          [[...new Set(batch.map((p) => p.item.assetId as string))], specType],
        );
        return rows[0]!.specified;
      },
      write: async (q, stmt, rows, specified, records, paths) => {
        if (specified) await this.evaluate(q, stmt, specType, rows, records, paths);
      },
    };
  }

  /**
   * Evaluates a batch about to be stored (the records CTE `records` of `stmt`) against its assets'
   * specifications, read under the assets' locks; adds the new states, events and notifications to
   * the batch's statement.
   */
  private async evaluate(
    q: Queryable,
    stmt: WriteStatement,
    type: SpecType,
    rows: StoredItem[],
    records: string,
    paths: OwnerPaths,
  ): Promise<void> {
    const assetIds = [...new Set(rows.map((r) => r.item.assetId as string))];
    const specs = await this.read(q, type, 's.asset_id = ANY($1::uuid[])', [assetIds], 'ORDER BY s.asset_id');
    if (specs.length === 0) return;
    const byAsset = new Map<string, StoredItem[]>();
    for (const r of rows) {
      const list = byAsset.get(r.item.assetId);
      if (list) list.push(r);
      else byAsset.set(r.item.assetId, [r]);
    }
    const { results, broken } = this.each(specs, (e, s) => {
      const recs = byAsset
        .get(s.asset_id)!
        .map((r) => ({ id: r.id, ownerId: r.ownerId, at: r.time.getTime(), data: r.item.data }))
        .sort((a, b) => a.at - b.at || (BigInt(a.id) < BigInt(b.id) ? -1 : 1));
      for (const r of recs) e.record(r);
    });
    await this.save(q, stmt, type, results, true, { records, paths });
    this.park(stmt, broken);
  }

  /**
   * Takes the asset lock of a specification for the rest of the caller's transaction, before it
   * writes the specification: a store evaluating that asset finishes first, and never waits on a
   * row this transaction holds while holding the lock this one waits for.
   */
  async lockSpecification(q: Queryable, specId: string): Promise<void> {
    await q.query(`SELECT ${assetXactLock('asset_id')} FROM specifications WHERE id = $1`, [specId]);
  }

  /**
   * A specification's ranges, timing or set point changed: re-judge its open state (same
   * transaction, after lockSpecification).
   */
  async respecify(q: Queryable, specId: string, type: SpecType): Promise<void> {
    const specs = await this.read(q, type, 's.id = $1', [specId], 'FOR UPDATE OF s');
    const { results, broken } = this.each(specs, (e) => e.respecify(Date.now()));
    const stmt = new WriteStatement();
    await this.save(q, stmt, type, results, false);
    this.park(stmt, broken);
    if (!stmt.empty) await stmt.run(q);
  }

  /**
   * Fires what fell due by `now` on assets silent for ALERT_SILENCE_SECONDS, in batches of 100
   * rows locked with SKIP LOCKED (several instances share the work), then the silence and zone
   * rules' dues. Returns the events raised.
   *
   * Poison (API guide 4): a specification whose evaluation throws is parked (not due for an hour);
   * one whose new state, event or notification the database refuses fails its batch's transaction,
   * so that batch is swept again one specification at a time and the refused one is set aside (not
   * due for an hour, held back by this process even if the database refuses that too): the others
   * are swept all the same, and none is retried in a tight loop.
   */
  async sweep(now = new Date()): Promise<number> {
    let total = 0;
    for (const type of ['REEFER', 'GENSET'] as const) {
      for (;;) {
        let r: { fired: number; more: boolean };
        try {
          r = await this.sweepSome(type, now);
        } catch (err) {
          if (!isRefusal(err)) throw err;
          r = await this.sweepEach(type, now);
        }
        total += r.fired;
        if (!r.more) break;
      }
    }
    // The rules on assets and zones, on the same clock.
    total += await sweepSilence(this.db, now);
    total += await sweepVisits(this.db, now, this.opts.silenceSeconds);
    return total;
  }

  /** Specifications this process set aside (id to epoch ms): left out of its sweeps until then. */
  private readonly setAsideUntil = new Map<string, number>();

  /** One transaction of the sweep: up to SWEEP_BATCH due specifications of `type` (or only `only`). */
  private async sweepSome(type: SpecType, now: Date, only?: string): Promise<{ fired: number; more: boolean }> {
    const { fired, more, broken } = await this.db.tx(async (q) => {
      // Assets a store is evaluating right now are skipped (their lock is taken), as are rows
      // another instance's sweep holds.
      const params: unknown[] = [now.toISOString(), this.opts.silenceSeconds, this.heldBack()];
      if (only) params.push(only);
      const specs = await this.read(
        q,
        type,
        `${DUE} ${only ? 'AND s.id = $4' : ''} AND ${assetXactLock('s.asset_id', true)}`,
        params,
        `ORDER BY s.asset_id LIMIT ${SWEEP_BATCH} FOR UPDATE OF s SKIP LOCKED`,
      );
      const { results, broken } = this.each(specs, (e) => e.sweep(now.getTime()));
      const stmt = new WriteStatement();
      await this.save(q, stmt, type, results, false);
      this.park(stmt, broken);
      if (!stmt.empty) await stmt.run(q);
      return {
        fired: results.reduce((sum, r) => sum + r.e.fired.length, 0),
        more: specs.length === SWEEP_BATCH,
        broken: broken.length,
      };
    });
    if (broken) countPoison('alert-sweep', 'evaluation-failed', broken);
    return { fired, more };
  }

  /**
   * A batch the database refused: its due specifications each in a transaction of its own, the
   * refused one set aside. What is left (rows others held) waits for the next sweep.
   */
  private async sweepEach(type: SpecType, now: Date): Promise<{ fired: number; more: boolean }> {
    const due = await this.read(
      this.db,
      type,
      DUE,
      [now.toISOString(), this.opts.silenceSeconds, this.heldBack()],
      `ORDER BY s.asset_id LIMIT ${SWEEP_BATCH}`,
    );
    let fired = 0;
    for (const s of due) {
      try {
        fired += (await this.sweepSome(type, now, s.id)).fired;
      } catch (err) {
        if (!isRefusal(err)) throw err;
        this.setAsideUntil.set(s.id, Date.now() + 3_600_000);
        await this.db
          .query(`UPDATE specifications SET next_due = now() + interval '1 hour' WHERE id = $1`, [s.id])
          .catch(() => undefined /* refused too: this process holds it back all the same */);
        setAside('alert-sweep', 'refused', { specificationId: s.id, assetId: s.asset_id }, err, 'not due again for an hour');
      }
    }
    return { fired, more: false };
  }

  /** The ids of specifications this process holds back (set aside less than an hour ago). */
  private heldBack(): string[] {
    const now = Date.now();
    for (const [id, until] of this.setAsideUntil) if (until <= now) this.setAsideUntil.delete(id);
    return [...this.setAsideUntil.keys()];
  }

  start(): void {
    this.timer = setInterval(() => {
      this.sweeping ??= this.sweep()
        .catch((e: Error) => {
          this.log.warn({ err: e }, 'alert sweep failed; it runs again shortly');
          return 0;
        })
        .finally(() => {
          this.sweeping = undefined;
        });
    }, this.opts.sweepSeconds * 1000);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.sweeping;
  }

  private async read(q: Queryable, type: SpecType, where: string, params: unknown[], tail: string): Promise<SpecRow[]> {
    params.push(type);
    const { rows } = await q.query<SpecRow>(
      `SELECT s.id, s.asset_id, a.owner_id, s.name, s.settings, s.ranges, s.notification, s.alert_state, s.evaluated_at, s.evaluated_id::text
         FROM specifications s JOIN assets a ON a.id = s.asset_id
        WHERE ${where} AND s.type = $${params.length}
        ${tail}`,
      params,
    );
    return rows;
  }

  /**
   * A specification whose state cannot be evaluated is not due again for an hour (the sweep must
   * not take it up at every round) and keeps its state for an operator to look at.
   */
  private park(stmt: WriteStatement, ids: string[]): void {
    if (!ids.length) return;
    stmt.with(`UPDATE specifications SET next_due = now() + interval '1 hour' WHERE id = ANY(${stmt.param(ids, 'uuid[]')})`);
  }

  /**
   * Adds the new states, and the events and notifications raised, to `stmt`. `records`: the CTE of
   * records stored by the same statement, which a notification may show.
   */
  private async save(
    q: Queryable,
    stmt: WriteStatement,
    type: SpecType,
    results: { s: SpecRow; e: Evaluation }[],
    received: boolean,
    batch?: { records: string; paths: OwnerPaths },
  ): Promise<void> {
    if (results.length === 0) return;
    const fired = results.flatMap(({ s, e }) => e.fired.map((f) => ({ s, f })));
    const items: Raised[] = fired.map(({ s, f }) => ({
      event: {
        ownerId: s.owner_id,
        assetId: s.asset_id,
        subject: f.subject,
        severity: f.severity,
        currentData: f.current,
        prevData: f.prev,
        whenCreated: new Date(f.at).toISOString(),
        ref: f.ref,
        clears: f.clears,
      },
      // The ceiling's own events (limit reached, events left out) have no notification.
      ...(f.severity === 'ALERT' && !f.summary
        ? {
            notification: {
              type: 'ALERT' as const,
              specificationId: s.id,
              specificationName: s.name,
              zoneId: null,
              recordId: f.recordId ?? null,
              assetState: f.assetState ?? null,
              cmData: f.cmData ?? null,
            },
          }
        : {}),
    }));
    // First: raise() gives the ALERTs' refs their ids, which the states keep for the INFO that ends each.
    await raise(q, stmt, items, { recordType: type, ...batch });
    const at = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
    const states = stmt.arrays(results, [
      [(r) => r.s.id, 'uuid'],
      [(r) => JSON.stringify(r.e.state), 'jsonb'],
      [(r) => at(r.e.evaluatedAt), 'timestamptz'],
      [(r) => r.e.evaluatedId, 'int8'],
      [(r) => at(r.e.nextDue()), 'timestamptz'],
    ]);
    stmt.with(
      `UPDATE specifications s SET alert_state = u.st, evaluated_at = u.ea, evaluated_id = u.ei, next_due = u.nd
         ${received ? ', received_at = now()' : ''}
         FROM unnest(${states}) AS u(id, st, ea, ei, nd)
        WHERE s.id = u.id`,
    );
  }
}
