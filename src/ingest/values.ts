// Reading the values devices send: numbers, times, and a record checked against the REST API's
// own schema of its type, so a device's record is refused exactly where a REST one would be.
import { FormatRegistry, type TSchema } from '@sinclair/typebox';
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler';
import { badRequest } from '../http/errors.js';
import { isUuid } from '../http/schemas.js';
import type { RecordDef } from '../records/records.js';

/** A JSON object's members, or undefined for anything else. */
export const objectOf = (v: unknown): Record<string, unknown> | undefined =>
  v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;

/** ISO 8601 with a zone (Z or an offset): a device's time must say which zone it is in. */
const ISO_ZONED = /^\d{4}-\d\d-\d\dT.*(Z|[+-]\d\d:?\d\d)$/;

/** An ISO 8601 time with a zone (Traccar's "2025-06-15T13:45:12.862+00:00"), as ISO in UTC. */
export function isoTime(v: unknown, field: string): string {
  const ms = typeof v === 'string' && ISO_ZONED.test(v) ? Date.parse(v) : Number.NaN;
  if (!Number.isFinite(ms)) throw badRequest(`${field.slice(1)} must be an ISO 8601 time with a zone.`, field);
  return new Date(ms).toISOString();
}

/** A parameter's number: a 400 naming it when it is not one. */
export function numberParam(v: string, name: string): number {
  const n = v.trim() === '' ? Number.NaN : Number(v);
  if (!Number.isFinite(n)) throw badRequest(`${name} must be a number (got ${JSON.stringify(v.slice(0, 40))}).`, `/${name}`);
  return n;
}

/** A JSON member's number. */
export function finite(v: unknown, field: string): number {
  if (typeof v !== 'number' || !Number.isFinite(v)) throw badRequest(`${field.slice(1)} must be a number.`, field);
  return v;
}

/**
 * A device time as ISO 8601: Unix seconds (milliseconds from 2^31 on, as Traccar reads them), ISO
 * 8601 with a zone, or "yyyy-MM-dd HH:mm:ss" (taken as UTC).
 */
export function timeOf(v: string, field: string): string {
  let ms: number;
  if (/^\d+$/.test(v)) {
    const n = Number(v);
    ms = n < 2 ** 31 ? n * 1000 : n;
  } else if (/^\d{4}-\d\d-\d\d[ +]\d\d:\d\d:\d\d(\.\d+)?$/.test(v)) ms = Date.parse(`${v.replace(/[ +]/, 'T')}Z`);
  else if (ISO_ZONED.test(v)) ms = Date.parse(v);
  else ms = Number.NaN;
  // new Date(ms) holds +-8.64e15 ms at most (99999999999999999999 is past it: toISOString would throw).
  if (!Number.isFinite(ms) || Number.isNaN(new Date(ms).getTime())) {
    throw badRequest(
      `${field.slice(1)} must be Unix seconds or an ISO 8601 time with a zone (got ${JSON.stringify(v.slice(0, 40))}).`,
      field,
    );
  }
  return new Date(ms).toISOString();
}

// The formats the records' schemas use (Fastify checks them with its own validator).
if (!FormatRegistry.Has('uuid')) FormatRegistry.Set('uuid', isUuid);
if (!FormatRegistry.Has('date-time')) {
  FormatRegistry.Set(
    'date-time',
    (v) => /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/i.test(v) && Number.isFinite(Date.parse(v)),
  );
}

const checks = new WeakMap<TSchema, TypeCheck<TSchema>>();

/** `item` checked against the record type's REST schema: the first error as a 400 naming its field. */
export function checkItem<I>(def: RecordDef<I & { assetId: string }>, item: I & { assetId: string }): I & { assetId: string } {
  let check = checks.get(def.item);
  if (!check) {
    check = TypeCompiler.Compile(def.item);
    checks.set(def.item, check);
  }
  if (!check.Check(item)) {
    const e = check.Errors(item).First();
    throw badRequest(
      `${e?.path ? `${e.path.slice(1)} ` : ''}${e?.message ?? 'is not valid'} (${JSON.stringify(e?.value)?.slice(0, 60)}).`,
      e?.path || '/',
    );
  }
  return item;
}
