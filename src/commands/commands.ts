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
import { DateTime, IdParam, iso, isInt8Id, Str, Uuid, Literals, Nullable } from '../http/schemas.js';
import { BOUNDS } from '../bounds.js';
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
  'SET_MODE',
  'CLEAR_ALARMS',
] as const;
/** The running modes SET_MODE takes in parameters.mode. */
export const REEFER_MODES = ['continuous', 'cycle', 'sleep'] as const;
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
    expiresAt: Type.String({ format: 'date-time', description: 'whenCreated + ttlSeconds: past it an open command reads EXPIRED' }),
    message: Nullable(Type.String({ description: 'What the device said with its answer over MQTT (FAILED: why); null until then' })),
  },
  { title: 'Command' },
);
export const CommandAttempt = Type.Object(
  {
    at: DateTime,
    kind: Literals(['publish', 'answer'] as const),
    device: Type.String({ description: 'The MQTT device (its uniqueId) published to, or that answered' }),
    status: Type.String({
      description:
        'publish: PUBACK (the broker took it) or REFUSED (the broker refused it: message says why); answer: ACKNOWLEDGED or FAILED',
    }),
    message: Nullable(Type.String()),
  },
  { title: 'CommandAttempt' },
);
const CommandDetail = Type.Composite(
  [
    Command,
    Type.Object({
      attempts: Type.Array(CommandAttempt, {
        description: `Its downlink history, oldest first: each publish to its MQTT device and each answer (at most ${BOUNDS.commandAttempts.value})`,
      }),
    }),
  ],
  { title: 'CommandDetail' },
);
const CommandCreate = Type.Object({
  assetId: Type.String({ format: 'uuid' }),
  type: Literals(COMMAND_TYPES),
  parameters: Type.Optional(
    Type.Union([
      Type.Object(
        {
          value: Type.Optional(Type.Number({ description: 'SET_TEMPERATURE, SET_HUMIDITY, SET_CO2, SET_O2: the set point' })),
          mode: Type.Optional(Str(16, { description: `SET_MODE: ${REEFER_MODES.join(', ')}` })),
        },
        { additionalProperties: true },
      ),
      Type.Null(),
    ]),
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

export interface Row {
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
  expires_at: Date;
  message: string | null;
  expired: boolean;
}
// `expired` is computed by the database clock, the same for every instance.
export const SELECT = `id, asset_id, owner_id, type, parameters, status, unique_id, ttl_seconds, who_created, when_created, when_updated,
  expires_at, message, (status IN ('PENDING', 'SENT') AND expires_at <= now()) AS expired`;
export const effective = (r: Row) => (r.expired ? 'EXPIRED' : r.status) as Status;
export const toApi = (r: Row) => ({
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
  expiresAt: iso(r.expires_at)!,
  message: r.message,
});

/**
 * A change's whenUpdated: `at`, but at least a second after the previous one, so that the
 * command's changes order by whenUpdated as shown (to the second) even when they come fast.
 */
export const after = (at: string) => `GREATEST(${at}, date_trunc('second', when_updated) + interval '1 second')`;

/** Appends commands in their new state to the event log (the push object is the REST object). */
export const pushCommands = (q: Queryable, rows: Row[]) =>
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
    // Moved by the API: nothing more for the MQTT downlink to publish (downlink.ts).
    `UPDATE commands SET status = $2, when_updated = ${after('clock_timestamp()')}, publish_after = NULL, leased_by = NULL
      WHERE id = $1 RETURNING ${SELECT}`,
    [id, to],
  );
  await pushCommands(q, rows);
  await audit(q, t, { action, type: 'command', id: String(id), ownerId: cur.owner_id, before: toApi(cur), after: toApi(rows[0]!) });
  return rows[0]!;
}

/** The first key of the per-asset advisory lock around a command's create ("cmdc"), beside the other lock spaces. */
const CREATE_LOCK_SPACE = 1668113507;

/** Wakes the MQTT downlinks (downlink.ts) of every instance: a command is due. */
export const DOWNLINK_CHANNEL = 'tracking_command_downlink';

/** A command's downlink history, oldest first (GET /commands/{id}). */
async function attemptsOf(db: Db, id: string) {
  const { rows } = await db.query<{ at: Date; kind: 'publish' | 'answer'; device: string; status: string; message: string | null }>(
    'SELECT at, kind, device, status, message FROM command_attempts WHERE command_id = $1 ORDER BY id',
    [id],
  );
  return rows.map((r) => ({ at: iso(r.at)!, kind: r.kind, device: r.device, status: r.status, message: r.message }));
}

export const commandRoutes: FastifyPluginAsyncTypebox<{ db: Db; cfg: Config }> = async (app, { db, cfg }) => {
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
    detail: { item: CommandDetail, more: async (r) => ({ attempts: await attemptsOf(db, r.id) }) },
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
      const mode = b.parameters?.mode;
      if (b.type === 'SET_MODE' && !REEFER_MODES.includes(mode as (typeof REEFER_MODES)[number])) {
        throw badRequest(`SET_MODE needs parameters.mode, one of ${REEFER_MODES.join(', ')}.`, '/parameters/mode');
      }
      const row = await db.tx(async (q) => {
        // One create per asset at a time (every instance): the count of open commands below holds.
        await q.query(`SELECT pg_advisory_xact_lock(${CREATE_LOCK_SPACE}, hashtext($1::text))`, [b.assetId]);
        const params: unknown[] = [b.assetId];
        const cond = await req.tenancy.where('owner_id', params, q);
        const { rows: assets } = await q.query<{ owner_id: string; reefer: boolean; mqtt: boolean; open: number }>(
          `SELECT owner_id, EXISTS (SELECT 1 FROM reefer_data r WHERE r.asset_id = a.id) AS reefer,
                  EXISTS (SELECT 1 FROM devices d WHERE d.asset_id = a.id AND d.protocol = 'mqtt' AND NOT d.disabled) AS mqtt,
                  (SELECT count(*)::int FROM commands c
                    WHERE c.asset_id = a.id AND c.status IN ('PENDING', 'SENT') AND c.expires_at > now()) AS open
             FROM assets a WHERE id = $1::uuid AND ${cond}`,
          params,
        );
        const asset = assets[0];
        if (!asset) throw new ApiError('NOT_FOUND', `asset ${b.assetId} not found`, { field: '/assetId' });
        if (b.ownerId !== undefined && b.ownerId !== asset.owner_id)
          throw badRequest("/ownerId must be the asset's owner or absent.", '/ownerId');
        if (!asset.reefer) throw conflict('This asset has never sent reefer data, so it cannot take commands.', '/assetId');
        // A flood of commands for one device is refused here, before it reaches the broker or the device.
        if (asset.open >= cfg.COMMAND_MAX_OPEN_PER_ASSET) {
          throw new ApiError(
            'CONFLICT',
            `This asset has ${asset.open} open commands (PENDING or SENT); COMMAND_MAX_OPEN_PER_ASSET allows ${cfg.COMMAND_MAX_OPEN_PER_ASSET}. Wait for them to end, or cancel some.`,
            { field: '/assetId' },
          );
        }
        const ttl = b.ttlSeconds ?? 3600;
        const { rows } = await q.query<Row>(
          // With an MQTT device, due for the downlink at once (downlink.ts).
          `INSERT INTO commands (asset_id, owner_id, type, parameters, status, unique_id, ttl_seconds, expires_at, who_created, publish_after)
           VALUES ($1, $2, $3, $4, 'PENDING', $5, $6::int4, now() + $6::int4 * interval '1 second', $7, CASE WHEN $8 THEN now() END)
           ON CONFLICT (asset_id, unique_id) DO NOTHING RETURNING ${SELECT}`,
          [
            b.assetId,
            asset.owner_id,
            b.type,
            b.parameters == null ? null : JSON.stringify(b.parameters),
            b.uniqueId ?? crypto.randomUUID(),
            ttl,
            req.tenancy.principal.actor,
            asset.mqtt,
          ],
        );
        if (!rows[0]) throw new ApiError('CONFLICT', 'A command with this uniqueId already exists for this asset.', { field: '/uniqueId' });
        await pushCommands(q, rows);
        const out = toApi(rows[0]);
        await audit(q, req.tenancy, { action: 'create', type: 'command', id: out.id, ownerId: asset.owner_id, before: null, after: out });
        if (asset.mqtt) await q.query(`SELECT pg_notify('${DOWNLINK_CHANNEL}', '')`);
        return { ...rows[0], mqtt: asset.mqtt };
      });
      wakeReaders(db);
      if (row.mqtt) db.wake(DOWNLINK_CHANNEL);
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
      response: { 200: CommandDetail },
    },
    handler: async (req) => {
      const { status } = req.body;
      const row = await db.tx((q) => move(q, req.tenancy, req.params.id, status, 'update'));
      wakeReaders(db);
      return { ...toApi(row), attempts: await attemptsOf(db, row.id) };
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
