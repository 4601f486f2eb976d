// The delivery engine's decisions, without a service (API guide 9): what an answer means, when the
// next attempt falls due and when an event is given up, how results are made storable, how a
// window reopens, which addresses may be dialled, how requests are grouped and named.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AddressRefused, addressPolicy, embeddedIpv4, isAllowedAddress, resolveVetted } from '../../src/delivery/address.js';
import { Window } from '../../src/delivery/channels/broker.js';
import { groupByType, stableId } from '../../src/delivery/channels/channel.js';
import { webhookChannel } from '../../src/delivery/channels/webhook/index.js';
import { classify, retryAfterSeconds } from '../../src/delivery/channels/webhook/webhook.js';
import { outcomeFor, retryDelaySeconds } from '../../src/delivery/engine.js';
import type { WebhookIntegration } from '../../src/delivery/integrations/model.js';
import type { LogEvent } from '../../src/eventlog/log.js';
import { storableText } from '../../src/delivery/queue/index.js';

test('what an answer means: 2xx success, 429 pause, 5xx and network errors retry, 3xx and other 4xx fail, a refused address fails', () => {
  const cases: [number | undefined, boolean, boolean, string][] = [
    [200, false, false, 'success'],
    [204, false, false, 'success'],
    [429, false, false, 'pause'],
    [500, false, false, 'retry'],
    [502, false, false, 'retry'],
    [410, false, false, 'fail'],
    [400, false, false, 'fail'],
    [301, false, false, 'fail'],
    [101, false, false, 'fail'],
    [undefined, true, false, 'retry'],
    [undefined, true, true, 'fail'],
  ];
  for (const [status, network, refused, want] of cases)
    assert.equal(classify(status, network, refused), want, `${status} ${network} ${refused}`);
});

test('Retry-After as seconds or an HTTP date, kept within 1 s..1 h; 60 s when absent or unreadable', () => {
  const now = Date.UTC(2026, 10, 25, 12, 0, 0);
  assert.equal(retryAfterSeconds('5', now), 5);
  assert.equal(retryAfterSeconds('2.5', now), 2.5);
  assert.equal(retryAfterSeconds(undefined, now), 60);
  assert.equal(retryAfterSeconds('soon', now), 60);
  assert.equal(retryAfterSeconds('0', now), 1);
  assert.equal(retryAfterSeconds('99999', now), 3600);
  assert.equal(retryAfterSeconds(new Date(now + 30_000).toUTCString(), now), 30);
  assert.equal(retryAfterSeconds(new Date(now - 30_000).toUTCString(), now), 1);
});

test('the retry schedule: each step in turn, the last repeating, with ±20% jitter', () => {
  assert.equal(
    retryDelaySeconds([5, 30], 1, () => 0.5),
    5,
  );
  assert.equal(
    retryDelaySeconds([5, 30], 2, () => 0.5),
    30,
  );
  assert.equal(
    retryDelaySeconds([5, 30], 7, () => 0.5),
    30,
  );
  assert.ok(Math.abs(retryDelaySeconds([10], 1, () => 0) - 8) < 1e-9);
  assert.ok(Math.abs(retryDelaySeconds([10], 1, () => 1) - 12) < 1e-9);
});

const event = (pos: number, minutesAgo = 0): LogEvent => ({
  pos: String(pos),
  eventId: `00000000-0000-4000-8000-${String(pos).padStart(12, '0')}`,
  objectType: 'location',
  objectId: String(pos),
  payload: `{"id":${pos}}`,
  whenCreated: new Date(Date.UTC(2026, 10, 25, 12) - minutesAgo * 60_000),
});
const cfg: WebhookIntegration = {
  id: '11111111-1111-4111-8111-111111111111',
  name: 'unit',
  channel: 'webhook',
  enabled: true,
  maxBacklogHours: 72,
  ownerIds: [],
  destination: 'https://example.com/hook',
  destinations: {},
  retry: { scheduleSeconds: [10, 60], maxAttempts: 3, deadlineHours: 1 },
  webhook: {
    format: 'standard',
    mode: 'single',
    batchSize: 100,
    maxItemsPerMinute: null,
    maxConcurrentRequests: 4,
    timeoutMs: 10_000,
    injectEventId: false,
    injectEventIdPath: null,
    auth: null,
    signingSecret: null,
    previousSigningSecret: null,
  },
};
const channel = webhookChannel(addressPolicy(false, []), () => 'https://tracking.example.com');
const answer = (outcome: 'success' | 'retry' | 'fail' | 'pause', retryAfter: number | null = null) => ({
  outcome,
  retryAfterSeconds: retryAfter,
  httpStatus: outcome === 'success' ? 200 : outcome === 'pause' ? 429 : 500,
  responseTimeMs: 5,
  receiptId: null,
  topic: null,
  partition: null,
  qos: null,
  error: outcome === 'success' ? null : 'HTTP 500',
  responseHeaders: null,
  responseBody: Buffer.from('x'),
  responseBodyBytes: 1,
  truncated: false,
});
const job = (prior: [number, { attempts: number; attemptBase: number; firstAttemptAt: Date | null }][] = []) => {
  const events = [event(1, 5)];
  const [msg] = channel.messages(cfg, events, 'seed');
  return { cfg, channel, msg: msg!, claim: null, prior: new Map(prior.map(([p, v]) => [String(p), v])) };
};

test('what a send means for its events: the next attempt on the schedule, FAILED after maxAttempts or past the deadline, a 429 uses no attempt', () => {
  const at = new Date(Date.UTC(2026, 10, 25, 12));
  const half = () => 0.5; // no jitter
  const first = outcomeFor(job(), answer('retry'), at, half);
  assert.equal(first.attempt, 1);
  assert.equal(first.events[0]!.status, 'PENDING');
  assert.equal(first.events[0]!.nextAttemptAt!.getTime(), at.getTime() + 10_000);
  assert.equal(first.latencyMs, 5 * 60_000, "from the oldest event's store time");
  assert.equal(first.responseBody?.toString(), 'x', 'a failure keeps the response');
  const third = outcomeFor(job([[1, { attempts: 2, attemptBase: 0, firstAttemptAt: at }]]), answer('retry'), at, half);
  assert.equal(third.attempt, 3);
  assert.equal(third.events[0]!.status, 'FAILED', 'maxAttempts 3 reached');
  assert.equal(third.events[0]!.nextAttemptAt, null);
  const late = outcomeFor(
    job([[1, { attempts: 1, attemptBase: 0, firstAttemptAt: new Date(at.getTime() - 3595_000) }]]),
    answer('retry'),
    at,
    half,
  );
  assert.equal(late.events[0]!.status, 'FAILED', 'the next attempt would fall past the 1 h deadline');
  // A redelivered event: numbering goes on (attempt 4), the budget counts from the redelivery.
  const again = outcomeFor(job([[1, { attempts: 3, attemptBase: 3, firstAttemptAt: null }]]), answer('retry'), at, half);
  assert.equal(again.attempt, 4);
  assert.equal(again.events[0]!.status, 'PENDING');
  assert.equal(again.events[0]!.nextAttemptAt!.getTime(), at.getTime() + 10_000, 'the schedule from its first step');
  const paused = outcomeFor(job([[1, { attempts: 2, attemptBase: 0, firstAttemptAt: at }]]), answer('pause', 30), at, half);
  assert.equal(paused.events[0]!.attempts, 2, 'a 429 uses up no attempt');
  assert.equal(paused.events[0]!.status, 'PENDING');
  assert.equal(paused.pauseSeconds, 30);
  assert.equal(paused.events[0]!.nextAttemptAt!.getTime(), at.getTime() + 30_000);
  const ok = outcomeFor(job(), answer('success'), at, half);
  assert.equal(ok.events[0]!.status, 'SUCCEEDED');
  assert.equal(ok.responseBody, null, 'a success keeps status, time and receipt only');
  assert.equal(outcomeFor(job(), answer('fail'), at, half).events[0]!.status, 'FAILED');
});

test('text a receiver chose is stored with U+FFFD for what PostgreSQL refuses: NUL and lone surrogates', () => {
  assert.equal(storableText(null), null);
  assert.equal(storableText('plain \u00e9 \u{1F600}'), 'plain \u00e9 \u{1F600}');
  assert.equal(storableText('a\u0000b'), 'a\ufffdb');
  assert.equal(storableText('\ud800x\udc00'), '\ufffdx\ufffd');
});

test('a window of unacknowledged messages: full at its size, reopens only when a quarter is free, then lets the waiters in together', async () => {
  const w = new Window(8);
  for (let i = 0; i < 8; i++) assert.equal(w.acquire(), undefined);
  let entered = 0;
  const waiting = Array.from({ length: 3 }, () => w.acquire()!.then(() => entered++));
  w.release();
  await Promise.resolve();
  assert.equal(entered, 0, 'one free of 8 is not a quarter');
  w.release();
  await Promise.all(waiting.slice(0, 2));
  assert.equal(entered, 2, 'two free: two waiters in at once');
  w.resize(16);
  await waiting[2];
  assert.equal(entered, 3);
});

test('addresses: private, loopback, link-local, metadata and their IPv6 forms are refused; the deprecated IPv6 blocks whatever they seem to carry', () => {
  const strict = addressPolicy(false, []);
  for (const ip of [
    '127.0.0.1',
    '10.1.2.3',
    '172.16.0.1',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '::1',
    'fe80::1',
    'fd00:ec2::254',
    '::ffff:127.0.0.1',
    '::ffff:a9fe:a9fe',
    '64:ff9b::a00:1',
    '2002:c0a8:0101::1',
    '::127.0.0.1',
    '::8.8.8.8',
    'fec0::1',
    '2001::1',
  ]) {
    assert.equal(isAllowedAddress(ip, strict), false, ip);
  }
  for (const ip of ['93.184.216.34', '2606:4700::6810:85e5', '::ffff:93.184.216.34', '64:ff9b::5db8:d822'])
    assert.equal(isAllowedAddress(ip, strict), true, ip);
  assert.equal(embeddedIpv4('2002:c0a8:0101::1'), '192.168.1.1');
  assert.equal(isAllowedAddress('10.0.0.5', addressPolicy(false, ['10.0.0.0/8'])), true);
  // Allowing 127.0.0.0/8 allows its mapped form, never the IPv4-compatible one (it routes elsewhere).
  const local = addressPolicy(false, ['127.0.0.0/8']);
  assert.equal(isAllowedAddress('::ffff:127.0.0.1', local), true);
  assert.equal(isAllowedAddress('::127.0.0.1', local), false);
  assert.equal(isAllowedAddress('::1', addressPolicy(false, ['::1/128'])), true, 'an operator may allow it by its own address');
});

test('the ingest broker is never a destination: its address at its port, in any form, whatever the allowlist says', async () => {
  const policy = addressPolicy(false, ['0.0.0.0/0', '::/0'], false, 'mqtts://93.184.216.34:8883');
  const refused = (host: string, port: number) =>
    assert.rejects(
      resolveVetted(host, policy, port),
      (e: unknown) => e instanceof AddressRefused && /INGEST_MQTT_URL/.test(e.message),
      `${host}:${port}`,
    );
  await refused('93.184.216.34', 8883);
  await refused('::ffff:93.184.216.34', 8883);
  await refused('64:ff9b::5db8:d822', 8883);
  // Another port of that host, and another host at that port, are destinations like any other.
  assert.equal((await resolveVetted('93.184.216.34', policy, 1883)).length, 1);
  assert.equal((await resolveVetted('93.184.216.35', policy, 8883)).length, 1);
  assert.equal((await resolveVetted('93.184.216.34', policy)).length, 1, 'no port: the address rules only');
  // A broker on this machine: every loopback address (and the unspecified one) at its port.
  const local = addressPolicy(false, ['127.0.0.0/8', '::1/128', '0.0.0.0/32'], false, 'mqtt://127.0.0.1:1883');
  for (const host of ['127.0.0.1', '127.0.0.2', '::1', '::ffff:127.0.0.1', '0.0.0.0', 'localhost']) {
    await assert.rejects(resolveVetted(host, local, 1883), AddressRefused, host);
  }
  assert.equal((await resolveVetted('127.0.0.1', local, 1884)).length, 1);
});

test("the event log's Kafka brokers are refused at their ports, each named in the refusal, beside the ingest broker", async () => {
  const local = addressPolicy(false, ['127.0.0.0/8', '::1/128'], false, 'mqtt://127.0.0.1:1883', ['localhost:29092', '127.0.0.1:29093']);
  for (const [host, port] of [
    ['127.0.0.1', 29092],
    ['::1', 29092],
    ['127.0.0.5', 29093],
    ['::ffff:127.0.0.1', 29093],
  ] as const) {
    await assert.rejects(resolveVetted(host, local, port), /EVENT_LOG_KAFKA_BROKERS/, `${host}:${port}`);
  }
  await assert.rejects(resolveVetted('127.0.0.1', local, 1883), /INGEST_MQTT_URL/);
  assert.equal((await resolveVetted('127.0.0.1', local, 29094)).length, 1, 'another port of the same host is allowed');
});

test('requests: events grouped by type in log order, in chunks; a group named the same from the same seed and events', () => {
  const e = [1, 2, 3, 4, 5].map((n) => ({ ...event(n), objectType: n % 2 ? 'location' : 'asset' }) as LogEvent);
  const groups = groupByType(e, 2);
  assert.deepEqual(
    groups.map((g) => g.map((x) => x.pos)),
    [['1', '3'], ['2', '4'], ['5']],
  );
  assert.equal(stableId('s', groups[0]!), stableId('s', groups[0]!));
  assert.notEqual(stableId('s', groups[0]!), stableId('t', groups[0]!));
  assert.match(stableId('s', groups[0]!), /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
});
