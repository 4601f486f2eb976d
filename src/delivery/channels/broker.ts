// What the two broker channels (MQTT, Kafka) share: requests of up to batchSize events of one
// type, each event its own message; a failed request's events are retried on their own and
// regrouped; topics named from the destination prefix; clients cached per integration and
// rebuilt when its settings change; a window that bounds messages awaiting acknowledgement.
import crypto from 'node:crypto';
import type { IntegrationConfig, KafkaIntegration, MqttIntegration } from '../integrations/model.js';
import type { LogEvent } from '../../eventlog/log.js';
import type { ObjectType } from '../../eventlog/objects.js';
import { type AttemptRecord, type ChannelLimits, groupByType, type OutMessage, stableId } from './channel.js';

export type BrokerIntegration = MqttIntegration | KafkaIntegration;
const flowOf = (cfg: BrokerIntegration) => (cfg.channel === 'mqtt' ? cfg.mqtt : cfg.kafka);

export function brokerLimits(cfg: BrokerIntegration): ChannelLimits {
  const f = flowOf(cfg);
  return {
    batchSize: f.batchSize,
    keepBatches: false,
    maxItemsPerMinute: f.maxItemsPerMinute,
    maxConcurrentRequests: f.maxConcurrentRequests,
    timeoutMs: f.timeoutMs,
  };
}

export function brokerMessages(cfg: BrokerIntegration, events: LogEvent[], seed: string): OutMessage[] {
  return groupByType(events, flowOf(cfg).batchSize).map((chunk) => ({
    requestId: chunk.length === 1 ? chunk[0]!.eventId : stableId(`${cfg.id}/${seed}`, chunk),
    objectType: chunk[0]!.objectType,
    events: chunk,
    body: '',
  }));
}

/**
 * The topic of an object type: its own (`destinations`), else the prefix's `<prefix>/events` or,
 * one topic per type, `<prefix>/events/<type>` (Kafka: dots).
 */
export function topicOf(cfg: BrokerIntegration, type: ObjectType): string {
  const own = cfg.destinations[type];
  if (own) return own;
  const sep = cfg.channel === 'mqtt' ? '/' : '.';
  return flowOf(cfg).topicPerType ? `${cfg.destination}${sep}events${sep}${type}` : `${cfg.destination}${sep}events`;
}

/** A fingerprint of everything a client is built from: a change of settings or secrets gives a new client. */
export function fingerprint(cfg: IntegrationConfig): string {
  const { name: _n, enabled: _e, retry: _r, maxBacklogHours: _m, ownerIds: _o, ...rest } = cfg;
  return crypto.createHash('sha256').update(JSON.stringify(rest)).digest('base64url');
}

/** Adds `"name":value` members at the front of a JSON object's text (the object's own members, later, win). */
export function prependMembers(objectJson: string, members: string): string {
  if (!members) return objectJson;
  return objectJson.length > 2 ? `{${members},${objectJson.slice(1)}` : `{${members}}`;
}

/**
 * A counting semaphore: at most `size` holders; `resize` follows a broker's new Receive Maximum.
 * Once full it reopens only when a quarter of it is free, and then lets the waiters in together:
 * their messages go out in one write instead of one system call per acknowledgement.
 */
export class Window {
  private used = 0;
  private full = false;
  private readonly waiting: (() => void)[] = [];
  constructor(private limit: number) {}
  get size(): number {
    return this.limit;
  }
  resize(size: number): void {
    this.limit = Math.max(1, size);
    this.drain();
  }
  acquire(): Promise<void> | undefined {
    if (!this.full && this.used < this.limit && this.waiting.length === 0) {
      this.used++;
      if (this.used >= this.limit) this.full = true;
      return undefined;
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }
  release(): void {
    this.used--;
    this.drain();
  }
  private drain(): void {
    if (this.full && this.used > this.limit - Math.max(1, Math.floor(this.limit / 4))) return;
    this.full = false;
    while (this.used < this.limit && this.waiting.length) {
      this.used++;
      this.waiting.shift()!();
    }
    if (this.used >= this.limit) this.full = true;
  }
}

/** The promise's outcome, or an error naming what was awaited once `ms` have passed. */
export async function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no ${what} within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** An attempt record of a broker send: no HTTP members. */
export function brokerRecord(
  start: number,
  outcome: AttemptRecord['outcome'],
  error: string | null,
  where: { topic: string; partition?: number | null; partitions?: number[] | null; qos?: number | null },
): AttemptRecord {
  return {
    outcome,
    retryAfterSeconds: null,
    httpStatus: null,
    responseTimeMs: Math.round(performance.now() - start),
    receiptId: null,
    topic: where.topic,
    partition: where.partition ?? null,
    partitions: where.partitions ?? null,
    qos: where.qos ?? null,
    error,
    responseHeaders: null,
    responseBody: null,
    responseBodyBytes: null,
    truncated: false,
  };
}

/** An error's message with its causes (client libraries wrap the useful part). */
export function describe(e: unknown): string {
  const parts: string[] = [];
  let cur: unknown = e;
  for (let i = 0; cur && i < 5; i++) {
    const err = cur as { message?: string; code?: string | number; errors?: unknown[]; cause?: unknown };
    const msg = err.message ?? String(cur);
    if (msg && !parts.includes(msg)) parts.push(msg);
    cur = err.cause ?? (Array.isArray(err.errors) ? err.errors[0] : undefined);
  }
  return parts.join(': ').slice(0, 2000) || 'unknown error';
}
