// The fleet simulator (`npm run simulate`, and the demo): assets of one or more owners, dry
// containers and reefers with gensets, sailing the lanes of routes.ts and driving road legs inland,
// reporting through the public REST API with a real token, in bulk. Reefers carry cargo and
// hardware sensors, and now and then a temperature excursion, an alarm or a power loss. They take
// commands (reefer.ts obeys them; devices.ts reads them): through the REST device side, or, with
// `mqtt`, some of them as MQTT devices that publish their records and take their commands on the
// service's ingest broker. Each reefer reports the set point it runs at; one of the fleet (its first
// reefer) starts at a wrong one, 4 °C for frozen cargo, so a set-point rule has something to find.
//
// Every record carries the real time it was made, so the service judges it as live data, and the
// fleet moves on that clock at the speeds its positions report (ships 30-42 km/h, trucks 60-85 km/h,
// each drifting a little about its cruise), so distances over times agree with the speeds and the
// trips report reads true. A stay in port runs on the clock too (1-6 h). What runs `timeScale` times
// faster is a reefer's life: its temperatures, defrosts, inspections and trouble, so a new set point
// is reached in simulated minutes (about 15 s) and an alarm comes now and then; a rule's minutes
// stay wall-clock minutes. With `hubs`, some of the fleet starts at those places (one asset standing
// there, one arriving within minutes), so zones drawn there have visits from the start.
import { performance } from 'node:perf_hooks';
import { type Caller, MqttDevice, type MqttOptions, mqttDeviceOf, type Obeyed, pollRestCommands } from './devices.js';
import { type Controller, type DeviceCommand, obey } from './reefer.js';
import { type Leg, LEGS, legsFrom, type Place, Track } from './routes.js';

export type Auth =
  | { token: string }
  | { apiKey: string }
  | { clientId: string; clientSecret: string; username: string; password: string; realm?: string };

export interface SimOptions {
  /** The service's base URL (http://127.0.0.1:8080). */
  url: string;
  auth: Auth;
  /** Assets in all (a third dry containers, the rest reefers). */
  assets: number;
  /** Owners to spread them over, made (or found) by name; 0 = the credential's own owner. Needs admin when > 0. */
  owners: number;
  /** Records per second to aim at, all types together. */
  rate: number;
  /** Stop after this many seconds (0: until the signal aborts). */
  durationSeconds: number;
  /**
   * Simulated seconds of a reefer's life (temperatures, defrosts, inspections, trouble) per real
   * second. Movement and stays in port run on the clock, at the speeds reported.
   */
  timeScale: number;
  /**
   * Places where some of the fleet starts: for each, one asset standing there (for 2-6 h) and one
   * on a leg that ends there, a few minutes out. The first assets, two per place.
   */
  hubs?: Place[];
  /** Asset and owner name prefix, so a second run finds the first run's fleet. */
  prefix: string;
  seed: number;
  /** How often the queued records are posted (one bulk per type), ms. */
  flushMs: number;
  signal?: AbortSignal;
  onProgress?: (p: Progress) => void;
  /** Called once the fleet exists, before the first record (the demo adds specifications here). */
  onFleet?: (fleet: FleetAsset[]) => Promise<void>;
  /**
   * Some reefers as MQTT devices of the service's ingest broker: the first `devices` reefers are
   * registered (protocol mqtt), publish their records there and take their commands from there.
   */
  mqtt?: MqttOptions & { devices: number };
  /** Whether the other reefers take commands through the REST device side (default true). */
  commands: boolean;
  /** How often the REST device side asks for PENDING commands, ms. */
  commandPollMs: number;
  /** Each command a reefer obeyed or refused. */
  onCommand?: (c: Obeyed & { name: string }) => void;
}

/** What the simulator tells about each asset it drives. */
export interface FleetAsset {
  id: string;
  name: string;
  ownerId: string;
  kind: 'container' | 'reefer';
  /** Reefers: the cargo's supply air set point, -18 (frozen) or 4 (chilled), degrees C. */
  setpoint: number;
  /** Reefers: the set point the unit starts at: the cargo's, but for the one reefer started wrong. */
  unitSetpoint: number;
  /** Reefers connected as MQTT devices: the device's uniqueId. */
  mqttUniqueId?: string;
}

export const DEFAULTS: Omit<SimOptions, 'url' | 'auth'> = {
  assets: 50,
  owners: 0,
  rate: 200,
  durationSeconds: 0,
  timeScale: 120,
  prefix: 'SIM',
  seed: 1,
  flushMs: 1000,
  commands: true,
  commandPollMs: 3000,
};

type Kind = 'location' | 'sensordata' | 'reeferdata' | 'gensetdata';
const PATHS: Record<Kind, string> = {
  location: '/locations',
  sensordata: '/sensor-data',
  reeferdata: '/reefer-data',
  gensetdata: '/genset-data',
};

export interface Progress {
  seconds: number;
  sent: number;
  perSecond: number;
  errors: number;
  /** Records made but not yet stored (queued or in a post in flight). */
  backlog: number;
  /** Ticks whose records were not made because the backlog was over its cap. */
  skipped: number;
  lastError?: string;
}

export interface Summary extends Progress {
  byType: Record<Kind, number>;
  assets: number;
  ownerIds: string[];
  assetIds: string[];
  posts: number;
  postP50Ms: number;
  postP99Ms: number;
  /** Commands obeyed (ACKNOWLEDGED) and refused (FAILED) by the fleet. */
  commands: { acknowledged: number; failed: number };
  /** The reefers connected as MQTT devices. */
  mqttDevices: { assetId: string; uniqueId: string }[];
}

/** mulberry32: the same fleet and the same trips for the same seed. */
function rng(seed: number) {
  let s = seed | 0;
  return () => {
    s = (s + 0x6d2b79f5) | 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// ---- the API client -----------------------------------------------------------------------------

class Client implements Caller {
  private token = '';
  constructor(
    readonly base: string,
    private readonly auth: Auth,
  ) {}

  private async login(): Promise<void> {
    if ('token' in this.auth) this.token = this.auth.token;
    else if ('apiKey' in this.auth) this.token = this.auth.apiKey;
    else {
      const a = this.auth;
      const r = await fetch(`${this.base}/auth/realms/${a.realm ?? 'tracking'}/protocol/openid-connect/token`, {
        method: 'POST',
        headers: {
          authorization: `Basic ${Buffer.from(`${a.clientId}:${a.clientSecret}`).toString('base64')}`,
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: new URLSearchParams({ grant_type: 'password', username: a.username, password: a.password }).toString(),
      });
      const body = (await r.json()) as { access_token?: string; message?: string };
      if (!r.ok || !body.access_token) throw new Error(`sign-in failed: ${r.status} ${body.message ?? ''}`);
      this.token = body.access_token;
    }
  }

  /** One call; a 401 signs in again once (tokens expire). Answers status and parsed body. */
  async call(method: string, path: string, body?: string): Promise<{ status: number; body: any; retryAfter?: number }> {
    if (!this.token) await this.login();
    for (let attempt = 0; ; attempt++) {
      const r = await fetch(`${this.base}/api/v1${path}`, {
        method,
        headers: { authorization: `Bearer ${this.token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body }),
      });
      const text = await r.text();
      if (r.status === 401 && attempt === 0 && !('token' in this.auth) && !('apiKey' in this.auth)) {
        await this.login();
        continue;
      }
      const retryAfter = Number(r.headers.get('retry-after') ?? '') || undefined;
      return { status: r.status, body: text ? JSON.parse(text) : undefined, retryAfter };
    }
  }

  async must(method: string, path: string, body?: unknown): Promise<any> {
    const r = await this.call(method, path, body === undefined ? undefined : JSON.stringify(body));
    if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
    return r.body;
  }

  /** Every page of a list. */
  async all(path: string): Promise<any[]> {
    const out: any[] = [];
    let cursor = '';
    for (;;) {
      const sep = path.includes('?') ? '&' : '?';
      const r = await fetch(`${this.base}/api/v1${path}${sep}limit=1000${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, {
        headers: { authorization: `Bearer ${this.token}` },
      });
      if (!r.ok) throw new Error(`GET ${path}: ${r.status} ${await r.text()}`);
      out.push(...((await r.json()) as any[]));
      const next = /<[^>]*[?&]cursor=([^&>]+)[^>]*>;\s*rel="next"/.exec(r.headers.get('link') ?? '');
      if (!next) return out;
      cursor = decodeURIComponent(next[1]!);
    }
  }
}

// ---- the fleet ----------------------------------------------------------------------------------

interface Vehicle extends Controller {
  id: string;
  ownerId: string;
  name: string;
  kind: 'container' | 'reefer';
  track: Track;
  km: number;
  /** The speed it moves at now (and reports), km/h, drifting about its leg's cruise. */
  speedKmh: number;
  cruiseKmh: number;
  /** Seconds left at a port or depot: at the end of its leg (then the next leg), or before it sets off (km 0). */
  dwell: number;
  visits: number;
  // Reefer state (the controller's: reefer.ts).
  /** The cargo's set point (the unit's may differ: `setpoint`). */
  cargoSetpoint: number;
  supplyAir: number;
  humidity: number;
  /** Simulated seconds left of a temperature excursion (the unit struggling), of a power loss. */
  excursion: number;
  powerOff: number;
  /** An MQTT device's connection and the records waiting for it; REST otherwise. */
  device?: MqttDevice;
  outbox?: Record<Kind, object[]>;
}

const START_PORTS: Place[] = ['shanghai', 'rotterdam', 'losAngeles', 'newYork', 'singapore', 'santos', 'busan', 'hamburg', 'durban'];

const pick = <T>(pool: T[], random: () => number): T => pool[Math.floor(random() * pool.length)]!;

function nextLeg(at: Place, random: () => number): Leg {
  const options = legsFrom(at);
  return pick(options.length ? options : LEGS, random);
}

const round = (n: number, d: number) => Math.round(n * 10 ** d) / 10 ** d;
/** A leg's cruising speed, km/h: a ship's or a truck's. */
const cruise = (leg: Leg, random: () => number) => (leg.mode === 'sea' ? 30 + random() * 12 : 60 + random() * 25);

/** Runs the simulator until its duration ends or the signal aborts; resolves with the summary. */
export async function simulate(options: Partial<SimOptions> & Pick<SimOptions, 'url' | 'auth'>): Promise<Summary> {
  const o: SimOptions = { ...DEFAULTS, ...options };
  const random = rng(o.seed);
  for (const hub of o.hubs ?? []) {
    if (!legsFrom(hub).length || !LEGS.some((l) => l.to === hub)) throw new Error(`hub ${hub}: no route leaves or reaches it`);
  }
  const api = new Client(o.url.replace(/\/$/, ''), o.auth);

  // Owners: found by name or made (admin); or the credential's own (the first it sees).
  const ownerIds: string[] = [];
  if (o.owners > 0) {
    for (let i = 1; i <= o.owners; i++) {
      const name = `${o.prefix} Fleet ${i}`;
      const found = (await api.must('GET', `/owners?name=${encodeURIComponent(name)}`)) as { id: string }[];
      ownerIds.push(found[0]?.id ?? (await api.must('POST', '/owners', { name })).id);
    }
  } else {
    const visible = (await api.must('GET', '/owners?limit=1')) as { id: string }[];
    if (!visible[0]) throw new Error('the credential sees no owner');
    ownerIds.push(visible[0].id);
  }

  // Assets: a run finds the fleet an earlier run with the same prefix made.
  const vehicles: Vehicle[] = [];
  let startedWrong = false;
  const existing = new Map<string, string>();
  for (const ownerId of ownerIds) {
    for (const a of await api.all(`/assets?ownerId=${ownerId}`)) existing.set(`${a.ownerId}/${a.name}`, a.id);
  }
  for (let n = 0; n < o.assets; n++) {
    const ownerId = ownerIds[n % ownerIds.length]!;
    const kind = n % 3 === 0 ? 'container' : 'reefer';
    const name = `${o.prefix}${kind === 'reefer' ? 'R' : 'C'}${String(n + 1).padStart(5, '0')}`;
    const id =
      existing.get(`${ownerId}/${name}`) ??
      (
        await api.must('POST', '/assets', {
          name,
          ownerId,
          note: kind === 'reefer' ? 'Simulated reefer with genset' : 'Simulated dry container',
          tags: `simulated,${kind}`,
        })
      ).id;
    // Two assets per hub (one standing there, one arriving), the rest spread along the lanes.
    const hub = o.hubs?.[Math.floor(n / 2)];
    const arriving = hub !== undefined && n % 2 === 1;
    const start = hub ?? START_PORTS[n % START_PORTS.length]!;
    const leg = arriving
      ? pick(
          LEGS.filter((l) => l.to === hub),
          random,
        )
      : nextLeg(start, random);
    const track = new Track(leg);
    const cruiseKmh = cruise(leg, random);
    // The first reefer carries frozen cargo with its unit still at the chilled set point of its
    // last load: it warms towards 4 °C until someone sends it the cargo's.
    const wrong: boolean = kind === 'reefer' && !startedWrong;
    startedWrong ||= wrong;
    const frozen = random() < 0.5 || wrong;
    const cargoSetpoint = frozen ? -18 : 4;
    const setpoint = wrong ? 4 : cargoSetpoint;
    vehicles.push({
      id,
      ownerId,
      name,
      kind,
      track,
      // Spread along the lanes from the start; at a hub, standing there or 2-6 minutes out.
      km:
        hub === undefined ? random() * track.lengthKm : arriving ? Math.max(0, track.lengthKm - (cruiseKmh * (2 + random() * 4)) / 60) : 0,
      speedKmh: cruiseKmh,
      cruiseKmh,
      dwell: hub !== undefined && !arriving ? (2 + random() * 4) * 3600 : 0,
      visits: 0,
      cargoSetpoint,
      setpoint,
      humiditySetpoint: null,
      mode: 'continuous',
      switchedOff: false,
      supplyAir: setpoint,
      humidity: 85,
      excursion: 0,
      powerOff: 0,
      alarm: 0,
      defrost: 0,
      pti: 0,
    });
  }
  const byId = new Map(vehicles.map((v) => [v.id, v]));

  let acknowledged = 0;
  let failedCommands = 0;
  const obeyed = (c: Obeyed) => {
    if (c.status === 'ACKNOWLEDGED') acknowledged++;
    else failedCommands++;
    o.onCommand?.({ ...c, name: byId.get(c.assetId)?.name ?? c.assetId });
  };
  const obeyFor = (assetId: string, c: DeviceCommand) => {
    const v = byId.get(assetId)!;
    return obey(v, c, v.dwell > 0);
  };

  // MQTT devices: the first reefers, each registered (or found) and connected before any record.
  const devices: MqttDevice[] = [];
  if (o.mqtt && o.mqtt.devices > 0) {
    try {
      for (const v of vehicles.filter((x) => x.kind === 'reefer').slice(0, o.mqtt.devices)) {
        const uniqueId = await mqttDeviceOf(api, v.id);
        const device = new MqttDevice(v.id, uniqueId, o.mqtt, (c) => obeyFor(v.id, c), obeyed);
        await device.connect();
        devices.push(device);
        v.device = device;
        v.outbox = { location: [], sensordata: [], reeferdata: [], gensetdata: [] };
      }
    } catch (e) {
      await Promise.all(devices.map((d) => d.end()));
      throw e;
    }
  }
  // The REST device side serves the other reefers.
  const restReefers = o.commands ? vehicles.filter((v) => v.kind === 'reefer' && !v.device).map((v) => v.id) : [];

  await o.onFleet?.(
    vehicles.map((v) => ({
      id: v.id,
      name: v.name,
      ownerId: v.ownerId,
      kind: v.kind,
      setpoint: v.cargoSetpoint,
      unitSetpoint: v.setpoint,
      ...(v.device ? { mqttUniqueId: v.device.uniqueId } : {}),
    })),
  );

  const queues: Record<Kind, object[]> = { location: [], sensordata: [], reeferdata: [], gensetdata: [] };
  const byType: Record<Kind, number> = { location: 0, sensordata: 0, reeferdata: 0, gensetdata: 0 };
  let inFlightRecords = 0;
  let inFlight = 0;
  let sent = 0;
  let errors = 0;
  let skipped = 0;
  let posts = 0;
  let lastError: string | undefined;
  let pausedUntil = 0;
  const postMs: number[] = [];
  const window: [number, number][] = []; // (time, sent) samples for the rate over the last 5 s

  /** `seconds` of real time: the asset moves (or waits) on the clock, its reefer lives `timeScale` times faster. */
  const move = (v: Vehicle, seconds: number) => {
    if (v.dwell > 0) {
      v.dwell -= seconds;
      // Its stay over: at the end of a leg, the next one from there; at the start of one (a hub), off it goes.
      if (v.dwell <= 0 && v.km >= v.track.lengthKm) {
        v.track = new Track(nextLeg(v.track.leg.to, random));
        v.km = 0;
        v.cruiseKmh = cruise(v.track.leg, random);
        v.speedKmh = v.cruiseKmh;
      }
    } else {
      // The speed drifts about the cruise (back to it over about a minute, a km/h or two either way).
      v.speedKmh += (v.cruiseKmh - v.speedKmh) * Math.min(1, seconds / 60) + (random() - 0.5) * Math.sqrt(seconds);
      v.km += (v.speedKmh * seconds) / 3600;
      if (v.km >= v.track.lengthKm) {
        v.km = v.track.lengthKm;
        v.dwell = (1 + random() * 5) * 3600; // 1-6 h in port or at the depot
      }
    }
    if (v.kind === 'reefer') {
      const simSeconds = seconds * o.timeScale;
      for (const k of ['excursion', 'powerOff', 'alarm', 'defrost', 'pti'] as const) v[k] = Math.max(0, v[k] - simSeconds);
      // Rare trouble, in simulated time: about once a day each per reefer.
      const chance = simSeconds / 86400;
      if (random() < chance) v.excursion = (20 + random() * 90) * 60;
      if (random() < chance) v.powerOff = (10 + random() * 50) * 60;
      if (random() < chance) v.alarm = (5 + random() * 60) * 60;
      if (random() < chance * 4 && !v.switchedOff) v.defrost = 30 * 60;
      // Towards the set point with a time constant of half an hour (simulated); without power,
      // towards the warm outside. A unit in cycle mode swings more about its set point.
      const target = v.excursion > 0 || v.powerOff > 0 || v.switchedOff ? v.setpoint + 9 : v.setpoint;
      const swing = v.mode === 'cycle' ? 0.6 : 0.2;
      v.supplyAir += (target - v.supplyAir) * Math.min(1, simSeconds / 1800) + (random() - 0.5) * swing;
      if (v.humiditySetpoint != null) v.humidity += (v.humiditySetpoint - v.humidity) * Math.min(1, simSeconds / 1800);
    }
  };

  /** One asset's records: its position, and its sensor or reefer (and genset, on the road) data. */
  const visit = (v: Vehicle, whenCreated: string) => {
    v.visits++;
    const moving = v.dwell <= 0;
    const p = v.track.at(v.km);
    const out = v.outbox ?? queues;
    out.location.push({
      assetId: v.id,
      whenCreated,
      latitude: round(p.lat, 6),
      longitude: round(p.lon, 6),
      heading: round(p.heading, 1),
      // The speed it moves at: the positions' distances over their times agree with it.
      speed: moving ? round(v.speedKmh, 1) : 0,
    });
    if (v.kind === 'container') {
      out.sensordata.push({
        assetId: v.id,
        whenCreated,
        sensorId: `${v.name}-T1`,
        type: 'TEMPERATURE',
        value: round(22 + (random() - 0.5) * 6, 2),
      });
      return 2;
    }
    const powerOn = v.powerOff <= 0 && !v.switchedOff;
    out.reeferdata.push({
      assetId: v.id,
      whenCreated,
      reeferClass: 'SC',
      data: {
        cargo: {
          sensors: {
            supplyAirTemperature: round(v.supplyAir, 2),
            returnAirTemperature: round(v.supplyAir + 1.2 + random() * 0.4, 2),
            ambientTemperature: round(18 + random() * 12, 1),
            humidity: round(v.humidity - 5 + random() * 10, 1),
          },
        },
        temperatureSetpoint: v.setpoint,
        ...(v.humiditySetpoint == null ? {} : { humiditySetpoint: v.humiditySetpoint }),
        mode: v.mode,
        pti: v.pti > 0,
        hardware: {
          sensors: {
            batteryVoltage: round(powerOn ? 13.2 + random() * 0.4 : 12.1 - random() * 0.4, 2),
            compressorTemperature: round(powerOn ? 55 + random() * 10 : 20, 1),
            evaporatorFanLevel: powerOn ? 'HIGH' : 'OFF',
          },
        },
        powerOn,
        defrost: v.defrost > 0,
        alarms: v.alarm > 0 ? ['AL20'] : [],
        controlModule: { deviceId: `CM-${v.name}`, serial: `S${v.name.slice(-5)}`, firmwareVersion: '3.4.1', configuration: 'standard' },
      },
    });
    if (v.track.leg.mode === 'road' && moving && v.visits % 3 === 0) {
      out.gensetdata.push({
        assetId: v.id,
        whenCreated,
        gensetType: 'UG15',
        data: { engineRpm: 1800, fuelLevel: round(40 + random() * 60, 1), engineCoolantTemperature: round(82 + random() * 6, 1) },
      });
      return 3;
    }
    return 2;
  };

  const post = async (kind: Kind, items: object[]) => {
    inFlight++;
    inFlightRecords += items.length;
    const t0 = performance.now();
    try {
      const r = await api.call('POST', PATHS[kind], JSON.stringify(items));
      postMs.push(performance.now() - t0);
      posts++;
      if (r.status === 201) {
        sent += items.length;
        byType[kind] += items.length;
        return;
      }
      errors++;
      lastError = `${PATHS[kind]}: ${r.status} ${r.body?.message ?? ''}`.trim();
      // Busy or limited: keep the records and try again later; anything else is a bug to report.
      if (r.status === 429 || r.status >= 500) {
        queues[kind].unshift(...items);
        pausedUntil = Date.now() + (r.retryAfter ?? 1) * 1000;
      }
    } catch (e) {
      errors++;
      lastError = `${PATHS[kind]}: ${(e as Error).message}`;
      queues[kind].unshift(...items);
      pausedUntil = Date.now() + 1000;
    } finally {
      inFlight--;
      inFlightRecords -= items.length;
    }
  };

  // An MQTT device's records: one message per type (at most 1000 records, as a REST bulk), one
  // round at a time per device, counted when the broker acknowledges them (PUBACK). While the
  // broker is away the client holds them, and the device's outbox grows until the backlog's cap.
  const publishing = new Set<MqttDevice>();
  const publish = async (v: Vehicle) => {
    const device = v.device!;
    publishing.add(device);
    const batch = (Object.keys(v.outbox!) as Kind[])
      .map((kind) => [kind, v.outbox![kind].splice(0, 1000)] as const)
      .filter(([, r]) => r.length);
    const n = batch.reduce((sum, [, r]) => sum + r.length, 0);
    inFlightRecords += n;
    try {
      await Promise.all(
        batch.map(async ([kind, records]) => {
          try {
            await device.publish(kind, records);
            sent += records.length;
            byType[kind] += records.length;
          } catch (e) {
            errors++;
            lastError = `MQTT ${kind} of ${v.name}: ${(e as Error).message}`;
            v.outbox![kind].unshift(...records);
          }
        }),
      );
    } finally {
      inFlightRecords -= n;
      publishing.delete(device);
    }
  };

  const flush = () => {
    for (const v of vehicles) if (v.device && !publishing.has(v.device)) void publish(v);
    if (Date.now() < pausedUntil) return;
    for (const kind of Object.keys(queues) as Kind[]) {
      while (queues[kind].length && inFlight < 4) void post(kind, queues[kind].splice(0, 1000));
    }
  };

  // The REST device side, one round at a time; a failed round is reported and the next tries again.
  let polling = false;
  let lastPoll = 0;
  const pollCommands = () => {
    if (polling || !restReefers.length) return;
    polling = true;
    lastPoll = performance.now();
    pollRestCommands(api, restReefers, obeyFor, obeyed)
      .catch((e: Error) => {
        lastError = `commands: ${e.message}`;
      })
      .finally(() => {
        polling = false;
      });
  };

  const outboxes = () => vehicles.reduce((n, v) => n + (v.outbox ? Object.values(v.outbox).reduce((m, q) => m + q.length, 0) : 0), 0);
  const backlog = () => Object.values(queues).reduce((n, q) => n + q.length, 0) + outboxes() + inFlightRecords;
  const started = performance.now();
  const progress = (): Progress => {
    const now = performance.now();
    window.push([now, sent]);
    while (window.length > 1 && now - window[0]![0] > 5000) window.shift();
    const [t0, s0] = window[0]!;
    return {
      seconds: round((now - started) / 1000, 1),
      sent,
      perSecond: now > t0 ? Math.round(((sent - s0) * 1000) / (now - t0)) : 0,
      errors,
      backlog: backlog(),
      skipped,
      ...(lastError ? { lastError } : {}),
    };
  };

  // The loop: every tick moves the fleet, makes the tick's share of records (round robin over the
  // assets), and posts what is queued; progress once a second.
  const TICK_MS = 100;
  let cursor = 0;
  let budget = 0;
  let lastTick = performance.now();
  let lastFlush = 0;
  let lastProgress = 0;
  const cap = Math.max(5000, o.rate * 10);
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      const now = performance.now();
      const dt = (now - lastTick) / 1000;
      lastTick = now;
      const over = o.durationSeconds > 0 && now - started >= o.durationSeconds * 1000;
      if (o.signal?.aborted || over) {
        clearInterval(timer);
        resolve();
        return;
      }
      for (const v of vehicles) move(v, dt);
      budget = Math.min(budget + o.rate * dt, o.rate); // never more than a second's worth at once
      if (backlog() > cap) {
        skipped++;
        budget = 0;
      }
      const whenCreated = new Date().toISOString();
      while (budget >= 1 && vehicles.length) {
        budget -= visit(vehicles[cursor % vehicles.length]!, whenCreated);
        cursor++;
      }
      if (now - lastFlush >= o.flushMs) {
        lastFlush = now;
        flush();
      }
      if (now - lastPoll >= o.commandPollMs) pollCommands();
      if (now - lastProgress >= 1000) {
        lastProgress = now;
        o.onProgress?.(progress());
      }
    }, TICK_MS);
  });

  // Stop: post what is queued and wait for the posts in flight and a round of commands (a bounded
  // wait); then the MQTT devices leave (their sessions stay with the broker).
  const deadline = Date.now() + 30_000;
  while ((backlog() > 0 || inFlight > 0 || polling) && Date.now() < deadline) {
    pausedUntil = Math.min(pausedUntil, Date.now());
    flush();
    await new Promise((r) => setTimeout(r, 100));
  }
  await Promise.all(devices.map((d) => d.end()));
  postMs.sort((a, b) => a - b);
  const pct = (p: number) => (postMs.length ? round(postMs[Math.min(postMs.length - 1, Math.floor((p / 100) * postMs.length))]!, 1) : 0);
  const last = progress();
  return {
    ...last,
    perSecond: last.seconds > 0 ? Math.round(sent / last.seconds) : 0,
    byType,
    assets: vehicles.length,
    ownerIds,
    assetIds: vehicles.map((v) => v.id),
    posts,
    postP50Ms: pct(50),
    postP99Ms: pct(99),
    commands: { acknowledged, failed: failedCommands },
    mqttDevices: devices.map((d) => ({ assetId: d.assetId, uniqueId: d.uniqueId })),
  };
}
