// Real message brokers for tests (a helper library, not a test file):
// - Kafka: named instances of a real Apache Kafka (KRaft) run by scripts/kafka.sh, each with PLAINTEXT,
//   SASL (PLAIN, SCRAM-SHA-256/512), SSL, SSL with client certificates and SASL_SSL listeners. They
//   outlive the test process; the "shared" one (port base 19092) is meant to stay up for every file.
// - Mosquitto: a private broker per name, started by this process and stopped when it exits, with
//   an anonymous, a password, a TLS + password and a client-certificate listener.
// - kcat / mosquitto_sub as independent consumers that tests read what the service delivered with.
// Ports are fixed numbers chosen by the caller. Every wait is for a condition, with generous limits.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { Admin } from '@platformatic/kafka';
import mqtt from 'mqtt';

const REPO_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const KAFKA_SCRIPT = path.join(REPO_DIR, 'scripts', 'kafka.sh');
export const CACHE_DIR = process.env.TRACKING_CACHE_DIR ?? path.join(os.homedir(), '.cache', 'tracking-ci');

/** The SASL / password user of every broker here. */
export const BROKER_USER = Object.freeze({ username: 'tracker', password: 'tracker-secret' });

/** Paths of the PEM files behind a broker's `ca`, `clientCert`, ... (for CLI tools such as kcat or mosquitto_pub). */
export interface CertFiles {
  ca: string;
  clientCert: string;
  clientKey: string;
  otherCa: string;
  otherClientCert: string;
  otherClientKey: string;
}

/** The PEM files a broker folder's `certs` holds (made by makeCerts), by role. */
function certFiles(certs: string): CertFiles {
  return {
    ca: path.join(certs, 'ca.pem'),
    clientCert: path.join(certs, 'client.pem'),
    clientKey: path.join(certs, 'client-key.pem'),
    otherCa: path.join(certs, 'other-ca.pem'),
    otherClientCert: path.join(certs, 'other-client.pem'),
    otherClientKey: path.join(certs, 'other-client-key.pem'),
  };
}

/** What every test broker here is: its certificates as text and as files, its folder, its user, start and stop. */
interface TestBroker extends BrokerCerts {
  name: string;
  /** the same certificates as files (for CLI tools: kcat, mosquitto_pub --cafile/--cert/--key) */
  files: CertFiles;
  /** the broker's folder (configuration, data, certs, its log) */
  dir: string;
  user: { username: string; password: string };
  /** starts it (idempotent); resolves once it accepts connections */
  start(): Promise<void>;
  /** stops it; resolves once the process has exited */
  stop(): Promise<void>;
}

/** The parts of a TestBroker that come from its folder, read once the broker has made its certificates. */
function brokerBasics(name: string, dir: string, start: () => Promise<void>, stop: () => Promise<void>): TestBroker {
  const files = certFiles(path.join(dir, 'certs'));
  const read = (f: string) => fs.readFileSync(f, 'utf8');
  return {
    name,
    ca: read(files.ca),
    clientCert: read(files.clientCert),
    clientKey: read(files.clientKey),
    otherCa: read(files.otherCa),
    otherClientCert: read(files.otherClientCert),
    otherClientKey: read(files.otherClientKey),
    files,
    dir,
    user: { ...BROKER_USER },
    start,
    stop,
  };
}

// ---------------------------------------------------------------------------------------------
// Processes

interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to its end (killing its whole process group after timeoutMs). Never rejects for a non-zero exit. */
function run(cmd: string, args: string[], timeoutMs: number, env?: Record<string, string>): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true, env: { ...process.env, ...env } });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (d: Buffer) => out.push(d));
    child.stderr.on('data', (d: Buffer) => err.push(d));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child, 'SIGKILL');
    }, timeoutMs);
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(new Error(`could not run ${cmd}: ${e.message}`));
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      const r = { code, signal, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() };
      if (timedOut) reject(new Error(`${cmd} ${args.join(' ')} did not finish within ${timeoutMs} ms\n${tail(r.stderr + r.stdout)}`));
      else resolve(r);
    });
  });
}

async function runOk(cmd: string, args: string[], timeoutMs: number, env?: Record<string, string>): Promise<RunResult> {
  const r = await run(cmd, args, timeoutMs, env);
  if (r.code !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (exit ${r.code ?? r.signal})\n${tail(r.stderr + r.stdout)}`);
  return r;
}

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    try {
      child.kill(signal);
    } catch {
      // already gone
    }
  }
}

const tail = (text: string, lines = 40) => text.trimEnd().split('\n').slice(-lines).join('\n');

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function cmdline(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
}

function readPid(file: string): number | undefined {
  try {
    const n = Number(fs.readFileSync(file, 'utf8').trim());
    return Number.isInteger(n) && n > 0 ? n : undefined;
  } catch {
    return undefined;
  }
}

async function waitUntil(
  what: string | (() => string),
  timeoutMs: number,
  check: () => boolean | Promise<boolean>,
  intervalMs = 100,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${typeof what === 'string' ? what : what()}`);
    await delay(intervalMs);
  }
}

function portAccepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port });
    const done = (ok: boolean) => {
      s.destroy();
      resolve(ok);
    };
    s.once('connect', () => done(true));
    s.once('error', () => done(false));
    s.setTimeout(2000, () => done(false));
  });
}

// ---------------------------------------------------------------------------------------------
// Kafka

/** What a test broker's certificates are (PEM text): its CA, a client certificate it trusts, and a foreign pair. */
export interface BrokerCerts {
  ca: string;
  clientCert: string;
  clientKey: string;
  otherCa: string;
  otherClientCert: string;
  otherClientKey: string;
}

export interface KafkaBroker extends TestBroker {
  portBase: number;
  /** "127.0.0.1:port" of each listener */
  plaintext: string;
  sasl: string;
  ssl: string;
  mtls: string;
  saslSsl: string;
}

/**
 * Added to the fixed ports of the brokers a test file starts of its own, and named in them: the
 * PostgreSQL, PGlite and kafka lanes run the same file at the same time (scripts/test.mjs), each
 * with its own broker.
 */
export const TEST_LANE = process.env.TEST_EVENT_LOG === 'kafka' ? 'kafka' : (process.env.TEST_DB ?? 'postgres');
export const LANE_PORT_OFFSET = ({ postgres: 0, pglite: 1000, kafka: 2000 } as Record<string, number>)[TEST_LANE] ?? 0;

// A cold start fetches the jars from Maven Central first; kafka.sh itself gives up after 120 s of waiting.
const KAFKA_SCRIPT_TIMEOUT_MS = 600_000;

async function kafkaScript(cmd: 'start' | 'stop', name: string, portBase: number, env?: Record<string, string>): Promise<void> {
  await runOk('bash', [KAFKA_SCRIPT, cmd, '--name', name, '--port-base', String(portBase)], KAFKA_SCRIPT_TIMEOUT_MS, env);
}

/** Starts (idempotent) the Kafka instance `name` on portBase..portBase+5 and describes it; default the shared one. */
export async function kafkaBroker(name = 'shared', portBase = 19092, env?: Record<string, string>): Promise<KafkaBroker> {
  await kafkaScript('start', name, portBase, env);
  const at = (offset: number) => `127.0.0.1:${portBase + offset}`;
  return {
    ...brokerBasics(
      name,
      path.join(CACHE_DIR, 'kafka-instances', name),
      () => kafkaScript('start', name, portBase, env),
      () => kafkaScript('stop', name, portBase, env),
    ),
    portBase,
    plaintext: at(0),
    sasl: at(1),
    ssl: at(2),
    mtls: at(3),
    saslSsl: at(4),
  };
}

/**
 * A KRaft cluster of `n` nodes (each broker and controller; instances `name`-1..n on port bases
 * portBase, portBase + 10, ...), made afresh: any earlier data of these instances is removed first.
 * Started all at once (a quorum elects its controller only once a majority runs); the consumer
 * offsets are kept on every node. Stop it with stopKafkaCluster.
 */
export async function kafkaCluster(name: string, portBase: number, n = 3): Promise<KafkaBroker[]> {
  const bases = Array.from({ length: n }, (_, i) => portBase + 10 * i);
  const names = bases.map((_, i) => `${name}-${i + 1}`);
  await stopKafkaCluster(names);
  for (const nm of names) fs.rmSync(path.join(CACHE_DIR, 'kafka-instances', nm), { recursive: true, force: true });
  // Kafka's own cluster ids never begin with '-' (its Uuid.randomUuid draws again): the storage
  // tool would read `-t -Abc...` as an option and fail (one run in 64 did, in CI).
  let clusterId = '-';
  while (clusterId.startsWith('-')) clusterId = Buffer.from(crypto.randomUUID().replaceAll('-', ''), 'hex').toString('base64url');
  const voters = bases.map((b, i) => `${i + 1}@127.0.0.1:${b + 5}`).join(',');
  return Promise.all(
    names.map((nm, i) =>
      kafkaBroker(nm, bases[i]!, {
        KAFKA_NODE_ID: String(i + 1),
        KAFKA_VOTERS: voters,
        KAFKA_CLUSTER_ID: clusterId,
        KAFKA_REPLICATION: String(Math.min(3, n)),
        KAFKA_HEAP: '-Xmx384m',
      }),
    ),
  );
}

/** Stops the nodes of a cluster (by instance name) and removes their data. */
export async function stopKafkaCluster(names: string[]): Promise<void> {
  await Promise.all(names.map((nm) => runOk('bash', [KAFKA_SCRIPT, 'stop', '--name', nm], KAFKA_SCRIPT_TIMEOUT_MS)));
}

async function withAdmin<T>(broker: string, fn: (admin: Admin) => Promise<T>): Promise<T> {
  const admin = new Admin({ clientId: 'tracking-test-admin', bootstrapBrokers: [broker], timeout: 30_000, retries: 3 });
  try {
    return await fn(admin);
  } finally {
    await admin.close().catch(() => {});
  }
}

/** Every apiId in a Kafka client error and the errors it wraps (2.x nests them: MultipleErrors > ResponseError > ProtocolError). */
const apiIds = (e: unknown): string[] => {
  const x = e as { apiId?: string; errors?: unknown[] } | null;
  if (!x || typeof x !== 'object') return [];
  return [x.apiId ?? '', ...(x.errors ?? []).flatMap(apiIds)];
};

/**
 * Creates a topic (replication factor 1) on the broker at "host:port" (a PLAINTEXT listener) and waits
 * until the metadata shows every partition with a leader. An existing topic with the same number of
 * partitions is fine; one with another number is an error.
 */
export async function createTopic(broker: string, topic: string, partitions: number): Promise<void> {
  await withAdmin(broker, async (admin) => {
    const deadline = Date.now() + 60_000;
    for (;;) {
      try {
        await admin.createTopics({ topics: [topic], partitions, replicas: 1 });
        break;
      } catch (e) {
        if (apiIds(e).includes('TOPIC_ALREADY_EXISTS')) break;
        if (Date.now() > deadline) throw e;
        await delay(250);
      }
    }
    let last = '';
    await waitUntil(
      () => `topic ${topic} with ${partitions} partitions led on ${broker} (${last})`,
      Math.max(deadline - Date.now(), 10_000),
      async () => {
        try {
          const t = (await admin.metadata({ topics: [topic], forceUpdate: true })).topics.get(topic);
          if (!t) return false;
          if (t.partitionsCount !== partitions) {
            throw new Error(`topic ${topic} already exists with ${t.partitionsCount} partitions, not ${partitions}`);
          }
          return t.partitions.length === partitions && t.partitions.every((p) => p.leader >= 0);
        } catch (e) {
          if ((e as Error).message.includes('already exists with')) throw e;
          last = (e as Error).message;
          return false;
        }
      },
    );
  });
}

/** Whether the topic exists on the broker at "host:port" (asked without creating it). */
export async function topicExists(broker: string, topic: string): Promise<boolean> {
  return withAdmin(broker, async (admin) => (await admin.listTopics()).includes(topic));
}

/** partition -> high watermark (the offset the next record gets) of every partition of the topic. */
export async function endOffsets(broker: string, topic: string): Promise<Map<number, number>> {
  return withAdmin(broker, async (admin) => {
    const t = (await admin.metadata({ topics: [topic], forceUpdate: true })).topics.get(topic);
    if (!t) throw new Error(`no topic ${topic} on ${broker}`);
    const listed = await admin.listOffsets({
      topics: [{ name: topic, partitions: t.partitions.map((_, i) => ({ partitionIndex: i, timestamp: -1n })) }],
    });
    const result = new Map<number, number>();
    for (const lt of listed) {
      for (const p of lt.partitions) result.set(p.partitionIndex, Number(p.offset));
    }
    return new Map([...result].sort((a, b) => a[0] - b[0]));
  });
}

export interface KafkaRecord {
  topic: string;
  partition: number;
  offset: number;
  key: string | null;
  /** the value as text ('' for a null value) */
  value: string;
  headers: Record<string, string>;
  /** record timestamp in ms */
  timestamp: number;
}

interface KcatLine {
  topic: string;
  partition: number;
  offset: number;
  ts?: number;
  headers?: (string | null)[];
  key: string | null;
  payload: string | null;
}

/**
 * Reads a topic from the beginning with kcat (`kcat -C -b broker -t topic -o beginning -e -J`), again
 * and again until at least minCount records are there (default: whatever is there once the end is
 * reached) or timeoutMs (default 60 s) has passed, and returns all records of the last read, sorted by
 * partition and offset. On a timeout it returns what it read (for the caller's assertion to report).
 * An unknown topic counts as empty. `kcatArgs` adds options, e.g. ['-X', 'security.protocol=SSL', ...].
 */
export async function kcatConsume(
  broker: string,
  topic: string,
  opts: { minCount?: number; timeoutMs?: number; kcatArgs?: string[] } = {},
): Promise<KafkaRecord[]> {
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const deadline = Date.now() + timeoutMs;
  let records: KafkaRecord[] = [];
  let lastError = '';
  let succeeded = false;
  for (;;) {
    const remaining = Math.max(deadline - Date.now(), 1000);
    let r: RunResult | undefined;
    try {
      r = await run('kcat', ['-C', '-b', broker, '-t', topic, '-o', 'beginning', '-e', '-J', '-q', ...(opts.kcatArgs ?? [])], remaining);
    } catch (e) {
      lastError = (e as Error).message;
    }
    if (r?.code === 0) {
      succeeded = true;
      records = parseKcat(r.stdout);
      if (opts.minCount === undefined || records.length >= opts.minCount) return records;
    } else if (r) {
      lastError = r.stderr.trim();
      if (/Unknown topic or partition/i.test(lastError)) succeeded = true; // empty so far
    }
    if (Date.now() >= deadline) break;
    await delay(250);
  }
  if (!succeeded) throw new Error(`kcat could not read ${topic} from ${broker} within ${timeoutMs} ms: ${lastError}`);
  return records;
}

function parseKcat(stdout: string): KafkaRecord[] {
  const records: KafkaRecord[] = [];
  for (const line of stdout.split('\n')) {
    if (!line.startsWith('{')) continue;
    const j = JSON.parse(line) as KcatLine;
    const headers: Record<string, string> = {};
    const h = j.headers ?? [];
    for (let i = 0; i + 1 < h.length; i += 2) headers[h[i] ?? ''] = h[i + 1] ?? '';
    records.push({
      topic: j.topic,
      partition: j.partition,
      offset: j.offset,
      key: j.key,
      value: j.payload ?? '',
      headers,
      timestamp: j.ts ?? 0,
    });
  }
  return records.sort((a, b) => a.partition - b.partition || a.offset - b.offset);
}

// ---------------------------------------------------------------------------------------------
// Certificates (openssl), for Mosquitto; scripts/kafka.sh makes the Kafka ones the same way.

/** A CA, a server certificate for localhost and 127.0.0.1 signed by it, client certificates, and another CA, as PEM files in `dir`. */
export async function makeCerts(dir: string, label: string): Promise<void> {
  const o = (...args: string[]) => runOk('openssl', args, 60_000);
  const leaf = 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n';
  fs.writeFileSync(path.join(dir, 'server.ext'), `${leaf}extendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n`);
  fs.writeFileSync(path.join(dir, 'client.ext'), `${leaf}extendedKeyUsage=clientAuth\n`);
  const f = (name: string) => path.join(dir, name);
  for (const ca of ['ca', 'other-ca']) {
    await o(
      'req',
      '-x509',
      '-new',
      '-nodes',
      '-newkey',
      'rsa:2048',
      '-sha256',
      '-days',
      '3650',
      '-keyout',
      f(`${ca}-key.pem`),
      '-out',
      f(`${ca}.pem`),
      '-subj',
      `/CN=tracking test ${ca} ${label}`,
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    );
  }
  const leaves: [string, string, string, string][] = [
    ['server', 'ca', 'localhost', 'server'],
    ['client', 'ca', BROKER_USER.username, 'client'],
    ['other-client', 'other-ca', BROKER_USER.username, 'client'],
  ];
  for (const [name, ca, cn, ext] of leaves) {
    await o(
      'req',
      '-new',
      '-nodes',
      '-newkey',
      'rsa:2048',
      '-sha256',
      '-keyout',
      f(`${name}-key.pem`),
      '-out',
      f(`${name}.csr`),
      '-subj',
      `/CN=${cn}`,
    );
    const serial = `0x${(await o('rand', '-hex', '16')).stdout.trim()}`;
    await o(
      'x509',
      '-req',
      '-in',
      f(`${name}.csr`),
      '-CA',
      f(`${ca}.pem`),
      '-CAkey',
      f(`${ca}-key.pem`),
      '-set_serial',
      serial,
      '-days',
      '3650',
      '-sha256',
      '-extfile',
      f(`${ext}.ext`),
      '-out',
      f(`${name}.pem`),
    );
    fs.rmSync(f(`${name}.csr`));
  }
  fs.rmSync(f('server.ext'));
  fs.rmSync(f('client.ext'));
}

// ---------------------------------------------------------------------------------------------
// Mosquitto

export interface MosquittoBroker extends TestBroker {
  /** anonymous, plain */
  port: number;
  /** password file, no anonymous */
  authPort: number;
  /** TLS (server authentication) + password */
  tlsPort: number;
  /** TLS with client certificates required; the certificate's CN is the username */
  mtlsPort: number;
}

interface RunningMosquitto {
  child: ChildProcess;
  exited: Promise<void>;
  hasExited: boolean;
}
const runningMosquittos = new Map<string, RunningMosquitto>();
let exitHookInstalled = false;
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // Brokers that a test left running die with this process.
  process.once('exit', () => {
    for (const m of runningMosquittos.values()) if (!m.hasExited) m.child.kill('SIGTERM');
  });
}

export interface MosquittoOptions {
  /** in-flight QoS 1/2 messages per client, announced as MQTT 5 Receive Maximum (default 1000) */
  maxInflight?: number;
  /** queued messages per client (default 100000; no byte limit) */
  maxQueued?: number;
  /**
   * keep sessions and queued messages across stop() + start() of this broker (saved at stop,
   * loaded at start); every mosquittoBroker() call still begins empty. Default false.
   */
  persistence?: boolean;
  /** also log every packet (`log_type debug`: "Received PUBLISH from <client>", "Sending PUBACK to ...") */
  debugLog?: boolean;
  /**
   * The password listener (portBase+1) takes these users (instead of BROKER_USER) and checks this
   * access control list (the text of a Mosquitto acl_file), as an operator's broker would.
   */
  acl?: { users: { username: string; password: string }[]; text: string };
}

/**
 * A private Mosquitto named `name` on 127.0.0.1 ports portBase (anonymous), portBase+1 (password),
 * portBase+2 (TLS + password) and portBase+3 (client certificate required), started and ready.
 * Limits are raised for tests (see MosquittoOptions). Its log is `dir`/mosquitto.log, begun anew by
 * each mosquittoBroker() call and continued across stop() + start().
 */
export async function mosquittoBroker(name: string, portBase: number, opts: MosquittoOptions = {}): Promise<MosquittoBroker> {
  if (!/^[A-Za-z0-9._-]+$/.test(name)) throw new Error(`bad mosquitto broker name: ${name}`);
  const dir = path.join(CACHE_DIR, 'mosquitto-instances', name);
  const certs = path.join(dir, 'certs');
  fs.mkdirSync(dir, { recursive: true });
  if (!fs.existsSync(path.join(certs, 'passwd'))) {
    const tmp = fs.mkdtempSync(path.join(dir, 'certs.'));
    try {
      await makeCerts(tmp, name);
      await runOk('mosquitto_passwd', ['-c', '-b', path.join(tmp, 'passwd'), BROKER_USER.username, BROKER_USER.password], 30_000);
      fs.rmSync(certs, { recursive: true, force: true });
      fs.renameSync(tmp, certs);
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  }
  const files = certFiles(certs);
  const ports = [portBase, portBase + 1, portBase + 2, portBase + 3];
  const conf = path.join(dir, 'mosquitto.conf');
  const log = path.join(dir, 'mosquitto.log');
  const pidFile = path.join(dir, 'mosquitto.pid');
  const ownerFile = path.join(dir, 'owner.pid');
  const db = 'mosquitto.db';
  const tls = [`cafile ${files.ca}`, `certfile ${path.join(certs, 'server.pem')}`, `keyfile ${path.join(certs, 'server-key.pem')}`];

  const stop = async (): Promise<void> => {
    const m = runningMosquittos.get(dir);
    if (!m) return;
    if (!m.hasExited) {
      m.child.kill('SIGTERM');
      const timer = setTimeout(() => m.child.kill('SIGKILL'), 10_000);
      await m.exited;
      clearTimeout(timer);
    }
    runningMosquittos.delete(dir);
    fs.rmSync(pidFile, { force: true });
    fs.rmSync(ownerFile, { force: true });
  };

  const start = async (): Promise<void> => {
    const current = runningMosquittos.get(dir);
    if (current && !current.hasExited) {
      await waitUntil(`mosquitto ${name} to accept on ports ${ports.join(', ')}`, 30_000, async () =>
        (await Promise.all(ports.map(portAccepts))).every(Boolean),
      );
      return;
    }
    runningMosquittos.delete(dir);
    await killStale(pidFile, ownerFile, conf, name);
    for (const p of ports) {
      if (await portAccepts(p)) throw new Error(`port ${p} is in use by something else; mosquitto ${name} needs ports ${ports.join(', ')}`);
    }
    let passwd = path.join(certs, 'passwd');
    const aclLines: string[] = [];
    if (opts.acl) {
      passwd = path.join(dir, 'acl-passwd');
      fs.writeFileSync(passwd, '');
      for (const u of opts.acl.users) await runOk('mosquitto_passwd', ['-b', passwd, u.username, u.password], 30_000);
      fs.writeFileSync(path.join(dir, 'acl'), opts.acl.text);
      aclLines.push(`acl_file ${path.join(dir, 'acl')}`);
    }
    fs.writeFileSync(
      conf,
      [
        '# Written by test/brokers.ts on every start; edits are lost.',
        'per_listener_settings true',
        'user root',
        ...(opts.persistence
          ? ['persistence true', `persistence_location ${dir}/`, `persistence_file ${db}`, 'autosave_interval 0']
          : ['persistence false']),
        'set_tcp_nodelay true',
        `max_inflight_messages ${opts.maxInflight ?? 1000}`,
        `max_queued_messages ${opts.maxQueued ?? 100_000}`,
        'max_queued_bytes 0',
        'log_dest stdout',
        'log_type error',
        'log_type warning',
        'log_type notice',
        'log_type information',
        ...(opts.debugLog ? ['log_type debug'] : []),
        'log_timestamp true',
        'connection_messages true',
        '',
        `listener ${ports[0]} 127.0.0.1`,
        'allow_anonymous true',
        '',
        `listener ${ports[1]} 127.0.0.1`,
        'allow_anonymous false',
        `password_file ${passwd}`,
        ...aclLines,
        '',
        `listener ${ports[2]} 127.0.0.1`,
        'allow_anonymous false',
        `password_file ${path.join(certs, 'passwd')}`,
        ...tls,
        '',
        `listener ${ports[3]} 127.0.0.1`,
        'allow_anonymous false',
        ...tls,
        'require_certificate true',
        'use_identity_as_username true',
        '',
      ].join('\n'),
    );
    const fd = fs.openSync(log, 'a');
    let child: ChildProcess;
    try {
      // stdbuf -oL: mosquitto block-buffers its log on stdout; tests read the log while it runs.
      child = spawn('stdbuf', ['-oL', 'mosquitto', '-c', conf], { detached: true, stdio: ['ignore', fd, fd] });
    } finally {
      fs.closeSync(fd);
    }
    child.unref();
    let spawnError: Error | undefined;
    const m: RunningMosquitto = {
      child,
      hasExited: false,
      exited: new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.once('error', (e) => {
          spawnError = e;
          resolve();
        });
      }),
    };
    void m.exited.then(() => {
      m.hasExited = true;
    });
    runningMosquittos.set(dir, m);
    installExitHook();
    if (child.pid !== undefined) {
      fs.writeFileSync(pidFile, String(child.pid));
      fs.writeFileSync(ownerFile, String(process.pid));
    }
    try {
      await waitUntil(`mosquitto ${name} to accept on ports ${ports.join(', ')}`, 30_000, async () => {
        if (m.hasExited) throw new Error(`mosquitto ${name} exited at start${spawnError ? `: ${spawnError.message}` : ''}`);
        return (await Promise.all(ports.map(portAccepts))).every(Boolean);
      });
    } catch (e) {
      await stop();
      let logTail = '';
      try {
        logTail = tail(fs.readFileSync(log, 'utf8'));
      } catch {
        // no log
      }
      throw new Error(`${(e as Error).message}\n${log}:\n${logTail}`);
    }
  };

  // A fresh broker: no saved sessions and an empty log from an earlier one of this name.
  const current = runningMosquittos.get(dir);
  if (!current || current.hasExited) {
    await killStale(pidFile, ownerFile, conf, name);
    fs.rmSync(path.join(dir, db), { force: true });
    fs.writeFileSync(log, '');
  }
  await start();
  return {
    ...brokerBasics(name, dir, start, stop),
    port: portBase,
    authPort: portBase + 1,
    tlsPort: portBase + 2,
    mtlsPort: portBase + 3,
  };
}

/** Ends a broker of this name left behind by a test process that died; refuses one a live process owns. */
async function killStale(pidFile: string, ownerFile: string, conf: string, name: string): Promise<void> {
  const pid = readPid(pidFile);
  if (pid === undefined || !alive(pid) || !cmdline(pid).includes(conf)) return;
  const owner = readPid(ownerFile);
  if (owner !== undefined && owner !== process.pid && alive(owner)) {
    throw new Error(`mosquitto ${name} (pid ${pid}) belongs to the running process ${owner}; use another name and port base`);
  }
  process.kill(pid, 'SIGTERM');
  await waitUntil(`the stale mosquitto ${name} (pid ${pid}) to exit`, 10_000, () => !alive(pid) || !cmdline(pid).includes(conf));
}

export interface SubMessage {
  topic: string;
  payload: string;
  /** MQTT 5 user properties as mosquitto_sub's %P prints them ("k1:v1 k2:v2"); only with v5 and when present */
  userProperties?: string;
  /** the same user properties as an object (a repeated key keeps its last value) */
  userPropertyMap?: Record<string, string>;
  qos: number;
  retain: boolean;
}

export interface MosquittoSub {
  messages: SubMessage[];
  /** resolves once the broker acknowledged the subscription; rejects when it was refused or the client failed */
  ready: Promise<void>;
  /** resolves once at least n messages arrived (default timeout 60 s) */
  waitFor(n: number, timeoutMs?: number): Promise<void>;
  /** ends mosquitto_sub and resolves once it exited */
  stop(): Promise<void>;
}

/**
 * An independent subscriber: `mosquitto_sub` on 127.0.0.1:port. `extra` adds options such as
 * ['-u', user, '-P', password] or ['--cafile', file, '--cert', file, '--key', file].
 */
export function mosquittoSub(args: { port: number; topic: string; qos?: 0 | 1 | 2; v5?: boolean; extra?: string[] }): MosquittoSub {
  const format = args.v5 ? '%j\\t%P' : '%j';
  // -d prints the SUBACK (the ready signal); stdbuf -oL because mosquitto_sub only flushes stdout after a message.
  const child = spawn(
    'stdbuf',
    [
      '-oL',
      'mosquitto_sub',
      '-d',
      '-h',
      '127.0.0.1',
      '-p',
      String(args.port),
      '-t',
      args.topic,
      '-q',
      String(args.qos ?? 0),
      '-F',
      format,
      ...(args.v5 ? ['-V', 'mqttv5'] : []),
      ...(args.extra ?? []),
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const messages: SubMessage[] = [];
  let stderr = '';
  let exited = false;
  let exitInfo = '';
  const listeners = new Set<() => void>();
  const notify = () => {
    for (const l of [...listeners]) l();
  };

  let readyResolve!: () => void;
  let readyReject!: (e: Error) => void;
  let readySettled = false;
  const ready = new Promise<void>((resolve, reject) => {
    readyResolve = () => {
      readySettled = true;
      resolve();
    };
    readyReject = (e) => {
      readySettled = true;
      reject(e);
    };
  });
  ready.catch(() => {}); // a caller that never awaits it must not get an unhandled rejection

  const exitedPromise = new Promise<void>((resolve) => {
    child.once('close', (code, signal) => {
      exited = true;
      exitInfo = `mosquitto_sub on port ${args.port} exited (${code ?? signal}): ${stderr.trim()}`;
      if (!readySettled) readyReject(new Error(exitInfo));
      notify();
      resolve();
    });
    child.once('error', (e) => {
      exited = true;
      exitInfo = `could not run mosquitto_sub: ${e.message}`;
      if (!readySettled) readyReject(new Error(exitInfo));
      notify();
      resolve();
    });
  });

  let buffered = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => {
    buffered += chunk;
    const lines = buffered.split('\n');
    buffered = lines.pop() ?? '';
    let added = false;
    for (const line of lines) {
      if (line.startsWith('{')) {
        messages.push(parseSubLine(line, args.v5 ?? false));
        added = true;
        continue;
      }
      const sub = /^Subscribed \(mid: \d+\): (.*)$/.exec(line);
      if (sub && !readySettled) {
        const codes = (sub[1] ?? '').split(',').map((c) => Number(c.trim()));
        if (codes.every((c) => c < 128)) readyResolve();
        else readyReject(new Error(`subscription to ${args.topic} on port ${args.port} refused (${sub[1]})`));
      }
    }
    if (added) notify();
  });
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk: string) => {
    stderr += chunk;
  });

  const stop = async (): Promise<void> => {
    if (!exited) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exitedPromise;
      clearTimeout(timer);
    }
  };

  // Clean up when the subscription does not come up.
  const readyTimer = setTimeout(() => {
    if (!readySettled) {
      readyReject(new Error(`mosquitto_sub on port ${args.port} was not subscribed to ${args.topic} within 30 s: ${stderr.trim()}`));
      void stop();
    }
  }, 30_000);
  // A subscriber a test forgot to stop must not keep the test process alive (the exit hook ends it);
  // the timers of ready/waitFor/stop keep it alive while someone waits.
  child.unref();
  (child.stdout as unknown as net.Socket).unref();
  (child.stderr as unknown as net.Socket).unref();
  ready.then(
    () => clearTimeout(readyTimer),
    () => {
      clearTimeout(readyTimer);
      void stop();
    },
  );
  installSubExitHook(child);

  const waitFor = (n: number, timeoutMs = 60_000): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      const check = () => {
        if (messages.length >= n) {
          done();
          resolve();
        } else if (exited) {
          done();
          reject(new Error(`got ${messages.length} of ${n} messages on ${args.topic}, then ${exitInfo}`));
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`got ${messages.length} of ${n} messages on ${args.topic} (port ${args.port}) within ${timeoutMs} ms`));
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        listeners.delete(check);
      };
      listeners.add(check);
      check();
    });

  return { messages, ready, waitFor, stop };
}

const liveSubs = new Set<ChildProcess>();
let subHookInstalled = false;
function installSubExitHook(child: ChildProcess): void {
  liveSubs.add(child);
  child.once('close', () => liveSubs.delete(child));
  if (subHookInstalled) return;
  subHookInstalled = true;
  process.once('exit', () => {
    for (const c of liveSubs) c.kill('SIGTERM');
  });
}

function parseSubLine(line: string, v5: boolean): SubMessage {
  const tab = line.indexOf('\t');
  const json = v5 && tab >= 0 ? line.slice(0, tab) : line;
  const props = v5 && tab >= 0 ? line.slice(tab + 1) : '';
  try {
    const j = JSON.parse(json) as {
      topic: string;
      payload: unknown;
      qos?: number;
      retain?: number;
      properties?: { 'user-properties'?: Record<string, string> };
    };
    const msg: SubMessage = {
      topic: j.topic,
      payload: typeof j.payload === 'string' ? j.payload : JSON.stringify(j.payload),
      qos: j.qos ?? 0,
      retain: j.retain === 1,
    };
    if (props !== '') msg.userProperties = props;
    const map = j.properties?.['user-properties'];
    if (map) msg.userPropertyMap = map;
    return msg;
  } catch {
    return { topic: '', payload: line, qos: 0, retain: false };
  }
}

// ---- MQTT payloads of a size ----

/** An array of `n` OEM data records of a run, each with a string of `pad` characters. */
export const oemRecords = (run: string, tag: string, n: number, pad: number) =>
  Array.from({ length: n }, (_, i) => ({ payloadType: 1, data: { run, tag, seq: i, blob: 'x'.repeat(pad) } }));

/** `n` OEM records, padded (each record's blob; a record's data is at most 64 KiB) to exactly `bytes` bytes of JSON. */
export function payloadOf(run: string, tag: string, n: number, bytes: number): string {
  const records = oemRecords(run, tag, n, 0);
  const bare = JSON.stringify(records).length;
  assert.ok(bare <= bytes, `${n} records fit in ${bytes} bytes`);
  const each = Math.floor((bytes - bare) / n);
  for (const r of records) r.data.blob = 'x'.repeat(each);
  records[n - 1]!.data.blob += 'x'.repeat(bytes - bare - each * n);
  const s = JSON.stringify(records);
  assert.equal(Buffer.byteLength(s), bytes);
  return s;
}

/** A publisher that waits for the broker's acknowledgement of each QoS 1/2 message (text and bytes as they are, anything else as JSON). */
export async function mqttPublisher(url: string, id: string) {
  const c = await mqtt.connectAsync(url, { protocolVersion: 5, clientId: id, clean: true, reconnectPeriod: 0 });
  return {
    publish: (topic: string, payload: unknown, qos: 0 | 1 | 2 = 1) =>
      c.publishAsync(topic, typeof payload === 'string' || Buffer.isBuffer(payload) ? payload : JSON.stringify(payload), { qos }),
    end: () => c.endAsync(),
  };
}
