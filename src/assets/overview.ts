// The asset overview (API guide 5, "The asset overview"): one row per visible asset saying who
// needs attention: last seen, last position and the zones it is in, last temperature against its
// specification's range, open alarms and its devices; searchable, filterable, sortable, paged, and
// the same rows as CSV.
//
// Set-based and bounded: one statement picks the assets an answer covers (the first
// OVERVIEW_MAX_ASSETS by name that the search and the asset filters leave; the answer says
// `Overview-Truncated: true` when more matched), one more reads everything else about those
// assets together (the newest record of each kind through the indexes that keep it: asset_activity,
// asset_positions, one reefer record per asset, the open-alert partial index, devices). The
// attention filter, the sort and the page are computed on those rows (at most the bound) here.
//
// Records keep the owner they were stored for (API guide 3): a position, a reading or an alert is
// shown only when stored for an owner the caller sees. lastSeen is the asset's newest record time
// of any kind, as the silence rule keeps it (asset_activity), whoever it was stored for.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type, type Static } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Readable } from 'node:stream';
import { BOUNDS } from '../bounds.js';
import type { Db } from '../db/db.js';
import { readDb } from '../db/reads.js';
import { csvLine, listFormat, MEDIA_TYPES } from '../exports/formats.js';
import { ApiError, badRequest } from '../http/errors.js';
import { DateTime, iso, isUuid, Literals, Nullable, Str, Uuid } from '../http/schemas.js';
import type { Tenancy } from '../tenancy/tenancy.js';

export const OVERVIEW_SORTS = ['name', 'lastSeen', 'openAlarms', 'temperature', 'attention'] as const;
type Sort = (typeof OVERVIEW_SORTS)[number];
export const ATTENTION_REASONS = ['outOfRange', 'openAlarms', 'notSeen'] as const;
type Reason = (typeof ATTENTION_REASONS)[number];
/** The reading shown, where the asset page's chart and the cold-chain report read it. */
const SENSOR = 'supplyAirTemperature';
/** Zone names a row's place names; past them it says how many more. */
const PLACE_ZONES = 3;

const OverviewQuery = Type.Object({
  limit: Type.Optional(
    Type.Integer({ minimum: 1, maximum: BOUNDS.pageSize.value, default: 100, description: `Page size (1-${BOUNDS.pageSize.value})` }),
  ),
  cursor: Type.Optional(Type.String({ maxLength: 512, description: 'Opaque cursor from the Link header' })),
  sort: Type.Optional(Literals(OVERVIEW_SORTS, { description: 'The column the rows are ordered by (default name)' })),
  order: Type.Optional(
    Type.Union([Type.Literal('asc'), Type.Literal('desc')], { description: 'Default: asc for name, desc for the others' }),
  ),
  q: Type.Optional(Str(255, { minLength: 1, description: 'Assets whose name or tags contain this text, in any case' })),
  ownerId: Type.Optional(Uuid),
  disabled: Type.Optional(Type.Boolean({ description: 'Only disabled (true) or enabled (false) assets' })),
  attention: Type.Optional(
    Type.Boolean({ description: 'Only the assets that need attention (true: a reason in `attention`) or those that do not (false)' }),
  ),
  notSeenMinutes: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: 525_600,
      default: 1440,
      description: 'An asset whose newest record is older than this many minutes needs attention (notSeen)',
    }),
  ),
  format: Type.Optional(Literals(['json', 'csv'], { description: 'json (pages, the default) or csv (every row, one file)' })),
});
type OverviewQuery = Static<typeof OverviewQuery>;

export const AssetOverview = Type.Object(
  {
    id: Uuid,
    name: Str(255),
    ownerId: Uuid,
    tags: Nullable(Str(255)),
    disabled: Type.Boolean(),
    lastSeen: Nullable(DateTime),
    position: Nullable(
      Type.Object({
        latitude: Type.Number(),
        longitude: Type.Number(),
        time: DateTime,
        place: Nullable(Type.String({ description: 'The zones it is in, by name (three, then how many more); null: none' })),
      }),
    ),
    temperature: Nullable(
      Type.Object({
        sensor: Type.String({ description: `The reading shown: ${SENSOR} of the newest reefer data record` }),
        value: Type.Number(),
        time: DateTime,
        min: Nullable(Type.Number({ description: "The REEFER specification's minimum (null: none)" })),
        max: Nullable(Type.Number({ description: "The REEFER specification's maximum (null: none)" })),
        inRange: Nullable(Type.Boolean({ description: 'null: the specification gives it no range' })),
      }),
    ),
    openAlarms: Type.Integer({ description: 'ALERT events neither acknowledged nor cleared (GET /events?open=true)' }),
    devices: Type.Object({
      count: Type.Integer(),
      enabled: Type.Integer(),
      lastContact: Nullable(DateTime),
      lastError: Nullable(Type.String()),
      lastErrorAt: Nullable(DateTime),
    }),
    attention: Type.Array(Literals(ATTENTION_REASONS), {
      description: 'Why it needs attention: outOfRange, openAlarms, notSeen; empty: it does not',
    }),
  },
  { title: 'AssetOverview' },
);
export type AssetOverview = Static<typeof AssetOverview>;

/** The CSV's columns: nested members as dotted columns, the reasons as JSON text. */
export const OVERVIEW_COLUMNS = [
  'id',
  'name',
  'ownerId',
  'tags',
  'disabled',
  'lastSeen',
  'position.latitude',
  'position.longitude',
  'position.time',
  'position.place',
  'temperature.sensor',
  'temperature.value',
  'temperature.time',
  'temperature.min',
  'temperature.max',
  'temperature.inRange',
  'openAlarms',
  'devices.count',
  'devices.enabled',
  'devices.lastContact',
  'devices.lastError',
  'devices.lastErrorAt',
  'attention',
];

interface AssetRow {
  id: string;
  name: string;
  owner_id: string;
  tags: string | null;
  disabled: boolean;
}
interface DetailRow {
  id: string;
  last_at: Date | null;
  latitude: number | null;
  longitude: number | null;
  position_at: Date | null;
  zone_names: string[] | null;
  zone_count: number | null;
  reading: string | null;
  reading_at: Date | null;
  supply_range: unknown;
  open_alarms: number;
  device_count: number | null;
  devices_enabled: number | null;
  last_contact: Date | null;
  last_error: string | null;
  last_error_at: Date | null;
}

/** A reading as a number: a finite number, or a string holding one (as the alert engine reads it). */
const numeric = (v: unknown): number | null => {
  if (typeof v === 'number' && Number.isFinite(v)) return v;
  if (typeof v === 'string' && v.trim() !== '' && Number.isFinite(Number(v))) return Number(v);
  return null;
};
/** A specification's range of the sensor ([min, max, ...]; null unbounded), or null without one. */
function rangeOf(raw: unknown): [number | null, number | null] | null {
  if (!Array.isArray(raw)) return null;
  const [min, max] = raw as unknown[];
  return [typeof min === 'number' ? min : null, typeof max === 'number' ? max : null];
}

/** The SQL condition on an owner column for what the caller sees (one parameter, pushed once). */
async function ownerScope(t: Tenancy, params: unknown[], q: Db): Promise<(column: string) => string> {
  const visible = await t.visibleOwners(q);
  if (visible === 'all') return () => 'TRUE';
  params.push(visible);
  const p = `$${params.length}::uuid[]`;
  return (column) => `${column} = ANY(${p})`;
}

/**
 * The assets an answer covers: the visible ones the search and the filters leave, the first
 * `max` by name; `truncated` when more matched.
 */
async function coveredAssets(db: Db, t: Tenancy, query: OverviewQuery, max: number): Promise<{ assets: AssetRow[]; truncated: boolean }> {
  const params: unknown[] = [];
  const scope = await ownerScope(t, params, db);
  const where = [scope('a.owner_id')];
  if (query.ownerId) {
    params.push(query.ownerId);
    where.push(`a.owner_id = $${params.length}::uuid`);
  }
  if (query.disabled !== undefined) {
    params.push(query.disabled);
    where.push(`a.disabled = $${params.length}::boolean`);
  }
  if (query.q) {
    params.push(query.q);
    const p = `lower($${params.length}::text)`;
    where.push(`(strpos(lower(a.name), ${p}) > 0 OR strpos(lower(COALESCE(a.tags, '')), ${p}) > 0)`);
  }
  params.push(max + 1);
  const { rows } = await db.query<AssetRow>(
    `SELECT a.id, a.name, a.owner_id, a.tags, a.disabled FROM assets a WHERE ${where.join(' AND ')}
      ORDER BY a.name, a.id LIMIT $${params.length}`,
    params,
  );
  return { assets: rows.slice(0, max), truncated: rows.length > max };
}

/** Everything else about the covered assets, in one statement. */
async function details(db: Db, t: Tenancy, ids: string[]): Promise<Map<string, DetailRow>> {
  if (ids.length === 0) return new Map();
  const params: unknown[] = [ids];
  const scope = await ownerScope(t, params, db);
  const { rows } = await db.query<DetailRow>(
    `SELECT w.id, act.last_at,
            p.latitude, p.longitude, p.when_created AS position_at,
            CASE WHEN p.asset_id IS NULL THEN NULL ELSE ARRAY(
              SELECT z.name FROM zones z WHERE z.id = ANY(p.zone_ids) AND ${scope('z.owner_id')} ORDER BY z.name LIMIT ${PLACE_ZONES + 1}
            ) END AS zone_names,
            CASE WHEN cardinality(p.zone_ids) > ${PLACE_ZONES} THEN (
              SELECT count(*)::int FROM zones z WHERE z.id = ANY(p.zone_ids) AND ${scope('z.owner_id')}
            ) END AS zone_count,
            r.reading, r.when_created AS reading_at,
            s.ranges -> 'cargo' -> 'sensors' -> '${SENSOR}' AS supply_range,
            COALESCE(al.n, 0)::int AS open_alarms,
            dv.n AS device_count, dv.enabled AS devices_enabled, dv.last_contact, dv.last_error_at,
            (SELECT d.last_error FROM devices d WHERE d.asset_id = w.id AND d.last_error IS NOT NULL
              ORDER BY d.last_error_at DESC NULLS LAST LIMIT 1) AS last_error
       FROM unnest($1::uuid[]) AS w(id)
       LEFT JOIN asset_activity act ON act.asset_id = w.id
       LEFT JOIN asset_positions p ON p.asset_id = w.id AND ${scope('p.owner_id')}
       LEFT JOIN LATERAL (
         SELECT x.when_created, x.owner_id,
                COALESCE(x.data -> '${SENSOR}', x.data -> 'cargo' -> 'sensors' -> '${SENSOR}') #>> '{}' AS reading
           FROM reefer_data x WHERE x.asset_id = w.id ORDER BY x.when_created DESC, x.id DESC LIMIT 1
       ) r ON ${scope('r.owner_id')}
       LEFT JOIN specifications s ON s.asset_id = w.id AND s.type = 'REEFER'
       LEFT JOIN (
         SELECT e.asset_id, count(*) AS n FROM events e
          WHERE e.asset_id = ANY($1::uuid[]) AND e.severity = 'ALERT' AND e.acknowledged_at IS NULL AND e.cleared_at IS NULL
            AND ${scope('e.owner_id')}
          GROUP BY e.asset_id
       ) al ON al.asset_id = w.id
       LEFT JOIN (
         SELECT d.asset_id, count(*)::int AS n, (count(*) FILTER (WHERE NOT d.disabled))::int AS enabled,
                max(d.last_seen_at) AS last_contact, max(d.last_error_at) AS last_error_at
           FROM devices d WHERE d.asset_id = ANY($1::uuid[]) GROUP BY d.asset_id
       ) dv ON dv.asset_id = w.id`,
    params,
  );
  return new Map(rows.map((r) => [r.id, r]));
}

function place(names: string[] | null, count: number | null): string | null {
  if (!names || names.length === 0) return null;
  if (names.length <= PLACE_ZONES) return names.join(', ');
  return `${names.slice(0, PLACE_ZONES).join(', ')} and ${(count ?? names.length) - PLACE_ZONES} more`;
}

function toRow(a: AssetRow, d: DetailRow | undefined, staleBefore: number): AssetOverview {
  const value = numeric(d?.reading ?? null);
  const range = rangeOf(d?.supply_range);
  const temperature =
    value === null || !d?.reading_at
      ? null
      : {
          sensor: SENSOR,
          value,
          time: iso(d.reading_at)!,
          min: range?.[0] ?? null,
          max: range?.[1] ?? null,
          // Inclusive, as the alert engine judges a range.
          inRange: range === null ? null : !((range[0] !== null && value < range[0]) || (range[1] !== null && value > range[1])),
        };
  const openAlarms = d?.open_alarms ?? 0;
  const attention: Reason[] = [];
  if (temperature?.inRange === false) attention.push('outOfRange');
  if (openAlarms > 0) attention.push('openAlarms');
  if (d?.last_at && d.last_at.getTime() < staleBefore) attention.push('notSeen');
  return {
    id: a.id,
    name: a.name,
    ownerId: a.owner_id,
    tags: a.tags,
    disabled: a.disabled,
    lastSeen: iso(d?.last_at),
    position:
      d?.position_at && d.latitude !== null && d.longitude !== null
        ? { latitude: d.latitude, longitude: d.longitude, time: iso(d.position_at)!, place: place(d.zone_names, d.zone_count) }
        : null,
    temperature,
    openAlarms,
    devices: {
      count: d?.device_count ?? 0,
      enabled: d?.devices_enabled ?? 0,
      lastContact: iso(d?.last_contact),
      lastError: d?.last_error ?? null,
      lastErrorAt: iso(d?.last_error_at),
    },
    attention,
  };
}

// ---- order and cursor ----------------------------------------------------------------------------

/** A row's place in an order: its sort value (null last in either direction), name, id. */
interface Position {
  v: number | string | null;
  n: string;
  i: string;
}
interface Cursor extends Position {
  s: Sort;
  o: 'asc' | 'desc';
}
const names = new Intl.Collator('en', { numeric: true });

function positionOf(r: AssetOverview, sort: Sort): Position {
  const v =
    sort === 'name'
      ? r.name
      : sort === 'lastSeen'
        ? r.lastSeen === null
          ? null
          : Date.parse(r.lastSeen)
        : sort === 'openAlarms'
          ? r.openAlarms
          : sort === 'temperature'
            ? (r.temperature?.value ?? null)
            : r.attention.length;
  return { v, n: r.name, i: r.id };
}

/** The order: by the sort value in `order` (nulls last), then by name and id ascending. */
function compare(a: Position, b: Position, sort: Sort, order: 'asc' | 'desc'): number {
  const dir = order === 'asc' ? 1 : -1;
  if (sort === 'name') {
    const c = names.compare(a.n, b.n);
    if (c !== 0) return c * dir;
  } else {
    if (a.v === null || b.v === null) {
      if (a.v !== b.v) return a.v === null ? 1 : -1;
    } else if (a.v !== b.v) return (a.v < b.v ? -1 : 1) * dir;
    const c = names.compare(a.n, b.n);
    if (c !== 0) return c;
  }
  return a.i < b.i ? -1 : a.i > b.i ? 1 : 0;
}

const encodeCursor = (c: Cursor) => Buffer.from(JSON.stringify(c)).toString('base64url');

function decodeCursor(raw: string): Cursor {
  try {
    const c = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as Cursor;
    const valueOk =
      c.v === null || (c.s === 'name' ? typeof c.v === 'string' && c.v.length <= 255 : typeof c.v === 'number' && Number.isFinite(c.v));
    if (
      (OVERVIEW_SORTS as readonly unknown[]).includes(c.s) &&
      (c.o === 'asc' || c.o === 'desc') &&
      valueOk &&
      typeof c.n === 'string' &&
      c.n.length <= 255 &&
      typeof c.i === 'string' &&
      isUuid(c.i)
    ) {
      return { s: c.s, o: c.o, v: c.v, n: c.n, i: c.i };
    }
  } catch {
    /* fall through */
  }
  throw new ApiError('BAD_CURSOR', 'The cursor is not one this service issued.', { field: '/cursor' });
}

// ---- the route -----------------------------------------------------------------------------------

/** The overview's rows for a request, sorted, before paging. */
export async function overviewRows(
  db: Db,
  t: Tenancy,
  query: OverviewQuery,
  opts: { maxAssets: number; sort: Sort; order: 'asc' | 'desc'; now?: number },
): Promise<{ rows: AssetOverview[]; truncated: boolean }> {
  const { assets, truncated } = await coveredAssets(db, t, query, opts.maxAssets);
  const found = await details(
    db,
    t,
    assets.map((a) => a.id),
  );
  const staleBefore = (opts.now ?? Date.now()) - (query.notSeenMinutes ?? 1440) * 60_000;
  let rows = assets.map((a) => toRow(a, found.get(a.id), staleBefore));
  if (query.attention !== undefined) rows = rows.filter((r) => r.attention.length > 0 === query.attention);
  const keyed = rows.map((r) => ({ r, p: positionOf(r, opts.sort) }));
  keyed.sort((x, y) => compare(x.p, y.p, opts.sort, opts.order));
  return { rows: keyed.map((k) => k.r), truncated };
}

async function* csvLines(rows: AssetOverview[]): AsyncGenerator<string> {
  yield csvLine(OVERVIEW_COLUMNS);
  for (const r of rows) {
    yield csvLine(
      OVERVIEW_COLUMNS.map((c) =>
        c.split('.').reduce<unknown>((v, k) => (v !== null && typeof v === 'object' ? (v as Record<string, unknown>)[k] : undefined), r),
      ),
    );
  }
}

export const overviewRoutes: FastifyPluginAsyncTypebox<{ db: Db; maxAssets: number }> = async (app, { db, maxAssets }) => {
  app.get('/assets/overview', {
    schema: {
      tags: ['assets'],
      operationId: 'listAssetOverview',
      summary: 'One row per visible asset: last seen, position, temperature against its range, open alarms, devices',
      description:
        `The first OVERVIEW_MAX_ASSETS (${BOUNDS.overviewAssets.value}) assets by name that q, ownerId and disabled leave ` +
        '(Overview-Truncated: true when more matched), then attention, sorted by sort and order, a page at a time. ' +
        'format=csv or Accept: text/csv: every row, one file.',
      querystring: OverviewQuery,
      produces: ['application/json', MEDIA_TYPES.csv],
      response: { 200: Type.Array(AssetOverview) },
    },
    handler: async (req: FastifyRequest<{ Querystring: OverviewQuery }>, reply: FastifyReply) => {
      const query = req.query;
      const format = listFormat(req, false);
      if (format !== 'json' && format !== 'csv') throw badRequest('The asset overview answers in json or csv.', '/format');
      const cursor = format === 'json' && query.cursor ? decodeCursor(query.cursor) : undefined;
      // A cursor keeps the order it was made with.
      const sort: Sort = cursor?.s ?? query.sort ?? 'name';
      const order = cursor?.o ?? query.order ?? (sort === 'name' ? 'asc' : 'desc');
      const { rows, truncated } = await overviewRows(readDb(req, db), req.tenancy, query, { maxAssets, sort, order });
      reply.header('cache-control', 'no-store');
      if (truncated) reply.header('overview-truncated', 'true');
      if (format === 'csv') {
        return reply
          .header('content-disposition', 'attachment; filename="assets-overview.csv"')
          .type(MEDIA_TYPES.csv)
          .send(Readable.from(csvLines(rows), { objectMode: false }));
      }
      const after = cursor ? rows.filter((r) => compare(positionOf(r, sort), cursor, sort, order) > 0) : rows;
      const limit = query.limit ?? 100;
      const page = after.slice(0, limit);
      const last = page[page.length - 1];
      if (after.length > limit && last) {
        const url = new URL(req.url, req.server.publicUrl);
        url.searchParams.set('cursor', encodeCursor({ s: sort, o: order, ...positionOf(last, sort) }));
        reply.header('Link', `<${req.server.publicUrl}${url.pathname}${url.search}>; rel="next"`);
      }
      return page;
    },
  });
};
