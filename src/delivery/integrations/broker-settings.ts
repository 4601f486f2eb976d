// The MQTT and Kafka settings of an integration (API guide 9), checked
// and merged as a save needs them: defaults, write-only secrets (kept when left out, but only while
// they would go to the same broker as before), the address rules for every broker named, TLS before
// credentials, topic names each broker accepts, and customer-named fields that can neither reach a
// prototype nor overwrite a member of the pushed object.
import { badRequest } from '../../http/errors.js';
import { FORBIDDEN_SEGMENTS, parseDottedPath } from '../../http/dotted-path.js';
import { OBJECT_TYPES, type ObjectType, PUSH_FIELDS } from '../../eventlog/objects.js';
import { type AddressPolicy, parseHostPort, portOf, refusedAs400, resolveVetted } from '../address.js';
import type { KafkaIntegration, MqttIntegration } from './model.js';

type Json = Record<string, unknown>;
type MqttSettings = MqttIntegration['mqtt'];
type KafkaSettings = KafkaIntegration['kafka'];

/** Broker secrets as stored (encrypted) beside the public settings. */
export interface BrokerSecrets {
  password: string | null;
  key: string | null;
}

/** A name added to every pushed object: no prototype segment, and no member of the objects it covers. */
function checkAddedField(name: string, types: readonly string[], field: string): void {
  if (FORBIDDEN_SEGMENTS.has(name)) throw badRequest(`${field}: the name "${name}" is not allowed`, field);
  for (const t of types) {
    if (PUSH_FIELDS[t as ObjectType]?.includes(name)) {
      throw badRequest(`${field}: "${name}" is a field of the ${t} object and would overwrite it`, field);
    }
  }
}

/** The first character of a topic that brokers refuse: C0 and C1 controls, DEL, noncharacters. */
function refusedTopicChar(topic: string): number | undefined {
  for (const ch of topic) {
    const cp = ch.codePointAt(0)!;
    if (cp <= 0x1f || (cp >= 0x7f && cp <= 0x9f) || (cp >= 0xfdd0 && cp <= 0xfdef) || (cp & 0xfffe) === 0xfffe) return cp;
  }
  return undefined;
}

/**
 * Topic names: MQTT topics may not hold the wildcards + and # (nor start with $, the broker's
 * own space); Kafka topics are [A-Za-z0-9._-], at most 249 characters.
 */
export function checkTopics(channel: 'mqtt' | 'kafka', prefix: string, destinations: Record<string, string>): void {
  const check = (topic: string, field: string, longest: string) => {
    if (channel === 'mqtt') {
      if (/[+#]/.test(topic) || topic.startsWith('$')) {
        throw badRequest(`${field}: an MQTT topic may not contain + or # or start with $`, field);
      }
      // A broker refuses these at publish time, for ever: refused here, naming the character.
      const cp = refusedTopicChar(topic);
      if (cp !== undefined) {
        const name = cp <= 0x9f ? 'a control character' : 'a Unicode noncharacter';
        throw badRequest(`${field}: an MQTT topic may not contain U+${cp.toString(16).toUpperCase().padStart(4, '0')} (${name})`, field);
      }
    } else if (!/^[A-Za-z0-9._-]+$/.test(topic) || topic.length + longest.length > 249 || topic === '.' || topic === '..') {
      throw badRequest(
        `${field}: a Kafka topic holds only letters, digits, '.', '_' and '-', at most 249 characters in all, and is not "." or ".."`,
        field,
      );
    }
  };
  // A Kafka prefix leaves room for the longest topic made from it: `<prefix>.events.notification`.
  const longest = `.events.${[...OBJECT_TYPES].sort((a, b) => b.length - a.length)[0]}`;
  check(prefix, '/destination', channel === 'kafka' ? longest : '');
  if (channel === 'kafka' && (prefix === '.' || prefix === '..')) {
    throw badRequest(`/destination: a Kafka topic prefix may not be "${prefix}"`, '/destination');
  }
  for (const [type, topic] of Object.entries(destinations)) {
    if (!(OBJECT_TYPES as readonly string[]).includes(type)) {
      throw badRequest(`/destinations: unknown object type "${type}"`, `/destinations/${type}`);
    }
    check(topic, `/destinations/${type}`, '');
  }
}

/**
 * A write-only secret: given = replace, null = remove, left out = keep the stored one, but only
 * while `sameTarget` (the broker and identity it was given for are unchanged), so a stored
 * password never follows a new broker address.
 */
function secret(given: string | null | undefined, stored: string | null, sameTarget: boolean, field: string): string | null {
  if (given !== undefined) return given;
  if (stored === null || sameTarget) return stored;
  throw badRequest(`${field} is required: the broker or identity changed, and the stored one is kept only for the same one`, field);
}

export interface Composed<S> {
  settings: S;
  secrets: BrokerSecrets;
}

/** MQTT settings: `input` is the body's member (PATCH: merged over the current), `cur` the stored ones. */
export async function composeMqtt(
  input: Json,
  cur: { settings: Json; secrets: BrokerSecrets } | null,
  objectTypes: readonly string[],
  policy: AddressPolicy,
): Promise<Composed<Omit<MqttSettings, 'password' | 'key'> & { passwordSet: boolean; keySet: boolean }>> {
  if (typeof input.url !== 'string') throw badRequest('/mqtt/url is required for an MQTT integration', '/mqtt/url');
  let url: URL;
  try {
    url = new URL(input.url);
  } catch {
    throw badRequest('/mqtt/url: not a valid URL', '/mqtt/url');
  }
  if (url.protocol !== 'mqtt:' && url.protocol !== 'mqtts:') {
    throw badRequest('/mqtt/url: the scheme must be mqtt:// or mqtts:// (TLS)', '/mqtt/url');
  }
  if (url.username || url.password) throw badRequest('/mqtt/url: put credentials in username and password, not the URL', '/mqtt/url');
  if ((url.pathname && url.pathname !== '/') || url.search || url.hash) {
    throw badRequest('/mqtt/url: only a scheme, host and port (the topic is the destination)', '/mqtt/url');
  }
  await refusedAs400('/mqtt/url', () => resolveVetted(url.hostname.replace(/^\[|\]$/g, ''), policy, portOf(url)));
  const tls = url.protocol === 'mqtts:';
  const username = (input.username as string | null | undefined) ?? null;
  const sameBroker = cur !== null && cur.settings.url === input.url;
  const password = secret(
    input.password as string | null | undefined,
    cur?.secrets.password ?? null,
    sameBroker && cur.settings.username === username,
    '/mqtt/password',
  );
  const cert = (input.cert as string | null | undefined) ?? null;
  const key = secret(
    input.key as string | null | undefined,
    cur?.secrets.key ?? null,
    sameBroker && cur.settings.cert === cert,
    '/mqtt/key',
  );
  const ca = (input.ca as string | null | undefined) ?? null;
  if (!tls && (ca || cert || key)) throw badRequest('/mqtt/url: a CA or client certificate needs mqtts:// (TLS)', '/mqtt/url');
  if (!tls && (username || password) && !policy.allowPlaintextBrokers) {
    throw badRequest(
      '/mqtt/url: credentials are sent only over TLS (mqtts://); an operator allows plaintext with PUSH_ALLOW_PLAINTEXT_BROKERS',
      '/mqtt/url',
    );
  }
  if (password && !username) throw badRequest('/mqtt/username is required with a password', '/mqtt/username');
  if (cert && !key) throw badRequest('/mqtt/key is required with a client certificate', '/mqtt/key');
  if (key && !cert) throw badRequest('/mqtt/cert is required with a client key', '/mqtt/cert');
  checkPem(ca, '/mqtt/ca', 'CERTIFICATE');
  checkPem(cert, '/mqtt/cert', 'CERTIFICATE');
  checkPem(key, '/mqtt/key', 'PRIVATE KEY');
  // The event id injection as compose() settled it (API guide 9: naming the field turns it on).
  const setEventId = input.setEventId === true;
  const eventIdField = setEventId ? (input.eventIdField as string) : null;
  if (eventIdField !== null) checkAddedField(eventIdField, objectTypes, '/mqtt/eventIdField');
  return {
    settings: {
      url: input.url,
      qos: (input.qos as 0 | 1 | 2 | undefined) ?? 1,
      protocolVersion: (input.protocolVersion as 4 | 5 | undefined) ?? 5,
      setEventId,
      eventIdField,
      clientId: (input.clientId as string | null | undefined) ?? null,
      username,
      passwordSet: password !== null,
      ca,
      cert,
      keySet: key !== null,
      maxInFlight: (input.maxInFlight as number | undefined) ?? 1000,
      ...flow(input),
    },
    secrets: { password, key },
  };
}

/** Kafka settings, as composeMqtt. */
export async function composeKafka(
  input: Json,
  cur: { settings: Json; secrets: BrokerSecrets } | null,
  objectTypes: readonly string[],
  policy: AddressPolicy,
): Promise<
  Composed<
    Omit<KafkaSettings, 'sasl' | 'ssl'> & {
      sasl: { mechanism: string; username: string; passwordSet: boolean } | null;
      ssl: { ca: string | null; cert: string | null; keySet: boolean } | null;
    }
  >
> {
  const brokers = input.brokers as string[] | undefined;
  if (!Array.isArray(brokers)) throw badRequest('/kafka/brokers is required for a Kafka integration', '/kafka/brokers');
  for (const [i, b] of brokers.entries()) {
    let hp: { host: string; port: number };
    try {
      hp = parseHostPort(b);
    } catch (e) {
      throw badRequest(`/kafka/brokers/${i}: ${(e as Error).message}`, `/kafka/brokers/${i}`);
    }
    await refusedAs400(`/kafka/brokers/${i}`, () => resolveVetted(hp.host, policy, hp.port));
  }
  const sameBrokers = cur !== null && JSON.stringify(cur.settings.brokers) === JSON.stringify(brokers);
  const saslIn = (input.sasl as Json | null | undefined) ?? null;
  const curSasl = (cur?.settings.sasl as Json | null | undefined) ?? null;
  const password = saslIn
    ? secret(
        saslIn.password as string | undefined,
        cur?.secrets.password ?? null,
        sameBrokers && curSasl?.username === saslIn.username && curSasl?.mechanism === saslIn.mechanism,
        '/kafka/sasl/password',
      )
    : null;
  if (saslIn && password === null) throw badRequest('/kafka/sasl/password is required', '/kafka/sasl/password');
  const sslIn = (input.ssl as Json | null | undefined) ?? null;
  const curSsl = (cur?.settings.ssl as Json | null | undefined) ?? null;
  const cert = (sslIn?.cert as string | null | undefined) ?? null;
  const key = sslIn
    ? secret(sslIn.key as string | null | undefined, cur?.secrets.key ?? null, sameBrokers && curSsl?.cert === cert, '/kafka/ssl/key')
    : null;
  if (cert && !key) throw badRequest('/kafka/ssl/key is required with a client certificate', '/kafka/ssl/key');
  if (key && !cert) throw badRequest('/kafka/ssl/cert is required with a client key', '/kafka/ssl/cert');
  const ca = (sslIn?.ca as string | null | undefined) ?? null;
  checkPem(ca, '/kafka/ssl/ca', 'CERTIFICATE');
  checkPem(cert, '/kafka/ssl/cert', 'CERTIFICATE');
  checkPem(key, '/kafka/ssl/key', 'PRIVATE KEY');
  if (saslIn && !sslIn && !policy.allowPlaintextBrokers) {
    throw badRequest(
      '/kafka/sasl: credentials are sent only over TLS (set ssl); an operator allows plaintext with PUSH_ALLOW_PLAINTEXT_BROKERS',
      '/kafka/sasl',
    );
  }
  const keyPath = (input.keyPath as string | null | undefined) ?? null;
  if (keyPath !== null) parseDottedPath(keyPath, '/kafka/keyPath');
  const metadata = (input.metadata as Record<string, string | number | boolean> | undefined) ?? {};
  for (const name of Object.keys(metadata)) checkAddedField(name, objectTypes, `/kafka/metadata/${name}`);
  return {
    settings: {
      brokers,
      acks: (input.acks as 0 | 1 | 'all' | undefined) ?? 'all',
      keyPath,
      clientId: (input.clientId as string | undefined) ?? 'asset-tracking-service',
      sasl: saslIn ? { mechanism: saslIn.mechanism as string, username: saslIn.username as string, passwordSet: true } : null,
      ssl: sslIn ? { ca, cert, keySet: key !== null } : null,
      metadata,
      ...flow(input),
    },
    secrets: { password, key },
  };
}

/**
 * How a broker channel groups and paces requests. Two requests at once by default: with Kafka
 * acks=all the producer still sends one at a time (the channel's window), and the second request
 * is claimed ahead, so the producer never waits for the engine between claims.
 */
function flow(input: Json) {
  return {
    topicPerType: (input.topicPerType as boolean | undefined) ?? false,
    batchSize: (input.batchSize as number | undefined) ?? 500,
    maxConcurrentRequests: (input.maxConcurrentRequests as number | undefined) ?? 2,
    maxItemsPerMinute: (input.maxItemsPerMinute as number | null | undefined) ?? null,
    timeoutMs: (input.timeoutMs as number | undefined) ?? 10_000,
  };
}

/** A PEM block of the expected kind, so a pasted file of the wrong kind fails at save, not at dial. */
function checkPem(pem: string | null, field: string, kind: 'CERTIFICATE' | 'PRIVATE KEY'): void {
  if (pem === null) return;
  const re = kind === 'CERTIFICATE' ? /-----BEGIN CERTIFICATE-----/ : /-----BEGIN (RSA |EC |ENCRYPTED )?PRIVATE KEY-----/;
  if (!re.test(pem)) throw badRequest(`${field}: expected a PEM ${kind.toLowerCase()} (-----BEGIN ${kind}-----)`, field);
}
