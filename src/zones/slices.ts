// Long computations in slices (API guide 8, "Zones"): matching a bulk's locations to large zones
// and evaluating its zone rules can take seconds of CPU for one tenant; done in one go it would hold
// the event loop, and with it every other tenant's requests, for all of that time. Such loops call
// tick() after each unit of work (one location, one zone indexed), which gives the event loop back
// once the current slice has run SLICE_MS, so another request waits at most about one slice.
import { performance } from 'node:perf_hooks';
import { setImmediate } from 'node:timers/promises';
import { BOUNDS } from '../bounds.js';

/** The longest the event loop runs one slice of such work before it yields, in milliseconds. */
export const SLICE_MS: number = BOUNDS.eventLoopSliceMs.value;

export class Slices {
  private start = performance.now();
  /** How many times this computation gave the event loop back. */
  yields = 0;

  constructor(private readonly budgetMs = SLICE_MS) {}

  /** Yields to the event loop (I/O, timers, other requests) when this slice has used its budget. */
  async tick(): Promise<void> {
    if (performance.now() - this.start < this.budgetMs) return;
    await setImmediate();
    this.yields++;
    this.start = performance.now();
  }
}
