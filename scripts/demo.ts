// `npm run demo`: the whole service on the embedded database, with something to look at. It starts
// the service (its own data folder, ./data-demo, made afresh each run; never ./data), a small
// webhook receiver on 127.0.0.1, an owner with a user, an API key and a webhook integration to that
// receiver, then the fleet simulator with a specification on every reefer, and prints where to
// look. Alerts are also mailed: a local SMTP sink (smtp-server) takes them and writes each as an
// .eml file in the data folder's mail/ (open one with any mail program), and the first one's
// subject is printed. The loopback allowance the receiver needs (PUSH_ALLOW_HTTP, PUSH_ALLOWED_NETWORKS) exists
// only in this process's configuration. Ctrl-C stops everything and closes the database cleanly.
//
// Commands: the specifications opt into the set point rule, and the simulator's first reefer runs
// at 4 °C with frozen cargo. The demo prints the SETPOINT_MISMATCH alert when it is raised, sends
// the specification's set point as an operator would (the dashboard's one-click button), and
// prints the command's answer, the reefer reporting the new set point (the alert cleared) and its
// supply air back in range. The reefers take commands through the REST device side or, with a
// broker (DEMO_MQTT_URL), five of them as MQTT devices on it (the service's MQTT ingest).
//
// Zones and a device: a port, a depot and a customer's site where the simulator's routes meet,
// with assets starting at each, and an OsmAnd device (a phone with the Traccar Client app) on a van.
//
// DEMO_PORT (8080; 0 = any free port), DEMO_DATA_DIR (./data-demo), DEMO_ASSETS (30), DEMO_RATE
// (100 records/s), DEMO_MQTT_URL (none) and DEMO_MQTT_TOPIC_PREFIX (devices). A DEMO_PORT in use
// is one line naming it, said before the data folder is wiped.
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { SMTPServer } from 'smtp-server';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { isAddressInUse, portInUse, portInUseLine } from '../src/http/port.js';
import { PLACES, type Place } from '../sim/routes.js';
import { type FleetAsset, type Progress, simulate } from '../sim/simulator.js';

const started = performance.now();
const seconds = () => ((performance.now() - started) / 1000).toFixed(1);
const env = process.env;
const port = Number(env.DEMO_PORT ?? 8080);
const dataDir = path.resolve(env.DEMO_DATA_DIR ?? 'data-demo');
const assets = Number(env.DEMO_ASSETS ?? 30);
const rate = Number(env.DEMO_RATE ?? 100);
const mqttUrl = env.DEMO_MQTT_URL || undefined;
const mqttPrefix = env.DEMO_MQTT_TOPIC_PREFIX || 'devices';
if (path.resolve('data') === dataDir) throw new Error('DEMO_DATA_DIR must not be ./data: the demo never writes into your data');
// A port in use is one line naming it, before the folder is wiped or anything started.
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`DEMO_PORT must be a port number (0 picks a free one), not ${JSON.stringify(env.DEMO_PORT)}.`);
  process.exit(2);
}
const portTaken = (): never => {
  console.error(portInUseLine('127.0.0.1', port, 'DEMO_PORT'));
  process.exit(1);
};
if (await portInUse('127.0.0.1', port)) portTaken();

// A fresh folder each run: the demo's operator and fleet are made anew and its passwords are known.
fs.rmSync(dataDir, { recursive: true, force: true });
// The SMTP sink: every message it accepts becomes <data folder>/mail/<n>.eml.
const mailDir = path.join(dataDir, 'mail');
fs.mkdirSync(mailDir, { recursive: true });
let mails = 0;
const sink = new SMTPServer({
  authOptional: true,
  disabledCommands: ['STARTTLS', 'AUTH'],
  logger: false,
  onData(stream, _session, cb) {
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => {
      const raw = Buffer.concat(chunks);
      const file = path.join(mailDir, `${String(++mails).padStart(4, '0')}.eml`);
      fs.writeFileSync(file, raw);
      if (mails === 1) {
        const subject = /^Subject: (.*(?:\r?\n[ \t].*)*)/im.exec(raw.toString('utf8'))?.[1]?.replace(/\r?\n[ \t]/g, ' ') ?? '';
        console.log(`\nFirst alert e-mail received ${seconds()} s after the demo started: ${subject}\n  (saved as ${file})`);
      }
      cb();
    });
  },
});
await new Promise<void>((r) => sink.listen(0, '127.0.0.1', r));
const smtpUrl = `smtp://127.0.0.1:${(sink.server.address() as AddressInfo).port}`;

const OPERATOR = { clientId: 'tracking-cli', clientSecret: 'demo-client-secret', username: 'operator', password: 'demo-operator-password' };
const cfg = loadConfig({
  DATA_DIR: dataDir,
  PORT: String(port),
  HOST: '127.0.0.1',
  LOG_LEVEL: 'warn',
  BOOTSTRAP_CLIENT_ID: OPERATOR.clientId,
  BOOTSTRAP_CLIENT_SECRET: OPERATOR.clientSecret,
  BOOTSTRAP_USERNAME: OPERATOR.username,
  BOOTSTRAP_PASSWORD: OPERATOR.password,
  // Only here: the local receiver is plain http on loopback.
  PUSH_ALLOW_HTTP: 'true',
  PUSH_ALLOWED_NETWORKS: '127.0.0.1/32',
  // The simulator posts several bulks a second for as long as the demo runs.
  RATE_LIMIT_MAX: '10000000',
  RATE_LIMIT_CONCURRENT: '100',
  TOKEN_LIFE_SECONDS: '86400',
  DELIVERY_POLL_MS: '250',
  // Only here: alert e-mail goes to the local sink.
  SMTP_URL: smtpUrl,
  SMTP_FROM: 'Demo alerts <alerts@demo-shipping.example>',
  // With a broker: the MQTT ingest, and with it the commands' downlink to MQTT devices.
  ...(mqttUrl ? { INGEST_MQTT_URL: mqttUrl, INGEST_MQTT_TOPIC_PREFIX: mqttPrefix } : {}),
});

// The webhook receiver: answers 200 with a receipt, counts what arrives.
let delivered = 0;
let requests = 0;
let firstDeliveryAt: string | undefined;
const receiver = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    requests++;
    try {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      delivered += Array.isArray(body) ? body.length : 1;
    } catch {
      /* counted as a request all the same */
    }
    if (!firstDeliveryAt) {
      firstDeliveryAt = seconds();
      console.log(`\nFirst webhook delivery received ${firstDeliveryAt} s after the demo started.`);
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ success: true, id: `rcpt_${requests}` }));
  });
});
await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
const hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;

console.log(`Starting the service on the embedded database in ${dataDir} ...`);
const app = await buildApp(cfg, { logger: { level: 'warn' } });
await app.listen({ port, host: '127.0.0.1' }).catch(async (e: unknown) => {
  if (!isAddressInUse(e)) throw e;
  // Taken since the check: the database closed all the same.
  await app.close().catch(() => undefined);
  portTaken();
});
const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
cfg.publicUrl = base;

const tokenRes = await fetch(`${base}/auth/realms/${cfg.AUTH_REALM}/protocol/openid-connect/token`, {
  method: 'POST',
  headers: {
    authorization: `Basic ${Buffer.from(`${OPERATOR.clientId}:${OPERATOR.clientSecret}`).toString('base64')}`,
    'content-type': 'application/x-www-form-urlencoded',
  },
  body: `grant_type=password&username=${OPERATOR.username}&password=${OPERATOR.password}`,
});
const adminToken = ((await tokenRes.json()) as { access_token: string }).access_token;
const api = async (method: string, p: string, body?: unknown, token = adminToken) => {
  const r = await fetch(`${base}/api/v1${p}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await r.text();
  if (!r.ok) throw new Error(`${method} ${p}: ${r.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
};

const owner = await api('POST', '/owners', { name: 'Demo Shipping', note: 'Made by npm run demo' });
const user = { username: 'demo', password: `demo-${crypto.randomBytes(4).toString('hex')}` };
await api('POST', '/users', { ...user, ownerId: owner.id, scopes: ['read', 'write'] });
const key = await api('POST', '/api-keys', { name: 'demo-simulator', ownerId: owner.id, scopes: ['read', 'write'] });
const integration = await api('POST', '/integrations', {
  name: 'Demo receiver',
  channel: 'webhook',
  ownerIds: [owner.id],
  destination: hookUrl,
  webhook: { mode: 'batch', batchSize: 200, injectEventId: true },
});
// Made by the operator: its recipient is trusted (a customer's would confirm first).
await api('POST', '/integrations', {
  name: 'Demo alert e-mail',
  channel: 'email',
  ownerIds: [owner.id],
  email: { to: ['ops@demo-shipping.example'], minIntervalMinutes: 15 },
});

// Three zones where the simulator's routes meet (sim/routes.ts's places): a port, a depot and a
// customer's site. The simulator starts two assets at each (one standing there, one arriving within
// minutes: its `hubs`), so the zones, their events and the zone report have visits from the start.
const HUBS: { place: Place; name: string; type: string; shape: (lat: number, lon: number) => object }[] = [
  {
    place: 'rotterdam',
    name: 'Port of Rotterdam',
    type: 'port',
    shape: (lat, lon) => ({ circle: { latitude: lat, longitude: lon, radiusMeters: 2500 } }),
  },
  {
    place: 'duisburg',
    name: 'Depot Duisburg',
    type: 'depot',
    // A square of about 1.3 km, as a depot's fence would be drawn.
    shape: (lat, lon) => {
      const [dLat, dLon] = [0.006, 0.009];
      const ring = [
        [lon - dLon, lat - dLat],
        [lon + dLon, lat - dLat],
        [lon + dLon, lat + dLat],
        [lon - dLon, lat + dLat],
        [lon - dLon, lat - dLat],
      ];
      return { geometry: { type: 'Polygon', coordinates: [ring] } };
    },
  },
  {
    place: 'frankfurt',
    name: 'Customer DC Frankfurt',
    type: 'customer',
    shape: (lat, lon) => ({ circle: { latitude: lat, longitude: lon, radiusMeters: 600 } }),
  },
];
for (const h of HUBS) {
  const [lat, lon] = PLACES[h.place];
  await api('POST', '/zones', { name: h.name, type: h.type, note: 'Made by npm run demo', ...h.shape(lat, lon) }, key.key);
}

// A van tracked by its driver's phone: an OsmAnd device (the Traccar Client app), its generated id
// its only credential. Its first position is sent here, as the app would, at the customer's site.
const van = await api(
  'POST',
  '/assets',
  { name: 'DEMO-VAN-1', ownerId: owner.id, note: "Tracked by the driver's phone (Traccar Client)" },
  key.key,
);
const phone = await api('POST', '/devices', { assetId: van.id, protocol: 'osmand' }, key.key);
const osmandUrl = `${base}/ingest/osmand`;
{
  const [lat, lon] = PLACES.frankfurt;
  const q = new URLSearchParams({ id: phone.uniqueId, lat: String(lat), lon: String(lon), speed: '0', batt: '87' });
  const r = await fetch(`${osmandUrl}?${q}`);
  if (!r.ok) throw new Error(`GET /ingest/osmand: ${r.status} ${await r.text()}`);
}

// Every reefer gets a specification around its cargo's set point: excursions of the simulated
// units alert, and so does a unit reporting another set point for a minute (of record time, which
// is wall-clock time: the simulator stamps its records with the real time).
const specify = async (fleet: FleetAsset[]) => {
  for (const a of fleet.filter((x) => x.kind === 'reefer')) {
    await api(
      'POST',
      '/specifications',
      {
        assetId: a.id,
        type: 'REEFER',
        name: a.setpoint < 0 ? 'Frozen cargo' : 'Chilled cargo',
        settings: { cargo: { settings: { temperatureSetpoint: a.setpoint } } },
        ranges: { cargo: { sensors: { supplyAirTemperature: [a.setpoint - 3, a.setpoint + 3, 0, 5] } } },
        notification: {
          controller: {
            alarm: { default: { duration: 0, frequency: 10 } },
            power: { default: { duration: 1, frequency: 10 } },
            setpoint: { tolerance: 0.5, default: { duration: 1, frequency: 0 } },
          },
        },
      },
      key.key,
    );
  }
};

const controller = new AbortController();
let stopping = false;
const stop = () => {
  if (stopping) return;
  stopping = true;
  console.log('\nStopping: the simulator posts what it has, then the service closes its database.');
  controller.abort();
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);

/** Asks `fn` every second until it answers something, or the demo stops (then undefined). */
async function until<T>(fn: () => Promise<T | undefined>): Promise<T | undefined> {
  while (!controller.signal.aborted) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 1000));
  }
  return undefined;
}

/**
 * The reefer started at the wrong set point, as an operator meets it: the SETPOINT_MISMATCH alert,
 * the specification's set point sent (what the dashboard's one-click button sends), the command's
 * answer, the new set point reported (which clears the alert), the supply air back in range.
 */
async function correctSetpoint(a: FleetAsset): Promise<void> {
  const get = (p: string) => api('GET', p, undefined, key.key);
  const latest = async () => ((await get(`/reefer-data?assetId=${a.id}&limit=1`)) as any[])[0];
  const alert = await until(async () =>
    ((await get(`/events?assetId=${a.id}&severity=ALERT&limit=50`)) as any[]).find((e) => e.subject.startsWith('SETPOINT_MISMATCH: ')),
  );
  if (!alert) return;
  console.log(`\nSet-point mismatch raised ${seconds()} s after the demo started, on ${a.name}: ${alert.subject}`);
  const sent = await api('POST', '/commands', { assetId: a.id, type: 'SET_TEMPERATURE', parameters: { value: a.setpoint } }, key.key);
  console.log(
    `  Sent SET_TEMPERATURE ${a.setpoint} °C to ${a.name} (command ${sent.id}), as the dashboard's "Send the specification's set point" does.`,
  );
  const done = await until(async () => {
    const c = await get(`/commands/${sent.id}`);
    return c.status === 'PENDING' || c.status === 'SENT' ? undefined : c;
  });
  if (!done) return;
  const via = a.mqttUniqueId ? `MQTT (device ${a.mqttUniqueId})` : 'the REST device side';
  console.log(`  Command ${sent.id} ${done.status} ${seconds()} s after the demo started, through ${via}.`);
  if (done.status !== 'ACKNOWLEDGED') return;
  const reported = await until(async () => {
    const r = await latest();
    return r?.data?.temperatureSetpoint === a.setpoint ? r : undefined;
  });
  if (!reported) return;
  console.log(
    `  ${a.name} reports set point ${a.setpoint} °C ${seconds()} s after the demo started (supply air ${reported.data.cargo.sensors.supplyAirTemperature} °C).`,
  );
  const cleared = await until(async () =>
    ((await get(`/events?assetId=${a.id}&severity=INFO&limit=50`)) as any[]).find((e) => e.clearsEventId === alert.id),
  );
  if (!cleared) return;
  console.log(`  Mismatch cleared ${seconds()} s after the demo started: ${cleared.subject}`);
  const cold = await until(async () => {
    const t = (await latest())?.data?.cargo?.sensors?.supplyAirTemperature;
    return typeof t === 'number' && Math.abs(t - a.setpoint) <= 3 ? t : undefined;
  });
  if (cold !== undefined) console.log(`  ${a.name}'s supply air back in its range ${seconds()} s after the demo started: ${cold} °C.`);
}
let correcting: Promise<void> = Promise.resolve();

let lastLine = 0;
const onProgress = (p: Progress) => {
  if (p.seconds - lastLine < 10) return;
  lastLine = p.seconds;
  console.log(
    `  ${seconds()} s: ${p.sent.toLocaleString('en-US')} records stored (${p.perSecond}/s), ${delivered.toLocaleString('en-US')} delivered to the receiver${p.errors ? `, ${p.errors} errors (${p.lastError})` : ''}`,
  );
};

const run = simulate({
  url: base,
  auth: { apiKey: key.key },
  assets,
  rate,
  prefix: 'DEMO',
  hubs: HUBS.map((h) => h.place),
  ...(mqttUrl ? { mqtt: { url: mqttUrl, devices: 5, topicPrefix: mqttPrefix } } : {}),
  signal: controller.signal,
  onProgress,
  onCommand: (c) =>
    console.log(
      `  Simulator: ${c.name} ${c.status === 'ACKNOWLEDGED' ? 'obeyed' : 'refused'} ${c.type}${typeof c.parameters?.value === 'number' ? ` ${c.parameters.value}` : ''}${c.message ? ` (${c.message})` : ''}, via ${c.via === 'mqtt' ? 'MQTT' : 'REST'}.`,
    ),
  onFleet: async (fleet) => {
    await specify(fleet);
    const wrong = fleet.find((a) => a.kind === 'reefer' && a.unitSetpoint !== a.setpoint);
    if (wrong) correcting = correctSetpoint(wrong).catch((e: Error) => console.error(`set point: ${e.message}`));
    const mqttDevices = fleet.filter((a) => a.mqttUniqueId).length;
    const q = (s: string) => `'${s}'`;
    console.log(`
Ready after ${seconds()} s: ${fleet.length} simulated assets of "Demo Shipping", ${rate} records/s, pushed to a local webhook.

  Dashboard:     ${base}/dashboard  (sign in as the demo user or the operator, or paste the API key)
  Alert e-mail:  ${mailDir}  (one .eml file per message, to ops@demo-shipping.example)
  API docs:      ${base}/docs
  Operator:      ${OPERATOR.username} / ${OPERATOR.password} (client ${OPERATOR.clientId}, secret ${OPERATOR.clientSecret})
  Demo user:     ${user.username} / ${user.password} (owner Demo Shipping, read and write)
  API key:       ${key.key}
  Zones:         ${HUBS.map((h) => h.name).join(', ')}: two assets start at each (one there, one arriving)
  OsmAnd device: ${phone.uniqueId} on ${van.name} (a phone with the Traccar Client app): its server URL is
                 ${osmandUrl} and its device identifier that id (a phone needs an address of this machine it can reach)
  Commands:      ${
    mqttDevices
      ? `${mqttDevices} reefers are MQTT devices on ${mqttUrl} (${mqttPrefix}/<uniqueId>/commands), the others poll the REST device side.`
      : 'the reefers poll the REST device side (GET /api/v1/commands?status=PENDING every 3 s).'
  }${
    wrong
      ? `
                 ${wrong.name} carries frozen cargo (${wrong.setpoint} °C) but runs at ${wrong.unitSetpoint} °C: its SETPOINT_MISMATCH
                 alert comes after a minute, and the demo sends it the specification's set point.`
      : ''
  }

Try:
  curl -s -H ${q(`Authorization: Bearer ${key.key}`)} ${q(`${base}/api/v1/locations/latest?limit=5`)}
  curl -s -H ${q(`Authorization: Bearer ${key.key}`)} ${q(`${base}/api/v1/notifications?limit=5`)}
  curl -s -u ${q(`${OPERATOR.clientId}:${OPERATOR.clientSecret}`)} -d ${q(`grant_type=password&username=${OPERATOR.username}&password=${OPERATOR.password}`)} ${q(`${base}/auth/realms/${cfg.AUTH_REALM}/protocol/openid-connect/token`)}
                 (an operator token: with it, GET /api/v1/integrations/${integration.id} shows the receiver's delivery stats)

Ctrl-C stops the demo.
`);
  },
});

const summary = await run.catch((e: Error) => {
  console.error(`simulator: ${e.message}`);
  return undefined;
});
await correcting;
const notifications = ((await api('GET', '/notifications?limit=1000', undefined, key.key).catch(() => [])) as unknown[]).length;
await app.close();
await new Promise((r) => receiver.close(r));
await new Promise((r) => sink.close(() => r(undefined)));
if (summary) {
  console.log(
    `Demo over after ${seconds()} s: ${summary.sent.toLocaleString('en-US')} records stored, ${delivered.toLocaleString('en-US')} delivered in ${requests} webhook requests (first after ${firstDeliveryAt ?? '-'} s), ${notifications} notifications, ${mails} e-mails. Data kept in ${dataDir} until the next demo.`,
  );
}
process.exit(summary ? 0 : 1);
