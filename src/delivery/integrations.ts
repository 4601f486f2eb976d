// Push integrations (API.md sections 4 and 9), operator only: which owners' records (descendants
// included) of which object types go where, and how. Credentials are write-only: stored encrypted
// with SECRETS_KEY, never returned; a PUT or PATCH that leaves them out keeps them.
import crypto from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import type { Db, Queryable } from '../db/db.js';
import { decrypt, encrypt } from '../auth/crypto.js';
import { ApiError, badRequest, notFound } from '../http/errors.js';
import { parseDottedPath } from '../http/dotted-path.js';
import { listPage, PageQuery } from '../http/paging.js';
import { DateTime, IdParam, iso, isUuid, Nullable, Str, Uuid } from '../http/schemas.js';
import { OBJECT_TYPES, type ObjectType } from '../outbox/outbox.js';
import type { Tenancy } from '../tenancy/tenancy.js';
import { AddressRefused, vetUrl, type AddressPolicy } from './address.js';
import { mergePatch } from '../http/merge-patch.js';
import { composeKafka, composeMqtt, checkTopics } from './broker-settings.js';
import { cancelIntegration, startIntegration, stats } from './queue.js';

const ObjectTypeSchema = Type.Union(OBJECT_TYPES.map((t) => Type.Literal(t)));

export const DEFAULT_SCHEDULE_SECONDS = [5, 30, 120, 600, 1800, 3600];
const RetrySchema = Type.Object({
  scheduleSeconds: Type.Optional(
    Type.Array(Type.Number({ minimum: 0.01, maximum: 86400 }), {
      minItems: 1,
      maxItems: 50,
      description: 'Delays between attempts; the last repeats. Default 5, 30, 120, 600, 1800, 3600',
    }),
  ),
  maxAttempts: Type.Optional(Type.Integer({ minimum: 1, maximum: 10000, description: 'Default 30' })),
  deadlineHours: Type.Optional(Type.Number({ minimum: 0.0001, maximum: 720, description: 'After the first attempt; default 24' })),
});

const AuthIn = Type.Union([
  Type.Object({ type: Type.Literal('apiKey'), token: Str(4096, { minLength: 1 }) }),
  Type.Object({ type: Type.Literal('oauth2'), token: Str(8192, { minLength: 1 }) }),
  Type.Object({
    type: Type.Literal('oauth2'),
    tokenUrl: Str(2048, { minLength: 1 }),
    clientId: Str(255, { minLength: 1 }),
    clientSecret: Str(4096, { minLength: 1 }),
    scope: Type.Optional(Str(1024)),
  }),
  Type.Object({
    type: Type.Literal('header'),
    name: Type.String({ minLength: 1, maxLength: 256, pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$" }),
    value: Str(8192, { minLength: 1 }),
  }),
  Type.Object({ type: Type.Literal('basic'), username: Str(255, { minLength: 1 }), password: Str(1024) }),
]);
type AuthIn = Static<typeof AuthIn>;
/** The write-only members of each auth kind: never returned, kept when left out. */
const SECRET_FIELDS: readonly string[] = ['token', 'clientSecret', 'value', 'password'];
/**
 * The body's auth: AuthIn with its secret member optional. API.md 1: a GET body put back carries
 * auth without the write-only secret; keepSecret then keeps the stored one.
 */
const AuthBody = Type.Union(
  AuthIn.anyOf.map((o) =>
    Type.Object(Object.fromEntries(Object.entries(o.properties).map(([k, v]) => [k, SECRET_FIELDS.includes(k) ? Type.Optional(v) : v]))),
  ),
);

/**
 * Auth given without its secret keeps the stored secret only when every other member is unchanged
 * (a GET body put back): a stored secret never follows a new tokenUrl, header name or username.
 */
function keepSecret(given: Record<string, unknown> | null, stored: AuthIn | null): AuthIn | null {
  if (given === null) return null;
  const t = given.type;
  const need =
    t === 'apiKey' ? 'token' : t === 'header' ? 'value' : t === 'basic' ? 'password' : 'tokenUrl' in given ? 'clientSecret' : 'token';
  if (given[need] !== undefined) return given as AuthIn;
  if (stored && isDeepStrictEqual(publicAuth(stored), given)) return stored;
  throw badRequest(
    `/webhook/auth/${need} is required (left out, the stored one is kept only when the rest of auth is unchanged).`,
    `/webhook/auth/${need}`,
  );
}

const WebhookIn = Type.Object({
  mode: Type.Optional(Type.Union([Type.Literal('single'), Type.Literal('batch')])),
  batchSize: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
  maxItemsPerMinute: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: 10_000_000 }))),
  maxConcurrentRequests: Type.Optional(Type.Integer({ minimum: 1, maximum: 256 })),
  timeoutMs: Type.Optional(Type.Integer({ minimum: 100, maximum: 120_000 })),
  injectEventId: Type.Optional(Type.Boolean({ description: 'Default: true when injectEventIdPath is named' })),
  injectEventIdPath: Type.Optional(Nullable(Type.String({ maxLength: 200, pattern: '^[A-Za-z0-9_$-]+(\\.[A-Za-z0-9_$-]+)*$' }))),
  auth: Type.Optional(Nullable(AuthBody)),
  signingSecret: Type.Optional(
    Type.String({
      pattern: '^whsec_[A-Za-z0-9+/=]{16,}$',
      maxLength: 512,
      description: 'Standard Webhooks secret; generated when left out. A new value rotates: the previous one keeps signing for 24 h',
    }),
  ),
});

const Pem = (what: string) => Nullable(Str(65536, { minLength: 1, description: `${what} (PEM)` }));
const FieldName = Type.String({ minLength: 1, maxLength: 100, pattern: '^[A-Za-z_$][A-Za-z0-9_$-]*$' });
/** Settings both broker channels share: how events are grouped into requests and how fast they go. */
const BrokerFlow = {
  topicPerType: Type.Optional(
    Type.Boolean({ description: 'One topic per object type (<prefix>/events/<type>, Kafka <prefix>.events.<type>); default one topic' }),
  ),
  batchSize: Type.Optional(
    Type.Integer({ minimum: 1, maximum: 5000, description: 'Events per request (each its own message); default 500' }),
  ),
  maxConcurrentRequests: Type.Optional(Type.Integer({ minimum: 1, maximum: 64 })),
  maxItemsPerMinute: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: 100_000_000 }))),
  timeoutMs: Type.Optional(
    Type.Integer({ minimum: 100, maximum: 120_000, description: 'Connect and acknowledgement wait; default 10000' }),
  ),
};
const MqttIn = Type.Object({
  url: Str(2048, { minLength: 1, description: 'mqtt://host:port or mqtts://host:port (TLS)' }),
  qos: Type.Optional(Type.Union([Type.Literal(0), Type.Literal(1), Type.Literal(2)], { description: 'Default 1' })),
  protocolVersion: Type.Optional(Type.Union([Type.Literal(4), Type.Literal(5)], { description: 'MQTT 3.1.1 (4) or 5 (default)' })),
  setEventId: Type.Optional(
    Type.Boolean({ description: 'MQTT_SET_EVENT_ID: add the event id at the top level (default: true when eventIdField is named)' }),
  ),
  eventIdField: Type.Optional(Nullable(FieldName)),
  clientId: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_-]+$' }))),
  username: Type.Optional(Nullable(Str(255, { minLength: 1 }))),
  password: Type.Optional(Nullable(Str(1024, { minLength: 1, description: 'Write-only' }))),
  ca: Type.Optional(Pem("The broker's CA certificate")),
  cert: Type.Optional(Pem('TLS client certificate')),
  key: Type.Optional(Pem('TLS client key; write-only')),
  maxInFlight: Type.Optional(
    Type.Integer({ minimum: 1, maximum: 65535, description: "Unacknowledged messages at once; never above the broker's Receive Maximum" }),
  ),
  ...BrokerFlow,
});
const KafkaIn = Type.Object({
  brokers: Type.Array(Str(300, { minLength: 3, description: 'host:port' }), { minItems: 1, maxItems: 20 }),
  acks: Type.Optional(Type.Union([Type.Literal(0), Type.Literal(1), Type.Literal('all')], { description: 'Default all' })),
  keyPath: Type.Optional(
    Nullable(Type.String({ maxLength: 200, description: 'Dotted path of the payload value used as message key; null spreads evenly' })),
  ),
  clientId: Type.Optional(Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9._-]+$' })),
  sasl: Type.Optional(
    Nullable(
      Type.Object({
        mechanism: Type.Union([Type.Literal('plain'), Type.Literal('scram-sha-256'), Type.Literal('scram-sha-512')]),
        username: Str(255, { minLength: 1 }),
        password: Type.Optional(Str(1024, { minLength: 1, description: 'Write-only' })),
      }),
    ),
  ),
  ssl: Type.Optional(
    Nullable(
      Type.Object(
        {
          ca: Type.Optional(Pem("The brokers' CA certificate")),
          cert: Type.Optional(Pem('TLS client certificate')),
          key: Type.Optional(Pem('Write-only')),
        },
        { description: 'TLS on (an empty object: TLS with the system CAs); null or absent: plaintext' },
      ),
    ),
  ),
  metadata: Type.Optional(
    Type.Record(Type.String({ maxLength: 100 }), Type.Union([Type.String({ maxLength: 1024 }), Type.Number(), Type.Boolean()]), {
      maxProperties: 50,
      description: 'Fields added to every object; a name may not be a field of the object',
    }),
  ),
  ...BrokerFlow,
});
const CHANNELS = ['webhook', 'mqtt', 'kafka'] as const;
type ChannelName = (typeof CHANNELS)[number];

const IntegrationIn = Type.Object({
  name: Str(255, { minLength: 1 }),
  channel: Type.Union(
    CHANNELS.map((c) => Type.Literal(c)),
    { description: 'Fixed at creation' },
  ),
  enabled: Type.Optional(Type.Boolean()),
  ownerIds: Type.Array(Type.String({ format: 'uuid' }), { minItems: 1, maxItems: 1000, uniqueItems: true }),
  objectTypes: Type.Optional(Type.Array(ObjectTypeSchema, { minItems: 1, uniqueItems: true })),
  destination: Str(2048, {
    minLength: 1,
    description: 'Webhook URL, or the MQTT or Kafka topic prefix, for every type without its own',
  }),
  destinations: Type.Optional(
    Type.Record(Type.String(), Str(2048, { minLength: 1 }), { description: 'Per object type: a webhook URL or a whole topic name' }),
  ),
  retry: Type.Optional(RetrySchema),
  maxBacklogHours: Type.Optional(
    Type.Number({
      minimum: 0.01,
      maximum: 8760,
      description: 'Events waiting longer than this become FAILED (backlog expired); default 72',
    }),
  ),
  webhook: Type.Optional(WebhookIn),
  mqtt: Type.Optional(MqttIn),
  kafka: Type.Optional(KafkaIn),
});
type IntegrationIn = Static<typeof IntegrationIn>;
/** A merge patch: every member optional, inside the broker settings too (PATCH {"mqtt": {"qos": 2}}). */
const IntegrationPatch = Type.Partial(
  Type.Object({ ...IntegrationIn.properties, mqtt: Type.Partial(MqttIn), kafka: Type.Partial(KafkaIn) }),
);

const AuthOut = Type.Object({
  type: Type.String(),
  tokenUrl: Type.Optional(Type.String()),
  clientId: Type.Optional(Type.String()),
  scope: Type.Optional(Type.String()),
  name: Type.Optional(Type.String()),
  username: Type.Optional(Type.String()),
});
const FlowOut = {
  topicPerType: Type.Boolean(),
  batchSize: Type.Integer(),
  maxConcurrentRequests: Type.Integer(),
  maxItemsPerMinute: Nullable(Type.Integer()),
  timeoutMs: Type.Integer(),
};
const MqttOut = Type.Object({
  url: Type.String(),
  qos: Type.Integer(),
  protocolVersion: Type.Integer(),
  setEventId: Type.Boolean(),
  eventIdField: Nullable(Type.String({ description: 'The field the event id goes in; null when setEventId is false' })),
  clientId: Nullable(Type.String()),
  username: Nullable(Type.String()),
  passwordSet: Type.Boolean(),
  ca: Nullable(Type.String()),
  cert: Nullable(Type.String()),
  keySet: Type.Boolean(),
  maxInFlight: Type.Integer(),
  ...FlowOut,
});
const KafkaOut = Type.Object({
  brokers: Type.Array(Type.String()),
  acks: Type.Union([Type.Literal(0), Type.Literal(1), Type.Literal('all')]),
  keyPath: Nullable(Type.String()),
  clientId: Type.String(),
  sasl: Nullable(Type.Object({ mechanism: Type.String(), username: Type.String(), passwordSet: Type.Boolean() })),
  ssl: Nullable(Type.Object({ ca: Nullable(Type.String()), cert: Nullable(Type.String()), keySet: Type.Boolean() })),
  metadata: Type.Record(Type.String(), Type.Unknown()),
  ...FlowOut,
});
const Counts = Type.Object({ lastHour: Type.Integer(), lastDay: Type.Integer() });
const IntegrationStats = Type.Object(
  {
    pending: Type.Integer({
      description: 'Events covered and not yet in a final state (retrying and disabled backlog included); above 10,000 an estimate',
    }),
    delivered: Counts,
    failed: Counts,
    lastSuccessAt: Nullable(DateTime),
    lastErrorAt: Nullable(DateTime),
    lastError: Nullable(Type.String()),
    pausedUntil: Nullable(DateTime),
    p50LatencyMs: Nullable(Type.Integer({ description: 'Store to delivery over the last hour' })),
    p99LatencyMs: Nullable(Type.Integer()),
  },
  { description: 'Only in GET /integrations/{id}, and in the list with stats=true' },
);

export const Integration = Type.Object(
  {
    id: Uuid,
    name: Type.String(),
    channel: Type.String(),
    enabled: Type.Boolean(),
    ownerIds: Type.Array(Uuid),
    objectTypes: Type.Array(Type.String()),
    destination: Type.String(),
    destinations: Type.Record(Type.String(), Type.String()),
    retry: Type.Object({ scheduleSeconds: Type.Array(Type.Number()), maxAttempts: Type.Integer(), deadlineHours: Type.Number() }),
    maxBacklogHours: Type.Number(),
    webhook: Type.Optional(
      Type.Object({
        mode: Type.String(),
        batchSize: Type.Integer(),
        maxItemsPerMinute: Nullable(Type.Integer()),
        maxConcurrentRequests: Type.Integer(),
        timeoutMs: Type.Integer(),
        injectEventId: Type.Boolean(),
        injectEventIdPath: Nullable(Type.String()),
        auth: Nullable(AuthOut),
        signingSecretSet: Type.Boolean({ description: 'Always true: every webhook is signed' }),
        signingSecret: Type.Optional(Type.String({ description: 'Only in the answer to a create or a rotation: shown once' })),
        previousSigningSecretExpiresAt: Nullable(DateTime),
      }),
    ),
    mqtt: Type.Optional(MqttOut),
    kafka: Type.Optional(KafkaOut),
    whenCreated: DateTime,
    whenUpdated: DateTime,
    stats: Type.Optional(IntegrationStats),
  },
  { title: 'Integration' },
);

/** What the engine and the channels need, decrypted: a union keyed by channel. */
export type IntegrationConfig = WebhookIntegration | MqttIntegration | KafkaIntegration;

interface IntegrationBase {
  id: string;
  name: string;
  enabled: boolean;
  maxBacklogHours: number;
  ownerIds: string[];
  destination: string;
  destinations: Partial<Record<ObjectType, string>>;
  retry: { scheduleSeconds: number[]; maxAttempts: number; deadlineHours: number };
}

export interface WebhookIntegration extends IntegrationBase {
  channel: 'webhook';
  webhook: {
    mode: 'single' | 'batch';
    batchSize: number;
    maxItemsPerMinute: number | null;
    maxConcurrentRequests: number;
    timeoutMs: number;
    injectEventId: boolean;
    injectEventIdPath: string | null;
    auth: AuthIn | null;
    signingSecret: string | null;
    /** The secret before the last rotation, still signing until `until` (epoch ms). */
    previousSigningSecret: { secret: string; until: number } | null;
  };
}

/** How a broker channel groups events into requests and paces them. */
export interface BrokerFlow {
  topicPerType: boolean;
  batchSize: number;
  maxConcurrentRequests: number;
  maxItemsPerMinute: number | null;
  timeoutMs: number;
}

export interface MqttIntegration extends IntegrationBase {
  channel: 'mqtt';
  mqtt: BrokerFlow & {
    url: string;
    qos: 0 | 1 | 2;
    protocolVersion: 4 | 5;
    setEventId: boolean;
    eventIdField: string | null;
    clientId: string | null;
    username: string | null;
    password: string | null;
    ca: string | null;
    cert: string | null;
    key: string | null;
    maxInFlight: number;
  };
}

export interface KafkaIntegration extends IntegrationBase {
  channel: 'kafka';
  kafka: BrokerFlow & {
    brokers: string[];
    acks: 0 | 1 | 'all';
    keyPath: string | null;
    clientId: string;
    sasl: { mechanism: 'plain' | 'scram-sha-256' | 'scram-sha-512'; username: string; password: string | null } | null;
    ssl: { ca: string | null; cert: string | null; key: string | null } | null;
    metadata: Record<string, string | number | boolean>;
  };
}

export interface Row {
  id: string;
  name: string;
  channel: ChannelName;
  enabled: boolean;
  owner_ids: string[];
  object_types: string[];
  destination: string;
  destinations: Record<string, string>;
  retry: IntegrationConfig['retry'];
  max_backlog_hours: number;
  /** The channel's public settings, as returned (write-only members left out). */
  settings: Record<string, unknown>;
  secrets: string | null;
  when_created: Date;
  when_updated: Date;
}
const SELECT =
  'id, name, channel, enabled, owner_ids::text[] AS owner_ids, object_types, destination, destinations, retry, max_backlog_hours, settings, secrets, when_created, when_updated';

interface Secrets {
  auth: AuthIn | null;
  signingSecret: string | null;
  previousSigningSecret?: { secret: string; until: number } | null;
  /** Broker channels: the password (MQTT, Kafka SASL) and the TLS client key. */
  password?: string | null;
  key?: string | null;
}

/** API.md 9: after a rotation the previous secret keeps signing this long, as Svix does. */
export const SECRET_OVERLAP_MS = 24 * 3600_000;
/** A Standard Webhooks secret: whsec_ and 32 random bytes in base64. */
export const newSigningSecret = () => `whsec_${crypto.randomBytes(32).toString('base64')}`;
const readSecrets = (key: Buffer, sealed: string | null): Secrets =>
  sealed ? JSON.parse(decrypt(key, sealed)) : { auth: null, signingSecret: null, previousSigningSecret: null };

const publicAuth = (a: AuthIn | null) => {
  if (!a) return null;
  return Object.fromEntries(Object.entries(a).filter(([k]) => !SECRET_FIELDS.includes(k))) as Static<typeof AuthOut>;
};

/** Stored public settings without the flags that describe secrets (a nested sasl or ssl keeps its own shape). */
function stripSecretFlags(st: Record<string, unknown>): Record<string, unknown> {
  const { passwordSet: _p, keySet: _k, ...out } = st;
  for (const k of ['sasl', 'ssl'] as const) {
    const v = out[k] as Record<string, unknown> | null | undefined;
    if (v) {
      const { passwordSet: _p, keySet: _k, ...rest } = v;
      out[k] = rest;
    }
  }
  return out;
}

/** The channel's settings as the API shows them: only the integration's own channel has a member. */
function channelOut(r: Row): Record<string, unknown> {
  const st = r.settings;
  if (r.channel === 'webhook') {
    return {
      webhook: {
        ...st,
        // Saved before a path turned the injection on: a path that does nothing is shown as none.
        injectEventIdPath: st.injectEventId === true ? (st.injectEventIdPath ?? null) : null,
        signingSecretSet: r.secrets !== null && st.signingSecretSet === true,
        previousSigningSecretExpiresAt: st.previousSigningSecretExpiresAt ?? null,
      },
    };
  }
  if (r.channel === 'mqtt' && st.setEventId !== true) return { mqtt: { ...st, eventIdField: null } };
  return { [r.channel]: st };
}

const toApi = (r: Row) => ({
  id: r.id,
  name: r.name,
  channel: r.channel,
  enabled: r.enabled,
  ownerIds: r.owner_ids,
  objectTypes: r.object_types,
  destination: r.destination,
  destinations: r.destinations,
  retry: r.retry,
  maxBacklogHours: r.max_backlog_hours,
  ...channelOut(r),
  whenCreated: iso(r.when_created)!,
  whenUpdated: iso(r.when_updated)!,
});

/** The API shape, with a new signing secret in the one answer that shows it. */
const withShownSecret = (r: Row, shown: string | undefined) => {
  const out = toApi(r) as ReturnType<typeof toApi> & { webhook?: Record<string, unknown> };
  return shown === undefined || !out.webhook ? out : { ...out, webhook: { ...out.webhook, signingSecret: shown } };
};

export function loadConfigFromRow(r: Row, key: Buffer): IntegrationConfig {
  const secrets = readSecrets(key, r.secrets);
  const base: IntegrationBase = {
    id: r.id,
    name: r.name,
    enabled: r.enabled,
    maxBacklogHours: r.max_backlog_hours,
    ownerIds: r.owner_ids,
    destination: r.destination,
    destinations: r.destinations as IntegrationConfig['destinations'],
    retry: r.retry,
  };
  if (r.channel === 'mqtt') {
    const { passwordSet: _p, keySet: _k, ...st } = r.settings;
    return {
      ...base,
      channel: 'mqtt',
      mqtt: { ...(st as unknown as MqttIntegration['mqtt']), password: secrets.password ?? null, key: secrets.key ?? null },
    };
  }
  if (r.channel === 'kafka') {
    const st = r.settings as unknown as Omit<KafkaIntegration['kafka'], 'sasl' | 'ssl'> & {
      sasl: { mechanism: 'plain' | 'scram-sha-256' | 'scram-sha-512'; username: string } | null;
      ssl: { ca: string | null; cert: string | null } | null;
    };
    return {
      ...base,
      channel: 'kafka',
      kafka: {
        ...st,
        sasl: st.sasl ? { mechanism: st.sasl.mechanism, username: st.sasl.username, password: secrets.password ?? null } : null,
        ssl: st.ssl ? { ca: st.ssl.ca, cert: st.ssl.cert, key: secrets.key ?? null } : null,
      },
    };
  }
  const { auth: _a, signingSecretSet: _s, previousSigningSecretExpiresAt: _p, ...settings } = r.settings;
  return {
    ...base,
    channel: 'webhook',
    webhook: {
      ...(settings as Omit<WebhookIntegration['webhook'], 'auth' | 'signingSecret' | 'previousSigningSecret'>),
      auth: secrets.auth,
      signingSecret: secrets.signingSecret,
      previousSigningSecret: secrets.previousSigningSecret ?? null,
    },
  };
}

export async function loadIntegration(q: Queryable, id: string, key: Buffer): Promise<IntegrationConfig | null> {
  const { rows } = await q.query<Row>(`SELECT ${SELECT} FROM integrations WHERE id = $1 AND deleted_at IS NULL`, [id]);
  return rows[0] ? loadConfigFromRow(rows[0], key) : null;
}

/**
 * Webhook event id injection (API guide 9): naming a path turns it on; injectEventId alone puts
 * `eventId` at the top level; off keeps no path. A path given while injectEventId is false would be
 * accepted and ignored: a 400 instead. A patch that turns it off drops the stored path.
 */
function injection(
  given: { injectEventId?: boolean; injectEventIdPath?: string | null },
  stored: Record<string, unknown> | undefined,
): { injectEventId: boolean; injectEventIdPath: string | null } {
  const path = given.injectEventIdPath;
  if (given.injectEventId === false && path != null) {
    throw badRequest(
      '/webhook/injectEventIdPath is given while injectEventId is false: remove it, or set injectEventId to true',
      '/webhook/injectEventIdPath',
    );
  }
  if (given.injectEventId === false) return { injectEventId: false, injectEventIdPath: null };
  const on = given.injectEventId ?? (path != null ? true : ((stored?.injectEventId as boolean | undefined) ?? false));
  const kept = path !== undefined ? path : ((stored?.injectEventIdPath as string | null | undefined) ?? null);
  return { injectEventId: on, injectEventIdPath: on ? kept : null };
}

/** Runs fn again (up to 5 times) when PostgreSQL aborts it as a deadlock victim. */
async function retryDeadlock<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (e) {
      if ((e as { code?: string }).code !== '40P01' || attempt >= 5) throw e;
      await new Promise((r) => setTimeout(r, 10 * attempt));
    }
  }
}

/**
 * Integrations saved before every webhook was signed get a secret at start (the operator sees it
 * by rotating). The condition makes it safe when several instances start at once.
 */
async function signUnsignedIntegrations(db: Db, key: Buffer): Promise<void> {
  const { rows } = await db.query<Row>(
    `SELECT ${SELECT} FROM integrations WHERE channel = 'webhook' AND (settings->>'signingSecretSet') IS DISTINCT FROM 'true'`,
  );
  for (const r of rows) {
    const secrets: Secrets = { ...readSecrets(key, r.secrets), signingSecret: newSigningSecret(), previousSigningSecret: null };
    await db.query(
      `UPDATE integrations SET secrets = $2, settings = settings || '{"signingSecretSet": true}'::jsonb
        WHERE id = $1 AND (settings->>'signingSecretSet') IS DISTINCT FROM 'true'`,
      [r.id, encrypt(key, JSON.stringify(secrets))],
    );
  }
}

export async function integrationRoutes(app: FastifyInstance, opts: { db: Db; secretsKey: Buffer; policy: AddressPolicy }): Promise<void> {
  const { db, secretsKey, policy } = opts;
  await signUnsignedIntegrations(db, secretsKey);
  const tags = ['integrations'];
  const admin = { scope: 'admin' as const };

  const vet = async (url: string, field: string) => {
    try {
      await vetUrl(url, policy);
    } catch (e) {
      if (e instanceof AddressRefused) throw badRequest(`${field}: ${e.message}`, field);
      throw e;
    }
  };

  /** Merges input over the current row (PATCH) or defaults (create/PUT) and validates it all. */
  const compose = async (t: Tenancy, q: Queryable, b: Partial<IntegrationIn>, cur: Row | null, mode: 'create' | 'put' | 'patch') => {
    const base = mode === 'patch' ? cur : null;
    const curSecrets = readSecrets(secretsKey, cur?.secrets ?? null);
    const channel: ChannelName = b.channel ?? cur?.channel ?? 'webhook';
    if (cur && channel !== cur.channel) {
      throw badRequest(`/channel: an integration's channel is fixed (${cur.channel}); create a new integration for ${channel}`, '/channel');
    }
    for (const other of CHANNELS) {
      if (other !== channel && b[other] !== undefined) {
        throw badRequest(`/${other}: settings of the ${other} channel, but this integration's channel is ${channel}`, `/${other}`);
      }
    }
    const ownerIds = b.ownerIds ?? base?.owner_ids ?? [];
    for (const [n, id] of ownerIds.entries()) {
      if (!(await t.sees(id, q))) throw new ApiError('NOT_FOUND', `owner ${id} not found`, { field: `/ownerIds/${n}` });
    }
    const objectTypes = b.objectTypes ?? base?.object_types ?? [...OBJECT_TYPES];
    const destination = b.destination ?? base?.destination ?? '';
    const destinations = (b.destinations ?? base?.destinations ?? {}) as Record<string, string>;
    if (channel === 'webhook') {
      if (b.destination !== undefined) await vet(destination, '/destination');
      for (const [type, url] of Object.entries(b.destinations ?? {})) {
        if (!(OBJECT_TYPES as readonly string[]).includes(type))
          throw badRequest(`/destinations: unknown object type "${type}"`, `/destinations/${type}`);
        await vet(url, `/destinations/${type}`);
      }
    } else checkTopics(channel, destination, destinations);
    const retryIn = { ...(base?.retry ?? {}), ...(b.retry ?? {}) };
    const retry = {
      scheduleSeconds: retryIn.scheduleSeconds ?? DEFAULT_SCHEDULE_SECONDS,
      maxAttempts: retryIn.maxAttempts ?? 30,
      deadlineHours: retryIn.deadlineHours ?? 24,
    };
    const common = {
      name: b.name ?? base?.name ?? '',
      channel,
      enabled: b.enabled ?? base?.enabled ?? true,
      ownerIds,
      objectTypes,
      destination,
      destinations,
      retry,
      maxBacklogHours: b.maxBacklogHours ?? base?.max_backlog_hours ?? 72,
    };
    if (channel !== 'webhook') {
      // The stored public settings without the flags that only describe secrets; PATCH merges over them.
      const stored = stripSecretFlags(cur?.settings ?? {});
      // Saved before naming a field turned the injection on: an unused field name is no field.
      if (stored.setEventId === false) stored.eventIdField = null;
      const given = (b[channel] ?? {}) as Record<string, unknown>;
      const input = (mode === 'patch' ? mergePatch(stored, given) : given) as Record<string, unknown>;
      if (mode === 'patch' && channel === 'mqtt') {
        // A patch that turns the injection off drops the field; one that names a field turns it on.
        if (given.setEventId === false && given.eventIdField === undefined) input.eventIdField = null;
        if (typeof given.eventIdField === 'string' && given.setEventId === undefined) input.setEventId = true;
      }
      const curBroker = cur ? { settings: stored, secrets: { password: curSecrets.password ?? null, key: curSecrets.key ?? null } } : null;
      const made =
        channel === 'mqtt'
          ? await composeMqtt(input, curBroker, objectTypes, policy)
          : await composeKafka(input, curBroker, objectTypes, policy);
      const secrets: Secrets = { auth: null, signingSecret: null, ...made.secrets };
      return {
        ...common,
        settings: made.settings as Record<string, unknown>,
        secrets: encrypt(secretsKey, JSON.stringify(secrets)),
        shownSecret: undefined,
      };
    }
    const w = { ...(base?.settings ?? {}), ...(b.webhook ?? {}) } as Record<string, unknown>;
    const settings = {
      mode: (w.mode as string) ?? 'single',
      batchSize: (w.batchSize as number) ?? 100,
      maxItemsPerMinute: (w.maxItemsPerMinute as number | null) ?? null,
      maxConcurrentRequests: (w.maxConcurrentRequests as number) ?? 4,
      timeoutMs: (w.timeoutMs as number) ?? 10_000,
      ...injection(b.webhook ?? {}, mode === 'patch' ? base?.settings : undefined),
    };
    if (settings.injectEventIdPath !== null) parseDottedPath(settings.injectEventIdPath, '/webhook/injectEventIdPath');
    // Write-only secrets: absent = keep (PUT included), null = remove, a value = replace.
    const inAuth = b.webhook?.auth;
    const auth = inAuth === undefined ? curSecrets.auth : keepSecret(inAuth as Record<string, unknown> | null, curSecrets.auth);
    if (auth?.type === 'oauth2' && 'tokenUrl' in auth) await vet(auth.tokenUrl, '/webhook/auth/tokenUrl');
    // API.md 9: every webhook is signed. No secret yet: one is generated (shown once in the
    // answer); a different one given: a rotation, the previous one signing on for 24 h.
    const signing = rotate(curSecrets, b.webhook?.signingSecret ?? (curSecrets.signingSecret ? undefined : newSigningSecret()));
    const secrets: Secrets = { auth, ...signing.secrets };
    return {
      ...common,
      settings: {
        ...settings,
        auth: publicAuth(auth),
        signingSecretSet: true,
        previousSigningSecretExpiresAt: signing.previousExpiresAt,
      } as Record<string, unknown>,
      secrets: encrypt(secretsKey, JSON.stringify(secrets)),
      /** The new secret, for the one answer that shows it. */
      shownSecret: signing.shown,
    };
  };

  /** Applies a new signing secret (or none) to the stored ones; a change keeps the old one for 24 h. */
  const rotate = (cur: Secrets, next: string | undefined) => {
    const now = Date.now();
    const livePrevious = cur.previousSigningSecret && cur.previousSigningSecret.until > now ? cur.previousSigningSecret : null;
    if (next === undefined || next === cur.signingSecret) {
      return {
        secrets: { signingSecret: cur.signingSecret, previousSigningSecret: livePrevious },
        previousExpiresAt: livePrevious ? iso(new Date(livePrevious.until)) : null,
        shown: undefined,
      };
    }
    const previous = cur.signingSecret ? { secret: cur.signingSecret, until: now + SECRET_OVERLAP_MS } : null;
    return {
      secrets: { signingSecret: next, previousSigningSecret: previous },
      previousExpiresAt: previous ? iso(new Date(previous.until)) : null,
      shown: next,
    };
  };

  const get = (q: Queryable, id: string, forUpdate = false) => {
    if (!isUuid(id)) throw notFound('integration');
    return q
      .query<Row>(`SELECT ${SELECT} FROM integrations WHERE id = $1 AND deleted_at IS NULL${forUpdate ? ' FOR UPDATE' : ''}`, [id])
      .then((r) => {
        if (!r.rows[0]) throw notFound('integration');
        return r.rows[0];
      });
  };
  const write = (q: Queryable, id: string, v: Awaited<ReturnType<typeof compose>>, insert: boolean) =>
    q.query<Row>(
      insert
        ? `INSERT INTO integrations (id, name, enabled, channel, owner_ids, object_types, destination, destinations, retry, settings, secrets,
                                    max_backlog_hours)
           VALUES ($1, $2, $3, $12, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING ${SELECT}`
        : `UPDATE integrations SET name = $2, enabled = $3, owner_ids = $4, object_types = $5, destination = $6, destinations = $7,
             retry = $8, settings = $9, secrets = $10, max_backlog_hours = $11, when_updated = clock_timestamp()
           WHERE id = $1 RETURNING ${SELECT}`,
      [
        id,
        v.name,
        v.enabled,
        v.ownerIds,
        v.objectTypes,
        v.destination,
        JSON.stringify(v.destinations),
        JSON.stringify(v.retry),
        JSON.stringify(v.settings),
        v.secrets,
        v.maxBacklogHours,
        ...(insert ? [v.channel] : []),
      ],
    );

  const List = Type.Intersect([
    PageQuery,
    Type.Object({
      name: Type.Optional(Str(255)),
      stats: Type.Optional(
        Type.Boolean({ description: "Include each integration's stats, as GET /integrations/{id} does (default false)" }),
      ),
    }),
  ]);
  const withStats = async (row: Row) => {
    const s = await stats(db, row.id);
    return {
      ...toApi(row),
      stats: { ...s, lastSuccessAt: iso(s.lastSuccessAt), lastErrorAt: iso(s.lastErrorAt), pausedUntil: iso(s.pausedUntil) },
    };
  };
  app.get('/integrations', {
    config: admin,
    schema: { tags, summary: 'List push integrations (admin)', querystring: List, response: { 200: Type.Array(Integration) } },
    handler: async (req, reply) => {
      const query = req.query as Static<typeof List>;
      const rows = await listPage<Row>(db, req, reply, {
        select: SELECT,
        from: 'integrations',
        ownerColumn: null, // operator only
        defaultOrder: 'asc',
        idType: 'uuid',
        filters: (params, where) => {
          where.push('deleted_at IS NULL');
          if (query.name !== undefined) where.push(`name = $${params.push(query.name)}`);
        },
      });
      if (!query.stats) return rows.map(toApi);
      const out = [];
      for (const row of rows) out.push(await withStats(row)); // one at a time: a page may hold 1000
      return out;
    },
  });

  app.post('/integrations', {
    config: admin,
    schema: {
      tags,
      summary: 'Create a push integration (admin); credentials are write-only',
      body: IntegrationIn,
      response: { 201: Integration },
    },
    handler: async (req, reply) => {
      const id = crypto.randomUUID();
      const out = await db.tx(async (q) => {
        const v = await compose(req.tenancy, q, req.body as IntegrationIn, null, 'create');
        const row = (await write(q, id, v, true)).rows[0]!;
        await startIntegration(q, id);
        return withShownSecret(row, v.shownSecret);
      });
      reply.code(201).header('Location', `${req.server.publicUrl}/api/v1/integrations/${id}`);
      return out;
    },
  });

  app.get('/integrations/:id', {
    config: admin,
    schema: { tags, summary: 'Get a push integration (admin), with its delivery stats', params: IdParam, response: { 200: Integration } },
    handler: async (req) => withStats(await get(db, (req.params as { id: string }).id)),
  });

  const update = (mode: 'put' | 'patch') => async (req: FastifyRequest) => {
    const id = (req.params as { id: string }).id;
    return db.tx(async (q) => {
      const cur = await get(q, id, true);
      const v = await compose(req.tenancy, q, req.body as Partial<IntegrationIn>, cur, mode);
      return withShownSecret((await write(q, id, v, false)).rows[0]!, v.shownSecret);
    });
  };
  app.put('/integrations/:id', {
    config: admin,
    schema: {
      tags,
      summary: 'Replace a push integration (admin); secrets left out are kept',
      params: IdParam,
      body: IntegrationIn,
      response: { 200: Integration },
    },
    handler: update('put'),
  });
  app.patch('/integrations/:id', {
    config: admin,
    schema: {
      tags,
      summary: 'Update a push integration (admin, JSON merge patch)',
      params: IdParam,
      body: IntegrationPatch,
      response: { 200: Integration },
    },
    handler: update('patch'),
  });
  const RotateBody = Type.Object({
    signingSecret: Type.Optional(WebhookIn.properties.signingSecret),
  });
  app.post('/integrations/:id/rotate-signing-secret', {
    config: admin,
    schema: {
      tags,
      summary: 'Rotate the signing secret (admin): the new one is shown once; the previous one keeps signing for 24 h',
      params: IdParam,
      body: RotateBody,
      response: { 200: Integration },
    },
    // A rotation usually has no body at all: treat that as {}.
    preValidation: async (req) => {
      req.body ??= {};
    },
    handler: async (req) => {
      const id = (req.params as { id: string }).id;
      const given = (req.body as Static<typeof RotateBody> | undefined)?.signingSecret;
      return db.tx(async (q) => {
        const cur = await get(q, id, true);
        const v = await compose(req.tenancy, q, { webhook: { signingSecret: given ?? newSigningSecret() } }, cur, 'patch');
        return withShownSecret((await write(q, id, v, false)).rows[0]!, v.shownSecret);
      });
    },
  });

  app.delete('/integrations/:id', {
    config: admin,
    schema: { tags, summary: 'Delete a push integration (admin); its pending deliveries are cancelled', params: IdParam },
    handler: async (req, reply) => {
      const id = (req.params as { id: string }).id;
      // Results being written by the engine meanwhile can deadlock with the cancel (PostgreSQL
      // then aborts one side): the cancel is simply tried again.
      await retryDeadlock(() =>
        db.tx(async (q) => {
          await get(q, id, true);
          // API.md 9: delivery stops at once (the engine claims only enabled, undeleted integrations),
          // pending deliveries become CANCELLED, credentials are wiped; the history stays.
          await q.query(
            `UPDATE integrations SET deleted_at = now(), enabled = false, secrets = NULL,
                  settings = jsonb_set(settings, '{auth}', 'null'), when_updated = now() WHERE id = $1`,
            [id],
          );
          await cancelIntegration(q, id);
        }),
      );
      return reply.code(204).send();
    },
  });
}
