// Broker delivery benchmarks (`BENCH_ONLY=brokers` = kafka, mqtt): the service as a child process on a
// fresh database `tracking_bench_brokers` per part, pushing to real brokers: the shared Apache Kafka
// of test/brokers.ts (127.0.0.1:19092, PLAINTEXT, fresh topics per run, deleted at the end) and a
// private Mosquitto (ports BENCH_MQTT_PORT_BASE..+3, limits raised, stopped at the end).
//
// "Delivered" is the service's own view: events carried by its successful attempts
// (delivery_attempts.success, when_attempted = when the broker's acknowledgement came back). The
// broker is asked afterwards: Kafka topic end offsets; MQTT an mqtt.js subscriber (in a worker
// thread) on the same broker counting distinct event-id user properties per topic.
//
// Per channel setting: (1) a stored backlog drained by an integration created disabled, then
// enabled; (2) the raw client library publishing the same payload the same number of times, with
// the same headers / user properties, as its fast path allows (Kafka: 500 per send, ONE send in
// flight, idempotent acks=-1; MQTT: a window of min(1000, Receive Maximum) unacknowledged
// publishes); (3) end to end while ingesting through REST; (4) store -> acknowledged latency at a
// steady rate, from the database (first successful attempt's when_attempted - event_log.when_created).
import crypto from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { Admin, Producer, ProduceAcks, stringSerializers } from '@platformatic/kafka';
import mqtt from 'mqtt';
import pg from 'pg';
import { createTopic, endOffsets, kafkaBroker, kcatConsume, mosquittoBroker } from '../test/brokers.js';
import {
  Api,
  type Child,
  freshDatabase,
  ingestClosedLoop,
  ingestPaced,
  knob,
  ownerWithAssets,
  pct,
  peakRssMiB,
  percentile,
  retire,
  round,
  STALL_MS,
  sleep,
  startService,
} from './lib.js';

const DB_NAME = 'tracking_bench_brokers';
const thousands = (n: number) => Math.max(1000, Math.round(n / 1000) * 1000);
export const BROKER_BACKLOG = thousands(knob('BENCH_BROKER_BACKLOG', 600_000));
/** Messages the raw client publishes (default: as many as the backlog). */
const RAW_EVENTS = Math.max(500, Math.round(knob('BENCH_BROKER_RAW_EVENTS', BROKER_BACKLOG) / 500) * 500);
const E2E_EVENTS = thousands(knob('BENCH_BROKER_E2E_EVENTS', 100_000));
/** 1 (default): the end-to-end figure for MQTT QoS 2 too. */
const E2E_QOS2 = knob('BENCH_BROKER_E2E_QOS2', 1) > 0;
const STEADY_SECONDS = knob('BENCH_BROKER_STEADY_SECONDS', 30);
const STEADY_RATE = knob('BENCH_BROKER_STEADY_RATE', 1000);
const STEADY_BULK = 10;
const KAFKA_PARTITIONS = Math.max(1, Math.round(knob('BENCH_KAFKA_PARTITIONS', 3)));
const MQTT_PORT_BASE = knob('BENCH_MQTT_PORT_BASE', 18900);
const MQTT_MAX_INFLIGHT = knob('BENCH_MQTT_MAX_INFLIGHT', 1000);
const MQTT_MAX_QUEUED = knob('BENCH_MQTT_MAX_QUEUED', 5_000_000);
/**
 * The verifying MQTT subscriber: 1 (default) a persistent session (QoS 1) that is offline while a
 * figure runs (the broker queues for it) and reads the queue after each figure, so it does not
 * compete for the two cores; 2 a live subscriber in a worker thread during the figures, at
 * BENCH_MQTT_SUB_QOS (0 or 1); 0 none.
 */
const MQTT_SUBSCRIBER = knob('BENCH_MQTT_SUBSCRIBER', 1);
const MQTT_SUB_QOS = Math.min(1, knob('BENCH_MQTT_SUB_QOS', 1)) as 0 | 1;
/** REST ingest: bulks of 1000, 2 in flight (as the webhook figures). */
const BULK = 1000;
const INGEST_IN_FLIGHT = 2;
// The service's settings: its defaults, unless an experiment asks otherwise.
const KAFKA_BATCH = 500;
/** Kafka maxConcurrentRequests (default 2, the service's default; with acks=all the channel still sends ONE produce at a time). */
const KAFKA_CONCURRENT = Math.max(1, knob('BENCH_KAFKA_CONCURRENCY', 2));
const MQTT_BATCH = 500;
const MQTT_SERVICE_IN_FLIGHT = 1000;
/** MQTT maxConcurrentRequests (default 2, the service's default). */
const MQTT_SERVICE_CONCURRENT = Math.max(1, knob('BENCH_MQTT_CONCURRENCY', 2));
const RAW_WINDOW = 1000;
const SCHEMA_VERSION = '1';

export type BrokerPart = 'kafka' | 'mqtt';
type Target = { kind: 'kafka' } | { kind: 'mqtt'; qos: 1 | 2 };
const label = (t: Target) => (t.kind === 'kafka' ? 'Kafka acks=all' : `MQTT QoS ${t.qos}`);

const step = (what: string) => console.error(`[brokers] ${what} (${new Date().toISOString().slice(11, 19)})`);

// ---- the service's view: successful attempts in the database ----------------------------------------

interface Acked {
  /** events in successful attempts (a retried event counts again) */
  events: number;
  failedAttempts: number;
  firstMs: number;
  lastMs: number;
}

async function acked(db: pg.Pool, integrationId: string): Promise<Acked> {
  const { rows } = await db.query<{ ok: string; failed: number; first: number | null; last: number | null }>(
    `SELECT COALESCE(sum(cardinality(log_ids)) FILTER (WHERE success), 0)::int8 AS ok,
            count(*) FILTER (WHERE NOT success)::int AS failed,
            (extract(epoch FROM min(when_attempted) FILTER (WHERE success)) * 1000)::float8 AS first,
            (extract(epoch FROM max(when_attempted) FILTER (WHERE success)) * 1000)::float8 AS last
       FROM delivery_attempts WHERE integration_id = $1`,
    [integrationId],
  );
  const r = rows[0]!;
  return { events: Number(r.ok), failedAttempts: r.failed, firstMs: r.first ?? NaN, lastMs: r.last ?? NaN };
}

/** Distinct events acknowledged, events with a state of their own not SUCCEEDED, and the first attempt error. */
async function settle(db: pg.Pool, integrationId: string) {
  const d = await db.query<{ n: string }>(
    `SELECT count(DISTINCT x)::int8 AS n FROM delivery_attempts a, unnest(a.log_ids) x WHERE a.integration_id = $1 AND a.success`,
    [integrationId],
  );
  const p = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM deliveries WHERE integration_id = $1 AND status <> 'SUCCEEDED'`, [
    integrationId,
  ]);
  const e = await db.query<{ error: string | null }>(
    `SELECT error FROM delivery_attempts WHERE integration_id = $1 AND NOT success ORDER BY id LIMIT 1`,
    [integrationId],
  );
  return { distinct: Number(d.rows[0]!.n), notSucceeded: p.rows[0]!.n, firstError: e.rows[0]?.error ?? null };
}

/**
 * How the integration's requests went, from its attempts: requests, log claims, the mean send time
 * (request start -> all acknowledged) and the mean requests in flight (send time summed over the
 * wall time from the first request's start to the last one's end).
 */
async function requestShape(db: pg.Pool, integrationId: string) {
  const { rows } = await db.query<{
    requests: number;
    claims: number;
    send_ms: number | null;
    wall_ms: number | null;
    sum_ms: number | null;
  }>(
    `SELECT count(*)::int AS requests, count(DISTINCT claim_id)::int AS claims, avg(response_time_ms)::float8 AS send_ms,
            sum(response_time_ms)::float8 AS sum_ms,
            (extract(epoch FROM max(when_attempted) - min(when_attempted - make_interval(secs => response_time_ms / 1000.0))) * 1000)::float8 AS wall_ms
       FROM delivery_attempts WHERE integration_id = $1 AND success`,
    [integrationId],
  );
  const r = rows[0]!;
  return {
    requests: r.requests,
    claims: r.claims,
    sendMsAvg: round(r.send_ms ?? NaN, 1),
    requestsInFlightAvg: round((r.sum_ms ?? NaN) / (r.wall_ms ?? NaN), 2),
  };
}

/**
 * Waits until the integration's successful attempts carry `target` events, or no progress for
 * STALL_MS. Returns the last reading and whether the target was reached.
 */
async function waitAcked(db: pg.Pool, integrationId: string, target: number): Promise<{ a: Acked; complete: boolean }> {
  let a = await acked(db, integrationId);
  let seen = a.events;
  let progressAt = Date.now();
  while (a.events < target) {
    if (a.events !== seen) {
      seen = a.events;
      progressAt = Date.now();
    }
    if (Date.now() - progressAt > STALL_MS) return { a, complete: false };
    await sleep(200);
    a = await acked(db, integrationId);
  }
  return { a, complete: true };
}

/**
 * Per event the integration delivered, from its first successful attempt: store -> acknowledged
 * (when_attempted - event_log.when_created), of which the send itself (the attempt's response_time_ms:
 * request start -> every acknowledgement) and the rest (waiting to be read, claimed and sent); ms,
 * each sorted. And per request: how many, events per request.
 */
async function ackLatencies(db: pg.Pool, integrationId: string) {
  const { rows } = await db.query<{ ms: number; send_ms: number }>(
    `SELECT DISTINCT ON (x.id) (extract(epoch FROM a.when_attempted - o.when_created) * 1000)::float8 AS ms, a.response_time_ms AS send_ms
       FROM delivery_attempts a CROSS JOIN LATERAL unnest(a.log_ids) AS x(id) JOIN event_log o ON o.id = x.id
      WHERE a.integration_id = $1 AND a.success ORDER BY x.id, a.when_attempted`,
    [integrationId],
  );
  const r = await db.query<{ n: number; per: number }>(
    `SELECT count(*)::int AS n, COALESCE(avg(cardinality(log_ids)), 0)::float8 AS per FROM delivery_attempts WHERE integration_id = $1 AND success`,
    [integrationId],
  );
  const sorted = (xs: number[]) => xs.sort((a, b) => a - b);
  return {
    total: sorted(rows.map((x) => Number(x.ms))),
    send: sorted(rows.map((x) => Number(x.send_ms))),
    wait: sorted(rows.map((x) => Number(x.ms) - Number(x.send_ms))),
    requests: r.rows[0]!.n,
    eventsPerRequest: r.rows[0]!.per,
  };
}

/** A stored location payload of the owner as the service reads it (event_log.payload::text): that object's, else the first. */
async function storedPayload(db: pg.Pool, ownerId: string, objectId: string | null): Promise<string | null> {
  const { rows } = await db.query<{ p: string }>(
    `SELECT payload::text AS p FROM event_log WHERE owner_id = $1 AND object_type = 'location' AND ($2::text IS NULL OR object_id = $2)
      ORDER BY id LIMIT 1`,
    [ownerId, objectId],
  );
  return rows[0]?.p ?? null;
}

const idOf = (json: string | null): string | null => {
  try {
    return json ? String((JSON.parse(json) as { id: unknown }).id) : null;
  } catch {
    return null;
  }
};

// ---- the verifying MQTT subscriber, in a worker thread -------------------------------------------

interface TopicStats {
  topic: string;
  messages: number;
  distinct: number;
  lastAt: number;
  sample: string | null;
}

const SUBSCRIBER_CODE = `
const { parentPort, workerData } = require('node:worker_threads');
const mqtt = require(workerData.mqttPath);
const topics = new Map();
const client = mqtt.connect(workerData.url, { protocolVersion: 5, clean: true, clientId: workerData.clientId, reconnectPeriod: 0, properties: { receiveMaximum: 65535 } });
client.on('message', (topic, payload, packet) => {
  let t = topics.get(topic);
  if (!t) { t = { messages: 0, ids: new Set(), lastAt: 0, sample: payload.toString('utf8') }; topics.set(topic, t); }
  t.messages++;
  const id = packet.properties && packet.properties.userProperties && packet.properties.userProperties['event-id'];
  t.ids.add(id === undefined ? String(t.messages) : String(id));
  t.lastAt = Date.now();
});
client.on('error', (e) => parentPort.postMessage({ type: 'error', message: String(e && e.message) }));
client.on('connect', () => client.subscribe(workerData.topic, { qos: workerData.qos }, (err, granted) =>
  parentPort.postMessage({ type: 'ready', error: err ? String(err.message) : null, granted })));
parentPort.on('message', (m) => {
  if (m.type === 'stats') {
    const t = topics.get(m.topic);
    parentPort.postMessage({ type: 'stats', seq: m.seq, stats: { topic: m.topic, messages: t ? t.messages : 0, distinct: t ? t.ids.size : 0, lastAt: t ? t.lastAt : 0, sample: t ? t.sample : null } });
  } else if (m.type === 'forget') {
    topics.delete(m.topic);
  } else if (m.type === 'close') {
    client.end(false, {}, () => process.exit(0));
  }
});
`;

interface Verifier {
  readonly how: string;
  /** What reached the broker's subscriber on `topic`, once `target` distinct events arrived or it went quiet. */
  count(topic: string, target: number): Promise<TopicStats>;
  close(): Promise<void>;
}

/** A live subscriber in a worker thread (BENCH_MQTT_SUBSCRIBER=2). */
class Subscriber implements Verifier {
  readonly how = `live mqtt.js subscriber in a worker thread, MQTT 5, QoS ${MQTT_SUB_QOS}, connected during the figures`;
  private readonly worker: Worker;
  private seq = 0;
  private readonly waiting = new Map<number, (s: TopicStats) => void>();
  readonly ready: Promise<void>;
  errors: string[] = [];

  constructor(url: string, topic: string, qos: 0 | 1) {
    const mqttPath = createRequire(import.meta.url).resolve('mqtt');
    this.worker = new Worker(SUBSCRIBER_CODE, {
      eval: true,
      workerData: { url, topic, qos, mqttPath, clientId: `bench-sub-${crypto.randomBytes(4).toString('hex')}` },
    });
    this.ready = new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('the subscriber did not subscribe within 30 s')), 30_000);
      this.worker.on('message', (m: { type: string; seq?: number; stats?: TopicStats; error?: string | null; message?: string }) => {
        if (m.type === 'ready') {
          clearTimeout(t);
          if (m.error) reject(new Error(`subscribe: ${m.error}`));
          else resolve();
        } else if (m.type === 'stats') {
          this.waiting.get(m.seq!)?.(m.stats!);
          this.waiting.delete(m.seq!);
        } else if (m.type === 'error') this.errors.push(m.message ?? '');
      });
      this.worker.on('error', (e) => {
        clearTimeout(t);
        reject(e);
      });
    });
  }

  stats(topic: string): Promise<TopicStats> {
    const seq = ++this.seq;
    return new Promise((resolve) => {
      this.waiting.set(seq, resolve);
      this.worker.postMessage({ type: 'stats', topic, seq });
    });
  }

  forget(topic: string): void {
    this.worker.postMessage({ type: 'forget', topic });
  }

  /** Waits until `target` distinct events arrived on `topic`, or none arrived for `quietMs`. */
  async waitFor(topic: string, target: number, quietMs = 15_000): Promise<TopicStats> {
    let s = await this.stats(topic);
    let seen = s.messages;
    let progressAt = Date.now();
    while (s.distinct < target && Date.now() - progressAt < quietMs) {
      await sleep(200);
      s = await this.stats(topic);
      if (s.messages !== seen) {
        seen = s.messages;
        progressAt = Date.now();
      }
    }
    return s;
  }

  async count(topic: string, target: number): Promise<TopicStats> {
    const s = await this.waitFor(topic, target);
    this.forget(topic);
    return s;
  }

  async close(): Promise<void> {
    const exited = new Promise<void>((r) => this.worker.once('exit', () => r()));
    this.worker.postMessage({ type: 'close' });
    const t = setTimeout(() => void this.worker.terminate(), 5000);
    await exited;
    clearTimeout(t);
  }
}

/**
 * A persistent session (BENCH_MQTT_SUBSCRIBER=1): subscribed once at QoS 1, offline while a figure
 * runs (the broker queues every message for it: max_queued_messages is raised), and connected
 * after the figure to read the queue, counting distinct event-id user properties per topic.
 */
class SessionSubscriber implements Verifier {
  readonly how = 'persistent mqtt.js session (MQTT 5, QoS 1), offline during the figure, queue read afterwards';
  private readonly clientId = `bench-verify-${crypto.randomBytes(4).toString('hex')}`;
  constructor(
    private readonly url: string,
    private readonly filter: string,
  ) {}

  private connect(clean: boolean): mqtt.MqttClient {
    return mqtt.connect(this.url, {
      protocolVersion: 5,
      clean,
      clientId: this.clientId,
      reconnectPeriod: 0,
      properties: { sessionExpiryInterval: 7200, receiveMaximum: 65_535 },
    });
  }

  async arm(): Promise<void> {
    const c = this.connect(true);
    await new Promise((resolve, reject) => {
      c.once('connect', resolve);
      c.once('error', reject);
    });
    await c.subscribeAsync(this.filter, { qos: 1 });
    await c.endAsync(false);
  }

  async count(topic: string, target: number, quietMs = 5000): Promise<TopicStats> {
    const stats: TopicStats = { topic, messages: 0, distinct: 0, lastAt: 0, sample: null };
    const ids = new Set<string>();
    const c = this.connect(false);
    let lastAny = Date.now();
    c.on('message', (t, payload, packet) => {
      lastAny = Date.now();
      if (t !== topic) return;
      stats.messages++;
      stats.sample ??= payload.toString('utf8');
      const id = packet.properties?.userProperties?.['event-id'];
      ids.add(id === undefined ? String(stats.messages) : String(id));
      stats.lastAt = lastAny;
    });
    await new Promise((resolve, reject) => {
      c.once('connect', resolve);
      c.once('error', reject);
    });
    while (ids.size < target && Date.now() - lastAny < quietMs) await sleep(100);
    await c.endAsync(false);
    stats.distinct = ids.size;
    return stats;
  }

  async close(): Promise<void> {
    // A clean start ends the session (and drops whatever it still queued).
    const c = this.connect(true);
    await new Promise((resolve) => {
      c.once('connect', resolve);
      c.once('error', resolve);
    });
    await c.endAsync(true).catch(() => {});
  }
}

// ---- raw clients -------------------------------------------------------------------------------

/** @platformatic/kafka: acks=-1, idempotent, `KAFKA_BATCH` messages per send, ONE send in flight. */
async function rawKafka(broker: string, topic: string, payload: string, n: number) {
  const producer = new Producer<string, string, string, string>({
    clientId: 'bench-raw',
    bootstrapBrokers: [broker],
    serializers: stringSerializers,
    acks: ProduceAcks.ALL,
    idempotent: true,
    autocreateTopics: true,
    retries: 3,
    retryDelay: 250,
    timeout: 30_000,
    requestTimeout: 30_000,
  });
  try {
    // Warm-up (producer id, connections, metadata) on a topic of its own; the first idempotent
    // send right after a broker start may meet "coordinator is loading".
    for (let attempt = 1; ; attempt++) {
      try {
        await producer.send({ messages: [{ topic: `${topic}-warmup`, value: payload }] });
        break;
      } catch (e) {
        if (attempt >= 10) throw e;
        await sleep(500);
      }
    }
    let rr = 0;
    const t0 = performance.now();
    for (let sent = 0; sent < n; sent += KAFKA_BATCH) {
      const messages = new Array(Math.min(KAFKA_BATCH, n - sent));
      for (let i = 0; i < messages.length; i++) {
        messages[i] = {
          topic,
          partition: rr++ % KAFKA_PARTITIONS,
          value: payload,
          headers: { 'event-id': crypto.randomUUID(), 'webhook-schema-version': SCHEMA_VERSION, 'webhook-object-type': 'location' },
        };
      }
      await producer.send({ messages });
    }
    return (performance.now() - t0) / 1000;
  } finally {
    await producer.close().catch(() => {});
  }
}

/** mqtt.js 5, MQTT 5: a window of min(RAW_WINDOW, Receive Maximum) unacknowledged publishes. */
async function rawMqtt(url: string, topic: string, payload: string, n: number, qos: 1 | 2) {
  const client = mqtt.connect(url, {
    protocolVersion: 5,
    clean: true,
    clientId: `bench-raw-${crypto.randomBytes(4).toString('hex')}`,
    reconnectPeriod: 0,
  });
  const connack = await new Promise<mqtt.IConnackPacket>((resolve, reject) => {
    client.once('connect', resolve);
    client.once('error', reject);
  });
  const receiveMaximum = connack.properties?.receiveMaximum ?? 65_535;
  const window = Math.min(RAW_WINDOW, receiveMaximum);
  try {
    const t0 = performance.now();
    await new Promise<void>((resolve, reject) => {
      let sent = 0;
      let done = 0;
      let inFlight = 0;
      const pump = () => {
        while (inFlight < window && sent < n) {
          inFlight++;
          sent++;
          client.publish(
            topic,
            payload,
            {
              qos,
              properties: {
                contentType: 'application/json',
                userProperties: {
                  'event-id': crypto.randomUUID(),
                  'webhook-schema-version': SCHEMA_VERSION,
                  'webhook-object-type': 'location',
                },
              },
            },
            (err) => {
              inFlight--;
              done++;
              if (err) reject(err);
              else if (done === n) resolve();
              else pump();
            },
          );
        }
      };
      pump();
    });
    return { seconds: (performance.now() - t0) / 1000, window, receiveMaximum };
  } finally {
    await client.endAsync(false).catch(() => {});
  }
}

// ---- the figures -------------------------------------------------------------------------------

interface Ctx {
  api: Api;
  db: pg.Pool;
  svc: Child;
  prefix: string;
  n: number;
  kafka?: string;
  mqttUrl?: string;
  sub?: Verifier;
  topics: string[];
}

function settingsOf(ctx: Ctx, t: Target): Record<string, unknown> {
  return t.kind === 'kafka'
    ? { kafka: { brokers: [ctx.kafka!], acks: 'all', batchSize: KAFKA_BATCH, maxConcurrentRequests: KAFKA_CONCURRENT } }
    : {
        mqtt: {
          url: ctx.mqttUrl!,
          qos: t.qos,
          batchSize: MQTT_BATCH,
          maxInFlight: MQTT_SERVICE_IN_FLIGHT,
          maxConcurrentRequests: MQTT_SERVICE_CONCURRENT,
        },
      };
}

const settingsText = (t: Target) =>
  t.kind === 'kafka'
    ? `service: acks all (idempotent), batchSize ${KAFKA_BATCH}, maxConcurrentRequests ${KAFKA_CONCURRENT}; topic of ${KAFKA_PARTITIONS} partitions`
    : `service: QoS ${t.qos}, MQTT 5, batchSize ${MQTT_BATCH}, maxInFlight ${MQTT_SERVICE_IN_FLIGHT}, maxConcurrentRequests ${MQTT_SERVICE_CONCURRENT}`;

/** A fresh owner, destination and integration for one figure. */
async function setup(ctx: Ctx, t: Target, what: string, enabled: boolean) {
  const name = `${t.kind === 'kafka' ? 'kafka' : `mqtt-q${t.qos}`}-${what}`;
  const { ownerId, assets } = await ownerWithAssets(ctx.api, `brokers-${name}-${ctx.n++}`);
  const destination = t.kind === 'kafka' ? `${ctx.prefix}-${name}` : `${ctx.prefix}/${name}`;
  const topic = t.kind === 'kafka' ? `${destination}.events` : `${destination}/events`;
  if (t.kind === 'kafka') {
    await createTopic(ctx.kafka!, topic, KAFKA_PARTITIONS);
    ctx.topics.push(topic);
  }
  const integ = await ctx.api.call('POST', '/integrations', {
    name: `bench-${name}`,
    channel: t.kind,
    enabled,
    ownerIds: [ownerId],
    objectTypes: ['location'],
    destination,
    ...settingsOf(ctx, t),
  });
  return { ownerId, assets, topic, id: integ.id as string };
}

/** What the broker holds: Kafka end offsets summed; MQTT what the subscriber got. */
async function brokerCount(ctx: Ctx, t: Target, topic: string, target: number) {
  if (t.kind === 'kafka') {
    const offsets = await endOffsets(ctx.kafka!, topic);
    return { brokerCount: [...offsets.values()].reduce((a, b) => a + b, 0), brokerHow: 'topic end offsets, summed' };
  }
  if (!ctx.sub) return { brokerCount: null, brokerHow: 'no subscriber (BENCH_MQTT_SUBSCRIBER=0)' };
  const s = await ctx.sub.count(topic, target);
  return {
    brokerCount: s.distinct,
    sample: s.sample,
    brokerHow: `${ctx.sub.how}: distinct event ids (${s.messages} messages)${s.distinct < target ? ', INCOMPLETE: it did not get them all before it went quiet' : ''}`,
    // When the live subscriber got its last one (a persistent session reads after the figure: not a time).
    subscriberLastAt: ctx.sub instanceof Subscriber ? s.lastAt : 0,
  };
}

/** Figure 1: a stored backlog, then the integration enabled; enable -> last acknowledgement. */
async function backlog(ctx: Ctx, t: Target) {
  const s = await setup(ctx, t, 'backlog', false);
  const i0 = Date.now();
  await ingestClosedLoop(ctx.api, s.assets, BROKER_BACKLOG / BULK, BULK, INGEST_IN_FLIGHT);
  const ingestSeconds = (Date.now() - i0) / 1000;
  const beforeEnable = await acked(ctx.db, s.id);
  const t0 = Date.now();
  await ctx.api.call('PATCH', `/integrations/${s.id}`, { enabled: true });
  const { a, complete } = await waitAcked(ctx.db, s.id, BROKER_BACKLOG);
  const seconds = ((complete ? a.lastMs : Date.now()) - t0) / 1000;
  await retire(ctx.api, s.id);
  const st = await settle(ctx.db, s.id);
  const shape = await requestShape(ctx.db, s.id);
  const b = await brokerCount(ctx, t, s.topic, BROKER_BACKLOG);
  // One location as the service published it: read back from the broker, else the stored payload.
  let published: string | null = null;
  if (t.kind === 'kafka') {
    const recs = await kcatConsume(ctx.kafka!, s.topic, { kcatArgs: ['-c', '1'], timeoutMs: 30_000 }).catch(() => []);
    published = recs[0]?.value ?? null;
  } else published = ('sample' in b ? b.sample : null) || null;
  const stored = await storedPayload(ctx.db, s.ownerId, idOf(published));
  const { sample: _sample, subscriberLastAt, ...broker } = { sample: null, subscriberLastAt: 0, ...b };
  const subscriberSeconds = subscriberLastAt ? round((subscriberLastAt - t0) / 1000, 2) : null;
  return {
    figure: `${label(t)}: backlog drain`,
    settings: `${settingsText(t)}; created disabled, ${BROKER_BACKLOG} stored, then enabled`,
    events: BROKER_BACKLOG,
    ingestPerSecond: round(BROKER_BACKLOG / ingestSeconds),
    ackedBeforeEnable: beforeEnable.events,
    acked: a.events,
    ackedDistinct: st.distinct,
    complete,
    firstAckMs: round(a.firstMs - t0),
    seconds: round(seconds, 2),
    deliveredPerSecond: round(st.distinct / seconds),
    ...shape,
    failedAttempts: a.failedAttempts,
    notSucceeded: st.notSucceeded,
    firstError: st.firstError,
    ...broker,
    subscriberSeconds,
    payload: published ?? stored,
    payloadFrom: published ? 'read back from the broker' : 'event log payload',
    payloadMatchesOutbox: published === null ? null : published === stored,
    /** epoch ms: the PATCH that enabled it, and the last acknowledgement (to slice a CPU profile of the service) */
    enabledAt: t0,
    lastAckAt: round(a.lastMs),
    serviceRssMiB: ctx.svc.peakRssMiB(),
  };
}

/** Figure 2: the raw client, same payload, same count, on a fresh topic of the same broker. */
async function raw(ctx: Ctx, t: Target, payload: string) {
  const name = t.kind === 'kafka' ? 'kafka-raw' : `mqtt-q${t.qos}-raw`;
  const topic = t.kind === 'kafka' ? `${ctx.prefix}-${name}.events` : `${ctx.prefix}/${name}/events`;
  let seconds: number;
  let how: string;
  if (t.kind === 'kafka') {
    await createTopic(ctx.kafka!, topic, KAFKA_PARTITIONS);
    ctx.topics.push(topic, `${topic}-warmup`);
    seconds = await rawKafka(ctx.kafka!, topic, payload, RAW_EVENTS);
    how = `@platformatic/kafka Producer, acks -1, idempotent, ${KAFKA_BATCH} messages per send, ONE send in flight, explicit round-robin partition over ${KAFKA_PARTITIONS}, headers event-id etc.`;
  } else {
    const r = await rawMqtt(ctx.mqttUrl!, topic, payload, RAW_EVENTS, t.qos);
    seconds = r.seconds;
    how = `mqtt.js 5, MQTT 5, QoS ${t.qos}, window ${r.window} (= min(${RAW_WINDOW}, Receive Maximum ${r.receiveMaximum})), user properties event-id etc.`;
  }
  const b = await brokerCount(ctx, t, topic, RAW_EVENTS);
  return {
    figure: `${label(t)}: raw client`,
    settings: how,
    events: RAW_EVENTS,
    payloadBytes: Buffer.byteLength(payload),
    seconds: round(seconds, 2),
    perSecond: round(RAW_EVENTS / seconds),
    brokerCount: b.brokerCount,
    brokerHow: b.brokerHow,
  };
}

/** Figure 3: E2E_EVENTS ingested through REST with the integration enabled, all acknowledged. */
async function endToEnd(ctx: Ctx, t: Target) {
  const s = await setup(ctx, t, 'e2e', true);
  const t0 = Date.now();
  await ingestClosedLoop(ctx.api, s.assets, E2E_EVENTS / BULK, BULK, INGEST_IN_FLIGHT);
  const ingestSeconds = (Date.now() - t0) / 1000;
  const atIngestEnd = (await acked(ctx.db, s.id)).events;
  const { a, complete } = await waitAcked(ctx.db, s.id, E2E_EVENTS);
  const seconds = ((complete ? a.lastMs : Date.now()) - t0) / 1000;
  await retire(ctx.api, s.id);
  const st = await settle(ctx.db, s.id);
  const b = await brokerCount(ctx, t, s.topic, E2E_EVENTS);
  const ingestPerSecond = E2E_EVENTS / ingestSeconds;
  const deliveredPerSecond = st.distinct / seconds;
  return {
    figure: `${label(t)}: end to end from REST ingest`,
    settings: `${settingsText(t)}; REST bulks of ${BULK}, ${INGEST_IN_FLIGHT} in flight`,
    events: E2E_EVENTS,
    ingestPerSecond: round(ingestPerSecond),
    ackedAtIngestEnd: atIngestEnd,
    ackedDistinct: st.distinct,
    complete,
    seconds: round(seconds, 2),
    deliveredPerSecond: round(deliveredPerSecond),
    deliveredVsIngest: pct(deliveredPerSecond / ingestPerSecond),
    failedAttempts: a.failedAttempts,
    firstError: st.firstError,
    brokerCount: b.brokerCount,
    brokerHow: b.brokerHow,
    serviceRssMiB: ctx.svc.peakRssMiB(),
  };
}

/** Figure 4: a steady STEADY_RATE records/s for STEADY_SECONDS; store -> acknowledged p50/p99. */
async function steady(ctx: Ctx, t: Target) {
  const s = await setup(ctx, t, 'steady', true);
  await sleep(500);
  const r = await ingestPaced(ctx.api, s.assets, {
    bulk: STEADY_BULK,
    intervalMs: (STEADY_BULK / STEADY_RATE) * 1000,
    seconds: STEADY_SECONDS,
  });
  const atWindowEnd = (await acked(ctx.db, s.id)).events;
  const { complete } = await waitAcked(ctx.db, s.id, r.stored);
  await retire(ctx.api, s.id);
  const st = await settle(ctx.db, s.id);
  const lat = await ackLatencies(ctx.db, s.id);
  const b = await brokerCount(ctx, t, s.topic, r.stored);
  return {
    figure: `${label(t)}: steady ${STEADY_RATE}/s, store -> acknowledged`,
    settings: `${settingsText(t)}; bulks of ${STEADY_BULK} every ${round((STEADY_BULK / STEADY_RATE) * 1000, 1)} ms for ${STEADY_SECONDS} s`,
    offeredPerSecond: STEADY_RATE,
    storedPerSecond: round(r.stored / r.seconds),
    stored: r.stored,
    ingestFailed: r.failed,
    ackedAtWindowEnd: atWindowEnd,
    ackedDistinct: st.distinct,
    complete,
    p50Ms: round(percentile(lat.total, 50)),
    p90Ms: round(percentile(lat.total, 90)),
    p99Ms: round(percentile(lat.total, 99)),
    maxMs: round(lat.total[lat.total.length - 1] ?? NaN),
    // The parts of it: the send (request start -> all acknowledged), and everything before the send.
    sendP50Ms: round(percentile(lat.send, 50)),
    sendP99Ms: round(percentile(lat.send, 99)),
    beforeSendP50Ms: round(percentile(lat.wait, 50)),
    beforeSendP99Ms: round(percentile(lat.wait, 99)),
    requests: lat.requests,
    eventsPerRequest: round(lat.eventsPerRequest, 1),
    failedAttempts: (await acked(ctx.db, s.id)).failedAttempts,
    brokerCount: b.brokerCount,
    brokerHow: b.brokerHow,
    serviceRssMiB: ctx.svc.peakRssMiB(),
  };
}

// ---- the parts ---------------------------------------------------------------------------------

export interface ChannelResults {
  broker: Record<string, unknown>;
  backlog: Awaited<ReturnType<typeof backlog>>[];
  raw: Awaited<ReturnType<typeof raw>>[];
  endToEnd: Awaited<ReturnType<typeof endToEnd>>[];
  steady: Awaited<ReturnType<typeof steady>>[];
  /** epoch ms when the service was spawned (a --cpu-prof profile's time 0, roughly) */
  serviceStartedAt?: number;
  serviceRssPeakMiB?: number;
  serviceErrorLines?: number;
  serviceErrors?: string[];
}

export interface BrokerResults {
  kafka?: ChannelResults;
  mqtt?: ChannelResults;
}

async function withService(ctx0: Omit<Ctx, 'api' | 'db' | 'svc' | 'n'>, out: ChannelResults, fn: (ctx: Ctx) => Promise<void>) {
  const url = await freshDatabase(DB_NAME);
  out.serviceStartedAt = Date.now();
  const svc = await startService({ DATABASE_URL: url });
  const api = new Api(svc.base);
  const db = new pg.Pool({ connectionString: url, max: 2 });
  try {
    await api.login();
    await fn({ ...ctx0, api, db, svc, n: 0 });
  } finally {
    await db.end();
    api.close();
    out.serviceRssPeakMiB = await svc.stop();
    out.serviceErrorLines = svc.errors.count;
    out.serviceErrors = svc.errors.first.map((l) => l.slice(0, 500));
    for (const line of svc.errors.first) console.error(`[service error] ${line}`);
  }
}

async function runKafka(prefix: string): Promise<ChannelResults> {
  step('kafka: the shared broker (scripts/kafka.sh, name shared, 19092)');
  const kb = await kafkaBroker('shared', 19092);
  const out: ChannelResults = {
    broker: {
      broker: `Apache Kafka (scripts/kafka.sh), instance "shared", PLAINTEXT ${kb.plaintext}, KRaft single node, -Xmx512m`,
      topics: `fresh per figure (${prefix}-*), ${KAFKA_PARTITIONS} partitions, replication 1, deleted afterwards`,
    },
    backlog: [],
    raw: [],
    endToEnd: [],
    steady: [],
  };
  const ctx0 = { prefix, kafka: kb.plaintext, topics: [] as string[] };
  const t: Target = { kind: 'kafka' };
  try {
    await withService(ctx0, out, async (ctx) => {
      step(`kafka acks=all: backlog of ${BROKER_BACKLOG}`);
      const b = await backlog(ctx, t);
      out.backlog.push(b);
      step(`kafka: raw producer, ${RAW_EVENTS} messages`);
      out.raw.push(await raw(ctx, t, b.payload ?? '{}'));
      step(`kafka acks=all: end to end, ${E2E_EVENTS} events`);
      out.endToEnd.push(await endToEnd(ctx, t));
      step(`kafka acks=all: steady ${STEADY_RATE}/s for ${STEADY_SECONDS} s`);
      out.steady.push(await steady(ctx, t));
    });
  } finally {
    if (ctx0.topics.length) {
      const admin = new Admin({ clientId: 'bench-admin', bootstrapBrokers: [kb.plaintext], timeout: 30_000 });
      await admin
        .deleteTopics({ topics: ctx0.topics })
        .catch((e) => console.error(`[brokers] could not delete topics: ${(e as Error).message}`));
      await admin.close().catch(() => {});
    }
  }
  return out;
}

async function runMqtt(prefix: string): Promise<ChannelResults> {
  step(`mqtt: a private mosquitto on ${MQTT_PORT_BASE}-${MQTT_PORT_BASE + 3}`);
  const mq = await mosquittoBroker('bench-brokers', MQTT_PORT_BASE, { maxInflight: MQTT_MAX_INFLIGHT, maxQueued: MQTT_MAX_QUEUED });
  const url = `mqtt://127.0.0.1:${mq.port}`;
  const out: ChannelResults = {
    broker: {
      broker: `Mosquitto (private, test/brokers.ts mosquittoBroker "bench-brokers"), ${url}`,
      config: `max_inflight_messages ${MQTT_MAX_INFLIGHT} (= Receive Maximum announced), max_queued_messages ${MQTT_MAX_QUEUED}, max_queued_bytes 0, persistence false, set_tcp_nodelay true, per_listener_settings true`,
      subscriber:
        MQTT_SUBSCRIBER === 1
          ? `persistent mqtt.js session on ${prefix}/#, QoS 1, offline during each figure (raw ones included), its queue read afterwards`
          : MQTT_SUBSCRIBER === 2
            ? `live mqtt.js 5 subscriber in a worker thread, QoS ${MQTT_SUB_QOS}, on ${prefix}/#, connected during every figure (raw ones included)`
            : 'none',
    },
    backlog: [],
    raw: [],
    endToEnd: [],
    steady: [],
  };
  let sub: Verifier | undefined;
  if (MQTT_SUBSCRIBER === 2) {
    const live = new Subscriber(url, `${prefix}/#`, MQTT_SUB_QOS);
    sub = live;
    await live.ready;
  } else if (MQTT_SUBSCRIBER === 1) {
    const session = new SessionSubscriber(url, `${prefix}/#`);
    await session.arm();
    sub = session;
  }
  try {
    await withService({ prefix, mqttUrl: url, sub, topics: [] }, out, async (ctx) => {
      for (const qos of [1, 2] as const) {
        const t: Target = { kind: 'mqtt', qos };
        step(`mqtt QoS ${qos}: backlog of ${BROKER_BACKLOG}`);
        const b = await backlog(ctx, t);
        out.backlog.push(b);
        step(`mqtt QoS ${qos}: raw client, ${RAW_EVENTS} messages`);
        out.raw.push(await raw(ctx, t, b.payload ?? '{}'));
      }
      for (const qos of E2E_QOS2 ? ([1, 2] as const) : ([1] as const)) {
        step(`mqtt QoS ${qos}: end to end, ${E2E_EVENTS} events`);
        out.endToEnd.push(await endToEnd(ctx, { kind: 'mqtt', qos }));
      }
      step(`mqtt QoS 1: steady ${STEADY_RATE}/s for ${STEADY_SECONDS} s`);
      out.steady.push(await steady(ctx, { kind: 'mqtt', qos: 1 }));
    });
  } finally {
    if (sub instanceof Subscriber) out.broker.subscriberErrors = sub.errors.length;
    await sub?.close();
    out.broker.mosquittoPeakRssMiB = peakRssMiB(Number(fs.readFileSync(path.join(mq.dir, 'mosquitto.pid'), 'utf8').trim()));
    await mq.stop();
  }
  return out;
}

export async function runBrokersBench(parts: Set<BrokerPart>): Promise<BrokerResults> {
  const prefix = `bench-${Date.now().toString(36)}`;
  const out: BrokerResults = {};
  if (parts.has('kafka')) out.kafka = await runKafka(prefix);
  if (parts.has('mqtt')) out.mqtt = await runMqtt(prefix);
  return out;
}

/** Rows of a table without the long members (the payload). */
export function tableRows<T extends Record<string, unknown>>(rows: T[]): Record<string, unknown>[] {
  return rows.map(({ payload: _p, brokerHow: _h, settings: _s, enabledAt: _e, lastAckAt: _l, ...rest }) => rest);
}
