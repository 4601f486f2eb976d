// A real local HTTP receiver for push tests: records every request (headers, exact body bytes,
// arrival time, how many were in flight) and answers as a test scripts it.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  at: number;
}

export interface Answer {
  status: number;
  headers?: Record<string, string>;
  /** Text, or bytes sent exactly as given (a hostile receiver's NUL or invalid UTF-8). */
  body?: string | Buffer;
  delayMs?: number;
  /** Called only when the answer was handed to a sender still waiting for it. */
  onSent?: () => void;
}
export type Responder = (r: Received, n: number) => Answer | Promise<Answer>;

export class Receiver {
  readonly received: Received[] = [];
  inFlight = 0;
  maxInFlight = 0;
  private server = http.createServer((req, res) => void this.handle(req, res));
  private responders = new Map<string, Responder>();
  url = '';

  async start(): Promise<this> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  /** Scripts the answer for a path (default: 200 with {success: true, id}). */
  on(path: string, responder: Responder): this {
    this.responders.set(path, responder);
    return this;
  }

  for(path: string): Received[] {
    return this.received.filter((r) => r.path === path);
  }

  async waitFor(cond: () => boolean, ms = 30_000, what = 'condition'): Promise<void> {
    const end = Date.now() + ms;
    while (!cond()) {
      if (Date.now() > end) throw new Error(`receiver: ${what} not met in ${ms} ms (got ${this.received.length} requests)`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const path = (req.url ?? '/').split('?')[0]!;
    const r: Received = { path, headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() };
    this.received.push(r);
    const n = this.for(path).length;
    const responder = this.responders.get(path) ?? (() => ({ status: 200, body: JSON.stringify({ success: true, id: `rcpt-${n}` }) }));
    const a: Answer = await responder(r, n);
    if (a.delayMs) await new Promise((x) => setTimeout(x, a.delayMs));
    this.inFlight--;
    if (res.destroyed) return;
    if (a.onSent) res.once('finish', a.onSent);
    res.writeHead(a.status, { 'content-type': 'application/json', ...(a.headers ?? {}) });
    res.end(a.body ?? '');
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }
}

/**
 * Asserts a webhook's maxItemsPerMinute on the arrival times a receiver recorded (single mode: one
 * item a request). The limit is a token bucket (API guide 9) holding one second's worth and refilled
 * with the rest of the minute's, so no 60 s window carries more than the limit: any stretch of W ms
 * holds at most capacity + rate x W items, plus the requests already in flight when it began (sent
 * before it, arriving in it; at most maxConcurrentRequests). The bucket's clock is the start of
 * moment a claim holds the integration's lock, and its requests leave after the claim commits, so
 * one claim's requests may arrive later than the next one's by the claim's duration: CLAIM_MS
 * covers that, generously, for a busy machine. Checked on every stretch between two arrivals, so
 * both bursts and the overall pace count.
 */
const CLAIM_MS = 500;
export function assertBucket(times: number[], o: { perMinute: number; maxConcurrent: number }): void {
  const capacity = Math.max(1, Math.min(o.perMinute, Math.ceil(o.perMinute / 60)));
  const ratePerMs = Math.max(o.perMinute - capacity, 1) / 60_000;
  const t = [...times].sort((x, y) => x - y);
  for (let i = 0; i < t.length; i++) {
    for (let j = i; j < t.length; j++) {
      const items = j - i + 1;
      const allowed = capacity + ratePerMs * (t[j]! - t[i]! + CLAIM_MS) + o.maxConcurrent;
      assert.ok(
        items <= allowed,
        `${items} items arrived within ${t[j]! - t[i]!} ms; a bucket of ${capacity} refilled at ${o.perMinute}/min allows ${allowed.toFixed(1)}`,
      );
    }
  }
}
