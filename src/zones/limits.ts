// Zone limits (API guide 8, "Zones"): matching a stored location costs with its owner's zones and
// their positions, so one top-level owner's tree (the owner and every owner below it: a tenant can
// make sub-owners, so a per-owner count would be no bound) may have at most ZONES_MAX_PER_OWNER
// zones and ZONES_MAX_VERTICES_PER_OWNER positions over their shapes (a circle counts one; one
// geometry has at most geo.ts MAX_POSITIONS). Past either: 409 CONFLICT, nothing saved. Lowering a
// limit keeps what is there; only a change that adds a zone to a tree, or positions, is refused.
import type { Config } from '../config.js';
import type { Queryable } from '../db/db.js';
import { conflict } from '../http/errors.js';
import { TOP_TREE_SQL } from '../tenancy/tenancy.js';

export type ZoneLimits = Pick<Config, 'ZONES_MAX_PER_OWNER' | 'ZONES_MAX_VERTICES_PER_OWNER'>;

/** Positions of a stored zone's shape, for a query over zones aliased `z` (as geo.ts vertexCount counts them). */
const VERTICES = `COALESCE((SELECT sum(jsonb_array_length(r)) FROM jsonb_array_elements(
       CASE WHEN z.geometry->>'type' = 'Polygon' THEN z.geometry->'coordinates' END) r), 0)
  + COALESCE((SELECT sum(jsonb_array_length(r)) FROM jsonb_array_elements(
       CASE WHEN z.geometry->>'type' = 'MultiPolygon' THEN z.geometry->'coordinates' END) p, jsonb_array_elements(p) r), 0)
  + CASE WHEN z.geometry IS NULL AND z.circle IS NOT NULL THEN 1 ELSE 0 END`;

/**
 * Throws 409 CONFLICT unless `ownerId`'s tree has room for a zone of `vertices` positions: a new
 * one (`was` null), or zone `was.id` changed (`was.ownerId`, `was.vertices`: before the change; a
 * zone given to another owner counts as new there). Call inside the transaction that writes the
 * zone: it locks the tree until the commit, so concurrent writes are counted one after the other.
 */
export async function withinZoneLimits(
  q: Queryable,
  limits: ZoneLimits,
  ownerId: string,
  vertices: number,
  was: { id: string; ownerId: string; vertices: number } | null,
): Promise<void> {
  const moved = was === null || was.ownerId !== ownerId;
  if (!moved && vertices <= was.vertices) return; // nothing grows
  await q.query(`${TOP_TREE_SQL} SELECT pg_advisory_xact_lock(hashtext('zones:' || id::text)) FROM up WHERE parent_id IS NULL`, [ownerId]);
  const { rows } = await q.query<{ zones: number; vertices: number }>(
    `${TOP_TREE_SQL} SELECT count(*)::int AS zones, COALESCE(sum(${VERTICES}), 0)::float8 AS vertices
       FROM zones z WHERE z.owner_id IN (SELECT id FROM tree) AND ($2::int8 IS NULL OR z.id <> $2::int8)`,
    [ownerId, was?.id ?? null],
  );
  const other = rows[0]!;
  const max = limits.ZONES_MAX_PER_OWNER;
  if (moved && other.zones + 1 > max) {
    throw conflict(
      `The owner's top-level organisation has ${other.zones} zones, the most it may have (ZONES_MAX_PER_OWNER ${max}); delete one first.`,
      '/ownerId',
    );
  }
  const maxVertices = limits.ZONES_MAX_VERTICES_PER_OWNER;
  if (other.vertices + vertices > maxVertices) {
    throw conflict(
      `The owner's top-level organisation has zones of ${other.vertices} positions; this zone's ${vertices} would pass the most it may have (ZONES_MAX_VERTICES_PER_OWNER ${maxVertices}). Simplify the shape or delete zones first.`,
      '/geometry',
    );
  }
}
