// Benchmark: bulk ingest of reefer data with the alert engine evaluating every record
// (a specification on every asset) next to the same ingest for assets without specifications, in
// one run against the same service. The two are interleaved round by round, so a noisy moment on
// this shared machine costs both sides alike. Target: with alerts >= 70% of without.
import { performance } from 'node:perf_hooks';
import { Api, freshDatabase, knob, startService } from './lib.js';

const ASSETS = 100;
const BULK = 1000;
const ROUNDS = knob('BENCH_ALERT_ROUNDS', 8);
const POSTS_PER_ROUND = knob('BENCH_ALERT_POSTS', 5);
const IN_FLIGHT = 4;

/** A reefer payload as a controller sends it: cargo and hardware sensors, alarms, power, control module. */
export function reading(seq: number) {
  // About 1 reading in 200 has its supply air out of range; an alarm now and then.
  const excursion = seq % 200 < 1;
  return {
    cargo: {
      sensors: {
        supplyAirTemperature: excursion ? 9.5 : 2 + (seq % 7) / 10,
        returnAirTemperature: 3.1,
        ambientTemperature: 24.5,
        humidity: 85 + (seq % 5),
        co2: 4.2,
        o2: 5.1,
        usda1Temperature: 2.4,
        usda2Temperature: 2.5,
      },
    },
    hardware: {
      sensors: {
        batteryVoltage: 12.6,
        compressorTemperature: 55,
        condenserPressure: 14.2,
        evaporatorFanLevel: 'HIGH',
        condenserFanLevel: 'LOW',
        lineVoltage: 440,
        lineFrequency: 60,
        currentTotal: 11.2,
      },
    },
    alarms: seq % 997 === 0 ? ['AL20'] : [],
    powerOn: true,
    defrost: seq % 500 === 0,
    controlModule: { deviceId: 'CM-1', serial: 'S-1', firmwareVersion: '3.2.1', configuration: 'std' },
  };
}

const SPEC = {
  type: 'REEFER',
  name: 'Chilled',
  settings: { cargo: { settings: { temperatureSetpoint: 2, humiditySetpoint: 85 } } },
  ranges: {
    cargo: {
      sensors: {
        supplyAirTemperature: [0, 5, 15, 60],
        returnAirTemperature: [0, 6, 15, 60],
        humidity: [60, 95, 30, 120],
        co2: [null, 10, 10, 60],
        o2: [2, 21, 10, 60],
        usda1Temperature: [-1, 6, 30, 0],
        usda2Temperature: [-1, 6, 30, 0],
      },
    },
    hardware: {
      sensors: {
        batteryVoltage: [11, 15, 5, 60],
        compressorTemperature: [null, 110],
        condenserPressure: [null, 30],
        evaporatorFanLevel: ['LOW', 'HIGH'],
        condenserFanLevel: ['LOW', 'HIGH'],
        lineVoltage: [360, 500, 5, 30],
      },
    },
  },
  notification: {
    controller: { alarm: { default: { duration: 0, frequency: 60 } }, power: { default: { duration: 15, frequency: 60 } } },
  },
};

export interface AlertBenchResult {
  recordsPerSide: number;
  withoutSpecsRecordsPerSecond: number;
  withSpecsRecordsPerSecond: number;
  withVsWithout: string;
  alertsRaised: number;
  serviceRssMiB: number;
}

export async function runAlertsBench(): Promise<AlertBenchResult> {
  const databaseUrl = await freshDatabase('tracking_bench_alerts');
  const svc = await startService({ DATABASE_URL: databaseUrl, DB_POOL_SIZE: '8' });
  const api = new Api(svc.base);
  try {
    await api.login();
    const fleet = async (name: string, withSpecs: boolean) => {
      const owner = await api.call('POST', '/owners', { name });
      const assets: string[] = [];
      for (let i = 0; i < ASSETS; i++) {
        const a = await api.call('POST', '/assets', { name: `${name}-${i}`, ownerId: owner.id });
        assets.push(a.id);
        if (withSpecs) await api.call('POST', '/specifications', { ...SPEC, assetId: a.id });
      }
      return { ownerId: owner.id as string, assets };
    };
    const plain = await fleet('bench-no-specs', false);
    const watched = await fleet('bench-specs', true);

    // Record time: one minute per bulk per asset (10 readings each), increasing, in the past.
    const start = Date.now() - 7 * 86400_000;
    let seq = 0;
    const body = (assets: string[], post: number) => {
      const items = new Array(BULK);
      for (let i = 0; i < BULK; i++) {
        const at = new Date(start + post * 60_000 + Math.floor(i / assets.length) * 1000).toISOString();
        items[i] = { assetId: assets[i % assets.length], whenCreated: at, reeferClass: 'SC', data: reading(seq++) };
      }
      return JSON.stringify(items);
    };
    const run = async (bodies: string[]) => {
      let next = 0;
      const t0 = performance.now();
      await Promise.all(
        Array.from({ length: IN_FLIGHT }, async () => {
          while (next < bodies.length) {
            const b = bodies[next++]!;
            const a = await api.send('POST', '/reefer-data', b);
            if (a.status !== 201) throw new Error(`POST /reefer-data: ${a.status} ${a.text.slice(0, 300)}`);
          }
        }),
      );
      return (performance.now() - t0) / 1000;
    };
    // Warm-up on both sides (plans, JIT), then alternate rounds.
    await run([body(plain.assets, 0)]);
    await run([body(watched.assets, 0)]);
    let plainSeconds = 0;
    let watchedSeconds = 0;
    let post = 1;
    for (let r = 0; r < ROUNDS; r++) {
      const posts = Array.from({ length: POSTS_PER_ROUND }, () => post++);
      const first = r % 2 === 0;
      const a = posts.map((p) => body(plain.assets, p));
      const b = posts.map((p) => body(watched.assets, p));
      if (first) {
        plainSeconds += await run(a);
        watchedSeconds += await run(b);
      } else {
        watchedSeconds += await run(b);
        plainSeconds += await run(a);
      }
      console.error(`[alerts] round ${r + 1}/${ROUNDS}`);
    }
    const records = ROUNDS * POSTS_PER_ROUND * BULK;
    const notifications = (await api.call('GET', `/notifications?ownerId=${watched.ownerId}&limit=1000`)) as unknown[];
    const withoutRate = records / plainSeconds;
    const withRate = records / watchedSeconds;
    return {
      recordsPerSide: records,
      withoutSpecsRecordsPerSecond: Math.round(withoutRate),
      withSpecsRecordsPerSecond: Math.round(withRate),
      withVsWithout: `${Math.round((withRate / withoutRate) * 100)}%`,
      alertsRaised: notifications.length,
      serviceRssMiB: svc.peakRssMiB(),
    };
  } finally {
    api.close();
    await svc.stop();
  }
}
