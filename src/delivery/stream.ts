// The result stream (API guide 9): one line per attempt and event, NDJSON for a window that ends,
// or Server-Sent Events that keep following new attempts. It is built to survive clients that do
// not read: a page of the attempt log is read only when the previous one has left the process
// (write() said "wait", then "drain" came), pages are bounded in rows and bytes, a batch's
// response body goes out once (on its first event's line), an NDJSON answer stops at a byte cap
// with a line naming where to continue, and each owner (not each credential: keys are free to
// mint) has a bounded number of streams open. Any error ends the answer and frees its slot.
// A replay costs what the client keeps (`last`: the newest N lines, found by one indexed read) and
// never holds the event loop: lines go out in slices bounded in lines and bytes, one write each,
// with a turn of the event loop (setImmediate) after each, so other requests are served meanwhile.
import type { ServerResponse } from 'node:http';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { Db } from '../db/db.js';
import { drained, yieldTurn } from '../http/backpressure.js';
import { localSlots } from '../http/limits.js';
import { ApiError, badRequest } from '../http/errors.js';
import { DateTime, Literals } from '../http/schemas.js';
import { CHANNELS } from './integrations/schemas.js';
import type { Position } from '../eventlog/log.js';
import * as queue from './queue/index.js';
import { attemptApi } from './history.js';
import { BOUNDS } from '../bounds.js';

export interface StreamLimits {
  /** Streams (following or not) open at once per owner, in the instance (all its HTTP processes). */
  maxOpenPerOwner: number;
  /** How far back `since` may reach. */
  maxWindowHours: number;
  /** An NDJSON answer ends (with a `next` line) once it has sent about this much. */
  maxAnswerBytes: number;
}

const PAGE_ATTEMPTS = 500;
const PAGE_BYTES = 1024 * 1024;
/** A slice of lines serialized and written in one turn of the event loop, then the loop gets its turn. */
const SLICE_LINES = 64;
const SLICE_BYTES = 32 * 1024;
/** `last` reaches at most this many lines back (the dashboard keeps 2,000). */
export const MAX_LAST: number = BOUNDS.streamLast.value;
const FOLLOW_POLL_MS = 1000;
/** A position in the attempt log, as SSE ids and `after` carry it: transaction, then id, both int8. */
const POSITION = /^(\d{1,19})\.(\d{1,19})$/;
const INT8_MAX = 9223372036854775807n;

/**
 * This process's open streams (what they hold in memory, for /metrics), and the count per owner:
 * here, or for the whole instance where `take` counts them elsewhere (several HTTP processes).
 */
export class ResultStreams {
  private readonly perOwner = localSlots();
  private readonly responses = new Set<ServerResponse>();

  constructor(
    readonly limits: StreamLimits,
    /** Where the per-owner count is kept: by default here (`takeHere`). */
    private readonly take: (ownerId: string, max: number) => Promise<(() => void) | null> = async (o, max) => this.takeHere(o, max),
  ) {}

  get open(): number {
    return this.responses.size;
  }

  /** Bytes written to open streams and not yet taken by the socket: bounded by back-pressure. */
  get bufferedBytes(): number {
    let n = 0;
    for (const r of this.responses) n += r.writableLength;
    return n;
  }

  /** Takes a slot of the owner, or refuses with 429; the returned function gives it back (once). */
  async admit(ownerId: string): Promise<() => void> {
    const release = await this.take(ownerId, this.limits.maxOpenPerOwner);
    if (release) return release;
    throw new ApiError(
      'TOO_MANY_CONCURRENT',
      `At most ${this.limits.maxOpenPerOwner} result streams may be open per owner; close one first.`,
      { headers: { 'Retry-After': '5' } },
    );
  }

  /** A slot of the owner counted in this process, or null when it has `max` open. */
  takeHere(ownerId: string, max: number): (() => void) | null {
    return this.perOwner(ownerId, 1, max);
  }

  track(res: ServerResponse): () => void {
    this.responses.add(res);
    return () => this.responses.delete(res);
  }
}

/** A position given by a client (Last-Event-ID or `after`): 400 unless both parts fit int8. */
function parsePosition(raw: string | undefined, field: string): Position | null {
  if (raw === undefined || raw === '') return null;
  const m = POSITION.exec(raw);
  if (!m || BigInt(m[1]!) > INT8_MAX || BigInt(m[2]!) > INT8_MAX) {
    throw badRequest(`${field} must be a position this stream sent (two whole numbers joined by a dot).`, field);
  }
  return { tx: m[1]!, id: m[2]! };
}

/** Whether position a comes after b in the attempt log. */
const later = (a: Position, b: Position) => BigInt(a.tx) > BigInt(b.tx) || (BigInt(a.tx) === BigInt(b.tx) && BigInt(a.id) > BigInt(b.id));

/** Waits `ms`, or less if the response closes meanwhile. */
function pause(res: ServerResponse, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(t);
      res.off('close', done);
      resolve();
    };
    const t = setTimeout(done, ms);
    res.on('close', done);
  });
}

const StreamQuery = Type.Object({
  channel: Type.Optional(Literals(CHANNELS, { description: 'Default: all three' })),
  since: Type.Optional(DateTime),
  after: Type.Optional(
    Type.String({ maxLength: 40, description: 'Continue after this position (from an answer\'s "next" line, or an SSE id)' }),
  ),
  last: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: MAX_LAST,
      description:
        'Replay only the newest this many lines of the window (whole attempts: a batch request at the start may add up to its events less one), then go on as usual',
    }),
  ),
});

export const streamRoutes: FastifyPluginAsyncTypebox<{ db: Db; streams: ResultStreams }> = async (app, opts) => {
  const { db, streams } = opts;
  const { limits } = streams;

  app.get('/deliveries/stream', {
    schema: {
      tags: ['deliveries'],
      summary:
        'Delivery results: NDJSON for a window (default the last 24 h), or SSE (Accept: text/event-stream) that keeps following. One line per attempt and event (a batch request: one per event, sharing requestId; its response body on the first). An operator sees every integration; anyone else those whose owners it all sees',
      querystring: StreamQuery,
      // Written by hand (the reply is hijacked): documented for clients, never used to serialize.
      response: {
        200: {
          description: 'One JSON object per attempt and event: NDJSON lines, or SSE `data:` events',
          content: { 'application/x-ndjson': { schema: Type.String() }, 'text/event-stream': { schema: Type.String() } },
        },
      },
    },
    handler: async (req, reply) => {
      const q = req.query;
      const sse = /text\/event-stream/.test(req.headers.accept ?? '');
      const earliest = Date.now() - limits.maxWindowHours * 3600_000;
      const since = q.since ?? new Date(Math.max(earliest, Date.now() - 86400_000)).toISOString();
      if (Date.parse(since) < earliest) {
        throw badRequest(
          `since reaches at most ${limits.maxWindowHours} hours back; older attempts are in each integration's deliveries.`,
          '/since',
        );
      }
      // A follower that reconnects names the last event it got (Last-Event-ID, as EventSource does).
      const lastEventId = req.headers['last-event-id'];
      const resume =
        parsePosition(q.after, '/after') ??
        (sse ? parsePosition(typeof lastEventId === 'string' ? lastEventId : undefined, '/headers/last-event-id') : null);
      const visible = await req.tenancy.visibleOwners();
      const scope = { since, channel: q.channel ?? null, owners: visible === 'all' ? null : visible, follow: sse };
      const read = (after: Position) =>
        // A follower reads below the horizon only; a window answers with what is committed now.
        queue.streamAfter(db, { ...scope, after, limit: PAGE_ATTEMPTS, bytes: PAGE_BYTES });

      const release = await streams.admit(req.tenancy.principal.ownerId);
      let page: Awaited<ReturnType<typeof read>>;
      let start = resume ?? { tx: '0', id: '0' };
      try {
        // `last`: the replay starts at the newest N lines, or later where the client resumes.
        if (q.last !== undefined) {
          const newest = await queue.streamStart(db, { ...scope, last: q.last });
          if (newest && later(newest, start)) start = newest;
        }
        // The first page before any byte is sent: a failure here is still an ordinary error answer.
        page = await read(start);
      } catch (e) {
        release();
        throw e;
      }

      reply.hijack();
      const res = reply.raw;
      const untrack = streams.track(res);
      let open = true;
      res.on('close', () => {
        open = false;
        release();
        untrack();
      });
      res.writeHead(200, {
        'content-type': sse ? 'text/event-stream' : 'application/x-ndjson',
        'cache-control': 'no-store',
        ...(sse ? { connection: 'keep-alive' } : {}),
      });
      // API guide 7: a following stream leaves the credential's in-flight count once its headers are out.
      if (sse) req.leaveInFlight();

      // Lines are gathered into a slice (SLICE_LINES lines or SLICE_BYTES), written at once; then the
      // event loop gets a turn, and a client that does not read is waited for ("drain").
      let written = 0;
      let slice = '';
      let sliceLines = 0;
      const flush = async () => {
        if (slice) {
          const ok = res.write(slice);
          slice = '';
          sliceLines = 0;
          if (!ok) await drained(res);
        }
        await yieldTurn();
      };
      const write = async (line: string) => {
        written += Buffer.byteLength(line);
        slice += line;
        if (++sliceLines >= SLICE_LINES || slice.length >= SLICE_BYTES) await flush();
      };
      const nextUrl = (after: Position) => {
        const u = new URL(req.url, req.server.publicUrl);
        // The continuation goes on from `after`: the newest N were chosen when the answer began.
        u.searchParams.delete('last');
        u.searchParams.set('since', since);
        u.searchParams.set('after', `${after.tx}.${after.id}`);
        return `${req.server.publicUrl}${u.pathname}${u.search}`;
      };
      try {
        let after = start;
        for (;;) {
          for (const a of page.rows) {
            if (!open) return;
            if (a.n === 1) {
              // A new attempt: an NDJSON answer past its cap ends here, naming where to go on.
              if (!sse && written >= limits.maxAnswerBytes) {
                await write(`${JSON.stringify({ next: nextUrl(after) })}\n`);
                await flush();
                return;
              }
              after = { tx: a.tx_id, id: a.id };
            }
            const text = JSON.stringify({
              ...attemptApi(a),
              integrationId: a.integration_id,
              channel: a.channel,
              eventId: a.event_id,
              objectType: a.object_type,
            });
            await write(sse ? `id: ${a.tx_id}.${a.id}\ndata: ${text}\n\n` : `${text}\n`);
          }
          // The page's last slice goes out (and the event loop gets a turn) before the next is read.
          await flush();
          after = page.next;
          if (!page.more || page.rows.length === 0) {
            if (!sse) return;
            await pause(res, FOLLOW_POLL_MS);
            if (!open) return;
            await write(': keep-alive\n\n');
            await flush();
          }
          if (!open) return;
          page = await read(after);
        }
      } catch (e) {
        req.log.warn({ err: e }, 'result stream ended by an error');
        // NDJSON: the answer is cut off (not ended cleanly), so the client knows it is incomplete.
        // SSE: an error event, then the end; EventSource reconnects with its Last-Event-ID.
        if (sse && open) res.write('event: error\ndata: {"error":"Service Unavailable","message":"The stream stopped; reconnect."}\n\n');
        else res.destroy();
      } finally {
        if (!res.destroyed) res.end();
        release();
        untrack();
      }
    },
  });
};
