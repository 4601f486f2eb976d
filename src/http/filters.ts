// List filters (API guide 5): a resource declares each query parameter that narrows its list once,
// with its schema and its SQL condition; the query schema (validation and OpenAPI) and the
// conditions both come from that declaration.
import { type TSchema, Type } from '@sinclair/typebox';
import { BOUNDS } from '../bounds.js';
import { PageQuery } from './paging.js';
import { Uuid } from './schemas.js';

/** A query parameter that narrows a list: its schema, and the SQL condition on its value. */
export interface Filter {
  schema: TSchema;
  sql: (param: string) => string;
}

export const filters = {
  /** A repeatable UUID (`assetId=a&assetId=b`): the column is any of them. */
  anyUuid: (column: string): Filter => ({
    schema: Type.Array(Uuid, { maxItems: BOUNDS.arrayItems.value }),
    sql: (p) => `${column} = ANY(${p}::uuid[])`,
  }),
  uuid: (column: string): Filter => ({ schema: Uuid, sql: (p) => `${column} = ${p}::uuid` }),
  /** An exact value of the column (an enum, a name, a number), as its schema says. */
  equals: (column: string, schema: TSchema): Filter => ({ schema, sql: (p) => `${column} = ${p}` }),
};

/** The list's query schema: paging and the filters, every one optional. */
export const listQuery = (fs: Record<string, Filter>) =>
  Type.Intersect([PageQuery, Type.Object(Object.fromEntries(Object.entries(fs).map(([k, f]) => [k, Type.Optional(f.schema)])))]);

/** Pushes the conditions of the filters the query uses. */
export function applyFilters(fs: Record<string, Filter>, query: Record<string, unknown>, params: unknown[], where: string[]): void {
  for (const [k, f] of Object.entries(fs)) {
    const v = query[k];
    if (v === undefined || (Array.isArray(v) && v.length === 0)) continue;
    params.push(v);
    where.push(f.sql(`$${params.length}`));
  }
}
