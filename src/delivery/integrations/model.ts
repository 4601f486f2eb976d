// What an integration is to the engine and its channels (API guide 9): its settings by channel,
// secrets decrypted, and its row as stored. Types and constants only: the routes, the store, the
// engine and every channel depend on this file, and it on none of them.
import crypto from 'node:crypto';
import type { ObjectType } from '../../eventlog/objects.js';
import type { AuthIn, ChannelName, WebhookFormat } from './schemas.js';

/** What the engine and the channels need, decrypted: a union keyed by channel. */
export type IntegrationConfig = WebhookIntegration | MqttIntegration | KafkaIntegration | EmailIntegration;

export interface IntegrationBase {
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
    /** What the body is: the objects (standard), or a chat message (slack, teams). */
    format: WebhookFormat;
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

/** The e-mail channel's settings (API guide 9, "E-mail"): addresses in lower case. */
export interface EmailSettings {
  to: string[];
  cc: string[];
  escalateTo: string[];
  escalateAfterMinutes: number | null;
  minIntervalMinutes: number;
  maxMessagesPerHour: number;
  timeZone: string;
}

export interface EmailIntegration extends IntegrationBase {
  channel: 'email';
  email: EmailSettings;
  /** With notifications, an ALERT event is told by its notification (one alert, one message). */
  objectTypes: string[];
  /** Who made it: a customer's recipients confirm before they are mailed. */
  managedBy: 'operator' | 'customer';
}

export interface Row {
  id: string;
  name: string;
  channel: ChannelName;
  enabled: boolean;
  owner_ids: string[];
  object_types: string[];
  filter: Record<string, unknown[]> | null;
  destination: string;
  destinations: Record<string, string>;
  retry: IntegrationConfig['retry'];
  max_backlog_hours: number;
  /** The channel's public settings, as returned (write-only members left out). */
  settings: Record<string, unknown>;
  secrets: string | null;
  /** Who may change it: the operator only, or also the customer whose owner made it. */
  managed_by: 'operator' | 'customer';
  auto_disable_after_hours: number;
  health: 'ok' | 'failing' | 'disabled';
  disabled_reason: string | null;
  disabled_at: Date | null;
  creator_owner_id: string | null;
  when_created: Date;
  when_updated: Date;
}

export interface Secrets {
  auth: AuthIn | null;
  signingSecret: string | null;
  previousSigningSecret?: { secret: string; until: number } | null;
  /** Broker channels: the password (MQTT, Kafka SASL) and the TLS client key. */
  password?: string | null;
  key?: string | null;
}

/** API guide 9: after a rotation the previous secret keeps signing this long, as Svix does. */
export const SECRET_OVERLAP_MS = 24 * 3600_000;

/** A Standard Webhooks secret: whsec_ and 32 random bytes in base64. */
export const newSigningSecret = () => `whsec_${crypto.randomBytes(32).toString('base64')}`;
