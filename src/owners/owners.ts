// Owners (API guide 3 and 4): a hierarchy where a parent sees its descendants.
// `childIds` is derived; only an operator (admin) creates or deletes owners or moves one under
// another parent; a move that would make a cycle is a 400.
import { audit } from '../audit/audit.js';
import crypto from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type, type Static } from '@sinclair/typebox';
import type { Db, Queryable } from '../db/db.js';
import { badRequest, conflict, forbidden, notFound } from '../http/errors.js';
import { applyFilters, filters, listQuery } from '../http/filters.js';
import { listPage } from '../http/paging.js';
import { DateTime, IdParam, isUuid, iso, Nullable, Str, Uuid } from '../http/schemas.js';
import type { Tenancy } from '../tenancy/tenancy.js';

export const Owner = Type.Object(
  {
    id: Uuid,
    name: Str(255),
    note: Nullable(Str(255)),
    disabled: Type.Boolean(),
    ownerId: Nullable(Uuid),
    childIds: Type.Array(Uuid),
    retentionDays: Nullable(Type.Integer({ description: 'Days its data is kept; null: as its parent (RETENTION_DAYS at the top)' })),
    effectiveRetentionDays: Nullable(
      Type.Integer({ description: 'Days its data is kept, inherited and capped by RETENTION_DAYS; null: forever' }),
    ),
    silentAlertMinutes: Nullable(
      Type.Integer({ description: 'Minutes without a record before its assets raise a SILENT alert; 0: off; null: as its parent' }),
    ),
    effectiveSilentAlertMinutes: Nullable(Type.Integer({ description: 'What applies to its assets without their own; null: off' })),
    whenCreated: DateTime,
    whenUpdated: DateTime,
  },
  { title: 'Owner' },
);

/** Minutes without any record before a SILENT alert (API guide 8); 0 turns the rule off. */
export const SilentMinutes = Type.Integer({
  minimum: 0,
  maximum: 525_600,
  description: 'Minutes without a record of any type before a SILENT alert; 0 turns it off; null inherits',
});

const OwnerWrite = Type.Object({
  name: Str(255, { minLength: 1 }),
  note: Type.Optional(Nullable(Str(255))),
  disabled: Type.Optional(Type.Boolean()),
  ownerId: Type.Optional(Nullable(Type.String({ format: 'uuid', description: 'Parent owner (admin only)' }))),
  retentionDays: Type.Optional(
    Nullable(
      Type.Integer({
        minimum: 1,
        maximum: 36500,
        description: 'Days its data is kept (admin only; at most RETENTION_DAYS when set); null inherits the parent',
      }),
    ),
  ),
  silentAlertMinutes: Type.Optional(Nullable(SilentMinutes)),
});
const OwnerPatch = Type.Partial(OwnerWrite);
type OwnerWrite = Static<typeof OwnerWrite>;

const OWNER_FILTERS = { name: filters.equals('o.name', Str(255)), ownerId: filters.uuid('o.parent_id') };
const OwnerList = listQuery(OWNER_FILTERS);

interface Row {
  id: string;
  name: string;
  note: string | null;
  disabled: boolean;
  parent_id: string | null;
  child_ids: string[];
  retention_days: number | null;
  /** The nearest own setting up the tree (this owner's, else its parent's, ...). */
  inherited_days: number | null;
  silent_alert_minutes: number | null;
  inherited_silent: number | null;
  when_created: Date;
  when_updated: Date;
  _cursor_ts?: string;
}

/** The silence rule's minutes in force for an owner (aliased `o`): its own, else the nearest up the tree. */
export const inheritedSilent = (o: string) => `(WITH RECURSIVE up(parent_id, m, depth) AS (
     SELECT ${o}.parent_id, ${o}.silent_alert_minutes, 0
     UNION ALL
     SELECT p.parent_id, p.silent_alert_minutes, up.depth + 1 FROM up JOIN owners p ON p.id = up.parent_id
      WHERE up.m IS NULL AND up.depth < 100
   ) SELECT m FROM up WHERE m IS NOT NULL LIMIT 1)`;

const SELECT = `o.id, o.name, o.note, o.disabled, o.parent_id, o.when_created, o.when_updated, o.retention_days,
  ARRAY(SELECT c.id FROM owners c WHERE c.parent_id = o.id ORDER BY c.when_created, c.id)::text[] AS child_ids,
  (WITH RECURSIVE up(parent_id, days, depth) AS (
     SELECT o.parent_id, o.retention_days, 0
     UNION ALL
     SELECT p.parent_id, p.retention_days, up.depth + 1 FROM up JOIN owners p ON p.id = up.parent_id
      WHERE up.days IS NULL AND up.depth < 100
   ) SELECT days FROM up WHERE days IS NOT NULL LIMIT 1) AS inherited_days,
  o.silent_alert_minutes, ${inheritedSilent('o')} AS inherited_silent`;

/**
 * What applies to an owner whose nearest own setting up the tree is `inherited`: RETENTION_DAYS
 * (`systemDays`, null: forever) is the default at the top of the tree and the cap everywhere.
 */
const effectiveDays = (inherited: number | null, systemDays: number | null) =>
  inherited === null ? systemDays : systemDays === null ? inherited : Math.min(inherited, systemDays);

const toApi = (r: Row, systemDays: number | null) => ({
  id: r.id,
  name: r.name,
  note: r.note,
  disabled: r.disabled,
  ownerId: r.parent_id,
  childIds: r.child_ids,
  retentionDays: r.retention_days,
  effectiveRetentionDays: effectiveDays(r.inherited_days, systemDays),
  silentAlertMinutes: r.silent_alert_minutes,
  effectiveSilentAlertMinutes: r.inherited_silent || null,
  whenCreated: iso(r.when_created)!,
  whenUpdated: iso(r.when_updated)!,
});

async function getOwner(q: Queryable, t: Tenancy, id: string, forUpdate = false): Promise<Row> {
  if (!isUuid(id)) throw notFound('owner');
  return t.one<Row>(q, { select: SELECT, from: 'owners o', ownerColumn: 'o.id', idColumn: 'o.id' }, id, 'owner', forUpdate);
}

/** Refuses a parent that is the owner itself or one of its descendants. */
async function assertNoCycle(q: Queryable, ownerId: string, newParent: string): Promise<void> {
  const { rows } = await q.query(
    `WITH RECURSIVE up(id) AS (
       SELECT $2::uuid UNION SELECT o.parent_id FROM owners o JOIN up ON o.id = up.id WHERE o.parent_id IS NOT NULL
     ) SELECT 1 FROM up WHERE id = $1::uuid`,
    [ownerId, newParent],
  );
  if (rows.length) throw badRequest('An owner cannot be placed under itself or one of its descendants.', '/ownerId');
}

async function checkParent(q: Queryable, t: Tenancy, parent: string | null | undefined, current: string | null, self?: string) {
  if ((parent ?? null) === current) return;
  if (!t.isAdmin) throw forbidden("Only an operator (admin scope) may change an owner's parent.");
  if (parent) {
    await t.assertOwner(parent, '/ownerId', q);
    if (self) await assertNoCycle(q, self, parent);
  }
}

/** Only an operator sets a retention, never longer than RETENTION_DAYS. */
function checkRetention(t: Tenancy, days: number | null | undefined, current: number | null, systemDays: number | null) {
  if ((days ?? null) === current) return;
  if (!t.isAdmin) throw forbidden("Only an operator (admin scope) may change an owner's retentionDays.");
  if (days != null && systemDays !== null && days > systemDays) {
    throw badRequest(`retentionDays must be at most RETENTION_DAYS (${systemDays}).`, '/retentionDays');
  }
}

export async function createOwner(
  q: Queryable,
  input: {
    name: string;
    note?: string | null;
    disabled?: boolean;
    parentId?: string | null;
    retentionDays?: number | null;
    silentAlertMinutes?: number | null;
  },
) {
  const id = crypto.randomUUID();
  await q.query(
    'INSERT INTO owners (id, name, note, disabled, parent_id, retention_days, silent_alert_minutes) VALUES ($1, $2, $3, $4, $5, $6, $7)',
    [
      id,
      input.name,
      input.note ?? null,
      input.disabled ?? false,
      input.parentId ?? null,
      input.retentionDays ?? null,
      input.silentAlertMinutes ?? null,
    ],
  );
  return id;
}

export const ownerRoutes: FastifyPluginAsyncTypebox<{ db: Db; retentionDays: number | null; graceSeconds: number }> = async (
  app,
  { db, retentionDays, graceSeconds },
) => {
  const tags = ['owners'];
  const show = (r: Row) => toApi(r, retentionDays);

  app.get('/owners', {
    schema: { tags, summary: 'List visible owners', querystring: OwnerList, response: { 200: Type.Array(Owner) } },
    handler: async (req, reply) => {
      const rows = await listPage<Row>(db, req, reply, {
        select: SELECT,
        from: 'owners o',
        owners: { column: 'o.id', scope: req.tenancy },
        defaultOrder: 'asc',
        idType: 'uuid',
        timeColumn: 'o.when_created',
        idColumn: 'o.id',
        filters: (params, where) => applyFilters(OWNER_FILTERS, req.query, params, where),
      });
      return rows.map(show);
    },
  });

  app.post('/owners', {
    config: { scope: 'admin' },
    schema: { tags, summary: 'Create an owner (admin)', body: OwnerWrite, response: { 201: Owner } },
    handler: async (req, reply) => {
      const body = req.body;
      const row = await db.tx(async (q) => {
        if (body.ownerId) await req.tenancy.assertOwner(body.ownerId, '/ownerId', q);
        checkRetention(req.tenancy, body.retentionDays, null, retentionDays);
        const id = await createOwner(q, {
          name: body.name,
          note: body.note ?? null,
          disabled: body.disabled ?? false,
          parentId: body.ownerId ?? null,
          retentionDays: body.retentionDays ?? null,
          silentAlertMinutes: body.silentAlertMinutes ?? null,
        });
        const created = await getOwner(q, req.tenancy, id);
        await audit(q, req.tenancy, { action: 'create', type: 'owner', id, ownerId: id, before: null, after: show(created) });
        return created;
      });
      reply.code(201).header('Location', `${req.server.publicUrl}/api/v1/owners/${row.id}`);
      return show(row);
    },
  });

  app.get('/owners/:id', {
    schema: { tags, summary: 'Get an owner', params: IdParam, response: { 200: Owner } },
    handler: async (req) => show(await getOwner(db, req.tenancy, req.params.id)),
  });

  /** A PUT replaces every writable field (absent optional ones cleared); a PATCH changes those given. */
  const update = (t: Tenancy, id: string, body: Partial<OwnerWrite>, mode: 'put' | 'patch') =>
    db.tx(async (q) => {
      const cur = await getOwner(q, t, id, true);
      const next = {
        name: body.name ?? cur.name,
        note: mode === 'put' ? (body.note ?? null) : body.note !== undefined ? body.note : cur.note,
        disabled: mode === 'put' ? (body.disabled ?? false) : (body.disabled ?? cur.disabled),
        parent: mode === 'put' ? (body.ownerId ?? null) : body.ownerId !== undefined ? body.ownerId : cur.parent_id,
        retention:
          mode === 'put' ? (body.retentionDays ?? null) : body.retentionDays !== undefined ? body.retentionDays : cur.retention_days,
        silent:
          mode === 'put'
            ? (body.silentAlertMinutes ?? null)
            : body.silentAlertMinutes !== undefined
              ? body.silentAlertMinutes
              : cur.silent_alert_minutes,
      };
      await checkParent(q, t, next.parent, cur.parent_id, id);
      checkRetention(t, next.retention, cur.retention_days, retentionDays);
      if (next.retention !== cur.retention_days || next.parent !== cur.parent_id) {
        // Its data (and its inheriting descendants') may now expire sooner: what was in force
        // protects it for the grace period (storage/retention.ts).
        await q.query('INSERT INTO retention_holds (owner_id, days, until) VALUES ($1, $2, now() + make_interval(secs => $3))', [
          id,
          next.parent !== cur.parent_id ? effectiveDays(cur.inherited_days, retentionDays) : cur.retention_days,
          graceSeconds,
        ]);
      }
      await q.query(
        `UPDATE owners SET name = $2, note = $3, disabled = $4, parent_id = $5, retention_days = $6, silent_alert_minutes = $7,
                when_updated = now() WHERE id = $1`,
        [id, next.name, next.note, next.disabled, next.parent, next.retention, next.silent],
      );
      const after = show(await getOwner(q, t, id));
      await audit(q, t, { action: 'update', type: 'owner', id, ownerId: id, before: show(cur), after });
      return after;
    });

  app.put('/owners/:id', {
    schema: { tags, summary: 'Replace an owner', params: IdParam, body: OwnerWrite, response: { 200: Owner } },
    handler: (req) => update(req.tenancy, req.params.id, req.body, 'put'),
  });
  app.patch('/owners/:id', {
    schema: { tags, summary: 'Update an owner (JSON merge patch)', params: IdParam, body: OwnerPatch, response: { 200: Owner } },
    handler: (req) => update(req.tenancy, req.params.id, req.body, 'patch'),
  });

  app.delete('/owners/:id', {
    config: { scope: 'admin' },
    schema: { tags, summary: 'Delete an owner (admin); 409 while it has assets or child owners', params: IdParam },
    handler: async (req, reply) => {
      const id = req.params.id;
      await db.tx(async (q) => {
        const cur = await getOwner(q, req.tenancy, id, true);
        if (id === req.tenancy.principal.ownerId) throw conflict('A credential cannot delete its own owner.');
        const { rows } = await q.query<{ children: boolean; assets: boolean }>(
          `SELECT EXISTS (SELECT 1 FROM owners WHERE parent_id = $1) AS children,
                  EXISTS (SELECT 1 FROM assets WHERE owner_id = $1) AS assets`,
          [id],
        );
        if (rows[0]?.children) throw conflict('The owner still has child owners.');
        if (rows[0]?.assets) throw conflict('The owner still has assets.');
        await q.query('DELETE FROM owners WHERE id = $1', [id]);
        await audit(q, req.tenancy, { action: 'delete', type: 'owner', id, ownerId: id, before: show(cur), after: null });
      });
      // Its users' and clients' logins went with it: this instance stops trusting them at once.
      req.server.services.tokens.sessions.forget();
      return reply.code(204).send();
    },
  });
};
