// The Kafka channel (API guide 9), on @platformatic/kafka. A request is one
// produce call carrying up to batchSize events, each its own message: the object as JSON (with
// the integration's metadata members added in front; the object's own members win), headers
// event-id, webhook-schema-version and webhook-object-type. The channel picks each message's
// partition itself, so the attempt log can say where each event went: keyed by the payload value
// at keyPath (murmur2 of the key, as Kafka's Java client does: same key, same partition), else
// (a command: by its id, so its changes stay in order) round robin over the topic's partitions.
//
// acks=all runs an idempotent producer, so the producer's own retries never duplicate a message,
// and with ONE produce call in flight per producer: @platformatic/kafka 1.x reuses sequence
// numbers when idempotent calls overlap and the broker then drops messages as duplicates while
// every promise resolves (platformatic/kafka#326). acks 0 and 1 allow maxConcurrentRequests calls.
//
// Addresses: bootstrap brokers are vetted before a producer is built and every broker the
// cluster's metadata advertises is vetted before a send; over TLS the socket's own lookup is the
// vetting one. A producer that failed is closed and built again for the next request.
import type { Producer } from '@platformatic/kafka';
import { type AddressPolicy, AddressRefused, parseHostPort, resolveVetted, vettedLookup } from '../../address.js';
import type { KafkaIntegration } from '../../integrations/model.js';
import type { LogEvent } from '../../../eventlog/log.js';
import { getAtPath } from '../../../http/dotted-path.js';
import {
  brokerLimits,
  brokerMessages,
  brokerRecord,
  describe,
  fingerprint,
  prependMembers,
  topicOf,
  Window,
  withTimeout,
} from '../broker.js';
import { type Channel, configOf, type OutMessage, SCHEMA_VERSION } from '../channel.js';

/**
 * The client library, loaded with the first Kafka integration a process sends for: it is the
 * largest module the service has (about 50 MB resident once loaded), and most processes never need it.
 */
type KafkaLib = typeof import('@platformatic/kafka');
let kafkaLib: Promise<KafkaLib> | undefined;
const loadKafka = () => (kafkaLib ??= import('@platformatic/kafka'));

const VETTED_FOR_MS = 60_000;
const MECHANISMS = { plain: 'PLAIN', 'scram-sha-256': 'SCRAM-SHA-256', 'scram-sha-512': 'SCRAM-SHA-512' } as const;

interface Client {
  key: string;
  lib: KafkaLib;
  producer: Producer<string, string, string, string>;
  /** Produce calls at once: 1 when idempotent (see above). */
  window: Window;
  roundRobin: Map<string, number>;
}

export function kafkaChannel(policy: AddressPolicy): Channel {
  const clients = new Map<string, Client>();
  const vetted = new Map<string, number>(); // host -> vetted until (epoch ms)

  const vet = async ({ host, port }: { host: string; port: number }) => {
    const key = `${host}:${port}`;
    if ((vetted.get(key) ?? 0) > Date.now()) return;
    await resolveVetted(host, policy, port);
    if (vetted.size > 10_000) vetted.clear();
    vetted.set(key, Date.now() + VETTED_FOR_MS);
  };

  const drop = (id: string, c: Client) => {
    if (clients.get(id) === c) clients.delete(id);
    c.producer.close().catch(() => {});
  };

  // One producer per integration: requests that arrive together wait for the same one.
  const building = new Map<string, { key: string; client: Promise<Client> }>();
  const clientFor = (cfg: KafkaIntegration): Promise<Client> => {
    const key = fingerprint(cfg);
    const cur = clients.get(cfg.id);
    if (cur?.key === key) return Promise.resolve(cur);
    const pending = building.get(cfg.id);
    if (pending?.key === key) return pending.client;
    const client = build(cfg, key).finally(() => {
      if (building.get(cfg.id)?.client === client) building.delete(cfg.id);
    });
    building.set(cfg.id, { key, client });
    return client;
  };

  const build = async (cfg: KafkaIntegration, key: string): Promise<Client> => {
    const k = cfg.kafka;
    for (const b of k.brokers) await vet(parseHostPort(b));
    const cur = clients.get(cfg.id);
    if (cur) drop(cfg.id, cur);
    const idempotent = k.acks === 'all';
    const lib = await loadKafka();
    const { Producer, ProduceAcks, stringSerializers } = lib;
    const producer = new Producer<string, string, string, string>({
      clientId: k.clientId,
      bootstrapBrokers: k.brokers,
      serializers: stringSerializers,
      acks: k.acks === 'all' ? ProduceAcks.ALL : k.acks === 1 ? ProduceAcks.LEADER : ProduceAcks.NO_RESPONSE,
      idempotent,
      autocreateTopics: true,
      connectTimeout: k.timeoutMs,
      timeout: k.timeoutMs,
      requestTimeout: k.timeoutMs,
      retries: 3,
      retryDelay: 250,
      ...(k.ssl
        ? {
            tls: {
              ca: k.ssl.ca ?? undefined,
              cert: k.ssl.cert ?? undefined,
              key: k.ssl.key ?? undefined,
              lookup: vettedLookup(policy),
            },
          }
        : {}),
      ...(k.sasl ? { sasl: { mechanism: MECHANISMS[k.sasl.mechanism], username: k.sasl.username, password: k.sasl.password ?? '' } } : {}),
    });
    const c: Client = { key, lib, producer, window: new Window(idempotent ? 1 : k.maxConcurrentRequests), roundRobin: new Map() };
    clients.set(cfg.id, c);
    return c;
  };

  /**
   * Partitions of a topic (created when absent), every broker the metadata advertises vetted first:
   * a cluster that advertises a refused address gets no request that could create a topic.
   */
  const partitionsOf = async (c: Client, topic: string): Promise<number> => {
    const cluster = await c.producer.metadata({ topics: [] }); // the brokers only (cached after the first)
    for (const b of cluster.brokers.values()) await vet(b);
    const md = await c.producer.metadata({ topics: [topic], autocreateTopics: true });
    for (const b of md.brokers.values()) await vet(b);
    const t = md.topics.get(topic);
    if (!t || t.partitionsCount < 1) throw new Error(`the topic ${topic} has no partitions`);
    return t.partitionsCount;
  };

  const partitionFor = (c: Client, topic: string, count: number, e: LogEvent, path: string[] | null) => {
    const keyed = (key: string) => ({ key, partition: (c.lib.murmur2(Buffer.from(key), false) & 0x7fffffff) % count });
    if (path) {
      const v = getAtPath(JSON.parse(e.payload), path);
      if (v !== undefined && v !== null) return keyed(typeof v === 'string' ? v : JSON.stringify(v));
    }
    // A command's changes without a key of their own go keyed by its id: one partition, in order.
    if (e.objectType === 'command') return keyed(e.objectId);
    const n = c.roundRobin.get(topic) ?? Math.floor(Math.random() * count); // instances start apart
    c.roundRobin.set(topic, (n + 1) % count);
    return { key: undefined, partition: n % count };
  };

  return {
    name: 'kafka',
    limits: (any) => brokerLimits(configOf(any, 'kafka')),
    messages: (any, events, seed) => brokerMessages(configOf(any, 'kafka'), events, seed),
    async send(any, msg: OutMessage) {
      const cfg = configOf(any, 'kafka');
      const k = cfg.kafka;
      const topic = topicOf(cfg, msg.objectType);
      const start = performance.now();
      let c: Client | undefined;
      let partitions: number[] | null = null;
      // One partition for the whole request is said once; otherwise each event's own.
      const where = () => {
        const all = partitions ?? [];
        const one = all.length > 0 && all.every((p) => p === all[0]) ? all[0]! : null;
        return { topic, partition: one, partitions: one === null ? partitions : null };
      };
      let held = false;
      try {
        c = await clientFor(cfg);
        const wait = c.window.acquire();
        if (wait) await wait;
        held = true;
        const count = await partitionsOf(c, topic);
        const path = k.keyPath ? k.keyPath.split('.') : null;
        const extra = Object.keys(k.metadata).length ? JSON.stringify(k.metadata).slice(1, -1) : '';
        const cl = c;
        const messages = msg.events.map((e) => {
          const { key, partition } = partitionFor(cl, topic, count, e, path);
          return {
            topic,
            partition,
            key,
            value: prependMembers(e.payload, extra),
            headers: { 'event-id': e.eventId, 'webhook-schema-version': SCHEMA_VERSION, 'webhook-object-type': e.objectType },
          };
        });
        partitions = messages.map((m) => m.partition);
        // The client's own timeouts come first (connect, request, 3 retries); this bounds them all.
        const result = await withTimeout(cl.producer.send({ messages }), k.timeoutMs * 2, 'acknowledgement');
        if (k.acks === 0 && result.unwritableNodes?.length) {
          throw new Error(`could not write to brokers ${result.unwritableNodes.join(', ')}`);
        }
        return brokerRecord(start, 'success', null, where());
      } catch (e) {
        // A refused address will not become right by retrying; anything else may (a broker down,
        // credentials or a certificate refused, a leader moving): the schedule tries again.
        if (c) drop(cfg.id, c);
        const refused = e instanceof AddressRefused || (e as { code?: string }).code === 'ADDRESS_REFUSED';
        return brokerRecord(start, refused ? 'fail' : 'retry', describe(e), where());
      } finally {
        if (held) c?.window.release();
      }
    },
    async close() {
      await Promise.allSettled([...building.values()].map((b) => b.client)); // a producer being built is closed too
      const all = [...clients.values()];
      clients.clear();
      await Promise.allSettled(all.map((c) => c.producer.close()));
    },
  };
}
