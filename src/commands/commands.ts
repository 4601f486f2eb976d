// Commands to reefer-connected assets (API guide 8). Created PENDING; the device side
// (any credential with write on the asset's owner) reads PENDING commands and moves them
// PENDING -> SENT -> ACKNOWLEDGED | FAILED; DELETE cancels a PENDING one (the record stays). An open
// command (PENDING or SENT) past its time-to-live reads as EXPIRED and can no longer change; a
// sweep then stores EXPIRED. Every state is pushed, at creation and at each change (the `command`
// object type, opted into by integrations), in the transaction that makes it.
import { audit } from '../audit/audit.js';
import crypto from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { Config } from '../config.js';
import type { Db, Queryable } from '../db/db.js';
import { appendEvents, wakeReaders } from '../eventlog/log.js';
import { ApiError, badRequest, conflict, notFound } from '../http/errors.js';
import { type Filter, filters } from '../http/filters.js';
import { readRoutes } from '../tenancy/read-routes.js';
import { DateTime, IdParam, iso, isInt8Id, Str, Uuid, Literals } from '../http/schemas.js';
import type { Tenancy } from '../tenancy/tenancy.js';

export const COMMAND_TYPES = [
  'SET_TEMPERATURE',
  'SET_HUMIDITY',
  'SET_CO2',
  'SET_O2',
  'START_DEFROST',
  'START_PTI',
  'POWER_ON',
  'POWER_OFF',
] as const;
/**
 * The set points a reefer controller takes (API guide 8): the command types that carry
 * parameters.value, with its unit and range. A value outside is a 400, never sent to a device.
 */
const SET_POINTS: Record<string, { min: number; max: number; unit: string }> = {
  SET_TEMPERATURE: { min: -40, max: 40, unit: '°C' },
  SET_HUMIDITY: { min: 0, max: 100, unit: '% relative humidity' },
  SET_CO2: { min: 0, max: 30, unit: '% CO2' },
  SET_O2: { min: 0, max: 21, unit: '% O2' },
};
export const COMMAND_STATUSES = ['PENDING', 'SENT', 'ACKNOWLEDGED', 'FAILED', 'CANCELLED', 'EXPIRED'] as const;
type Status = (typeof COMMAND_STATUSES)[number];

/** The legal moves; everything else is a 409. */
const TRANSITIONS: Record<Status, readonly Status[]> = {
  PENDING: ['SENT', 'CANCELLED'],
  SENT: ['ACKNOWLEDGED', 'FAILED'],
  ACKNOWLEDGED: [],
  FAILED: [],
  CANCELLED: [],
  EXPIRED: [],
};
const MAX_TTL_SECONDS = 30 * 86400;

export const Command = Type.Object(
  {
    id: Type.String({ description: 'int64 as a decimal string' }),
    assetId: Uuid,
    ownerId: Uuid,
    type: Literals(COMMAND_TYPES),
    command: Type.String({ description: 'The name of the action (echoes type)' }),
    parameters: Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()]),
    status: Literals(COMMAND_STATUSES),
    uniqueId: Type.String(),
    ttlSeconds: Type.Integer(),
    whoCreated: Type.String(),
    whenCreated: DateTime,
    whenUpdated: DateTime,
  },
  { title: 'Command' },
);
const CommandCreate = Type.Object({
  assetId: Type.String({ format: 'uuid' }),
  type: Literals(COMMAND_TYPES),
  parameters: Type.Optional(
    Type.Union([Type.Object({ value: Type.Optional(Type.Number()) }, { additionalProperties: true }), Type.Null()]),
  ),
  uniqueId: Type.Optional(Str(64, { minLength: 1, description: "Client's correlation id, unique per asset (generated when absent)" })),
  ttlSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_TTL_SECONDS, description: 'Default 3600' })),
  ownerId: Type.Optional(Type.String({ format: 'uuid', description: "Must be the asset's owner when given" })),
});
// Every status is a well-formed value; which moves are legal is decided by TRANSITIONS (an illegal one is 409).
const CommandPatch = Type.Object({ status: Literals(COMMAND_STATUSES) });
const COMMAND_FILTERS: Record<string, Filter> = {
  assetId: filters.anyUuid('asset_id'),
  ownerId: filters.uuid('owner_id'),
  type: filters.equals('type', Literals(COMMAND_TYPES)),
  // The status as read (an open command past its time-to-live reads EXPIRED), decided by the database clock.
  status: {
    schema: Literals(COMMAND_STATUSES),
    sql: (p) =>
      `(CASE WHEN ${p} = 'EXPIRED' THEN status = 'EXPIRED' OR (status IN ('PENDING', 'SENT') AND expires_at <= now())
             ELSE status = ${p} AND (status NOT IN ('PENDING', 'SENT') OR expires_at > now()) END)`,
  },
};

interface Row {
  id: string;
  asset_id: string;
  owner_id: string;
  type: string;
  parameters: Record<string, unknown> | null;
  status: string;
  unique_id: string;
  ttl_seconds: number;
  who_created: string;
  when_created: Date;
  when_updated: Date;
  expired: boolean;
}
// `expired` is computed by the database clock, the same for every instance.
const SELECT = `id, asset_id, owner_id, type, parameters, status, unique_id, ttl_seconds, who_created, when_created, when_updated,
  (status IN ('PENDING', 'SENT') AND expires_at <= now()) AS expired`;
const effective = (r: Row) => (r.expired ? 'EXPIRED' : r.status) as Status;
const toApi = (r: Row) => ({
  id: r.id,
  assetId: r.asset_id,
  ownerId: r.owner_id,
  type: r.type as (typeof COMMAND_TYPES)[number],
  command: r.type,
  parameters: r.parameters,
  status: effective(r),
  uniqueId: r.unique_id,
  ttlSeconds: r.ttl_seconds,
  whoCreated: r.who_created,
  whenCreated: iso(r.when_created)!,
  whenUpdated: iso(r.when_updated)!,
});

/**
 * A change's whenUpdated: `at`, but at least a second after the previous one, so that the
 * command's changes order by whenUpdated as shown (to the second) even when they come fast.
 */
const after = (at: string) => `GREATEST(${at}, date_trunc('second', when_updated) + interval '1 second')`;

/** Appends commands in their new state to the event log (the push object is the REST object). */
const pushCommands = (q: Queryable, rows: Row[]) =>
  appendEvents(
    q,
    'command',
    rows.map((r) => ({ objectId: r.id, ownerId: r.owner_id, payload: toApi(r) })),
  );

/**
 * Stores EXPIRED on open commands whose time-to-live ended by `now` (they already read so), dated
 * when they expired, and pushes that change; in batches, rows another instance holds skipped.
 * Returns how many expired.
 */
export async function expireCommands(db: Db, now = new Date()): Promise<number> {
  let total = 0;
  for (;;) {
    const n = await db.tx(async (q) => {
      const { rows } = await q.query<Row>(
        `UPDATE commands SET status = 'EXPIRED', when_updated = ${after('expires_at')}
          WHERE id IN (SELECT id FROM commands WHERE status IN ('PENDING', 'SENT') AND expires_at <= $1
                        ORDER BY expires_at LIMIT 500 FOR UPDATE SKIP LOCKED)
          RETURNING ${SELECT}`,
        [now.toISOString()],
      );
      await pushCommands(q, rows);
      return rows.length;
    });
    total += n;
    if (n < 500) break;
  }
  if (total) wakeReaders(db);
  return total;
}

async function getCommand(q: Queryable, t: Tenancy, id: string, forUpdate = false): Promise<Row> {
  if (!isInt8Id(id)) throw notFound('command');
  return t.one<Row>(q, { select: SELECT, from: 'commands', ownerColumn: 'owner_id', idType: 'int8' }, id, 'command', forUpdate);
}

async function move(q: Queryable, t: Tenancy, id: string, to: Status, action: 'update' | 'cancel'): Promise<Row> {
  const cur = await getCommand(q, t, id, true);
  const from = effective(cur);
  if (!TRANSITIONS[from].includes(to)) {
    throw new ApiError('CONFLICT', `A ${from} command cannot become ${to}.`, { field: '/status' });
  }
  const { rows } = await q.query<Row>(
    `UPDATE commands SET status = $2, when_updated = ${after('clock_timestamp()')} WHERE id = $1 RETURNING ${SELECT}`,
    [id, to],
  );
  await pushCommands(q, rows);
  await audit(q, t, { action, type: 'command', id: String(id), ownerId: cur.owner_id, before: toApi(cur), after: toApi(rows[0]!) });
  return rows[0]!;
}

export const commandRoutes: FastifyPluginAsyncTypebox<{ db: Db; cfg: Config }> = async (app, { db }) => {
  const tags = ['commands'];
  readRoutes(app, db, {
    path: '/commands',
    tags,
    what: 'command',
    listSummary: 'List commands (device side: status=PENDING), newest first by default',
    item: Command,
    toApi,
    select: SELECT,
    from: 'commands',
    ownerColumn: 'owner_id',
    idType: 'int8',
    defaultOrder: 'desc',
    export: { name: 'commands' },
    filters: COMMAND_FILTERS,
  });

  app.post('/commands', {
    schema: { tags, summary: 'Send a command to a reefer-connected asset', body: CommandCreate, response: { 201: Command } },
    handler: async (req, reply) => {
      const b = req.body;
      const range = SET_POINTS[b.type];
      const value = b.parameters?.value;
      if (range && typeof value !== 'number') throw badRequest(`${b.type} needs a numeric parameters.value.`, '/parameters/value');
      if (range && typeof value === 'number' && (value < range.min || value > range.max)) {
        throw badRequest(`${b.type} takes parameters.value from ${range.min} to ${range.max} (${range.unit}).`, '/parameters/value');
      }
      const row = await db.tx(async (q) => {
        const params: unknown[] = [b.assetId];
        const cond = await req.tenancy.where('owner_id', params, q);
        const { rows: assets } = await q.query<{ owner_id: string; reefer: boolean }>(
          `SELECT owner_id, EXISTS (SELECT 1 FROM reefer_data r WHERE r.asset_id = a.id) AS reefer
             FROM assets a WHERE id = $1::uuid AND ${cond}`,
          params,
        );
        const asset = assets[0];
        if (!asset) throw new ApiError('NOT_FOUND', `asset ${b.assetId} not found`, { field: '/assetId' });
        if (b.ownerId !== undefined && b.ownerId !== asset.owner_id)
          throw badRequest("/ownerId must be the asset's owner or absent.", '/ownerId');
        if (!asset.reefer) throw conflict('This asset has never sent reefer data, so it cannot take commands.', '/assetId');
        const ttl = b.ttlSeconds ?? 3600;
        const { rows } = await q.query<Row>(
          `INSERT INTO commands (asset_id, owner_id, type, parameters, status, unique_id, ttl_seconds, expires_at, who_created)
           VALUES ($1, $2, $3, $4, 'PENDING', $5, $6::int4, now() + $6::int4 * interval '1 second', $7)
           ON CONFLICT (asset_id, unique_id) DO NOTHING RETURNING ${SELECT}`,
          [
            b.assetId,
            asset.owner_id,
            b.type,
            b.parameters == null ? null : JSON.stringify(b.parameters),
            b.uniqueId ?? crypto.randomUUID(),
            ttl,
            req.tenancy.principal.actor,
          ],
        );
        if (!rows[0]) throw new ApiError('CONFLICT', 'A command with this uniqueId already exists for this asset.', { field: '/uniqueId' });
        await pushCommands(q, rows);
        const out = toApi(rows[0]);
        await audit(q, req.tenancy, { action: 'create', type: 'command', id: out.id, ownerId: asset.owner_id, before: null, after: out });
        return rows[0];
      });
      wakeReaders(db);
      reply.code(201).header('Location', `${req.server.publicUrl}/api/v1/commands/${row.id}`);
      return toApi(row);
    },
  });

  app.patch('/commands/:id', {
    schema: {
      tags,
      summary: 'Change a command status (device side); illegal transitions are 409',
      params: IdParam,
      body: CommandPatch,
      response: { 200: Command },
    },
    handler: async (req) => {
      const { status } = req.body;
      const row = await db.tx((q) => move(q, req.tenancy, req.params.id, status, 'update'));
      wakeReaders(db);
      return toApi(row);
    },
  });

  app.delete('/commands/:id', {
    schema: { tags, summary: 'Cancel a PENDING command (the record stays readable as CANCELLED)', params: IdParam },
    handler: async (req, reply) => {
      await db.tx((q) => move(q, req.tenancy, req.params.id, 'CANCELLED', 'cancel'));
      wakeReaders(db);
      return reply.code(204).send();
    },
  });
};
