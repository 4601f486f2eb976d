// GET /locations/live (API guide 9, "Live fleet"): Server-Sent Events for the fleet page and any
// client that shows positions as they are stored. First a snapshot (every visible asset with its
// latest position, what a map needs to draw at once, up to liveSnapshotAssets), then a message per
// asset whose latest position changed (coalesced over COALESCE_MS: a burst is the latest), each new
// event, notification and asset change of the owners the credential sees. No ids: a client that
// reconnects gets a fresh snapshot, which is the state. The stream is fed by the process's one
// reader (feed.ts); what waits for a client is bounded, and a client that cannot keep up is ended
// with an `end` event naming the reason.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { Db } from '../db/db.js';
import { drained, yieldTurn } from '../http/backpressure.js';
import { ApiError } from '../http/errors.js';
import { Uuid } from '../http/schemas.js';
import { BOUNDS } from '../bounds.js';
import { locations } from '../records/records.js';
import { COALESCE_MS, type EndReason, type LiveFeed, type LiveMessage, MAX_BUFFERED, MAX_QUEUED, type Subscriber } from './feed.js';

/** A reconnect's wait that the stream asks of EventSource clients (`retry:`). */
const RETRY_MS = 2000;
/** A comment line this often, so proxies keep an idle stream open. */
export const HEARTBEAT_MS = 15_000;
const MAX_SNAPSHOT: number = BOUNDS.liveSnapshotAssets.value;
/** Snapshot assets written in one write, then the event loop gets its turn. */
const SNAPSHOT_SLICE = 500;

const LiveQuery = Type.Object({
  ownerId: Type.Optional({ ...Uuid, description: "Only this owner's assets (one the credential sees)" }),
});

const SNAPSHOT_SQL = (cond: string, owner: string) => `
  SELECT a.id, a.name, a.disabled, a.owner_id AS asset_owner, p.location_id::text AS location_id, p.asset_id, p.owner_id, p.latitude,
         p.longitude, p.altitude, p.heading, p.speed, p.zone_id, p.when_created
    FROM assets a LEFT JOIN asset_positions p ON p.asset_id = a.id
   WHERE ${cond}${owner}
   ORDER BY p.when_created DESC NULLS LAST, a.id
   LIMIT ${MAX_SNAPSHOT + 1}`;

export const liveRoutes: FastifyPluginAsyncTypebox<{ db: Db; feed: LiveFeed }> = async (app, { db, feed }) => {
  app.get('/locations/live', {
    schema: {
      tags: ['locations'],
      summary:
        'The live fleet, as Server-Sent Events: a snapshot of every visible asset with its latest position, then positions (the latest, per asset), events, notifications and asset changes as they are stored. No ids: a reconnect gets a fresh snapshot',
      querystring: LiveQuery,
      // Written by hand (the reply is hijacked): documented for clients, never used to serialize.
      response: {
        200: {
          description:
            'Server-Sent Events: `snapshot` first, then `position`, `event`, `notification`, `asset`; `end` before the server ends it',
          content: { 'text/event-stream': { schema: Type.String() } },
        },
      },
    },
    handler: async (req, reply) => {
      const t = req.tenancy;
      const ownerFilter = req.query.ownerId ?? null;
      if (ownerFilter) await t.assertOwner(ownerFilter);
      const visible = await t.visibleOwners();
      const release = await feed.admit(t.principal.ownerId);

      // What waits for the client: positions one per asset (the latest), the rest in order, bounded.
      const positions = new Map<string, LiveMessage>();
      let others: LiveMessage[] = [];
      let timer: NodeJS.Timeout | null = null;
      let ready = false;
      let open = true;
      let writing = false;
      const res = reply.raw;
      let unsubscribe: () => void = () => {};
      let heartbeat: NodeJS.Timeout | undefined;

      const finish = (reason: EndReason | null, message = '') => {
        if (!open) return;
        open = false;
        if (timer) clearTimeout(timer);
        clearInterval(heartbeat);
        unsubscribe();
        release();
        if (reason && !res.destroyed && res.headersSent) {
          res.write(`event: end\ndata: ${JSON.stringify({ reason, message })}\n\n`);
        }
        if (res.headersSent && !res.destroyed) res.end();
      };
      const flush = async () => {
        timer = null;
        if (!open || writing || !ready) return;
        writing = true;
        try {
          while (open && (positions.size || others.length)) {
            let text = '';
            for (const m of others) text += `event: ${m.kind}\ndata: ${JSON.stringify(m.data)}\n\n`;
            for (const m of positions.values()) text += `event: position\ndata: ${JSON.stringify(m.data)}\n\n`;
            others = [];
            positions.clear();
            if (!res.write(text)) {
              if (res.writableLength > MAX_BUFFERED) {
                finish('SLOW_CLIENT', 'The client did not take what was sent; reconnect for a fresh snapshot.');
                return;
              }
              await drained(res);
            }
            await yieldTurn();
          }
        } finally {
          writing = false;
        }
      };
      const schedule = () => {
        if (!timer && open) timer = setTimeout(() => void flush(), COALESCE_MS);
      };
      const sub: Subscriber = {
        visible: visible === 'all' ? null : new Set(visible),
        ownerFilter,
        authorization: req.headers.authorization ?? '',
        deliver(messages) {
          for (const m of messages) {
            if (m.kind === 'position') positions.set(m.assetId, m);
            else others.push(m);
          }
          if (others.length > MAX_QUEUED) {
            finish('SLOW_CLIENT', `More than ${MAX_QUEUED} messages waited for the client; reconnect for a fresh snapshot.`);
            return;
          }
          schedule();
        },
        end: (reason, message) => finish(reason, message),
      };

      let snapshot: any[];
      try {
        unsubscribe = await feed.subscribe(sub);
        const params: unknown[] = [];
        const cond = await t.where('a.owner_id', params);
        let owner = '';
        if (ownerFilter) {
          params.push(ownerFilter);
          owner = ` AND a.owner_id = $${params.length}::uuid`;
        }
        snapshot = (await db.query(SNAPSHOT_SQL(cond, owner), params)).rows;
      } catch (e) {
        finish(null);
        throw e;
      }
      // Ended while the snapshot was read (its client was already too slow): nothing was sent yet.
      if (!open)
        throw new ApiError('SERVICE_BUSY', 'Too much happened while the snapshot was read; reconnect.', {
          headers: { 'Retry-After': '1' },
        });

      reply.hijack();
      heartbeat = setInterval(() => {
        if (open && !writing) res.write(': keep-alive\n\n');
      }, HEARTBEAT_MS);
      heartbeat.unref();
      res.on('close', () => finish(null));
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store', connection: 'keep-alive' });
      // API guide 7: a stream leaves the credential's in-flight count once its headers are out.
      req.leaveInFlight();

      try {
        const truncated = snapshot.length > MAX_SNAPSHOT;
        const rows = truncated ? snapshot.slice(0, MAX_SNAPSHOT) : snapshot;
        // One event, written a slice at a time: SSE joins its data lines with newlines (valid JSON).
        res.write(`retry: ${RETRY_MS}\n\nevent: snapshot\ndata: {"truncated":${truncated},"maxAssets":${MAX_SNAPSHOT},"assets":[\n`);
        for (let i = 0; i < rows.length && open; i += SNAPSHOT_SLICE) {
          const part = rows
            .slice(i, i + SNAPSHOT_SLICE)
            .map((r) =>
              JSON.stringify({
                id: r.id,
                name: r.name,
                disabled: r.disabled,
                ownerId: r.asset_owner,
                position: r.location_id === null ? null : locationOf(r),
              }),
            )
            .join(',');
          if (!res.write(`data: ${i ? ',' : ''}${part}\n`)) await drained(res);
          await yieldTurn();
        }
        if (!open) return;
        res.write('data: ]}\n\n');
        ready = true;
        await flush();
      } catch (e) {
        req.log.warn({ err: e }, 'live stream ended by an error');
        finish('ERROR', 'The stream stopped; reconnect.');
      }
    },
  });
};

/** The location's API shape from a snapshot row (its location's id is `location_id`). */
function locationOf(r: any) {
  return locations.toApi({ ...r, id: r.location_id });
}
