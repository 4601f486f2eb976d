// The event log's Kafka cluster (EVENT_LOG=kafka, API guide 17): the client settings every client
// of it shares (brokers, TLS, SASL as the Kafka channel names them) and the topic, made when it is
// missing. @platformatic/kafka is the client the Kafka channel already uses.
import type { Config } from '../config.js';
import { pemOrFile } from '../config.js';

type KafkaLib = typeof import('@platformatic/kafka');
let lib: Promise<KafkaLib> | undefined;
/** The client library, loaded only by processes that use the Kafka mode (it is large). */
export const kafkaLib = () => (lib ??= import('@platformatic/kafka'));

const MECHANISMS = { plain: 'PLAIN', 'scram-sha-256': 'SCRAM-SHA-256', 'scram-sha-512': 'SCRAM-SHA-512' } as const;

export type EventLogConfig = Pick<
  Config,
  | 'EVENT_LOG_KAFKA_BROKERS'
  | 'EVENT_LOG_KAFKA_TLS'
  | 'EVENT_LOG_KAFKA_CA'
  | 'EVENT_LOG_KAFKA_SASL_MECHANISM'
  | 'EVENT_LOG_KAFKA_SASL_USERNAME'
  | 'EVENT_LOG_KAFKA_SASL_PASSWORD'
  | 'EVENT_LOG_KAFKA_CLIENT_ID'
  | 'EVENT_LOG_TOPIC'
  | 'EVENT_LOG_PARTITIONS'
  | 'EVENT_LOG_REPLICATION'
  | 'EVENT_LOG_GROUP'
>;

/** The connection settings of one client (`role` names it in the brokers' logs). */
export function clientOptions(cfg: EventLogConfig, role: string) {
  const ca = pemOrFile(cfg.EVENT_LOG_KAFKA_CA);
  return {
    clientId: `${cfg.EVENT_LOG_KAFKA_CLIENT_ID}-${role}`,
    bootstrapBrokers: cfg.EVENT_LOG_KAFKA_BROKERS ?? [],
    connectTimeout: 10_000,
    timeout: 30_000,
    requestTimeout: 30_000,
    retries: 5,
    retryDelay: 500,
    ...(cfg.EVENT_LOG_KAFKA_TLS ? { tls: ca ? { ca } : {} } : {}),
    ...(cfg.EVENT_LOG_KAFKA_SASL_MECHANISM
      ? {
          sasl: {
            mechanism: MECHANISMS[cfg.EVENT_LOG_KAFKA_SASL_MECHANISM],
            username: cfg.EVENT_LOG_KAFKA_SASL_USERNAME ?? '',
            password: cfg.EVENT_LOG_KAFKA_SASL_PASSWORD ?? '',
          },
        }
      : {}),
  };
}

/**
 * Makes the topic when it is missing: EVENT_LOG_PARTITIONS partitions and EVENT_LOG_REPLICATION
 * replicas (unset: 3, or the cluster's broker count when smaller, so one broker works). Returns its
 * partition count. A topic that exists is left as it is.
 */
export function ensureTopic(cfg: EventLogConfig): Promise<number> {
  // Once per process and topic (the relay and the consumer both need it; a process running
  // several services, as a test file does, has one per service); a failure is tried again next time.
  const key = `${(cfg.EVENT_LOG_KAFKA_BROKERS ?? []).join(',')}/${cfg.EVENT_LOG_TOPIC}`;
  let made = ensured.get(key);
  if (!made) {
    made = makeTopic(cfg).catch((e) => {
      ensured.delete(key);
      throw e;
    });
    ensured.set(key, made);
  }
  return made;
}
const ensured = new Map<string, Promise<number>>();

async function makeTopic(cfg: EventLogConfig): Promise<number> {
  const { Admin } = await kafkaLib();
  const admin = new Admin(clientOptions(cfg, 'admin'));
  try {
    const topic = cfg.EVENT_LOG_TOPIC;
    const cluster = await admin.metadata({ topics: [] });
    const existing = (await admin.listTopics()).includes(topic);
    const replicas = cfg.EVENT_LOG_REPLICATION ?? Math.min(3, cluster.brokers.size);
    if (!existing) {
      try {
        // min.insync.replicas: with acks=all an acknowledged event is on a majority of its replicas.
        const minIsr = String(Math.max(1, Math.min(2, replicas - 1)));
        await admin.createTopics({
          topics: [topic],
          partitions: cfg.EVENT_LOG_PARTITIONS,
          replicas,
          configs: [{ name: 'min.insync.replicas', value: minIsr }],
        });
      } catch (e) {
        // Another instance made it first.
        if (!(await admin.listTopics()).includes(topic)) throw e;
      }
    }
    const md = await admin.metadata({ topics: [topic], forceUpdate: true });
    const t = md.topics.get(topic);
    if (!t) throw new Error(`the event log's topic ${topic} is missing after it was made`);
    return t.partitionsCount;
  } finally {
    await admin.close().catch(() => {});
  }
}

/** A partition of the topic as the group stands on it. */
export interface PartitionOffsets {
  partition: number;
  earliest: bigint;
  latest: bigint;
  /** The group's committed offset; null when it never committed one. */
  committed: bigint | null;
}

/** Every partition of the topic: its earliest and latest offsets and the group's committed one. */
export async function groupOffsets(cfg: EventLogConfig): Promise<PartitionOffsets[]> {
  const { Admin } = await kafkaLib();
  const admin = new Admin(clientOptions(cfg, 'offsets'));
  try {
    const topic = cfg.EVENT_LOG_TOPIC;
    if (!(await admin.listTopics()).includes(topic)) return [];
    const md = await admin.metadata({ topics: [topic] });
    const count = md.topics.get(topic)?.partitionsCount ?? 0;
    if (!count) return [];
    const partitions = Array.from({ length: count }, (_, p) => p);
    const ends = async (timestamp: bigint) =>
      new Map(
        (
          await admin.listOffsets({
            topics: [{ name: topic, partitions: partitions.map((partitionIndex) => ({ partitionIndex, timestamp })) }],
          })
        )
          .flatMap((t) => t.partitions)
          .map((p) => [p.partitionIndex, p.offset]),
      );
    const latest = await ends(-1n);
    const earliest = await ends(-2n);
    const committed = new Map<number, bigint>();
    for (const g of await admin.listConsumerGroupOffsets({
      groups: [{ groupId: cfg.EVENT_LOG_GROUP, topics: [{ name: topic, partitionIndexes: partitions }] }],
    })) {
      for (const t of g.topics)
        for (const p of t.partitions) if (p.committedOffset >= 0n) committed.set(p.partitionIndex, p.committedOffset);
    }
    return partitions.map((p) => ({
      partition: p,
      earliest: earliest.get(p) ?? 0n,
      latest: latest.get(p) ?? 0n,
      committed: committed.get(p) ?? null,
    }));
  } finally {
    await admin.close().catch(() => {});
  }
}

/**
 * The consumer group's lag: events on the topic not yet handed over to the engine (its committed
 * offsets behind each partition's end; a partition never committed counts from its start). With
 * the relay's backlog (unpublished rows, counted by the queue's pending figures) this is what the
 * Kafka mode still has to deliver.
 */
export async function consumerLag(cfg: EventLogConfig): Promise<number> {
  return lagOf(await groupOffsets(cfg));
}

/** The messages of these partitions the group has not committed past. */
export function lagOf(parts: PartitionOffsets[]): number {
  let lag = 0n;
  for (const p of parts) {
    const from = p.committed ?? p.earliest;
    if (p.latest > from) lag += p.latest - from;
  }
  return Number(lag);
}
