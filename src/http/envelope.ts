// The HTTP plumbing every route shares: request validation (strict bodies, coerced query strings),
// NUL refusal, the error envelope for every status >= 400 (unknown routes and wrong verbs too).
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Ajv, type ErrorObject } from 'ajv';
import addFormatsModule from 'ajv-formats';
import FindMyWay from 'find-my-way';
import { ApiError, errorBody, isDatabaseUnavailable, pointer, type ErrorCode } from './errors.js';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

export function installValidation(app: FastifyInstance): void {
  // Bodies: no coercion ("12" is not a number), defaults applied, unknown members ignored.
  const bodyAjv = addFormats(new Ajv({ coerceTypes: false, useDefaults: true, strict: false, allErrors: false }));
  // Query strings and path params arrive as text: coerce, and allow repeated params as arrays.
  const queryAjv = addFormats(new Ajv({ coerceTypes: 'array', useDefaults: true, strict: false, allErrors: false }));
  app.setValidatorCompiler(({ schema, httpPart }) => {
    if (httpPart !== 'body') return queryAjv.compile(schema);
    const s = schema as { 'x-bulk'?: boolean; anyOf?: object[] };
    if (s['x-bulk'] && s.anyOf?.length === 2) {
      // One record or an array of them: validate the branch the body's shape picks, so an error
      // names the item (`/3/latitude`) instead of "must match a schema in anyOf".
      const one = bodyAjv.compile(s.anyOf[0]!);
      const many = bodyAjv.compile(s.anyOf[1]!);
      return (data: unknown) => {
        const v = Array.isArray(data) ? many : one;
        if (v(data)) return true;
        return { error: Object.assign(new Error('body validation failed'), { validation: v.errors ?? [], validationContext: 'body' }) };
      };
    }
    return bodyAjv.compile(schema);
  });

  // API.md section 1: a NUL anywhere in a string (keys included) is a 400 naming where.
  app.addHook('preValidation', async (req) => {
    const q = req.query as Record<string, unknown> | undefined;
    const hit = findBadString(req.body) ?? findBadString(q);
    if (hit !== undefined) throw new ApiError('VALIDATION_FAILED', `${hit.at || 'The body'} ${hit.why}.`, { field: hit.at });
  });
}

export const MAX_JSON_DEPTH = 64;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Finds the first string (value or key) that carries a NUL or is not well-formed UTF-16 (a lone
 * surrogate, which PostgreSQL refuses in JSON), or a nesting deeper than MAX_JSON_DEPTH.
 * Iterative, so no input can exhaust the stack.
 */
function findBadString(root: unknown): { at: string; why: string } | undefined {
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
  return field;
}

function validationMessage(e: ErrorObject, part: string, field: string): string {
  const where = field ? `${part} field ${field}` : part;
  switch (e.keyword) {
    case 'required':
      return `${where} is required.`;
    case 'maxLength':
      return `${where} must be at most ${(e.params as { limit: number }).limit} characters.`;
    case 'enum':
      return `${where} must be one of ${(e.params as { allowedValues: unknown[] }).allowedValues.join(', ')}.`;
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
      const first = err.validation[0] as ErrorObject | undefined;
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
      return send(req, reply, 'NAME_TAKEN', 409, u.message, u.field);
    }
    if (pg.code === '23503') return send(req, reply, 'CONFLICT', 409, 'Other records still refer to this one.');
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
const UNIQUE: Record<string, { field: string; message: string }> = {
  owners_name_key: { field: '/name', message: 'An owner with this name already exists.' },
  assets_owner_name_key: { field: '/name', message: 'An asset with this name already exists for this owner.' },
  zones_owner_name_key: { field: '/name', message: 'A zone with this name already exists for this owner.' },
  booking_data_owner_name_key: { field: '/name', message: 'Booking data with this name already exists for this owner.' },
  users_username_key: { field: '/username', message: 'That username is already in use.' },
  clients_client_id_key: { field: '/clientId', message: 'That clientId is already in use.' },
  integrations_name_key: { field: '/name', message: 'An integration with this name already exists.' },
};
