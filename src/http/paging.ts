// Lists (API guide 5): plain JSON arrays, keyset paging on (whenCreated, id) with an opaque
// cursor and a Link rel="next" header. Every row that existed when the first page was read comes
// back exactly once, because the cursor is the exact (microsecond, id) position of the last row.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import { BOUNDS } from '../bounds.js';
import { ApiError } from './errors.js';
import { isInt8Id, isUuid } from './schemas.js';

export const PageQuery = Type.Object({
  limit: Type.Optional(
    Type.Integer({ minimum: 1, maximum: BOUNDS.pageSize.value, default: 100, description: `Page size (1-${BOUNDS.pageSize.value})` }),
  ),
  cursor: Type.Optional(Type.String({ maxLength: 512, description: 'Opaque cursor from the Link header' })),
  order: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')])),
  from: Type.Optional(Type.String({ format: 'date-time', description: 'whenCreated >= from' })),
  to: Type.Optional(Type.String({ format: 'date-time', description: 'whenCreated < to' })),
});
export type PageQuery = Static<typeof PageQuery>;

/** Selected next to the row's columns so the cursor keeps the database's microseconds. */
export const cursorColumn = (col = 'when_created') => `(extract(epoch FROM ${col}) * 1000000)::int8::text AS _cursor_ts`;

interface Cursor {
  t: string; // microseconds since the epoch
  i: string; // id
  o: 'asc' | 'desc';
}

/** The opaque cursor after a row: its exact (microsecond, id) position and the order. */
export const encodeCursor = (t: string, i: string, o: 'asc' | 'desc') =>
  Buffer.from(JSON.stringify({ t, i, o } satisfies Cursor)).toString('base64url');

function decodeCursor(raw: string, idType: 'uuid' | 'int8'): Cursor {
  try {
    const c = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as Cursor;
    // The time must fit int8 and the timestamp range (17 digits: about +-3000 years), the id its
    // column's type: anything else would reach the database as a failing cast (a 500).
    const idOk = typeof c.i === 'string' && (idType === 'uuid' ? isUuid(c.i) : isInt8Id(c.i));
    if (typeof c.t === 'string' && /^-?\d{1,17}$/.test(c.t) && idOk && (c.o === 'asc' || c.o === 'desc')) {
      return c;
    }
  } catch {
    /* fall through */
  }
  throw new ApiError('BAD_CURSOR', 'The cursor is not one this service issued.', { field: '/cursor' });
}

export interface Keyset {
  /** Conditions to AND into the WHERE clause. */
  where: string[];
  orderBy: string;
  /** LIMIT value: one more than the page, to know whether a next page exists. */
  fetch: number;
  limit: number;
  order: 'asc' | 'desc';
}

export function keyset(
  q: PageQuery,
  params: unknown[],
  opts: { defaultOrder: 'asc' | 'desc'; idType: 'uuid' | 'int8'; timeColumn?: string; idColumn?: string },
): Keyset {
  const t = opts.timeColumn ?? 'when_created';
  const id = opts.idColumn ?? 'id';
  const where: string[] = [];
  let order = q.order ?? opts.defaultOrder;
  if (q.from) {
    params.push(q.from);
    where.push(`${t} >= $${params.length}::timestamptz`);
  }
  if (q.to) {
    params.push(q.to);
    where.push(`${t} < $${params.length}::timestamptz`);
  }
  if (q.cursor) {
    const c = decodeCursor(q.cursor, opts.idType);
    order = c.o; // a cursor keeps the order it was made with
    params.push(c.t, c.i);
    const ts = `(timestamptz 'epoch' + $${params.length - 1}::int8 * interval '1 microsecond')`;
    where.push(`(${t}, ${id}) ${order === 'asc' ? '>' : '<'} (${ts}, $${params.length}::${opts.idType})`);
    // Implied by the row comparison, and what lets a partitioned table skip the partitions before
    // the cursor (partition pruning reads plain comparisons of the key, not row comparisons).
    where.push(`${t} ${order === 'asc' ? '>=' : '<='} ${ts}`);
  }
  const dir = order === 'asc' ? 'ASC' : 'DESC';
  const limit = q.limit ?? 100;
  return { where, orderBy: `${t} ${dir}, ${id} ${dir}`, fetch: limit + 1, limit, order };
}

/**
 * Trims the extra row, sets the Link header when there is a next page, and strips _cursor_ts.
 */
export function page<R extends { _cursor_ts?: string; id: string }>(
  req: FastifyRequest,
  reply: FastifyReply,
  ks: Keyset,
  rows: R[],
  baseUrl: string,
  /** Whether more rows follow (pageRows says so when the page's byte budget cut it short). */
  more = rows.length > ks.limit,
): R[] {
  const out = rows.length > ks.limit ? rows.slice(0, ks.limit) : rows;
  const last = out[out.length - 1];
  if (more && last?._cursor_ts !== undefined) {
    const cursor = encodeCursor(last._cursor_ts, String(last.id), ks.order);
    const url = new URL(req.url, baseUrl);
    url.searchParams.set('cursor', cursor);
    reply.header('Link', `<${baseUrl}${url.pathname}${url.search}>; rel="next"`);
  }
  return out;
}

/** What limits a list to the owners a caller sees (a request's Tenancy is one). */
export interface OwnerScope {
  /** The SQL condition on an owner id column; pushes its parameter. */
  where(column: string, params: unknown[]): Promise<string>;
  /** The owner ids it lets through ('all': no limit). */
  visibleOwners?(): Promise<string[] | 'all'>;
}

/**
 * Up to this many visible owners, a list reads each owner's rows by its own index range and merges
 * them (see listPage); past it, one scan with `owner = ANY(...)`.
 */
const PER_OWNER_MAX = 64;

export interface ListSpec {
  /** Columns to return (the row needs `id`). */
  select: string;
  /** Table, or a join, to read from. */
  from: string;
  /** The owner id column the caller's scope filters on, and that scope; null for operator-only lists. */
  owners: { column: string; scope: OwnerScope } | null;
  defaultOrder: 'asc' | 'desc';
  idType: 'uuid' | 'int8';
  timeColumn?: string;
  idColumn?: string;
  /** Adds the resource's own filters: push values onto params, conditions onto where. */
  filters?: (params: unknown[], where: string[]) => void;
  /**
   * SQL for the bytes a row's large part takes as JSON (`octet_length(data::text)`), for lists whose
   * rows carry objects of up to 64 KiB: a page then ends early at BOUNDS.pageBytes (see pageRows).
   */
  sizeOf?: string;
}

/**
 * Drops the rows a page's byte budget leaves out: the database sums `sizeOf` over the page in its
 * order and returns the rows that start within `maxBytes` (the first always), with how many the
 * page had, so the caller knows more follow. 1000 OEM records of 64 KiB each were one 64 MB
 * answer (and ten of them at once, per credential) in a service with a 128 MB heap.
 */
function withinBytes(inner: string, dir: string, maxBytesParam: string): string {
  return `SELECT * FROM (
      SELECT _b.*, sum(_b._size) OVER (ORDER BY _b._k_t ${dir}, _b._k_i ${dir} ROWS UNBOUNDED PRECEDING) - _b._size AS _start,
             count(*) OVER () AS _rows
        FROM (${inner}) _b) _c
     WHERE _c._start < ${maxBytesParam} ORDER BY _c._k_t ${dir}, _c._k_i ${dir}`;
}

/**
 * The rows of one page (with `_cursor_ts`; `fetch` of them, one more than the page when more
 * follow) and its keyset: the tenancy filter, the resource's filters and keyset paging, in the one
 * shape every list and every export shares.
 */
export async function pageRows<R extends { id: string }>(
  db: { query<T>(text: string, params?: unknown[]): Promise<{ rows: T[] }> },
  query: PageQuery,
  spec: ListSpec,
): Promise<{ rows: (R & { _cursor_ts: string })[]; ks: Keyset; more: boolean }> {
  const { rows, ks } = await fetchRows<R>(db, query, spec);
  // The page's byte budget cut it short: more follow from its last row.
  const cut = rows.length > 0 && Number((rows[0] as { _rows?: unknown })._rows ?? rows.length) > rows.length;
  for (const r of rows as Record<string, unknown>[]) {
    for (const helper of HELPER_COLUMNS) delete r[helper];
  }
  return { rows, ks, more: cut || rows.length > ks.limit };
}

/** Columns fetchRows selects for its own use (ordering the merge, the byte budget), never answered. */
const HELPER_COLUMNS = ['_k_t', '_k_i', '_size', '_start', '_rows'];

async function fetchRows<R extends { id: string }>(
  db: { query<T>(text: string, params?: unknown[]): Promise<{ rows: T[] }> },
  query: PageQuery,
  spec: ListSpec,
): Promise<{ rows: (R & { _cursor_ts: string })[]; ks: Keyset }> {
  const params: unknown[] = [];
  const visible = spec.owners ? await spec.owners.scope.visibleOwners?.() : undefined;
  const perOwner = spec.owners !== null && Array.isArray(visible) && visible.length <= PER_OWNER_MAX;
  const where = spec.owners === null || perOwner ? ['TRUE'] : [await spec.owners.scope.where(spec.owners.column, params)];
  spec.filters?.(params, where);
  const time = spec.timeColumn ?? 'when_created';
  const ks = keyset(query, params, {
    defaultOrder: spec.defaultOrder,
    idType: spec.idType,
    timeColumn: time,
    ...(spec.idColumn ? { idColumn: spec.idColumn } : {}),
  });
  if (perOwner && spec.owners) {
    // `owner = ANY(...)` cannot walk the (owner, time, id) index in order (PostgreSQL 15), so a page
    // would read and sort every row of the caller's owners. Instead each owner's page is an index
    // range scan of at most `fetch` rows (in every partition the time range leaves), merged.
    params.push(visible);
    const owners = `$${params.length}::uuid[]`;
    const id = spec.idColumn ?? 'id';
    const dir = ks.order === 'asc' ? 'ASC' : 'DESC';
    const inner = [`${spec.owners.column} = _scope._owner`, ...where.slice(1), ...ks.where].join(' AND ');
    const size = spec.sizeOf ? `, ${spec.sizeOf} AS _size` : '';
    const merged = `SELECT x.* FROM unnest(${owners}) AS _scope(_owner) CROSS JOIN LATERAL (
         SELECT ${spec.select}, ${cursorColumn(time)}, ${time} AS _k_t, ${id} AS _k_i${size} FROM ${spec.from}
          WHERE ${inner} ORDER BY ${ks.orderBy} LIMIT ${ks.fetch}) x
        ORDER BY x._k_t ${dir}, x._k_i ${dir} LIMIT ${ks.fetch}`;
    if (spec.sizeOf) params.push(BOUNDS.pageBytes.value);
    const { rows } = await db.query<R & { _cursor_ts: string; _k_t?: unknown; _k_i?: unknown }>(
      spec.sizeOf ? withinBytes(merged, dir, `$${params.length}`) : merged,
      params,
    );
    return { rows, ks };
  }
  if (spec.sizeOf) {
    const id = spec.idColumn ?? 'id';
    const inner = `SELECT ${spec.select}, ${cursorColumn(time)}, ${time} AS _k_t, ${id} AS _k_i, ${spec.sizeOf} AS _size FROM ${spec.from}
      WHERE ${[...where, ...ks.where].join(' AND ')} ORDER BY ${ks.orderBy} LIMIT ${ks.fetch}`;
    params.push(BOUNDS.pageBytes.value);
    const { rows } = await db.query<R & { _cursor_ts: string; _k_t?: unknown; _k_i?: unknown }>(
      withinBytes(inner, ks.order === 'asc' ? 'ASC' : 'DESC', `$${params.length}`),
      params,
    );
    return { rows, ks };
  }
  const { rows } = await db.query<R & { _cursor_ts: string }>(
    `SELECT ${spec.select}, ${cursorColumn(time)} FROM ${spec.from} WHERE ${[...where, ...ks.where].join(' AND ')} ORDER BY ${ks.orderBy} LIMIT ${ks.fetch}`,
    params,
  );
  return { rows, ks };
}

/** One page of a list (API guide 5), with the Link header when more follow. */
export async function listPage<R extends { id: string }>(
  db: { query<T>(text: string, params?: unknown[]): Promise<{ rows: T[] }> },
  req: FastifyRequest,
  reply: FastifyReply,
  spec: ListSpec,
): Promise<R[]> {
  // A list reads the replica when one serves this request (db/reads.ts).
  const { rows, ks, more } = await pageRows<R>(req.reads ?? db, req.query as PageQuery, spec);
  return page(req, reply, ks, rows, req.server.publicUrl, more);
}
