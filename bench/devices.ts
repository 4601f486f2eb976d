// The devices benchmark (`BENCH_ONLY=ingest-devices`; API guide 15): OsmAnd positions over HTTP
// keep-alive, one per request as the Traccar Client sends them, next to single-record POST
// /locations of the same positions in the same run (the target: OsmAnd at least as fast). The
// service runs as its own process on a fresh database; rounds alternate between the two.
import { performance } from 'node:perf_hooks';
import { Api, freshDatabase, httpRequest, knob, round, startService } from './lib.js';

const ROUNDS = knob('BENCH_DEVICE_ROUNDS', 4);
const REQUESTS = knob('BENCH_DEVICE_REQUESTS', 5000);
const CONCURRENCY = knob('BENCH_DEVICE_CONCURRENCY', 16);
const DEVICES = 100;

export interface DeviceBenchRow {
  way: string;
  requests: number;
  messagesPerSecond: number;
  vsRestSingle: string | null;
}

export async function runDevicesBench(): Promise<DeviceBenchRow[]> {
  const url = await freshDatabase('tracking_bench_devices');
  const svc = await startService({
    DATABASE_URL: url,
    DB_POOL_SIZE: '8',
    RATE_LIMIT_MAX: '10000000',
    RATE_LIMIT_CONCURRENT: '1000',
    DEVICE_RATE_LIMIT_MAX: '10000000',
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
    return names.map((w) => ({
      way: w,
      requests: ROUNDS * REQUESTS,
      messagesPerSecond: round(rate(w))!,
      vsRestSingle: w === restWay ? null : `${Math.round((rate(w) / rest) * 100)}%`,
    }));
  } finally {
    await svc.stop();
  }
}
