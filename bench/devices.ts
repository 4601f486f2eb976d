// The devices benchmark (`BENCH_ONLY=ingest-devices`; API guide 15): OsmAnd positions over HTTP
// keep-alive, one per request as the Traccar Client sends them, next to single-record POST
// /locations of the same positions in the same run (the target: OsmAnd at least as fast). The
// service runs as its own process on a fresh database; rounds alternate between the two.
//
// Then MQTT ingest: one location per QoS 1 message from MQTT_DEVICES devices (their topics; a few
// publisher connections with 1000 messages in flight each), timed from the first publish until
// the service has stored them all (its ingest_records_total), next to raw Mosquitto QoS 1 on the
// same broker: the same messages published the same way to a plain mqtt.js subscriber, timed
// until it has received them all. The broker is a private Mosquitto with the README's settings.
import { performance } from 'node:perf_hooks';
import mqtt from 'mqtt';
import { mosquittoBroker } from '../test/brokers.js';
import { Api, freshDatabase, httpRequest, knob, round, startService } from './lib.js';

const ROUNDS = knob('BENCH_DEVICE_ROUNDS', 4);
const REQUESTS = knob('BENCH_DEVICE_REQUESTS', 5000);
const CONCURRENCY = knob('BENCH_DEVICE_CONCURRENCY', 16);
const DEVICES = 100;
const MQTT_DEVICES = knob('BENCH_MQTT_DEVICES', 1000);
const MQTT_MESSAGES = knob('BENCH_MQTT_MESSAGES', 100_000);
const MQTT_ROUNDS = knob('BENCH_MQTT_ROUNDS', 2);
const MQTT_PUBLISHERS = knob('BENCH_MQTT_PUBLISHERS', 4);
const MQTT_PORT_BASE = knob('BENCH_INGEST_MQTT_PORT_BASE', 18910);

export interface DeviceBenchRow {
  way: string;
  requests: number;
  messagesPerSecond: number;
  vsRestSingle: string | null;
  vsRawMqtt?: string;
  /** The service's largest heap during MQTT ingest (its limit: --max-old-space-size=128). */
  peakHeapMiB?: number;
}

export async function runDevicesBench(): Promise<DeviceBenchRow[]> {
  const url = await freshDatabase('tracking_bench_devices');
  // The README's broker settings for MQTT ingest.
  const mq = await mosquittoBroker('bench-ingest-mqtt', MQTT_PORT_BASE, { maxInflight: 1000, maxQueued: 1_000_000 });
  const brokerUrl = `mqtt://127.0.0.1:${mq.port}`;
  const svc = await startService({
    DATABASE_URL: url,
    DB_POOL_SIZE: '8',
    RATE_LIMIT_MAX: '10000000',
    RATE_LIMIT_CONCURRENT: '1000',
    DEVICE_RATE_LIMIT_MAX: '10000000',
    INGEST_MQTT_URL: brokerUrl,
    INGEST_MQTT_CLIENT_ID: 'bench-ingest',
  });
  try {
    const api = new Api(svc.base);
    await api.login();
    const owner = (await api.call('POST', '/owners', { name: 'device-bench' })).id as string;
    const assets: string[] = [];
    const ids: string[] = [];
    for (let i = 0; i < DEVICES; i++) {
      const assetId = (await api.call('POST', '/assets', { name: `DB-${i}`, ownerId: owner })).id as string;
      assets.push(assetId);
      ids.push((await api.call('POST', '/devices', { assetId, protocol: 'osmand' })).uniqueId as string);
    }
    const start = Math.floor(Date.now() / 1000) - 86_400;
    let n = 0;
    /** The next position: each device a second further on. */
    const next = () => {
      const i = n++;
      return { d: i % DEVICES, t: start + Math.floor(i / DEVICES), lat: 50 + (i % 1000) * 0.0001, lon: 4 + (i % 777) * 0.0001 };
    };
    const ways: Record<string, () => Promise<void>> = {
      'OsmAnd GET (query)': async () => {
        const p = next();
        const a = await httpRequest(
          api.agent,
          `${svc.base}/ingest/osmand?id=${ids[p.d]}&lat=${p.lat}&lon=${p.lon}&timestamp=${p.t}&speed=12.5&bearing=90&altitude=3`,
          'GET',
          {},
        );
        if (a.status !== 200) throw new Error(`osmand: ${a.status} ${a.text.slice(0, 200)}`);
      },
      // What the Traccar Client sends: accuracy and batt too, kept as an OEM data record beside the location.
      'OsmAnd POST form (the app: + accuracy, batt)': async () => {
        const p = next();
        const a = await httpRequest(
          api.agent,
          `${svc.base}/ingest/osmand`,
          'POST',
          { 'content-type': 'application/x-www-form-urlencoded' },
          `id=${ids[p.d]}&lat=${p.lat}&lon=${p.lon}&timestamp=${p.t}&accuracy=5.0&altitude=3.0&speed=12.5&bearing=90.0&batt=87&charge=true`,
        );
        if (a.status !== 200) throw new Error(`osmand: ${a.status} ${a.text.slice(0, 200)}`);
      },
      'REST POST /locations (one record)': async () => {
        const p = next();
        const a = await api.send(
          'POST',
          '/locations',
          JSON.stringify({
            assetId: assets[p.d],
            latitude: p.lat,
            longitude: p.lon,
            whenCreated: new Date(p.t * 1000).toISOString(),
            speed: 23.15,
            heading: 90,
            altitude: 3,
          }),
        );
        if (a.status !== 201) throw new Error(`locations: ${a.status} ${a.text.slice(0, 200)}`);
      },
    };
    const seconds: Record<string, number> = {};
    const run = async (way: string) => {
      let left = REQUESTS;
      const t0 = performance.now();
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (left-- > 0) await ways[way]!();
        }),
      );
      seconds[way] = (seconds[way] ?? 0) + (performance.now() - t0) / 1000;
    };
    const names = Object.keys(ways);
    for (const w of names) await run(w); // warm-up
    for (const w of names) seconds[w] = 0;
    for (let r = 0; r < ROUNDS; r++) {
      for (const w of r % 2 === 0 ? names : [...names].reverse()) await run(w);
      console.error(`[devices] round ${r + 1}/${ROUNDS}`);
    }
    const rate = (w: string) => (ROUNDS * REQUESTS) / seconds[w]!;
    const restWay = names.find((w) => w.startsWith('REST'))!;
    const rest = rate(restWay);
    const rows: DeviceBenchRow[] = names.map((w) => ({
      way: w,
      requests: ROUNDS * REQUESTS,
      messagesPerSecond: round(rate(w))!,
      vsRestSingle: w === restWay ? null : `${Math.round((rate(w) / rest) * 100)}%`,
    }));
    return [...rows, ...(await mqttIngest(api, owner, svc.base, brokerUrl))];
  } catch (e) {
    console.error(`[devices] the service's last lines:\n${svc.output.slice(-40).join('\n')}`);
    throw e;
  } finally {
    await svc.stop();
    await mq.stop();
  }
}

/** The most heap the service used while MQTT ingest ran, as its /metrics said (bytes). */
let peakHeap = 0;

/** The service's count of locations stored from MQTT (its /metrics), noting its heap. */
async function mqttStored(base: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  peakHeap = Math.max(peakHeap, Number(/^nodejs_heap_size_used_bytes (\d+)/m.exec(text)?.[1] ?? 0));
  return Number(/ingest_records_total\{protocol="mqtt",type="location"\} (\d+)/.exec(text)?.[1] ?? 0);
}

/**
 * Publishes `n` QoS 1 messages over MQTT_PUBLISHERS connections, 1000 in flight each. Message i is
 * device i % devices's, and each device publishes over one connection, so its messages reach the
 * broker in the order it sent them (as a tracker's do).
 */
async function publishAll(
  brokerUrl: string,
  n: number,
  devices: number,
  topic: (i: number) => string,
  payload: (i: number) => string,
): Promise<void> {
  const clients = await Promise.all(
    Array.from({ length: MQTT_PUBLISHERS }, (_, k) =>
      mqtt.connectAsync(brokerUrl, { protocolVersion: 5, clientId: `bench-pub-${k}-${Date.now()}`, reconnectPeriod: 0, log: () => {} }),
    ),
  );
  const mine: number[][] = clients.map(() => []);
  for (let i = 0; i < n; i++) mine[(i % devices) % clients.length]!.push(i);
  await Promise.all(
    clients.map(async (c, k) => {
      let next = 0;
      const list = mine[k]!;
      await Promise.all(
        Array.from({ length: 1000 }, async () => {
          for (let j = next++; j < list.length; j = next++) await c.publishAsync(topic(list[j]!), payload(list[j]!), { qos: 1 });
        }),
      );
    }),
  );
  await Promise.all(clients.map((c) => c.endAsync()));
}

async function mqttIngest(api: Api, owner: string, base: string, brokerUrl: string): Promise<DeviceBenchRow[]> {
  const ids: string[] = [];
  for (let i = 0; i < MQTT_DEVICES; i++) {
    const assetId = (await api.call('POST', '/assets', { name: `MQ-${i}`, ownerId: owner })).id as string;
    ids.push((await api.call('POST', '/devices', { assetId, protocol: 'mqtt' })).uniqueId as string);
  }
  for (let t = 0; !/ingest_mqtt_connected 1/.test(await (await fetch(`${base}/metrics`)).text()); t++) {
    if (t > 600) throw new Error('the service did not subscribe to the ingest broker in 60 s');
    await new Promise((r) => setTimeout(r, 100));
  }
  const start = Date.now() - 86_400_000;
  let seq = 0;
  /** Message i of the current round: its device's next position, 10 s after its last (in record time). */
  const location = (n: number) => {
    const i = seq + n;
    return JSON.stringify({
      latitude: 50 + (i % 1000) * 0.0001,
      longitude: 4 + (i % 777) * 0.0001,
      whenCreated: new Date(start + i * 10).toISOString(),
      speed: 23.15,
      heading: 90,
    });
  };
  const seconds = { mqtt: 0, raw: 0 };
  const ingestRound = async () => {
    const before = await mqttStored(base);
    const t0 = performance.now();
    await publishAll(brokerUrl, MQTT_MESSAGES, ids.length, (i) => `devices/${ids[i % ids.length]}/location`, location);
    seq += MQTT_MESSAGES;
    while ((await mqttStored(base)) < before + MQTT_MESSAGES) await new Promise((r) => setTimeout(r, 20));
    seconds.mqtt += (performance.now() - t0) / 1000;
  };
  const rawRound = async () => {
    const sub = await mqtt.connectAsync(brokerUrl, { protocolVersion: 5, clientId: `bench-raw-sub-${Date.now()}`, log: () => {} });
    let got = 0;
    let done!: () => void;
    const all = new Promise<void>((r) => {
      done = r;
    });
    sub.on('message', () => {
      if (++got === MQTT_MESSAGES) done();
    });
    await sub.subscribeAsync('raw/+/location', { qos: 1 });
    const t0 = performance.now();
    await publishAll(brokerUrl, MQTT_MESSAGES, ids.length, (i) => `raw/${ids[i % ids.length]}/location`, location);
    seq += MQTT_MESSAGES;
    await all;
    seconds.raw += (performance.now() - t0) / 1000;
    await sub.endAsync();
  };
  for (let r = 0; r < MQTT_ROUNDS; r++) {
    if (r % 2 === 0) {
      await ingestRound();
      await rawRound();
    } else {
      await rawRound();
      await ingestRound();
    }
    console.error(`[devices] MQTT round ${r + 1}/${MQTT_ROUNDS}`);
  }
  const total = MQTT_ROUNDS * MQTT_MESSAGES;
  const raw = total / seconds.raw;
  return [
    {
      way: `MQTT ingest QoS 1, one location per message, ${MQTT_DEVICES} devices`,
      requests: total,
      messagesPerSecond: round(total / seconds.mqtt)!,
      vsRestSingle: null,
      vsRawMqtt: `${Math.round((total / seconds.mqtt / raw) * 100)}%`,
      peakHeapMiB: Math.round(peakHeap / 1048576),
    },
    {
      way: 'raw Mosquitto QoS 1 (mqtt.js publisher -> mqtt.js subscriber)',
      requests: total,
      messagesPerSecond: round(raw)!,
      vsRestSingle: null,
    },
  ];
}
