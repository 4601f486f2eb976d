// MQTT ingest (API guide 15): with INGEST_MQTT_URL set, each instance subscribes to
// `$share/<INGEST_MQTT_SHARE_GROUP>/<prefix>/+/+` on a persistent MQTT 5 session, so the broker
// hands each message to one instance and keeps what an absent instance has not acknowledged.
// A topic is `<prefix>/<uniqueId>/<type>` (type: location, sensordata, reeferdata, gensetdata,
// oemdata); a payload is one record or an array of them in the REST shapes, assetId left out (the
// device's asset) or the device's asset.
//
// Nothing the broker accepted is lost: a QoS 1 message is acknowledged (PUBACK), a QoS 2 one
// received (PUBREC), only after its records are committed or it was refused into the ingest error
// log. Messages are stored in batches (whatever arrived while the last batch was stored, up to
// INGEST_MQTT_RECEIVE_MAXIMUM unacknowledged ones), through the one store (records.ts
// storeRecords), and acknowledged in the order they arrived. A crash before the acknowledgement
// means the broker sends the message again: stored twice, never lost. A database that is away
// holds the batch (retried, backing off) and the broker holds the rest.
//
// mqtt.js handles an incoming message one at a time and acknowledges it as soon as handleMessage
// calls back; to acknowledge after a batch commits, the acknowledgements it sends are held here
// (its `_sendPacket`, wrapped) and sent when their batch is stored. test/mqtt-ingest.test.ts kills
// the service during a stream to prove it.
//
// Poison and memory (test/mqtt-poison.test.ts): one message is at most INGEST_MQTT_MAX_MESSAGE_BYTES
// of payload. The CONNECT announces it (plus room for the topic) as the Maximum Packet Size, so an
// MQTT 5 broker drops larger messages for this client; a payload over it that still arrives is
// refused into the error log without being read. Reading from the broker stops while the payloads
// received and not yet settled pass INGEST_MQTT_MAX_BYTES_IN_FLIGHT, so a burst of large messages
// is parsed a budget at a time. A message whose records fail alone (ingest.ts messageFault) is
// refused and acknowledged; only a database that is away holds messages unacknowledged.
import os from 'node:os';
import type { FastifyBaseLogger } from 'fastify';
import type { IClientOptions, IPublishPacket, MqttClient } from 'mqtt';
import { type Config, pemOrFile } from '../config.js';
import { ApiError, badRequest } from '../http/errors.js';
import { MAX_BULK, RECORD_DEFS, type RecordDef } from '../records/records.js';
import { checkRecordTime } from '../records/time-window.js';
import type { DeviceRow } from './devices.js';
import { type Ingest, IngestRefused } from './ingest.js';
import { checkItem, objectOf } from './values.js';

const DEFS = new Map<string, RecordDef<any>>(RECORD_DEFS.map((d) => [d.type, d]));
/** A store that failed for a reason other than the message waits this long, doubling, before it is tried again. */
const RETRY_MIN_MS = 500;
const RETRY_MAX_MS = 30_000;
/**
 * Room for the rest of a PUBLISH packet besides its payload (fixed header, a topic of up to 64 KiB,
 * packet id, properties) in the Maximum Packet Size announced to the broker.
 */
const PACKET_OVERHEAD = 64 * 1024 + 1024;
/** MQTT's largest packet: a remaining length of at most 268,435,455 bytes, and its fixed header. */
const MQTT_MAX_PACKET = 268_435_455 + 5;
/** The largest answer to a command a device may send (an id, a status and a message of 500 characters fit well). */
const ANSWER_BYTES = 4096;

/** Why a payload is refused unread, or null: it is within the limit. */
export function oversize(bytes: number, max: number): string | null {
  return bytes > max ? `The payload is ${bytes} bytes; INGEST_MQTT_MAX_MESSAGE_BYTES allows ${max}.` : null;
}

/** A message as received, until it is stored or refused and then acknowledged. */
interface Received {
  topic: string;
  payload: Buffer;
  qos: 0 | 1 | 2;
  messageId: number | undefined;
  /** The connection it came on: an acknowledgement goes on that connection or nowhere. */
  connection: number;
  /** Stored or refused: its acknowledgement may go. */
  settled: boolean;
  /** Sends its acknowledgement, once mqtt.js has made it. */
  ack: (() => void) | null;
  /** Its payload's bytes no longer count against INGEST_MQTT_MAX_BYTES_IN_FLIGHT. */
  freed: boolean;
}

/** A message read for its device: the records to store, or why it is refused. */
interface Parsed {
  msg: Received;
  uniqueId: string | null;
  def: RecordDef<any> | null;
  /** A `commandstatus` message: the device's answer to a command, once read. */
  answers: boolean;
  answer: unknown;
  items: { assetId: string }[];
  device: DeviceRow | null;
  /** Stored or refused (or left to the broker to send again). */
  done: boolean;
}

type SendPacket = (packet: { cmd: string; messageId?: number }, cb?: (e?: Error) => void, ...rest: unknown[]) => void;

export interface MqttIngestHandle {
  /** Connected to the broker with the subscription in place. */
  readonly connected: boolean;
  /** Publishes at QoS 1 with an MQTT 5 message expiry; resolves at the broker's PUBACK, rejects when it refused it. */
  publish(topic: string, payload: string, expirySeconds: number): Promise<void>;
  close(): Promise<void>;
}

/**
 * The commands' side of the connection (src/commands/downlink.ts), given by app.ts: the service's
 * own downlink messages (`<prefix>/<uniqueId>/commands`, which the subscription receives too) are
 * passed over; a device's `commandstatus` answer is read and handed over; devices that sent anything
 * are told, so that what they missed is published again; a new connection is told.
 */
export interface CommandSide {
  /** Reads an answer, or throws an ApiError (refused into the error log). */
  read(payload: Buffer): unknown;
  /** Takes a read answer; throws an ApiError when it is refused, anything else when the database is away. */
  answer(device: DeviceRow, answer: unknown): Promise<void>;
  active(assetIds: string[]): Promise<void>;
  connected(): void;
}

/** The topic types a device publishes besides the record types: its answers to commands. */
const ANSWER_TYPE = 'commandstatus';
/** The topic type the service publishes commands on: received by the subscription too, and passed over. */
const COMMAND_TYPE = 'commands';

/** This instance's client id: INGEST_MQTT_CLIENT_ID, else one per host and port (stable across restarts). */
export function ingestClientId(cfg: Config): string {
  return cfg.INGEST_MQTT_CLIENT_ID ?? `tracking-${os.hostname().replace(/[^A-Za-z0-9._-]/g, '-')}-${cfg.PORT}`;
}

/** Splits `<prefix>/<uniqueId>/<type>`. */
function topicParts(prefix: string, topic: string): { uniqueId: string; type: string } | null {
  if (!topic.startsWith(`${prefix}/`)) return null;
  const rest = topic.slice(prefix.length + 1).split('/');
  if (rest.length !== 2 || !rest[0] || !rest[1]) return null;
  return { uniqueId: rest[0], type: rest[1] };
}

export async function startMqttIngest(
  ingest: Ingest,
  cfg: Config,
  log: FastifyBaseLogger,
  commands: CommandSide | null = null,
): Promise<MqttIngestHandle> {
  const { connect } = await import('mqtt');
  const prefix = cfg.INGEST_MQTT_TOPIC_PREFIX;
  const filter = `$share/${cfg.INGEST_MQTT_SHARE_GROUP}/${prefix}/+/+`;

  const queue: Received[] = [];
  /** At most this many messages wait to be stored before reading stops (see gate()). */
  const window = cfg.INGEST_MQTT_RECEIVE_MAXIMUM;
  /** ... and at most this many payload bytes are received and not yet settled. */
  const budget = cfg.INGEST_MQTT_MAX_BYTES_IN_FLIGHT;
  const maxMessage = cfg.INGEST_MQTT_MAX_MESSAGE_BYTES;
  let inFlight = 0;
  const paused: (() => void)[] = [];
  /** Messages awaiting their acknowledgement on the current connection, by packet id. */
  const held = new Map<number, Received>();
  let connection = 0;
  let subscribed = false;
  let closing = false;
  let wake: (() => void) | null = null;

  const opts: IClientOptions = {
    protocolVersion: 5,
    clientId: ingestClientId(cfg),
    clean: false,
    properties: {
      sessionExpiryInterval: cfg.INGEST_MQTT_SESSION_EXPIRY_SECONDS,
      receiveMaximum: cfg.INGEST_MQTT_RECEIVE_MAXIMUM,
      maximumPacketSize: Math.min(maxMessage + PACKET_OVERHEAD, MQTT_MAX_PACKET),
    },
    username: cfg.INGEST_MQTT_USERNAME,
    password: cfg.INGEST_MQTT_PASSWORD,
    ca: pemOrFile(cfg.INGEST_MQTT_CA),
    reconnectPeriod: 2000,
    connectTimeout: 30_000,
    keepalive: 30,
    resubscribe: false, // subscribed on every CONNACK below
    queueQoSZero: false,
    log: () => {},
    // QoS 1 and 2 arrive here before mqtt.js acknowledges them: queued, and the acknowledgement held.
    customHandleAcks: (topic: string, payload: Buffer, packet: IPublishPacket, done: (e: Error | number) => void) => {
      const msg: Received = {
        topic,
        payload,
        qos: packet.qos,
        messageId: packet.messageId,
        connection,
        settled: false,
        ack: null,
        freed: false,
      };
      if (packet.messageId !== undefined) held.set(packet.messageId, msg);
      enqueue(msg);
      done(0);
    },
  };
  const client: MqttClient = connect(cfg.INGEST_MQTT_URL!, opts);

  // Hold PUBACK (QoS 1) and PUBREC (QoS 2) until the message is stored.
  const internals = client as unknown as { _sendPacket: SendPacket };
  if (typeof internals._sendPacket !== 'function') throw new Error('mqtt.js changed: MqttClient._sendPacket is gone (src/ingest/mqtt.ts)');
  const sendPacket = internals._sendPacket.bind(client);
  internals._sendPacket = (packet, cb, ...rest) => {
    const msg = packet.messageId === undefined ? undefined : held.get(packet.messageId);
    if ((packet.cmd === 'puback' || packet.cmd === 'pubrec') && msg && !msg.ack) {
      held.delete(packet.messageId!);
      msg.ack = () => {
        if (client.connected && msg.connection === connection) sendPacket(packet, undefined, ...rest);
      };
      if (msg.settled) msg.ack();
      gate(() => cb?.()); // mqtt.js goes on to the next message meanwhile, unless enough are waiting
      return;
    }
    sendPacket(packet, cb, ...rest);
  };
  // QoS 0 messages wait at the same gate (mqtt.js calls handleMessage for each message before the next).
  client.handleMessage = (packet, callback) => {
    if (packet.cmd === 'publish' && packet.qos === 0) gate(() => callback());
    else callback();
  };

  client.on('message', (topic, payload, packet) => {
    // QoS 1 and 2 were queued in customHandleAcks (mqtt.js emits a QoS 2 message again at PUBREL).
    if (packet.qos === 0) enqueue({ topic, payload, qos: 0, messageId: undefined, connection, settled: false, ack: null, freed: false });
  });
  client.on('connect', (connack) => {
    // Small packets (a PUBACK, a command) go out at once rather than wait for the last one's ACK
    // (Nagle's algorithm with the peer's delayed ACK held each for about 40 ms).
    (client.stream as { setNoDelay?: (on: boolean) => void }).setNoDelay?.(true);
    // A session the broker kept holds the subscription; a new one (first start, a broker that lost
    // its sessions) needs it made again.
    if (connack.sessionPresent) {
      subscribed = true;
      commands?.connected();
      return;
    }
    client.subscribe(filter, { qos: 2 }, (e, granted) => {
      const code = granted?.[0]?.qos;
      if (e || code === undefined || code > 2) {
        log.error({ err: e, granted }, `MQTT ingest: the broker refused the subscription to ${filter}`);
        return;
      }
      subscribed = true;
      log.info(`MQTT ingest: subscribed to ${filter} as ${opts.clientId}`);
      commands?.connected();
    });
  });
  client.on('close', () => {
    // What was received on this connection and not acknowledged comes again on the next one
    // (the session is kept): those not yet stored are dropped here; those being stored finish,
    // unacknowledged (a duplicate when they come again, never a loss).
    connection++;
    subscribed = false;
    held.clear();
    for (const next of paused.splice(0)) next();
    for (let i = queue.length - 1; i >= 0; i--) if (queue[i]!.qos > 0) free(queue.splice(i, 1));
  });
  client.on('error', (e) => log.warn({ err: e }, 'MQTT ingest: broker connection error; reconnecting'));

  /**
   * Backpressure: mqtt.js reads the next packet only when `next` runs. While a full window of
   * messages waits to be stored, reading stops, the socket fills and the broker holds the rest.
   * (The Receive Maximum announced should do this, but Mosquitto 2.0.11 sent 19,000 unacknowledged
   * QoS 1 messages to a client that announced 1,000, measured while acknowledgements came late.)
   * Reading also stops while the payloads received and not yet settled pass the byte budget: a
   * count of messages bounds no memory when each may be a megabyte.
   */
  const open = () => queue.length < window && inFlight < budget;
  function gate(next: () => void) {
    if (open()) next();
    else paused.push(next);
  }

  /** Reads on, as far as the window and the byte budget allow. */
  function resume() {
    while (paused.length && open()) paused.shift()!();
  }

  /** Settled or dropped: their bytes leave the budget. */
  function free(msgs: Received[]) {
    for (const m of msgs) {
      if (m.freed) continue;
      m.freed = true;
      inFlight -= m.payload.length;
    }
    resume();
  }

  function enqueue(msg: Received) {
    inFlight += msg.payload.length;
    queue.push(msg);
    if (wake) {
      const w = wake;
      wake = null;
      w();
    }
  }

  /** Acknowledges what is settled, in arrival order, on the connection it came on. */
  function acknowledge(batch: Received[]) {
    for (const m of batch) {
      m.settled = true;
      m.ack?.();
    }
  }

  const parse = (msg: Received): Parsed => {
    const p: Parsed = { msg, uniqueId: null, def: null, answers: false, answer: null, items: [], device: null, done: false };
    const parts = topicParts(prefix, msg.topic);
    if (!parts) return p;
    p.uniqueId = parts.uniqueId;
    p.def = DEFS.get(parts.type) ?? null;
    // The service's own command (downlink.ts), come back through the subscription: nothing to store, no error.
    if (parts.type === COMMAND_TYPE && commands) p.done = true;
    p.answers = parts.type === ANSWER_TYPE && commands !== null;
    return p;
  };

  /** Reads a message's records for its device, or throws why it is refused: never throws anything else. */
  const readRecords = (p: Parsed, device: DeviceRow): { assetId: string }[] => {
    try {
      return recordsOf(p, device);
    } catch (e) {
      if (e instanceof ApiError) throw e;
      throw badRequest(`The payload could not be read: ${e instanceof Error ? e.message : String(e)}`.slice(0, 300));
    }
  };

  /** Reads a message's records for its device, or throws why it is refused. */
  const recordsOf = (p: Parsed, device: DeviceRow): { assetId: string }[] => {
    let body: unknown;
    try {
      body = JSON.parse(p.msg.payload.toString('utf8'));
    } catch {
      throw badRequest('The payload is not JSON.');
    }
    const list = Array.isArray(body) ? body : [body];
    if (list.length === 0 || list.length > MAX_BULK) throw badRequest(`A payload holds 1 to ${MAX_BULK} records.`);
    return list.map((raw, i) => {
      const at = Array.isArray(body) ? `/${i}` : '';
      const item = objectOf(raw);
      if (!item) throw badRequest(`${at || 'the payload'} must be a record object.`, at || '/');
      if (item.assetId !== undefined && item.assetId !== device.asset_id) {
        throw badRequest(`${at}/assetId must be this device's asset (${device.asset_id}) or absent.`, `${at}/assetId`);
      }
      try {
        const record = checkItem(p.def!, { ...item, assetId: device.asset_id });
        // The record time window (time-window.ts), here so that the refusal names the record.
        const when = (record as { whenCreated?: unknown }).whenCreated;
        if (typeof when === 'string') checkRecordTime(ingest.deps.cfg, when, '/whenCreated');
        return record;
      } catch (e) {
        if (e instanceof ApiError && at) throw badRequest(`${at}: ${e.message}`, `${at}${e.extra.field ?? ''}`);
        throw e;
      }
    });
  };

  const refuse = (p: Parsed, e: unknown) =>
    ingest.refused('mqtt', e, p.uniqueId, p.msg.payload.subarray(0, 1024).toString('utf8') || `(empty payload on ${p.msg.topic})`);

  /** Stores the messages of one record type: together, or one by one when one of them is refused. */
  async function storeGroup(def: RecordDef<any>, group: Parsed[]): Promise<void> {
    const pending = group.filter((p) => !p.done);
    await ingest.storeApart(def, pending, async (i, e) => {
      const p = pending[i]!;
      if (e === null) ingest.counters.count(ingest.counters.stored, `mqtt:${def.type}`, p.items.length);
      else await refuse(p, e);
      p.done = true;
    });
  }

  /**
   * Reads a batch: its devices (one query), each message's admission and records. A refused
   * message is logged and done. Throws (to be tried again) only when the database is away.
   */
  async function prepare(parsed: Parsed[]): Promise<void> {
    const fresh = parsed.filter((p) => !p.done && !p.device);
    const ids = [...new Set(fresh.flatMap((p) => (p.uniqueId ? [p.uniqueId] : [])))];
    const devices = ids.length ? await ingest.lookup(ids) : new Map<string, DeviceRow>();
    for (const p of fresh) {
      try {
        const tooLarge = oversize(p.msg.payload.length, maxMessage);
        if (tooLarge) throw new IngestRefused('too large', 'PAYLOAD_TOO_LARGE', tooLarge);
        if (!p.uniqueId) throw badRequest(`The topic ${p.msg.topic.slice(0, 200)} is not ${prefix}/<uniqueId>/<type>.`);
        const device = await ingest.admit('mqtt', devices.get(p.uniqueId));
        if (p.answers) {
          const tooLarge = oversize(p.msg.payload.length, ANSWER_BYTES);
          if (tooLarge) throw new IngestRefused('too large', 'PAYLOAD_TOO_LARGE', `An answer is at most ${ANSWER_BYTES} bytes.`);
          p.answer = commands!.read(p.msg.payload);
          p.device = device;
          continue;
        }
        if (!p.def) {
          const types = [...DEFS.keys(), ...(commands ? [ANSWER_TYPE] : [])];
          throw badRequest(`The topic's type must be one of ${types.join(', ')}.`);
        }
        p.items = readRecords(p, device);
        p.device = device;
      } catch (e) {
        if (!(e instanceof ApiError)) throw e;
        await refuse(p, e instanceof IngestRefused ? e : new IngestRefused('bad message', 'VALIDATION_FAILED', e.message));
        p.done = true;
      }
    }
  }

  /** Stores a prepared batch by type, in chunks of at most MAX_BULK records (whole messages each). */
  async function store(parsed: Parsed[]): Promise<void> {
    const groups = new Map<RecordDef<any>, { chunks: Parsed[][]; size: number }>();
    for (const p of parsed) {
      if (p.done || !p.def) continue;
      let g = groups.get(p.def);
      if (!g || (g.size && g.size + p.items.length > MAX_BULK)) {
        g = { chunks: [...(g?.chunks ?? []), []], size: 0 };
        groups.set(p.def, g);
      }
      g.chunks[g.chunks.length - 1]!.push(p);
      g.size += p.items.length;
    }
    for (const [def, { chunks }] of groups) for (const chunk of chunks) await storeGroup(def, chunk);
    // Answers after the records, in arrival order; one refused is logged, the database away retries the batch.
    for (const p of parsed) {
      if (p.done || !p.answers || !p.device) continue;
      try {
        await commands!.answer(p.device, p.answer);
        ingest.counters.count(ingest.counters.stored, `mqtt:${ANSWER_TYPE}`);
      } catch (e) {
        if (!(e instanceof ApiError)) throw e;
        await refuse(p, new IngestRefused('bad message', e.code, e.message, e.extra));
      }
      p.done = true;
    }
    const from = parsed.filter((p) => p.device && (p.items.length || p.answers)).map((p) => p.device!);
    await ingest.seen(from.map((d) => d.id)).catch((e) => log.warn({ err: e }, 'MQTT ingest: noting last seen failed'));
    if (commands && from.length) {
      await commands
        .active(from.map((d) => d.asset_id))
        .catch((e) => log.warn({ err: e }, 'MQTT ingest: looking for commands to publish again failed'));
    }
  }

  let stop: () => void = () => {};
  const stopped = new Promise<void>((r) => {
    stop = r;
  });

  /**
   * Runs a stage until it succeeds: a failure that is not the message's (the database away) is
   * tried again, backing off, except at shutdown (false: left unacknowledged, the broker sends it
   * again). Messages of a connection that closed meanwhile are left to come again.
   */
  async function retrying(parsed: Parsed[], stage: (parsed: Parsed[]) => Promise<void>, what: string): Promise<boolean> {
    for (let wait = RETRY_MIN_MS; ; wait = Math.min(wait * 2, RETRY_MAX_MS)) {
      try {
        await stage(parsed);
        return true;
      } catch (e) {
        if (closing) {
          log.warn({ err: e }, `MQTT ingest: ${what} failed at shutdown; the broker sends the batch again`);
          return false;
        }
        log.warn({ err: e }, `MQTT ingest: ${what} failed; trying again in ${wait} ms`);
        await Promise.race([new Promise((r) => setTimeout(r, wait).unref()), stopped]);
        for (const p of parsed) if (p.msg.qos > 0 && p.msg.connection !== connection) p.done = true;
      }
    }
  }

  /**
   * Two stages overlap: a batch is prepared (parsed, its devices read, checked) while the one
   * before it is stored, so the service's work and the database's run side by side. Stores stay
   * one at a time, in arrival order (a device's records are stored in the order it sent them),
   * and so do acknowledgements.
   */
  async function run(): Promise<void> {
    let storing: Promise<void> = Promise.resolve();
    while (!closing) {
      if (!queue.length) {
        await new Promise<void>((r) => {
          wake = r;
        });
        continue;
      }
      const batch = queue.splice(0, queue.length);
      resume();
      const parsed = batch.map(parse);
      if (!(await retrying(parsed, prepare, 'reading a batch'))) break;
      const previous = storing;
      storing = previous.then(async () => {
        if (await retrying(parsed, store, 'storing a batch')) acknowledge(batch);
        free(batch);
      });
      await previous; // prepare at most one batch ahead of the store
    }
    await storing;
  }
  const working = run();

  return {
    get connected() {
      return client.connected && subscribed;
    },
    async publish(topic, payload, expirySeconds) {
      await client.publishAsync(topic, payload, { qos: 1, properties: { messageExpiryInterval: expirySeconds } });
    },
    async close() {
      closing = true;
      wake?.();
      for (const next of paused.splice(0)) next();
      stop();
      await working;
      await client.endAsync(false);
    },
  };
}
