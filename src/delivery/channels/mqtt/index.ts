// The MQTT channel (API guide 9), on mqtt.js. Each event is one PUBLISH of the
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
import type { IClientOptions, IClientPublishOptions, MqttClient } from 'mqtt';
import { type AddressPolicy, AddressRefused, resolveVetted } from '../../address.js';
import type { MqttIntegration } from '../../integrations/model.js';
import {
  brokerLimits,
  brokerMessages,
  brokerRecord,
  describe,
  fingerprint,
  prependMembers,
  topicOf,
  Window,
  withTimeout,
} from '../broker.js';
import { type Channel, configOf, type OutMessage, SCHEMA_VERSION } from '../channel.js';

/** The client library, loaded with the first MQTT integration a process sends for (about 20 MB resident). */
let mqttLib: Promise<typeof import('mqtt')> | undefined;
const loadMqtt = () => (mqttLib ??= import('mqtt'));

const BACKOFF_MIN_MS = 500;
const BACKOFF_MAX_MS = 30_000;

interface Connection {
  key: string;
  client: MqttClient | null;
  ready: Promise<MqttClient> | null;
  window: Window;
  /** Requests awaiting acknowledgements: failed at once when the connection drops. */
  pending: Set<(e: Error) => void>;
  failures: number;
  retryAt: number;
  lastError: string | null;
  /** The last dial was refused by the address rules: a configuration error no retry mends. */
  refused: boolean;
}

export function mqttChannel(policy: AddressPolicy): Channel {
  const conns = new Map<string, Connection>();

  const dial = (cfg: MqttIntegration, c: Connection): Promise<MqttClient> => {
    const m = cfg.mqtt;
    const url = new URL(m.url);
    const secure = url.protocol === 'mqtts:';
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const port = Number(url.port) || (secure ? 8883 : 1883);
    return Promise.all([resolveVetted(host, policy, port), loadMqtt()]).then(
      ([[addr], { MqttClient }]) =>
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
            log: () => {}, // mqtt.js traces every packet through `debug`; at 20,000 messages/s that is 6% of the CPU
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
              c.window = new Window(c.window.size); // what the old connection held is gone with it
            }
            const err = new Error('connection to the broker closed');
            for (const f of [...c.pending]) f(err);
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
        refused: false,
      };
      conns.set(cfg.id, c);
    }
    return c;
  };

  const connected = async (cfg: MqttIntegration, c: Connection): Promise<MqttClient> => {
    if (c.client?.connected) return c.client;
    if (!c.ready) {
      if (Date.now() < c.retryAt) {
        const why = `${c.lastError ?? 'not connected'} (next connection attempt in ${Math.ceil((c.retryAt - Date.now()) / 1000)} s)`;
        throw c.refused ? new AddressRefused(why) : new Error(why);
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
          c.refused = e instanceof AddressRefused;
          c.lastError = `connection failed: ${describe(e)}`;
          c.retryAt = Date.now() + Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * 2 ** (c.failures - 1));
          throw c.refused ? new AddressRefused(c.lastError) : new Error(c.lastError);
        },
      );
    }
    return c.ready;
  };

  /**
   * Publishes a request's messages within the window and settles when every one is acknowledged,
   * or at the first error (a refused publish, the connection closing).
   */
  const publishAll = (client: MqttClient, c: Connection, topic: string, payloads: string[], opts: IClientPublishOptions[]) =>
    new Promise<void>((resolve, reject) => {
      const win = c.window; // a dropped connection gets a new window; late callbacks release this one
      let left = payloads.length;
      let next = 0;
      let settled = false;
      const finish = (err?: Error) => {
        if (settled) return;
        settled = true;
        c.pending.delete(finish);
        if (err) reject(err);
        else resolve();
      };
      c.pending.add(finish);
      const publish = (k: number) => {
        if (settled || !client.connected) {
          win.release();
          finish(new Error('connection to the broker closed'));
          return;
        }
        client.publish(topic, payloads[k]!, opts[k]!, (err) => {
          win.release();
          if (err) finish(err);
          else if (--left === 0) finish();
        });
      };
      const pump = () => {
        while (next < payloads.length && !settled) {
          const wait = win.acquire();
          if (wait) {
            void wait.then(() => {
              publish(next++);
              pump();
            });
            return;
          }
          publish(next++);
        }
      };
      if (left === 0) finish();
      else pump();
    });

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
      try {
        const client = await connected(cfg, c);
        const idMember = m.setEventId ? `${JSON.stringify(m.eventIdField)}:` : null;
        const payloads = msg.events.map((e) =>
          idMember ? prependMembers(e.payload, `${idMember}${JSON.stringify(e.eventId)}`) : e.payload,
        );
        const opts = msg.events.map((e): IClientPublishOptions => {
          if (m.protocolVersion !== 5) return { qos: m.qos };
          return {
            qos: m.qos,
            properties: {
              contentType: 'application/json',
              userProperties: { 'event-id': e.eventId, 'webhook-schema-version': SCHEMA_VERSION, 'webhook-object-type': e.objectType },
            },
          };
        });
        await withTimeout(publishAll(client, c, topic, payloads, opts), m.timeoutMs, 'acknowledgement');
        return brokerRecord(start, 'success', null, where);
      } catch (e) {
        // A refused address is a configuration error no retry mends: FAILED at once (kept for
        // redelivery once it is put right), as on the other channels. Every other failure is worth
        // another try on the schedule: a broker that is down, refuses these credentials or this
        // certificate, or lost the connection before acknowledging.
        return brokerRecord(start, e instanceof AddressRefused ? 'fail' : 'retry', describe(e), where);
      }
    },
    async close() {
      const ends = [...conns.values()].map((c) => (c.client ? new Promise<void>((r) => c.client!.end(false, {}, () => r())) : undefined));
      conns.clear();
      await Promise.all(ends);
    },
  };
}
