// Delivery history (API guide 4 and 9): deliveries of an integration with their attempt log,
// redelivery of one or of all in a time range, and the webhook test endpoint. (The result stream
// is stream.ts.)
import crypto from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { type Db, oneSnapshot } from '../db/db.js';
import { readDb } from '../db/reads.js';
import { ApiError, badRequest, notFound } from '../http/errors.js';
import { page, PageQuery, pageRows } from '../http/paging.js';
import { DateTime, iso, isInt8Id, Literals, Nullable, Uuid } from '../http/schemas.js';
import { wakeReaders } from '../eventlog/log.js';
import * as queue from './queue/index.js';
import { checkUrlShape, refusedAs400, type AddressPolicy } from './address.js';
import type { WebhookIntegration } from './integrations/model.js';
import { auditOwner, manageableRow, visibleRow } from './integrations/access.js';
import { audit } from '../audit/audit.js';
import { loadIntegration } from './integrations/store.js';
import { chatBody } from './channels/webhook/chat.js';
import { API_VERSION as DCSA_API_VERSION, sampleEventsBody } from '../dcsa/events.js';
import { sendWebhook, USER_AGENT } from './channels/webhook/webhook.js';

const Status = Literals(['PENDING', 'SUCCEEDED', 'FAILED', 'CANCELLED']);
const Attempt = Type.Object({
  deliveryId: Type.String(),
  requestId: Type.String({ description: 'The request: shared by every event of a batch' }),
  attempt: Type.Integer(),
  whenAttempted: DateTime,
  success: Type.Boolean(),
  httpStatus: Nullable(Type.Integer()),
  responseTimeMs: Nullable(Type.Integer()),
  receiptId: Nullable(Type.String()),
  topic: Nullable(Type.String()),
  partition: Nullable(Type.Integer()),
  qos: Nullable(Type.Integer()),
  error: Nullable(Type.String()),
  responseHeaders: Nullable(Type.Record(Type.String(), Type.String())),
  responseBody: Nullable(Type.String()),
  responseBodyBytes: Nullable(Type.Integer()),
  truncated: Type.Boolean(),
});
const Delivery = Type.Object(
  {
    id: Type.String(),
    integrationId: Uuid,
    eventId: Uuid,
    objectType: Type.String(),
    objectId: Type.String(),
    status: Status,
    attempts: Type.Integer(),
    lastAttemptAt: Nullable(DateTime),
    nextAttemptAt: Nullable(DateTime),
    receiptId: Nullable(Type.String()),
    batchId: Nullable(Uuid),
    lastError: Nullable(Type.String()),
    whenCreated: DateTime,
    attemptsLog: Type.Array(Attempt),
  },
  { title: 'Delivery' },
);

type AttemptRow = queue.AttemptRow;
export const attemptApi = (a: AttemptRow) => ({
  deliveryId: a.delivery_id,
  requestId: a.request_id,
  attempt: a.attempt,
  whenAttempted: iso(a.when_attempted)!,
  success: a.success,
  httpStatus: a.http_status,
  responseTimeMs: a.response_time_ms,
  receiptId: a.receipt_id,
  topic: a.topic,
  partition: a.partition,
  qos: a.qos,
  error: a.error,
  responseHeaders: a.response_headers,
  // Stored as bytes; shown as UTF-8 text (bytes that are not UTF-8 read as U+FFFD; JSON carries a NUL as \u0000).
  responseBody: a.response_body === null ? null : Buffer.from(a.response_body).toString('utf8'),
  responseBodyBytes: a.response_body_bytes,
  truncated: a.truncated,
});

export const historyRoutes: FastifyPluginAsyncTypebox<{ db: Db; secretsKey: Buffer; policy: AddressPolicy }> = async (app, opts) => {
  const { db, secretsKey, policy } = opts;
  const tags = ['deliveries'];
  const IntegrationParam = Type.Object({ id: Type.String({ maxLength: 64 }) });

  const List = Type.Intersect([PageQuery, Type.Object({ status: Type.Optional(Status), eventId: Type.Optional(Uuid) })]);
  app.get('/integrations/:id/deliveries', {
    schema: {
      tags,
      summary: 'Deliveries of an integration, newest first, each with its attempt log',
      params: IntegrationParam,
      querystring: List,
      response: { 200: Type.Array(Delivery) },
    },
    handler: async (req, reply) => {
      const id = req.params.id;
      await visibleRow(db, req.tenancy, id);
      const query = req.query;
      // The page and its attempts in one snapshot: an attempt written between two reads would show
      // beside the PENDING status from before it.
      const { rows, attempts } = await oneSnapshot(readDb(req, db), async (q) => {
        const got = await pageRows<any>(q, req.query, {
          select: 'd.*',
          from: queue.DELIVERIES_OF_INTEGRATION, // names the integration as $1
          owners: null, // the integration's: checked above
          defaultOrder: 'desc',
          idType: 'int8',
          timeColumn: 'd.when_created',
          idColumn: 'd.id',
          filters: (params, where) => {
            params.push(id);
            if (query.status) where.push(`d.status = $${params.push(query.status)}`);
            if (query.eventId) where.push(`d.event_id = $${params.push(query.eventId)}::uuid`);
          },
        });
        const rows = page(req, reply, got.ks, got.rows, req.server.publicUrl, got.more);
        const ids = rows.map((r) => r.id);
        return { rows, attempts: await queue.attemptsOf(q, id, ids) };
      });
      const byDelivery = new Map<string, ReturnType<typeof attemptApi>[]>();
      for (const a of attempts) byDelivery.set(a.delivery_id, [...(byDelivery.get(a.delivery_id) ?? []), attemptApi(a)]);
      return rows.map((d) => ({
        id: d.id,
        integrationId: d.integration_id,
        eventId: d.event_id,
        objectType: d.object_type,
        objectId: d.object_id,
        status: d.status,
        attempts: d.attempts,
        lastAttemptAt: iso(d.last_attempt_at),
        nextAttemptAt: d.status === 'PENDING' ? iso(d.next_attempt_at) : null,
        receiptId: d.receipt_id,
        batchId: d.batch_id,
        lastError: d.last_error,
        whenCreated: iso(d.when_created)!,
        attemptsLog: byDelivery.get(d.id) ?? [],
      }));
    },
  });

  // Redelivery: back to PENDING, due now, a fresh attempt budget; a batch member leaves its batch.
  app.post('/integrations/:id/deliveries/:deliveryId/redeliver', {
    schema: {
      tags,
      summary: 'Send one delivery again (a pending one: now)',
      params: Type.Object({ id: Type.String({ maxLength: 64 }), deliveryId: Type.String({ maxLength: 32 }) }),
      response: { 202: Type.Object({ count: Type.Integer() }) },
    },
    handler: async (req, reply) => {
      const { id, deliveryId } = req.params;
      const found = await db.tx(async (q) => {
        const row = await manageableRow(q, req.tenancy, id);
        const done = isInt8Id(deliveryId) && (await queue.redeliverOne(q, id, deliveryId));
        if (done) {
          await audit(q, req.tenancy, {
            action: 'redeliver',
            type: 'delivery',
            id: deliveryId,
            ownerId: auditOwner(row),
            before: null,
            after: { integrationId: id, status: 'PENDING' },
          });
        }
        return done;
      });
      if (!found) throw notFound('delivery');
      wakeReaders(db);
      return reply.code(202).send({ count: 1 });
    },
  });

  const Range = Type.Object({
    status: Type.Optional(
      Type.Union([Type.Literal('FAILED'), Type.Literal('SUCCEEDED'), Type.Literal('CANCELLED')], { description: 'Default FAILED' }),
    ),
    from: DateTime,
    to: DateTime,
  });
  app.post('/integrations/:id/deliveries/redeliver', {
    schema: {
      tags,
      summary: 'Send again every delivery of a status (default FAILED) created in [from, to)',
      params: IntegrationParam,
      body: Range,
      response: { 202: Type.Object({ count: Type.Integer() }) },
    },
    handler: async (req, reply) => {
      const id = req.params.id;
      const b = req.body;
      const count = await db.tx(async (q) => {
        const row = await manageableRow(q, req.tenancy, id);
        if (Date.parse(b.from) >= Date.parse(b.to)) throw badRequest('from must be before to.', '/to');
        const n = await queue.redeliverRange(q, id, b.status ?? 'FAILED', b.from, b.to);
        const range = { status: b.status ?? 'FAILED', from: b.from, to: b.to, count: n };
        await audit(q, req.tenancy, {
          action: 'redeliver',
          type: 'integration',
          id,
          ownerId: auditOwner(row),
          before: {},
          after: { redelivered: range },
        });
        return n;
      });
      wakeReaders(db);
      return reply.code(202).send({ count });
    },
  });

  // API guide 9 ("Webhook test"): send one sample object now and answer the outcome.
  const TestBody = Type.Object({
    url: Type.String({ minLength: 1, maxLength: 2048 }),
    integrationId: Type.Optional(Type.String({ format: 'uuid' })),
  });
  app.post('/webhooks/test', {
    schema: {
      tags: ['webhooks'],
      summary:
        "Send one sample Asset (a sample alert for a chat format) to a URL now (API guide 9), with an integration's auth and signature when integrationId is given",
      body: TestBody,
      response: {
        200: Type.Object({
          success: Type.Boolean(),
          status: Nullable(Type.Integer()),
          responseTimeMs: Type.Integer(),
          receiptId: Nullable(Type.String()),
          error: Nullable(Type.String()),
        }),
      },
    },
    handler: async (req) => {
      const b = req.body;
      // The URL's shape (scheme, no user info) is judged as when an integration is saved; the
      // address it resolves to is judged when it is dialled, and reported in the answer.
      const url = await refusedAs400('/url', () => checkUrlShape(b.url, policy));
      let cfg: WebhookIntegration | null = null;
      let ownerId = req.tenancy.principal.ownerId;
      if (b.integrationId) {
        // Any integration the caller sees (access.ts): a test changes nothing, and its auth and
        // signature go only to the integration's own destinations (below).
        const seen = await visibleRow(db, req.tenancy, b.integrationId).catch((e) => {
          if (e instanceof ApiError && e.code === 'NOT_FOUND')
            throw new ApiError('NOT_FOUND', 'integration not found', { field: '/integrationId' });
          throw e;
        });
        ownerId = auditOwner(seen) ?? ownerId;
        const found = await loadIntegration(db, b.integrationId, secretsKey);
        if (!found) throw new ApiError('NOT_FOUND', 'integration not found', { field: '/integrationId' });
        if (found.channel !== 'webhook')
          throw badRequest(`integrationId: a ${found.channel} integration has no webhook to test`, '/integrationId');
        cfg = found;
        // API guide 9: stored credentials and the signing secret never go to a URL the caller just
        // named, only to one of the integration's own destinations.
        const own = [cfg.destination, ...Object.values(cfg.destinations)].map(normalUrl);
        if (!own.includes(url.href))
          throw badRequest(
            "url: with integrationId, url must be one of that integration's destinations (its auth and signature go nowhere else)",
            '/url',
          );
      }
      const base: WebhookIntegration = cfg ?? {
        id: 'test',
        name: 'test',
        channel: 'webhook',
        maxBacklogHours: 72,
        ownerIds: [],
        enabled: true,
        destination: b.url,
        destinations: {},
        retry: { scheduleSeconds: [1], maxAttempts: 1, deadlineHours: 1 },
        webhook: {
          format: 'standard',
          mode: 'single',
          batchSize: 1,
          maxItemsPerMinute: null,
          maxConcurrentRequests: 1,
          timeoutMs: 10_000,
          injectEventId: false,
          injectEventIdPath: null,
          auth: null,
          signingSecret: null,
          previousSigningSecret: null,
        },
      };
      const now = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
      const sample = {
        id: crypto.randomUUID(),
        name: 'TEST0000001',
        ownerId: req.tenancy.principal.ownerId,
        whenCreated: now,
        whenUpdated: now,
        boxId: null,
        disabled: false,
        note: `Sample object sent by ${USER_AGENT}; not stored`,
        tags: ['test'],
      };
      // A chat format's test is a sample alert as its chat shows one (an asset means nothing there).
      const format = base.webhook.format;
      const chat =
        format === 'standard' || format === 'dcsa-tnt-3'
          ? null
          : chatBody(
              format,
              'notification',
              {
                assetId: sample.id,
                assetName: sample.name,
                type: 'ALERT',
                subject: `Test message from ${USER_AGENT}: alerts of this integration look like this`,
                whenCreated: now,
                specificationName: 'Sample specification',
              },
              app.publicUrl,
            );
      // dcsa-tnt-3's test is a sample DCSA event (a location update of DCSA's own example container).
      const dcsa = format === 'dcsa-tnt-3' ? sampleEventsBody(new Date(now)) : null;
      const r = await sendWebhook(
        base,
        chat
          ? { url: url.href, id: `test_${crypto.randomUUID()}`, objectType: 'notification', body: chat }
          : dcsa
            ? {
                url: url.href,
                id: `test_${crypto.randomUUID()}`,
                objectType: 'location',
                body: dcsa,
                headers: { 'api-version': DCSA_API_VERSION },
              }
            : { url: url.href, id: `test_${crypto.randomUUID()}`, objectType: 'asset', body: JSON.stringify(sample) },
        policy,
      );
      // Changes nothing, but who sent what where is worth knowing (an entry per test, secrets never).
      await audit(db, req.tenancy, {
        action: 'test',
        type: 'integration',
        id: b.integrationId ?? null,
        ownerId,
        before: null,
        after: { url: url.href, success: r.outcome === 'success', status: r.httpStatus },
      });
      return {
        success: r.outcome === 'success',
        status: r.httpStatus,
        responseTimeMs: r.responseTimeMs,
        receiptId: r.receiptId,
        error: r.outcome === 'success' ? null : r.error,
      };
    },
  });
};

/** A URL in the form destinations are compared in (WHATWG serialisation), or the raw text. */
function normalUrl(raw: string): string {
  try {
    return new URL(raw).href;
  } catch {
    return raw;
  }
}
