// The read routes owned resources share (API guide 5): a list with keyset paging and the filters
// the resource declares, and a get by id, both limited to the owners the caller sees (404 for one
// it does not).
import type { FastifyInstance, FastifySchema, RouteHandlerMethod } from 'fastify';
import { type Static, type TObject, Type } from '@sinclair/typebox';
import type { Db } from '../db/db.js';
import { readDb } from '../db/reads.js';
import { notFound } from '../http/errors.js';
import { applyFilters, type Filter, listQuery } from '../http/filters.js';
import { type ListSpec, listPage } from '../http/paging.js';
import { type CopyColumns, type ExportSpec, sendExport } from '../exports/export.js';
import { FormatParam, listFormat, MEDIA_TYPES } from '../exports/formats.js';
import { IdParam, isInt8Id, isUuid } from '../http/schemas.js';

export interface ReadSpec<T extends TObject, R> {
  /** The collection's path under /api/v1 (`/events`); the get is `${path}/:id`. */
  path: string;
  tags: string[];
  /** What one is called in summaries and 404s (`event`, `sensor data`). */
  what: string;
  listSummary: string;
  item: T;
  toApi: (row: R) => Static<T>;
  select: string;
  from: string;
  ownerColumn: string;
  idType: 'int8' | 'uuid';
  idColumn?: string;
  timeColumn?: string;
  /** SQL for the JSON bytes of a row's large part: its pages end early at BOUNDS.pageBytes (paging.ts). */
  sizeOf?: string;
  defaultOrder: 'asc' | 'desc';
  filters: Record<string, Filter>;
  /**
   * The get by id answers more than a list item: `item` (the list item's schema and more) and what
   * `more` reads for the row (commands: their attempts).
   */
  detail?: { item: TObject; more: (row: R) => Promise<Record<string, unknown>> };
  /**
   * The list exports too (CSV, NDJSON; GeoJSON with `geo`), as `name`.csv and so on; with `copy`,
   * by PostgreSQL's COPY on PostgreSQL.
   */
  export?: { name: string; geo?: boolean; copy?: CopyColumns };
}

/** Registers `GET path` (the list) and `GET path/:id` (one) of an owned resource. */
export function readRoutes<T extends TObject, R extends { id: string }>(app: FastifyInstance, db: Db, spec: ReadSpec<T, R>): void {
  // Generic over the item schema, so the handlers are typed by hand: the query and the params were
  // validated against the schemas given with them, and the answers are checked when sent.
  const columns = Object.keys(spec.item.properties);
  const list: RouteHandlerMethod = async (req, reply) => {
    const listSpec: ListSpec = {
      select: spec.select,
      from: spec.from,
      owners: { column: spec.ownerColumn, scope: req.tenancy },
      defaultOrder: spec.defaultOrder,
      idType: spec.idType,
      ...(spec.idColumn ? { idColumn: spec.idColumn } : {}),
      ...(spec.timeColumn ? { timeColumn: spec.timeColumn } : {}),
      ...(spec.sizeOf ? { sizeOf: spec.sizeOf } : {}),
      filters: (params, where) => applyFilters(spec.filters, req.query as Record<string, unknown>, params, where),
    };
    if (spec.export) {
      const format = listFormat(req, spec.export.geo === true);
      if (format !== 'json') {
        const exported: ExportSpec = {
          list: listSpec,
          toApi: spec.toApi as ExportSpec['toApi'],
          columns,
          name: spec.export.name,
          ...(spec.export.copy ? { copy: spec.export.copy } : {}),
        };
        return sendExport(readDb(req, db), req, reply, exported, format, req.server.services.cfg.EXPORT_MAX_DAYS);
      }
    }
    const rows = await listPage<R>(db, req, reply, listSpec);
    return rows.map(spec.toApi);
  };
  const one: RouteHandlerMethod = async (req) => {
    const { id } = req.params as Static<typeof IdParam>;
    if (!(spec.idType === 'int8' ? isInt8Id(id) : isUuid(id))) throw notFound(spec.what);
    const row = await req.tenancy.one<R>(
      db,
      { select: spec.select, from: spec.from, ownerColumn: spec.ownerColumn, idColumn: spec.idColumn ?? 'id', idType: spec.idType },
      id,
      spec.what,
    );
    return spec.detail ? { ...spec.toApi(row), ...(await spec.detail.more(row)) } : spec.toApi(row);
  };
  const listSchema: FastifySchema = {
    tags: spec.tags,
    summary: spec.listSummary,
    querystring: spec.export
      ? Type.Intersect([listQuery(spec.filters), Type.Object({ format: Type.Optional(FormatParam) })])
      : listQuery(spec.filters),
    response: { 200: Type.Array(spec.item) },
    ...(spec.export
      ? {
          produces: ['application/json', MEDIA_TYPES.csv, MEDIA_TYPES.ndjson, ...(spec.export.geo ? [MEDIA_TYPES.geojson] : [])],
          description:
            'format=csv|ndjson' +
            (spec.export.geo ? '|geojson' : '') +
            ' (or Accept) exports the whole from..to range (at most EXPORT_MAX_DAYS) with these filters, streamed; no paging.',
        }
      : {}),
  };
  const oneSchema: FastifySchema = {
    tags: spec.tags,
    summary: `Get ${spec.what}`,
    params: IdParam,
    response: { 200: spec.detail?.item ?? spec.item },
  };
  app.route({ method: 'GET', url: spec.path, schema: listSchema, handler: list });
  app.route({ method: 'GET', url: `${spec.path}/:id`, schema: oneSchema, handler: one });
}
