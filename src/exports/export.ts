// Exports of a list (API guide 5, "Exports"): the list's filters and tenancy, no page limit, the
// whole from..to range (at most EXPORT_MAX_DAYS) streamed in the list's keyset order, a page of
// rows at a time with the socket's backpressure, so memory stays flat however many rows go out.
// A row with an `assetId` also carries its asset's `assetName` (next to it), read once per page of
// rows (PostgreSQL's COPY: in the same statement, joined), never once per row.
import { pipeline, Readable, Transform } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Db, Queryable } from '../db/db.js';
import { inlineParams } from '../db/sql.js';
import { badRequest } from '../http/errors.js';
import { encodeCursor, type ListSpec, type PageQuery, pageRows } from '../http/paging.js';
import { antimeridianCrossing, csvLine, csvTextSql, type ListFormat, MEDIA_TYPES } from './formats.js';

/** Rows per query: large enough that a page's round trip is noise, small enough to stay flat. */
const PAGE_ROWS = 5000;
const DAY_MS = 86_400_000;

type Row = { id: string; _cursor_ts: string };

/** Every row of the list in order, a page at a time (the rows keep their `_cursor_ts`). */
async function* pagesOf(db: Queryable, spec: ListSpec, query: PageQuery, extra?: (params: unknown[], where: string[]) => void) {
  let cursor: string | undefined;
  const list: ListSpec = {
    ...spec,
    defaultOrder: 'asc',
    filters: (params, where) => {
      spec.filters?.(params, where);
      extra?.(params, where);
    },
  };
  for (;;) {
    const { rows, ks, more } = await pageRows<Row>(db, { ...query, limit: PAGE_ROWS, ...(cursor ? { cursor } : {}) }, list);
    const page = rows.length > ks.limit ? rows.slice(0, ks.limit) : rows;
    if (page.length) yield page;
    if (!more) return;
    const last = page[page.length - 1]!;
    cursor = encodeCursor(last._cursor_ts, String(last.id), ks.order);
  }
}

/** SQL expressions of a list's columns for PostgreSQL's COPY: as CSV text, and as JSON values. */
export interface CopyColumns {
  /** The table the rows come from (its time and id columns: when_created, id). */
  table: string;
  csv: Record<string, string>;
  json: Record<string, string>;
  /** The columns of text (csv: neutralised by formats.ts csvTextSql), quoted by COPY. */
  text: string[];
}

export interface ExportSpec {
  list: ListSpec;
  /** On PostgreSQL, the export is PostgreSQL's own COPY of these columns (else keyset pages). */
  copy?: CopyColumns;
  /** The API shape of a row. */
  toApi: (row: any) => Record<string, unknown>;
  /** The CSV columns: the API shape's field names, in its schema's order. */
  columns: string[];
  /** What the file is called (`locations` gives locations.csv). */
  name: string;
  /** For GeoJSON (locations): the asset column. */
  assetColumn?: string;
}

/** Whether the export adds `assetName`: its rows have an `assetId` and no name of their own. */
const addsName = (columns: string[]) => columns.includes('assetId') && !columns.includes('assetName');

/** The export's columns: the list's, with `assetName` after `assetId` where it adds one. */
function exportColumns(columns: string[]): string[] {
  if (!addsName(columns)) return columns;
  const at = columns.indexOf('assetId') + 1;
  return [...columns.slice(0, at), 'assetName', ...columns.slice(at)];
}

/**
 * The names of the assets of a page of items, added to `names` (id -> name; null for an asset no
 * longer there): one query for the page's assets not yet known.
 */
async function readNames(db: Queryable, items: Record<string, unknown>[], names: Map<string, string | null>): Promise<void> {
  const missing = [...new Set(items.map((i) => i.assetId).filter((id): id is string => typeof id === 'string' && !names.has(id)))];
  if (!missing.length) return;
  const { rows } = await db.query<{ id: string; name: string }>('SELECT id::text AS id, name FROM assets WHERE id = ANY($1::uuid[])', [
    missing,
  ]);
  for (const id of missing) names.set(id, null);
  for (const r of rows) names.set(r.id, r.name);
}

/** An item with `assetName` after its `assetId`. */
function withName(item: Record<string, unknown>, names: Map<string, string | null>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(item)) {
    out[k] = v;
    if (k === 'assetId') out.assetName = typeof v === 'string' ? (names.get(v) ?? null) : null;
  }
  return out;
}

/** The export's time range: `to` defaults to now, `from` to EXPORT_MAX_DAYS before it; longer is a 400. */
function range(query: PageQuery, maxDays: number): { from: string; to: string } {
  const to = query.to ? Date.parse(query.to) : Date.now();
  const from = query.from ? Date.parse(query.from) : to - maxDays * DAY_MS;
  if (from > to) throw badRequest('from must not be after to.', '/from');
  if (to - from > maxDays * DAY_MS) {
    throw badRequest(`An export covers at most ${maxDays} days (EXPORT_MAX_DAYS); narrow from..to.`, '/from');
  }
  return { from: new Date(from).toISOString(), to: new Date(to).toISOString() };
}

/** Answers the list as a streamed file in `format` (not json). */
export async function sendExport(
  db: Db,
  req: FastifyRequest,
  reply: FastifyReply,
  spec: ExportSpec,
  format: Exclude<ListFormat, 'json'>,
  maxDays: number,
): Promise<FastifyReply> {
  const raw = req.query as PageQuery;
  const query: PageQuery = { ...range(raw, maxDays), ...(raw.order ? { order: raw.order } : {}) };
  if (format !== 'geojson' && spec.copy && db.copyOut) return copied(db, reply, spec, spec.copy, query, format);
  const lines = format === 'geojson' ? geojson(db, spec, query) : records(db, spec, query, format);
  return fileReply(reply, spec, format).send(Readable.from(lines, { objectMode: false }));
}

/** The file's headers. */
function fileReply(reply: FastifyReply, spec: ExportSpec, format: Exclude<ListFormat, 'json'>): FastifyReply {
  const extension = format === 'ndjson' ? 'ndjson' : format === 'geojson' ? 'geojson' : 'csv';
  return reply
    .type(MEDIA_TYPES[format])
    .header('content-disposition', `attachment; filename="${spec.name}.${extension}"`)
    .header('cache-control', 'no-store');
}

/**
 * PostgreSQL: the list's rows as PostgreSQL writes them with `COPY ... TO STDOUT`, streamed to the
 * client as they come (the socket's backpressure holds the server back). CSV is COPY's own (RFC
 * 4180 quoting, a header of the JSON field names; text columns quoted, formulas neutralised by
 * formats.ts csvTextSql, as csvField does elsewhere); NDJSON is each row's JSON object, written
 * through COPY's CSV with a quote and a delimiter that JSON text never holds raw, so it comes out
 * untouched. The filters and tenancy are the list's, their values inlined (COPY takes no parameters).
 */
async function copied(
  db: Db,
  reply: FastifyReply,
  spec: ExportSpec,
  copy: CopyColumns,
  query: PageQuery,
  format: 'csv' | 'ndjson',
): Promise<FastifyReply> {
  const list = spec.list;
  const params: unknown[] = [];
  const where = list.owners ? [await list.owners.scope.where(list.owners.column, params)] : ['TRUE'];
  list.filters?.(params, where);
  where.push(`when_created >= $${params.push(query.from)}::timestamptz`, `when_created < $${params.push(query.to)}::timestamptz`);
  const dir = query.order === 'desc' ? 'DESC' : 'ASC';
  const exprs = format === 'csv' ? copy.csv : copy.json;
  const select = spec.columns.map((c) => `${exprs[c]} AS "${c}"`).join(', ');
  const source = `FROM ${copy.table} WHERE ${where.join(' AND ')}`;
  const columns = exportColumns(spec.columns);
  // The asset's name joined to the rows in the statement (each asset looked up once, not per row),
  // in the rows' own order.
  const name = format === 'csv' ? csvTextSql('a.name') : 'a.name';
  const rows = addsName(spec.columns)
    ? `SELECT ${columns.map((c) => (c === 'assetName' ? `${name} AS "assetName"` : `r."${c}"`)).join(', ')}
         FROM (SELECT ${select}, when_created AS _t, id AS _i ${source}) r LEFT JOIN assets a ON a.id = r."assetId"
        ORDER BY r._t ${dir}, r._i ${dir}`
    : `SELECT ${select} ${source} ORDER BY when_created ${dir}, id ${dir}`;
  const quoted = [...copy.text, ...(addsName(spec.columns) ? ['assetName'] : [])];
  const sql =
    format === 'csv'
      ? `COPY (${rows}) TO STDOUT WITH (FORMAT csv, HEADER true${quoted.length ? `, FORCE_QUOTE (${quoted.map((c) => `"${c}"`).join(', ')})` : ''})`
      : `COPY (SELECT row_to_json(x)::text FROM (${rows}) x) TO STDOUT WITH (FORMAT csv, QUOTE E'\\x01', DELIMITER E'\\x02')`;
  const stream = await db.copyOut!(inlineParams(sql, params));
  // COPY hands over a row at a time, each a slice of the socket's read (which it keeps alive):
  // gathered into 64 KiB buffers, the response writes a few large chunks and memory stays flat.
  return fileReply(reply, spec, format).send(gathered(stream));
}

/** `source` in chunks of about `size` bytes (copied out of the small ones); either side's end or error ends both. */
function gathered(source: Readable, size = 64 * 1024): Readable {
  let parts: Buffer[] = [];
  let bytes = 0;
  const out = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      parts.push(chunk);
      bytes += chunk.length;
      if (bytes < size) return done();
      const whole = Buffer.concat(parts, bytes);
      parts = [];
      bytes = 0;
      done(null, whole);
    },
    flush(done) {
      done(null, bytes ? Buffer.concat(parts, bytes) : undefined);
    },
  });
  pipeline(source, out, () => {});
  return out;
}

async function* records(db: Queryable, spec: ExportSpec, query: PageQuery, format: 'csv' | 'ndjson'): AsyncGenerator<string> {
  const columns = exportColumns(spec.columns);
  const named = addsName(spec.columns);
  const names = new Map<string, string | null>();
  if (format === 'csv') yield csvLine(columns);
  for await (const rows of pagesOf(db, spec.list, query)) {
    const items = rows.map(spec.toApi);
    if (named) await readNames(db, items, names);
    let out = '';
    for (const plain of items) {
      const item = named ? withName(plain, names) : plain;
      out += format === 'csv' ? csvLine(columns.map((c) => item[c])) : `${JSON.stringify(item)}\n`;
    }
    yield out;
  }
}

/**
 * Locations as a GeoJSON FeatureCollection: per asset, its positions in time order as a LineString
 * (a Point when it has one), coordinates [longitude, latitude]; properties name the asset (id and
 * name), the first and last time and the count. A track that crosses the antimeridian is a
 * MultiLineString cut there (RFC 7946 3.1.9: at the interpolated crossing, on both sides), not a
 * line drawn the long way round the world: which assets' tracks cross is known from the query that
 * lists the assets, so each feature is still written as its positions are read.
 */
async function* geojson(db: Queryable, spec: ExportSpec, query: PageQuery): AsyncGenerator<string> {
  const column = spec.assetColumn ?? 'asset_id';
  const params: unknown[] = [];
  const list = spec.list;
  const time = list.timeColumn ?? 'when_created';
  const where = list.owners ? [await list.owners.scope.where(list.owners.column, params)] : ['TRUE'];
  list.filters?.(params, where);
  where.push(`${time} >= $${params.push(query.from)}::timestamptz`, `${time} < $${params.push(query.to)}::timestamptz`);
  const { rows: assets } = await db.query<{ asset: string; name: string | null; crosses: boolean | null }>(
    `SELECT g.asset, a.name, g.crosses
       FROM (SELECT asset, bool_or(abs(longitude - previous) > 180) AS crosses
               FROM (SELECT ${column} AS asset, longitude,
                            lag(longitude) OVER (PARTITION BY ${column} ORDER BY ${time}, id) AS previous
                       FROM ${list.from} WHERE ${where.join(' AND ')}) steps
              GROUP BY asset) g
       LEFT JOIN assets a ON a.id = g.asset
      ORDER BY 1`,
    params,
  );
  yield '{"type":"FeatureCollection","features":[';
  let firstFeature = true;
  for (const { asset, name, crosses } of assets) {
    const multi = crosses === true;
    let first: { longitude: number; latitude: number } | undefined;
    let previous: { longitude: number; latitude: number } | undefined;
    let count = 0;
    let start = '';
    let end = '';
    let open = false; // the geometry's head is written once a second point is seen
    const one = (q: PageQuery) => pagesOf(db, list, q, (ps, w) => w.push(`${column} = $${ps.push(asset)}::uuid`));
    for await (const rows of one({ ...query, order: 'asc' })) {
      let out = '';
      for (const row of rows) {
        const item = spec.toApi(row) as { longitude: number; latitude: number; whenCreated: string };
        if (count === 0) start = item.whenCreated;
        end = item.whenCreated;
        count++;
        if (!first) {
          first = item;
          previous = item;
          continue;
        }
        if (!open) {
          out += `${firstFeature ? '' : ','}{"type":"Feature","geometry":{"type":"${multi ? 'MultiLineString' : 'LineString'}","coordinates":${multi ? '[[' : '['}[${first.longitude},${first.latitude}]`;
          firstFeature = false;
          open = true;
        }
        const cut = multi ? antimeridianCrossing(previous!, item) : null;
        if (cut) out += `,[${cut.edge},${cut.latitude}]],[[${-cut.edge},${cut.latitude}]`;
        out += `,[${item.longitude},${item.latitude}]`;
        previous = item;
      }
      if (out) yield out;
    }
    const properties = JSON.stringify({ assetId: asset, assetName: name, start, end, count });
    if (open) yield `${multi ? ']]' : ']'}},"properties":${properties}}`;
    else if (first) {
      yield `${firstFeature ? '' : ','}{"type":"Feature","geometry":{"type":"Point","coordinates":[${first.longitude},${first.latitude}]},"properties":${properties}}`;
      firstFeature = false;
    }
  }
  yield ']}\n';
}
