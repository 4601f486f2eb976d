// Configuration (src/config.ts; README's table): one schema, parsed once, every bad variable listed
// in one error, defaults and derived values. Pure unit test, no service.
import assert from 'node:assert/strict';
import os from 'node:os';
import { test } from 'node:test';
import { ConfigError, httpBase, loadConfig } from '../../src/config.js';

/** Asserts the configuration is refused, naming `name`. */
const bad = (env: Record<string, string>, name: string) =>
  assert.throws(
    () => loadConfig(env),
    (e: unknown) => e instanceof ConfigError && e.problems.some((p) => p.startsWith(name)),
    `${name} ${JSON.stringify(env)}`,
  );

test('every bad configuration variable is listed in one error', () => {
  assert.throws(
    () =>
      loadConfig({ PORT: 'eighty', LOG_LEVEL: 'loud', DATABASE_URL: 'mysql://x', PUSH_ALLOW_HTTP: 'maybe', BOOKING_DATA_TYPE: 'maersk' }),
    (e: unknown) => {
      assert.ok(e instanceof ConfigError);
      for (const name of ['PORT', 'LOG_LEVEL', 'DATABASE_URL', 'PUSH_ALLOW_HTTP', 'BOOKING_DATA_TYPE', 'SECRETS_KEY']) {
        assert.ok(
          e.problems.some((p) => p.startsWith(name)),
          `${name} listed in ${e.message}`,
        );
      }
      return true;
    },
  );
});

test("defaults: the embedded database, port 8080 on the loopback, the specification's limits; the public URL follows HOST and PORT", () => {
  const c = loadConfig({});
  assert.equal(c.DATABASE_URL, undefined);
  assert.equal(c.PORT, 8080);
  assert.equal(c.HOST, '127.0.0.1');
  assert.equal(c.publicUrl, 'http://127.0.0.1:8080');
  assert.equal(c.TOKEN_LIFE_SECONDS, 1200);
  assert.equal(c.PASSWORD_HASH_COST, 14, 'passwords at scrypt N=2^14 unless the operator says otherwise');
  assert.equal(c.RATE_LIMIT_MAX, 1000);
  assert.equal(c.RATE_LIMIT_CONCURRENT, 10);
  assert.equal(c.ALERT_MAX_CODES_PER_LIST, 32);
  assert.equal(c.ALERT_MAX_EVENTS_PER_HOUR, 100);
  assert.equal(c.STREAM_MAX_OPEN_PER_OWNER, 5);
  assert.equal(c.PUSH_ALLOW_HTTP, false);
  assert.deepEqual(c.PUSH_ALLOWED_NETWORKS, []);
  // A wildcard host is reached on the loopback; a trailing slash of PUBLIC_URL goes.
  assert.equal(loadConfig({ HOST: '0.0.0.0', PORT: '9000' }).publicUrl, 'http://127.0.0.1:9000');
  assert.equal(httpBase('::1', 80), 'http://[::1]:80');
  assert.equal(loadConfig({ PUBLIC_URL: 'https://tracking.example.com/' }).publicUrl, 'https://tracking.example.com');
});

test('values are parsed strictly: whole numbers in range, booleans by name, CIDR lists, a 32-byte secrets key', () => {
  bad({ PORT: '70000' }, 'PORT');
  bad({ RATE_LIMIT_MAX: '1.5' }, 'RATE_LIMIT_MAX');
  bad({ ALERT_MAX_CODES_PER_LIST: '0' }, 'ALERT_MAX_CODES_PER_LIST');
  bad({ PUSH_ALLOWED_NETWORKS: '10.0.0.0' }, 'PUSH_ALLOWED_NETWORKS');
  bad({ SECRETS_KEY: 'short' }, 'SECRETS_KEY');
  bad({ AUTH_REALM: 'no spaces' }, 'AUTH_REALM');
  bad({ DELIVERY_LEASE_SECONDS: '0.1' }, 'DELIVERY_LEASE_SECONDS');
  bad({ AUTH_EXTERNAL_AUDIENCE: 'x' }, 'AUTH_EXTERNAL_AUDIENCE');
  const c = loadConfig({ PUSH_ALLOW_HTTP: 'yes', PUSH_ALLOWED_NETWORKS: '127.0.0.0/8, ::1/128', SECRETS_KEY: 'ab'.repeat(32) });
  assert.equal(c.PUSH_ALLOW_HTTP, true);
  assert.deepEqual(c.PUSH_ALLOWED_NETWORKS, ['127.0.0.0/8', '::1/128']);
  assert.equal(c.SECRETS_KEY?.length, 32);
  assert.equal(loadConfig({ PUSH_ALLOW_HTTP: 'off' }).PUSH_ALLOW_HTTP, false);
});

test('MQTT ingest settings: an mqtt or mqtts URL, a topic prefix without wildcards, a CA only with TLS, a password only with a user', () => {
  bad({ INGEST_MQTT_URL: 'http://broker:1883' }, 'INGEST_MQTT_URL');
  for (const prefix of ['devices/#', 'a/+/b', '/devices', 'devices/', '$SYS', 'a//b'])
    bad({ INGEST_MQTT_TOPIC_PREFIX: prefix }, 'INGEST_MQTT_TOPIC_PREFIX');
  bad({ INGEST_MQTT_URL: 'mqtt://broker', INGEST_MQTT_CA: '/etc/ca.pem' }, 'INGEST_MQTT_CA');
  bad({ INGEST_MQTT_URL: 'mqtts://broker', INGEST_MQTT_PASSWORD: 'pw' }, 'INGEST_MQTT_PASSWORD');
  bad({ INGEST_MQTT_CLIENT_ID: 'has space' }, 'INGEST_MQTT_CLIENT_ID');
  bad({ INGEST_MQTT_RECEIVE_MAXIMUM: '0' }, 'INGEST_MQTT_RECEIVE_MAXIMUM');
  const c = loadConfig({
    INGEST_MQTT_URL: 'mqtts://broker:8883',
    INGEST_MQTT_CA: '/etc/ca.pem',
    INGEST_MQTT_TOPIC_PREFIX: 'fleet/devices',
  });
  assert.equal(c.INGEST_MQTT_TOPIC_PREFIX, 'fleet/devices');
  assert.equal(c.INGEST_MQTT_SHARE_GROUP, 'tracking');
  assert.equal(c.INGEST_MQTT_RECEIVE_MAXIMUM, 1000);
  assert.equal(c.INGEST_MQTT_SESSION_EXPIRY_SECONDS, 604800);
  assert.equal(loadConfig({}).INGEST_MQTT_URL, undefined, 'off by default');
});

test("MQTT ingest's bounds: 1 MiB a message and 8 MiB in flight by default; a message may not be larger than the bytes in flight", () => {
  const c = loadConfig({});
  assert.equal(c.INGEST_MQTT_MAX_MESSAGE_BYTES, 512 * 1024);
  assert.equal(c.INGEST_MQTT_MAX_BYTES_IN_FLIGHT, 2 * 1024 * 1024);
  bad({ INGEST_MQTT_MAX_MESSAGE_BYTES: '100' }, 'INGEST_MQTT_MAX_MESSAGE_BYTES');
  bad({ INGEST_MQTT_MAX_MESSAGE_BYTES: String(128 * 1024 * 1024) }, 'INGEST_MQTT_MAX_MESSAGE_BYTES');
  bad({ INGEST_MQTT_MAX_MESSAGE_BYTES: String(16 * 1024 * 1024) }, 'INGEST_MQTT_MAX_MESSAGE_BYTES');
  const big = loadConfig({
    INGEST_MQTT_MAX_MESSAGE_BYTES: String(16 * 1024 * 1024),
    INGEST_MQTT_MAX_BYTES_IN_FLIGHT: String(64 * 1024 * 1024),
  });
  assert.equal(big.INGEST_MQTT_MAX_MESSAGE_BYTES, 16 * 1024 * 1024);
});

test('event log settings: postgres by default; kafka needs PostgreSQL and host:port brokers; a CA only with TLS; SASL mechanism and user together', () => {
  const pgEnv = { DATABASE_URL: 'postgres://db/x', SECRETS_KEY: 'a'.repeat(64) };
  const d = loadConfig({});
  assert.equal(d.EVENT_LOG, 'postgres');
  assert.equal(d.EVENT_LOG_TOPIC, 'tracking.event-log');
  assert.equal(d.EVENT_LOG_PARTITIONS, 12);
  assert.equal(d.EVENT_LOG_REPLICATION, undefined, 'unset: 3, or the broker count when smaller');
  const k = loadConfig({ ...pgEnv, EVENT_LOG: 'kafka', EVENT_LOG_KAFKA_BROKERS: 'k1:9092, [::1]:9093' });
  assert.deepEqual(k.EVENT_LOG_KAFKA_BROKERS, ['k1:9092', '[::1]:9093']);
  bad({ ...pgEnv, EVENT_LOG: 'kafka' }, 'EVENT_LOG_KAFKA_BROKERS');
  bad({ EVENT_LOG: 'kafka', EVENT_LOG_KAFKA_BROKERS: 'k1:9092' }, 'EVENT_LOG=kafka');
  bad({ ...pgEnv, EVENT_LOG: 'redis' }, 'EVENT_LOG');
  bad({ ...pgEnv, EVENT_LOG: 'kafka', EVENT_LOG_KAFKA_BROKERS: 'k1' }, 'EVENT_LOG_KAFKA_BROKERS');
  bad({ ...pgEnv, EVENT_LOG_KAFKA_CA: '/ca.pem' }, 'EVENT_LOG_KAFKA_CA');
  bad({ ...pgEnv, EVENT_LOG_KAFKA_SASL_MECHANISM: 'plain' }, 'EVENT_LOG_KAFKA_SASL_MECHANISM');
  bad({ ...pgEnv, EVENT_LOG_TOPIC: 'a/b' }, 'EVENT_LOG_TOPIC');
  bad({ ...pgEnv, EVENT_LOG_PARTITIONS: '0' }, 'EVENT_LOG_PARTITIONS');
});

test('HTTP_WORKERS: one per core but one (1 to 8) by default on PostgreSQL; one on the embedded database, where more is refused', () => {
  const pg = { DATABASE_URL: 'postgres://localhost/x', SECRETS_KEY: 'a'.repeat(64) };
  assert.equal(loadConfig(pg).HTTP_WORKERS, Math.max(1, Math.min(8, os.availableParallelism() - 1)));
  assert.equal(loadConfig({ ...pg, HTTP_WORKERS: '3' }).HTTP_WORKERS, 3);
  assert.equal(loadConfig({}).HTTP_WORKERS, 1);
  assert.equal(loadConfig({ HTTP_WORKERS: '1' }).HTTP_WORKERS, 1);
  bad({ HTTP_WORKERS: '2' }, 'HTTP_WORKERS');
  bad({ ...pg, HTTP_WORKERS: '0' }, 'HTTP_WORKERS');
  bad({ ...pg, HTTP_WORKERS: 'many' }, 'HTTP_WORKERS');
});

test('MAP_TILE_URL: a raster {z}/{x}/{y} template with its attribution, its origins added to the policies', async () => {
  const { DASHBOARD_CSP } = await import('../../src/dashboard/dashboard.js');
  const { SHARE_CSP } = await import('../../src/share/page.js');
  const { mapTiles, tileOrigins, tileUrl, withTileOrigins } = await import('../../src/dashboard/tiles.js');
  const attribution = '© OpenStreetMap contributors';
  const osm = loadConfig({ MAP_TILE_URL: 'https://{s}.tile.example.org/{z}/{x}/{y}{r}.png', MAP_ATTRIBUTION: attribution });
  const tiles = mapTiles(osm)!;
  assert.deepEqual(tileOrigins(tiles), ['https://a.tile.example.org', 'https://b.tile.example.org', 'https://c.tile.example.org']);
  assert.equal(tileUrl(tiles, 3, 4, 2), 'https://a.tile.example.org/3/4/2.png');
  assert.equal(
    withTileOrigins(DASHBOARD_CSP, tiles),
    DASHBOARD_CSP.replace(
      "img-src 'self' data:",
      "img-src 'self' data: https://a.tile.example.org https://b.tile.example.org https://c.tile.example.org",
    ),
  );
  const one = mapTiles(loadConfig({ MAP_TILE_URL: 'http://127.0.0.1:8081/tiles/{z}/{x}/{-y}.png', MAP_ATTRIBUTION: 'x' }));
  assert.equal(withTileOrigins(SHARE_CSP, one), SHARE_CSP.replace('img-src data:', 'img-src data: http://127.0.0.1:8081'));
  // Unset: no tiles, the policies unchanged.
  assert.equal(mapTiles(loadConfig({})), null);
  assert.equal(withTileOrigins(DASHBOARD_CSP, null), DASHBOARD_CSP);
  // Refused at start-up: a style or TileJSON URL, another scheme, an unknown placeholder, no attribution.
  bad({ MAP_TILE_URL: 'https://tiles.example.org/styles/basic/style.json', MAP_ATTRIBUTION: attribution }, 'MAP_TILE_URL');
  bad({ MAP_TILE_URL: 'ftp://tiles.example.org/{z}/{x}/{y}.png', MAP_ATTRIBUTION: attribution }, 'MAP_TILE_URL');
  bad({ MAP_TILE_URL: 'https://tiles.example.org/{z}/{x}/{y}.png?key={apikey}', MAP_ATTRIBUTION: attribution }, 'MAP_TILE_URL');
  bad({ MAP_TILE_URL: 'https://user:pw@tiles.example.org/{z}/{x}/{y}.png', MAP_ATTRIBUTION: attribution }, 'MAP_TILE_URL');
  bad({ MAP_TILE_URL: 'https://tiles.example.org/{z}/{x}/{y}.png' }, 'MAP_ATTRIBUTION');
  bad({ MAP_ATTRIBUTION: attribution }, 'MAP_ATTRIBUTION');
});
