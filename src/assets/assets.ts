// Assets (API guide 3, 4 and 8): names unique within their owner; `assetTags` accepted as
// an alias of `tags` (published sample payloads use it); deletion refused while data records refer to it.
// The equipment identity of DCSA Track & Trace (migration 0034): `equipmentReference`, an ISO 6346
// container number unique within the owner's tree, and `isoEquipmentCode`, its size-type.
import { audit } from '../audit/audit.js';
import crypto from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type, type Static } from '@sinclair/typebox';
import type { Db, Queryable } from '../db/db.js';
import { badRequest, conflict, notFound } from '../http/errors.js';
import { applyFilters, filters, listQuery } from '../http/filters.js';
import { listPage } from '../http/paging.js';
import { DateTime, IdParam, isUuid, iso, Nullable, Str, Uuid } from '../http/schemas.js';
import { TOP_TREE_SQL, type Tenancy } from '../tenancy/tenancy.js';
import { appendEvents, wakeReaders } from '../eventlog/log.js';
import { inheritedSilent, SilentMinutes } from '../owners/owners.js';
import { iso6346Problem, isoSizeTypeProblem } from '../dcsa/iso6346.js';

const EquipmentReference = Type.String({
  maxLength: 11,
  description:
    'ISO 6346 container number: owner code, category (U, J or Z), 6 digits, check digit; capitals; unique within the tree of its top-level owner',
  examples: ['MSKU1234565'],
});
const IsoEquipmentCode = Type.String({
  maxLength: 4,
  description: 'ISO 6346 size-type code (e.g. 45R1, 22G1, 22GP)',
  examples: ['45R1'],
});

export const Asset = Type.Object(
  {
    id: Uuid,
    name: Str(255),
    disabled: Type.Boolean(),
    note: Nullable(Str(255)),
    tags: Nullable(Str(255, { description: 'Comma separated words' })),
    boxId: Nullable(Str(36)),
    ownerId: Uuid,
    silentAlertMinutes: Nullable(
      Type.Integer({ description: "Minutes without a record before a SILENT alert; 0: off; null: its owner's" }),
    ),
    effectiveSilentAlertMinutes: Nullable(Type.Integer({ description: 'What applies to it; null: off' })),
    equipmentReference: Nullable(EquipmentReference),
    isoEquipmentCode: Nullable(IsoEquipmentCode),
    whenCreated: DateTime,
    whenUpdated: DateTime,
  },
  { title: 'Asset' },
);

const writable = {
  name: Str(255, { minLength: 1 }),
  disabled: Type.Optional(Type.Boolean()),
  note: Type.Optional(Nullable(Str(255))),
  tags: Type.Optional(Nullable(Str(255, { description: 'Comma separated words' }))),
  assetTags: Type.Optional(Nullable(Str(255, { description: 'Alias of tags' }))),
  boxId: Type.Optional(Nullable(Str(36))),
  ownerId: Type.Optional(Type.String({ format: 'uuid', description: "Defaults to the caller's owner" })),
  silentAlertMinutes: Type.Optional(Nullable(SilentMinutes)),
  equipmentReference: Type.Optional(Nullable(EquipmentReference)),
  isoEquipmentCode: Type.Optional(Nullable(IsoEquipmentCode)),
};
const AssetWrite = Type.Object(writable);
const AssetPatch = Type.Partial(AssetWrite);
type AssetWrite = Static<typeof AssetWrite>;

const ASSET_FILTERS = {
  name: filters.equals('name', Str(255)),
  ownerId: filters.uuid('owner_id'),
  assetId: filters.anyUuid('id'),
  equipmentReference: filters.equals('equipment_reference', Str(11)),
};
const AssetList = listQuery(ASSET_FILTERS);

interface Row {
  id: string;
  name: string;
  disabled: boolean;
  note: string | null;
  tags: string | null;
  box_id: string | null;
  owner_id: string;
  silent_alert_minutes: number | null;
  effective_silent: number | null;
  equipment_reference: string | null;
  iso_equipment_code: string | null;
  when_created: Date;
  when_updated: Date;
}

// The silence rule in force: the asset's own, else its owner's up the tree (0: off).
const SELECT = `id, name, disabled, note, tags, box_id, owner_id, when_created, when_updated, silent_alert_minutes,
  equipment_reference, iso_equipment_code,
  COALESCE(silent_alert_minutes, (SELECT ${inheritedSilent('o')} FROM owners o WHERE o.id = assets.owner_id)) AS effective_silent`;
const toApi = (r: Row) => ({
  id: r.id,
  name: r.name,
  disabled: r.disabled,
  note: r.note,
  tags: r.tags,
  boxId: r.box_id,
  ownerId: r.owner_id,
  silentAlertMinutes: r.silent_alert_minutes,
  effectiveSilentAlertMinutes: r.effective_silent || null,
  equipmentReference: r.equipment_reference,
  isoEquipmentCode: r.iso_equipment_code,
  whenCreated: iso(r.when_created)!,
  whenUpdated: iso(r.when_updated)!,
});

export async function getAsset(q: Queryable, t: Tenancy, id: string, forUpdate = false): Promise<Row> {
  if (!isUuid(id)) throw notFound('asset');
  return t.one<Row>(q, { select: SELECT, from: 'assets', ownerColumn: 'owner_id' }, id, 'asset', forUpdate);
}

/** The push shape of an asset (API guide 8: tags as an array of the comma-separated words). */
const toPush = (r: Row) => ({
  id: r.id,
  name: r.name,
  ownerId: r.owner_id,
  whenCreated: iso(r.when_created)!,
  whenUpdated: iso(r.when_updated)!,
  boxId: r.box_id,
  disabled: r.disabled,
  note: r.note,
  tags:
    r.tags === null
      ? null
      : r.tags
          .split(',')
          .map((w) => w.trim())
          .filter(Boolean),
});
const pushAsset = (q: Queryable, r: Row) => appendEvents(q, 'asset', [{ objectId: r.id, ownerId: r.owner_id, payload: toPush(r) }]);

/** 400 naming the field unless the equipment identity given (null or absent: none) is ISO 6346's. */
function checkEquipment(body: Partial<AssetWrite>): void {
  const ref = body.equipmentReference;
  const refProblem = ref == null ? null : iso6346Problem(ref);
  if (refProblem) throw badRequest(`/equipmentReference is not an ISO 6346 container number: ${refProblem}.`, '/equipmentReference');
  const code = body.isoEquipmentCode;
  const codeProblem = code == null ? null : isoSizeTypeProblem(code);
  if (codeProblem) throw badRequest(`/isoEquipmentCode is not an ISO 6346 size-type code: ${codeProblem}.`, '/isoEquipmentCode');
}

/** The advisory lock space of equipment references per owner tree ("eqrf"), beside the other lock spaces. */
const EQUIPMENT_LOCK_SPACE = 1701933670;

/**
 * 409 naming /equipmentReference when another asset of `ownerId`'s tree (its top-level owner and
 * every owner below) has `ref`. Call in the transaction that writes it: it locks (top-level owner,
 * ref) until the commit, so two writes of one number in one tree are checked one after the other.
 */
async function assertEquipmentFree(q: Queryable, ownerId: string, ref: string, assetId: string): Promise<void> {
  await q.query(
    `${TOP_TREE_SQL} SELECT pg_advisory_xact_lock(${EQUIPMENT_LOCK_SPACE}, hashtext(id::text || ':' || $2::text)) FROM up WHERE parent_id IS NULL`,
    [ownerId, ref],
  );
  const { rows } = await q.query(
    `${TOP_TREE_SQL} SELECT 1 FROM assets a
      WHERE a.equipment_reference = $2::text AND a.id <> $3::uuid AND a.owner_id IN (SELECT id FROM tree) LIMIT 1`,
    [ownerId, ref, assetId],
  );
  if (rows.length > 0) {
    throw conflict(
      `Another asset of this owner's organisation (its top-level owner and every owner below it) has equipmentReference ${ref}: a container number is unique there.`,
      '/equipmentReference',
    );
  }
}

function tagsOf(body: Partial<AssetWrite>): string | null | undefined {
  if (body.tags !== undefined) return body.tags;
  return body.assetTags;
}

export const assetRoutes: FastifyPluginAsyncTypebox<{ db: Db }> = async (app, { db }) => {
  const tags = ['assets'];

  app.get('/assets', {
    schema: { tags, summary: 'List visible assets', querystring: AssetList, response: { 200: Type.Array(Asset) } },
    handler: async (req, reply) => {
      const rows = await listPage<Row>(db, req, reply, {
        select: SELECT,
        from: 'assets',
        owners: { column: 'owner_id', scope: req.tenancy },
        defaultOrder: 'asc',
        idType: 'uuid',
        filters: (params, where) => applyFilters(ASSET_FILTERS, req.query, params, where),
      });
      return rows.map(toApi);
    },
  });

  app.post('/assets', {
    bodyLimit: 1024 * 1024,
    schema: { tags, summary: 'Create an asset', body: AssetWrite, response: { 201: Asset } },
    handler: async (req, reply) => {
      const body = req.body;
      checkEquipment(body);
      const ownerId = await req.tenancy.ownerFor(body.ownerId);
      const id = crypto.randomUUID();
      const row = await db.tx(async (q) => {
        if (body.equipmentReference != null) await assertEquipmentFree(q, ownerId, body.equipmentReference, id);
        const { rows } = await q.query<Row>(
          `INSERT INTO assets (id, owner_id, name, disabled, note, tags, box_id, silent_alert_minutes, equipment_reference, iso_equipment_code)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING ${SELECT}`,
          [
            id,
            ownerId,
            body.name,
            body.disabled ?? false,
            body.note ?? null,
            tagsOf(body) ?? null,
            body.boxId ?? null,
            body.silentAlertMinutes ?? null,
            body.equipmentReference ?? null,
            body.isoEquipmentCode ?? null,
          ],
        );
        await pushAsset(q, rows[0]!);
        await audit(q, req.tenancy, { action: 'create', type: 'asset', id, ownerId, before: null, after: toApi(rows[0]!) });
        return rows[0]!;
      });
      wakeReaders(db); // after the commit: the engine looks for the new event at once
      reply.code(201).header('Location', `${req.server.publicUrl}/api/v1/assets/${id}`);
      return toApi(row);
    },
  });

  app.get('/assets/:id', {
    schema: { tags, summary: 'Get an asset', params: IdParam, response: { 200: Asset } },
    handler: async (req) => toApi(await getAsset(db, req.tenancy, req.params.id)),
  });

  /** A PUT replaces every writable field (absent optional ones cleared); a PATCH changes those given. */
  const update = async (t: Tenancy, id: string, body: Partial<AssetWrite>, mode: 'put' | 'patch') => {
    const out = await db.tx(async (q) => {
      const cur = await getAsset(q, t, id, true);
      const keep = <T>(v: T | undefined, old: T, dflt: T) => (mode === 'put' ? (v === undefined ? dflt : v) : v === undefined ? old : v);
      const ownerId = body.ownerId ?? cur.owner_id;
      if (ownerId !== cur.owner_id) await t.assertOwner(ownerId, '/ownerId', q);
      checkEquipment(body);
      const ref = keep(body.equipmentReference, cur.equipment_reference, null);
      // A new number, or the asset moved (perhaps to another tree): checked again.
      if (ref !== null && (ref !== cur.equipment_reference || ownerId !== cur.owner_id)) await assertEquipmentFree(q, ownerId, ref, id);
      const { rows } = await q.query<Row>(
        `UPDATE assets SET name = $2, disabled = $3, note = $4, tags = $5, box_id = $6, owner_id = $7, silent_alert_minutes = $8,
                equipment_reference = $9, iso_equipment_code = $10, when_updated = now()
          WHERE id = $1 RETURNING ${SELECT}`,
        [
          id,
          body.name ?? cur.name,
          keep(body.disabled, cur.disabled, false),
          keep(body.note, cur.note, null),
          keep(tagsOf(body), cur.tags, null),
          keep(body.boxId, cur.box_id, null),
          ownerId,
          keep(body.silentAlertMinutes, cur.silent_alert_minutes, null),
          ref,
          keep(body.isoEquipmentCode, cur.iso_equipment_code, null),
        ],
      );
      // A move applies from now on: what was stored keeps the owner it was stored for (API guide 3).
      await pushAsset(q, rows[0]!);
      const after = toApi(rows[0]!);
      await audit(q, t, { action: 'update', type: 'asset', id, ownerId, before: toApi(cur), after });
      return after;
    });
    wakeReaders(db);
    return out;
  };

  app.put('/assets/:id', {
    schema: { tags, summary: 'Replace an asset', params: IdParam, body: AssetWrite, response: { 200: Asset } },
    handler: (req) => update(req.tenancy, req.params.id, req.body, 'put'),
  });
  app.patch('/assets/:id', {
    schema: { tags, summary: 'Update an asset (JSON merge patch)', params: IdParam, body: AssetPatch, response: { 200: Asset } },
    handler: (req) => update(req.tenancy, req.params.id, req.body, 'patch'),
  });

  app.delete('/assets/:id', {
    schema: { tags, summary: 'Delete an asset; 409 while it has data records', params: IdParam },
    handler: async (req, reply) => {
      const id = req.params.id;
      await db.tx(async (q) => {
        const cur = await getAsset(q, req.tenancy, id, true);
        // Data record tables reference assets: the foreign key answers 409 while any exist.
        await q.query('DELETE FROM assets WHERE id = $1', [id]);
        await audit(q, req.tenancy, { action: 'delete', type: 'asset', id, ownerId: cur.owner_id, before: toApi(cur), after: null });
      });
      return reply.code(204).send();
    },
  });
};
