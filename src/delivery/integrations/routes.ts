// Push integrations over REST (API guide 4 and 9), operator only: which owners' records
// (descendants included) of which object types go where, and how. Credentials are write-only:
// stored encrypted with SECRETS_KEY, never returned; a PUT or PATCH that leaves them out keeps them.
// The routes only tie the pieces together: schemas.ts (bodies and answers), compose.ts (a save's
// settings), store.ts (the table), view.ts (what an answer shows), the queue (start, stats, cancel).
import crypto from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { Db } from '../../db/db.js';
import { listPage } from '../../http/paging.js';
import { IdParam } from '../../http/schemas.js';
import type { AddressPolicy } from '../address.js';
import { cancelIntegration, startIntegration, stats } from '../queue/index.js';
import { compose } from './compose.js';
import { newSigningSecret, type Row } from './model.js';
import { Integration, IntegrationIn, IntegrationList, IntegrationPatch, RotateBody } from './schemas.js';
import { getRow, markDeleted, retryDeadlock, SELECT, saveRow, signUnsignedIntegrations } from './store.js';
import { statsApi, toApi, withShownSecret } from './view.js';

export const integrationRoutes: FastifyPluginAsyncTypebox<{ db: Db; secretsKey: Buffer; policy: AddressPolicy }> = async (app, opts) => {
  const { db, secretsKey, policy } = opts;
  const deps = { secretsKey, policy };
  await signUnsignedIntegrations(db, secretsKey);
  const tags = ['integrations'];
  const admin = { scope: 'admin' as const };
  const withStats = async (row: Row) => ({ ...toApi(row), stats: statsApi(await stats(db, row.id)) });

  app.get('/integrations', {
    config: admin,
    schema: { tags, summary: 'List push integrations (admin)', querystring: IntegrationList, response: { 200: Type.Array(Integration) } },
    handler: async (req, reply) => {
      const query = req.query;
      const rows = await listPage<Row>(db, req, reply, {
        select: SELECT,
        from: 'integrations',
        owners: null, // operator only
        defaultOrder: 'asc',
        idType: 'uuid',
        filters: (params, where) => {
          where.push('deleted_at IS NULL');
          if (query.name !== undefined) where.push(`name = $${params.push(query.name)}`);
        },
      });
      if (!query.stats) return rows.map(toApi);
      const out = [];
      for (const row of rows) out.push(await withStats(row)); // one at a time: a page may hold 1000
      return out;
    },
  });

  app.post('/integrations', {
    config: admin,
    schema: {
      tags,
      summary: 'Create a push integration (admin); credentials are write-only',
      body: IntegrationIn,
      response: { 201: Integration },
    },
    handler: async (req, reply) => {
      const id = crypto.randomUUID();
      const out = await db.tx(async (q) => {
        const v = await compose(deps, req.tenancy, q, req.body, null, 'create');
        const row = await saveRow(q, id, v, true);
        await startIntegration(q, id);
        return withShownSecret(row, v.shownSecret);
      });
      reply.code(201).header('Location', `${req.server.publicUrl}/api/v1/integrations/${id}`);
      return out;
    },
  });

  app.get('/integrations/:id', {
    config: admin,
    schema: { tags, summary: 'Get a push integration (admin), with its delivery stats', params: IdParam, response: { 200: Integration } },
    handler: async (req) => withStats(await getRow(db, req.params.id)),
  });

  /** A PUT, PATCH or rotation: the stored row locked, the settings composed over it, saved. */
  const update = (
    req: { tenancy: import('../../tenancy/tenancy.js').Tenancy },
    id: string,
    body: Parameters<typeof compose>[3],
    mode: 'put' | 'patch',
  ) =>
    db.tx(async (q) => {
      const cur = await getRow(q, id, true);
      const v = await compose(deps, req.tenancy, q, body, cur, mode);
      return withShownSecret(await saveRow(q, id, v, false), v.shownSecret);
    });
  app.put('/integrations/:id', {
    config: admin,
    schema: {
      tags,
      summary: 'Replace a push integration (admin); secrets left out are kept',
      params: IdParam,
      body: IntegrationIn,
      response: { 200: Integration },
    },
    handler: (req) => update(req, req.params.id, req.body, 'put'),
  });
  app.patch('/integrations/:id', {
    config: admin,
    schema: {
      tags,
      summary: 'Update a push integration (admin, JSON merge patch)',
      params: IdParam,
      body: IntegrationPatch,
      response: { 200: Integration },
    },
    handler: (req) => update(req, req.params.id, req.body, 'patch'),
  });
  app.post('/integrations/:id/rotate-signing-secret', {
    config: admin,
    schema: {
      tags,
      summary: 'Rotate the signing secret (admin): the new one is shown once; the previous one keeps signing for 24 h',
      params: IdParam,
      body: RotateBody,
      response: { 200: Integration },
    },
    // A rotation usually has no body at all: treat that as {}.
    preValidation: async (req) => {
      req.body ??= {};
    },
    handler: (req) => update(req, req.params.id, { webhook: { signingSecret: req.body?.signingSecret ?? newSigningSecret() } }, 'patch'),
  });

  app.delete('/integrations/:id', {
    config: admin,
    schema: { tags, summary: 'Delete a push integration (admin); its pending deliveries are cancelled', params: IdParam },
    handler: async (req, reply) => {
      const id = req.params.id;
      // Results being written by the engine meanwhile can deadlock with the cancel (PostgreSQL
      // then aborts one side): the cancel is simply tried again.
      await retryDeadlock(() =>
        db.tx(async (q) => {
          await getRow(q, id, true);
          // Pending deliveries become CANCELLED; the history stays.
          await markDeleted(q, id);
          await cancelIntegration(q, id);
        }),
      );
      return reply.code(204).send();
    },
  });
};
