// Devices (API guide 15): trackers that send their data straight to the service, each feeding one
// asset, with tenancy as the asset's (another owner's device answers 404). `uniqueId` is what the
// device sends to name itself, unique across the service (a taken one is a 409). Left out, it is
// generated: 24 random characters, which for OsmAnd is the device's only credential. Choosing one
// (an IMEI) needs the admin scope, so no customer can register another fleet's tracker first.
import crypto from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { type Static, Type } from '@sinclair/typebox';
import { audit } from '../audit/audit.js';
import { getAsset } from '../assets/assets.js';
import type { Db, Queryable } from '../db/db.js';
import { ApiError, conflict, forbidden, notFound } from '../http/errors.js';
import { applyFilters, filters, listQuery } from '../http/filters.js';
import { listPage } from '../http/paging.js';
import { DateTime, IdParam, isUuid, iso, Literals, Nullable, Str, Uuid } from '../http/schemas.js';
import type { Tenancy } from '../tenancy/tenancy.js';

export const PROTOCOLS = ['osmand', 'mqtt', 'traccar'] as const;
export type Protocol = (typeof PROTOCOLS)[number];

export const Device = Type.Object(
  {
    id: Uuid,
    uniqueId: Type.String({ description: 'What the device sends to name itself; for OsmAnd its only credential' }),
    assetId: Uuid,
    protocol: Literals(PROTOCOLS),
    disabled: Type.Boolean(),
    lastSeenAt: Nullable(DateTime),
    lastError: Nullable(Type.String({ description: 'The last thing it sent that could not be stored, and why' })),
    lastErrorAt: Nullable(DateTime),
    whenCreated: DateTime,
    whenUpdated: DateTime,
  },
  { title: 'Device' },
);

/** A uniqueId a device can send: printable, no separators of the MQTT topic. */
const UniqueId = Type.String({
  minLength: 1,
  maxLength: 64,
  pattern: '^[A-Za-z0-9._:-]+$',
  description: 'Letters, digits and . _ : - (an IMEI, a serial); choosing one needs the admin scope. Default: 24 random characters',
});
const DeviceWrite = Type.Object({
  assetId: Uuid,
  protocol: Literals(PROTOCOLS),
  uniqueId: Type.Optional(UniqueId),
  disabled: Type.Optional(Type.Boolean()),
});
const DevicePatch = Type.Partial(DeviceWrite);
type DeviceWrite = Static<typeof DeviceWrite>;

const DEVICE_FILTERS = {
  assetId: filters.anyUuid('asset_id'),
  protocol: filters.equals('protocol', Literals(PROTOCOLS)),
  uniqueId: filters.equals('unique_id', Str(64)),
};
const DeviceList = listQuery(DEVICE_FILTERS);

export interface DeviceRow {
  id: string;
  unique_id: string;
  asset_id: string;
  owner_id: string;
  protocol: Protocol;
  disabled: boolean;
  last_seen_at: Date | null;
  last_error: string | null;
  last_error_at: Date | null;
  when_created: Date;
  when_updated: Date;
}

/** Devices with their asset's owner (the tenancy column). */
export const DEVICES = '(SELECT d.*, a.owner_id FROM devices d JOIN assets a ON a.id = d.asset_id) devices';
const SELECT = 'id, unique_id, asset_id, owner_id, protocol, disabled, last_seen_at, last_error, last_error_at, when_created, when_updated';

const toApi = (r: DeviceRow) => ({
  id: r.id,
  uniqueId: r.unique_id,
  assetId: r.asset_id,
  protocol: r.protocol,
  disabled: r.disabled,
  lastSeenAt: iso(r.last_seen_at),
  lastError: r.last_error,
  lastErrorAt: iso(r.last_error_at),
  whenCreated: iso(r.when_created)!,
  whenUpdated: iso(r.when_updated)!,
});
/** The audit's view: a generated uniqueId is a credential (OsmAnd), never written to the log. */
const audited = (r: DeviceRow) => ({ ...toApi(r), uniqueId: '********' });

/** 24 characters of a 32-letter alphabet: 120 bits. */
export function generateUniqueId(): string {
  const alphabet = 'abcdefghijkmnpqrstuvwxyz23456789';
  const bytes = crypto.randomBytes(24);
  let out = '';
  for (const b of bytes) out += alphabet[b & 31];
  return out;
}

async function getDevice(q: Queryable, t: Tenancy, id: string, forUpdate = false): Promise<DeviceRow> {
  if (!isUuid(id)) throw notFound('device');
  const row = await t.one<DeviceRow>(q, { select: SELECT, from: DEVICES, ownerColumn: 'owner_id' }, id, 'device');
  if (forUpdate) await q.query('SELECT 1 FROM devices WHERE id = $1 FOR UPDATE', [id]);
  return row;
}

/** The asset a body names, visible to the caller: else a 404 naming /assetId. */
async function assetOf(q: Queryable, t: Tenancy, id: string) {
  try {
    return await getAsset(q, t, id);
  } catch (e) {
    if (e instanceof ApiError && e.code === 'NOT_FOUND') throw new ApiError('NOT_FOUND', 'asset not found', { field: '/assetId' });
    throw e;
  }
}

const read = async (q: Queryable, id: string) =>
  (await q.query<DeviceRow>(`SELECT ${SELECT} FROM ${DEVICES} WHERE id = $1`, [id])).rows[0]!;

/** A uniqueId taken (the unique index): 409 naming it. */
const taken = (e: unknown) => {
  if ((e as { code?: string }).code === '23505') throw conflict('This uniqueId belongs to another device.', '/uniqueId');
  throw e;
};

export const deviceRoutes: FastifyPluginAsyncTypebox<{
  db: Db;
  /**
   * Called with the uniqueIds of a device changed or deleted (the adapters' caches drop them); the
   * answer waits for it, so that no process of the instance admits the old device after it.
   */
  changed: (uniqueIds: string[]) => Promise<void>;
}> = async (app, { db, changed }) => {
  const tags = ['devices'];
  const mayChoose = (t: Tenancy, uniqueId: string | undefined) => {
    if (uniqueId !== undefined && !t.isAdmin) {
      throw forbidden('Choosing a uniqueId needs the admin scope: leave it out and one is generated.');
    }
  };

  app.get('/devices', {
    schema: { tags, summary: 'List visible devices', querystring: DeviceList, response: { 200: Type.Array(Device) } },
    handler: async (req, reply) => {
      const rows = await listPage<DeviceRow>(db, req, reply, {
        select: SELECT,
        from: DEVICES,
        owners: { column: 'owner_id', scope: req.tenancy },
        defaultOrder: 'asc',
        idType: 'uuid',
        filters: (params, where) => applyFilters(DEVICE_FILTERS, req.query, params, where),
      });
      return rows.map(toApi);
    },
  });

  app.post('/devices', {
    schema: { tags, summary: 'Register a device for an asset', body: DeviceWrite, response: { 201: Device } },
    handler: async (req, reply) => {
      const body = req.body as DeviceWrite;
      mayChoose(req.tenancy, body.uniqueId);
      const id = crypto.randomUUID();
      const row = await db
        .tx(async (q) => {
          const asset = await assetOf(q, req.tenancy, body.assetId);
          await q.query('INSERT INTO devices (id, unique_id, asset_id, protocol, disabled) VALUES ($1, $2, $3, $4, $5)', [
            id,
            body.uniqueId ?? generateUniqueId(),
            body.assetId,
            body.protocol,
            body.disabled ?? false,
          ]);
          const r = await read(q, id);
          await audit(q, req.tenancy, { action: 'create', type: 'device', id, ownerId: asset.owner_id, before: null, after: audited(r) });
          return r;
        })
        .catch(taken);
      reply.code(201).header('Location', `${req.server.publicUrl}/api/v1/devices/${id}`);
      return toApi(row);
    },
  });

  app.get('/devices/:id', {
    schema: { tags, summary: 'Get a device', params: IdParam, response: { 200: Device } },
    handler: async (req) => toApi(await getDevice(db, req.tenancy, req.params.id)),
  });

  app.patch('/devices/:id', {
    schema: {
      tags,
      summary: 'Update a device: move it to another asset, disable or enable it, change its protocol (a new uniqueId needs admin)',
      params: IdParam,
      body: DevicePatch,
      response: { 200: Device },
    },
    handler: async (req) => {
      const body = req.body as Partial<DeviceWrite>;
      let ids: string[] = [];
      // Forgotten once committed: a lookup between would read (and keep) the row as it was.
      return db
        .tx(async (q) => {
          // Another owner's device is a 404 first, whatever the body asks.
          const cur = await getDevice(q, req.tenancy, req.params.id, true);
          mayChoose(req.tenancy, body.uniqueId);
          if (body.assetId !== undefined && body.assetId !== cur.asset_id) {
            await assetOf(q, req.tenancy, body.assetId);
          }
          await q.query(
            'UPDATE devices SET asset_id = $2, protocol = $3, disabled = $4, unique_id = $5, when_updated = now() WHERE id = $1',
            [
              cur.id,
              body.assetId ?? cur.asset_id,
              body.protocol ?? cur.protocol,
              body.disabled ?? cur.disabled,
              body.uniqueId ?? cur.unique_id,
            ],
          );
          const after = await read(q, cur.id);
          ids = [cur.unique_id, after.unique_id];
          await audit(q, req.tenancy, {
            action: 'update',
            type: 'device',
            id: cur.id,
            ownerId: after.owner_id,
            before: audited(cur),
            after: { ...audited(after), uniqueId: cur.unique_id === after.unique_id ? '********' : '******** (new)' },
          });
          return toApi(after);
        })
        .then(async (device) => {
          await changed(ids);
          return device;
        })
        .catch(taken);
    },
  });

  app.delete('/devices/:id', {
    schema: { tags, summary: 'Delete a device (what it stored stays)', params: IdParam },
    handler: async (req, reply) => {
      const uniqueId = await db.tx(async (q) => {
        const cur = await getDevice(q, req.tenancy, req.params.id, true);
        await q.query('DELETE FROM devices WHERE id = $1', [cur.id]);
        await audit(q, req.tenancy, {
          action: 'delete',
          type: 'device',
          id: cur.id,
          ownerId: cur.owner_id,
          before: audited(cur),
          after: null,
        });
        return cur.unique_id;
      });
      await changed([uniqueId]);
      return reply.code(204).send();
    },
  });
};
