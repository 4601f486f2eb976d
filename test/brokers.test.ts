// Self-check of test/brokers.ts against the real brokers: the shared Kafka (scripts/kafka.sh) on every
// listener, and a private Mosquitto on ports 18840-18843. Needs java (+ mvn once), kcat, mosquitto and
// mosquitto-clients: bash scripts/services.sh installs and starts them.
// @test-lanes postgres
// (the broker self-check needs no database: it runs once)
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Admin, type ProducerOptions, Producer, stringSerializers } from '@platformatic/kafka';
import { connect, connectAsync, type IConnackPacket } from 'mqtt';
import {
  createTopic,
  endOffsets,
  type KafkaBroker,
  kafkaBroker,
  kcatConsume,
  type MosquittoBroker,
  mosquittoBroker,
  mosquittoSub,
} from './brokers.js';

const topics: string[] = [];
/** A fresh topic name; the topic is deleted when the Kafka tests end. */
const unique = (prefix: string) => {
  const topic = `${prefix}-${crypto.randomBytes(4).toString('hex')}`;
  topics.push(topic);
  return topic;
};

type Options = Omit<ProducerOptions<string, string, string, string>, 'clientId' | 'bootstrapBrokers' | 'serializers'>;

/** Sends one message with a fresh producer; resolves or rejects with the producer's result. */
async function produceOnce(broker: string, topic: string, options: Options): Promise<void> {
  const producer = new Producer({
    clientId: 'brokers-selfcheck',
    bootstrapBrokers: [broker],
    serializers: stringSerializers,
    autocreateTopics: true,
    timeout: 15_000,
    connectTimeout: 15_000,
    ...options,
  });
  try {
    await producer.send({ messages: [{ topic, key: 'k', value: 'v' }] });
  } finally {
    await producer.close().catch(() => {});
  }
}

const refused = { retries: 0 } as const;

/** An error with its nested errors and causes, as one text. */
const errorText = (e: unknown): string => {
  const x = e as { message?: string; errors?: unknown[]; cause?: unknown };
  return [x.message ?? String(e), ...(x.errors ?? []).map(errorText), ...(x.cause ? [errorText(x.cause)] : [])].join(' <- ');
};

describe('Kafka (shared broker)', () => {
  let kafka: KafkaBroker;
  before(async () => {
    kafka = await kafkaBroker();
  });
  after(async () => {
    if (!kafka || topics.length === 0) return;
    const admin = new Admin({ clientId: 'brokers-selfcheck', bootstrapBrokers: [kafka.plaintext] });
    try {
      const existing = new Set(await admin.listTopics());
      const ours = topics.filter((t) => existing.has(t));
      if (ours.length > 0) await admin.deleteTopics({ topics: ours });
    } finally {
      await admin.close();
    }
  });

  test('plaintext: three messages with headers come back through kcat; createTopic and endOffsets', async () => {
    const topic = unique('selfcheck-plain');
    const producer = new Producer({
      clientId: 'brokers-selfcheck',
      bootstrapBrokers: [kafka.plaintext],
      serializers: stringSerializers,
      autocreateTopics: true,
    });
    try {
      for (let i = 0; i < 3; i++) {
        await producer.send({
          messages: [{ topic, key: `key-${i}`, value: `value-${i}`, headers: { 'x-seq': String(i), 'x-test': 'yes' } }],
        });
      }
    } finally {
      await producer.close();
    }
    const records = await kcatConsume(kafka.plaintext, topic, { minCount: 3 });
    assert.deepEqual(
      records.map((r) => [r.partition, r.offset, r.key, r.value, r.headers]),
      [0, 1, 2].map((i) => [0, i, `key-${i}`, `value-${i}`, { 'x-seq': String(i), 'x-test': 'yes' }]),
    );
    assert.deepEqual(await endOffsets(kafka.plaintext, topic), new Map([[0, 3]]));
    // Without minCount: whatever is there once the end is reached.
    assert.equal((await kcatConsume(kafka.plaintext, topic)).length, 3);

    const multi = unique('selfcheck-multi');
    await createTopic(kafka.plaintext, multi, 3);
    await createTopic(kafka.plaintext, multi, 3); // idempotent
    await assert.rejects(createTopic(kafka.plaintext, multi, 2), /already exists with 3 partitions/);
    assert.deepEqual(
      await endOffsets(kafka.plaintext, multi),
      new Map([
        [0, 0],
        [1, 0],
        [2, 0],
      ]),
    );
    assert.deepEqual(await kcatConsume(kafka.plaintext, multi), []);
  });

  test('SASL: PLAIN and SCRAM-SHA-512 work, a wrong password is refused', async () => {
    const topic = unique('selfcheck-sasl');
    for (const mechanism of ['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512'] as const) {
      await produceOnce(kafka.sasl, topic, { sasl: { mechanism, ...kafka.user } });
    }
    await produceOnce(kafka.saslSsl, topic, { sasl: { mechanism: 'SCRAM-SHA-512', ...kafka.user }, tls: { ca: kafka.ca } });
    for (const mechanism of ['PLAIN', 'SCRAM-SHA-512'] as const) {
      await assert.rejects(
        produceOnce(kafka.sasl, topic, { ...refused, sasl: { mechanism, username: kafka.user.username, password: 'wrong' } }),
        (e: Error) => /SASL authentication failed/.test(errorText(e)),
        `${mechanism} with a wrong password`,
      );
    }
    assert.equal((await kcatConsume(kafka.plaintext, topic, { minCount: 4 })).length, 4);
  });

  test('SSL with the CA; client certificates required on the mtls listener', async () => {
    const topic = unique('selfcheck-tls');
    await produceOnce(kafka.ssl, topic, { tls: { ca: kafka.ca } });
    await assert.rejects(
      produceOnce(kafka.ssl, topic, { ...refused, tls: { ca: kafka.otherCa } }),
      (e: Error) => /certificate/.test(errorText(e)),
      'a server certificate from an unknown CA',
    );
    await produceOnce(kafka.mtls, topic, { tls: { ca: kafka.ca, cert: kafka.clientCert, key: kafka.clientKey } });
    // The broker ends the TLS 1.3 session after the handshake: the client sees the connection close.
    const closed = (e: Error) => /closed|reset|certificate/i.test(errorText(e));
    await assert.rejects(produceOnce(kafka.mtls, topic, { ...refused, tls: { ca: kafka.ca } }), closed, 'no client certificate');
    await assert.rejects(
      produceOnce(kafka.mtls, topic, { ...refused, tls: { ca: kafka.ca, cert: kafka.otherClientCert, key: kafka.otherClientKey } }),
      closed,
      'a client certificate from another CA',
    );
    const tlsArgs = ['-X', 'security.protocol=SSL', '-X', `ssl.ca.location=${kafka.files.ca}`];
    assert.equal((await kcatConsume(kafka.ssl, topic, { minCount: 2, kcatArgs: tlsArgs })).length, 2);
  });
});

/** Runs mosquitto_pub to its end; resolves with its exit code and stderr. */
function mosquittoPub(args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('mosquitto_pub', ['-h', '127.0.0.1', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}

describe('Mosquitto (private broker on 18840-18843)', () => {
  let mq: MosquittoBroker;
  before(async () => {
    mq = await mosquittoBroker('selfcheck', 18840);
  });
  after(async () => {
    await mq?.stop();
  });

  test('MQTT 5 Receive Maximum is the raised in-flight limit', async () => {
    const client = connect(`mqtt://127.0.0.1:${mq.port}`, { protocolVersion: 5, reconnectPeriod: 0, connectTimeout: 30_000 });
    try {
      const connack = await new Promise<IConnackPacket>((resolve, reject) => {
        client.once('connect', resolve);
        client.once('error', reject);
      });
      assert.equal(connack.properties?.receiveMaximum, 1000);
    } finally {
      await client.endAsync();
    }
  });

  test('every listener: publish with mosquitto_pub, receive with mosquittoSub', async () => {
    const password = ['-u', mq.user.username, '-P', mq.user.password];
    const cases: { name: string; port: number; auth: string[] }[] = [
      { name: 'anonymous', port: mq.port, auth: [] },
      { name: 'password', port: mq.authPort, auth: password },
      { name: 'tls', port: mq.tlsPort, auth: ['--cafile', mq.files.ca, ...password] },
      { name: 'mtls', port: mq.mtlsPort, auth: ['--cafile', mq.files.ca, '--cert', mq.files.clientCert, '--key', mq.files.clientKey] },
    ];
    for (const c of cases) {
      const topic = `selfcheck/${c.name}/${crypto.randomBytes(3).toString('hex')}`;
      const sub = mosquittoSub({ port: c.port, topic, qos: 1, v5: true, extra: c.auth });
      try {
        await sub.ready;
        const pub = await mosquittoPub([
          '-p',
          String(c.port),
          '-t',
          topic,
          '-q',
          '1',
          '-V',
          'mqttv5',
          '-D',
          'publish',
          'user-property',
          'event-id',
          'e1',
          '-m',
          `hello ${c.name}\nline 2`,
          ...c.auth,
        ]);
        assert.equal(pub.code, 0, `${c.name}: ${pub.stderr}`);
        await sub.waitFor(1, 30_000);
        assert.equal(sub.messages.length, 1);
        assert.deepEqual(sub.messages[0], {
          topic,
          payload: `hello ${c.name}\nline 2`,
          userProperties: 'event-id:e1',
          userPropertyMap: { 'event-id': 'e1' },
          qos: 1,
          retain: false,
        });
      } finally {
        await sub.stop();
      }
    }
  });

  test('refusals: wrong password, no client certificate, a certificate from another CA, wrong CA', async () => {
    const refusedPub = async (what: string, expected: RegExp, port: number, args: string[]) => {
      const r = await mosquittoPub(['-p', String(port), '-t', 'selfcheck/refused', '-m', 'x', ...args]);
      assert.notEqual(r.code, 0, `${what} should be refused`);
      assert.match(r.stderr, expected, what);
    };
    const notAuthorised = /not authori[sz]ed/;
    await refusedPub('anonymous on the password listener', notAuthorised, mq.authPort, []);
    await refusedPub('a wrong password', notAuthorised, mq.authPort, ['-u', mq.user.username, '-P', 'wrong']);
    await refusedPub('a wrong password over TLS', notAuthorised, mq.tlsPort, [
      '--cafile',
      mq.files.ca,
      '-u',
      mq.user.username,
      '-P',
      'wrong',
    ]);
    await refusedPub('a server certificate from an unknown CA', /TLS error/, mq.tlsPort, [
      '--cafile',
      mq.files.otherCa,
      '-u',
      mq.user.username,
      '-P',
      mq.user.password,
    ]);
    // (TLS 1.3: the broker refuses the certificate after the client's handshake is done.)
    await refusedPub('no client certificate', /connection was lost|TLS error|Protocol error/, mq.mtlsPort, ['--cafile', mq.files.ca]);
    await refusedPub('a client certificate from another CA', /connection was lost|TLS error|Protocol error/, mq.mtlsPort, [
      '--cafile',
      mq.files.ca,
      '--cert',
      mq.files.otherClientCert,
      '--key',
      mq.files.otherClientKey,
    ]);
    const sub = mosquittoSub({ port: mq.authPort, topic: 'selfcheck/#', extra: ['-u', mq.user.username, '-P', 'wrong'] });
    await assert.rejects(sub.ready, /exited/);
    await sub.stop();
  });

  test('stop and start again on the same ports (outage tests)', async () => {
    await mq.stop();
    const r = await mosquittoPub(['-p', String(mq.port), '-t', 'selfcheck/down', '-m', 'x']);
    assert.notEqual(r.code, 0, 'the broker is down');
    await mq.start();
    const sub = mosquittoSub({ port: mq.port, topic: 'selfcheck/up', qos: 2 });
    try {
      await sub.ready;
      assert.equal((await mosquittoPub(['-p', String(mq.port), '-t', 'selfcheck/up', '-q', '2', '-m', 'back'])).code, 0);
      await sub.waitFor(1);
      assert.equal(sub.messages[0]?.payload, 'back');
      assert.equal(sub.messages[0]?.userProperties, undefined);
    } finally {
      await sub.stop();
    }
  });

  test('persistence: a persistent session keeps a queued message across stop + start; debugLog logs packets', async () => {
    await mq.stop();
    const pmq = await mosquittoBroker('selfcheck-persist', 18840, { persistence: true, debugLog: true });
    try {
      const clientId = unique('selfcheck-persistent');
      const options = {
        clientId,
        clean: false,
        protocolVersion: 5 as const,
        properties: { sessionExpiryInterval: 3600 },
        reconnectPeriod: 0,
      };
      const first = await connectAsync(`mqtt://127.0.0.1:${pmq.port}`, options);
      await first.subscribeAsync('selfcheck/persist', { qos: 1 });
      await first.endAsync();
      assert.equal((await mosquittoPub(['-p', String(pmq.port), '-t', 'selfcheck/persist', '-q', '1', '-m', 'kept'])).code, 0);
      await pmq.stop();
      await pmq.start();
      // The broker sends the queued message right after the CONNACK: listen before connecting.
      const second = connect(`mqtt://127.0.0.1:${pmq.port}`, options);
      try {
        const got = await new Promise<string>((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error('the queued message did not arrive within 30 s')), 30_000);
          second.once('message', (_topic, payload) => {
            clearTimeout(timer);
            resolve(payload.toString());
          });
          second.once('error', reject);
        });
        assert.equal(got, 'kept');
      } finally {
        await second.endAsync();
      }
      const log = fs.readFileSync(path.join(pmq.dir, 'mosquitto.log'), 'utf8');
      assert.match(log, new RegExp(`Sending PUBLISH to ${clientId}`));
      assert.match(log, /mosquitto version [\d.]+ terminating/, 'the log goes on across stop + start');
    } finally {
      await pmq.stop();
    }
  });
});
