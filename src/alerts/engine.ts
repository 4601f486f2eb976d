// The alert engine (spec 2.8, 2.10, 2.11; API.md 8). Each stored reefer (or genset) data record of
// an asset with a REEFER (or GENSET) specification is evaluated against it, per asset in record
// time order: out-of-range sensor values, unaccepted levels, active alarm codes (controller alarm,
// CA and scheduler) and power loss. A violation that has lasted `duration` minutes raises one
// ALERT Event and one Notification, again every `frequency` minutes while it lasts; a return to
// range after an alert raises an INFO Event.
//
// Time is record time (whenCreated): a replay gives the same alerts. Records older than the
// asset's newest evaluated one are stored but not evaluated. The state lives in the
// specification's row, locked while a batch is evaluated and written in the records' own
// transaction, so a crash neither forgets a violation nor notifies twice. A sweep on the server
// clock fires what fell due on assets that went silent, as if their last reading persisted.
//
// Cost per stored batch: one locking read of the batch's specifications (nothing else when none),
// one update of their state, and one insert each for events and notifications when any.
import type { FastifyBaseLogger } from 'fastify';
import type { Db, Queryable } from '../db/db.js';
import { insertEvents, type NewEvent, type Reading } from '../events/events.js';
import { getAtPath } from '../http/dotted-path.js';
import { badRequest } from '../http/errors.js';
import { iso } from '../http/schemas.js';
import { sqlIso, type ObjectType } from '../outbox/outbox.js';
import type { RecordHook } from '../records/hooks.js';
import { LEVEL_SENSORS, type NotificationValue, type RangesValue, type SpecType } from './specifications.js';

const HOUR = 3_600_000;

/** Minutes as milliseconds: 0, or whole seconds of at least one (a stored 5e-324 must not reach the date arithmetic). */
const minutesMs = (m: number | null | undefined): number => {
  const ms = Math.round((m ?? 0) * 60) * 1000;
  return Number.isFinite(ms) && ms > 0 ? ms : (m ?? 0) > 0 ? 1000 : 0;
};

type Kind = 'range' | 'level' | 'codes' | 'power';
interface Rule {
  /** Condition key (range, level, power) or key prefix (codes: `alarm:<code>`). */
  key: string;
  kind: Kind;
  /** Where a record's data holds the reading: the first path present wins. */
  paths: string[][];
  min?: number | null;
  max?: number | null;
  levels?: string[];
  durationMs: number;
  frequencyMs: number;
}

const CODE_LABELS: Record<string, string> = { alarm: 'Alarm', ca: 'CA alarm', scheduler: 'Scheduler alarm' };

/** The rules a specification's ranges and notification settings define. */
export function rulesOf(ranges: RangesValue | null, notification: NotificationValue | null): Map<string, Rule> {
  const rules = new Map<string, Rule>();
  for (const group of ['cargo', 'hardware'] as const) {
    for (const [key, range] of Object.entries(ranges?.[group]?.sensors ?? {})) {
      const paths = [[key], [group, 'sensors', key]];
      if (LEVEL_SENSORS.includes(key)) {
        rules.set(key, { key, kind: 'level', paths, levels: range as string[], durationMs: 0, frequencyMs: 0 });
      } else {
        const [min, max, duration, frequency] = range as (number | null)[];
        rules.set(key, {
          key,
          kind: 'range',
          paths,
          min: min ?? null,
          max: max ?? null,
          durationMs: minutesMs(duration),
          frequencyMs: minutesMs(frequency),
        });
      }
    }
  }
  const topic = (key: string, kind: Kind, path: string, t: { duration: number; frequency: number } | undefined) => {
    if (t) rules.set(key, { key, kind, paths: [[path]], durationMs: minutesMs(t.duration), frequencyMs: minutesMs(t.frequency) });
  };
  topic('alarm', 'codes', 'alarms', notification?.controller?.alarm?.default);
  topic('ca', 'codes', 'caAlarms', notification?.controller?.ca?.default);
  topic('power', 'power', 'powerOn', notification?.controller?.power?.default);
  topic('scheduler', 'codes', 'schedulerAlarms', notification?.controlModule?.scheduler?.default);
  return rules;
}

/** One condition's state: its last two readings and, while it violates, the violation's course. */
interface Cond {
  v: string;
  at: number;
  p?: { v: string; at: number };
  bad: boolean;
  /** While it violates: what an alert for the last reading says. */
  subj?: string;
  since?: number;
  /** Alerts raised in this violation. */
  n?: number;
  /** When the next alert falls due (null: no more in this violation). */
  due?: number | null;
  last?: number;
}

interface AssetState {
  /** Events raised in the current hour of record time (`s` its start), and those left out past the ceiling. */
  w?: { s: number; n: number; x: number };
  powerOn?: boolean;
  powerOffSince?: number | null;
  powerOnSince?: number | null;
  lastDefrost?: number | null;
  cm?: Record<string, unknown> | null;
}

export interface AlertState {
  c: Record<string, Cond>;
  a: AssetState;
}

interface Verdict {
  value: string;
  bad: boolean;
  /** A range violation above the maximum (else below the minimum). */
  high?: boolean;
}

const numeric = (v: unknown): number | undefined => {
  if (typeof v === 'number' && Number.isFinite(v)) return v;
  if (typeof v === 'string' && v.trim() !== '' && Number.isFinite(Number(v))) return Number(v);
  return undefined;
};

/** The verdict on one reading of a range, level or power rule (undefined: not a reading it judges). */
function judge(rule: Rule, raw: unknown): Verdict | undefined {
  switch (rule.kind) {
    case 'range': {
      const v = numeric(raw);
      if (v === undefined) return undefined;
      const high = rule.max != null && v > rule.max;
      return { value: String(v), bad: high || (rule.min != null && v < rule.min), high };
    }
    case 'level':
      return typeof raw === 'string' ? { value: raw, bad: !rule.levels!.includes(raw) } : undefined;
    case 'power':
      return typeof raw === 'boolean' ? { value: raw ? 'ON' : 'OFF', bad: !raw } : undefined;
    default:
      return undefined;
  }
}

/** What an event says of a verdict (built only when an event is raised or a violation stored). */
function subjectOf(rule: Rule, v: Verdict): string {
  switch (rule.kind) {
    case 'range':
      if (!v.bad) return `${rule.key} back in range (${v.value})`;
      return v.high ? `${rule.key} ${v.value} above maximum ${rule.max}` : `${rule.key} ${v.value} below minimum ${rule.min}`;
    case 'level':
      return v.bad ? `${rule.key} level ${v.value} not accepted` : `${rule.key} level ${v.value} accepted again`;
    case 'power':
      return v.bad ? 'Power off' : 'Power back on';
    default:
      return `${CODE_LABELS[rule.key]} ${v.value} ${v.bad ? 'active' : 'cleared'}`;
  }
}

const read = (data: unknown, rule: Rule) => {
  for (const path of rule.paths) {
    const v = getAtPath(data, path);
    if (v !== undefined) return v;
  }
  return undefined;
};

/** The first cadence point after `t`: due, due + f, due + 2f, ... (null when that cannot be a time). */
const cadenceAfter = (due: number, f: number, t: number): number | null => {
  const next = due + (Math.floor((t - due) / f) + 1) * f;
  return Number.isFinite(next) && next > t ? next : null;
};

export interface Fired {
  severity: 'ALERT' | 'INFO';
  /** The ceiling's own events (limit reached, events left out): no notification. */
  summary?: boolean;
  subject: string;
  current: Reading;
  prev: Reading | null;
  at: number;
  /** ALERT only: the record the notification shows, and the asset state at that moment. */
  recordId?: string;
  assetState?: Record<string, string | null>;
  cmData?: Record<string, unknown> | null;
}

const isoMs = (ms: number) => iso(new Date(ms))!;
const reading = (v: string, at: number): Reading => ({ value: v, whenCreated: isoMs(at) });
const stamp = (ms: number | null | undefined) => (ms == null ? null : isoMs(ms));

export interface StoredRecord {
  id: string;
  ownerId: string;
  at: number;
  data: unknown;
}

/** What bounds the alerts of one asset (API guide 8): configurable, defaults in config.ts. */
export interface AlertLimits {
  /** Codes one list of a record may hold (data.alarms, caAlarms, schedulerAlarms). */
  maxCodesPerList: number;
  /** Events one asset's specification raises per hour of record time; past it, one summary and a count. */
  maxEventsPerHour: number;
}

/** Evaluates one asset's state against its rules: records, a sweep, or a changed specification. */
export class Evaluation {
  readonly fired: Fired[] = [];
  evaluatedAt: number | null;
  evaluatedId: string | null;

  constructor(
    readonly state: AlertState,
    readonly rules: Map<string, Rule>,
    evaluated: { at: number | null; id: string | null },
    readonly limits: AlertLimits,
  ) {
    this.evaluatedAt = evaluated.at;
    this.evaluatedId = evaluated.id;
  }

  /**
   * Every event goes through here: up to maxEventsPerHour per hour of record time. The first one
   * past the ceiling becomes one ALERT saying so; the rest are counted, and the count is told in
   * an INFO event when the hour is over. The conditions' own state moves on as if they had been raised.
   */
  private raise(f: Fired): void {
    const a = this.state.a;
    const limit = this.limits.maxEventsPerHour;
    if (!a.w || f.at - a.w.s >= HOUR) {
      if (a.w && a.w.x > 0) {
        const end = a.w.s + HOUR;
        this.fired.push({
          severity: 'INFO',
          summary: true,
          subject: `${a.w.x} more alert events were not stored between ${isoMs(a.w.s)} and ${isoMs(end)} (at most ${limit} per hour)`,
          current: reading(String(a.w.x), end),
          prev: null,
          at: end,
        });
      }
      a.w = { s: f.at, n: 0, x: 0 };
    }
    if (a.w.n < limit) {
      a.w.n++;
      this.fired.push(f);
    } else if (a.w.x++ === 0) {
      this.fired.push({
        severity: 'ALERT',
        summary: true,
        subject: `Alert limit reached: ${limit} alert events since ${isoMs(a.w.s)}; more until ${isoMs(a.w.s + HOUR)} are counted, not stored`,
        current: reading(String(limit), f.at),
        prev: null,
        at: f.at,
      });
    }
  }

  private alert(c: Cond, subject: string, current: Reading, prev: Reading | null, at: number, recordId: string | null) {
    const a = this.state.a;
    this.raise({
      severity: 'ALERT',
      subject,
      current,
      prev,
      at,
      recordId: recordId ?? undefined,
      assetState: { powerOffSince: stamp(a.powerOffSince), powerOnSince: stamp(a.powerOnSince), lastDefrost: stamp(a.lastDefrost) },
      cmData: a.cm ? { ...a.cm, lastUpdated: isoMs(a.cm.lastUpdated as number) } : null,
    });
    c.n = (c.n ?? 0) + 1;
    c.last = at;
  }

  /** A record, in order; false when it is older than the newest evaluated record (not evaluated). */
  record(r: StoredRecord): boolean {
    if (
      this.evaluatedAt !== null &&
      (r.at < this.evaluatedAt || (r.at === this.evaluatedAt && BigInt(r.id) <= BigInt(this.evaluatedId!)))
    ) {
      return false;
    }
    this.evaluatedAt = r.at;
    this.evaluatedId = r.id;
    this.track(r);
    for (const rule of this.rules.values()) {
      const raw = read(r.data, rule);
      if (raw === undefined) continue;
      if (rule.kind === 'codes') this.codes(rule, raw, r);
      else {
        const v = judge(rule, raw);
        if (v) this.observe(rule, rule.key, v, r);
      }
    }
    return true;
  }

  /** assetState and cmData (API.md 8) follow the records. */
  private track(r: StoredRecord) {
    const a = this.state.a;
    const data = r.data as Record<string, unknown>;
    const power = getAtPath(data, ['powerOn']);
    if (typeof power === 'boolean' && power !== a.powerOn) {
      a.powerOn = power;
      a.powerOnSince = power ? r.at : null;
      a.powerOffSince = power ? null : r.at;
    }
    if (getAtPath(data, ['defrost']) === true) a.lastDefrost = r.at;
    const cm = getAtPath(data, ['controlModule']);
    if (typeof cm === 'object' && cm !== null && !Array.isArray(cm)) {
      const text = (v: unknown) => (v === undefined || v === null ? null : typeof v === 'string' ? v : JSON.stringify(v));
      const m = cm as Record<string, unknown>;
      a.cm = {
        deviceId: text(getAtPath(m, ['deviceId'])),
        serial: text(getAtPath(m, ['serial'])),
        ownerId: r.ownerId,
        firmwareVersion: text(getAtPath(m, ['firmwareVersion'])),
        configuration: text(getAtPath(m, ['configuration'])),
        lastUpdated: r.at, // formatted when a notification shows it
      };
    }
  }

  private codes(rule: Rule, raw: unknown, r: StoredRecord) {
    if (!Array.isArray(raw)) return;
    const active = new Set(
      raw
        .filter((c) => typeof c === 'string' || (typeof c === 'number' && Number.isFinite(c)))
        .slice(0, this.limits.maxCodesPerList)
        .map(String),
    );
    for (const code of active) this.observe(rule, `${rule.key}:${code}`, { value: code, bad: true }, r);
    for (const [key, c] of Object.entries(this.state.c)) {
      if (!key.startsWith(`${rule.key}:`) || active.has(c.v)) continue;
      this.observe(rule, key, { value: c.v, bad: false }, r);
      delete this.state.c[key]; // a cleared code keeps no state
    }
  }

  private observe(rule: Rule, key: string, v: Verdict, r: StoredRecord) {
    // The common case (in range, and was) only moves the readings along: nothing is formatted.
    let c = this.state.c[key];
    const prevOf = () => (c?.p ? reading(c.p.v, c.p.at) : null);
    if (c) {
      c.p = { v: c.v, at: c.at };
      c.v = v.value;
      c.at = r.at;
      c.bad = v.bad;
    } else {
      c = { v: v.value, at: r.at, bad: v.bad };
      this.state.c[key] = c;
    }
    if (v.bad) {
      c.subj = subjectOf(rule, v);
      if (c.since === undefined) {
        c.since = r.at;
        c.n = 0;
        c.due = r.at + rule.durationMs;
      }
      if (c.due != null && r.at >= c.due) {
        this.alert(c, c.subj, reading(v.value, r.at), prevOf(), r.at, r.id);
        c.due = rule.frequencyMs > 0 ? cadenceAfter(c.due, rule.frequencyMs, r.at) : null;
      }
      return;
    }
    if (c.since !== undefined) {
      if ((c.n ?? 0) > 0)
        this.raise({ severity: 'INFO', subject: subjectOf(rule, v), current: reading(v.value, r.at), prev: prevOf(), at: r.at });
      delete c.since;
      delete c.n;
      delete c.due;
      delete c.last;
    }
    delete c.subj;
  }

  /** The sweep: violations due by `now` fire as if their last reading persisted. */
  sweep(now: number) {
    for (const [key, c] of Object.entries(this.state.c)) {
      const rule = this.rules.get(key.split(':')[0]!);
      if (!rule || c.since === undefined || c.due == null || c.due > now) continue;
      this.alert(c, c.subj ?? key, reading(c.v, c.at), c.p ? reading(c.p.v, c.p.at) : null, c.due, this.evaluatedId);
      c.due = rule.frequencyMs > 0 ? cadenceAfter(c.due, rule.frequencyMs, now) : null;
    }
  }

  /**
   * The specification changed (same asset and type): conditions it no longer has are dropped, and
   * each last reading is judged again, so a violation may end (INFO if it had alerted),
   * start from that reading, or take the new duration and frequency.
   */
  respecify(now: number) {
    for (const [key, c] of Object.entries(this.state.c)) {
      const rule = this.rules.get(key.split(':')[0]!);
      const v = rule && rule.kind !== 'codes' ? judge(rule, rule.kind === 'power' ? c.v === 'ON' : c.v) : undefined;
      const bad = rule?.kind === 'codes' ? true : (v?.bad ?? false);
      if (!rule || !bad) {
        if (c.since !== undefined && (c.n ?? 0) > 0) {
          const subject = !rule ? `${key} no longer monitored` : v ? subjectOf(rule, v) : `${key} back in range`;
          // Dated in record time: the newest evaluated record, or the last alert if the sweep raised it later.
          const at = Math.max(this.evaluatedAt ?? now, c.last ?? 0);
          this.raise({ severity: 'INFO', subject, current: reading(c.v, c.at), prev: c.p ? reading(c.p.v, c.p.at) : null, at });
        }
        if (!rule || rule.kind === 'codes') delete this.state.c[key];
        else this.state.c[key] = { v: c.v, at: c.at, p: c.p, bad: false };
        continue;
      }
      if (v) c.subj = subjectOf(rule, v);
      c.bad = true;
      if (c.since === undefined) {
        c.since = c.at;
        c.n = 0;
      }
      if (!c.n) c.due = c.since + rule.durationMs;
      else c.due = rule.frequencyMs > 0 ? c.last! + rule.frequencyMs : null;
      if (c.due !== null && !Number.isFinite(c.due)) c.due = null;
    }
  }

  /** The earliest time anything falls due, for the sweep's index. */
  nextDue(): number | null {
    let min: number | null = null;
    for (const c of Object.values(this.state.c)) {
      if (c.since !== undefined && c.due != null && (min === null || c.due < min)) min = c.due;
    }
    return min;
  }
}

// ---- storage -----------------------------------------------------------------------------------

interface SpecRow {
  id: string;
  asset_id: string;
  owner_id: string;
  name: string | null;
  ranges: RangesValue | null;
  notification: NotificationValue | null;
  alert_state: Partial<AlertState>;
  evaluated_at: Date | null;
  evaluated_id: string | null;
}

const SPEC_TYPE: Partial<Record<ObjectType, SpecType>> = { reeferdata: 'REEFER', gensetdata: 'GENSET' };
const TABLE: Record<SpecType, string> = { REEFER: 'reefer_data', GENSET: 'genset_data' };
// The record a notification shows, in its REST shape (spec 2.6; genset data for a GENSET specification).
const RECORD_JSON: Record<SpecType, string> = {
  REEFER: `jsonb_build_object('id', r.id::text, 'assetId', r.asset_id, 'ownerId', r.owner_id, 'reeferClass', r.reefer_class,
    'gensetManufacturer', r.genset_manufacturer, 'data', r.data, 'whenCreated', ${sqlIso('r.when_created')})`,
  GENSET: `jsonb_build_object('id', r.id::text, 'assetId', r.asset_id, 'ownerId', r.owner_id, 'gensetType', r.genset_type,
    'boxId', r.box_id, 'data', r.data, 'whenCreated', ${sqlIso('r.when_created')})`,
};
// The asset's latest location at the alert's time, with the members of the first zone it was in
// (spec 2.11: "zone-like members name, type, note, whenUpdated").
const LOCATION_JSON = `(SELECT jsonb_build_object('id', l.id::text, 'assetId', l.asset_id, 'ownerId', l.owner_id,
      'latitude', l.latitude, 'longitude', l.longitude, 'altitude', l.altitude, 'heading', l.heading, 'speed', l.speed,
      'zoneId', l.zone_id, 'whenCreated', ${sqlIso('l.when_created')},
      'name', z.name, 'type', z.type, 'note', z.note, 'whenUpdated', ${sqlIso('z.when_updated')})
    FROM locations l
    LEFT JOIN zones z ON z.owner_id = l.owner_id
      AND z.id = CASE WHEN split_part(l.zone_id, ',', 1) ~ '^[0-9]{1,18}$' THEN split_part(l.zone_id, ',', 1)::int8 END
    WHERE l.asset_id = x.a AND l.when_created <= x.w ORDER BY l.when_created DESC, l.id DESC LIMIT 1)`;

/** The code lists a record's data may carry (API guide 8), each bounded by maxCodesPerList. */
const CODE_LISTS = ['alarms', 'caAlarms', 'schedulerAlarms'] as const;

export interface AlertSettings extends AlertLimits {
  sweepSeconds: number;
  silenceSeconds: number;
}

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
      rulesOf(s.ranges, s.notification),
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
  hook(type: 'reeferdata' | 'gensetdata'): RecordHook<void> {
    const specType = SPEC_TYPE[type]!;
    return {
      name: `alerts:${type}`,
      types: [type],
      // API guide 8: one record raises a bounded number of alerts: each code list has at most maxCodesPerList codes.
      before: async (_q, batch) => {
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
      },
      after: (q, rows) => this.evaluate(q, specType, rows),
    };
  }

  /** Evaluates stored rows (one batch) against their assets' specifications, in the batch's transaction. */
  async evaluate(q: Queryable, type: SpecType, rows: any[]): Promise<void> {
    const assetIds = [...new Set(rows.map((r) => r.asset_id as string))];
    const specs = await this.lock(q, type, 's.asset_id = ANY($1::uuid[])', [assetIds]);
    if (specs.length === 0) return;
    const byAsset = new Map<string, any[]>();
    for (const r of rows) {
      const list = byAsset.get(r.asset_id);
      if (list) list.push(r);
      else byAsset.set(r.asset_id, [r]);
    }
    const { results, broken } = this.each(specs, (e, s) => {
      const recs = byAsset
        .get(s.asset_id)!
        .map((r) => ({ id: String(r.id), ownerId: r.owner_id, at: (r.when_created as Date).getTime(), data: r.data }))
        .sort((a, b) => a.at - b.at || (BigInt(a.id) < BigInt(b.id) ? -1 : 1));
      for (const r of recs) e.record(r);
    });
    await this.save(q, type, results, true);
    await this.park(q, broken);
  }

  /** A specification's ranges or timing changed: re-judge its open state (same transaction, row locked). */
  async respecify(q: Queryable, specId: string, type: SpecType): Promise<void> {
    const specs = await this.lock(q, type, 's.id = $1', [specId]);
    const { results, broken } = this.each(specs, (e) => e.respecify(Date.now()));
    await this.save(q, type, results, false);
    await this.park(q, broken);
  }

  /**
   * Fires what fell due by `now` on assets silent for ALERT_SILENCE_SECONDS, in batches of 100
   * rows locked with SKIP LOCKED (several instances share the work). Returns the alerts raised.
   */
  async sweep(now = new Date()): Promise<number> {
    const BATCH = 100;
    let total = 0;
    for (;;) {
      const { fired, more } = await this.db.tx(async (q) => {
        let fired = 0;
        let more = false;
        for (const type of ['REEFER', 'GENSET'] as const) {
          const specs = await this.lock(
            q,
            type,
            `s.next_due <= $1 AND (s.received_at IS NULL OR s.received_at <= $1::timestamptz - make_interval(secs => $2))`,
            [now.toISOString(), this.opts.silenceSeconds],
            `LIMIT ${BATCH} FOR UPDATE OF s SKIP LOCKED`,
          );
          const { results, broken } = this.each(specs, (e) => e.sweep(now.getTime()));
          await this.save(q, type, results, false);
          await this.park(q, broken);
          fired += results.reduce((sum, r) => sum + r.e.fired.length, 0);
          more ||= specs.length === BATCH;
        }
        return { fired, more };
      });
      total += fired;
      if (!more) return total;
    }
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

  private async lock(q: Queryable, type: SpecType, where: string, params: unknown[], tail = 'FOR UPDATE OF s'): Promise<SpecRow[]> {
    params.push(type);
    const { rows } = await q.query<SpecRow>(
      `SELECT s.id, s.asset_id, a.owner_id, s.name, s.ranges, s.notification, s.alert_state, s.evaluated_at, s.evaluated_id::text
         FROM specifications s JOIN assets a ON a.id = s.asset_id
        WHERE ${where} AND s.type = $${params.length}
        ORDER BY s.asset_id ${tail}`,
      params,
    );
    return rows;
  }

  /**
   * A specification whose state cannot be evaluated is not due again for an hour (the sweep must
   * not take it up at every round) and keeps its state for an operator to look at.
   */
  private async park(q: Queryable, ids: string[]): Promise<void> {
    if (!ids.length) return;
    await q.query("UPDATE specifications SET next_due = now() + interval '1 hour' WHERE id = ANY($1::uuid[])", [ids]);
  }

  /** Writes the new states, then the events and notifications raised, in the caller's transaction. */
  private async save(q: Queryable, type: SpecType, results: { s: SpecRow; e: Evaluation }[], received: boolean): Promise<void> {
    if (results.length === 0) return;
    const at = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
    await q.query(
      `UPDATE specifications s SET alert_state = u.st, evaluated_at = u.ea, evaluated_id = u.ei, next_due = u.nd
         ${received ? ', received_at = now()' : ''}
         FROM unnest($1::uuid[], $2::jsonb[], $3::timestamptz[], $4::int8[], $5::timestamptz[]) AS u(id, st, ea, ei, nd)
        WHERE s.id = u.id`,
      [
        results.map((r) => r.s.id),
        results.map((r) => JSON.stringify(r.e.state)),
        results.map((r) => at(r.e.evaluatedAt)),
        results.map((r) => r.e.evaluatedId),
        results.map((r) => at(r.e.nextDue())),
      ],
    );
    const fired = results.flatMap(({ s, e }) => e.fired.map((f) => ({ s, f })));
    if (fired.length === 0) return;
    const events: NewEvent[] = fired.map(({ s, f }) => ({
      ownerId: s.owner_id,
      assetId: s.asset_id,
      subject: f.subject,
      severity: f.severity,
      currentData: f.current,
      prevData: f.prev,
      whenCreated: new Date(f.at).toISOString(),
    }));
    const ids = await insertEvents(q, events);
    const alerts = fired.map((x, n) => ({ ...x, eventId: ids[n]! })).filter((x) => x.f.severity === 'ALERT' && !x.f.summary);
    if (alerts.length === 0) return;
    await q.query(
      `INSERT INTO notifications (owner_id, asset_id, asset_name, type, subject, event_id, specification_id, specification_name,
                                  location, reefer_data, asset_state, cm_data, when_created)
       SELECT x.o, x.a, a.name, 'ALERT', x.s, x.e, x.sid, x.sn, ${LOCATION_JSON},
              (SELECT ${RECORD_JSON[type]} FROM ${TABLE[type]} r WHERE r.id = x.r), x.st, x.cm, x.w
         FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::int8[], $5::uuid[], $6::text[], $7::int8[], $8::jsonb[], $9::jsonb[],
                     $10::timestamptz[]) WITH ORDINALITY AS x(o, a, s, e, sid, sn, r, st, cm, w, n)
         JOIN assets a ON a.id = x.a
        ORDER BY x.n`,
      [
        alerts.map((x) => x.s.owner_id),
        alerts.map((x) => x.s.asset_id),
        alerts.map((x) => x.f.subject),
        alerts.map((x) => x.eventId),
        alerts.map((x) => x.s.id),
        alerts.map((x) => x.s.name),
        alerts.map((x) => x.f.recordId ?? null),
        alerts.map((x) => JSON.stringify(x.f.assetState)),
        alerts.map((x) => (x.f.cmData ? JSON.stringify(x.f.cmData) : null)),
        alerts.map((x) => new Date(x.f.at).toISOString()),
      ],
    );
  }
}
