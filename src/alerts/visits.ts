// Zone visits and the rules on them (API guide 8), one computation for the zone events, the dwell
// alert and the zone report: a visit starts at an asset's first location inside a zone and is
// confirmed (the Entered event) once the asset stayed inside for the zone's enterAfterSeconds; it
// ends at the first location outside, confirmed (the Left event) once the asset stayed outside for
// leaveAfterSeconds. A stay shorter than enterAfterSeconds is a pass-by: no event, no visit. A
// confirmed visit longer than dwellAlertMinutes raises a DWELL alert (event and notification),
// cleared by an INFO event when the visit ends, which names that ALERT (the visit keeps its id).
//
// Time is record time, as for specification alerts: before a location is applied, whatever fell
// due before it fires as if the last location persisted, so the result does not depend on when the
// sweep ran; the sweep fires what fell due on an asset whose locations stopped.
//
// The zones hook (zones/positions.ts) runs this under the asset's lock with the owner's zones and
// writes the result in the store's statement; the alert engine's sweep runs it on the server clock.
import { assetXactLock, type Db, type Queryable } from '../db/db.js';
import { allocateIds, WriteStatement } from '../db/statement.js';
import type { OwnerPaths } from '../eventlog/log.js';
import type { AlertRef, NewEvent } from '../events/events.js';
import { iso } from '../http/schemas.js';
import { type Raised, raise } from './raise.js';

/** A zone as its rules see it. */
export interface ZoneRule {
  id: string;
  ownerId: string;
  name: string;
  enterAfterMs: number;
  leaveAfterMs: number;
  dwellMs: number | null;
}

/** An open visit, as stored (times in epoch ms). */
export interface Visit {
  id: string | null;
  zoneId: string;
  enteredAt: number;
  confirmedAt: number | null;
  leavingAt: number | null;
  leftAt: number | null;
  lastInsideAt: number;
  dwellAlertedAt: number | null;
  /**
   * The dwell alert's ALERT event, which the INFO at the visit's end names: its id (taken when
   * raised) and time. Null before the alert, and in a visit alerted before events named what they end.
   */
  dwellEvent: AlertRef | null;
  /** Dropped: a pass-by (never confirmed), or its zone no longer the asset owner's and unconfirmed. */
  dropped?: boolean;
  changed?: boolean;
}

interface Fired {
  kind: 'enter' | 'leave' | 'dwell' | 'dwellEnd';
  zone: ZoneRule;
  visit: Visit;
  at: number;
}

// Numeric order of positive decimal ids (no sign, no leading zeros): shorter first, then as text.
const byId = (a: string, b: string) => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
const isoMs = (ms: number) => iso(new Date(ms))!;
const minutes = (ms: number) => Math.round(ms / 60_000);

/** One asset's open visits against its owner's zones: locations in time order, or a sweep. */
export class AssetVisits {
  readonly fired: Fired[] = [];

  constructor(
    readonly assetId: string,
    readonly ownerId: string,
    readonly visits: Visit[],
    private readonly zones: ReadonlyMap<string, ZoneRule>,
  ) {}

  private open(): Visit[] {
    return this.visits.filter((v) => !v.dropped && v.leftAt === null).sort((a, b) => byId(a.zoneId, b.zoneId));
  }

  /** The zone of a visit while it is the asset owner's; else the visit ends without an event. */
  private zoneOf(v: Visit, at: number): ZoneRule | null {
    const z = this.zones.get(v.zoneId);
    if (z && z.ownerId === this.ownerId) return z;
    // A deleted zone, or a zone or asset that moved to another owner, simply stops counting.
    if (v.confirmedAt === null) v.dropped = true;
    else v.leftAt = Math.max(at, v.lastInsideAt);
    v.changed = true;
    return null;
  }

  private dwellDue(v: Visit, z: ZoneRule): number | null {
    if (z.dwellMs === null || v.confirmedAt === null || v.leavingAt !== null || v.dwellAlertedAt !== null) return null;
    return Math.max(v.enteredAt + z.dwellMs, v.confirmedAt);
  }

  /** When the sweep next has something to do for the visit (null: nothing until a location comes). */
  nextDue(v: Visit): number | null {
    const z = this.zones.get(v.zoneId);
    if (v.dropped || v.leftAt !== null || !z) return null;
    if (v.confirmedAt === null) return v.enteredAt + z.enterAfterMs;
    if (v.leavingAt !== null) return v.leavingAt + z.leaveAfterMs;
    return this.dwellDue(v, z);
  }

  private fire(kind: Fired['kind'], zone: ZoneRule, visit: Visit, at: number): void {
    if (kind === 'dwell') visit.dwellEvent = { at };
    this.fired.push({ kind, zone, visit, at });
    visit.changed = true;
  }

  private leave(v: Visit, z: ZoneRule, at: number): void {
    v.leftAt = v.leavingAt;
    this.fire('leave', z, v, at);
    if (v.dwellAlertedAt !== null) this.fire('dwellEnd', z, v, at);
  }

  /**
   * Fires what falls due before `until` (strictly, or at it when `inclusive`), as if the last
   * location persisted: a pending enter confirmed, a pending leave confirmed, a dwell alert.
   */
  advance(until: number, inclusive = false): void {
    const due = (t: number | null): t is number => t !== null && (inclusive ? t <= until : t < until);
    const mark = this.fired.length;
    for (const v of this.open()) {
      const z = this.zoneOf(v, until);
      if (!z) continue;
      if (v.confirmedAt === null) {
        const t = v.enteredAt + z.enterAfterMs;
        if (!due(t)) continue;
        v.confirmedAt = t;
        this.fire('enter', z, v, t);
      }
      if (v.leavingAt !== null) {
        const t = v.leavingAt + z.leaveAfterMs;
        if (due(t)) this.leave(v, z, t);
        continue;
      }
      const d = this.dwellDue(v, z);
      if (due(d)) {
        v.dwellAlertedAt = d;
        this.fire('dwell', z, v, d);
      }
    }
    // What this advance fired, in time order (several visits' dues interleave).
    this.fired.push(...this.fired.splice(mark).sort((a, b) => a.at - b.at));
  }

  /** A location at `at` inside the zones `inside` (ids), newer than any before it. */
  location(at: number, inside: readonly string[]): void {
    this.advance(at);
    const now = new Set(inside.filter((id) => this.zones.get(id)?.ownerId === this.ownerId));
    const entered: Fired[] = [];
    const others: Fired[] = [];
    const mark = this.fired.length;
    for (const v of this.open()) {
      const z = this.zoneOf(v, at);
      if (!z) continue;
      if (now.has(v.zoneId)) {
        now.delete(v.zoneId);
        v.lastInsideAt = at;
        v.leavingAt = null;
        v.changed = true;
        if (v.confirmedAt === null && at >= v.enteredAt + z.enterAfterMs) {
          v.confirmedAt = at;
          this.fire('enter', z, v, at);
        }
        const d = this.dwellDue(v, z);
        if (d !== null && at >= d) {
          v.dwellAlertedAt = at;
          this.fire('dwell', z, v, at);
        }
      } else if (v.confirmedAt === null) {
        v.dropped = true; // a pass-by: out again before enterAfterSeconds
        v.changed = true;
      } else {
        v.leavingAt ??= at;
        v.changed = true;
        if (at >= v.leavingAt + z.leaveAfterMs) this.leave(v, z, at);
      }
    }
    for (const id of [...now].sort(byId)) {
      const z = this.zones.get(id)!;
      const v: Visit = {
        id: null,
        zoneId: id,
        enteredAt: at,
        confirmedAt: null,
        leavingAt: null,
        leftAt: null,
        lastInsideAt: at,
        dwellAlertedAt: null,
        dwellEvent: null,
        changed: true,
      };
      this.visits.push(v);
      if (z.enterAfterMs === 0) {
        v.confirmedAt = at;
        this.fire('enter', z, v, at);
      }
    }
    // At one location: every Entered (ascending zone id), then the rest (Left, dwell) as they came.
    for (const f of this.fired.splice(mark)) (f.kind === 'enter' ? entered : others).push(f);
    this.fired.push(...entered, ...others);
  }

  /** Visits and events held, to write: what a chunked store (zones/positions.ts) bounds. */
  get size(): number {
    return this.visits.length + this.fired.length;
  }

  /** After saveVisits wrote them: forgets the events and the ended visits; the open ones stay, unchanged. */
  saved(): void {
    this.fired.length = 0;
    const open = this.visits.filter((v) => !v.dropped && v.leftAt === null);
    for (const v of open) v.changed = false;
    this.visits.splice(0, this.visits.length, ...open);
  }

  /** The events and notifications fired so far, to raise. */
  raised(): Raised[] {
    return this.fired.map((f) => {
      const { zone: z, visit: v } = f;
      const reading = (at: number) => ({ value: z.id, whenCreated: isoMs(at) });
      const event = (subject: string, severity: NewEvent['severity'], since: number, ends?: AlertRef | null): NewEvent => ({
        ownerId: this.ownerId,
        assetId: this.assetId,
        subject,
        severity,
        currentData: reading(since),
        prevData: null,
        whenCreated: new Date(f.at).toISOString(),
        ...(severity === 'ALERT' ? { ref: v.dwellEvent! } : { clears: ends ?? null }),
      });
      switch (f.kind) {
        case 'enter':
          return { event: event(`Entered zone ${z.name}`, 'INFO', v.enteredAt) };
        case 'leave':
          return { event: event(`Left zone ${z.name}`, 'INFO', v.leftAt!) };
        case 'dwellEnd':
          return {
            event: event(
              `Dwell in zone ${z.name} ended after ${minutes(v.leftAt! - v.enteredAt)} minutes`,
              'INFO',
              v.leftAt!,
              v.dwellEvent,
            ),
          };
        default:
          return {
            event: event(`In zone ${z.name} for more than ${minutes(z.dwellMs!)} minutes`, 'ALERT', v.enteredAt),
            notification: {
              type: 'DWELL',
              specificationId: null,
              specificationName: null,
              zoneId: z.id,
              recordId: null,
              assetState: null,
              cmData: null,
            },
          };
      }
    });
  }
}

interface VisitRow {
  id: string;
  asset_id: string;
  zone_id: string;
  entered_at: Date;
  confirmed_at: Date | null;
  leaving_at: Date | null;
  left_at: Date | null;
  last_inside_at: Date;
  dwell_alerted_at: Date | null;
  dwell_event_id: string | null;
}

const ms = (d: Date | null) => (d === null ? null : d.getTime());
const toVisit = (r: VisitRow): Visit => ({
  id: r.id,
  zoneId: r.zone_id,
  enteredAt: r.entered_at.getTime(),
  confirmedAt: ms(r.confirmed_at),
  leavingAt: ms(r.leaving_at),
  leftAt: ms(r.left_at),
  lastInsideAt: r.last_inside_at.getTime(),
  dwellAlertedAt: ms(r.dwell_alerted_at),
  dwellEvent: r.dwell_event_id === null ? null : { id: r.dwell_event_id, at: r.dwell_alerted_at!.getTime() },
});

const VISIT_COLUMNS = `v.id::text, v.asset_id, v.zone_id::text, v.entered_at, v.confirmed_at, v.leaving_at, v.left_at,
   v.last_inside_at, v.dwell_alerted_at, v.dwell_event_id::text`;

/** A zone's timings or owner changed: its open visits are looked at again by the next sweep. */
export async function rescheduleVisits(q: Queryable, zoneId: string): Promise<void> {
  await q.query('UPDATE zone_visits SET next_due = now() WHERE zone_id = $1 AND left_at IS NULL', [zoneId]);
}

/** The open visits of these assets, by asset (read under their locks). */
export async function openVisits(q: Queryable, assetIds: string[], limit?: number): Promise<Map<string, Visit[]>> {
  const { rows } = await q.query<VisitRow>(
    `SELECT ${VISIT_COLUMNS} FROM zone_visits v WHERE v.asset_id = ANY($1::uuid[]) AND v.left_at IS NULL LIMIT $2`,
    [assetIds, limit ?? null],
  );
  const out = new Map<string, Visit[]>();
  for (const r of rows) out.set(r.asset_id, [...(out.get(r.asset_id) ?? []), toVisit(r)]);
  return out;
}

/**
 * Adds the visits' changes, and the events and notifications they fired, to `stmt`. `allocate`:
 * new visits get their ids first (a chunked store updates them by id in a later statement).
 */
export async function saveVisits(
  q: Queryable,
  stmt: WriteStatement,
  assets: AssetVisits[],
  paths?: OwnerPaths,
  allocate = false,
): Promise<void> {
  // First: raise() gives a dwell alert its id, which its visit keeps for the INFO that ends it.
  await raise(
    q,
    stmt,
    assets.flatMap((a) => a.raised()),
    paths ? { paths } : {},
  );
  const at = (t: number | null) => (t === null ? null : new Date(t).toISOString());
  const changed = assets.flatMap((a) => a.visits.filter((v) => v.changed).map((v) => ({ a, v, fresh: v.id === null })));
  const gone = changed.filter((x) => x.v.dropped && x.v.id !== null).map((x) => x.v.id!);
  if (gone.length) stmt.with(`DELETE FROM zone_visits WHERE id = ANY(${stmt.param(gone, 'int8[]')})`);
  const kept = changed.filter((x) => !x.v.dropped);
  if (allocate) {
    const fresh = kept.filter((x) => x.fresh);
    const ids = await allocateIds(q, 'zone_visits', fresh.length);
    for (const [n, x] of fresh.entries()) x.v.id = ids[n]!;
  }
  if (kept.length) {
    const cols = stmt.arrays(kept, [
      [(x) => x.fresh, 'bool'],
      [(x) => x.v.id, 'int8'],
      [(x) => x.a.assetId, 'uuid'],
      [(x) => x.v.zoneId, 'int8'],
      [(x) => x.a.ownerId, 'uuid'],
      [(x) => at(x.v.enteredAt), 'timestamptz'],
      [(x) => at(x.v.confirmedAt), 'timestamptz'],
      [(x) => at(x.v.leavingAt), 'timestamptz'],
      [(x) => at(x.v.leftAt), 'timestamptz'],
      [(x) => at(x.v.lastInsideAt), 'timestamptz'],
      [(x) => at(x.v.dwellAlertedAt), 'timestamptz'],
      [(x) => x.v.dwellEvent?.id ?? null, 'int8'],
      [(x) => at(x.a.nextDue(x.v)), 'timestamptz'],
    ]);
    const u = `u(fresh, id, asset_id, zone_id, owner_id, entered_at, confirmed_at, leaving_at, left_at, last_inside_at, dwell_alerted_at,
                 dwell_event_id, next_due)`;
    stmt.with(
      `UPDATE zone_visits v SET confirmed_at = u.confirmed_at, leaving_at = u.leaving_at, left_at = u.left_at,
              last_inside_at = u.last_inside_at, dwell_alerted_at = u.dwell_alerted_at, dwell_event_id = u.dwell_event_id,
              next_due = u.next_due, when_updated = now()
         FROM unnest(${cols}) AS ${u} WHERE v.id = u.id AND NOT u.fresh`,
    );
    stmt.with(
      `INSERT INTO zone_visits (id, asset_id, zone_id, owner_id, entered_at, confirmed_at, leaving_at, left_at, last_inside_at,
                                dwell_alerted_at, dwell_event_id, next_due) OVERRIDING SYSTEM VALUE
       SELECT COALESCE(id, nextval(pg_get_serial_sequence('zone_visits', 'id'))), asset_id, zone_id, owner_id, entered_at,
              confirmed_at, leaving_at, left_at, last_inside_at, dwell_alerted_at, dwell_event_id, next_due
         FROM unnest(${cols}) AS ${u} WHERE u.fresh`,
    );
  }
}

/** A zone's row as ZONE_RULE_COLUMNS reads it. */
export interface ZoneRuleRow {
  id: string;
  owner_id: string;
  name: string;
  enter_after_seconds: number;
  leave_after_seconds: number;
  dwell_alert_minutes: number | null;
}

/** The columns zoneRule reads, for a query over zones aliased `z`. */
export const ZONE_RULE_COLUMNS = 'z.id::text, z.owner_id, z.name, z.enter_after_seconds, z.leave_after_seconds, z.dwell_alert_minutes';

export const zoneRule = (z: ZoneRuleRow): ZoneRule => ({
  id: z.id,
  ownerId: z.owner_id,
  name: z.name,
  enterAfterMs: z.enter_after_seconds * 1000,
  leaveAfterMs: z.leave_after_seconds * 1000,
  dwellMs: z.dwell_alert_minutes === null ? null : z.dwell_alert_minutes * 60_000,
});

/**
 * The sweep (server clock): fires what fell due by `now` on assets whose latest location came
 * more than `silenceSeconds` ago, in batches of 100 assets locked with SKIP LOCKED (a store for one
 * of them holds its lock: skipped). Returns the events raised.
 */
export async function sweepVisits(db: Db, now: Date, silenceSeconds: number): Promise<number> {
  let total = 0;
  const skipped = new Set<string>();
  for (;;) {
    const { raised, more } = await db.tx(async (q) => {
      const { rows: due } = await q.query<{ asset_id: string; owner_id: string }>(
        `SELECT DISTINCT v.asset_id, a.owner_id FROM zone_visits v
           JOIN assets a ON a.id = v.asset_id
           LEFT JOIN asset_positions p ON p.asset_id = v.asset_id
          WHERE v.next_due <= $1 AND v.left_at IS NULL AND NOT (v.asset_id = ANY($3::uuid[]))
            AND (p.when_received IS NULL OR p.when_received <= $1::timestamptz - make_interval(secs => $2))
          LIMIT 100`,
        [now.toISOString(), silenceSeconds, [...skipped]],
      );
      if (!due.length) return { raised: 0, more: false };
      // The assets a store holds are left for the next round (the store evaluates them itself).
      const { rows: locked } = await q.query<{ id: string }>(
        `SELECT id FROM assets WHERE id = ANY($1::uuid[]) AND ${assetXactLock('id', true)}`,
        [due.map((d) => d.asset_id)],
      );
      const mine = new Set(locked.map((l) => l.id));
      for (const d of due) if (!mine.has(d.asset_id)) skipped.add(d.asset_id);
      const assets = due.filter((d) => mine.has(d.asset_id));
      if (!assets.length) return { raised: 0, more: true };
      const visits = await openVisits(
        q,
        assets.map((a) => a.asset_id),
      );
      const { rows: zones } = await q.query<ZoneRuleRow>(
        `SELECT ${ZONE_RULE_COLUMNS} FROM zones z WHERE z.id IN (SELECT zone_id FROM zone_visits WHERE asset_id = ANY($1::uuid[]) AND left_at IS NULL)`,
        [assets.map((a) => a.asset_id)],
      );
      const rules = new Map(zones.map((z) => [z.id, zoneRule(z)]));
      const evaluated = assets.map((a) => {
        const e = new AssetVisits(a.asset_id, a.owner_id, visits.get(a.asset_id) ?? [], rules);
        e.advance(now.getTime(), true);
        // Every visit looked at gets its next due time again (nothing due now: it stops being picked).
        for (const v of e.visits) v.changed = true;
        return e;
      });
      const stmt = new WriteStatement();
      await saveVisits(q, stmt, evaluated);
      await stmt.run(q);
      return { raised: evaluated.reduce((n, e) => n + e.fired.length, 0), more: due.length === 100 };
    });
    total += raised;
    if (!more) return total;
  }
}
