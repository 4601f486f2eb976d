// Operations endpoints outside /api/v1 (API guide 4): /healthz (process up), /readyz
// (database answers), /metrics (Prometheus text), the OpenAPI document and the docs page.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { FastifyInstance, FastifyReply } from 'fastify';
import fp from 'fastify-plugin';
import client from 'prom-client';
import type { Db } from '../db/db.js';
import type { Hub, InstanceLink } from '../instance/link.js';
import { poisonCounts } from './poison.js';

const require = createRequire(import.meta.url);
const swaggerUiDir = path.dirname(require.resolve('swagger-ui-dist/package.json'));

const DOCS_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Asset tracking service API</title>
<link rel="stylesheet" href="/docs/swagger-ui.css"></head>
<body><div id="ui"></div><script src="/docs/swagger-ui-bundle.js"></script>
<script src="/docs/init.js"></script></body></html>`;
const DOCS_INIT = `window.ui = SwaggerUIBundle({ url: '/api/v1/openapi.json', dom_id: '#ui', deepLinking: true });`;
/**
 * The docs page's policy, like every other page's: its own scripts only, no framing. Swagger UI
 * sets style attributes (so inline styles are allowed, never inline scripts), draws its icons as
 * data: images and calls the API it documents on this origin ("Try it out").
 */
const DOCS_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; " +
  "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/**
 * The figures /metrics asks the delivery queue and the event log for at each scrape, handed in by
 * app.ts (delivery and the event log count their poison here: they are below this file).
 */
export interface OpsFigures {
  /** Events not yet delivered or failed (deliveries_pending). */
  pending(): Promise<number>;
  /** Age in seconds of the oldest open transaction (the event log's horizon). */
  oldestTransactionAge(): Promise<number>;
  /** The Kafka event log's consumer lag (EVENT_LOG=kafka). */
  consumerLag(): Promise<number>;
  /** Partitions of the Kafka event log whose messages Kafka deleted before the group read them (EVENT_LOG=kafka). */
  offsetsLost(): Promise<number>;
}

// fastify-plugin: the metrics hook must see every route, not only this plugin's.
export const opsRoutes = fp(async function opsRoutes(
  app: FastifyInstance,
  {
    db,
    figures,
    link,
    hub,
  }: {
    db: Db;
    figures: OpsFigures;
    /** The instance's other processes (HTTP_WORKERS > 1): /metrics answers for all of them. */
    link?: InstanceLink;
    /** This is the coordinator of such an instance: it sums the answers. */
    hub?: Hub;
  },
): Promise<void> {
  const registry = new client.Registry();
  // Figures of the whole instance (the database, delivery, MQTT ingest, retention) come from one
  // process: the coordinator when there are several HTTP processes. Every other figure is each
  // process's own, and a scrape sums them.
  const whole = !link || link.slot === 0;
  const instanceWide = whole ? [registry] : [];
  client.collectDefaultMetrics({ register: registry });
  const requests = new client.Counter({
    name: 'http_requests_total',
    help: 'HTTP requests answered, by route and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
  });
  const duration = new client.Histogram({
    name: 'http_request_duration_seconds',
    help: 'HTTP request duration',
    labelNames: ['method', 'route'] as const,
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });
  // Push delivery: what this process sent, and the deliveries waiting in the whole database.
  new client.Gauge({
    name: 'delivery_requests_sent_total',
    help: 'Requests (webhook, MQTT, Kafka) this service process and its delivery processes have sent since it started',
    registers: instanceWide,
    collect() {
      this.set(app.services.delivery?.requestsSent ?? 0);
    },
  });
  new client.Gauge({
    name: 'deliveries_pending',
    help: 'Events not yet delivered or failed, over all integrations (each integration counted up to 10,001)',
    registers: instanceWide,
    async collect() {
      try {
        this.set(await figures.pending());
      } catch {
        /* the database is away: keep the last value */
      }
    },
  });
  new client.Gauge({
    name: 'delivery_results_parked_total',
    help: 'Delivery results the database refused even without their response (logged; their events are sent again)',
    registers: instanceWide,
    collect() {
      this.set(app.services.delivery?.resultsParked ?? 0);
    },
  });
  new client.Gauge({
    name: 'result_streams_open',
    help: 'Result streams open in this process',
    registers: [registry],
    collect() {
      this.set(app.services.streams.open);
    },
  });
  new client.Gauge({
    name: 'result_streams_buffered_bytes',
    help: 'Bytes written to open result streams that their clients have not taken yet (bounded by back-pressure)',
    registers: [registry],
    collect() {
      this.set(app.services.streams.bufferedBytes);
    },
  });
  new client.Gauge({
    name: 'database_oldest_transaction_seconds',
    help: 'Age of the oldest open transaction: while it runs, delivery cannot read the event log past it',
    registers: instanceWide,
    async collect() {
      try {
        this.set(await figures.oldestTransactionAge());
      } catch {
        /* the database is away: keep the last value */
      }
    },
  });
  // Storage (docs/DESIGN.md, "Storage"): partitions and bytes on disk per partitioned table, and what
  // retention removed in this process.
  // One read of the sizes per scrape, shared by the two gauges that show it.
  let scrape: Promise<{ table: string; partitions: number; bytes: number }[]> | null = null;
  const sizes = () => {
    scrape ??= app.services.storage.sizes().finally(() => setImmediate(() => (scrape = null)));
    return scrape;
  };
  const perTable = (name: string, help: string, values: () => Promise<Iterable<[string, number]>> | Iterable<[string, number]>) =>
    new client.Gauge({
      name,
      help,
      labelNames: ['table'] as const,
      registers: instanceWide,
      async collect() {
        try {
          for (const [table, n] of await values()) this.set({ table }, n);
        } catch {
          /* the database is away: keep the last values */
        }
      },
    });
  perTable('storage_partitions', 'Partitions of each time-partitioned table', async () =>
    (await sizes()).map((s): [string, number] => [s.table, s.partitions]),
  );
  perTable('storage_bytes', 'Bytes on disk of each time-partitioned table: every partition with its indexes and TOAST', async () =>
    (await sizes()).map((s): [string, number] => [s.table, s.bytes]),
  );
  perTable(
    'storage_rows_removed_total',
    'Rows retention removed in this process since it started (deleted, or in dropped partitions: estimated for large ones), by table',
    () => app.services.storage.retention.removed,
  );
  perTable(
    'storage_partitions_dropped_total',
    'Partitions retention dropped in this process since it started, by table',
    () => app.services.storage.retention.dropped,
  );
  // Device adapters (src/ingest/): records stored and messages refused, in this process.
  const ingestCount = (name: string, help: string, labels: readonly ['protocol', string], map: () => Map<string, number>) =>
    new client.Gauge({
      name,
      help,
      labelNames: labels,
      registers: [registry],
      collect() {
        for (const [key, n] of map()) {
          const [protocol, other] = key.split(':');
          this.set({ protocol: protocol!, [labels[1]]: other! }, n);
        }
      },
    });
  ingestCount(
    'ingest_records_total',
    'Records devices stored through the adapters, by protocol and type',
    ['protocol', 'type'],
    () => app.services.ingest.counters.stored,
  );
  ingestCount(
    'ingest_refused_total',
    'Device messages refused (unknown or disabled device, bad message, rate limited), by protocol and reason',
    ['protocol', 'reason'],
    () => app.services.ingest.counters.refused,
  );
  ingestCount(
    'ingest_errors_unlogged_total',
    'Refused device messages the ingest error log did not keep (over a budget: unknown ids per address and minute, or all), by protocol and whose (known or unknown device)',
    ['protocol', 'device'],
    () => app.services.ingest.counters.unlogged,
  );
  const { replica } = app.services;
  new client.Gauge({
    name: 'db_statements_total',
    help: 'Statements sent to PostgreSQL (the primary) since the start, by this process and its delivery processes; absent on PGlite',
    registers: app.services.db.counts ? [registry] : [],
    collect() {
      this.set((app.services.db.counts?.statements ?? 0) + (app.services.delivery?.statements ?? 0));
    },
  });
  new client.Gauge({
    name: 'replica_lag_seconds',
    help: 'How far the read replica (DATABASE_READ_URL) is behind the primary; -1 while it cannot be reached (absent without one)',
    registers: replica ? instanceWide : [],
    collect() {
      this.set(replica?.lag ?? -1);
    },
  });
  new client.Gauge({
    name: 'replica_reads_total',
    help: 'Authenticated GET requests routed to the replica, or (lag, a recent write of their credential, no replica) to the primary; only lists, exports and reports read the replica',
    labelNames: ['target'],
    registers: replica ? [registry] : [],
    collect() {
      this.set({ target: 'replica' }, replica?.served.replica ?? 0);
      this.set({ target: 'primary' }, replica?.served.primary ?? 0);
    },
  });
  const kafkaLog = app.services.cfg.EVENT_LOG === 'kafka';
  new client.Gauge({
    name: 'event_log_events_total',
    help: "The event log on Kafka (EVENT_LOG=kafka): events published by this instance's relay, read from the topic by its delivery processes, and parked in the retry queue",
    labelNames: ['stage'],
    registers: kafkaLog ? instanceWide : [],
    collect() {
      const c = app.services.delivery?.eventLog ?? { published: 0, consumed: 0, parked: 0 };
      this.set({ stage: 'published' }, c.published);
      this.set({ stage: 'consumed' }, c.consumed);
      this.set({ stage: 'parked' }, c.parked);
    },
  });
  new client.Gauge({
    name: 'event_log_consumer_lag',
    help: "The event log on Kafka: events on the topic the delivery processes' consumer group has not handed over yet (-1 while the cluster cannot be asked)",
    registers: kafkaLog ? instanceWide : [],
    async collect() {
      this.set(await figures.consumerLag().catch(() => -1));
    },
  });
  new client.Gauge({
    name: 'event_log_consumer_offsets_lost',
    help: "The event log on Kafka: partitions of the topic whose messages Kafka deleted before the consumer group read them (its committed offset below the partition's earliest); never reset silently: their rows stay in the event log (API guide 17). -1 while the cluster cannot be asked",
    registers: kafkaLog ? instanceWide : [],
    async collect() {
      this.set(await figures.offsetsLost().catch(() => -1));
    },
  });
  new client.Gauge({
    name: 'ingest_mqtt_connected',
    help: 'MQTT ingest: 1 while connected to INGEST_MQTT_URL with the subscription in place, 0 otherwise (absent when not configured)',
    registers: app.services.cfg.INGEST_MQTT_URL ? instanceWide : [],
    collect() {
      this.set(app.services.ingest.mqtt?.connected ? 1 : 0);
    },
  });
  // Commands to MQTT devices (src/commands/downlink.ts): publishes and answers, by outcome.
  new client.Gauge({
    name: 'commands_downlink_total',
    help: "Commands to MQTT devices since this process started: publishes the broker took (published) or refused (refused), devices' answers taken (answers)",
    labelNames: ['outcome'] as const,
    registers: app.services.cfg.INGEST_MQTT_URL ? instanceWide : [],
    collect() {
      const c = app.services.downlink?.counters;
      for (const k of ['published', 'refused', 'answers'] as const) this.set({ outcome: k }, c?.[k] ?? 0);
    },
  });
  new client.Gauge({
    name: 'command_attempts_unrecorded_total',
    help: "Publishes and answers past a command's history bound (50 entries), counted and not stored, since this process started",
    registers: app.services.cfg.INGEST_MQTT_URL ? instanceWide : [],
    collect() {
      this.set(app.services.downlink?.counters.unrecorded ?? 0);
    },
  });
  // Poison (poison.ts): items a consumer set aside so the others go on, by consumer and reason;
  // this process's and its delivery processes'.
  new client.Gauge({
    name: 'poison_total',
    help: 'Items a consumer could not take and set aside (logged with their id; kept where a table holds them) so the rest went on, by consumer and reason, since this process started',
    labelNames: ['consumer', 'reason'] as const,
    registers: [registry],
    collect() {
      const sum = new Map<string, number>();
      for (const c of [poisonCounts(), app.services.delivery?.poison ?? {}])
        for (const [k, n] of Object.entries(c)) sum.set(k, (sum.get(k) ?? 0) + n);
      for (const [k, n] of sum) {
        const at = k.indexOf(':');
        this.set({ consumer: k.slice(0, at), reason: k.slice(at + 1) }, n);
      }
    },
  });
  // No answer of this service is ever to be read as another type than it says (scripts, styles, JSON).
  app.addHook('onSend', async (_req, reply) => {
    reply.header('X-Content-Type-Options', 'nosniff');
  });
  app.addHook('onResponse', async (req, reply) => {
    const route = req.routeOptions.url ?? 'unknown';
    requests.inc({ method: req.method, route, status: String(reply.statusCode) });
    duration.observe({ method: req.method, route }, reply.elapsedTime / 1000);
  });

  const pub = { config: { public: true } };
  const hide = { hide: true };
  // Probes and scrapes arrive every few seconds: their requests are logged only when something is wrong.
  const quiet = { ...pub, logLevel: 'warn' as const };
  app.get('/healthz', { ...quiet, schema: { ...hide } }, async () => ({ status: 'ok' }));
  app.get('/readyz', { ...quiet, schema: { ...hide } }, async (_req, reply) => {
    try {
      await db.query('SELECT 1');
      return { status: 'ready', database: db.kind };
    } catch {
      return reply.code(503).send({ error: 'Service Unavailable', message: 'The database does not answer.', code: 'DATABASE_UNAVAILABLE' });
    }
  });
  // Several HTTP processes: whichever the scrape reaches asks the coordinator, which sums every
  // process's figures (counters and histograms added; prom-client's rules for its process metrics).
  if (link) link.handle('metrics.json', () => registry.getMetricsAsJSON());
  if (hub) {
    hub.handle('metrics.text', async () => {
      const each = [
        await registry.getMetricsAsJSON(),
        ...(await hub.callEach<client.MetricObjectWithValues<client.MetricValue<string>>[]>('metrics.json')),
      ];
      return client.AggregatorRegistry.aggregate(each).metrics();
    });
  }
  app.get('/metrics', { ...quiet, schema: { ...hide } }, async (_req, reply) => {
    reply.type(registry.contentType);
    return link ? link.call<string>('metrics.text') : registry.metrics();
  });

  app.get('/api/v1/openapi.json', { ...pub, schema: { ...hide } }, async () => app.swagger());
  const docs = (reply: FastifyReply) =>
    reply.header('Content-Security-Policy', DOCS_CSP).header('X-Frame-Options', 'DENY').header('Referrer-Policy', 'no-referrer');
  app.get('/docs', { ...pub, schema: { ...hide } }, async (_req, reply) => docs(reply).type('text/html; charset=utf-8').send(DOCS_HTML));
  app.get('/docs/init.js', { ...pub, schema: { ...hide } }, async (_req, reply) => docs(reply).type('text/javascript').send(DOCS_INIT));
  for (const [file, type] of [
    ['swagger-ui.css', 'text/css'],
    ['swagger-ui-bundle.js', 'text/javascript'],
  ] as const) {
    app.get(`/docs/${file}`, { ...pub, schema: { ...hide } }, async (_req, reply) =>
      docs(reply)
        .type(type)
        .header('Cache-Control', 'public, max-age=86400')
        .send(fs.createReadStream(path.join(swaggerUiDir, file))),
    );
  }
});
