// Schema pieces shared by the resources. The same TypeBox schema validates a request, types its
// handler and becomes the OpenAPI document (house rule: schemas once).
import { Type, type TSchema } from '@sinclair/typebox';

/** A string of at most `max` code points (the spec's "Size"). */
export const Str = (max: number, opts: { minLength?: number; description?: string } = {}) => Type.String({ maxLength: max, ...opts });

export const Uuid = Type.String({ format: 'uuid', description: 'UUID' });
export const DateTime = Type.String({ format: 'date-time', description: 'ISO 8601, UTC, to the second' });

export const IdParam = Type.Object({ id: Type.String({ maxLength: 64 }) });

export const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);

export const ErrorSchema = Type.Object(
  {
    error: Type.String({ description: 'Short title' }),
    message: Type.String({ description: 'Detail text' }),
    code: Type.Optional(Type.String({ description: 'Stable machine-readable code' })),
    requestId: Type.Optional(Type.String()),
    field: Type.Optional(Type.String({ description: 'JSON pointer to the offending value' })),
  },
  { title: 'Error', additionalProperties: true },
);

export const ScopeSchema = Type.Union([Type.Literal('read'), Type.Literal('write'), Type.Literal('admin')]);

/** ISO 8601 UTC to the second (API.md section 1; the spec's size 20). */
export const iso = (d: Date | string | null | undefined): string | null =>
  d == null ? null : new Date(d).toISOString().replace(/\.\d{3}Z$/, 'Z');

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const isUuid = (s: string) => UUID_RE.test(s);

/** A 64-bit record id as decimal text (1 to 9223372036854775807). */
export const isInt8Id = (s: string) => /^[1-9]\d{0,18}$/.test(s) && BigInt(s) <= 9223372036854775807n;
