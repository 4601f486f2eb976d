// Cold-chain excursions of one sensor (API guide 5, "Reports"), without a database: its readings
// in time order in, the excursions, gaps and time in and out of range out.
//
// Time is weighted: each reading holds until the next one, so an excursion starts at the first
// reading outside the range and ends at the first reading back inside. Where the next reading
// comes more than `gapMs` later, the time between is a gap: counted neither in nor out of range,
// and it ends an excursion (nothing is known of it). Only the time within [from, end) counts: a
// reading before `from` holds from `from` on, a reading after `end` only closes the one before.

export interface Span {
  start: number;
  end: number;
}
export interface Excursion extends Span {
  min: number;
  max: number;
}

export interface SensorResult {
  excursions: Excursion[];
  gaps: Span[];
  inMs: number;
  outMs: number;
}

export class ExcursionTracker {
  private last: { t: number; v: number; out: boolean } | null = null;
  /** The excursion under way (`before`: opened by a reading before `from`). */
  private open: (Excursion & { before?: boolean }) | null = null;
  readonly result: SensorResult = { excursions: [], gaps: [], inMs: 0, outMs: 0 };

  constructor(
    private readonly min: number | null,
    private readonly max: number | null,
    private readonly gapMs: number,
    private readonly from: number,
    private readonly end: number,
  ) {}

  private outOfRange(v: number): boolean {
    return (this.min !== null && v < this.min) || (this.max !== null && v > this.max);
  }

  /** The time from the last reading to `t` (the next reading, or the end); `held`: no gap in it. */
  private close(t: number, held = false): void {
    const last = this.last;
    if (!last) return;
    const a = Math.max(last.t, this.from);
    const b = Math.min(t, this.end);
    if (!held && t - last.t > this.gapMs) {
      if (b > a) this.result.gaps.push({ start: a, end: b });
      this.endExcursion(a);
      return;
    }
    if (b > a) {
      if (last.out) this.result.outMs += b - a;
      else this.result.inMs += b - a;
    }
  }

  private endExcursion(at: number) {
    const e = this.open;
    if (!e) return;
    this.open = null;
    const end = Math.min(Math.max(at, e.start), this.end);
    // One that a reading before the range opened and a gap ended at its start was never in it.
    if (e.before && end <= this.from) return;
    this.result.excursions.push({ start: e.start, end, min: e.min, max: e.max });
  }

  /** The next reading (time order); none may come after one at or past the end. */
  push(t: number, v: number): void {
    this.close(t);
    if (t >= this.end) {
      // Only closes the reading before; what is still open ends with the range.
      this.endExcursion(this.end);
      this.last = null;
      return;
    }
    const out = this.outOfRange(v);
    if (out) {
      if (this.open) {
        this.open.min = Math.min(this.open.min, v);
        this.open.max = Math.max(this.open.max, v);
      } else this.open = { start: Math.max(t, this.from), end: 0, min: v, max: v, ...(t < this.from ? { before: true } : {}) };
    } else this.endExcursion(t);
    this.last = { t, v, out };
  }

  /**
   * Readings from `first` to `last` (in time order after the ones before), one within the gap of
   * the next and all of one value: what an hour whose rollup shows only readings in range, close
   * together, amounts to.
   */
  pushSpan(first: number, last: number, v: number): void {
    this.push(first, v);
    if (last <= first || first >= this.end || !this.last) return;
    this.close(last, true);
    if (last >= this.end) {
      this.endExcursion(this.end);
      this.last = null;
      return;
    }
    this.last = { t: last, v, out: this.last.out };
  }

  /**
   * No more readings (none after the range either): the last reading holds to `end` when that is
   * within `gapMs` of it; otherwise the time after it is a gap.
   */
  finish(): SensorResult {
    if (this.last) this.close(this.end);
    this.endExcursion(this.end);
    this.last = null;
    return this.result;
  }
}
