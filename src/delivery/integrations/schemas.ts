// The integrations API's schemas (API guide 9): what a create, PUT or PATCH body may hold, and
// what an answer shows. They validate, type the handlers and make the OpenAPI document.
import { Type, type Static } from '@sinclair/typebox';
import { PageQuery } from '../../http/paging.js';
import { DateTime, Literals, Nullable, Str, Uuid } from '../../http/schemas.js';
import { OBJECT_TYPES, RECORD_TYPES } from '../../eventlog/objects.js';

const ObjectTypeSchema = Literals(OBJECT_TYPES);

export const DEFAULT_SCHEDULE_SECONDS = [5, 30, 120, 600, 1800, 3600];

export const RetrySchema = Type.Object({
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

export const AuthIn = Type.Union([
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

export type AuthIn = Static<typeof AuthIn>;

/** The write-only members of each auth kind: never returned, kept when left out. */
export const SECRET_FIELDS: readonly string[] = ['token', 'clientSecret', 'value', 'password'];

/**
 * The body's auth: AuthIn with its secret member optional. API guide 1: a GET body put back carries
 * auth without the write-only secret; keepSecret then keeps the stored one.
 */
export const AuthBody = Type.Union(
  AuthIn.anyOf.map((o) =>
    Type.Object(Object.fromEntries(Object.entries(o.properties).map(([k, v]) => [k, SECRET_FIELDS.includes(k) ? Type.Optional(v) : v]))),
  ),
);

/** What a webhook's body is: the objects themselves, or a chat message a person reads (API guide 9). */
export const WEBHOOK_FORMATS = ['standard', 'slack', 'teams', 'dcsa-tnt-3'] as const;
export type WebhookFormat = (typeof WEBHOOK_FORMATS)[number];
/** The chat formats: a message a person reads. */
export const CHAT_FORMATS = ['slack', 'teams'] as const;
/** The object types a chat format renders: what a person is told about. */
export const CHAT_TYPES = ['event', 'notification'] as const;
/** The object types DCSA Track & Trace events are made from (API guide 18), dcsa-tnt-3's default. */
export const DCSA_TYPES = ['location', 'sensordata', 'reeferdata', 'command'] as const;

export const WebhookIn = Type.Object({
  format: Type.Optional(
    Literals(WEBHOOK_FORMATS, {
      description:
        'standard (default): the objects as JSON; slack: a Slack incoming-webhook message; teams: an Adaptive Card as Teams Workflows webhooks take it. The chat formats send events and notifications only, one message each (mode single). dcsa-tnt-3: DCSA Track & Trace 3.0.0 events, {"events": [...]} with API-Version: 3.0.0, made from locations, sensor data, reefer data and commands (API guide 18)',
    }),
  ),
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

export const MqttIn = Type.Object({
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

export const KafkaIn = Type.Object({
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

/** An address as the e-mail channel takes it: one mailbox, no display name (RFC 5321's 254 characters at most). */
export const EmailAddress = Type.String({
  minLength: 3,
  maxLength: 254,
  pattern:
    "^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$",
  description: 'An e-mail address (local@domain, no display name)',
});

const Recipients = (description: string) => Type.Array(EmailAddress, { maxItems: 1000, uniqueItems: true, description });

export const EmailIn = Type.Object({
  to: Recipients('Who each alert is mailed to; at least one'),
  cc: Type.Optional(Recipients('Copied on each alert')),
  escalateTo: Type.Optional(Recipients('Who an alert neither acknowledged nor cleared within escalateAfterMinutes is mailed to, once')),
  escalateAfterMinutes: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: 10_080, description: 'Default 30 with escalateTo' }))),
  minIntervalMinutes: Type.Optional(
    Type.Integer({
      minimum: 0,
      maximum: 1440,
      description: 'At most one message per asset this often; what arrives in between is told in the next one (a digest). Default 15',
    }),
  ),
  maxMessagesPerHour: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: 100_000,
      description: "Messages this integration sends in any hour; default (and a customer's ceiling) EMAIL_MAX_MESSAGES_PER_HOUR",
    }),
  ),
  timeZone: Type.Optional(
    Type.String({ minLength: 1, maxLength: 64, description: "The recipients' IANA time zone for times in messages; default UTC" }),
  ),
});

export const CHANNELS = ['webhook', 'mqtt', 'kafka', 'email'] as const;

export type ChannelName = (typeof CHANNELS)[number];

/** A value a filter allows: one member's value, compared as JSON (so 1 and 1.0 are equal, "1" is not). */
const FilterValue = Type.Union([Type.String({ maxLength: 1024 }), Type.Number(), Type.Boolean(), Type.Null()]);

export const FilterIn = Type.Record(
  Type.String({ minLength: 1, maxLength: 100 }),
  Type.Array(FilterValue, { minItems: 1, maxItems: 1000, description: 'The values the member may have' }),
  {
    maxProperties: 20,
    description:
      'Field -> allowed values, e.g. {"severity": ["ALERT"]}: an object of a type with that field is pushed only when its value is listed (every member must match); objects of types without it pass. A name none of objectTypes has is a 400',
  },
);

export const IntegrationIn = Type.Object({
  name: Str(255, { minLength: 1 }),
  channel: Literals(CHANNELS, { description: 'Fixed at creation' }),
  enabled: Type.Optional(Type.Boolean()),
  ownerIds: Type.Array(Type.String({ format: 'uuid' }), { minItems: 1, maxItems: 1000, uniqueItems: true }),
  objectTypes: Type.Optional(
    Type.Array(ObjectTypeSchema, {
      minItems: 1,
      maxItems: 32,
      uniqueItems: true,
      description: `Default: the records (${RECORD_TYPES.join(', ')}); event, notification and command are opt-in`,
    }),
  ),
  filter: Type.Optional(Nullable(FilterIn)),
  destination: Type.Optional(
    Str(2048, {
      minLength: 1,
      description:
        'Webhook URL, or the MQTT or Kafka topic prefix, for every type without its own (required but for e-mail, whose recipients are in email)',
    }),
  ),
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
  autoDisableAfterHours: Type.Optional(
    Type.Number({
      minimum: 0,
      maximum: 8760,
      description: 'Disable the integration when every attempt has failed this long; 0: never; default 48',
    }),
  ),
  webhook: Type.Optional(WebhookIn),
  mqtt: Type.Optional(MqttIn),
  kafka: Type.Optional(KafkaIn),
  email: Type.Optional(EmailIn),
});

export type IntegrationIn = Static<typeof IntegrationIn>;

/** A merge patch: every member optional, inside the broker settings too (PATCH {"mqtt": {"qos": 2}}). */
export const IntegrationPatch = Type.Partial(
  Type.Object({
    ...IntegrationIn.properties,
    mqtt: Type.Partial(MqttIn),
    kafka: Type.Partial(KafkaIn),
    email: Type.Partial(EmailIn),
    // A member set to null is dropped from the stored filter.
    filter: Nullable(
      Type.Record(Type.String({ minLength: 1, maxLength: 100 }), Nullable(Type.Array(FilterValue, { minItems: 1, maxItems: 1000 })), {
        maxProperties: 20,
      }),
    ),
  }),
);

export const AuthOut = Type.Object({
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

const EmailOut = Type.Object({
  to: Type.Array(Type.String()),
  cc: Type.Array(Type.String()),
  escalateTo: Type.Array(Type.String()),
  escalateAfterMinutes: Nullable(Type.Integer()),
  minIntervalMinutes: Type.Integer(),
  maxMessagesPerHour: Type.Integer(),
  timeZone: Type.String(),
  recipients: Type.Optional(
    Type.Array(Type.Object({ address: Type.String(), confirmedAt: Nullable(DateTime) }), {
      description:
        'GET /integrations/{id} only: every address and when it confirmed (a customer-made integration mails only confirmed ones; null: asked, not yet confirmed)',
    }),
  ),
});

const Counts = Type.Object({ lastHour: Type.Integer(), lastDay: Type.Integer() });

export const IntegrationStats = Type.Object(
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
    filter: Nullable(Type.Record(Type.String(), Type.Array(Type.Unknown()))),
    destination: Type.String(),
    destinations: Type.Record(Type.String(), Type.String()),
    retry: Type.Object({ scheduleSeconds: Type.Array(Type.Number()), maxAttempts: Type.Integer(), deadlineHours: Type.Number() }),
    maxBacklogHours: Type.Number(),
    autoDisableAfterHours: Type.Number(),
    health: Literals(['ok', 'failing', 'disabled'] as const, {
      description: 'failing: every attempt has failed for an hour; disabled: for autoDisableAfterHours, so it was disabled',
    }),
    disabledReason: Nullable(Type.String()),
    disabledAt: Nullable(DateTime),
    healthLog: Type.Optional(
      Type.Array(Type.Object({ at: DateTime, status: Type.String(), detail: Type.String() }), {
        description: 'The latest changes of health, newest first (GET /integrations/{id} only)',
      }),
    ),
    managedBy: Literals(['operator', 'customer'] as const, {
      description:
        "operator: made by an operator, read-only to customers; customer: made by a customer's credential, which its owners' credentials may change",
    }),
    webhook: Type.Optional(
      Type.Object({
        format: Literals(WEBHOOK_FORMATS),
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
    email: Type.Optional(EmailOut),
    whenCreated: DateTime,
    whenUpdated: DateTime,
    stats: Type.Optional(IntegrationStats),
  },
  { title: 'Integration' },
);

/** What a save composes from: a create or PUT body, or a PATCH body (every member optional, nested too). */
export type IntegrationInput = Static<typeof IntegrationPatch>;

export const IntegrationList = Type.Intersect([
  PageQuery,
  Type.Object({
    name: Type.Optional(Str(255)),
    stats: Type.Optional(Type.Boolean({ description: "Include each integration's stats, as GET /integrations/{id} does (default false)" })),
  }),
]);

export const RotateBody = Type.Object({
  signingSecret: Type.Optional(WebhookIn.properties.signingSecret),
});
