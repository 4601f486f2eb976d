// Push integrations over REST (API guide 4 and 9): which owners' records (descendants included)
// of which object types go where, and how. Operators manage all; customers see and manage theirs
// (access.ts). Credentials are write-only:
// stored encrypted with SECRETS_KEY, never returned; a PUT or PATCH that leaves them out keeps them.
// The routes only tie the pieces together: schemas.ts (bodies and answers), compose.ts (a save's
// settings), store.ts (the table), view.ts (what an answer shows), the queue (start, stats, cancel).
import crypto from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { Config } from '../../config.js';
import type { Db, Queryable } from '../../db/db.js';
import { recipientsOf, syncRecipients } from '../../email/recipients.js';
import { listPage } from '../../http/paging.js';
import { IdParam, iso } from '../../http/schemas.js';
import type { AddressPolicy } from '../address.js';
import { cancelIntegration, startIntegration } from '../../eventlog/log.js';
import { enabledAgain, healthLog, stats } from '../queue/index.js';
import { compose } from './compose.js';
import { newSigningSecret, type Row } from './model.js';
import { Integration, IntegrationIn, IntegrationList, IntegrationPatch, RotateBody } from './schemas.js';
import { getRow, markDeleted, retryDeadlock, SELECT, saveRow, signUnsignedIntegrations } from './store.js';
import { auditOwner, manageableRow, visibleRow, withinCustomerLimits } from './access.js';
import { audit } from '../../audit/audit.js';
import { statsApi, toApi, withShownSecret } from './view.js';

export const integrationRoutes: FastifyPluginAsyncTypebox<{ db: Db; secretsKey: Buffer; policy: AddressPolicy; limits: Config }> = async (
  app,
  opts,
) => {
  const { db, secretsKey, policy, limits } = opts;
  const deps = {
    secretsKey,
    policy,
    email: {
      smtpConfigured: limits.SMTP_URL !== undefined,
      allowedDomains: limits.EMAIL_ALLOWED_DOMAINS,
      maxRecipients: limits.EMAIL_MAX_RECIPIENTS,
      defaultMessagesPerHour: limits.EMAIL_MAX_MESSAGES_PER_HOUR,
    },
  };
  /** An e-mail integration's recipients follow its settings (trusted when the operator made it). */
  const syncEmail = async (q: Queryable, row: Row) => {
    if (row.channel !== 'email') return;
    const st = row.settings as { to: string[]; cc: string[]; escalateTo: string[] };
    await syncRecipients(q, row.id, [...new Set([...st.to, ...st.cc, ...st.escalateTo])], row.managed_by === 'operator');
  };
  await signUnsignedIntegrations(db, secretsKey);
  const tags = ['integrations'];
  const withStats = async (row: Row) => ({ ...toApi(row), stats: statsApi(await stats(db, row.id)) });
  const healthApi = async (id: string) => (await healthLog(db, id)).map((h) => ({ at: iso(h.at)!, status: h.status, detail: h.detail }));

  app.get('/integrations', {
    schema: {
      tags,
      summary: "List push integrations (a customer: those whose owners it all sees, the operator's included)",
      querystring: IntegrationList,
      response: { 200: Type.Array(Integration) },
    },
    handler: async (req, reply) => {
      const query = req.query;
      const visible = await req.tenancy.visibleOwners(db);
      const rows = await listPage<Row>(db, req, reply, {
        select: SELECT,
        from: 'integrations',
        owners: null, // an integration has several owners: all must be visible
        defaultOrder: 'asc',
        idType: 'uuid',
        filters: (ps, where) => {
          where.push('deleted_at IS NULL');
          if (visible !== 'all') where.push(`owner_ids <@ $${ps.push(visible)}::uuid[]`);
          if (query.name !== undefined) where.push(`name = $${ps.push(query.name)}`);
        },
      });
      if (!query.stats) return rows.map(toApi);
      const out = [];
      for (const row of rows) out.push(await withStats(row)); // one at a time: a page may hold 1000
      return out;
    },
  });

  app.post('/integrations', {
    schema: {
      tags,
      summary: "Create a push integration for owners the caller sees (a customer's is managedBy customer); credentials are write-only",
      body: IntegrationIn,
      response: { 201: Integration },
    },
    handler: async (req, reply) => {
      const id = crypto.randomUUID();
      const out = await db.tx(async (q) => {
        const v = await compose(deps, req.tenancy, q, req.body, null, 'create');
        await withinCustomerLimits(q, req.tenancy, limits, v, true);
        const t = req.tenancy;
        const maker = {
          managedBy: t.isAdmin ? ('operator' as const) : ('customer' as const),
          actor: t.principal.actor,
          ownerId: t.principal.ownerId,
        };
        const row = await saveRow(q, id, v, maker);
        await syncEmail(q, row);
        await startIntegration(q, id);
        await audit(q, t, {
          action: 'create',
          type: 'integration',
          id,
          ownerId: auditOwner(row),
          before: null,
          after: toApi(row),
          body: req.body,
        });
        return withShownSecret(row, v.shownSecret);
      });
      reply.code(201).header('Location', `${req.server.publicUrl}/api/v1/integrations/${id}`);
      return out;
    },
  });

  app.get('/integrations/:id', {
    schema: { tags, summary: 'Get a push integration, with its delivery stats', params: IdParam, response: { 200: Integration } },
    handler: async (req) => {
      const row = await visibleRow(db, req.tenancy, req.params.id);
      const out = { ...(await withStats(row)), healthLog: await healthApi(row.id) };
      if (!out.email) return out;
      const recipients = (await recipientsOf(db, [row.id])).get(row.id) ?? [];
      return {
        ...out,
        email: { ...out.email, recipients: recipients.map((r) => ({ address: r.address, confirmedAt: iso(r.confirmedAt) })) },
      };
    },
  });

  /** A PUT, PATCH or rotation: the stored row locked, the settings composed over it, saved. */
  const update = (
    req: { tenancy: import('../../tenancy/tenancy.js').Tenancy },
    id: string,
    body: Parameters<typeof compose>[3],
    mode: 'put' | 'patch',
    rotation = false,
  ) =>
    db.tx(async (q) => {
      const cur = await manageableRow(q, req.tenancy, id);
      const v = await compose(deps, req.tenancy, q, body, cur, mode);
      await withinCustomerLimits(q, req.tenancy, limits, v, false);
      let row = await saveRow(q, id, v, null);
      await syncEmail(q, row);
      if (!cur.enabled && row.enabled) {
        // Enabled again: healthy until proven otherwise; what is within maxBacklogHours goes out.
        await enabledAgain(q, id, req.tenancy.principal.actor);
        row = await getRow(q, id);
      }
      // Turning it on or off is what an operator looks for: it names the entry, other changes ride along.
      const action = rotation ? 'rotate' : cur.enabled !== row.enabled ? (row.enabled ? 'enable' : 'disable') : 'update';
      await audit(q, req.tenancy, {
        action,
        type: 'integration',
        id,
        ownerId: auditOwner(row),
        before: toApi(cur),
        after: toApi(row),
        body,
      });
      return withShownSecret(row, v.shownSecret);
    });
  app.put('/integrations/:id', {
    schema: {
      tags,
      summary: 'Replace a push integration; secrets left out are kept while they would go to the same place',
      params: IdParam,
      body: IntegrationIn,
      response: { 200: Integration },
    },
    handler: (req) => update(req, req.params.id, req.body, 'put'),
  });
  app.patch('/integrations/:id', {
    schema: {
      tags,
      summary: 'Update a push integration (JSON merge patch)',
      params: IdParam,
      body: IntegrationPatch,
      response: { 200: Integration },
    },
    handler: (req) => update(req, req.params.id, req.body, 'patch'),
  });
  app.post('/integrations/:id/rotate-signing-secret', {
    schema: {
      tags,
      summary: 'Rotate the signing secret: the new one is shown once; the previous one keeps signing for 24 h',
      params: IdParam,
      body: RotateBody,
      response: { 200: Integration },
    },
    // A rotation usually has no body at all: treat that as {}.
    preValidation: async (req) => {
      req.body ??= {};
    },
    handler: (req) =>
      update(req, req.params.id, { webhook: { signingSecret: req.body?.signingSecret ?? newSigningSecret() } }, 'patch', true),
  });

  app.delete('/integrations/:id', {
    schema: { tags, summary: 'Delete a push integration; its pending deliveries are cancelled', params: IdParam },
    handler: async (req, reply) => {
      const id = req.params.id;
      // Results being written by the engine meanwhile can deadlock with the cancel (PostgreSQL
      // then aborts one side): the cancel is simply tried again.
      await retryDeadlock(() =>
        db.tx(async (q) => {
          const cur = await manageableRow(q, req.tenancy, id);
          // Pending deliveries become CANCELLED; the history stays.
          await markDeleted(q, id);
          await cancelIntegration(q, id);
          await audit(q, req.tenancy, {
            action: 'delete',
            type: 'integration',
            id,
            ownerId: auditOwner(cur),
            before: toApi(cur),
            after: null,
          });
        }),
      );
      return reply.code(204).send();
    },
  });
};
