// Specifications (API guide 4, 5 and 8): per asset and type (REEFER evaluates reefer
// data, GENSET genset data), the accepted sensor ranges and when to notify. One per asset and type;
// the owner is the asset's (read through the join); assetName and whoCreated are filled here.
// Writing one re-checks the asset's open alert state against it (alerts/engine.ts).
import { audit } from '../audit/audit.js';
import crypto from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { FormatRegistry, Type, type Static, type TSchema } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import type { Db, Queryable } from '../db/db.js';
import { ApiError, badRequest, notFound } from '../http/errors.js';
import { mergePatch } from '../http/merge-patch.js';
import { filters } from '../http/filters.js';
import { readRoutes } from '../tenancy/read-routes.js';
import { DateTime, IdParam, iso, isUuid, Nullable, Str, Uuid, Literals } from '../http/schemas.js';
import type { Tenancy } from '../tenancy/tenancy.js';
import type { AlertEngine } from './engine.js';
import {
  LEVEL_SENSORS,
  MAX_MINUTES,
  NotificationSettings,
  type NotificationValue,
  Ranges,
  type RangesValue,
  SPEC_TYPES,
  Settings,
  type SpecType,
} from './model.js';

// checkSpecification below validates with TypeBox itself (a merged patch never met the route's schema).
if (!FormatRegistry.Has('uuid')) FormatRegistry.Set('uuid', isUuid);

const SpecTypeSchema = Literals(SPEC_TYPES);
const SpecWrite = Type.Object({
  name: Type.Optional(Nullable(Str(50))),
  assetId: Type.String({ format: 'uuid' }),
  type: SpecTypeSchema,
  settings: Type.Optional(Nullable(Settings)),
  ranges: Type.Optional(Nullable(Ranges)),
  notification: Type.Optional(Nullable(NotificationSettings)),
});
type SpecWrite = Static<typeof SpecWrite>;
const SpecTop = Type.Object({
  ...SpecWrite.properties,
  settings: Type.Optional(Type.Unknown()),
  ranges: Type.Optional(Type.Unknown()),
  notification: Type.Optional(Type.Unknown()),
});
// A merge patch merges into the nested objects (null removes a member), so its nested members are
// free here; the merged result is then checked whole against SpecWrite.
const AnyObject = Type.Object({}, { additionalProperties: true });
const SpecPatch = Type.Partial(
  Type.Object({
    ...SpecWrite.properties,
    settings: Nullable(AnyObject),
    ranges: Nullable(AnyObject),
    notification: Nullable(AnyObject),
  }),
);

export const Specification = Type.Object(
  {
    id: Uuid,
    name: Nullable(Type.String()),
    assetId: Uuid,
    assetName: Type.String(),
    ownerId: Uuid,
    type: SpecTypeSchema,
    settings: Nullable(Settings),
    ranges: Nullable(Ranges),
    notification: Nullable(NotificationSettings),
    whoCreated: Type.String(),
    whenCreated: DateTime,
    whenUpdated: DateTime,
  },
  { title: 'Specification' },
);
const SPEC_FILTERS = {
  assetId: filters.anyUuid('s.asset_id'),
  ownerId: filters.uuid('a.owner_id'),
  type: filters.equals('s.type', SpecTypeSchema),
  name: filters.equals('s.name', Str(50)),
};

interface Row {
  id: string;
  name: string | null;
  asset_id: string;
  asset_name: string;
  owner_id: string;
  type: SpecType;
  settings: unknown;
  ranges: RangesValue | null;
  notification: NotificationValue | null;
  who_created: string;
  when_created: Date;
  when_updated: Date;
}
const SELECT = `s.id, s.name, s.asset_id, a.name AS asset_name, a.owner_id, s.type, s.settings, s.ranges, s.notification,
  s.who_created, s.when_created, s.when_updated`;
const FROM = 'specifications s JOIN assets a ON a.id = s.asset_id';
const toApi = (r: Row) => ({
  id: r.id,
  name: r.name,
  assetId: r.asset_id,
  assetName: r.asset_name,
  ownerId: r.owner_id,
  type: r.type,
  settings: (r.settings ?? null) as Static<typeof Settings> | null,
  ranges: r.ranges,
  notification: r.notification,
  whoCreated: r.who_created,
  whenCreated: iso(r.when_created)!,
  whenUpdated: iso(r.when_updated)!,
});

/**
 * The checks beyond the schema: the whole body against SpecWrite (a merged patch has not been
 * through the route's schema), then every numeric range's order and timing. 400 naming the path.
 */
export function checkSpecification(body: unknown): SpecWrite {
  // The nested objects are checked on their own, so an error names the member inside them (a
  // check through the nullable union would only name the union).
  const parts: [TSchema, unknown, string][] = [[SpecTop, body, '']];
  for (const [key, schema] of [
    ['settings', Settings],
    ['ranges', Ranges],
    ['notification', NotificationSettings],
  ] as const) {
    const v = (body as Record<string, unknown> | null)?.[key];
    if (v !== undefined && v !== null) parts.push([schema, v, `/${key}`]);
  }
  for (const [schema, value, prefix] of parts) {
    const first = Value.Errors(schema, value).First();
    if (first) {
      const path = `${prefix}${first.path}`;
      const unknownMember = first.message.startsWith('Unexpected property');
      throw badRequest(`${path || '/'}: ${unknownMember ? 'unknown member' : first.message}`, path);
    }
  }
  const spec = body as SpecWrite;
  for (const group of ['cargo', 'hardware'] as const) {
    for (const [key, range] of Object.entries(spec.ranges?.[group]?.sensors ?? {})) {
      if (LEVEL_SENSORS.includes(key)) continue;
      const at = `/ranges/${group}/sensors/${key}`;
      const [min, max, duration, frequency] = range as (number | null)[];
      if (min != null && max != null && min > max) throw badRequest(`${at}: the minimum (${min}) is greater than the maximum (${max})`, at);
      checkMinutes(duration, `${at}/2`, 'duration');
      checkMinutes(frequency, `${at}/3`, 'frequency');
    }
  }
  const n = spec.notification;
  const topics = [
    ['controller', 'alarm', n?.controller?.alarm],
    ['controller', 'power', n?.controller?.power],
    ['controller', 'ca', n?.controller?.ca],
    // Its timing is optional (the set point rule has defaults).
    ['controller', 'setpoint', n?.controller?.setpoint],
    ['controlModule', 'scheduler', n?.controlModule?.scheduler],
  ] as const;
  for (const [area, topic, t] of topics) {
    if (!t?.default) continue;
    checkMinutes(t.default.duration, `/notification/${area}/${topic}/default/duration`, 'duration');
    checkMinutes(t.default.frequency, `/notification/${area}/${topic}/default/frequency`, 'frequency');
  }
  return spec;
}

/**
 * A duration or frequency (API guide 8): minutes, 0 or a whole number of seconds from 1 s to a year
 * (0.5 is 30 s). A tiny positive value (5e-324) once broke the date arithmetic of the alert sweep.
 */
function checkMinutes(minutes: number | null | undefined, at: string, what: string): void {
  if (minutes === undefined) return;
  const seconds = minutes === null ? Number.NaN : minutes * 60;
  const whole = Math.abs(seconds - Math.round(seconds)) < 1e-6;
  if (!(seconds === 0 || (seconds >= 1 - 1e-6 && seconds <= MAX_MINUTES * 60 && whole))) {
    throw badRequest(`${at}: the ${what} is in minutes: 0, or a whole number of seconds from 1 s (1/60) to ${MAX_MINUTES} (a year)`, at);
  }
}

const json = (v: unknown) => (v === undefined || v === null ? null : JSON.stringify(v));

async function getSpec(q: Queryable, t: Tenancy, id: string, forUpdate = false): Promise<Row> {
  if (!isUuid(id)) throw notFound('specification');
  const params: unknown[] = [id];
  const cond = await t.where('a.owner_id', params, q);
  const { rows } = await q.query<Row>(
    `SELECT ${SELECT} FROM ${FROM} WHERE s.id = $1 AND ${cond}${forUpdate ? ' FOR UPDATE OF s' : ''}`,
    params,
  );
  if (!rows[0]) throw notFound('specification');
  return rows[0];
}

/** The asset a specification names, if the caller sees it (404 naming /assetId otherwise). */
async function visibleAsset(q: Queryable, t: Tenancy, assetId: string): Promise<void> {
  const params: unknown[] = [assetId];
  const cond = await t.where('owner_id', params, q);
  const { rows } = await q.query(`SELECT 1 FROM assets WHERE id = $1 AND ${cond}`, params);
  if (!rows[0]) throw new ApiError('NOT_FOUND', `asset ${assetId} not found`, { field: '/assetId' });
}

export const specificationRoutes: FastifyPluginAsyncTypebox<{ db: Db; alerts: AlertEngine }> = async (app, { db, alerts }) => {
  const tags = ['specifications'];
  readRoutes(app, db, {
    path: '/specifications',
    tags,
    what: 'specification',
    listSummary: 'List visible specifications',
    item: Specification,
    toApi,
    select: SELECT,
    from: FROM,
    ownerColumn: 'a.owner_id',
    idType: 'uuid',
    idColumn: 's.id',
    timeColumn: 's.when_created',
    defaultOrder: 'asc',
    filters: SPEC_FILTERS,
  });

  app.post('/specifications', {
    schema: { tags, summary: 'Create a specification (one per asset and type)', body: SpecWrite, response: { 201: Specification } },
    handler: async (req, reply) => {
      const b = checkSpecification(req.body);
      const row = await db.tx(async (q) => {
        await visibleAsset(q, req.tenancy, b.assetId);
        const id = crypto.randomUUID();
        await q.query(
          `INSERT INTO specifications (id, asset_id, type, name, settings, ranges, notification, who_created)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
          [id, b.assetId, b.type, b.name ?? null, json(b.settings), json(b.ranges), json(b.notification), req.tenancy.principal.actor],
        );
        const created = await getSpec(q, req.tenancy, id);
        await audit(q, req.tenancy, {
          action: 'create',
          type: 'specification',
          id,
          ownerId: created.owner_id,
          before: null,
          after: toApi(created),
        });
        return created;
      });
      reply.code(201).header('Location', `${req.server.publicUrl}/api/v1/specifications/${row.id}`);
      return toApi(row);
    },
  });

  /**
   * A PUT replaces it; a PATCH merges into the nested objects too. Either way the result is checked
   * whole (checkSpecification), and the open alert state is re-judged against it.
   */
  const update = (t: Tenancy, id: string, body: unknown, mode: 'put' | 'patch') =>
    db.tx(async (q) => {
      if (isUuid(id)) await alerts.lockSpecification(q, id);
      const cur = await getSpec(q, t, id, true);
      const current = {
        name: cur.name,
        assetId: cur.asset_id,
        type: cur.type,
        settings: cur.settings,
        ranges: cur.ranges,
        notification: cur.notification,
      };
      const b = checkSpecification(mode === 'patch' ? mergePatch(current, body) : body);
      if (b.assetId !== cur.asset_id) await visibleAsset(q, t, b.assetId);
      const moved = b.assetId !== cur.asset_id || b.type !== cur.type;
      await q.query(
        `UPDATE specifications SET asset_id = $2, type = $3, name = $4, settings = $5, ranges = $6, notification = $7, when_updated = now()
           ${moved ? `, alert_state = '{}', evaluated_at = NULL, evaluated_id = NULL, received_at = NULL, next_due = NULL` : ''}
         WHERE id = $1`,
        [id, b.assetId, b.type, b.name ?? null, json(b.settings), json(b.ranges), json(b.notification)],
      );
      // Same asset and type: the open alert state is re-checked against the new ranges and timing.
      if (!moved) await alerts.respecify(q, id, b.type);
      const next = await getSpec(q, t, id);
      const after = toApi(next);
      await audit(q, t, { action: 'update', type: 'specification', id, ownerId: next.owner_id, before: toApi(cur), after });
      return after;
    });
  app.put('/specifications/:id', {
    schema: { tags, summary: 'Replace a specification', params: IdParam, body: SpecWrite, response: { 200: Specification } },
    handler: (req) => update(req.tenancy, req.params.id, req.body, 'put'),
  });
  app.patch('/specifications/:id', {
    schema: {
      tags,
      summary: 'Update a specification (JSON merge patch; the result is checked whole)',
      params: IdParam,
      body: SpecPatch,
      response: { 200: Specification },
    },
    handler: (req) => update(req.tenancy, req.params.id, req.body, 'patch'),
  });

  app.delete('/specifications/:id', {
    schema: { tags, summary: 'Delete a specification (its alert state goes with it)', params: IdParam },
    handler: async (req, reply) => {
      const id = req.params.id;
      await db.tx(async (q) => {
        if (isUuid(id)) await alerts.lockSpecification(q, id);
        const cur = await getSpec(q, req.tenancy, id, true);
        await q.query('DELETE FROM specifications WHERE id = $1', [id]);
        await audit(q, req.tenancy, {
          action: 'delete',
          type: 'specification',
          id,
          ownerId: cur.owner_id,
          before: toApi(cur),
          after: null,
        });
      });
      return reply.code(204).send();
    },
  });
};
