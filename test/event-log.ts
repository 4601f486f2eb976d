// The event log's mode for a test app (TEST_EVENT_LOG=kafka, the test runner's kafka lane): the
// delivery tests run as they are, with the event log relayed to the shared Kafka broker
// (scripts/kafka.sh, TEST_KAFKA_BROKERS) and delivered by the consumer group. Each database gets a
// topic and a group of its own, so test files running side by side never read each other's events.
import { consumerLag } from '../src/eventlog/kafka.js';

export const TEST_EVENT_LOG = (process.env.TEST_EVENT_LOG ?? 'postgres') as 'postgres' | 'kafka';
export const TEST_KAFKA_BROKERS = process.env.TEST_KAFKA_BROKERS ?? '127.0.0.1:19092';

/** The settings that put a service on `databaseUrl` in the lane's mode (none in the PostgreSQL mode). */
export function eventLogEnv(databaseUrl: string | undefined): Record<string, string> {
  if (TEST_EVENT_LOG !== 'kafka' || !databaseUrl) return {};
  const name = new URL(databaseUrl).pathname.slice(1).replace(/[^A-Za-z0-9._-]/g, '_');
  return {
    EVENT_LOG: 'kafka',
    EVENT_LOG_KAFKA_BROKERS: TEST_KAFKA_BROKERS,
    EVENT_LOG_TOPIC: `tracking.event-log.${name}`,
    EVENT_LOG_GROUP: `tracking.delivery.${name}`,
    EVENT_LOG_PARTITIONS: '4',
  };
}

/**
 * Removes a database's topic and consumer group from the shared broker when its test file ends
 * (after its apps closed), so runs do not pile topics up there. Best effort: a broker that is
 * away leaves them for the next cleanup of the same name (never reused: names are random).
 */
export async function dropEventLog(databaseUrl: string): Promise<void> {
  const env = eventLogEnv(databaseUrl);
  if (!env.EVENT_LOG_TOPIC) return;
  const { Admin } = await import('@platformatic/kafka');
  const admin = new Admin({ clientId: 'tracking-test-cleanup', bootstrapBrokers: [TEST_KAFKA_BROKERS], timeout: 10_000, retries: 1 });
  try {
    await admin.deleteGroups({ groups: [env.EVENT_LOG_GROUP!] }).catch(() => {});
    if ((await admin.listTopics()).includes(env.EVENT_LOG_TOPIC)) await admin.deleteTopics({ topics: [env.EVENT_LOG_TOPIC] });
  } catch {
    // best effort
  } finally {
    await admin.close().catch(() => {});
  }
}

/**
 * In the kafka lane, waits until the relay published every row of the event log and the consumer
 * group handed every message over (lag 0): retention keeps what it has not (API guide 17). Nothing
 * to wait for in the PostgreSQL mode.
 */
export async function eventLogHandedOver(
  db: { query<R>(text: string): Promise<{ rows: R[] }> },
  cfg: Parameters<typeof consumerLag>[0],
  ms = 90_000,
): Promise<void> {
  if (TEST_EVENT_LOG !== 'kafka') return;
  const end = Date.now() + ms;
  let lag = -1;
  for (;;) {
    const { rows } = await db.query<{ behind: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM event_log o, event_log_relay r WHERE (o.tx_id, o.id) > (r.log_tx, r.log_id)) AS behind`,
    );
    if (!rows[0]!.behind) {
      lag = await consumerLag(cfg).catch(() => -1);
      if (lag === 0) return;
    }
    if (Date.now() > end) throw new Error(`the event log not handed over in ${ms} ms (relay behind: ${rows[0]!.behind}, lag ${lag})`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
