// The MQTT channel (spec 5.3, 6.3, 6.5; API.md 9), on mqtt.js. Each event is one PUBLISH of the
// object as JSON to its topic at the integration's QoS; a request is up to batchSize of them, and
// it succeeds when every one is acknowledged (QoS 1: PUBACK; QoS 2: PUBREC, PUBREL, PUBCOMP;
// QoS 0: written to the socket). Never more are unacknowledged than the integration's
// maxInFlight or the Receive Maximum the broker announced in its CONNACK (Mosquitto: 20 by
// default), whichever is lower. MQTT 5 messages carry the user properties event-id and
// webhook-schema-version. One connection per integration and process, dialled to the address that
// was vetted (the address rules of webhooks); a broken connection fails its requests at once
// (the engine retries them on the integration's schedule) and is dialled again with exponential
// backoff, 0.5 s doubling to 30 s.
import crypto from 'node:crypto';
import net from 'node:net';
import tls from 'node:tls';
import { type IClientOptions, type IClientPublishOptions, MqttClient } from 'mqtt';
import { type AddressPolicy, resolveVetted } from '../../address.js';
import type { MqttIntegration } from '../../integrations.js';
import { brokerLimits, brokerMessages, brokerRecord, describe, fingerprint, prependMembers, topicOf, Window } from '../broker.js';
import { type Channel, configOf, type OutMessage } from '../channel.js';

export const SCHEMA_VERSION = '1';
const BACKOFF_MIN_MS = 500;
const BACKOFF_MAX_MS = 30_000;

interface Connection {
  key: string;
  client: MqttClient | null;
  ready: Promise<MqttClient> | null;
  window: Window;
  /** Publishes awaiting their acknowledgement: failed at once when the connection drops. */
  pending: Set<(e: Error) => void>;
  failures: number;
  retryAt: number;
  lastError: string | null;
}

export function mqttChannel(policy: AddressPolicy): Channel {
  const conns = new Map<string, Connection>();

  const dial = (cfg: MqttIntegration, c: Connection): Promise<MqttClient> => {
    const m = cfg.mqtt;
    const url = new URL(m.url);
    const secure = url.protocol === 'mqtts:';
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const port = Number(url.port) || (secure ? 8883 : 1883);
    return resolveVetted(host, policy).then(
      ([addr]) =>
        new Promise<MqttClient>((resolve, reject) => {
          // The socket goes to the vetted address; TLS still checks the certificate against the host name.
          const stream = () =>
            secure
              ? tls.connect({
                  host: addr!.address,
                  port,
                  servername: net.isIP(host) ? undefined : host,
                  ca: m.ca ?? undefined,
                  cert: m.cert ?? undefined,
                  key: m.key ?? undefined,
                })
              : net.connect({ host: addr!.address, port });
          const opts: IClientOptions = {
            protocolVersion: m.protocolVersion,
            clientId: m.clientId ?? `ats-${cfg.id.slice(0, 8)}-${crypto.randomBytes(4).toString('hex')}`,
            username: m.username ?? undefined,
            password: m.password ?? undefined,
            clean: true,
            reconnectPeriod: 0, // this channel redials, with backoff, on its next request
            connectTimeout: m.timeoutMs,
            keepalive: 30,
            resubscribe: false,
            queueQoSZero: false,
          };
          const client = new MqttClient(stream as unknown as ConstructorParameters<typeof MqttClient>[0], opts);
          let settled = false;
          const fail = (e: Error) => {
            if (!settled) {
              settled = true;
              client.end(true);
              reject(e);
            }
          };
          client.once('connect', (connack) => {
            settled = true;
            // MQTT 5: the broker's Receive Maximum bounds what may await acknowledgement (absent: 65,535).
            const receiveMaximum = connack.properties?.receiveMaximum ?? 65_535;
            c.window.resize(m.qos === 0 ? m.maxInFlight : Math.min(m.maxInFlight, receiveMaximum));
            resolve(client);
          });
          client.on('error', fail);
          client.on('close', () => {
            fail(new Error('connection closed before CONNACK'));
            if (c.client === client) {
              c.client = null;
              c.ready = null;
            }
            const err = new Error('connection to the broker closed');
            for (const f of c.pending) f(err);
            c.pending.clear();
          });
        }),
    );
  };

  const connection = (cfg: MqttIntegration): Connection => {
    const key = fingerprint(cfg);
    let c = conns.get(cfg.id);
    if (c && c.key !== key) {
      // Settings changed: the old connection finishes what it has, then goes.
      const old = c.client;
      if (old) old.end(false);
      c = undefined;
    }
    if (!c) {
      c = {
        key,
        client: null,
        ready: null,
        window: new Window(cfg.mqtt.maxInFlight),
        pending: new Set(),
        failures: 0,
        retryAt: 0,
        lastError: null,
      };
      conns.set(cfg.id, c);
    }
    return c;
  };

  const connected = async (cfg: MqttIntegration, c: Connection): Promise<MqttClient> => {
    if (c.client?.connected) return c.client;
    if (!c.ready) {
      if (Date.now() < c.retryAt) {
        throw new Error(`${c.lastError ?? 'not connected'} (next connection attempt in ${Math.ceil((c.retryAt - Date.now()) / 1000)} s)`);
      }
      c.ready = dial(cfg, c).then(
        (client) => {
          c.client = client;
          c.failures = 0;
          return client;
        },
        (e) => {
          c.ready = null;
          c.failures++;
          c.lastError = `connection failed: ${describe(e)}`;
          c.retryAt = Date.now() + Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * 2 ** (c.failures - 1));
          throw new Error(c.lastError);
        },
      );
    }
    return c.ready;
  };

  const publishOne = async (client: MqttClient, c: Connection, topic: string, payload: string, opts: IClientPublishOptions) => {
    const wait = c.window.acquire();
    if (wait) await wait;
    try {
      await new Promise<void>((resolve, reject) => {
        if (!client.connected) return reject(new Error('connection to the broker closed'));
        c.pending.add(reject);
        client.publish(topic, payload, opts, (err) => {
          c.pending.delete(reject);
          if (err) reject(err);
          else resolve();
        });
      });
    } finally {
      c.window.release();
    }
  };

  return {
    name: 'mqtt',
    limits: (any) => brokerLimits(configOf(any, 'mqtt')),
    messages: (any, events, seed) => brokerMessages(configOf(any, 'mqtt'), events, seed),
    async send(any, msg: OutMessage) {
      const cfg = configOf(any, 'mqtt');
      const m = cfg.mqtt;
      const topic = topicOf(cfg, msg.objectType);
      const start = performance.now();
      const where = { topic, qos: m.qos };
      const c = connection(cfg);
      let timer: NodeJS.Timeout | undefined;
      try {
        const client = await connected(cfg, c);
        const idMember = m.setEventId ? `${JSON.stringify(m.eventIdField)}:` : null;
        const timeout = new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no acknowledgement within ${m.timeoutMs} ms`)), m.timeoutMs);
        });
        const sends = msg.events.map((e) => {
          const payload = idMember ? prependMembers(e.payload, `${idMember}${JSON.stringify(e.eventId)}`) : e.payload;
          const opts: IClientPublishOptions = { qos: m.qos };
          if (m.protocolVersion === 5) {
            opts.properties = {
              contentType: 'application/json',
              userProperties: { 'event-id': e.eventId, 'webhook-schema-version': SCHEMA_VERSION, 'webhook-object-type': e.objectType },
            };
          }
          return publishOne(client, c, topic, payload, opts);
        });
        await Promise.race([Promise.all(sends), timeout]);
        return brokerRecord(start, 'success', null, where);
      } catch (e) {
        // Every failure is worth another try on the schedule: a broker that is down, refuses these
        // credentials or this certificate, or lost the connection before acknowledging.
        return brokerRecord(start, 'retry', describe(e), where);
      } finally {
        clearTimeout(timer);
      }
    },
    async close() {
      const ends = [...conns.values()].map((c) => (c.client ? new Promise<void>((r) => c.client!.end(false, {}, () => r())) : undefined));
      conns.clear();
      await Promise.all(ends);
    },
  };
}
