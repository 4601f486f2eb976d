// A supervisor's restarts of the children that exit (delivery processes, HTTP processes): after
// 1 s, doubling to 30 s while one keeps failing; one that ran a minute was healthy, and its next
// restart starts the backoff afresh.
export class Restarts {
  private readonly timers = new Map<number, NodeJS.Timeout>();

  /**
   * Starts `slot` again with `start(failures)` after the backoff; `startedAt`: when the child that
   * exited started, `failures`: how often that slot had failed before it. Returns the delay (ms).
   */
  after(slot: number, startedAt: number, failures: number, start: (failures: number) => void): number {
    const n = Date.now() - startedAt > 60_000 ? 0 : failures + 1;
    const delay = Math.min(30_000, 1000 * 2 ** Math.max(0, n - 1));
    this.timers.set(
      slot,
      setTimeout(() => {
        this.timers.delete(slot);
        start(n);
      }, delay),
    );
    return delay;
  }

  /** No restart that is waiting happens. */
  cancel(): void {
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
  }
}
