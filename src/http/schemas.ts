// Schema pieces shared by the resources. The same TypeBox schema validates a request, types its
// handler and becomes the OpenAPI document (house rule: schemas once).
import { type TLiteral, Type, type TSchema, type TUnion } from '@sinclair/typebox';

/** A string of at most `max` code points (a field's "Size" in the API guide). */
export const Str = (max: number, opts: { minLength?: number; description?: string } = {}) => Type.String({ maxLength: max, ...opts });

export const Uuid = Type.String({ format: 'uuid', description: 'UUID' });
export const DateTime = Type.String({ format: 'date-time', description: 'ISO 8601, UTC, to the second' });

export const IdParam = Type.Object({ id: Type.String({ maxLength: 64 }) });

export const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);

/**
 * A union of the string literals of a list (an enum: its error lists the allowed values), typed as
 * the list's members so that handlers see them (Type.Union over a mapped array would lose them).
 */
export const Literals = <const T extends readonly string[]>(values: T, options: { description?: string } = {}) =>
  Type.Union(
    values.map((v) => Type.Literal(v)),
    options,
  ) as unknown as TUnion<{ -readonly [K in keyof T]: TLiteral<T[K]> }>;

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

/** ISO 8601 UTC to the second (API guide 1; size 20). */
export const iso = (d: Date | string | null | undefined): string | null => {
  if (d == null) return null;
  const t = new Date(d);
  // A stored 'infinity' (or anything Date cannot hold) reads as null rather than failing the list.
  return Number.isNaN(t.getTime()) ? null : t.toISOString().replace(/\.\d{3}Z$/, 'Z');
};

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const isUuid = (s: string) => UUID_RE.test(s);

/** A 64-bit record id as decimal text (1 to 9223372036854775807). */
export const isInt8Id = (s: string) => /^[1-9]\d{0,18}$/.test(s) && BigInt(s) <= 9223372036854775807n;

// ---- request validation schemas (API guide 1) -----------------------------------------------
// Route modules declare request and response schemas once, for validation, types and OpenAPI alike.
// The validator compiles a derived copy (the OpenAPI document keeps the declared one):
// - request body objects refuse unknown members (a typo such as `lat` is a 400 naming it), at every
//   level of the resource's own schema; objects that declare `additionalProperties` or
//   `patternProperties` (free JSON: `data`, `jsonData`, `parameters`, `settings`, records keyed by
//   type) keep accepting any member;
// - members that the route's own 2xx response carries at the same place but the request does not
//   (`id`, `whenCreated`, `whenUpdated`, `whoCreated`, `childIds`, `stats`, `signingSecretSet`, ...)
//   are accepted with any value and removed before the handler runs, so a GET body can be PUT back;
// - a union of literals becomes an `enum`, so its error lists the allowed values.

type Schema = Record<string | symbol, unknown>;
const isSchema = (v: unknown): v is Schema => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Which members to remove from an accepted body: response-only ones, at each level. */
export interface StripPlan {
  keys?: string[];
  props?: Record<string, StripPlan>;
  items?: StripPlan;
}

/** Removes, in place, the members a plan names (after validation, before the handler). */
export function stripIgnored(data: unknown, plan: StripPlan | undefined): void {
  if (!plan || typeof data !== 'object' || data === null) return;
  if (Array.isArray(data)) {
    if (plan.items) for (const item of data) stripIgnored(item, plan.items);
    return;
  }
  const obj = data as Record<string, unknown>;
  for (const k of plan.keys ?? []) delete obj[k];
  for (const [k, p] of Object.entries(plan.props ?? {})) if (Object.hasOwn(obj, k)) stripIgnored(obj[k], p);
}

/** The member name list of an object schema that are accepted but ignored (for error messages). */
export const IGNORED_KEYWORD = 'x-ignored';

/** Object schemas reachable from these schemas through anyOf/oneOf/allOf. */
function shapes(list: unknown[]): Schema[] {
  const out: Schema[] = [];
  const walk = (s: unknown) => {
    if (!isSchema(s)) return;
    for (const k of ['anyOf', 'oneOf', 'allOf'] as const) if (Array.isArray(s[k])) for (const m of s[k]) walk(m);
    out.push(s);
  };
  for (const s of list) walk(s);
  return out;
}
const propsAt = (list: unknown[]) => {
  const m = new Map<string, unknown[]>();
  for (const s of shapes(list)) {
    if (!isSchema(s.properties)) continue;
    for (const [k, v] of Object.entries(s.properties)) m.set(k, [...(m.get(k) ?? []), v]);
  }
  return m;
};
const itemsAt = (list: unknown[]) => shapes(list).flatMap((s) => (isSchema(s.items) ? [s.items] : []));

const LITERAL_KEYS = new Set(['const', 'type', 'description', 'title']);
const isLiteral = (m: unknown) => isSchema(m) && 'const' in m && Object.keys(m).every((k) => LITERAL_KEYS.has(k));

/** The plan of a union: each branch's, where they cannot disagree about a member. */
function mergePlans(built: Built[]): StripPlan | undefined {
  const some = built.filter((b) => b.plan !== undefined);
  if (some.length === 0) return undefined;
  // Response-only keys are no branch's input (see unionKeys in build): removing them is always safe.
  const keys = [...new Set(some.flatMap((b) => b.plan!.keys ?? []))];
  // A member's nested plan is kept only when every branch declaring that member agrees: removing
  // what another branch takes as input would lose data.
  const props: Record<string, StripPlan> = {};
  for (const k of new Set(some.flatMap((b) => Object.keys(b.plan!.props ?? {})))) {
    const declaring = built.filter((b) => isSchema(b.schema) && isSchema(b.schema.properties) && Object.hasOwn(b.schema.properties, k));
    const variants = new Set(declaring.map((b) => JSON.stringify(b.plan?.props?.[k] ?? null)));
    if (variants.size === 1) props[k] = some.find((b) => b.plan!.props?.[k])!.plan!.props![k]!;
  }
  const arrays = built.filter((b) => isSchema(b.schema) && b.schema.type === 'array');
  const itemPlans = new Set(arrays.map((b) => JSON.stringify(b.plan?.items ?? null)));
  const items = itemPlans.size === 1 ? arrays[0]!.plan?.items : undefined;
  const plan: StripPlan = {
    ...(keys.length ? { keys } : {}),
    ...(Object.keys(props).length ? { props } : {}),
    ...(items ? { items } : {}),
  };
  return plan.keys || plan.props || plan.items ? plan : undefined;
}

/**
 * In a union of objects told apart by a literal member (`auth.type`), each branch checks that tag
 * first, so a branch not meant fails on its tag rather than on a member it lacks, and the error
 * reported (envelope.ts) comes from the branch meant.
 */
function tagFirst(members: unknown[]): unknown[] {
  const objects = members.filter((m): m is Schema & { properties: Schema } => isSchema(m) && m.type === 'object' && isSchema(m.properties));
  if (objects.length < 2) return members;
  const tag = Object.keys(objects[0]!.properties).find((k) =>
    objects.every((m) => isLiteral(m.properties[k]) && Array.isArray(m.required) && m.required.includes(k)),
  );
  if (tag === undefined) return members;
  return members.map((m) =>
    objects.includes(m as never)
      ? { allOf: [{ type: 'object', properties: { [tag]: (m as { properties: Schema }).properties[tag] }, required: [tag] }, m] }
      : m,
  );
}

interface Built {
  schema: unknown;
  plan?: StripPlan;
}

/**
 * The validation copy of a schema. `resp` lists the response schemas at the same place (null: not a
 * strict part, e.g. a query string or the inside of a free object); `unionKeys`, inside a union of
 * objects, the request members of every branch (a member some branch takes as input is not
 * response-only, so `{type: "apiKey", username}` is refused rather than ignored).
 */
function build(s: unknown, resp: unknown[] | null, unionKeys?: Set<string>): Built {
  if (!isSchema(s)) return { schema: s };
  for (const u of ['anyOf', 'oneOf'] as const) {
    const members = s[u];
    if (!Array.isArray(members)) continue;
    if (members.length && members.every(isLiteral)) {
      // String keys only: the TypeBox kind (a Union) no longer describes it.
      const rest = Object.fromEntries(Object.entries(s).filter(([k]) => k !== u));
      return { schema: { ...rest, enum: members.map((m) => (m as Schema).const) } };
    }
    const keys = new Set(members.flatMap((m) => (isSchema(m) && isSchema(m.properties) ? Object.keys(m.properties) : [])));
    const built = members.map((m) => build(m, resp, keys));
    const plan = mergePlans(built);
    return { schema: { ...s, [u]: tagFirst(built.map((b) => b.schema)) }, ...(plan ? { plan } : {}) };
  }
  if (Array.isArray(s.allOf)) {
    // Intersections stay as declared (members of one cannot refuse the others' members): request
    // bodies do not use them; query strings do (paging + filters) and stay lenient.
    return { schema: { ...s, allOf: s.allOf.map((m) => build(m, null).schema) } };
  }
  if (s.type === 'array' && isSchema(s.items)) {
    const b = build(s.items, resp === null ? null : itemsAt(resp));
    return { schema: { ...s, items: b.schema }, ...(b.plan ? { plan: { items: b.plan } } : {}) };
  }
  if (s.type !== 'object' || !isSchema(s.properties)) return { schema: s };
  const free = resp === null || s.additionalProperties !== undefined || s.patternProperties !== undefined;
  const theirs = free ? new Map<string, unknown[]>() : propsAt(resp);
  const properties: Record<string, unknown> = {};
  const props: Record<string, StripPlan> = {};
  for (const [k, p] of Object.entries(s.properties)) {
    const b = build(p, free ? null : (theirs.get(k) ?? []));
    properties[k] = b.schema;
    if (b.plan) props[k] = b.plan;
  }
  if (free) return { schema: { ...s, properties } };
  const ignored = [...theirs.keys()].filter((k) => !Object.hasOwn(s.properties as object, k) && !unionKeys?.has(k));
  for (const k of ignored) properties[k] = {}; // any value: it is removed unread
  const plan: StripPlan = { ...(ignored.length ? { keys: ignored } : {}), ...(Object.keys(props).length ? { props } : {}) };
  return {
    schema: { ...s, properties, additionalProperties: false, [IGNORED_KEYWORD]: ignored },
    ...(plan.keys || plan.props ? { plan } : {}),
  };
}

/**
 * The schema that validates a JSON request body, and what to remove once it passed: unknown members
 * refused, members of the route's 2xx `responses` that the request does not take ignored.
 */
export function requestBodySchema(body: unknown, responses: unknown[]): { schema: unknown; strip?: StripPlan } {
  const b = build(body, responses);
  return { schema: b.schema, ...(b.plan ? { strip: b.plan } : {}) };
}

/** The schema that validates a query string, path parameters, headers or a form body: as declared, literal unions as enums. */
export const lenientSchema = (s: unknown): unknown => build(s, null).schema;
