// What a streaming answer waits for: its client to take more, or a turn of the event loop, so one
// stream's writing never holds the others (the result stream and the live fleet both use them).
import type { ServerResponse } from 'node:http';

/** Resolves once the response can take more, or has closed. */
export function drained(res: ServerResponse): Promise<void> {
  if (!res.writableNeedDrain || res.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

/** One turn of the event loop: what waits (other requests, timers, I/O) runs before the next slice. */
export const yieldTurn = () => new Promise<void>((resolve) => setImmediate(resolve));
