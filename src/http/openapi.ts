// What the OpenAPI document needs beyond the route schemas, so client generators get a clean one
// (Redocly's recommended rules): every operation named by a stable camelCase operationId,
// and a documented 2xx answer. Applied to every route in one onRoute hook (app.ts); a route that sets
// its own operationId or 2xx response keeps it.
import type { RouteOptions } from 'fastify';

// Paths that are not a resource collection or item, named by hand.
const NAMED: Record<string, string> = {
  'POST /auth/realms/:realm/protocol/openid-connect/token': 'requestToken',
  'GET /auth/realms/:realm/.well-known/openid-configuration': 'getOpenIdConfiguration',
  'GET /auth/realms/:realm/protocol/openid-connect/certs': 'getJsonWebKeySet',
  'GET /api/v1/locations/latest': 'listLatestLocations',
  'POST /api/v1/webhooks/test': 'testWebhook',
  'POST /ingest/traccar': 'forwardTraccarPosition',
  'GET /api/v1/ingest/errors': 'listIngestErrors',
};

const ITEM_VERBS: Record<string, string> = { GET: 'get', PUT: 'replace', PATCH: 'update', DELETE: 'delete', POST: 'create' };

const pascal = (s: string) =>
  s
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join('');
const camel = (s: string) => {
  const p = pascal(s);
  return p[0]!.toLowerCase() + p.slice(1);
};
// `sensor-data` is its own singular; `deliveries` -> `delivery`; `assets` -> `asset`.
const singular = (s: string) => (s.endsWith('data') ? s : s.endsWith('ies') ? `${s.slice(0, -3)}y` : s.replace(/s$/, ''));
const isCollection = (s: string) => s.endsWith('s') || s.endsWith('data');

/**
 * The operationId of a route: GET /assets listAssets, POST /assets createAsset, GET|PUT|PATCH|DELETE
 * /assets/{id} getAsset|replaceAsset|updateAsset|deleteAsset; a sub-collection is named with its parent
 * (GET /integrations/{id}/deliveries listIntegrationDeliveries); a last segment that is not a collection
 * is an action on what precedes it (POST .../deliveries/{deliveryId}/redeliver redeliverDelivery,
 * POST .../deliveries/redeliver redeliverDeliveries, GET /deliveries/stream streamDeliveries,
 * POST /integrations/{id}/rotate-signing-secret rotateIntegrationSigningSecret).
 */
export function operationIdFor(method: string, url: string): string {
  const named = NAMED[`${method} ${url}`];
  if (named) return named;
  const segs = url
    .replace(/^\/api\/v1(?=\/)/, '')
    .split('/')
    .filter(Boolean);
  const isParam = (i: number) => segs[i]?.startsWith(':') ?? false;
  // The singular names of the resources an item path passes through, e.g. /integrations/:id/... -> Integration.
  const parents = (end: number) => {
    let out = '';
    for (let i = 0; i < end; i++) if (!isParam(i) && isParam(i + 1)) out += pascal(singular(segs[i]!));
    return out;
  };
  const n = segs.length;
  if (n === 0) return camel(`${method} root`);
  if (isParam(n - 1)) {
    // An item: /things/:id under its parents.
    const noun = segs[n - 2] ?? 'item';
    return `${ITEM_VERBS[method] ?? method.toLowerCase()}${parents(n - 2)}${pascal(singular(noun))}`;
  }
  const last = segs[n - 1]!;
  if (isCollection(last) && (n === 1 || isParam(n - 2))) {
    if (method === 'GET') return `list${parents(n - 1)}${pascal(last)}`;
    if (method === 'POST') return `create${parents(n - 1)}${pascal(singular(last))}`;
    return `${method.toLowerCase()}${parents(n - 1)}${pascal(last)}`;
  }
  // An action: its verb, the thing acted on (an item when a parameter stands between), then the
  // rest of the action's words: POST /integrations/:id/rotate-signing-secret rotateIntegrationSigningSecret.
  const object = segs[isParam(n - 2) ? n - 3 : n - 2] ?? '';
  const [verb = '', ...rest] = last.split(/[^A-Za-z0-9]+/).filter(Boolean);
  return `${camel(verb)}${pascal(isParam(n - 2) ? singular(object) : object)}${pascal(rest.join('-'))}`;
}

/** Adds the operationId and, for a DELETE (every one answers 204), the 2xx response a route lacks. */
export function completeOperation(r: RouteOptions): void {
  const schema = r.schema as (RouteOptions['schema'] & { operationId?: string }) | undefined;
  if (!schema || schema.hide) return;
  const method = Array.isArray(r.method) ? r.method[0]! : r.method;
  schema.operationId ??= operationIdFor(method.toUpperCase(), r.url);
  const response = (schema.response ?? {}) as Record<string, unknown>;
  if (method.toUpperCase() === 'DELETE' && !Object.keys(response).some((code) => /^2/.test(code))) {
    schema.response = { ...response, 204: { type: 'null', description: 'Done; no body' } };
  }
}
