// The seam between the delivery engine and the ways events leave the service (API guide 9).
// A channel says what limits an integration has, turns claimed events into messages, sends one
// message and classifies what happened into an attempt record. The engine knows nothing else of
// it: it claims, schedules, retries and records; adding a channel adds a folder here.
import crypto from 'node:crypto';
import type { IntegrationConfig } from '../integrations/model.js';
import type { LogEvent } from '../../eventlog/log.js';
import type { AttemptResponse } from '../queue/index.js';
import type { ObjectType } from '../../eventlog/objects.js';

export interface ChannelLimits {
  /**
   * Events per message: 1 sends each event on its own; more groups events of one object type, in
   * log order, into messages of at most this many (the engine counts requests the same way).
   */
  batchSize: number;
  /**
   * A failed request is retried as it was, byte for byte under its id (webhook batches), or its
   * events are retried on their own and regrouped (MQTT and Kafka, whose messages are single).
   */
  keepBatches: boolean;
  maxItemsPerMinute: number | null;
  maxConcurrentRequests: number;
  timeoutMs: number;
}

export interface OutMessage {
  /** The request's id: the event id for a single event, a batch id otherwise (stable across retries). */
  requestId: string;
  objectType: ObjectType;
  events: LogEvent[];
  /**
   * Webhook: the bytes sent; a failed batch is stored and retried with exactly these. The broker
   * channels send one message per event, built at send time, and leave this empty.
   */
  body: string;
}

/** API guide 1: the push payloads' version, sent with every message (header or MQTT 5 user property). */
export const SCHEMA_VERSION = '1';

export type Outcome = 'success' | 'retry' | 'fail' | 'pause';

/** What one send did: its answer as the attempt log keeps it (API guide 9), and what it means. */
export interface AttemptRecord extends AttemptResponse {
  outcome: Outcome;
  /** A 'pause' (429): how long the whole integration waits. */
  retryAfterSeconds: number | null;
}

export interface Channel {
  readonly name: IntegrationConfig['channel'];
  limits(cfg: IntegrationConfig): ChannelLimits;
  /**
   * Claimed events as messages, grouped as `limits().batchSize` says. `seed` makes batch ids
   * stable: the same claim taken over after a crash gives the same ids for the same events.
   */
  messages(cfg: IntegrationConfig, events: LogEvent[], seed: string): OutMessage[];
  send(cfg: IntegrationConfig, msg: OutMessage): Promise<AttemptRecord>;
  close(): Promise<void>;
}

/** The integration as its own channel's config (the engine hands each channel only its own). */
export function configOf<K extends IntegrationConfig['channel']>(
  cfg: IntegrationConfig,
  channel: K,
): Extract<IntegrationConfig, { channel: K }> {
  if (cfg.channel !== channel) throw new Error(`a ${cfg.channel} integration was given to the ${channel} channel`);
  return cfg as Extract<IntegrationConfig, { channel: K }>;
}

/** Events grouped by object type in log order, in chunks of at most `size`. */
export function groupByType(events: LogEvent[], size: number): LogEvent[][] {
  const open = new Map<ObjectType, LogEvent[]>();
  const out: LogEvent[][] = [];
  for (const e of events) {
    let chunk = open.get(e.objectType);
    if (!chunk || chunk.length >= size) {
      chunk = [];
      open.set(e.objectType, chunk);
      out.push(chunk);
    }
    chunk.push(e);
  }
  return out;
}

/** A UUID derived from a seed and the events' positions: the same group gets the same id. */
export function stableId(seed: string, events: LogEvent[]): string {
  const h = crypto.createHash('sha256').update(seed);
  for (const e of events) h.update(`,${e.pos}`);
  const b = h.digest().subarray(0, 16);
  b[6] = (b[6]! & 0x0f) | 0x80; // version 8: custom
  b[8] = (b[8]! & 0x3f) | 0x80; // RFC 4122 variant
  const x = b.toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}
