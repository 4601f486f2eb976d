// Exports of a list (API guide 5, "Exports"): the list's filters and tenancy, no page limit, the
// whole from..to range (at most EXPORT_MAX_DAYS) streamed in the list's keyset order, a page of
// rows at a time with the socket's backpressure, so memory stays flat however many rows go out.
import { pipeline, Readable, Transform } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Db, Queryable } from '../db/db.js';
import { inlineParams } from '../db/sql.js';
import { badRequest } from '../http/errors.js';
import { encodeCursor, type ListSpec, type PageQuery, pageRows } from '../http/paging.js';
import { csvLine, type ListFormat, MEDIA_TYPES } from './formats.js';

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
  const rows = `SELECT ${select} FROM ${copy.table} WHERE ${where.join(' AND ')} ORDER BY when_created ${dir}, id ${dir}`;
  const sql =
    format === 'csv'
      ? `COPY (${rows}) TO STDOUT WITH (FORMAT csv, HEADER true${copy.text.length ? `, FORCE_QUOTE (${copy.text.map((c) => `"${c}"`).join(', ')})` : ''})`
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
  if (format === 'csv') yield csvLine(spec.columns);
  for await (const rows of pagesOf(db, spec.list, query)) {
    let out = '';
    for (const row of rows) {
      const item = spec.toApi(row);
      out += format === 'csv' ? csvLine(spec.columns.map((c) => item[c])) : `${JSON.stringify(item)}\n`;
    }
    yield out;
  }
}

/**
 * Locations as a GeoJSON FeatureCollection: per asset, its positions in time order as a LineString
 * (a Point when it has one), coordinates [longitude, latitude]; properties name the asset, the first
 * and last time and the count.
 */
async function* geojson(db: Queryable, spec: ExportSpec, query: PageQuery): AsyncGenerator<string> {
  const column = spec.assetColumn ?? 'asset_id';
  const params: unknown[] = [];
  const list = spec.list;
  const time = list.timeColumn ?? 'when_created';
  const where = list.owners ? [await list.owners.scope.where(list.owners.column, params)] : ['TRUE'];
  list.filters?.(params, where);
  where.push(`${time} >= $${params.push(query.from)}::timestamptz`, `${time} < $${params.push(query.to)}::timestamptz`);
  const { rows: assets } = await db.query<{ asset: string }>(
    `SELECT DISTINCT ${column} AS asset FROM ${list.from} WHERE ${where.join(' AND ')} ORDER BY 1`,
    params,
  );
  yield '{"type":"FeatureCollection","features":[';
  let firstFeature = true;
  for (const { asset } of assets) {
    const points: string[] = [];
    let count = 0;
    let start = '';
    let end = '';
    let open = false; // the LineString's head is written once a second point is seen
    const one = (q: PageQuery) => pagesOf(db, list, q, (ps, w) => w.push(`${column} = $${ps.push(asset)}::uuid`));
    for await (const rows of one({ ...query, order: 'asc' })) {
      let out = '';
      for (const row of rows) {
        const item = spec.toApi(row) as { longitude: number; latitude: number; whenCreated: string };
        const point = `[${item.longitude},${item.latitude}]`;
        if (count === 0) start = item.whenCreated;
        end = item.whenCreated;
        count++;
        if (!open && count === 1) {
          points.push(point);
          continue;
        }
        if (!open) {
          out += `${firstFeature ? '' : ','}{"type":"Feature","geometry":{"type":"LineString","coordinates":[${points[0]}`;
          firstFeature = false;
          open = true;
        }
        out += `,${point}`;
      }
      if (out) yield out;
    }
    const properties = JSON.stringify({ assetId: asset, start, end, count });
    if (open) yield `]},"properties":${properties}}`;
    else if (count === 1) {
      yield `${firstFeature ? '' : ','}{"type":"Feature","geometry":{"type":"Point","coordinates":${points[0]}},"properties":${properties}}`;
      firstFeature = false;
    }
  }
  yield ']}\n';
}
