// Acknowledging alerts (API guide 8, "Acknowledging an alert"): someone says they have seen an
// alert. An ALERT event and the notification raised with it are one alert, so acknowledging either
// records who and when on both, once (the first acknowledgement stands; a second changes nothing
// and answers the first). Only ALERT events are acknowledged: an INFO event tells, it asks nothing.
// Each acknowledgement is in the audit log. The columns are the events' and notifications' own
// (migration 0028), so every read and export shows them.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { type AuditActor, recordMany } from '../audit/audit.js';
import { BOUNDS } from '../bounds.js';
import type { Db, Queryable } from '../db/db.js';
import { Event, toEventApi } from '../events/events.js';
import { ApiError, conflict, notFound } from '../http/errors.js';
import { IdParam, isInt8Id } from '../http/schemas.js';
import type { Tenancy } from '../tenancy/tenancy.js';
import { Notification, toNotificationApi } from './notifications.js';

const tags = ['events'];
const Int8Id = Type.String({ pattern: '^[1-9][0-9]{0,18}$', maxLength: 19, description: 'int64 as a decimal string' });
const AcknowledgeMany = Type.Object({
  ids: Type.Array(Int8Id, {
    minItems: 1,
    maxItems: BOUNDS.alertsPerAcknowledge.value,
    uniqueItems: true,
    description: 'ALERT events to acknowledge, all or none',
  }),
});

/** An event the caller does not see, or that does not exist: alike (existence does not leak). */
const missing = (field: string | undefined) =>
  field === undefined ? notFound('event') : new ApiError('NOT_FOUND', `event at ${field} not found`, { field });

/**
 * Acknowledges the ALERT events `ids` (all visible to `t`, each an ALERT, else an error naming the
 * first that is not, and nothing changes) and their notifications; returns the events in `ids`'
 * order. `at`: the field of each id in the request, for errors.
 */
async function acknowledge(q: Queryable, t: Tenancy, ids: string[], at: (n: number) => string | undefined): Promise<any[]> {
  for (const [n, id] of ids.entries()) {
    if (!isInt8Id(id)) throw missing(at(n));
  }
  const params: unknown[] = [ids];
  const cond = await t.where('owner_id', params, q);
  const { rows: found } = await q.query<{ id: string; severity: string }>(
    `SELECT id::text, severity FROM events WHERE id = ANY($1::int8[]) AND ${cond}`,
    params,
  );
  const severity = new Map(found.map((r) => [r.id, r.severity]));
  for (const [n, id] of ids.entries()) {
    const s = severity.get(id);
    if (s === undefined) throw missing(at(n));
    if (s !== 'ALERT') throw conflict(`event ${id} is an ${s} event: only an ALERT event is acknowledged`, at(n));
  }
  await acknowledgeEvents(q, t, ids);
  const { rows } = await q.query('SELECT * FROM events WHERE id = ANY($1::int8[])', [ids]);
  const byId = new Map(rows.map((r) => [String(r.id), r]));
  return ids.map((id) => toEventApi(byId.get(id) as Parameters<typeof toEventApi>[0]));
}

/**
 * Records `who` as having acknowledged the ALERT events `ids` (seen, checked, by the caller) and
 * their notifications, with their audit entries; an alert already acknowledged keeps its first.
 * Answers the ids this call acknowledged.
 */
export async function acknowledgeEvents(q: Queryable, who: AuditActor, ids: string[]): Promise<string[]> {
  // The first acknowledgement stands: rows already acknowledged are left as they are.
  const { rows: changed } = await q.query<{ id: string; owner_id: string; acknowledged_at: Date }>(
    `WITH ev AS (
       UPDATE events SET acknowledged_at = now(), acknowledged_by = $2
        WHERE id = ANY($1::int8[]) AND acknowledged_at IS NULL
        RETURNING id, owner_id, acknowledged_at),
     -- Runs whether or not the query reads it (a data-modifying CTE always does).
     n AS (
       UPDATE notifications SET acknowledged_at = ev.acknowledged_at, acknowledged_by = $2
         FROM ev WHERE notifications.event_id = ev.id AND notifications.acknowledged_at IS NULL
         RETURNING 1)
     SELECT id::text, owner_id, acknowledged_at FROM ev`,
    [ids, who.principal.actor],
  );
  // One entry each, written in one statement (a bulk of 1,000 is not 1,000 round trips).
  await recordMany(
    q,
    who,
    changed.map((r) => ({
      action: 'acknowledge',
      type: 'event',
      id: r.id,
      ownerId: r.owner_id,
      after: { acknowledgedAt: r.acknowledged_at.toISOString(), acknowledgedBy: who.principal.actor },
    })),
  );
  return changed.map((r) => r.id);
}

export const acknowledgeRoutes: FastifyPluginAsyncTypebox<{ db: Db }> = async (app, { db }) => {
  app.post('/events/:id/acknowledge', {
    schema: {
      tags,
      summary: 'Acknowledge an ALERT event and the notification raised with it (the first acknowledgement stands)',
      params: IdParam,
      response: { 200: Event },
    },
    handler: async (req) => {
      const id = req.params.id;
      if (!isInt8Id(id)) throw notFound('event');
      const [event] = await db.tx((q) => acknowledge(q, req.tenancy, [id], () => undefined));
      return event;
    },
  });

  app.post('/events/acknowledge', {
    schema: {
      tags,
      summary: 'Acknowledge several ALERT events and their notifications at once (all or none)',
      body: AcknowledgeMany,
      response: { 200: Type.Array(Event) },
    },
    handler: async (req) => db.tx((q) => acknowledge(q, req.tenancy, req.body.ids, (n) => `/ids/${n}`)),
  });

  app.post('/notifications/:id/acknowledge', {
    schema: {
      tags: ['notifications'],
      summary: 'Acknowledge a notification and the ALERT event it came with (the first acknowledgement stands)',
      params: IdParam,
      response: { 200: Notification },
    },
    handler: async (req) => {
      const id = req.params.id;
      if (!isInt8Id(id)) throw notFound('notification');
      return db.tx(async (q) => {
        const params: unknown[] = [id];
        const cond = await req.tenancy.where('owner_id', params, q);
        const { rows } = await q.query<{ event_id: string | null }>(
          `SELECT event_id::text FROM notifications WHERE id = $1::int8 AND ${cond}`,
          params,
        );
        if (!rows[0]) throw notFound('notification');
        // Every notification is raised with its ALERT event (raise.ts): acknowledging it is acknowledging that.
        await acknowledge(q, req.tenancy, [rows[0].event_id!], () => undefined);
        const { rows: after } = await q.query('SELECT * FROM notifications WHERE id = $1::int8', [id]);
        return toNotificationApi(after[0] as Parameters<typeof toNotificationApi>[0]);
      });
    },
  });
};
