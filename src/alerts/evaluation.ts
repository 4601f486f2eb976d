// The alert evaluation (API guide 8), without a database: a specification's rules, and one asset's
// state judged against them, record by record in record time, by the sweep for a silent asset, or
// again after its specification changed. What it raises (events, and notifications for alerts) is
// left in `fired` for the engine to store (engine.ts), which also keeps the state between calls.
//
// Each stored reefer (or genset) data record is judged per condition: out-of-range sensor values,
// unaccepted levels, active alarm codes (controller alarm, CA and scheduler), power loss and, where
// the specification opts in, a reported set point off the specification's (SETPOINT_MISMATCH). A
// violation that has lasted `duration` minutes raises one ALERT, again every `frequency` minutes
// while it lasts; a return to range after an alert raises an INFO, which names the violation's
// latest stored ALERT (clearsEventId; the engine sets that ALERT's clearedAt). Time is record time
// (whenCreated): a replay gives the same alerts. Every event counts towards an hourly ceiling.
import type { AlertRef, Reading } from '../events/events.js';
import { getAtPath } from '../http/dotted-path.js';
import { iso } from '../http/schemas.js';
import { LEVEL_SENSORS, type NotificationValue, type RangesValue, SETPOINT_DEFAULTS, type SettingsValue } from './model.js';

const HOUR = 3_600_000;

/** Minutes as milliseconds: 0, or whole seconds of at least one (a stored 5e-324 must not reach the date arithmetic). */
const minutesMs = (m: number | null | undefined): number => {
  const ms = Math.round((m ?? 0) * 60) * 1000;
  return Number.isFinite(ms) && ms > 0 ? ms : (m ?? 0) > 0 ? 1000 : 0;
};

type Kind = 'range' | 'level' | 'codes' | 'power' | 'setpoint';
interface Rule {
  /** Condition key (range, level, power) or key prefix (codes: `alarm:<code>`). */
  key: string;
  kind: Kind;
  /** Where a record's data holds the reading: the first path present wins. */
  paths: string[][];
  min?: number | null;
  max?: number | null;
  levels?: string[];
  /** setpoint: the specification's set point and how far a reported one may be off it (°C). */
  wanted?: number;
  tolerance?: number;
  durationMs: number;
  frequencyMs: number;
}

const CODE_LABELS: Record<string, string> = { alarm: 'Alarm', ca: 'CA alarm', scheduler: 'Scheduler alarm' };

/** The set point rule's condition key (no sensor's, no code list's). */
const SETPOINT = 'setpoint';
/** What every subject of the set point rule starts with: the dashboard finds its ALERTs by it. */
export const SETPOINT_MISMATCH = 'SETPOINT_MISMATCH';
/**
 * Slack on the tolerance for binary fractions: -17.5 against -18 with 0.5 is a match, and so is a
 * reading like 0.1 + 0.2 against 0.3 with 0. Far below any set point's resolution.
 */
const SETPOINT_EPSILON = 1e-9;

/** The rules a specification's ranges, notification settings and (for the set point rule) settings define. */
export function rulesOf(
  ranges: RangesValue | null,
  notification: NotificationValue | null,
  settings: SettingsValue | null = null,
): Map<string, Rule> {
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
  // Opt-in, and only against a set point the specification holds (absent or null: nothing to match).
  const setpoint = notification?.controller?.setpoint;
  const wanted = settings?.cargo?.settings?.temperatureSetpoint;
  if (setpoint && typeof wanted === 'number' && Number.isFinite(wanted)) {
    rules.set(SETPOINT, {
      key: SETPOINT,
      kind: 'setpoint',
      paths: [['temperatureSetpoint']],
      wanted,
      tolerance: setpoint.tolerance ?? SETPOINT_DEFAULTS.tolerance,
      durationMs: minutesMs(setpoint.default?.duration ?? SETPOINT_DEFAULTS.duration),
      frequencyMs: minutesMs(setpoint.default?.frequency ?? SETPOINT_DEFAULTS.frequency),
    });
  }
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
  /**
   * The violation's latest stored ALERT event, which its INFO ends (absent in a state saved before
   * events named what they end, or while every alert of it was past the ceiling).
   */
  e?: AlertRef;
}

interface AssetState {
  /** Events raised in the current hour of record time (`s` its start), and those left out past the ceiling. */
  w?: { s: number; n: number; x: number; e?: AlertRef };
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

/** A reading as a number: a finite number, or a string holding one (as the evaluation reads it). */
export const numeric = (v: unknown): number | undefined => {
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
    case 'setpoint': {
      const v = numeric(raw);
      if (v === undefined) return undefined;
      return { value: String(v), bad: Math.abs(v - rule.wanted!) > rule.tolerance! + SETPOINT_EPSILON };
    }
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
    case 'setpoint':
      return v.bad
        ? `${SETPOINT_MISMATCH}: set point ${v.value} differs from the specification's ${rule.wanted} by more than ${rule.tolerance} °C`
        : `${SETPOINT_MISMATCH} cleared: set point ${v.value} matches the specification's ${rule.wanted}`;
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

/** The INFO subject when a changed specification drops a condition that alerted. */
const unmonitored = (key: string) =>
  key === SETPOINT ? `${SETPOINT_MISMATCH} cleared: the set point is no longer monitored` : `${key} no longer monitored`;

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
  /** ALERT: its id once taken (raise.ts), for the INFO that ends it. */
  ref?: AlertRef;
  /** INFO: the ALERT event it ends. */
  clears?: AlertRef;
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
   * an INFO event when the hour is over, which ends that ALERT. The conditions' own state moves on
   * as if they had been raised. True when `f` is stored (an ALERT then has its `ref`).
   */
  private raise(f: Fired): boolean {
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
          clears: a.w.e,
        });
      }
      a.w = { s: f.at, n: 0, x: 0 };
    }
    if (a.w.n < limit) {
      a.w.n++;
      if (f.severity === 'ALERT') f.ref = { at: f.at };
      this.fired.push(f);
      return true;
    }
    if (a.w.x++ === 0) {
      a.w.e = { at: f.at };
      this.fired.push({
        severity: 'ALERT',
        summary: true,
        subject: `Alert limit reached: ${limit} alert events since ${isoMs(a.w.s)}; more until ${isoMs(a.w.s + HOUR)} are counted, not stored`,
        current: reading(String(limit), f.at),
        prev: null,
        at: f.at,
        ref: a.w.e,
      });
    }
    return false;
  }

  private alert(c: Cond, subject: string, current: Reading, prev: Reading | null, at: number, recordId: string | null) {
    const a = this.state.a;
    const f: Fired = {
      severity: 'ALERT',
      subject,
      current,
      prev,
      at,
      recordId: recordId ?? undefined,
      assetState: { powerOffSince: stamp(a.powerOffSince), powerOnSince: stamp(a.powerOnSince), lastDefrost: stamp(a.lastDefrost) },
      cmData: a.cm ? { ...a.cm, lastUpdated: isoMs(a.cm.lastUpdated as number) } : null,
    };
    // One past the ceiling is not stored: the violation's INFO ends the latest that was.
    if (this.raise(f)) c.e = f.ref;
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

  /** assetState and cmData (API guide 8) follow the records. */
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
        this.raise({
          severity: 'INFO',
          subject: subjectOf(rule, v),
          current: reading(v.value, r.at),
          prev: prevOf(),
          at: r.at,
          clears: c.e,
        });
      delete c.since;
      delete c.n;
      delete c.due;
      delete c.last;
      delete c.e;
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
          const subject = !rule ? unmonitored(key) : v ? subjectOf(rule, v) : `${key} back in range`;
          // Dated in record time: the newest evaluated record, or the last alert if the sweep raised it later.
          const at = Math.max(this.evaluatedAt ?? now, c.last ?? 0);
          this.raise({
            severity: 'INFO',
            subject,
            current: reading(c.v, c.at),
            prev: c.p ? reading(c.p.v, c.p.at) : null,
            at,
            clears: c.e,
          });
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
