// One validated configuration, parsed once at boot (API guide 11).
// Every bad variable is listed in a single error so an operator fixes them all at once.
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

type Parser<T> = (raw: string) => T;

const int =
  (min: number, max: number): Parser<number> =>
  (raw) => {
    if (!/^-?\d+$/.test(raw.trim())) throw new Error(`must be a whole number`);
    const n = Number(raw);
    if (n < min || n > max) throw new Error(`must be between ${min} and ${max}`);
    return n;
  };
const bool: Parser<boolean> = (raw) => {
  const v = raw.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(v)) return true;
  if (['0', 'false', 'no', 'off', ''].includes(v)) return false;
  throw new Error('must be true or false');
};
const str: Parser<string> = (raw) => raw;
const url =
  (protocols: string[]): Parser<string> =>
  (raw) => {
    let u: URL;
    try {
      u = new URL(raw);
    } catch {
      throw new Error('must be a URL');
    }
    if (!protocols.includes(u.protocol)) throw new Error(`must use ${protocols.join(' or ')}`);
    return raw;
  };
const oneOf =
  <T extends string>(values: readonly T[]): Parser<T> =>
  (raw) => {
    if (!(values as readonly string[]).includes(raw)) throw new Error(`must be one of ${values.join(', ')}`);
    return raw as T;
  };
const cidrList: Parser<string[]> = (raw) =>
  raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((c) => {
      if (!/^[0-9a-fA-F:.]+\/\d{1,3}$/.test(c)) throw new Error(`"${c}" is not a CIDR`);
      return c;
    });
const secretsKey: Parser<Buffer> = (raw) => {
  const b = Buffer.from(raw, /^[0-9a-fA-F]{64}$/.test(raw) ? 'hex' : 'base64');
  if (b.length !== 32) throw new Error('must be 32 bytes, as 64 hex characters or base64');
  return b;
};

/**
 * A raster tile template: an http or https URL with {z}, {x} and {y} (and optionally {s}, a
 * subdomain among a, b and c, and {r}, "@2x" on a high-density screen). Leaflet draws raster tiles
 * only: a vector style or a TileJSON URL (no {z}/{x}/{y}) is refused here, at start-up.
 */
export const TILE_SUBDOMAINS = ['a', 'b', 'c'] as const;
const tileTemplate: Parser<string> = (raw) => {
  const t = raw.trim();
  const unknown = [...t.matchAll(/\{([^}]*)\}/g)].map((m) => m[1]).filter((k) => !['z', 'x', 'y', 's', 'r', '-y'].includes(k!));
  if (!t.includes('{z}') || !t.includes('{x}') || !(t.includes('{y}') || t.includes('{-y}')))
    throw new Error(
      'must be a raster tile template with {z}, {x} and {y}, e.g. https://tile.example.org/{z}/{x}/{y}.png (a vector style or TileJSON URL is not supported)',
    );
  if (unknown.length) throw new Error(`has {${unknown[0]}}: only {z}, {x}, {y}, {-y}, {s} and {r} are filled in`);
  let u: URL;
  try {
    u = new URL(t.replaceAll('{s}', 'a').replace(/\{-?[zxyr]\}/g, '0'));
  } catch {
    throw new Error('must be a URL');
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('must use http: or https:');
  if (u.username || u.password) throw new Error('must not carry a user name or password (the browser shows it to everyone)');
  return t;
};

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

// name -> [parser, default (undefined = optional), description for docs/CONFIGURATION.md]
const spec = {
  PORT: [int(0, 65535), '8080'],
  HOST: [str, '127.0.0.1'],
  PUBLIC_URL: [url(['http:', 'https:']), undefined],
  DATA_DIR: [str, './data'],
  // The embedded database's buffer cache (PostgreSQL's shared_buffers), held in the service's own
  // memory: PGlite's 128 MB default was a quarter of an idle `npm start`'s resident memory; 16 MB
  // keeps a fresh start idle under 250 MB with the database's thread (docs/BENCHMARKS.md).
  EMBEDDED_SHARED_BUFFERS_MB: [int(1, 4096), '16'],
  DATABASE_URL: [url(['postgres:', 'postgresql:']), undefined],
  DB_POOL_SIZE: [int(1, 200), '10'],
  // Reads from a streaming replica (API guide 16): lists, exports and reports read there, unless the
  // credential wrote within READ_AFTER_WRITE_SECONDS or the replica lags more than
  // REPLICA_MAX_LAG_SECONDS (then the primary serves them).
  DATABASE_READ_URL: [url(['postgres:', 'postgresql:']), undefined],
  READ_AFTER_WRITE_SECONDS: [int(0, 3600), '5'],
  REPLICA_MAX_LAG_SECONDS: [int(1, 86_400), '10'],
  REDIS_URL: [url(['redis:', 'rediss:']), undefined],
  LOG_LEVEL: [oneOf(LOG_LEVELS), 'info'],
  AUTH_REALM: [
    (raw: string) => {
      if (!/^[A-Za-z0-9_-]{1,64}$/.test(raw)) throw new Error('must be 1-64 letters, digits, _ or -');
      return raw;
    },
    'tracking',
  ],
  TOKEN_LIFE_SECONDS: [int(1, 86400), '1200'],
  REFRESH_TOKEN_LIFE_SECONDS: [int(1, 30 * 86400), '28800'],
  // The built-in issuer's sign-in session (the browser's cookie): how long a sign-in lasts at most.
  SIGN_IN_SESSION_HOURS: [int(1, 30 * 24), '10'],
  AUTH_EXTERNAL_ISSUER: [url(['http:', 'https:']), undefined],
  AUTH_EXTERNAL_AUDIENCE: [str, undefined],
  AUTH_EXTERNAL_JWKS_URL: [url(['http:', 'https:']), undefined],
  AUTH_OWNER_CLAIM: [str, 'owner_id'],
  AUTH_ROLES_CLAIM: [str, 'roles'],
  // API guide 2: a revocation reaches other instances within 10 s; this is how long one trusts its
  // cached view of a login (0: ask the database on every request).
  AUTH_SESSION_CACHE_MS: [int(0, 9000), '5000'],
  AUTH_THROTTLE_FAILURES: [int(1, 1_000_000), '10'],
  AUTH_THROTTLE_WINDOW_SECONDS: [int(1, 86400), '300'],
  // log2 of scrypt's N for passwords set from now on (2^17 is OWASP's advice at 128 MiB a hash).
  PASSWORD_HASH_COST: [int(10, 17), '14'],
  BOOTSTRAP_OWNER_NAME: [str, 'operator'],
  BOOTSTRAP_CLIENT_ID: [str, undefined],
  BOOTSTRAP_CLIENT_SECRET: [str, undefined],
  BOOTSTRAP_USERNAME: [str, undefined],
  BOOTSTRAP_PASSWORD: [str, undefined],
  SECRETS_KEY: [secretsKey, undefined],
  RATE_LIMIT_MAX: [int(1, 10_000_000), '1000'],
  RATE_LIMIT_WINDOW_SECONDS: [int(1, 7 * 86400), '3600'],
  RATE_LIMIT_CONCURRENT: [int(1, 10_000), '10'],
  IDEMPOTENCY_WINDOW_SECONDS: [int(1, 30 * 86400), '86400'],
  IDEMPOTENCY_ABANDON_SECONDS: [int(1, 86400), '120'],
  FUTURE_TOLERANCE_SECONDS: [int(0, 7 * 86400), '600'],
  SHUTDOWN_TIMEOUT_MS: [int(0, 600_000), '10000'],
  REQUEST_TIMEOUT_SECONDS: [int(1, 3600), '30'],
  TRUST_PROXY: [cidrList, ''],
  PUSH_ALLOW_HTTP: [bool, 'false'],
  PUSH_ALLOW_PLAINTEXT_BROKERS: [bool, 'false'],
  DELIVERY_ENABLED: [bool, 'true'],
  DELIVERY_WORKERS: [int(0, 16), '1'],
  // HTTP processes of one instance (instance/processes.ts): `auto` is one per core but one (left to
  // delivery and the database: on 2 cores a second HTTP process ingested no faster), at most 8.
  HTTP_WORKERS: [
    (raw: string) => (raw.trim() === 'auto' ? Math.max(1, Math.min(8, os.availableParallelism() - 1)) : int(1, 64)(raw)),
    'auto',
  ],
  DELIVERY_LEASE_SECONDS: [
    (raw: string) => {
      const n = Number(raw);
      if (!(n >= 0.5 && n <= 3600)) throw new Error('must be 0.5 to 3600 seconds');
      return n;
    },
    '60',
  ],
  DELIVERY_POLL_MS: [int(10, 60_000), '1000'],
  DELIVERY_MAX_IN_FLIGHT: [int(1, 10_000), '64'],
  DELIVERY_SUCCEEDED_RETENTION_DAYS: [int(1, 3650), '7'],
  DELIVERY_FAILED_RETENTION_DAYS: [int(1, 3650), '30'],
  // Storage (docs/DESIGN.md, "Storage"): the width of the time partitions, how long data is kept (unset:
  // forever; owners may keep theirs shorter), how often expired data is removed, and how long a
  // shortened retention waits before it removes anything.
  PARTITION_INTERVAL: [oneOf(['day', 'week', 'month'] as const), 'week'],
  RETENTION_DAYS: [int(1, 36500), undefined],
  RETENTION_CHECK_SECONDS: [int(10, 7 * 86400), '3600'],
  RETENTION_GRACE_SECONDS: [int(0, 365 * 86400), '86400'],
  PUSH_ALLOWED_NETWORKS: [cidrList, ''],
  // Customer-made integrations (API guide 9): how many one top-level owner's tree may have, and the
  // ceilings on their pace (an operator's integrations have none).
  CUSTOMER_MAX_INTEGRATIONS: [int(0, 100_000), '10'],
  CUSTOMER_MAX_ITEMS_PER_MINUTE: [int(1, 100_000_000), '60000'],
  CUSTOMER_MAX_CONCURRENT_REQUESTS: [int(1, 256), '8'],
  // E-mail (API guide 9, "E-mail"): the SMTP server alerts go through (smtp:// with STARTTLS when
  // the server offers it, or smtps://; unset: the e-mail channel refuses integrations), its
  // credentials when not in the URL, the sender, the domains recipients may be at (empty: any),
  // the ceilings on an integration's recipients and a customer's messages per hour, and how long
  // a mailed acknowledgement link stays valid.
  SMTP_URL: [url(['smtp:', 'smtps:']), undefined],
  SMTP_USERNAME: [str, undefined],
  SMTP_PASSWORD: [str, undefined],
  SMTP_CA: [str, undefined],
  SMTP_FROM: [str, 'Asset tracking <alerts@localhost>'],
  EMAIL_ALLOWED_DOMAINS: [
    (raw: string) =>
      raw
        .split(',')
        .map((s) => s.trim().toLowerCase())
        .filter(Boolean)
        .map((d) => {
          if (!/^[a-z0-9.-]+\.[a-z0-9-]+$/.test(d)) throw new Error(`"${d}" is not a domain`);
          return d;
        }),
    '',
  ],
  EMAIL_MAX_RECIPIENTS: [int(1, 1000), '10'],
  EMAIL_MAX_MESSAGES_PER_HOUR: [int(1, 100_000), '60'],
  EMAIL_LINK_HOURS: [int(1, 30 * 24), '72'],
  // How often each delivering process looks for digests, escalations and confirmations to mail.
  EMAIL_TICK_MS: [int(0, 3_600_000), '5000'],
  // The audit log (API guide 14): how long its entries are kept.
  AUDIT_RETENTION_DAYS: [int(1, 36500), '365'],
  // Exports (API guide 5): the longest from..to range one export may cover.
  EXPORT_MAX_DAYS: [int(1, 36500), '366'],
  REPORT_MAX_DAYS: [int(1, 36500), '92'],
  // The asset overview (API guide 5): the assets one answer covers (its sort and page are computed
  // in the process: at most 10,000, a few hundred milliseconds of the event loop).
  OVERVIEW_MAX_ASSETS: [int(1, 10_000), '1000'],
  // DCSA Track & Trace (API guide 18): the publisher named in each event's eventRouting (none
  // while DCSA_PARTY_CODE is unset), and the locations' thinning: one LOC event per asset per interval.
  DCSA_PARTY_CODE: [str, undefined],
  DCSA_CODE_LIST_PROVIDER: [str, 'ZZZ'],
  DCSA_CODE_LIST_NAME: [str, undefined],
  DCSA_LOC_INTERVAL_MINUTES: [int(1, 1440), '15'],
  ROLLUP_RETENTION_DAYS: [int(1, 36500), '1095'],
  ROLLUP_CLOSE_AFTER_SECONDS: [int(0, 90 * 86400), '300'],
  INGEST_TRACCAR_TOKEN: [
    (raw: string) => {
      if (raw.length < 16) throw new Error('must be at least 16 characters');
      return raw;
    },
    undefined,
  ],
  DEVICE_RATE_LIMIT_MAX: [int(1, 10_000_000), '600'],
  // MQTT ingest (API guide 15): the broker devices publish to (unset: no MQTT ingest), its
  // credentials and CA (a PEM file's path, or the PEM itself), the topics' prefix, this instance's
  // persistent session (its client id, how long the broker keeps it while the instance is away,
  // how many unacknowledged messages it takes at once) and the shared subscription's group.
  INGEST_MQTT_URL: [url(['mqtt:', 'mqtts:']), undefined],
  INGEST_MQTT_USERNAME: [str, undefined],
  INGEST_MQTT_PASSWORD: [str, undefined],
  INGEST_MQTT_CA: [str, undefined],
  INGEST_MQTT_TOPIC_PREFIX: [
    (raw: string) => {
      if (!/^[^#+/]+(\/[^#+/]+)*$/.test(raw) || raw.startsWith('$')) {
        throw new Error('must be topic levels without wildcards, leading $ or empty levels (e.g. devices or fleet/devices)');
      }
      return raw;
    },
    'devices',
  ],
  INGEST_MQTT_CLIENT_ID: [
    (raw: string) => {
      if (!/^[A-Za-z0-9._-]{1,128}$/.test(raw)) throw new Error('must be 1-128 letters, digits, dots, dashes or underscores');
      return raw;
    },
    undefined,
  ],
  INGEST_MQTT_SHARE_GROUP: [
    (raw: string) => {
      if (!/^[A-Za-z0-9._-]{1,64}$/.test(raw)) throw new Error('must be 1-64 letters, digits, dots, dashes or underscores');
      return raw;
    },
    'tracking',
  ],
  INGEST_MQTT_SESSION_EXPIRY_SECONDS: [int(0, 4_294_967_295), String(7 * 86_400)],
  INGEST_MQTT_RECEIVE_MAXIMUM: [int(1, 65_535), '1000'],
  // The event log (API guide 17): in PostgreSQL (default) or relayed to a Kafka topic that the
  // delivery processes of every instance read as one consumer group. The brokers (host:port, comma-
  // separated), TLS (EVENT_LOG_KAFKA_TLS, a CA as a PEM file's path or the PEM itself) and SASL as the
  // Kafka channel names them; the topic, made when missing with EVENT_LOG_PARTITIONS partitions and
  // EVENT_LOG_REPLICATION replicas (unset: 3, or the cluster's broker count when smaller); the group.
  EVENT_LOG: [oneOf(['postgres', 'kafka'] as const), 'postgres'],
  EVENT_LOG_KAFKA_BROKERS: [
    (raw: string) => {
      const list = raw
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
      for (const b of list) {
        if (!/^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/.test(b)) throw new Error(`"${b}" is not host:port`);
      }
      if (!list.length) throw new Error('must name at least one broker (host:port)');
      return list;
    },
    undefined,
  ],
  EVENT_LOG_KAFKA_TLS: [bool, 'false'],
  EVENT_LOG_KAFKA_CA: [str, undefined],
  EVENT_LOG_KAFKA_SASL_MECHANISM: [oneOf(['plain', 'scram-sha-256', 'scram-sha-512'] as const), undefined],
  EVENT_LOG_KAFKA_SASL_USERNAME: [str, undefined],
  EVENT_LOG_KAFKA_SASL_PASSWORD: [str, undefined],
  EVENT_LOG_KAFKA_CLIENT_ID: [
    (raw: string) => {
      if (!/^[A-Za-z0-9._-]{1,128}$/.test(raw)) throw new Error('must be 1-128 letters, digits, dots, dashes or underscores');
      return raw;
    },
    'tracking',
  ],
  EVENT_LOG_TOPIC: [
    (raw: string) => {
      if (!/^[A-Za-z0-9._-]{1,249}$/.test(raw) || raw === '.' || raw === '..') throw new Error('must be a Kafka topic name');
      return raw;
    },
    'tracking.event-log',
  ],
  EVENT_LOG_PARTITIONS: [int(1, 10_000), '12'],
  EVENT_LOG_REPLICATION: [int(1, 32), undefined],
  EVENT_LOG_GROUP: [
    (raw: string) => {
      if (!/^[A-Za-z0-9._-]{1,128}$/.test(raw)) throw new Error('must be 1-128 letters, digits, dots, dashes or underscores');
      return raw;
    },
    'tracking.delivery',
  ],
  // The result stream (API guide 9): streams open at once per owner, how far back `since` reaches,
  // and the bytes after which an NDJSON answer ends with a line naming where to go on.
  STREAM_MAX_OPEN_PER_OWNER: [int(1, 1000), '5'],
  STREAM_MAX_WINDOW_HOURS: [int(1, 24 * 3650), '168'],
  STREAM_MAX_ANSWER_BYTES: [int(1024, 1024 * 1024 * 1024), String(64 * 1024 * 1024)],
  // The live fleet stream (API guide 9, "Live fleet"): streams open at once per owner (per
  // instance) and per HTTP process, how often the process's one reader looks at the event log when
  // no notification woke it, and how often each open stream's credential is checked again.
  LIVE_MAX_OPEN_PER_OWNER: [int(1, 1000), '10'],
  LIVE_MAX_OPEN: [int(1, 100_000), '1000'],
  LIVE_POLL_MS: [int(50, 10_000), '500'],
  LIVE_RECHECK_SECONDS: [int(1, 3600), '15'],
  // The alert sweep (API guide 8): how often it looks for violations that fell due on silent assets,
  // and how long an asset must have sent nothing before the sweep acts for it (0 = at once).
  ALERT_SWEEP_SECONDS: [int(1, 3600), '30'],
  ALERT_SILENCE_SECONDS: [int(0, 86400), '60'],
  // What one record and one asset can raise (API guide 8): codes per list in a record (more is a
  // 400), and events per asset and hour of record time (past it, one summary event and a count).
  ALERT_MAX_CODES_PER_LIST: [int(1, 10_000), '32'],
  ALERT_MAX_EVENTS_PER_HOUR: [int(1, 1_000_000), '100'],
  BOOKING_DATA_TYPE: [
    (raw: string) => {
      if (!/^[A-Z][A-Z0-9]*_V1$/.test(raw)) throw new Error('must look like <CARRIER>_V1');
      return raw;
    },
    'MAERSK_V1',
  ],
  // Record times (docs/DESIGN.md, "Storage", API guide 1): how far in the past a record's time may lie (a
  // REST whenCreated, an OsmAnd timestamp, a Traccar fixTime or eventTime, an MQTT whenCreated); with
  // FUTURE_TOLERANCE_SECONDS ahead it is the one window every way in applies, which bounds the
  // partitions any input can make. A year and a day: a device's or a ship's offline backlog.
  RECORD_MAX_AGE_DAYS: [int(1, 36500), '366'],
  // Zones (API guide 8, "Zones"): how many zones, and how many positions over their shapes (a
  // circle counts one), one top-level owner's tree may have; storing a location costs with both.
  ZONES_MAX_PER_OWNER: [int(1, 1_000_000), '1000'],
  ZONES_MAX_VERTICES_PER_OWNER: [int(1, 100_000_000), '100000'],
  // Unauthenticated callers (API guide 14 and 15): what nobody signed in can make the service write.
  // Failed sign-ins naming no existing user or client: one audit entry per client address, kind and
  // window of this many seconds (per instance), counting the attempts.
  AUDIT_UNKNOWN_SIGN_IN_WINDOW_SECONDS: [int(1, 86400), '3600'],
  // Ingest error log rows for messages naming no known device: at most this many per client address
  // a minute, and INGEST_UNKNOWN_ERRORS_PER_MINUTE from all addresses together, per instance; past
  // either, only counted (ingest_errors_unlogged_total). Known devices' errors have their own budget.
  INGEST_UNKNOWN_ERRORS_PER_ADDRESS: [int(0, 100_000), '10'],
  INGEST_UNKNOWN_ERRORS_PER_MINUTE: [int(0, 1_000_000), '300'],
  // MQTT ingest's bounds (API guide 15, "Poison and memory"): the largest message payload the
  // service reads (announced to the broker as the CONNECT's Maximum Packet Size, plus room for the
  // topic, so it drops larger ones; one that still arrives is refused unread into the error log),
  // and the payload bytes received and not yet stored or refused past which the service stops
  // reading from the broker (the broker holds the rest). Both are sized to `npm start`'s 128 MB heap:
  // a message's parsed records take several times its bytes.
  INGEST_MQTT_MAX_MESSAGE_BYTES: [int(1024, 64 * 1024 * 1024), String(512 * 1024)],
  INGEST_MQTT_MAX_BYTES_IN_FLIGHT: [int(1024, 1024 * 1024 * 1024), String(2 * 1024 * 1024)],
  // Commands over MQTT (API guide 8, "Commands to MQTT devices"): open commands (PENDING or SENT)
  // one asset may have (a flood is a 409 before it reaches the broker); how long an instance that
  // published a command waits for the broker's PUBACK before another may publish it again; how long
  // after a publish a SENT command still unanswered is published again when its device shows itself;
  // the most publishes of one command; how often each instance looks for commands another made.
  COMMAND_MAX_OPEN_PER_ASSET: [int(1, 100_000), '100'],
  COMMAND_LEASE_SECONDS: [int(1, 3600), '30'],
  COMMAND_REPUBLISH_SECONDS: [int(1, 86_400), '60'],
  COMMAND_MAX_PUBLISHES: [int(1, 1000), '10'],
  COMMAND_POLL_MS: [int(50, 60_000), '1000'],
  // Share links (API guide 8, "Share links"): links in effect per top-level owner's tree; answered
  // uses of one link a minute (counted in the database: for the whole service); requests for share
  // pages from one client address a minute, whatever the token (per HTTP process, or per instance
  // with REDIS_URL), so neither a leaked link nor a guesser can make the service work for nobody.
  SHARE_MAX_LINKS_PER_OWNER: [int(1, 1_000_000), '1000'],
  SHARE_MAX_USES_PER_MINUTE: [int(1, 100_000), '60'],
  SHARE_MAX_REQUESTS_PER_ADDRESS: [int(1, 1_000_000), '300'],
  // Street maps (docs/CONFIGURATION.md): unset, the dashboard's map and the share pages draw the
  // service's own offline base map and ask no other machine for anything; set, a raster tile
  // template the browser fetches tiles from (its origin added to the pages' img-src), and the
  // attribution the tiles' terms require.
  MAP_TILE_URL: [tileTemplate, undefined],
  MAP_ATTRIBUTION: [str, undefined],
  // Request bodies over 1 MiB (only the data-record creates take them, up to 8 MiB) being parsed,
  // stored and answered at once, per instance (API guide 7): past it a create is answered 503 with
  // Retry-After before its body is read. Sized to `npm start`'s 128 MB heap: one 8 MiB bulk took
  // the heap from about 70 to 120 MB, ten at once ran it out.
  RECORD_BODY_BYTES_IN_FLIGHT: [int(8 * 1024 * 1024, 1024 * 1024 * 1024), String(8 * 1024 * 1024)],
} as const;

type Spec = typeof spec;
type Parsed<K extends keyof Spec> = Spec[K][0] extends Parser<infer T> ? T : never;
export type Config = {
  [K in keyof Spec]: Spec[K][1] extends string ? Parsed<K> : Parsed<K> | undefined;
} & { publicUrl: string; dataDir: string };

/** A CA setting (INGEST_MQTT_CA, EVENT_LOG_KAFKA_CA, SMTP_CA): the PEM itself or a file's path. */
export function pemOrFile(value: string | undefined): string | undefined {
  if (!value) return undefined;
  return value.includes('-----BEGIN') ? value : readFileSync(value, 'utf8');
}

/** http://host:port for a listening address; a wildcard host is reached on the loopback address. */
export function httpBase(host: string, port: number): string {
  const h = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  return `http://${h.includes(':') ? `[${h}]` : h}:${port}`;
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  }
}

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const problems: string[] = [];
  const out: Record<string, unknown> = {};
  for (const [name, [parse, def]] of Object.entries(spec) as [string, [Parser<unknown>, string | undefined]][]) {
    const raw = env[name] === undefined || env[name] === '' ? def : env[name];
    if (raw === undefined) continue;
    try {
      out[name] = parse(raw);
    } catch (e) {
      problems.push(`${name}=${JSON.stringify(env[name] ?? raw)}: ${(e as Error).message}`);
    }
  }
  if (env.DATABASE_URL && !env.SECRETS_KEY) {
    problems.push('SECRETS_KEY: required when DATABASE_URL is set (every instance must share it)');
  }
  if (env.DATABASE_READ_URL && !env.DATABASE_URL) problems.push('DATABASE_READ_URL: a replica of DATABASE_URL, set only together with it');
  if (env.AUTH_EXTERNAL_AUDIENCE && !env.AUTH_EXTERNAL_ISSUER) {
    problems.push('AUTH_EXTERNAL_AUDIENCE: set only together with AUTH_EXTERNAL_ISSUER');
  }
  if (env.INGEST_MQTT_PASSWORD && !env.INGEST_MQTT_USERNAME)
    problems.push('INGEST_MQTT_PASSWORD: set only together with INGEST_MQTT_USERNAME');
  if (env.INGEST_MQTT_CA && !String(env.INGEST_MQTT_URL ?? '').startsWith('mqtts:')) {
    problems.push('INGEST_MQTT_CA: needs an mqtts:// INGEST_MQTT_URL');
  }
  if (env.EVENT_LOG === 'kafka') {
    if (!env.EVENT_LOG_KAFKA_BROKERS) problems.push('EVENT_LOG_KAFKA_BROKERS: required when EVENT_LOG=kafka');
    if (!env.DATABASE_URL)
      problems.push('EVENT_LOG=kafka: needs PostgreSQL (DATABASE_URL); the embedded database keeps the event log itself');
  }
  if (env.EVENT_LOG_KAFKA_CA && !['1', 'true', 'yes', 'on'].includes(String(env.EVENT_LOG_KAFKA_TLS).trim().toLowerCase()))
    problems.push('EVENT_LOG_KAFKA_CA: set only with EVENT_LOG_KAFKA_TLS=true');
  if (Boolean(env.EVENT_LOG_KAFKA_SASL_MECHANISM) !== Boolean(env.EVENT_LOG_KAFKA_SASL_USERNAME)) {
    problems.push('EVENT_LOG_KAFKA_SASL_MECHANISM and EVENT_LOG_KAFKA_SASL_USERNAME: set both or neither');
  }
  if (env.MAP_TILE_URL && !env.MAP_ATTRIBUTION?.trim())
    problems.push('MAP_ATTRIBUTION: required with MAP_TILE_URL (the tiles\' terms require it, e.g. "© OpenStreetMap contributors")');
  if (env.MAP_ATTRIBUTION && !env.MAP_TILE_URL) problems.push('MAP_ATTRIBUTION: set only together with MAP_TILE_URL');
  const mqttMessage = out.INGEST_MQTT_MAX_MESSAGE_BYTES as number | undefined;
  const mqttFlight = out.INGEST_MQTT_MAX_BYTES_IN_FLIGHT as number | undefined;
  if (mqttMessage !== undefined && mqttFlight !== undefined && mqttMessage > mqttFlight) {
    problems.push('INGEST_MQTT_MAX_MESSAGE_BYTES: must not be more than INGEST_MQTT_MAX_BYTES_IN_FLIGHT');
  }
  if (env.HTTP_WORKERS && env.HTTP_WORKERS.trim() !== 'auto' && Number(env.HTTP_WORKERS) > 1 && !env.DATABASE_URL) {
    problems.push('HTTP_WORKERS: more than 1 needs PostgreSQL (DATABASE_URL); the embedded database is served by one process');
  }
  if (problems.length) throw new ConfigError(problems);
  const cfg = out as Config;
  // The embedded database lives in one process: so does HTTP.
  if (!cfg.DATABASE_URL) (cfg as { HTTP_WORKERS: number }).HTTP_WORKERS = 1;
  cfg.dataDir = path.resolve(cfg.DATA_DIR);
  cfg.publicUrl = (cfg.PUBLIC_URL ?? httpBase(cfg.HOST, cfg.PORT)).replace(/\/+$/, '');
  return cfg;
}
