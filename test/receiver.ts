// A real local HTTP receiver for push tests: records every request (headers, exact body bytes,
// arrival time, how many were in flight) and answers as a test scripts it.
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
  body?: string;
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

  async waitFor(cond: () => boolean, ms = 15_000, what = 'condition'): Promise<void> {
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
