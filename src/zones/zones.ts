// Zones (API guide 8): named areas of an owner, with an optional GeoJSON Polygon /
// MultiPolygon `geometry` or a `circle`; names unique within the owner.
import { audit } from '../audit/audit.js';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type, type Static } from '@sinclair/typebox';
import type { Db, Queryable } from '../db/db.js';
import { badRequest, notFound } from '../http/errors.js';
import { filters } from '../http/filters.js';
import { readRoutes } from '../tenancy/read-routes.js';
import { DateTime, IdParam, iso, isInt8Id, Nullable, Str, Uuid } from '../http/schemas.js';
import type { Tenancy } from '../tenancy/tenancy.js';
import { mergePatch } from '../http/merge-patch.js';
import { rescheduleVisits } from '../alerts/visits.js';
import { bbox, validateCircle, validateGeometry, vertexCount, type Circle, type Geometry } from './geo.js';
import { withinZoneLimits, type ZoneLimits } from './limits.js';
import { BOUNDS } from '../bounds.js';

const GeometrySchema = Type.Object(
  {
    type: Type.Union([Type.Literal('Polygon'), Type.Literal('MultiPolygon')]),
    coordinates: Type.Array(Type.Any(), {
      maxItems: BOUNDS.arrayItems.value,
      description: `RFC 7946 [longitude, latitude] rings (or polygons), at most ${BOUNDS.arrayItems.value}; at most ${BOUNDS.zonePositions.value} positions in all`,
    }),
  },
  { description: 'GeoJSON Polygon or MultiPolygon; a zone crossing the antimeridian is a MultiPolygon split at it' },
);
const CircleSchema = Type.Object({
  latitude: Type.Number({ minimum: -90, maximum: 90 }),
  longitude: Type.Number({ minimum: -180, maximum: 180 }),
  radiusMeters: Type.Number({ exclusiveMinimum: 0, maximum: 20_037_509 }),
});

export const Zone = Type.Object(
  {
    id: Type.String({ description: 'int64 as a decimal string' }),
    ownerId: Uuid,
    name: Str(32),
    type: Nullable(Str(32)),
    note: Nullable(Str(254)),
    geometry: Nullable(GeometrySchema),
    circle: Nullable(CircleSchema),
    enterAfterSeconds: Type.Integer({ description: 'Seconds an asset stays inside before the Entered event fires (0: at once)' }),
    leaveAfterSeconds: Type.Integer({ description: 'Seconds an asset stays outside before the Left event fires (0: at once)' }),
    dwellAlertMinutes: Nullable(Type.Integer({ description: 'Minutes inside before a DWELL alert; null: never' })),
    whenCreated: DateTime,
    whenUpdated: DateTime,
  },
  { title: 'Zone' },
);

const ZoneWrite = Type.Object({
  name: Str(32, { minLength: 1 }),
  type: Type.Optional(Nullable(Str(32))),
  note: Type.Optional(Nullable(Str(254))),
  ownerId: Type.Optional(Type.String({ format: 'uuid', description: "Defaults to the caller's owner" })),
  geometry: Type.Optional(Nullable(GeometrySchema)),
  circle: Type.Optional(Nullable(CircleSchema)),
  enterAfterSeconds: Type.Optional(Type.Integer({ minimum: 0, maximum: 604_800, description: 'Default 0' })),
  leaveAfterSeconds: Type.Optional(Type.Integer({ minimum: 0, maximum: 604_800, description: 'Default 0' })),
  dwellAlertMinutes: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: 525_600 }))),
});
// A merge patch (RFC 7396) merges into the shape objects too ({circle: {radiusMeters}} keeps the centre);
// the merged shape is then validated whole by shape().
const ZonePatch = Type.Partial(
  Type.Object({ ...ZoneWrite.properties, geometry: Nullable(Type.Partial(GeometrySchema)), circle: Nullable(Type.Partial(CircleSchema)) }),
);

interface Row {
  id: string;
  owner_id: string;
  name: string;
  type: string | null;
  note: string | null;
  geometry: Geometry | null;
  circle: Circle | null;
  enter_after_seconds: number;
  leave_after_seconds: number;
  dwell_alert_minutes: number | null;
  when_created: Date;
  when_updated: Date;
}
const SELECT =
  'id, owner_id, name, type, note, geometry, circle, enter_after_seconds, leave_after_seconds, dwell_alert_minutes, when_created, when_updated';
const toApi = (r: Row) => ({
  id: r.id,
  ownerId: r.owner_id,
  name: r.name,
  type: r.type,
  note: r.note,
  geometry: r.geometry,
  circle: r.circle,
  enterAfterSeconds: r.enter_after_seconds,
  leaveAfterSeconds: r.leave_after_seconds,
  dwellAlertMinutes: r.dwell_alert_minutes,
  whenCreated: iso(r.when_created)!,
  whenUpdated: iso(r.when_updated)!,
});

async function getZone(q: Queryable, t: Tenancy, id: string, forUpdate = false): Promise<Row> {
  if (!isInt8Id(id)) throw notFound('zone');
  return t.one<Row>(q, { select: SELECT, from: 'zones', ownerColumn: 'owner_id', idType: 'int8' }, id, 'zone', forUpdate);
}

/** Validates the shape beyond the schema and computes the prefilter box. */
function shape(geometry: Geometry | null, circle: Circle | null) {
  if (geometry && circle) throw badRequest('Give a zone either geometry or circle, not both.', '/circle');
  if (geometry) {
    const v = validateGeometry(geometry);
    if (!v.ok) throw badRequest(`/geometry${v.field}: ${v.message}`, `/geometry${v.field}`);
  }
  if (circle) {
    const v = validateCircle(circle);
    if (!v.ok) throw badRequest(`/circle${v.field}: ${v.message}`, `/circle${v.field}`);
  }
  const box = geometry || circle ? bbox({ geometry, circle }) : null;
  return [
    geometry ? JSON.stringify(geometry) : null,
    circle ? JSON.stringify(circle) : null,
    box?.minLat ?? null,
    box?.maxLat ?? null,
    box?.minLon ?? null,
    box?.maxLon ?? null,
  ];
}

type ZoneInput = Static<typeof ZonePatch>;

export const zoneRoutes: FastifyPluginAsyncTypebox<{ db: Db; limits: ZoneLimits }> = async (app, { db, limits }) => {
  const tags = ['zones'];
  readRoutes(app, db, {
    path: '/zones',
    tags,
    what: 'zone',
    listSummary: 'List visible zones',
    item: Zone,
    toApi,
    select: SELECT,
    from: 'zones',
    ownerColumn: 'owner_id',
    idType: 'int8',
    defaultOrder: 'asc',
    filters: { ownerId: filters.uuid('owner_id'), name: filters.equals('name', Str(32)), type: filters.equals('type', Str(32)) },
  });

  app.post('/zones', {
    schema: { tags, summary: 'Create a zone', body: ZoneWrite, response: { 201: Zone } },
    handler: async (req, reply) => {
      const b = req.body;
      const ownerId = await req.tenancy.ownerFor(b.ownerId);
      const geometry = (b.geometry ?? null) as Geometry | null;
      const circle = b.circle ?? null;
      const geo = shape(geometry, circle);
      const created = await db.tx(async (q) => {
        await withinZoneLimits(q, limits, ownerId, vertexCount({ geometry, circle }), null);
        const { rows } = await q.query<Row>(
          `INSERT INTO zones (owner_id, name, type, note, geometry, circle, min_lat, max_lat, min_lon, max_lon,
                            enter_after_seconds, leave_after_seconds, dwell_alert_minutes)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING ${SELECT}`,
          [
            ownerId,
            b.name,
            b.type ?? null,
            b.note ?? null,
            ...geo,
            b.enterAfterSeconds ?? 0,
            b.leaveAfterSeconds ?? 0,
            b.dwellAlertMinutes ?? null,
          ],
        );
        const out = toApi(rows[0]!);
        await audit(q, req.tenancy, { action: 'create', type: 'zone', id: String(out.id), ownerId, before: null, after: out });
        return out;
      });
      reply.code(201).header('Location', `${req.server.publicUrl}/api/v1/zones/${created.id}`);
      return created;
    },
  });

  /** A PUT replaces every writable field (absent optional ones cleared); a PATCH merges, into the shape too. */
  const update = (t: Tenancy, id: string, b: ZoneInput, mode: 'put' | 'patch') =>
    db.tx(async (q) => {
      const cur = await getZone(q, t, id, true);
      const pick = <T>(v: T | undefined, old: T, dflt: T) => (v !== undefined ? v : mode === 'put' ? dflt : old);
      const ownerId = b.ownerId ?? cur.owner_id;
      if (ownerId !== cur.owner_id) await t.assertOwner(ownerId, '/ownerId', q);
      // The merged shape is checked whole by shape() below.
      const merged = <T>(v: unknown, old: T) => (mode === 'patch' && v ? mergePatch(old, v) : v) as T | null | undefined;
      const geometry = pick(merged(b.geometry, cur.geometry), cur.geometry, null);
      const circle = pick(merged(b.circle, cur.circle), cur.circle, null);
      const geo = shape(geometry, circle); // validates before the positions are counted
      await withinZoneLimits(q, limits, ownerId, vertexCount({ geometry, circle }), {
        id,
        ownerId: cur.owner_id,
        vertices: vertexCount(cur),
      });
      const rules = [
        pick(b.enterAfterSeconds, cur.enter_after_seconds, 0),
        pick(b.leaveAfterSeconds, cur.leave_after_seconds, 0),
        pick(b.dwellAlertMinutes, cur.dwell_alert_minutes, null),
      ];
      const { rows } = await q.query<Row>(
        `UPDATE zones SET name = $2, type = $3, note = $4, owner_id = $5, geometry = $6, circle = $7, min_lat = $8, max_lat = $9,
                  min_lon = $10, max_lon = $11, enter_after_seconds = $12, leave_after_seconds = $13, dwell_alert_minutes = $14,
                  when_updated = now() WHERE id = $1 RETURNING ${SELECT}`,
        [id, b.name ?? cur.name, pick(b.type, cur.type, null), pick(b.note, cur.note, null), ownerId, ...geo, ...rules],
      );
      const was = [cur.enter_after_seconds, cur.leave_after_seconds, cur.dwell_alert_minutes];
      // New timings apply to the visits in progress: the sweep looks at them again.
      if (rules.some((v, n) => v !== was[n]) || ownerId !== cur.owner_id) await rescheduleVisits(q, id);
      const after = toApi(rows[0]!);
      await audit(q, t, { action: 'update', type: 'zone', id: String(id), ownerId, before: toApi(cur), after });
      return after;
    });
  app.put('/zones/:id', {
    schema: { tags, summary: 'Replace a zone', params: IdParam, body: ZoneWrite, response: { 200: Zone } },
    handler: (req) => update(req.tenancy, req.params.id, req.body, 'put'),
  });
  app.patch('/zones/:id', {
    schema: { tags, summary: 'Update a zone (JSON merge patch)', params: IdParam, body: ZonePatch, response: { 200: Zone } },
    handler: (req) => update(req.tenancy, req.params.id, req.body, 'patch'),
  });

  app.delete('/zones/:id', {
    schema: { tags, summary: 'Delete a zone', params: IdParam },
    handler: async (req, reply) => {
      const id = req.params.id;
      await db.tx(async (q) => {
        const cur = await getZone(q, req.tenancy, id, true);
        // Assets inside it simply stop being in it: no "left" events for a deleted zone.
        await q.query('UPDATE asset_positions SET zone_ids = array_remove(zone_ids, $1::int8) WHERE $1::int8 = ANY(zone_ids)', [id]);
        await q.query('DELETE FROM zones WHERE id = $1', [id]);
        await audit(q, req.tenancy, {
          action: 'delete',
          type: 'zone',
          id: String(id),
          ownerId: cur.owner_id,
          before: toApi(cur),
          after: null,
        });
      });
      return reply.code(204).send();
    },
  });
};
