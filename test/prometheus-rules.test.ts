// @test-lanes postgres
// (one run is enough: the rules file does not depend on the database, and the service that shows
// every metric needs PostgreSQL for EVENT_LOG=kafka and a read replica)
// docs/prometheus-rules.yml, the alerting rules docs/OPERATIONS.md shows: `promtool check rules`
// accepts them (promtool from scripts/promtool.sh, cached outside git), and every metric they name
// is one the service's /metrics shows, so a rule cannot watch a metric that does not exist (or no
// longer does). The service here has every optional part switched on that adds metrics: a read
// replica, the event log on Kafka, MQTT ingest.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import { test } from 'node:test';
import { TEST_KAFKA_BROKERS } from './event-log.js';
import { atEnd, createTestDatabase, requireService, startApp } from './helpers.js';

const RULES = 'docs/prometheus-rules.yml';

/** Metrics Prometheus makes itself for every target, not the service. */
const PROMETHEUS_OWN = new Set(['up', 'scrape_duration_seconds', 'scrape_samples_scraped']);
/** PromQL words that look like names: operators and modifiers. */
const KEYWORDS = new Set(['and', 'or', 'unless', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'offset', 'bool']);

/** The metric names one PromQL expression reads (functions, labels, strings, durations and keywords left out). */
function metricNames(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""') // strings
    .replace(/\{[^}]*\}/g, ' ') // label matchers
    .replace(/\[[^\]]*\]/g, ' ') // ranges
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' '); // label lists
  const names = new Set<string>();
  for (const m of stripped.matchAll(/(?<![A-Za-z0-9_:.])([A-Za-z_:][A-Za-z0-9_:]*)(\s*\()?/g)) {
    if (m[2]) continue; // a function
    if (KEYWORDS.has(m[1]!)) continue;
    names.add(m[1]!);
  }
  return [...names];
}

/** Every `expr:` of the rules file (kept on one line each, as the file's header asks). */
function exprs(): string[] {
  const lines = fs.readFileSync(RULES, 'utf8').split('\n');
  const out: string[] = [];
  for (const line of lines) {
    const m = /^\s+expr:\s*(.*)$/.exec(line);
    if (!m) continue;
    assert.ok(m[1] && !/^[|>]/.test(m[1]), `each expr on one line: ${line}`);
    out.push(m[1]);
  }
  return out;
}

test('the name extraction reads metrics, not functions, labels or keywords', () => {
  assert.deepEqual(
    metricNames('sum by (instance) (rate(http_requests_total{status=~"5.."}[5m])) / sum by (le) (rate(b_bucket[5m])) > 0.05'),
    ['http_requests_total', 'b_bucket'],
  );
  assert.deepEqual(metricNames('max(a) > 0 and sum(rate(b[15m])) == 0 unless c offset 5m > 1e3'), ['a', 'b', 'c']);
});

test('promtool check rules accepts docs/prometheus-rules.yml', () => {
  const found = spawnSync('bash', ['scripts/promtool.sh'], { encoding: 'utf8' });
  assert.equal(found.status, 0, `scripts/promtool.sh failed:\n${found.stderr}`);
  const promtool = found.stdout.trim().split('\n').at(-1)!;
  const r = spawnSync(promtool, ['check', 'rules', RULES], { encoding: 'utf8' });
  assert.equal(r.status, 0, `promtool check rules failed:\n${r.stdout}\n${r.stderr}`);
  assert.match(r.stdout, /SUCCESS: \d+ rules found/);
});

function reachable(hostPort: string): Promise<boolean> {
  const [host, port] = hostPort.split(',')[0]!.split(':');
  return new Promise((resolve) => {
    const s = net.connect({ host: host!, port: Number(port), timeout: 2000 });
    const done = (ok: boolean) => {
      s.destroy();
      resolve(ok);
    };
    s.once('connect', () => done(true));
    s.once('error', () => done(false));
    s.once('timeout', () => done(false));
  });
}

test('every metric the rules name is in the service’s /metrics', async (t) => {
  if (!requireService(t, await reachable(TEST_KAFKA_BROKERS), `Kafka at ${TEST_KAFKA_BROKERS}`, 'bash scripts/kafka.sh start')) return;
  const url = await createTestDatabase();
  const name = `rules-${crypto.randomBytes(4).toString('hex')}`;
  const topic = `tracking.event-log.${name}`;
  const group = `tracking.delivery.${name}`;
  atEnd(async () => {
    const { Admin } = await import('@platformatic/kafka');
    const admin = new Admin({ clientId: 'tracking-test-cleanup', bootstrapBrokers: [TEST_KAFKA_BROKERS], timeout: 10_000, retries: 1 });
    try {
      await admin.deleteGroups({ groups: [group] }).catch(() => {});
      if ((await admin.listTopics()).includes(topic)) await admin.deleteTopics({ topics: [topic] });
    } finally {
      await admin.close().catch(() => {});
    }
  });
  const ta = await startApp(
    t,
    {
      // Every optional part that adds metrics: the database itself as its "replica" (its lag reads
      // 0), the event log on the shared Kafka broker, MQTT ingest from a broker that is not there.
      DATABASE_READ_URL: url,
      EVENT_LOG: 'kafka',
      EVENT_LOG_KAFKA_BROKERS: TEST_KAFKA_BROKERS,
      EVENT_LOG_TOPIC: topic,
      EVENT_LOG_GROUP: group,
      EVENT_LOG_PARTITIONS: '1',
      INGEST_MQTT_URL: 'mqtt://127.0.0.1:9',
    },
    { databaseUrl: url },
  );
  // One request first, so the request counters and histograms have a series.
  assert.equal((await fetch(`${ta.url}/healthz`)).status, 200);
  const text = await (await fetch(`${ta.url}/metrics`)).text();
  const shown = new Set<string>();
  // A sample's name, or a declared one (a labelled gauge has no sample until something is counted).
  for (const line of text.split('\n')) {
    const m = /^(?:# TYPE )?([A-Za-z_:][A-Za-z0-9_:]*)[{ ]/.exec(line);
    if (m) shown.add(m[1]!);
  }
  const named = new Set(exprs().flatMap(metricNames));
  assert.ok(named.size >= 10, `the rules name metrics: ${[...named].join(', ')}`);
  const missing = [...named].filter((n) => !PROMETHEUS_OWN.has(n) && !shown.has(n));
  assert.deepEqual(missing, [], `metrics the rules name that /metrics does not show (it shows ${[...shown].sort().join(', ')})`);
  // The optional ones are really there, not only their names in the help text.
  for (const n of ['replica_lag_seconds', 'event_log_consumer_lag', 'ingest_mqtt_connected']) assert.ok(shown.has(n), n);
});
