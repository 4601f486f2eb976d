// The HTTP plumbing every route shares: request validation (strict bodies, coerced query strings),
// NUL refusal, the error envelope for every status >= 400 (unknown routes and wrong verbs too).
import { isUtf8 } from 'node:buffer';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import fastJsonStringify from 'fast-json-stringify';
import { fullFormats } from 'ajv-formats/dist/formats.js';
import FindMyWay from 'find-my-way';
import { ApiError, errorBody, isDatabaseUnavailable, pointer, type ErrorCode } from './errors.js';
import { IGNORED_KEYWORD, lenientSchema, requestBodySchema, stripIgnored, type StripPlan } from './schemas.js';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

/** API guide 1: date-times in bodies and query strings lie in 1970..9999 (UTC). */
const MIN_DATE_MS = Date.UTC(1970, 0, 1);
const MAX_DATE_MS = Date.UTC(10000, 0, 1) - 1;
const isDateTime = (fullFormats['date-time'] as { validate: (s: string) => boolean }).validate;

/** An RFC 3339 date-time (offset or Z, a real calendar date) inside the accepted range. */
function isDateTimeInRange(s: string): boolean {
  if (!isDateTime(s)) return false;
  const ms = Date.parse(s);
  return Number.isFinite(ms) && ms >= MIN_DATE_MS && ms <= MAX_DATE_MS;
}

/** Both validators share ajv-formats' formats, with date-time narrowed to the accepted range. */
function withFormats(ajv: Ajv): Ajv {
  addFormats(ajv);
  ajv.addFormat('date-time', { type: 'string', validate: isDateTimeInRange });
  return ajv;
}

// Bodies: no coercion ("12" is not a number), defaults applied, unknown members refused (verbose:
// the error carries the schema, so the message can list the known members).
const bodyAjv = withFormats(new Ajv({ coerceTypes: false, useDefaults: true, strict: false, allErrors: false, verbose: true }));
// Query strings and path params arrive as text: coerce, and allow repeated params as arrays.
const queryAjv = withFormats(new Ajv({ coerceTypes: 'array', useDefaults: true, strict: false, allErrors: false }));

/**
 * Compiled validators and serializers are kept for the process, by the schema's text (each app
 * builds its own schema objects): an app has some 150 schemas, about 0.5 s of CPU to compile, the
 * same ones for every app a process builds (the service builds one; a test process several). The
 * routes are the code's, so the cache is bounded by it. Each is compiled on its route's first use,
 * not at start: a start (a restart after a crash, each of HTTP_WORKERS' processes, each test
 * process) pays for the routes it serves, and a route's first request for its own (a few ms).
 */
const compiled = new Map<string, unknown>();
function once<F>(kind: string, schema: unknown, make: () => F): F {
  const key = `${kind} ${JSON.stringify(schema)}`;
  let f = compiled.get(key) as F | undefined;
  if (f === undefined) {
    f = make();
    compiled.set(key, f);
  }
  return f;
}
/** Made but not yet compiled: what `compileSchemasNow` compiles. */
const uncompiled = new Set<() => unknown>();
/** `make`'s result, made on the first call of the getter (or by `compileSchemasNow`). */
function lazily<T>(make: () => T): () => T {
  let made: T | undefined;
  const get = (): T => {
    if (made === undefined) {
      made = make();
      uncompiled.delete(get);
    }
    return made;
  };
  uncompiled.add(get);
  return get;
}
/**
 * Compiles every schema the process's apps have registered and not used yet; returns how many. A
 * schema that cannot compile throws here (the test of every route's schemas), as it would on its
 * route's first request.
 */
export function compileSchemasNow(): number {
  const all = [...uncompiled];
  for (const get of all) get();
  return all.length;
}
/** A validator compiled on its first call; its `errors` (which Fastify reads after a failed call) are the compiled one's. */
function lazyValidator(make: () => ValidateFunction): ValidateFunction {
  const get = lazily(make);
  const v = ((data: unknown) => get()(data)) as ValidateFunction;
  Object.defineProperty(v, 'errors', { get: () => get().errors ?? null });
  return v;
}
const compile = (ajv: Ajv, kind: string, schema: object): ValidateFunction =>
  once(kind, schema, () => lazyValidator(() => ajv.compile(schema)));

/**
 * Responses are serialised by fast-json-stringify, as Fastify's own serializer compiler does (the
 * service adds no shared schemas), compiled once per process, on first use (see `once`).
 */
export function installSerializer(app: FastifyInstance): void {
  app.setSerializerCompiler(({ schema }) =>
    once('response', schema, () => {
      const get = lazily(() => fastJsonStringify(schema as object));
      return (data: unknown) => get()(data);
    }),
  );
}

export function installValidation(app: FastifyInstance): void {
  // API guide 1: what a route's 2xx responses carry is ignored in its body (requestBodySchema).
  // Form bodies (the OAuth token endpoint) stay open: RFC 6749 section 3.1 says unknown parameters
  // are ignored. Query strings stay lenient too: links carry cache busters and tracking parameters.
  const routes = new Map<string, { responses: unknown[]; form: boolean }>();
  app.addHook('onRoute', (r) => {
    if (r.schema?.body === undefined) return;
    const responses = Object.entries((r.schema.response ?? {}) as Record<string, unknown>)
      .filter(([status]) => status.startsWith('2'))
      .map(([, schema]) => schema);
    const consumes = (r.schema as { consumes?: string[] }).consumes;
    const form = consumes !== undefined && !consumes.some((c) => c.includes('json'));
    for (const m of [r.method].flat()) routes.set(`${m} ${r.url}`, { responses, form });
  });
  const checked = (v: ValidateFunction, strip: StripPlan | undefined) => (data: unknown) => {
    if (v(data)) {
      stripIgnored(data, strip);
      return true;
    }
    return { error: Object.assign(new Error('body validation failed'), { validation: v.errors ?? [], validationContext: 'body' }) };
  };
  app.setValidatorCompiler(({ schema, httpPart, method, url }) => {
    if (httpPart !== 'body') return compile(queryAjv, 'query', lenientSchema(schema) as object);
    const route = routes.get(`${[method].flat()[0]} ${url}`);
    if (route?.form) return compile(bodyAjv, 'body', lenientSchema(schema) as object);
    const { schema: body, strip } = requestBodySchema(schema, route?.responses ?? []);
    const s = body as { 'x-bulk'?: boolean; anyOf?: object[] };
    if (s['x-bulk'] && s.anyOf?.length === 2) {
      // One record or an array of them: validate the branch the body's shape picks, so an error
      // names the item (`/3/latitude`) instead of "must match a schema in anyOf".
      const one = checked(compile(bodyAjv, 'body', s.anyOf[0]!), strip);
      const many = checked(compile(bodyAjv, 'body', s.anyOf[1]!), strip);
      return (data: unknown) => (Array.isArray(data) ? many : one)(data);
    }
    return checked(compile(bodyAjv, 'body', body as object), strip);
  });

  // API guide 1: a NUL anywhere in a string (keys included), or a number that is not finite,
  // is a 400 naming where.
  app.addHook('preValidation', async (req) => {
    const q = req.query as Record<string, unknown> | undefined;
    const hit = findBadValue(req.body) ?? findBadValue(q);
    if (hit !== undefined) throw new ApiError('VALIDATION_FAILED', `${hit.at || 'The body'} ${hit.why}.`, { field: hit.at });
  });
}

/**
 * JSON bodies (and JSON merge patches, their own media type) must be UTF-8 (RFC 8259 8.1): bytes
 * that are not are a 400 naming where, instead of being read as U+FFFD and stored changed.
 */
export function installJsonParsers(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser('error', 'error');
  const utf8Json = (req: FastifyRequest, body: Buffer, done: (err: Error | null, body?: unknown) => void) => {
    if (!isUtf8(body)) {
      const at = firstInvalidUtf8(body);
      done(Object.assign(new Error(`The body is not valid UTF-8 (byte ${at} of ${body.length}).`), { statusCode: 400 }));
      return;
    }
    parse(req, body.toString('utf8'), done);
  };
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, utf8Json);
  app.addContentTypeParser('application/merge-patch+json', { parseAs: 'buffer' }, utf8Json);
}

/**
 * The offset of the first byte that breaks UTF-8, or -1. The platform's decoder judges (RFC 3629:
 * no overlongs, surrogates or values past U+10FFFF) and puts U+FFFD where a sequence breaks; every
 * character before the first such place was whole, so its bytes count up to the offset. A U+FFFD
 * that the input itself carries (EF BF BD) is not a break.
 */
export function firstInvalidUtf8(b: Uint8Array): number {
  let at = 0;
  for (const ch of new TextDecoder('utf-8', { ignoreBOM: true }).decode(b)) {
    if (ch === '\uFFFD' && !(b[at] === 0xef && b[at + 1] === 0xbf && b[at + 2] === 0xbd)) return at;
    at += Buffer.byteLength(ch);
  }
  return -1;
}

export const MAX_JSON_DEPTH = 64;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Finds the first number that is not finite, the first string (value or key) that carries a NUL
 * or is not well-formed UTF-16 (a lone surrogate, which PostgreSQL refuses in JSON), or a nesting
 * deeper than MAX_JSON_DEPTH.
 * Iterative, so no input can exhaust the stack.
 */
function findBadValue(root: unknown): { at: string; why: string } | undefined {
  const bad = (s: string) =>
    s.includes('\u0000')
      ? 'must not contain the NUL character (\\u0000)'
      : LONE_SURROGATE.test(s)
        ? 'must be well-formed Unicode (no lone surrogates)'
        : undefined;
  const stack: [unknown, string, number][] = [[root, '', 0]];
  while (stack.length) {
    const [v, at, depth] = stack.pop()!;
    if (typeof v === 'string') {
      const why = bad(v);
      if (why) return { at, why };
    } else if (typeof v === 'number') {
      // API guide 1: JSON.parse turns an overflowing literal (1e400) into Infinity, which
      // PostgreSQL would store as Infinity (or JSONB as null) and JSON cannot carry back out.
      if (!Number.isFinite(v)) return { at, why: 'must be a finite number' };
    } else if (v && typeof v === 'object') {
      if (depth >= MAX_JSON_DEPTH) return { at, why: `is nested more than ${MAX_JSON_DEPTH} levels deep` };
      const entries = Array.isArray(v) ? v.map((c, i) => [String(i), c] as const) : Object.entries(v);
      for (let i = entries.length - 1; i >= 0; i--) {
        const [k, child] = entries[i]!;
        const here = at + pointer(k);
        const why = Array.isArray(v) ? undefined : bad(k);
        if (why) return { at: here, why: `key ${why}` };
        stack.push([child, here, depth + 1]);
      }
    }
  }
  return undefined;
}

function validationField(e: ErrorObject): string {
  let field = e.instancePath;
  if (e.keyword === 'required') field += pointer((e.params as { missingProperty: string }).missingProperty);
  if (e.keyword === 'additionalProperties') field += pointer((e.params as { additionalProperty: string }).additionalProperty);
  return field;
}

/**
 * The error worth reporting. When no branch of a union matched, Ajv lists every branch's first
 * error: skip the branches that were plainly not meant (the value is not of their type, e.g. the
 * `null` of a nullable field, or their literal tag differs, e.g. `auth.type`); when every branch
 * was skipped, merge their allowed types or values into one error.
 */
function pickError(errors: ErrorObject[]): ErrorObject | undefined {
  const unions = errors.filter((e) => e.keyword === 'anyOf' || e.keyword === 'oneOf');
  const notMeant = (e: ErrorObject) =>
    unions.some(
      (u) =>
        e.schemaPath.startsWith(`${u.schemaPath}/`) &&
        ((e.keyword === 'type' && e.instancePath === u.instancePath) ||
          (e.keyword === 'const' && e.instancePath.slice(0, e.instancePath.lastIndexOf('/')) === u.instancePath)),
    );
  const leaves = errors.filter((e) => !unions.includes(e));
  const meant = leaves.filter((e) => !notMeant(e));
  if (meant.length) {
    // Several branches meant (two kinds of oauth2 auth): the one whose members the value fits best.
    let best = meant[0]!;
    for (const e of meant) if (branchFit(unions, e) > branchFit(unions, best)) best = e;
    return best;
  }
  if (!leaves.length) return errors[0];
  const first = leaves[0]!;
  const same = leaves.filter((e) => e.keyword === first.keyword && e.instancePath === first.instancePath);
  if (first.keyword === 'const') {
    const allowedValues = [...new Set(same.map((e) => (e.params as { allowedValue: unknown }).allowedValue))];
    return { ...first, keyword: 'enum', params: { allowedValues } };
  }
  if (first.keyword === 'type') {
    const types = [...new Set(same.flatMap((e) => String((e.params as { type: string }).type).split(',')))];
    return { ...first, message: `must be ${types.join(' or ')}` };
  }
  return first;
}

/** How well the value fits the union branch an error came from: its members known there minus those not. */
function branchFit(unions: ErrorObject[], e: ErrorObject): number {
  const u = unions.filter((x) => e.schemaPath.startsWith(`${x.schemaPath}/`)).sort((a, b) => b.schemaPath.length - a.schemaPath.length)[0];
  if (!u || !Array.isArray(u.schema) || typeof u.data !== 'object' || u.data === null) return 0;
  let branch = u.schema[Number(e.schemaPath.slice(u.schemaPath.length + 1).split('/')[0])] as { allOf?: unknown[]; properties?: object };
  if (Array.isArray(branch?.allOf)) branch = branch.allOf.at(-1) as typeof branch; // see tagFirst in schemas.ts
  const props = branch?.properties;
  if (!props) return 0;
  return Object.keys(u.data).reduce((fit, k) => fit + (Object.hasOwn(props, k) ? 1 : -1), 0);
}

/** Did-you-mean: a known member that differs from an unknown one by case, a prefix or two edits. */
function closest(name: string, known: string[]): string | undefined {
  const n = name.toLowerCase();
  const dist = (a: string, b: string) => {
    let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
    for (let i = 1; i <= a.length; i++) {
      const cur = [i];
      for (let j = 1; j <= b.length; j++) cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = cur;
    }
    return prev[b.length]!;
  };
  return (
    known.find((k) => k.toLowerCase() === n) ??
    known.find((k) => n.length >= 3 && k.toLowerCase().startsWith(n)) ??
    known.find((k) => dist(k.toLowerCase(), n) <= Math.min(2, n.length - 1))
  );
}

function unknownFieldMessage(e: ErrorObject, where: string): string {
  const name = (e.params as { additionalProperty: string }).additionalProperty;
  const parent = (e.parentSchema ?? {}) as { properties?: Record<string, unknown>; [IGNORED_KEYWORD]?: string[] };
  const ignored = new Set(parent[IGNORED_KEYWORD] ?? []);
  const known = Object.keys(parent.properties ?? {}).filter((k) => !ignored.has(k));
  const guess = closest(name, known);
  return `${where} is not a known field${guess ? ` (did you mean ${guess}?)` : ''}; known fields here: ${known.join(', ') || 'none'}.`;
}

function validationMessage(e: ErrorObject, part: string, field: string): string {
  const where = field ? `${part} field ${field}` : part;
  switch (e.keyword) {
    case 'required': {
      // Every member missing at that place, in one answer (a client fixes them all at once).
      const required = ((e.parentSchema ?? {}) as { required?: string[] }).required ?? [];
      const data = e.data as Record<string, unknown> | undefined;
      const missing = data && typeof data === 'object' ? required.filter((k) => !Object.hasOwn(data, k)) : [];
      if (missing.length < 2) return `${where} is required.`;
      return `${part} fields ${missing.map((k) => e.instancePath + pointer(k)).join(', ')} are required.`;
    }
    case 'maxLength':
      return `${where} must be at most ${(e.params as { limit: number }).limit} characters.`;
    case 'format':
      if ((e.params as { format: string }).format === 'date-time')
        return `${where} must be an ISO 8601 date-time with an offset or Z, between 1970-01-01 and 9999-12-31.`;
      return `${where} ${e.message ?? 'is invalid'}.`;
    case 'enum':
      return `${where} must be one of ${(e.params as { allowedValues: unknown[] }).allowedValues.map(String).join(', ')}.`;
    case 'const':
      return `${where} must be ${String((e.params as { allowedValue: unknown }).allowedValue)}.`;
    case 'additionalProperties':
      return unknownFieldMessage(e, where);
    case 'anyOf':
      return `${where} has an unaccepted value.`;
    default:
      return `${where} ${e.message ?? 'is invalid'}.`;
  }
}

const PARTS: Record<string, string> = { body: 'body', querystring: 'query', params: 'path', headers: 'header' };

export function installErrorEnvelope(app: FastifyInstance): void {
  const send = (req: FastifyRequest, reply: FastifyReply, code: ErrorCode, status: number, message: string, field?: string) =>
    reply
      .code(status)
      .type('application/json; charset=utf-8')
      .send(errorBody(code, message, req.id, field));

  app.setErrorHandler((err: FastifyError, req, reply) => {
    if (err instanceof ApiError) {
      for (const [k, v] of Object.entries(err.extra.headers ?? {})) reply.header(k, v);
      if (err.status === 401) reply.header('WWW-Authenticate', 'Bearer');
      return send(req, reply, err.code, err.status, err.message, err.extra.field);
    }
    if (err.validation) {
      const first = pickError(err.validation as ErrorObject[]);
      const part = PARTS[err.validationContext ?? 'body'] ?? 'body';
      const field = first ? validationField(first) : '';
      return send(req, reply, 'VALIDATION_FAILED', 400, first ? validationMessage(first, part, field) : err.message, field);
    }
    switch (err.code as string) {
      case 'FST_ERR_CTP_BODY_TOO_LARGE':
        return send(req, reply, 'PAYLOAD_TOO_LARGE', 413, 'The request body is larger than this route accepts.');
      case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
        return send(req, reply, 'UNSUPPORTED_MEDIA_TYPE', 415, 'Send the body as application/json.');
      case 'FST_ERR_CTP_EMPTY_JSON_BODY':
        return send(req, reply, 'VALIDATION_FAILED', 400, 'The JSON body is empty.', '');
    }
    // Unique and foreign-key violations that a service did not turn into a clearer error.
    const pg = err as unknown as { code?: string; constraint?: string };
    if (pg.code === '23505') {
      const u = (pg.constraint && UNIQUE[pg.constraint]) || {
        field: undefined,
        message: 'A record with that unique value already exists.',
      };
      return send(req, reply, ('code' in u && u.code) || 'NAME_TAKEN', 409, u.message, u.field);
    }
    if (pg.code === '23503') return send(req, reply, 'CONFLICT', 409, 'Other records still refer to this one.');
    // The client went away while its body was being read: not the database's doing.
    if (err.code === 'ECONNRESET' && err.statusCode === 400) return send(req, reply, 'MALFORMED_REQUEST', 400, 'The request was aborted.');
    if (isDatabaseUnavailable(err)) {
      req.log.warn({ err }, 'database unavailable');
      reply.header('Retry-After', '5');
      return send(req, reply, 'DATABASE_UNAVAILABLE', 503, 'The database is unavailable; nothing was stored. Retry shortly.');
    }
    const status = err.statusCode ?? 500;
    if (status >= 400 && status < 500) {
      // Fastify's own client errors: malformed JSON, bad content length, ...
      return send(req, reply, 'VALIDATION_FAILED', status, err.message, status === 400 ? '' : undefined);
    }
    req.log.error({ err }, 'unhandled error');
    return send(req, reply, 'INTERNAL', 500, 'An internal error occurred; it has been logged.');
  });

  // 404 for unknown paths, 405 (with Allow) for a known path with another verb.
  const router = FindMyWay();
  const methodsByPath = new Map<string, Set<string>>();
  app.addHook('onRoute', (r) => {
    const methods = Array.isArray(r.method) ? r.method : [r.method];
    for (const m of methods) {
      if (m === 'HEAD' || m === 'OPTIONS') continue;
      let set = methodsByPath.get(r.url);
      if (!set) {
        set = new Set();
        methodsByPath.set(r.url, set);
        router.on('GET', r.url, () => {}, { url: r.url });
      }
      set.add(m);
      if (m === 'GET') set.add('HEAD'); // Fastify answers HEAD for every GET
    }
  });
  app.setNotFoundHandler((req, reply) => {
    const found = router.find('GET', req.url.split('?')[0] ?? '/');
    const allowed = found ? methodsByPath.get((found.store as { url: string }).url) : undefined;
    if (allowed && !allowed.has(req.method)) {
      reply.header('Allow', [...allowed].join(', '));
      return send(req, reply, 'METHOD_NOT_ALLOWED', 405, `${req.method} is not allowed here; use ${[...allowed].join(', ')}.`);
    }
    return send(req, reply, 'NOT_FOUND', 404, `No route ${req.method} ${req.url.split('?')[0]}.`);
  });
}

// Unique constraints (migrations/) and what a 409 says about each: the one place that maps them.
const UNIQUE: Record<string, { field: string; message: string; code?: ErrorCode }> = {
  owners_name_key: { field: '/name', message: 'An owner with this name already exists.' },
  assets_owner_name_key: { field: '/name', message: 'An asset with this name already exists for this owner.' },
  zones_owner_name_key: { field: '/name', message: 'A zone with this name already exists for this owner.' },
  booking_data_owner_name_key: { field: '/name', message: 'Booking data with this name already exists for this owner.' },
  users_username_key: { field: '/username', message: 'That username is already in use.' },
  clients_client_id_key: { field: '/clientId', message: 'That clientId is already in use.' },
  integrations_name_key: { field: '/name', message: 'An integration with this name already exists.' },
  specifications_asset_type_key: {
    field: '/type',
    message: 'This asset already has a specification of this type (one per asset and type).',
    code: 'CONFLICT',
  },
};

/**
 * Errors Node reports before a request reaches Fastify (a request that did not arrive in time,
 * oversized headers, malformed HTTP): answered in the same envelope, then the socket is closed.
 */
export function clientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, code, message]: [number, ErrorCode, string] =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'REQUEST_TIMEOUT', 'The request did not arrive in time; the connection is closed.']
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'HEADERS_TOO_LARGE', 'The request headers are too large.']
        : [400, 'MALFORMED_REQUEST', 'The request is not well-formed HTTP.'];
  const body = JSON.stringify(errorBody(code, message));
  // Only when no answer has started on this socket: never corrupt a response in flight.
  const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (!socket.writable || inFlight?.headersSent) {
    socket.destroy();
    return;
  }
  // A lingering close, as nginx does: closing a socket whose input is unread (the rest of oversized
  // headers, a trickled body) sends a TCP reset, which can destroy the answer before the client
  // reads it. So: send the answer, half-close, read and drop what still arrives, and destroy the
  // socket when the client closes its side or after LINGER_MS at most.
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
  socket.on('error', () => socket.destroy());
  socket.on('end', () => socket.destroy());
  socket.resume();
  setTimeout(() => socket.destroy(), LINGER_MS).unref();
}

const LINGER_MS = 2000;
