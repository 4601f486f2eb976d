// The fleet simulator (`npm run simulate`, and the demo): assets of one or more owners, dry
// containers and reefers with gensets, sailing the lanes of routes.ts and driving road legs inland,
// reporting through the public REST API with a real token, in bulk. Reefers carry cargo and
// hardware sensors, and now and then a temperature excursion, an alarm or a power loss.
//
// Movement runs `timeScale` times faster than the clock (a crossing takes hours, not weeks), while
// every record carries the real time it was made, so the service judges it as live data.
import { performance } from 'node:perf_hooks';
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
  /** Simulated seconds of movement per real second. */
  timeScale: number;
  /** Asset and owner name prefix, so a second run finds the first run's fleet. */
  prefix: string;
  seed: number;
  /** How often the queued records are posted (one bulk per type), ms. */
  flushMs: number;
  signal?: AbortSignal;
  onProgress?: (p: Progress) => void;
  /** Called once the fleet exists, before the first record (the demo adds specifications here). */
  onFleet?: (fleet: FleetAsset[]) => Promise<void>;
}

/** What the simulator tells about each asset it drives. */
export interface FleetAsset {
  id: string;
  name: string;
  ownerId: string;
  kind: 'container' | 'reefer';
  /** Reefers: the supply air set point, -18 (frozen) or 4 (chilled), degrees C. */
  setpoint: number;
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

class Client {
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

interface Vehicle {
  id: string;
  ownerId: string;
  name: string;
  kind: 'container' | 'reefer';
  track: Track;
  km: number;
  speedKmh: number;
  /** Simulated seconds left at a port or depot before the next leg. */
  dwell: number;
  visits: number;
  // Reefer state.
  setpoint: number;
  supplyAir: number;
  /** Simulated seconds left of a temperature excursion (the unit struggling). */
  excursion: number;
  powerOff: number;
  alarm: number;
  defrost: number;
}

const START_PORTS: Place[] = ['shanghai', 'rotterdam', 'losAngeles', 'newYork', 'singapore', 'santos', 'busan', 'hamburg', 'durban'];

function nextLeg(at: Place, random: () => number): Leg {
  const options = legsFrom(at);
  const pool = options.length ? options : LEGS;
  return pool[Math.floor(random() * pool.length)]!;
}

const round = (n: number, d: number) => Math.round(n * 10 ** d) / 10 ** d;

/** Runs the simulator until its duration ends or the signal aborts; resolves with the summary. */
export async function simulate(options: Partial<SimOptions> & Pick<SimOptions, 'url' | 'auth'>): Promise<Summary> {
  const o: SimOptions = { ...DEFAULTS, ...options };
  const random = rng(o.seed);
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
    const start = START_PORTS[n % START_PORTS.length]!;
    const track = new Track(nextLeg(start, random));
    const frozen = random() < 0.5;
    vehicles.push({
      id,
      ownerId,
      name,
      kind,
      track,
      km: random() * track.lengthKm, // spread along the lanes from the start
      speedKmh: track.leg.mode === 'sea' ? 30 + random() * 12 : 60 + random() * 25,
      dwell: 0,
      visits: 0,
      setpoint: frozen ? -18 : 4,
      supplyAir: frozen ? -18 : 4,
      excursion: 0,
      powerOff: 0,
      alarm: 0,
      defrost: 0,
    });
  }

  await o.onFleet?.(vehicles.map((v) => ({ id: v.id, name: v.name, ownerId: v.ownerId, kind: v.kind, setpoint: v.setpoint })));

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

  const move = (v: Vehicle, simSeconds: number) => {
    if (v.dwell > 0) {
      v.dwell -= simSeconds;
      if (v.dwell <= 0) {
        v.track = new Track(nextLeg(v.track.leg.to, random));
        v.km = 0;
        v.speedKmh = v.track.leg.mode === 'sea' ? 30 + random() * 12 : 60 + random() * 25;
      }
      return;
    }
    v.km += (v.speedKmh * simSeconds) / 3600;
    if (v.km >= v.track.lengthKm) {
      v.km = v.track.lengthKm;
      v.dwell = (1 + random() * 5) * 3600; // 1-6 h in port or at the depot
    }
    if (v.kind === 'reefer') {
      for (const k of ['excursion', 'powerOff', 'alarm', 'defrost'] as const) v[k] = Math.max(0, v[k] - simSeconds);
      // Rare trouble, in simulated time: about once a day each per reefer.
      const chance = simSeconds / 86400;
      if (random() < chance) v.excursion = (20 + random() * 90) * 60;
      if (random() < chance) v.powerOff = (10 + random() * 50) * 60;
      if (random() < chance) v.alarm = (5 + random() * 60) * 60;
      if (random() < chance * 4) v.defrost = 30 * 60;
      const target = v.excursion > 0 || v.powerOff > 0 ? v.setpoint + 9 : v.setpoint;
      v.supplyAir += (target - v.supplyAir) * Math.min(1, simSeconds / 1800) + (random() - 0.5) * 0.2;
    }
  };

  /** One asset's records: its position, and its sensor or reefer (and genset, on the road) data. */
  const visit = (v: Vehicle, whenCreated: string) => {
    v.visits++;
    const moving = v.dwell <= 0;
    const p = v.track.at(v.km);
    queues.location.push({
      assetId: v.id,
      whenCreated,
      latitude: round(p.lat, 6),
      longitude: round(p.lon, 6),
      heading: round(p.heading, 1),
      speed: moving ? round(v.speedKmh + (random() - 0.5) * 4, 1) : 0,
    });
    if (v.kind === 'container') {
      queues.sensordata.push({
        assetId: v.id,
        whenCreated,
        sensorId: `${v.name}-T1`,
        type: 'TEMPERATURE',
        value: round(22 + (random() - 0.5) * 6, 2),
      });
      return 2;
    }
    const powerOn = v.powerOff <= 0;
    queues.reeferdata.push({
      assetId: v.id,
      whenCreated,
      reeferClass: 'SC',
      data: {
        cargo: {
          sensors: {
            supplyAirTemperature: round(v.supplyAir, 2),
            returnAirTemperature: round(v.supplyAir + 1.2 + random() * 0.4, 2),
            ambientTemperature: round(18 + random() * 12, 1),
            humidity: round(80 + random() * 10, 1),
          },
        },
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
      queues.gensetdata.push({
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

  const flush = () => {
    if (Date.now() < pausedUntil) return;
    for (const kind of Object.keys(queues) as Kind[]) {
      while (queues[kind].length && inFlight < 4) void post(kind, queues[kind].splice(0, 1000));
    }
  };

  const backlog = () => Object.values(queues).reduce((n, q) => n + q.length, 0) + inFlightRecords;
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
      for (const v of vehicles) move(v, dt * o.timeScale);
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
      if (now - lastProgress >= 1000) {
        lastProgress = now;
        o.onProgress?.(progress());
      }
    }, TICK_MS);
  });

  // Stop: post what is queued and wait for the posts in flight (a bounded wait).
  const deadline = Date.now() + 30_000;
  while ((backlog() > 0 || inFlight > 0) && Date.now() < deadline) {
    pausedUntil = Math.min(pausedUntil, Date.now());
    flush();
    await new Promise((r) => setTimeout(r, 100));
  }
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
  };
}
