// Data records (API guide 1, 4, 5 and 8): locations, sensor data,
// reefer data, genset data and OEM data. Append-only; each belongs to its asset's owner. A create
// takes one object or an array of up to 1000 (all or nothing, the bad index named) and stores the
// whole array, and its event log rows, in one statement.
import { BOUNDS } from '../bounds.js';
import type { FastifyPluginAsync, FastifySchema, RouteHandlerMethod } from 'fastify';
import { Type, type Static, type TObject } from '@sinclair/typebox';
import type { Config } from '../config.js';
import type { Db, Queryable } from '../db/db.js';
import { ApiError, badRequest } from '../http/errors.js';
import { type Filter, filters } from '../http/filters.js';
import { readRoutes } from '../tenancy/read-routes.js';
import type { CopyColumns } from '../exports/export.js';
import { csvTextSql } from '../exports/formats.js';
import { DateTime, iso, Nullable, Str, Uuid, Literals } from '../http/schemas.js';
import { appendToLog, wakeReaders } from '../eventlog/log.js';
import { preparedName, sortIds } from '../db/statement.js';
import type { ObjectType } from '../eventlog/objects.js';
import { sqlIso } from '../db/sql.js';
import type { Tenancy } from '../tenancy/tenancy.js';
import type { PreparedItem, RecordHooks, RecordInsert, StoredItem } from './hooks.js';
import { checkRecordTime } from './time-window.js';

export const MAX_BULK: number = BOUNDS.recordsPerRequest.value;
export const MAX_DATA_BYTES: number = BOUNDS.dataObjectBytes.value;
export const RECORD_BODY_LIMIT: number = BOUNDS.recordBodyBytes.value;

export const round = (n: number | undefined | null, decimals: number) => (n == null ? n : Math.round(n * 10 ** decimals) / 10 ** decimals);

/** Columns every data record has. */
interface Common {
  assetId: string;
  ownerId?: string;
  whenCreated?: string;
}

interface Column<I> {
  col: string;
  pg: string; // array element type for unnest
  value: (item: I) => unknown;
}

export interface ItemContext {
  ownerId: string;
  whenCreated: string;
}

export interface RecordDef<I extends Common = any> {
  type: ObjectType;
  table: string;
  path: string;
  tag: string;
  what: string;
  item: TObject;
  output: TObject;
  columns: Column<I>[];
  /** Row -> REST object. */
  toApi: (row: any) => Record<string, unknown>;
  /** jsonb_build_object(...) over alias i: the push shape (API guide 8). */
  pushPayload: string;
  /** List filters of its own, beside assetId and ownerId. */
  filters?: Record<string, Filter>;
  /** Extra per-item checks after the schema (pointer prefix given). */
  check?: (item: I, at: string) => void;
}

/** A bulk body: one item or a non-empty array of at most 1000 (validated per branch, see envelope.ts). */
export const bulkOf = (item: TObject) =>
  Type.Union([item, Type.Array(item, { minItems: 1, maxItems: MAX_BULK })], {
    'x-bulk': true,
    description: `One record, or an array of 1 to ${MAX_BULK}`,
  });

const commonInput = {
  assetId: Type.String({ format: 'uuid', description: 'Asset generating the record' }),
  ownerId: Type.Optional(Type.String({ format: 'uuid', description: "Must be the asset's owner when given" })),
  whenCreated: Type.Optional(Type.String({ format: 'date-time', description: 'Device time; defaults to the receive time' })),
};
const commonOutput = { id: Type.String({ description: 'int64 as a decimal string' }), assetId: Uuid, ownerId: Uuid, whenCreated: DateTime };

function dataObject(description: string) {
  return Type.Object({}, { additionalProperties: true, description: `${description} (free JSON object, at most 64 KiB)` });
}

function checkData(data: unknown, at: string) {
  if (Buffer.byteLength(JSON.stringify(data)) > MAX_DATA_BYTES) throw badRequest(`${at} must be at most 64 KiB of JSON.`, at);
}

// ---- the five record types ---------------------------------------------------------------------

export const SENSOR_TYPES = [
  'TEMPERATURE',
  'HUMIDITY',
  'X_ACCELERATION',
  'Y_ACCELERATION',
  'Z_ACCELERATION',
  'FUEL_LEVEL',
  'X_PEAK_ACCELERATION',
  'Y_PEAK_ACCELERATION',
  'Z_PEAK_ACCELERATION',
  'BATTERY_VOLTAGE',
  'EXTERNAL_POWER_VOLTAGE',
  'PRESSURE',
] as const;
export const REEFER_CLASSES = ['CR', 'CR0', 'CRTT', 'DK', 'MH', 'SC', 'LD', 'TK', 'TKTT'] as const;

const locationItem = Type.Object({
  ...commonInput,
  latitude: Type.Number({ minimum: -90, maximum: 90, description: 'Degrees (API guide 8: -90..90), 6 decimals kept' }),
  longitude: Type.Number({ minimum: -180, maximum: 180, description: 'Degrees (API guide 8: -180..180), 6 decimals kept' }),
  altitude: Type.Optional(Nullable(Type.Number({ minimum: -99999.99, maximum: 99999.99, description: 'Metres' }))),
  heading: Type.Optional(Nullable(Type.Number({ minimum: -999.9, maximum: 999.9, description: 'Degrees' }))),
  speed: Type.Optional(Nullable(Type.Number({ minimum: -999.999, maximum: 999.999, description: 'km/h' }))),
  zoneId: Type.Optional(Nullable(Str(100, { description: 'Comma separated zone ids; computed when absent' }))),
});
type LocationIn = Static<typeof locationItem>;

export const locations: RecordDef<LocationIn> = {
  type: 'location',
  table: 'locations',
  path: '/locations',
  tag: 'locations',
  what: 'location',
  item: locationItem,
  output: Type.Object(
    {
      ...commonOutput,
      latitude: Type.Number(),
      longitude: Type.Number(),
      altitude: Nullable(Type.Number()),
      heading: Nullable(Type.Number()),
      speed: Nullable(Type.Number()),
      zoneId: Nullable(Type.String()),
    },
    { title: 'Location' },
  ),
  columns: [
    { col: 'latitude', pg: 'float8', value: (i) => round(i.latitude, 6) },
    { col: 'longitude', pg: 'float8', value: (i) => round(i.longitude, 6) },
    { col: 'altitude', pg: 'float8', value: (i) => round(i.altitude, 2) ?? null },
    { col: 'heading', pg: 'float8', value: (i) => round(i.heading, 1) ?? null },
    { col: 'speed', pg: 'float8', value: (i) => round(i.speed, 3) ?? null },
    { col: 'zone_id', pg: 'text', value: (i) => i.zoneId ?? null },
  ],
  toApi: (r) => ({
    id: r.id,
    assetId: r.asset_id,
    ownerId: r.owner_id,
    latitude: r.latitude,
    longitude: r.longitude,
    altitude: r.altitude,
    heading: r.heading,
    speed: r.speed,
    zoneId: r.zone_id,
    whenCreated: iso(r.when_created)!,
  }),
  pushPayload: `jsonb_build_object('id', i.id, 'assetId', i.asset_id, 'ownerId', i.owner_id, 'whenCreated', ${sqlIso('i.when_created')},
    'latitude', i.latitude, 'longitude', i.longitude, 'altitude', i.altitude,
    'speed', i.speed, 'heading', CASE WHEN i.heading IS NULL THEN NULL ELSE ((i.heading::numeric % 360) + 360) % 360 END, 'zoneId', i.zone_id)`,
};

const sensorItem = Type.Object({
  ...commonInput,
  sensorId: Str(36, { minLength: 1 }),
  type: Literals(SENSOR_TYPES),
  value: Type.Union([Type.Number(), Str(255)], { description: 'A number, or text for sensors that report text' }),
  sensorType: Type.Optional(Nullable(Str(36, { description: 'Sensor model class' }))),
});
type SensorIn = Static<typeof sensorItem>;

export const sensorData: RecordDef<SensorIn> = {
  type: 'sensordata',
  table: 'sensor_data',
  path: '/sensor-data',
  tag: 'sensor-data',
  what: 'sensor data',
  item: sensorItem,
  output: Type.Object(
    {
      ...commonOutput,
      sensorId: Type.String(),
      type: Type.String(),
      value: Type.Union([Type.Number(), Type.String(), Type.Null()], {
        description: 'null only for a value JSON cannot carry (a non-finite number stored by an older version)',
      }),
      sensorType: Nullable(Type.String()),
    },
    { title: 'SensorData' },
  ),
  columns: [
    { col: 'sensor_id', pg: 'text', value: (i) => i.sensorId },
    { col: 'type', pg: 'text', value: (i) => i.type },
    { col: 'value_number', pg: 'float8', value: (i) => (typeof i.value === 'number' ? i.value : null) },
    { col: 'value_text', pg: 'text', value: (i) => (typeof i.value === 'string' ? i.value : null) },
    { col: 'sensor_type', pg: 'text', value: (i) => i.sensorType ?? null },
  ],
  toApi: (r) => ({
    id: r.id,
    assetId: r.asset_id,
    ownerId: r.owner_id,
    sensorId: r.sensor_id,
    type: r.type,
    value: r.value_number ?? r.value_text,
    sensorType: r.sensor_type,
    whenCreated: iso(r.when_created)!,
  }),
  // API guide 8: push sensorType = the REST type; value as text; type DECIMAL for numbers, TEXT otherwise.
  pushPayload: `jsonb_build_object('id', i.id, 'assetId', i.asset_id, 'ownerId', i.owner_id, 'sensorId', i.sensor_id,
    'sensorType', i.type, 'whenCreated', ${sqlIso('i.when_created')},
    'value', COALESCE(i.value_number::text, i.value_text), 'type', CASE WHEN i.value_number IS NULL THEN 'TEXT' ELSE 'DECIMAL' END,
    'when_received', (extract(epoch FROM i.when_received) * 1000)::int8)`,
  filters: { type: filters.equals('type', Literals(SENSOR_TYPES)), sensorId: filters.equals('sensor_id', Str(36)) },
};

const reeferItem = Type.Object({
  ...commonInput,
  reeferClass: Type.Optional(Nullable(Literals(REEFER_CLASSES))),
  data: dataObject('Reefer payload'),
  gensetManufacturer: Type.Optional(Nullable(Str(255))),
});
type ReeferIn = Static<typeof reeferItem>;

export const reeferData: RecordDef<ReeferIn> = {
  type: 'reeferdata',
  table: 'reefer_data',
  path: '/reefer-data',
  tag: 'reefer-data',
  what: 'reefer data',
  item: reeferItem,
  output: Type.Object(
    {
      ...commonOutput,
      reeferClass: Nullable(Type.String()),
      gensetManufacturer: Nullable(Type.String()),
      data: Type.Object({}, { additionalProperties: true }),
    },
    { title: 'ReeferData' },
  ),
  columns: [
    { col: 'reefer_class', pg: 'text', value: (i) => i.reeferClass ?? null },
    { col: 'genset_manufacturer', pg: 'text', value: (i) => i.gensetManufacturer ?? null },
    { col: 'data', pg: 'jsonb', value: (i) => JSON.stringify(i.data) },
  ],
  toApi: (r) => ({
    id: r.id,
    assetId: r.asset_id,
    ownerId: r.owner_id,
    reeferClass: r.reefer_class,
    gensetManufacturer: r.genset_manufacturer,
    data: r.data,
    whenCreated: iso(r.when_created)!,
  }),
  pushPayload: `jsonb_build_object('id', i.id, 'assetId', i.asset_id, 'ownerId', i.owner_id, 'whenCreated', ${sqlIso('i.when_created')},
    'reeferClass', i.reefer_class, 'data', i.data)`,
  filters: { reeferClass: filters.equals('reefer_class', Literals(REEFER_CLASSES)) },
  check: (i, at) => checkData(i.data, `${at}/data`),
};

const gensetItem = Type.Object({
  ...commonInput,
  gensetType: Str(64, { minLength: 1 }),
  data: dataObject('Genset payload'),
  boxId: Type.Optional(Nullable(Str(36))),
});
type GensetIn = Static<typeof gensetItem>;

export const gensetData: RecordDef<GensetIn> = {
  type: 'gensetdata',
  table: 'genset_data',
  path: '/genset-data',
  tag: 'genset-data',
  what: 'genset data',
  item: gensetItem,
  output: Type.Object(
    { ...commonOutput, gensetType: Type.String(), boxId: Nullable(Type.String()), data: Type.Object({}, { additionalProperties: true }) },
    { title: 'GensetData' },
  ),
  columns: [
    { col: 'genset_type', pg: 'text', value: (i) => i.gensetType },
    { col: 'box_id', pg: 'text', value: (i) => i.boxId ?? null },
    { col: 'data', pg: 'jsonb', value: (i) => JSON.stringify(i.data) },
  ],
  toApi: (r) => ({
    id: r.id,
    assetId: r.asset_id,
    ownerId: r.owner_id,
    gensetType: r.genset_type,
    boxId: r.box_id,
    data: r.data,
    whenCreated: iso(r.when_created)!,
  }),
  pushPayload: `jsonb_build_object('id', i.id, 'assetId', i.asset_id, 'ownerId', i.owner_id, 'whenCreated', ${sqlIso('i.when_created')},
    'gensetType', i.genset_type, 'data', i.data, 'boxId', i.box_id)`,
  check: (i, at) => checkData(i.data, `${at}/data`),
};

const oemItem = Type.Object({
  ...commonInput,
  payloadType: Type.Integer({ minimum: -2147483648, maximum: 2147483647, description: 'int32' }),
  data: dataObject('OEM payload'),
  boxId: Type.Optional(Nullable(Str(36))),
});
type OemIn = Static<typeof oemItem>;

export const oemData: RecordDef<OemIn> = {
  type: 'oemdata',
  table: 'oem_data',
  path: '/oem-data',
  tag: 'oem-data',
  what: 'OEM data',
  item: oemItem,
  output: Type.Object(
    {
      ...commonOutput,
      payloadType: Type.Integer(),
      boxId: Nullable(Type.String()),
      data: Type.Object({}, { additionalProperties: true }),
      whenReceived: DateTime,
    },
    { title: 'OemData' },
  ),
  columns: [
    { col: 'payload_type', pg: 'int4', value: (i) => i.payloadType },
    { col: 'box_id', pg: 'text', value: (i) => i.boxId ?? null },
    { col: 'data', pg: 'jsonb', value: (i) => JSON.stringify(i.data) },
  ],
  toApi: (r) => ({
    id: r.id,
    assetId: r.asset_id,
    ownerId: r.owner_id,
    payloadType: r.payload_type,
    boxId: r.box_id,
    data: r.data,
    whenCreated: iso(r.when_created)!,
    whenReceived: iso(r.when_received)!,
  }),
  pushPayload: `jsonb_build_object('id', i.id, 'assetId', i.asset_id, 'ownerId', i.owner_id, 'whenCreated', ${sqlIso('i.when_created')},
    'payloadType', i.payload_type, 'data', i.data, 'boxId', i.box_id, 'when_received', (extract(epoch FROM i.when_received) * 1000)::int8)`,
  filters: { payloadType: filters.equals('payload_type', Type.Integer()) },
  check: (i, at) => checkData(i.data, `${at}/data`),
};

export const RECORD_DEFS = [locations, sensorData, reeferData, gensetData, oemData] as RecordDef[];

/**
 * A record type's list columns as SQL, for PostgreSQL's COPY export (exports/export.ts): as CSV
 * text, and as the JSON values the list shows (ids as text, times as ISO text to the second).
 */
export function copyColumns(def: RecordDef): CopyColumns {
  const csv: Record<string, string> = {};
  const json: Record<string, string> = {};
  const texts = new Set(def.columns.filter((c) => c.pg === 'text').map((c) => c.col));
  const text: string[] = [];
  for (const name of Object.keys(def.output.properties)) {
    const column = name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
    const expr = name === 'id' ? 'id::text' : name === 'whenCreated' || name === 'whenReceived' ? sqlIso(column) : column;
    // Text a device or a caller wrote is neutralised as every CSV cell is (formats.ts csvField).
    csv[name] = texts.has(column) ? csvTextSql(expr) : expr;
    if (texts.has(column)) text.push(name);
    json[name] = expr;
  }
  if (def.type === 'sensordata') {
    // A number, or text for sensors that report text.
    csv.value = `COALESCE(value_number::text, ${csvTextSql('value_text')})`;
    text.push('value');
    json.value = 'COALESCE(to_jsonb(value_number), to_jsonb(value_text))';
  }
  return { table: def.table, csv, json, text };
}

// ---- storing -----------------------------------------------------------------------------------

/**
 * Resolves each item's asset (visible to the caller, else 404 naming the index), checks ownerId and
 * the time rules, and fills ownerId / whenCreated. The same read takes the owners' ancestry for the
 * event log and the new rows' ids: one round trip, outside any transaction.
 */
async function prepare<I extends Common>(q: Queryable, t: Tenancy, cfg: Config, def: RecordDef<I>, items: I[], bulk: boolean) {
  const params: unknown[] = [[...new Set(items.map((i) => i.assetId))], def.table, items.length];
  const cond = await t.where('owner_id', params, q);
  const text = `WITH RECURSIVE a AS (
       SELECT id, owner_id FROM assets WHERE id = ANY($1::uuid[]) AND ${cond}
     ), anc(owner_id, ancestor, depth) AS (
       SELECT DISTINCT owner_id, owner_id, 0 FROM a
       UNION ALL
       SELECT anc.owner_id, o.parent_id, anc.depth + 1 FROM anc JOIN owners o ON o.id = anc.ancestor
        WHERE o.parent_id IS NOT NULL AND anc.depth < 100
     ), paths AS (
       SELECT owner_id, array_agg(ancestor ORDER BY depth)::text AS path FROM anc GROUP BY owner_id
     ), ids AS MATERIALIZED (
       SELECT string_agg(nextval(pg_get_serial_sequence($2, 'id'))::text, ',' ORDER BY g) AS ids FROM generate_series(1, $3::int) g
     )
     -- The ids once, on the first row (a bulk's 1000 ids on each of its assets' rows cost more to parse than the store).
     SELECT a.id, a.owner_id, p.path, CASE WHEN row_number() OVER () = 1 THEN (SELECT ids FROM ids) END AS ids
       FROM a JOIN paths p USING (owner_id)`;
  const { rows } = await q.query<{ id: string; owner_id: string; path: string; ids: string | null }>(text, params, preparedName(text));
  const owners = new Map(rows.map((r) => [r.id, r.owner_id]));
  const now = Date.now();
  const nowIso = new Date(now).toISOString();
  const prepared = items.map((item, index) => {
    const at = bulk ? `/${index}` : '';
    const ownerId = owners.get(item.assetId);
    if (!ownerId) throw new ApiError('NOT_FOUND', `asset ${item.assetId} not found`, { field: `${at}/assetId` });
    if (item.ownerId !== undefined && item.ownerId !== ownerId) {
      throw badRequest(`${at}/ownerId must be the asset's owner (${ownerId}) or absent.`, `${at}/ownerId`);
    }
    // The one time window (time-window.ts): a time outside it would make partitions (docs/DESIGN.md, "Storage").
    if (item.whenCreated !== undefined) checkRecordTime(cfg, item.whenCreated, `${at}/whenCreated`, now);
    def.check?.(item, at);
    return { item, at, ownerId, whenCreated: item.whenCreated ?? nowIso };
  });
  const paths = new Map(rows.map((r) => [r.owner_id, r.path]));
  return { prepared, ids: sortIds(rows[0]!.ids!.split(',')), paths: { owners: [...paths.keys()], paths: [...paths.values()] } };
}

export type Prepared<I> = PreparedItem<I>[];

/**
 * The records' insert with their event log rows, as the CTE `i` of the store's statement (the
 * push payloads read it as `i`); the final query returns the stored rows in input order.
 */
export function insertRecords<I extends Common>(def: RecordDef<I>, paths: { owners: string[]; paths: string[] }): RecordInsert {
  return (stmt, rows) => {
    const cols = ['id', 'asset_id', 'owner_id', 'when_created', ...def.columns.map((c) => c.col)];
    const arrays = stmt.arrays<StoredItem<I>>(rows, [
      [(r) => r.id, 'int8'],
      [(r) => r.item.assetId, 'uuid'],
      [(r) => r.ownerId, 'uuid'],
      [(r) => r.whenCreated, 'timestamptz'],
      ...def.columns.map((c): [(r: StoredItem<I>) => unknown, string] => [(r) => c.value(r.item), c.pg]),
    ]);
    const records = stmt.with(
      `INSERT INTO ${def.table} (${cols.join(', ')}) OVERRIDING SYSTEM VALUE SELECT * FROM unnest(${arrays}) RETURNING *`,
      'i',
    );
    const notify = appendToLog(stmt, def.type, records, def.pushPayload, paths);
    // Ids ascend in input order (allocated so), so ORDER BY id gives input order.
    return { records, final: `SELECT i.*, (SELECT count(*) FROM ${notify})::int AS _notified FROM i ORDER BY id` };
  };
}

/**
 * Stores records for `t` (a caller, or a device acting for its asset's owner): the one store every
 * way in uses (the REST routes, the device adapters), with every hook. All or nothing; returns the
 * stored rows in input order.
 */
export async function storeRecords<I extends Common>(
  db: Db,
  t: Tenancy,
  cfg: Config,
  hooks: RecordHooks,
  def: RecordDef<I>,
  items: I[],
  bulk: boolean,
): Promise<any[]> {
  const { prepared, ids, paths } = await prepare(db, t, cfg, def, items, bulk);
  const rows = await hooks.store(db, def.type, prepared, ids, insertRecords(def, paths), paths).catch(async (e) => {
    // An asset deleted between the read and the write: the same 404 naming the index as the
    // read gives (nothing was stored: the statement failed whole).
    if ((e as { code?: string }).code === '23503') await prepare(db, t, cfg, def, items, bulk);
    throw e;
  });
  wakeReaders(db);
  return rows;
}

// ---- routes ------------------------------------------------------------------------------------

export const recordRoutes: FastifyPluginAsync<{ db: Db; cfg: Config; hooks: RecordHooks }> = async (app, { db, cfg, hooks }) => {
  for (const def of RECORD_DEFS) {
    const tags = [def.tag];
    // Generic over the five record types: the body was validated against bulkOf(def.item), one
    // record or an array of them; each has at least the common members.
    const create: RouteHandlerMethod = async (req, reply) => {
      const body = req.body as Common | Common[];
      const bulk = Array.isArray(body);
      const items = bulk ? body : [body];
      const out = (await storeRecords(db, req.tenancy, cfg, hooks, def, items, bulk)).map(def.toApi);
      reply.code(201);
      if (!bulk) reply.header('Location', `${req.server.publicUrl}/api/v1${def.path}/${out[0]!.id}`);
      return bulk ? out : out[0];
    };
    const schema: FastifySchema = {
      tags,
      summary: `Store ${def.what}: one object, or an array of up to ${MAX_BULK} (all or nothing)`,
      body: bulkOf(def.item),
      response: { 201: Type.Union([def.output, Type.Array(def.output)]) },
    };
    app.route({ method: 'POST', url: def.path, bodyLimit: RECORD_BODY_LIMIT, schema, handler: create });

    readRoutes(app, db, {
      path: def.path,
      tags,
      what: def.what,
      listSummary: `List ${def.what}, newest first by default`,
      item: def.output,
      toApi: def.toApi,
      select: '*',
      from: def.table,
      ownerColumn: 'owner_id',
      idType: 'int8',
      defaultOrder: 'desc',
      filters: { assetId: filters.anyUuid('asset_id'), ownerId: filters.uuid('owner_id'), ...def.filters },
      // Reefer, genset and OEM records carry a `data` object of up to 64 KiB: their pages are bounded in bytes too.
      ...(def.columns.some((c) => c.col === 'data') ? { sizeOf: 'COALESCE(octet_length(data::text), 0)' } : {}),
      export: { name: def.path.slice(1), geo: def.type === 'location', copy: copyColumns(def) },
    });
  }
};
