// Opening an embedded database (PGlite) with the service's type parsing: int8 as decimal strings,
// numeric and floats as finite numbers or null, timestamptz as Date (the same as on PostgreSQL, db.ts).
// Used where the database runs: the database thread (pglite-thread.ts).
import path from 'node:path';
import type { PGlite } from '@electric-sql/pglite';

export const INT8 = 20;
export const NUMERIC = 1700;
export const FLOAT4 = 700;
export const FLOAT8 = 701;

/**
 * JSON has no Infinity or NaN and the response serializer refuses them, so a non-finite float
 * already in the database (stored before input was checked, or by hand) reads as null: one odd
 * row must never break every list that covers it.
 */
export const finiteOrNull = (v: string): number | null => {
  const n = Number(v);
  return Number.isFinite(n) ? n : null;
};

export interface PgliteOptions {
  /** The data folder (its `pgdata` below it), or undefined for one in memory. */
  dataDir?: string;
  /** A data folder saved with dumpDataDir, to start from instead of an empty one. */
  template?: Blob;
  /** PostgreSQL's buffer cache (PGlite's default when unset: 128 MB). */
  sharedBuffersMb?: number;
}

export async function openPglite(o: PgliteOptions): Promise<PGlite> {
  // Loaded only for the embedded database: a PostgreSQL process never needs it.
  const { PGlite, types } = await import('@electric-sql/pglite');
  return PGlite.create(o.dataDir ? path.join(o.dataDir, 'pgdata') : undefined, {
    ...(o.template ? { loadDataDir: o.template } : {}),
    ...(o.sharedBuffersMb ? { startParams: [...PGlite.defaultStartParams, '-c', `shared_buffers=${o.sharedBuffersMb}MB`] } : {}),
    parsers: {
      [INT8]: (v: string) => v,
      [NUMERIC]: finiteOrNull,
      [FLOAT4]: finiteOrNull,
      [FLOAT8]: finiteOrNull,
      [types.TIMESTAMPTZ]: (v: string) => new Date(v),
    },
  });
}
