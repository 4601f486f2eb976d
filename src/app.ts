// The one place the service is assembled, for each kind of process. The HTTP process: one Fastify
// instance built from a Config (buildApp): open the database, apply the migrations, bootstrap the
// operator, then register the HTTP layers and resources; testable with app.inject() or on an
// ephemeral port; main.ts only listens and shuts down. A delivery process (DELIVERY_WORKERS):
// its database and delivery engine (buildDeliveryProcess); delivery-main.ts only runs and stops it.
import crypto from 'node:crypto';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import v8 from 'node:v8';
import vm from 'node:vm';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyServerOptions } from 'fastify';
import swagger from '@fastify/swagger';
import { type Config, pemOrFile } from './config.js';
import { createPglite, createPostgres, type Db, endDatabaseThread } from './db/db.js';
import { migrate } from './db/migrate.js';
import { loadSecretsKey } from './auth/crypto.js';
import { TokenService } from './auth/tokens.js';
import { authRoutes } from './auth/routes.js';
import { credentialRoutes } from './auth/credentials.js';
import { bootstrap, type BootstrapResult } from './bootstrap.js';
import { clientError, installErrorEnvelope, installJsonParsers, installSerializer, installValidation } from './http/envelope.js';
import { authenticate, installAuthentication } from './auth/authenticate.js';
import { dcsaRenderer } from './dcsa/push.js';
import { dcsaRoutes, partyOf } from './dcsa/routes.js';
import { Tenancy } from './tenancy/tenancy.js';
import { installIdempotency } from './http/idempotency.js';
import { installBodyBudget, installLimits, type Limiter, localShares, MemoryLimiter, RedisLimiter } from './http/limits.js';
import { type SignInFailures, UnknownSignIns } from './audit/unknown-sign-ins.js';
import { ErrorSchema } from './http/schemas.js';
import { completeOperation } from './http/openapi.js';
import { pushWebhooks } from './eventlog/push-shapes.js';
import { ownerRoutes } from './owners/owners.js';
import { assetRoutes } from './assets/assets.js';
import { overviewRoutes } from './assets/overview.js';
import { opsRoutes } from './ops/ops.js';
import { logPoisonTo } from './ops/poison.js';
import { dashboardRoutes } from './dashboard/dashboard.js';
import { mapTiles } from './dashboard/tiles.js';
import { RECORD_DEFS, recordRoutes } from './records/records.js';
import { zoneRoutes } from './zones/zones.js';
import { positionRoutes, zoneHook } from './zones/positions.js';
import { RecordHooks } from './records/hooks.js';
import { deviceRoutes } from './ingest/devices.js';
import { Ingest, ingestErrorRoutes, pruneIngestErrors } from './ingest/ingest.js';
import { ingestClientId, startMqttIngest } from './ingest/mqtt.js';
import { CommandDownlink, readAnswer, type CommandAnswer } from './commands/downlink.js';
import { ReadReplica } from './replica/replica.js';
import { redisWrites } from './replica/writes.js';
import { osmandRoutes } from './ingest/osmand.js';
import { traccarRoutes } from './ingest/traccar.js';
import { AlertEngine } from './alerts/engine.js';
import { silenceHook } from './alerts/silence.js';
import { specificationRoutes } from './alerts/specifications.js';
import { acknowledgeRoutes } from './alerts/acknowledge.js';
import { Notification, notificationRoutes } from './alerts/notifications.js';
import { Event, eventRoutes } from './events/events.js';
import { pruneAudit } from './audit/audit.js';
import { auditRoutes } from './audit/routes.js';
import { Command, commandRoutes, expireCommands } from './commands/commands.js';
import { bookingRoutes } from './booking/booking.js';
import { shareLinkRoutes } from './share/links.js';
import { sharePageRoutes } from './share/page.js';
import { type AddressPolicy, policyOf } from './delivery/address.js';
import type { Channel } from './delivery/channels/channel.js';
import { kafkaChannel } from './delivery/channels/kafka/index.js';
import { mqttChannel } from './delivery/channels/mqtt/index.js';
import { webhookChannel } from './delivery/channels/webhook/index.js';
import { emailChannel } from './delivery/channels/email/index.js';
import { Mailer } from './email/mailer.js';
import { emailLinkRoutes } from './email/routes.js';
import { DeliveryEngine } from './delivery/engine.js';
import { type DeliveryCounters, DeliveryProcesses } from './delivery/processes.js';
import { KafkaFirstAttempts } from './eventlog/consumer.js';
import { offsetsLost } from './eventlog/floor.js';
import { groupOffsets, lagOf, type PartitionOffsets } from './eventlog/kafka.js';
import { oldestTransactionAge, pendingTotal } from './delivery/queue/index.js';
import { PostgresFirstAttempts } from './eventlog/source.js';
import { Partitions, withPartitions } from './storage/partitions.js';
import { leaveKafkaMode } from './eventlog/relay-sql.js';
import { integrationRoutes } from './delivery/integrations/routes.js';
import { historyRoutes } from './delivery/history.js';
import { ResultStreams, streamRoutes } from './delivery/stream.js';
import { LiveFeed } from './live/feed.js';
import { liveRoutes } from './live/routes.js';
import { consumerFloor, KEEP_ALL } from './eventlog/floor.js';
import { migrationPrograms, Storage } from './storage/storage.js';
import { foldRollups, materializeRollups, rollupHooks } from './rollups/rollups.js';
import { rollupRoutes } from './rollups/routes.js';
import { reportRoutes } from './reports/routes.js';
import { Hub, type InstanceLink } from './instance/link.js';
import { linkedLimiter, linkedLogBudget, linkedShares, linkedSignIns, linkedWrites, serveCounts } from './instance/shared.js';

declare module 'fastify' {
  interface FastifyInstance {
    publicUrl: string;
    services: Services;
  }
}

export interface Services {
  cfg: Config;
  db: Db;
  tokens: TokenService;
  limiter: Limiter;
  bootstrap: BootstrapResult | null;
  /** The delivery engine of this process (null when delivery runs elsewhere: DELIVERY_WORKERS). */
  engine: DeliveryEngine | null;
  /** What this service's delivery has done, in this process or its delivery processes (/metrics). */
  delivery: DeliveryCounters | null;
  alerts: AlertEngine;
  streams: ResultStreams;
  /** The live fleet streams' one reader in this process (src/live/). */
  live: LiveFeed;
  /** Partitions and retention (docs/DESIGN.md, "Storage"). */
  storage: Storage;
  /** What runs with every store (records/hooks.ts); the benchmark takes one out to measure its cost. */
  hooks: RecordHooks;
  /** The device adapters' shared parts (src/ingest/): devices, their limit, the error log, counts. */
  ingest: Ingest;
  /** Commands to MQTT devices (src/commands/downlink.ts), when MQTT ingest is on in this process. */
  downlink: CommandDownlink | null;
  /** The streaming replica lists, exports and reports may read (DATABASE_READ_URL), or null. */
  replica: ReadReplica | null;
  /** A credential's large bodies in flight (API guide 7), counted for the instance. */
  bodyShares: ReturnType<typeof localShares>;
  /** Failed sign-ins naming nobody (API guide 14), one audit entry per address, kind and window in the instance. */
  unknownSignIns: SignInFailures;
  /**
   * The instance's other processes (HTTP_WORKERS > 1), or null: a Hub in the coordinator, whose
   * `gone(slot)` gives back an exited HTTP process's slots.
   */
  instance: { link: InstanceLink; gone(slot: number): void } | null;
}

export const MiB = 1024 * 1024;

/** In-memory embedded database, for tests: DATA_DIR=memory:// */
const inMemory = (cfg: Config) => cfg.DATA_DIR === 'memory://';

/**
 * The database, and on the embedded one in a folder its migrations applied: WebAssembly memory never
 * shrinks, so the memory that creating the database and migrating it grew (a fresh folder's idle
 * `npm start` stayed at 391 MB resident, against 256 MB when started again) is let go by starting it
 * once more before it serves. The app's own migrate call then finds nothing to do.
 */
async function openMigrated(cfg: Config): Promise<Db> {
  let db: Db | null = await openDatabase(cfg);
  if (db.kind !== 'pglite' || inMemory(cfg)) return db;
  let applied: string[];
  try {
    applied = await migrate(db, { programs: migrationPrograms(db.kind, cfg.PARTITION_INTERVAL) });
  } catch (e) {
    await db.close();
    throw e;
  }
  if (!applied.length) return db;
  // The database thread goes with it (pglite-client.ts): its WebAssembly memory is freed only so.
  await db.close();
  db = null;
  await endDatabaseThread();
  collectGarbage();
  return openDatabase(cfg);
}

/**
 * A full garbage collection now, of what migrating or starting left on this thread's heap: an idle
 * process may not collect for hours. Node exposes gc() only behind a flag; setting it at run time
 * and taking gc from a new context is the documented way round (v8.setFlagsFromString).
 */
export function collectGarbage(): void {
  v8.setFlagsFromString('--expose-gc');
  (vm.runInNewContext('gc') as () => void)();
}

export async function openDatabase(cfg: Config): Promise<Db> {
  return cfg.DATABASE_URL
    ? createPostgres(cfg.DATABASE_URL, cfg.DB_POOL_SIZE)
    : createPglite(inMemory(cfg) ? undefined : cfg.dataDir, undefined, {
        sharedBuffersMb: cfg.EMBEDDED_SHARED_BUFFERS_MB,
      });
}

/**
 * `deliveryProcesses`: the service's entry lets delivery run in DELIVERY_WORKERS processes of its
 * own (PostgreSQL only); otherwise (tests, the embedded database) it runs in this process.
 * `link`: one of several HTTP processes (instance/processes.ts): a Hub makes this app the
 * coordinator (it does all the instance's work but serve HTTP); a Member makes it an HTTP process,
 * which serves the API only, on the database the coordinator migrated, and counts what holds per
 * instance there.
 */
export async function buildApp(
  cfg: Config,
  opts: { logger?: FastifyServerOptions['logger']; db?: Db; deliveryProcesses?: boolean; link?: InstanceLink } = {},
): Promise<FastifyInstance> {
  const link = opts.link ?? null;
  const hub = link instanceof Hub ? link : null;
  /** An HTTP process of several: the coordinator does the instance's work. */
  const member = link !== null && hub === null;
  const app = Fastify({
    logger: opts.logger ?? { level: cfg.LOG_LEVEL },
    bodyLimit: MiB,
    // A client's X-Request-Id is kept when it is a sane token; anything else gets a fresh UUID.
    requestIdHeader: false,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && /^[A-Za-z0-9._:-]{1,128}$/.test(given) ? given : crypto.randomUUID();
    },
    return503OnClosing: true,
    // Behind a reverse proxy the client address (token endpoint throttling, logs) comes from
    // X-Forwarded-For, trusted only from these networks.
    trustProxy: cfg.TRUST_PROXY.length ? cfg.TRUST_PROXY : false,
    // API guide 2: headers and body must arrive within REQUEST_TIMEOUT_SECONDS, else 408 and close,
    // so a client trickling bytes cannot hold a connection (and a concurrency slot) for minutes.
    requestTimeout: cfg.REQUEST_TIMEOUT_SECONDS * 1000,
    http: {
      requestTimeout: cfg.REQUEST_TIMEOUT_SECONDS * 1000,
      headersTimeout: cfg.REQUEST_TIMEOUT_SECONDS * 1000,
      connectionsCheckingInterval: Math.min(1000, cfg.REQUEST_TIMEOUT_SECONDS * 250),
    },
    clientErrorHandler: clientError,
    forceCloseConnections: false,
    ajv: { customOptions: { strict: false } },
  });

  // Poison set aside by this process's consumers is logged here (src/ops/poison.ts).
  logPoisonTo(app.log);
  const raw = opts.db ?? (member ? await openDatabase(cfg) : await openMigrated(cfg));
  let limiter: Limiter | undefined;
  let deviceLimiter: Limiter | undefined;
  let replica: ReadReplica | null = null;
  let secretsKey: Buffer;
  const storage = new Storage(
    raw,
    {
      interval: cfg.PARTITION_INTERVAL,
      systemDays: cfg.RETENTION_DAYS ?? null,
      checkSeconds: cfg.RETENTION_CHECK_SECONDS,
      graceSeconds: cfg.RETENTION_GRACE_SECONDS,
      aheadSeconds: cfg.FUTURE_TOLERANCE_SECONDS,
      succeededDays: cfg.DELIVERY_SUCCEEDED_RETENTION_DAYS,
      failedDays: cfg.DELIVERY_FAILED_RETENTION_DAYS,
      rollupDays: cfg.ROLLUP_RETENTION_DAYS,
    },
    app.log,
  );
  // Every module writes through this: a row whose time has no partition yet gets one.
  const db = storage.db;
  const linkFailed = (what: string) => (e: unknown) => app.log.warn({ err: e }, `the coordinator did not answer; ${what}`);
  try {
    if (!member) {
      await migrate(raw, { programs: migrationPrograms(raw.kind, cfg.PARTITION_INTERVAL) });
      if (cfg.EVENT_LOG === 'postgres' && (await leaveKafkaMode(raw))) {
        app.log.warn("EVENT_LOG=postgres after kafka: integrations read the event log on from the relay's position (API guide 17)");
      }
    }
    secretsKey = loadSecretsKey(cfg, inMemory(cfg));
    const tokens = new TokenService(db, cfg, secretsKey);
    await tokens.init();
    const boot = member ? null : await bootstrap(db, cfg);
    const settings = { max: cfg.RATE_LIMIT_MAX, windowMs: cfg.RATE_LIMIT_WINDOW_SECONDS * 1000, concurrent: cfg.RATE_LIMIT_CONCURRENT };
    // Limits hold per instance: in Redis across instances, else in the coordinator's memory when
    // there are several HTTP processes, else in this process's.
    limiter = cfg.REDIS_URL
      ? await RedisLimiter.connect(cfg.REDIS_URL, settings, (e) =>
          app.log.warn({ err: e }, 'rate limit store unavailable; request admitted'),
        )
      : member
        ? linkedLimiter(link!, 'api', linkFailed('request admitted'))
        : new MemoryLimiter(settings);
    replica =
      cfg.DATABASE_READ_URL && db.kind === 'postgres'
        ? new ReadReplica(
            db,
            {
              url: cfg.DATABASE_READ_URL,
              poolSize: cfg.DB_POOL_SIZE,
              maxLagSeconds: cfg.REPLICA_MAX_LAG_SECONDS,
              readAfterWriteSeconds: cfg.READ_AFTER_WRITE_SECONDS,
            },
            cfg.REDIS_URL ? await redisWrites(cfg.REDIS_URL) : member ? linkedWrites(link!) : null,
            (e) => app.log.warn({ err: e }, 'read-after-write store unavailable; the read goes to the primary'),
          )
        : null;
    const hooks = new RecordHooks();
    // Devices have a limit of their own, per minute (a tracker reports every few seconds).
    const perDevice = { max: cfg.DEVICE_RATE_LIMIT_MAX, windowMs: 60_000, concurrent: 10 };
    deviceLimiter = cfg.REDIS_URL
      ? await RedisLimiter.connect(cfg.REDIS_URL, perDevice, (e) =>
          app.log.warn({ err: e }, 'rate limit store unavailable; message admitted'),
        )
      : member
        ? linkedLimiter(link!, 'device', linkFailed('message admitted'))
        : new MemoryLimiter(perDevice);
    // Read at use: with PORT=0 the port is known only once listening (below).
    app.decorate('publicUrl', { getter: () => cfg.publicUrl });
    const alerts = new AlertEngine(
      db,
      {
        sweepSeconds: cfg.ALERT_SWEEP_SECONDS,
        silenceSeconds: cfg.ALERT_SILENCE_SECONDS,
        maxCodesPerList: cfg.ALERT_MAX_CODES_PER_LIST,
        maxEventsPerHour: cfg.ALERT_MAX_EVENTS_PER_HOUR,
      },
      app.log,
    );
    const streamLimits = {
      maxOpenPerOwner: cfg.STREAM_MAX_OPEN_PER_OWNER,
      maxWindowHours: cfg.STREAM_MAX_WINDOW_HOURS,
      maxAnswerBytes: cfg.STREAM_MAX_ANSWER_BYTES,
    };
    // An owner's streams, counted where the instance counts them: shares of weight 1.
    const streamShares = member ? linkedShares(link!, 'streams', linkFailed('stream admitted')) : null;
    const streams = streamShares
      ? new ResultStreams(streamLimits, (owner, max) => streamShares(owner, 1, max))
      : new ResultStreams(streamLimits);
    // The live fleet streams: one reader per process; an owner's streams counted like result streams.
    const liveShares = member ? linkedShares(link!, 'live', linkFailed('live stream admitted')) : null;
    const live = new LiveFeed(
      db,
      {
        maxOpenPerOwner: cfg.LIVE_MAX_OPEN_PER_OWNER,
        maxOpen: cfg.LIVE_MAX_OPEN,
        pollMs: cfg.LIVE_POLL_MS,
        recheckSeconds: cfg.LIVE_RECHECK_SECONDS,
      },
      app.log,
      async (authorization) => new Tenancy(db, await authenticate(db, tokens, authorization)).visibleOwners(),
      liveShares ? (owner, max) => liveShares(owner, 1, max) : undefined,
    );
    const ingest = new Ingest({ db, cfg, hooks, limiter: deviceLimiter!, ...(member ? { budget: linkedLogBudget(link!) } : {}) });
    // What holds per instance travels over the link: the coordinator counts, casts reach every process.
    const bodyShares = member ? linkedShares(link!, 'body', linkFailed('body admitted')) : localShares();
    const unknownSignIns = member ? linkedSignIns(link!) : new UnknownSignIns(db, cfg.AUDIT_UNKNOWN_SIGN_IN_WINDOW_SECONDS);
    let instance: Services['instance'] = null;
    if (link) {
      const counts = hub
        ? serveCounts(hub, {
            limiters: { api: limiter, device: deviceLimiter! },
            shares: {
              body: bodyShares,
              streams: async (owner, _one, max) => streams.takeHere(owner, max),
              live: async (owner, _one, max) => live.takeHere(owner, max),
            },
            signIns: unknownSignIns,
            logBudget: (known, address) => ingest.logBudget(known, address),
          })
        : { gone() {} };
      // A device changed, or logins were revoked, in one process: every process forgets what it cached.
      link.handle('devices.forget', ([ids]) => ingest.forget(ids as string[]));
      link.handle('sessions.forget', () => tokens.sessions.clear());
      tokens.sessions.onForget = () =>
        void link.cast('sessions.forget').catch(linkFailed('other processes see the revocation within AUTH_SESSION_CACHE_MS'));
      instance = { link, gone: (slot) => counts.gone(slot) };
    }
    app.decorate('services', {
      cfg,
      db,
      tokens,
      limiter,
      bootstrap: boot,
      engine: null,
      delivery: null,
      alerts,
      streams,
      live,
      storage,
      hooks,
      ingest,
      downlink: null,
      replica,
      bodyShares,
      unknownSignIns,
      instance,
    });
  } catch (e) {
    await limiter?.close();
    await deviceLimiter?.close();
    await replica?.close();
    if (!opts.db) await raw.close();
    throw e;
  }
  const { tokens } = app.services;
  // PORT=0 lets the system pick a free port that nobody else holds (tests do): once bound, the
  // derived public URL (token issuer, Location and Link headers, OpenAPI servers) names that port.
  // The hook runs before listen() resolves and before any request is read.
  if (cfg.PORT === 0 && !cfg.PUBLIC_URL) {
    app.addHook('onListen', (done) => {
      cfg.publicUrl = cfg.publicUrl.replace(/:0$/, `:${(app.server.address() as AddressInfo).port}`);
      done();
    });
  }
  // First: the partitions of now exist before anything is stored or delivered. An HTTP process of
  // several leaves this, delivery, the alert sweep, MQTT ingest and the periodic work to the coordinator.
  if (!member) app.addHook('onReady', async () => storage.start());
  const policy = policyOf(cfg);
  if (member) {
    // no delivery here
  } else if (cfg.DELIVERY_ENABLED && opts.deliveryProcesses && db.kind === 'postgres' && cfg.DELIVERY_WORKERS > 0) {
    const processes = new DeliveryProcesses(cfg.DELIVERY_WORKERS, DELIVERY_MAIN, app.log);
    app.services.delivery = processes;
    app.addHook('onReady', async () => processes.start());
  } else if (cfg.DELIVERY_ENABLED) {
    const engine = deliveryEngine(db, cfg, secretsKey, policy, app.log);
    app.services.engine = engine;
    app.services.delivery = engine;
    app.addHook('onReady', async () => engine.start());
  }
  const { alerts } = app.services;
  if (!member) app.addHook('onReady', async () => alerts.start());
  // MQTT ingest (src/ingest/mqtt.ts): subscribed once the service is ready, closed first at shutdown.
  if (cfg.INGEST_MQTT_URL && !member) {
    const { ingest } = app.services;
    // Commands go out on the ingest's connection, and their answers come in on it (downlink.ts).
    const downlink = new CommandDownlink(db, cfg, app.log, ingestClientId(cfg));
    app.services.downlink = downlink;
    app.addHook('onReady', async () => {
      const handle = await startMqttIngest(ingest, cfg, app.log, {
        read: readAnswer,
        answer: (device, a) => downlink.answer(device, a as CommandAnswer),
        active: (assetIds) => downlink.active(assetIds),
        connected: () => downlink.poke(),
      });
      ingest.mqtt = handle;
      downlink.start(handle);
    });
  }
  // Periodic tasks that need no lease (each is idempotent; several instances may run them at once).
  const running = new Set<Promise<unknown>>();
  const timers: NodeJS.Timeout[] = [];
  const every = (seconds: number, what: string, fn: () => Promise<unknown>) => {
    if (member) return;
    let current: Promise<unknown> | undefined;
    const timer = setInterval(() => {
      if (current) return;
      current = fn()
        .catch((e) => app.log.warn({ err: e }, `${what} failed; it runs again shortly`))
        .finally(() => {
          running.delete(current!);
          current = undefined;
        });
      running.add(current);
    }, seconds * 1000);
    timer.unref();
    timers.push(timer);
  };
  // Open commands past their time-to-live are stored (and pushed) EXPIRED, on the alert sweep's cadence.
  every(cfg.ALERT_SWEEP_SECONDS, 'expiring commands', () => expireCommands(db));
  // Audit entries past AUDIT_RETENTION_DAYS go on the storage retention's cadence.
  every(cfg.RETENTION_CHECK_SECONDS, 'pruning the audit log', () => pruneAudit(db, cfg.AUDIT_RETENTION_DAYS));
  every(cfg.RETENTION_CHECK_SECONDS, 'pruning the ingest error log', () => pruneIngestErrors(db));
  // Rollups: late records are folded into their hours every 10 seconds (a reader folds them first
  // anyway: this keeps what a reader may find to fold small; a fold every second rewrote each
  // backfilled hour's row every second, and split concurrent stores' parts more often), the hours
  // that closed are summed every minute and before retention removes raw rows.
  every(10, 'folding rollups', () => foldRollups(db, cfg.ROLLUP_RETENTION_DAYS, false));
  const closed = () => Date.now() - cfg.ROLLUP_CLOSE_AFTER_SECONDS * 1000;
  every(60, 'summing closed hours into rollups', () => materializeRollups(db, closed(), cfg.ROLLUP_RETENTION_DAYS));
  if (!member) storage.retention.before = () => materializeRollups(db, closed(), cfg.ROLLUP_RETENTION_DAYS);
  // The event log on Kafka: nothing the consumer group has not handed over goes (API guide 17);
  // while the cluster cannot be asked, every row of the event log stays.
  if (cfg.EVENT_LOG === 'kafka' && !member) {
    storage.retention.logFloor = async () => {
      try {
        const { floor, lost } = await consumerFloor(db, cfg);
        if (lost.length) app.log.error({ partitions: lost }, "the event log's consumer group lost messages to the topic's retention");
        return floor;
      } catch (e) {
        app.log.warn({ err: e }, "retention: the event log's consumer group cannot be asked; the event log is kept");
        return KEEP_ALL;
      }
    };
  }
  // Live streams end (with an `end` event) before the server waits for its connections to close.
  app.addHook('preClose', async () => app.services.live.close());
  app.addHook('onClose', async () => {
    // Delivery stops first (a stopping instance sends nothing new and hands its claims back at
    // once), beside the periodic tasks' last turns rather than after them.
    for (const t of timers) clearInterval(t);
    await app.services.downlink?.close();
    await app.services.ingest.mqtt?.close();
    const delivery = app.services.delivery?.stop();
    await storage.stop();
    await alerts.stop();
    await Promise.all(running);
    await delivery;
    await app.services.limiter.close();
    await app.services.ingest.deps.limiter.close();
    await app.services.replica?.close();
    if (!opts.db) await raw.close();
  });

  // Only JSON bodies (415 otherwise); the token endpoint adds form bodies in its own scope.
  app.removeContentTypeParser('text/plain');
  // JSON must be UTF-8; PATCH bodies are JSON merge patches (RFC 7396): their own media type too.
  installJsonParsers(app);
  installValidation(app);
  installSerializer(app);
  installErrorEnvelope(app);
  // Every documented route answers errors in the one envelope: say so in the OpenAPI document.
  app.addHook('onRoute', (r) => {
    if (!r.schema || r.schema.hide) return;
    r.schema.response = { ...(r.schema.response as object), '4xx': ErrorSchema, '5xx': ErrorSchema };
    completeOperation(r);
  });
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Asset tracking service',
        version: '1',
        description:
          'Assets, owners and their data; push to webhooks, MQTT and Kafka. Errors: {error, message, code, requestId, field}. Guide: docs/API.md in the repository.',
        license: { name: 'Apache-2.0', url: 'https://www.apache.org/licenses/LICENSE-2.0' },
      },
      servers: [
        {
          get url() {
            return cfg.publicUrl; // read when the document is first built, after listen
          },
        },
      ],
      components: {
        securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'JWT from the token endpoint, or an API key' } },
      },
      security: [{ bearer: [] }],
      // What the service pushes to customer systems (API guide 8, "Push objects").
      webhooks: pushWebhooks({ event: Event, notification: Notification, command: Command }),
    },
  });
  // After-store work plugs into the records module here; records knows neither zones nor alerts.
  const { hooks } = app.services;
  for (const def of RECORD_DEFS) hooks.register(storage.hook(def.type, def.table));
  hooks
    .register(zoneHook)
    .register(alerts.hook('reeferdata'))
    .register(alerts.hook('gensetdata'))
    .register(silenceHook(RECORD_DEFS.map((d) => d.type)));
  for (const h of rollupHooks()) hooks.register(h);
  // Before every /api/v1 handler, in this order: who asks and may they (auth/), how many they ask
  // (limits), whether they asked this already (idempotency).
  installAuthentication(app, { db, tokens });
  installLimits(app, { limiter: app.services.limiter, rateLimitMax: cfg.RATE_LIMIT_MAX });
  installBodyBudget(app, { maxBytes: cfg.RECORD_BODY_BYTES_IN_FLIGHT, shares: app.services.bodyShares });
  // Reads from a streaming replica (src/replica/): which database a request's lists read.
  app.decorateRequest('reads', null);
  const readReplica = app.services.replica;
  if (readReplica) {
    readReplica.install(app);
    app.addHook('onReady', async () => readReplica.start());
  }
  installIdempotency(app, { db, windowSeconds: cfg.IDEMPOTENCY_WINDOW_SECONDS, abandonSeconds: cfg.IDEMPOTENCY_ABANDON_SECONDS });

  await app.register(authRoutes, { db, cfg, tokens, unknownSignIns: app.services.unknownSignIns });
  // The Kafka event log's two gauges (lag, offsets lost), collected together in a scrape, share the
  // read of the group's offsets in flight: each read is an admin connection to the cluster.
  let offsets: Promise<PartitionOffsets[]> | undefined;
  const partitions = () => {
    offsets ??= groupOffsets(cfg).finally(() => {
      offsets = undefined;
    });
    return offsets;
  };
  await app.register(opsRoutes, {
    db,
    ...(link ? { link } : {}),
    ...(hub ? { hub } : {}),
    figures: {
      pending: () => pendingTotal(db),
      oldestTransactionAge: () => oldestTransactionAge(db),
      consumerLag: async () => lagOf(await partitions()),
      offsetsLost: async () => (await partitions()).filter(offsetsLost).length,
    },
  });
  await app.register(dashboardRoutes, { realm: cfg.AUTH_REALM, tiles: mapTiles(cfg) });
  await app.register(emailLinkRoutes, { db, secretsKey, linkHours: cfg.EMAIL_LINK_HOURS });
  // Share links' pages (src/share/): no sign-in, the link is the credential.
  await app.register(sharePageRoutes, { db, cfg });
  // Devices send here, at the server root: they carry no token (src/ingest/).
  await app.register(osmandRoutes, { ingest: app.services.ingest });
  await app.register(traccarRoutes, { ingest: app.services.ingest, token: cfg.INGEST_TRACCAR_TOKEN });
  await app.register(
    async (api) => {
      await api.register(ownerRoutes, { db, retentionDays: cfg.RETENTION_DAYS ?? null, graceSeconds: cfg.RETENTION_GRACE_SECONDS });
      await api.register(assetRoutes, { db });
      await api.register(overviewRoutes, { db, maxAssets: cfg.OVERVIEW_MAX_ASSETS });
      await api.register(credentialRoutes, { db, passwordCost: cfg.PASSWORD_HASH_COST });
      await api.register(recordRoutes, { db, cfg, hooks });
      await api.register(positionRoutes, { db });
      await api.register(zoneRoutes, { db, limits: cfg });
      await api.register(eventRoutes, { db });
      await api.register(acknowledgeRoutes, { db });
      await api.register(auditRoutes, { db });
      await api.register(rollupRoutes, { db });
      await api.register(deviceRoutes, {
        db,
        changed: async (ids) => {
          app.services.ingest.forget(ids);
          await link?.cast('devices.forget', ids).catch(linkFailed('other processes forget the device within DEVICE_CACHE_MS'));
        },
      });
      await api.register(ingestErrorRoutes, { db });
      await api.register(reportRoutes, { db, cfg });
      await api.register(specificationRoutes, { db, alerts });
      await api.register(notificationRoutes, { db });
      await api.register(commandRoutes, { db, cfg });
      await api.register(bookingRoutes, { db, cfg });
      await api.register(integrationRoutes, { db, secretsKey, policy, limits: cfg });
      await api.register(historyRoutes, { db, secretsKey, policy });
      await api.register(streamRoutes, { db, streams: app.services.streams });
      await api.register(liveRoutes, { db, feed: app.services.live });
      await api.register(shareLinkRoutes, { db, maxLinksPerOwner: cfg.SHARE_MAX_LINKS_PER_OWNER });
    },
    { prefix: '/api/v1' },
  );
  // DCSA Track & Trace 3.0.0's Event Producer (src/dcsa/): the standard's path, the same credentials.
  await app.register(dcsaRoutes, { prefix: '/api/dcsa/tnt/v3', db, settings: cfg });
  return app;
}

/** What the e-mail channel needs (API guide 9, "E-mail"): one SMTP pool per process, made when first used. */
function emailDeps(db: Db, cfg: Config, secretsKey: Buffer, log: FastifyBaseLogger) {
  let mailer: Mailer | null = null;
  const smtpUrl = cfg.SMTP_URL;
  return {
    db,
    secretsKey,
    log,
    publicUrl: () => cfg.publicUrl,
    mailer: () => {
      if (smtpUrl && !mailer) mailer = new Mailer({ ...cfg, SMTP_URL: smtpUrl, ca: pemOrFile(cfg.SMTP_CA) });
      return mailer;
    },
    allowedDomains: cfg.EMAIL_ALLOWED_DOMAINS,
    linkHours: cfg.EMAIL_LINK_HOURS,
    tickMs: cfg.EMAIL_TICK_MS,
    onClose: () => mailer?.close(),
  };
}

/** The delivery process's entry, as this file is run (.ts under tsx, .js when built). */
const here = fileURLToPath(import.meta.url);
const DELIVERY_MAIN = path.join(path.dirname(here), `delivery-main${path.extname(here)}`);

/**
 * The delivery engine with every channel and the event log's source of first attempts (in
 * PostgreSQL, or on Kafka with EVENT_LOG=kafka), as the configuration sets them up.
 */
export function deliveryEngine(db: Db, cfg: Config, secretsKey: Buffer, policy: AddressPolicy, log: FastifyBaseLogger): DeliveryEngine {
  // One instance per channel: a channel is an entry here, not code in the engine.
  const channels = new Map<string, Channel>([
    [
      'webhook',
      webhookChannel(
        policy,
        () => cfg.publicUrl,
        dcsaRenderer(db, { party: partyOf(cfg), thinSeconds: cfg.DCSA_LOC_INTERVAL_MINUTES * 60 }),
      ),
    ],
    ['mqtt', mqttChannel(policy)],
    ['kafka', kafkaChannel(policy)],
    ['email', emailChannel(emailDeps(db, cfg, secretsKey, log))],
  ]);
  const source = cfg.EVENT_LOG === 'kafka' ? new KafkaFirstAttempts(db, cfg, cfg.DELIVERY_POLL_MS, log) : new PostgresFirstAttempts();
  return new DeliveryEngine(
    db,
    secretsKey,
    channels,
    {
      leaseSeconds: cfg.DELIVERY_LEASE_SECONDS,
      pollMs: cfg.DELIVERY_POLL_MS,
      maxJobs: cfg.DELIVERY_MAX_IN_FLIGHT,
      succeededRetentionDays: cfg.DELIVERY_SUCCEEDED_RETENTION_DAYS,
      failedRetentionDays: cfg.DELIVERY_FAILED_RETENTION_DAYS,
    },
    log,
    source,
  );
}

/**
 * A delivery process (delivery-main.ts), on PostgreSQL after the HTTP process migrated it: its
 * database (`raw` counts the statements) and its engine.
 */
export function buildDeliveryProcess(cfg: Config, log: FastifyBaseLogger): { raw: Db; db: Db; engine: DeliveryEngine } {
  if (!cfg.DATABASE_URL) throw new Error('a delivery process needs PostgreSQL (DATABASE_URL)');
  const raw = createPostgres(cfg.DATABASE_URL, cfg.DB_POOL_SIZE);
  // Results are written at the time they happen: a partition the service has not made yet is made here.
  const db = withPartitions(raw, new Partitions(raw, cfg.PARTITION_INTERVAL));
  const engine = deliveryEngine(db, cfg, loadSecretsKey(cfg, false), policyOf(cfg), log);
  return { raw, db, engine };
}
