// Benchmark: a command's round trip to an MQTT device (API guide 15, "Commands to MQTT devices").
// The service as `npm start` runs it (PostgreSQL), its MQTT ingest on a private Mosquitto
// (test/brokers.ts, with TCP_NODELAY as an operator's broker should have it: Debian's default
// configuration leaves Nagle's algorithm on, and every leg then waits for a delayed ACK, about 40
// ms); one device subscribed with a kept session that
// answers each command ACKNOWLEDGED the moment it arrives. One command at a time: from the POST's
// start to the moment `GET /commands/{id}` first reads ACKNOWLEDGED (polled every 5 ms), with the
// leg to the device on its own. Baseline from the same run: the same ping-pong with the broker alone
// (a client publishes at QoS 1 to a device that answers at QoS 1; until the answer arrives). Target:
// the round trip under 1 s on this machine.
import { performance } from 'node:perf_hooks';
import mqtt, { type MqttClient } from 'mqtt';
import { mosquittoBroker } from '../test/brokers.js';
import { Api, freshDatabase, knob, percentile, startService } from './lib.js';

const COMMANDS = knob('BENCH_COMMANDS', 100);
const PORT_BASE = knob('BENCH_COMMANDS_MQTT_PORT_BASE', 18920);
let BROKER = '';

export interface CommandBenchRow {
  path: string;
  commands: number;
  p50Ms: number;
  p95Ms: number;
  p99Ms: number;
  maxMs: number;
}

const connect = (clientId: string, clean: boolean) =>
  new Promise<MqttClient>((resolve, reject) => {
    const c = mqtt.connect(BROKER, { protocolVersion: 5, clientId, clean, properties: { sessionExpiryInterval: 600 }, reconnectPeriod: 0 });
    c.once('connect', () => {
      // As the service's own client does (src/ingest/mqtt.ts): no Nagle wait on small packets.
      (c.stream as { setNoDelay?: (on: boolean) => void }).setNoDelay?.(true);
      resolve(c);
    });
    c.once('error', reject);
  });

const row = (path: string, l: number[]): CommandBenchRow => {
  const s = [...l].sort((a, b) => a - b);
  const r = (x: number) => Math.round(x * 10) / 10;
  return {
    path,
    commands: s.length,
    p50Ms: r(percentile(s, 50)),
    p95Ms: r(percentile(s, 95)),
    p99Ms: r(percentile(s, 99)),
    maxMs: r(s.at(-1) ?? Number.NaN),
  };
};

/** The broker alone: publish to the device, the device answers, until the answer is back. */
async function brokerPingPong(prefix: string): Promise<number[]> {
  const device = await connect(`${prefix}-raw-device`, true);
  const caller = await connect(`${prefix}-raw-caller`, true);
  try {
    await device.subscribeAsync(`${prefix}/raw/commands`, { qos: 1 });
    await caller.subscribeAsync(`${prefix}/raw/commandstatus`, { qos: 1 });
    device.on('message', (_t, payload) => {
      const { id } = JSON.parse(payload.toString('utf8')) as { id: string };
      void device.publishAsync(`${prefix}/raw/commandstatus`, JSON.stringify({ id, status: 'ACKNOWLEDGED' }), { qos: 1 });
    });
    const waiting = new Map<string, () => void>();
    caller.on('message', (_t, payload) => waiting.get((JSON.parse(payload.toString('utf8')) as { id: string }).id)?.());
    const out: number[] = [];
    for (let i = 0; i < COMMANDS; i++) {
      const id = String(i);
      const t0 = performance.now();
      const back = new Promise<void>((r) => waiting.set(id, r));
      await caller.publishAsync(`${prefix}/raw/commands`, JSON.stringify({ id, type: 'START_DEFROST' }), { qos: 1 });
      await back;
      out.push(performance.now() - t0);
    }
    return out;
  } finally {
    await device.endAsync();
    await caller.endAsync();
  }
}

export async function runCommandsBench(): Promise<CommandBenchRow[]> {
  const mq = await mosquittoBroker('bench-commands', PORT_BASE);
  BROKER = `mqtt://127.0.0.1:${mq.port}`;
  const prefix = `benchcmd${Date.now().toString(36)}`;
  const databaseUrl = await freshDatabase('tracking_bench_commands');
  const svc = await startService({
    DATABASE_URL: databaseUrl,
    INGEST_MQTT_URL: BROKER,
    INGEST_MQTT_TOPIC_PREFIX: prefix,
    INGEST_MQTT_CLIENT_ID: `${prefix}-service`,
    INGEST_MQTT_SHARE_GROUP: prefix,
  });
  const api = new Api(svc.base);
  let device: MqttClient | null = null;
  try {
    await api.login();
    const owner = await api.call('POST', '/owners', { name: 'bench-commands' });
    const asset = await api.call('POST', '/assets', { name: 'CMD0000001', ownerId: owner.id });
    await api.call('POST', '/reefer-data', { assetId: asset.id, data: { supplyAirTemperature: -18 } });
    const dev = await api.call('POST', '/devices', { assetId: asset.id, protocol: 'mqtt' });
    // Subscribed before any command, on a kept session: each arrives the moment the broker has it.
    device = await connect(`${prefix}-device`, false);
    await device.subscribeAsync(`${prefix}/${dev.uniqueId}/commands`, { qos: 1 });
    const arrived = new Map<string, number>();
    const d = device;
    d.on('message', (_t, payload) => {
      const { id } = JSON.parse(payload.toString('utf8')) as { id: string };
      arrived.set(id, performance.now());
      void d.publishAsync(`${prefix}/${dev.uniqueId}/commandstatus`, JSON.stringify({ id, status: 'ACKNOWLEDGED' }), { qos: 1 });
    });
    const toDevice: number[] = [];
    const roundTrip: number[] = [];
    // Warm-up: the first command pays for cold statements and connections.
    for (let i = -3; i < COMMANDS; i++) {
      const t0 = performance.now();
      const c = await api.call('POST', '/commands', { assetId: asset.id, type: 'SET_TEMPERATURE', parameters: { value: -18 } });
      let status = c.status as string;
      while (status !== 'ACKNOWLEDGED') {
        await new Promise((r) => setTimeout(r, 5));
        status = (await api.call('GET', `/commands/${c.id}`)).status;
        if (performance.now() - t0 > 30_000) throw new Error(`command ${c.id} not ACKNOWLEDGED in 30 s (${status})`);
      }
      if (i < 0) continue;
      roundTrip.push(performance.now() - t0);
      toDevice.push((arrived.get(c.id) ?? Number.NaN) - t0);
    }
    const raw = await brokerPingPong(prefix);
    return [
      row('service: create -> device -> ACKNOWLEDGED read back (REST)', roundTrip),
      row('service: create -> at the device', toDevice),
      row('baseline: the broker alone, publish -> device -> answer back', raw),
    ];
  } finally {
    await device?.endAsync();
    api.close();
    await svc.stop();
    await mq.stop();
  }
}
