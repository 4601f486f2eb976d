// The webhook channel (API guide 9): one POST of exact bytes with the
// Standard Webhooks headers, the customer's auth, no redirects, a hard timeout, the vetted address
// dialled, and the response kept (body cut at 64 KiB). What a response means is decided in one
// table, `classify`: the engine never guesses.
import crypto from 'node:crypto';
import net from 'node:net';
import { Agent, request as undiciRequest } from 'undici';
import { resolveVetted, vettedLookup, AddressRefused, type AddressPolicy } from '../../address.js';
import type { WebhookIntegration } from '../../integrations/model.js';
import { setAtPath } from '../../../http/dotted-path.js';
import { type AttemptRecord, type Outcome, SCHEMA_VERSION } from '../channel.js';

export const USER_AGENT = 'asset-tracking-service/0.1 (+webhook)';
export const MAX_STORED_BODY = 64 * 1024;
const MAX_READ_BODY = 1024 * 1024;

/** API guide 9 ("Answers and retries"): what each answer means. */
export function classify(status: number | undefined, networkError: boolean, refused = false): Outcome {
  if (refused) return 'fail'; // the address rules refuse the endpoint: retrying cannot help
  if (networkError || status === undefined) return 'retry'; // timeouts, resets, DNS failures
  if (status >= 200 && status < 300) return 'success';
  if (status === 429) return 'pause';
  if (status >= 500) return 'retry';
  return 'fail'; // 1xx, 3xx (redirects are not followed) and 4xx other than 429
}

/** An attempt record without the broker fields (topic, partition, QoS) a webhook has none of. */
export type SendResult = Omit<AttemptRecord, 'topic' | 'partition' | 'qos'>;

/** Retry-After as seconds or an HTTP date, clamped to 1 s .. 1 h; 60 s when absent or unreadable. */
export function retryAfterSeconds(header: string | undefined, now = Date.now()): number {
  let s = NaN;
  if (header !== undefined) {
    if (/^\s*\d+(\.\d+)?\s*$/.test(header)) s = Number(header);
    else {
      const at = Date.parse(header);
      if (!Number.isNaN(at)) s = (at - now) / 1000;
    }
  }
  if (Number.isNaN(s)) s = 60;
  return Math.min(3600, Math.max(1, s));
}

/** Standard Webhooks signature over the exact body bytes: v1,base64(HMAC-SHA256(key, id.ts.body)). */
const keys = new Map<string, Buffer>();
export function sign(secret: string, id: string, timestamp: number, body: string): string {
  let key = keys.get(secret);
  if (!key) {
    key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
    if (keys.size > 10_000) keys.clear();
    keys.set(secret, key);
  }
  return `v1,${crypto.createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

/**
 * The webhook-signature header: one `v1,` signature per live secret, space-separated (Standard
 * Webhooks), so during a rotation's 24 h overlap a receiver holding either secret verifies.
 */
export function signatureHeader(cfg: WebhookIntegration, msg: WebhookMessage, timestamp: number, now = Date.now()): Record<string, string> {
  const { signingSecret, previousSigningSecret: prev } = cfg.webhook;
  const secrets = [signingSecret, prev && prev.until > now ? prev.secret : null].filter((x): x is string => x !== null);
  if (secrets.length === 0) return {}; // only the test endpoint's own sample goes unsigned
  return { 'webhook-signature': secrets.map((k) => sign(k, msg.id, timestamp, msg.body)).join(' ') };
}

/** Puts the event id at a dotted path, creating objects on the way (API guide 9), own members only. */
export function injectEventId(obj: Record<string, unknown>, eventId: string, path: string | null): Record<string, unknown> {
  const out = structuredClone(obj);
  setAtPath(out, (path ?? 'eventId').split('.'), eventId);
  return out;
}

// OAuth 2.0 client credentials: tokens cached per integration until shortly before they expire.
const oauthCache = new Map<string, { token: string; until: number }>();
const oauthPending = new Map<string, Promise<string>>(); // one fetch at a time per client

async function oauthToken(cfg: WebhookIntegration, policy: AddressPolicy): Promise<string> {
  const auth = cfg.webhook.auth;
  if (auth?.type !== 'oauth2') throw new Error('not an oauth2 integration');
  if ('token' in auth) return auth.token;
  const key = `${cfg.id}:${auth.tokenUrl}:${auth.clientId}`;
  const hit = oauthCache.get(key);
  if (hit && hit.until > Date.now()) return hit.token;
  let pending = oauthPending.get(key);
  if (!pending) {
    pending = fetchOauthToken(cfg, auth, key, policy).finally(() => oauthPending.delete(key));
    oauthPending.set(key, pending);
  }
  return pending;
}

async function fetchOauthToken(
  cfg: WebhookIntegration,
  auth: { tokenUrl: string; clientId: string; clientSecret: string; scope?: string },
  key: string,
  policy: AddressPolicy,
): Promise<string> {
  const form = new URLSearchParams({ grant_type: 'client_credentials', ...(auth.scope ? { scope: auth.scope } : {}) }).toString();
  const res = await request(
    auth.tokenUrl,
    form,
    {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: `Basic ${Buffer.from(`${encodeURIComponent(auth.clientId)}:${encodeURIComponent(auth.clientSecret)}`).toString('base64')}`,
    },
    cfg.webhook.timeoutMs,
    policy,
  );
  const text = res.body?.toString('utf8') ?? '';
  if (res.status === undefined || res.status < 200 || res.status >= 300) {
    throw new Error(`token endpoint answered ${res.status ?? res.error}: ${text.slice(0, 200)}`);
  }
  const body = JSON.parse(text || '{}') as { access_token?: string; expires_in?: number };
  if (!body.access_token) throw new Error('token endpoint gave no access_token');
  const life = Number(body.expires_in ?? 300);
  oauthCache.set(key, { token: body.access_token, until: Date.now() + Math.max(0, life - 30) * 1000 });
  return body.access_token;
}

async function authHeaders(cfg: WebhookIntegration, policy: AddressPolicy): Promise<Record<string, string>> {
  const a = cfg.webhook.auth;
  if (!a) return {};
  switch (a.type) {
    case 'apiKey':
      return { authorization: `Bearer ${a.token}` };
    case 'oauth2':
      return { authorization: `Bearer ${await oauthToken(cfg, policy)}` };
    case 'header':
      return { [a.name.toLowerCase()]: a.value };
    case 'basic':
      return { authorization: `Basic ${Buffer.from(`${a.username}:${a.password}`).toString('base64')}` };
  }
}

// Keep-alive connections (undici: about half the CPU per request of node:http), one pool per
// policy; new connections resolve through the vetting lookup, and a kept connection stays on the
// address that was vetted when it opened.
const agents = new WeakMap<AddressPolicy, Agent>();
function agentFor(policy: AddressPolicy): Agent {
  let a = agents.get(policy);
  if (!a) {
    a = new Agent({ connections: 256, keepAliveTimeout: 30_000, connect: { lookup: vettedLookup(policy) } });
    agents.set(policy, a);
  }
  return a;
}

export function closeAgents(policy: AddressPolicy): void {
  const a = agents.get(policy);
  agents.delete(policy);
  void a?.destroy().catch(() => {});
}

interface RawResponse {
  status?: number;
  headers?: Record<string, string>;
  /** The first 64 KiB as sent: bytes, not text (a receiver may send anything, NUL included). */
  body?: Buffer;
  bytes?: number;
  truncated?: boolean;
  error?: string;
  refused?: boolean;
  ms: number;
}

/** Parsed destination URLs: the same few strings are sent to thousands of times a second. */
const urls = new Map<string, URL>();
function parsedUrl(raw: string): URL {
  let u = urls.get(raw);
  if (!u) {
    u = new URL(raw);
    if (urls.size > 10_000) urls.clear();
    urls.set(raw, u);
  }
  return u;
}

/** One POST: vetted address, hard timeout, no redirects, body read up to 1 MiB (the first 64 KiB kept). */
async function request(
  url: string,
  body: string,
  headers: Record<string, string>,
  timeoutMs: number,
  policy: AddressPolicy,
): Promise<RawResponse> {
  const started = performance.now();
  const ms = () => Math.round(performance.now() - started);
  let u: URL;
  try {
    u = parsedUrl(url);
  } catch {
    return { error: 'invalid URL', refused: true, ms: ms() };
  }
  if (u.protocol !== 'https:' && !(u.protocol === 'http:' && policy.allowHttp)) {
    return { error: `${u.protocol} is not allowed`, refused: true, ms: ms() };
  }
  const host = u.hostname.replace(/^\[|\]$/g, '');
  const timeout = AbortSignal.timeout(timeoutMs);
  try {
    // IP literals are not looked up: vet them here; names are vetted by the agent's lookup when a
    // connection opens (the address checked is the one connected to), not again per request.
    if (net.isIP(host)) await resolveVetted(host, policy);
    const res = await undiciRequest(u, { method: 'POST', headers, body, dispatcher: agentFor(policy), signal: timeout });
    const ok = res.statusCode >= 200 && res.statusCode < 300;
    const chunks: Buffer[] = [];
    let bytes = 0;
    let kept = 0;
    for await (const c of res.body as AsyncIterable<Buffer>) {
      bytes += c.length;
      if (kept < MAX_STORED_BODY) {
        chunks.push(c.subarray(0, MAX_STORED_BODY - kept));
        kept += Math.min(c.length, MAX_STORED_BODY - kept);
      }
      if (bytes > MAX_READ_BODY) {
        res.body.destroy(); // enough: we keep 64 KiB anyway
        break;
      }
    }
    // A success keeps no headers (API guide 9); fromEntries defines own members: a header named
    // __proto__ stays an ordinary member.
    const hdrs: Record<string, string> | undefined = ok
      ? undefined
      : Object.fromEntries(
          Object.entries(res.headers).flatMap(([k, v]) => (v === undefined ? [] : [[k, Array.isArray(v) ? v.join(', ') : v]])),
        );
    return {
      status: res.statusCode,
      headers: hdrs,
      body: Buffer.concat(chunks),
      bytes,
      truncated: bytes > kept,
      ms: ms(),
    };
  } catch (e) {
    const err = e as NodeJS.ErrnoException & { cause?: NodeJS.ErrnoException };
    if (timeout.aborted) return { error: `timed out after ${timeoutMs} ms`, ms: ms() };
    const cause = err.cause ?? err;
    return {
      error: cause.message || cause.code || err.message || 'network error',
      // A refused address, or a request undici will not send as configured (a forbidden header
      // name in custom auth): retrying cannot help.
      refused:
        cause.code === 'ADDRESS_REFUSED' ||
        cause instanceof AddressRefused ||
        e instanceof AddressRefused ||
        err.code === 'UND_ERR_INVALID_ARG',
      ms: ms(),
    };
  }
}

export interface WebhookMessage {
  url: string;
  id: string; // webhook-id: the event id (single) or the batch id (batch)
  objectType: string;
  body: string;
  /** Headers of the body's format (dcsa-tnt-3: API-Version). */
  headers?: Record<string, string>;
}

export async function sendWebhook(cfg: WebhookIntegration, msg: WebhookMessage, policy: AddressPolicy): Promise<SendResult> {
  const timestamp = Math.floor(Date.now() / 1000);
  let headers: Record<string, string>;
  try {
    headers = {
      'content-type': 'application/json',
      'user-agent': USER_AGENT,
      'webhook-object-type': msg.objectType,
      'webhook-schema-version': SCHEMA_VERSION,
      'webhook-id': msg.id,
      'webhook-timestamp': String(timestamp),
      ...msg.headers,
      ...signatureHeader(cfg, msg, timestamp),
      ...(await authHeaders(cfg, policy)),
    };
  } catch (e) {
    // Could not get an OAuth token: retry later, like a network error.
    return {
      outcome: 'retry',
      httpStatus: null,
      responseTimeMs: 0,
      receiptId: null,
      error: `auth: ${(e as Error).message}`,
      responseHeaders: null,
      responseBody: null,
      responseBodyBytes: null,
      truncated: false,
      retryAfterSeconds: null,
    };
  }
  const r = await request(msg.url, msg.body, headers, cfg.webhook.timeoutMs, policy);
  const outcome = classify(r.status, r.error !== undefined, r.refused);
  let receiptId: string | null = null;
  if (outcome === 'success' && r.body) {
    try {
      const parsed = JSON.parse(r.body.toString('utf8')) as { success?: unknown; id?: unknown };
      if (parsed && typeof parsed === 'object' && (typeof parsed.id === 'string' || typeof parsed.id === 'number'))
        receiptId = String(parsed.id).slice(0, 255);
    } catch {
      /* a body is optional, and need not be JSON */
    }
  }
  return {
    outcome,
    httpStatus: r.status ?? null,
    responseTimeMs: r.ms,
    receiptId,
    error: r.error ?? (outcome === 'success' ? null : `HTTP ${r.status}`),
    responseHeaders: r.headers ?? null,
    responseBody: r.body ?? null,
    responseBodyBytes: r.bytes ?? null,
    truncated: r.truncated ?? false,
    retryAfterSeconds: outcome === 'pause' ? retryAfterSeconds(r.headers?.['retry-after']) : null,
  };
}
