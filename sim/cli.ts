// `npm run simulate -- [options]`: the fleet simulator against a running service. Credentials
// from options or the environment: an API key (--api-key, TRACKING_API_KEY), a token (--token), or
// a password sign-in (--client-id, --client-secret, --username, --password; TRACKING_CLIENT_ID, ...).
// Progress on one updating line (one line every 5 s when the output is not a terminal), and a line
// for each command a reefer obeys or refuses; Ctrl-C stops it and prints the summary.
import { parseArgs } from 'node:util';
import type { Obeyed } from './devices.js';
import { type Auth, DEFAULTS, type Progress, simulate } from './simulator.js';

const HELP = `Usage: npm run simulate -- [options]

  --url URL             service base URL (TRACKING_URL, default http://127.0.0.1:8080)
  --api-key KEY         an API key with write (TRACKING_API_KEY)
  --token JWT           a bearer token
  --client-id ID --client-secret S --username U --password P
                        sign in with the password grant (TRACKING_CLIENT_ID, TRACKING_CLIENT_SECRET,
                        TRACKING_USERNAME, TRACKING_PASSWORD); renewed when it expires
  --assets N            assets, a third dry containers, the rest reefers (default ${DEFAULTS.assets})
  --owners N            owners to spread them over, made by name (needs admin; default: the credential's own)
  --rate N              records per second, all types (default ${DEFAULTS.rate})
  --duration S          stop after S seconds (default: until Ctrl-C)
  --time-scale X        how much faster a reefer's life runs: its temperatures, defrosts and trouble
                        (default ${DEFAULTS.timeScale}); assets move on the clock at the speeds they report
  --prefix P            asset and owner name prefix; a second run reuses the fleet (default ${DEFAULTS.prefix})
  --seed N              the same seed gives the same fleet and trips (default ${DEFAULTS.seed})
  --mqtt URL            the service's MQTT ingest broker (its INGEST_MQTT_URL): some reefers become
                        MQTT devices (registered with protocol mqtt), publish their records there and
                        take their commands from there
  --mqtt-devices N      how many reefers (the first ones) are MQTT devices (default 5)
  --mqtt-topic-prefix P the service's INGEST_MQTT_TOPIC_PREFIX (default devices)
  --mqtt-username U --mqtt-password P
                        the broker's credentials, if it asks for them

Reefers take commands (SET_TEMPERATURE, SET_HUMIDITY, SET_MODE, START_DEFROST, START_PTI at a depot,
POWER_ON, POWER_OFF, CLEAR_ALARMS; SET_CO2 and SET_O2 fail: no controlled atmosphere): the MQTT
devices from their commands topic, the others through the REST device side (GET /commands?status=PENDING
every 3 s, then PATCH to SENT and to ACKNOWLEDGED or FAILED). Each reports the set point it runs at
(data.temperatureSetpoint); the fleet's first reefer starts at 4 °C with frozen cargo (-18 °C), a
mismatch to correct with a SET_TEMPERATURE.

With the default limits (RATE_LIMIT_MAX 1000 requests an hour per credential) the service answers
429 after a while at high rates: the simulator then waits as told (Retry-After) and keeps the
records; raise RATE_LIMIT_MAX on the service for long runs.`;

const { values } = parseArgs({
  options: {
    url: { type: 'string' },
    'api-key': { type: 'string' },
    token: { type: 'string' },
    'client-id': { type: 'string' },
    'client-secret': { type: 'string' },
    username: { type: 'string' },
    password: { type: 'string' },
    assets: { type: 'string' },
    owners: { type: 'string' },
    rate: { type: 'string' },
    duration: { type: 'string' },
    'time-scale': { type: 'string' },
    prefix: { type: 'string' },
    seed: { type: 'string' },
    mqtt: { type: 'string' },
    'mqtt-devices': { type: 'string' },
    'mqtt-topic-prefix': { type: 'string' },
    'mqtt-username': { type: 'string' },
    'mqtt-password': { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (values.help) {
  console.log(HELP);
  process.exit(0);
}
const env = process.env;
const num = (name: string, raw: string | undefined, dflt: number, min = 0) => {
  if (raw === undefined) return dflt;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < min) {
    console.error(`--${name} must be a number >= ${min}`);
    process.exit(2);
  }
  return n;
};
const apiKey = values['api-key'] ?? env.TRACKING_API_KEY;
const clientId = values['client-id'] ?? env.TRACKING_CLIENT_ID;
const auth: Auth | undefined = values.token
  ? { token: values.token }
  : apiKey
    ? { apiKey }
    : clientId
      ? {
          clientId,
          clientSecret: values['client-secret'] ?? env.TRACKING_CLIENT_SECRET ?? '',
          username: values.username ?? env.TRACKING_USERNAME ?? '',
          password: values.password ?? env.TRACKING_PASSWORD ?? '',
        }
      : undefined;
if (!auth) {
  console.error('No credentials: give --api-key, --token or --client-id/--client-secret/--username/--password.\n');
  console.error(HELP);
  process.exit(2);
}

const controller = new AbortController();
process.on('SIGINT', () => controller.abort());
process.on('SIGTERM', () => controller.abort());
const tty = process.stderr.isTTY;
let lastLine = 0;
const line = (p: Progress) =>
  `${p.seconds.toFixed(0).padStart(5)} s  sent ${p.sent.toLocaleString('en-US')} (${p.perSecond}/s)  errors ${p.errors}  backlog ${p.backlog}` +
  `${p.skipped ? `  behind ${p.skipped} ticks` : ''}${p.lastError ? `  last error: ${p.lastError.slice(0, 80)}` : ''}`;
const onProgress = (p: Progress) => {
  if (tty) process.stderr.write(`\r\x1b[K${line(p)}`);
  else if (p.seconds - lastLine >= 5) {
    lastLine = p.seconds;
    console.error(line(p));
  }
};

const onCommand = (c: Obeyed & { name: string }) => {
  const p = c.parameters ?? {};
  const what = `${c.type}${typeof p.value === 'number' ? ` ${p.value}` : ''}${typeof p.mode === 'string' ? ` ${p.mode}` : ''}`;
  if (tty) process.stderr.write('\r\x1b[K');
  console.error(`${c.name}: ${what} ${c.status}${c.message ? ` (${c.message})` : ''} via ${c.via === 'mqtt' ? 'MQTT' : 'REST'}`);
};

const url = values.url ?? env.TRACKING_URL ?? 'http://127.0.0.1:8080';
try {
  const s = await simulate({
    url,
    auth,
    assets: num('assets', values.assets, DEFAULTS.assets, 1),
    owners: num('owners', values.owners, DEFAULTS.owners),
    rate: num('rate', values.rate, DEFAULTS.rate, 1),
    durationSeconds: num('duration', values.duration, 0),
    timeScale: num('time-scale', values['time-scale'], DEFAULTS.timeScale),
    prefix: values.prefix ?? DEFAULTS.prefix,
    seed: num('seed', values.seed, DEFAULTS.seed),
    ...(values.mqtt
      ? {
          mqtt: {
            url: values.mqtt,
            devices: num('mqtt-devices', values['mqtt-devices'], 5),
            topicPrefix: values['mqtt-topic-prefix'] ?? 'devices',
            ...(values['mqtt-username'] ? { username: values['mqtt-username'], password: values['mqtt-password'] ?? '' } : {}),
          },
        }
      : {}),
    signal: controller.signal,
    onProgress,
    onCommand,
  });
  if (tty) process.stderr.write('\n');
  console.log(
    `\nSimulated ${s.assets} assets of ${s.ownerIds.length} owner(s) for ${s.seconds} s: ${s.sent.toLocaleString('en-US')} records stored (${s.perSecond}/s)`,
  );
  console.log(
    `  locations ${s.byType.location}, sensor data ${s.byType.sensordata}, reefer data ${s.byType.reeferdata}, genset data ${s.byType.gensetdata}`,
  );
  console.log(`  ${s.posts} bulk posts, p50 ${s.postP50Ms} ms, p99 ${s.postP99Ms} ms; ${s.errors} errors; ${s.backlog} records not stored`);
  if (s.mqttDevices.length)
    console.log(`  ${s.mqttDevices.length} reefers as MQTT devices: ${s.mqttDevices.map((d) => d.uniqueId).join(', ')}`);
  console.log(`  commands: ${s.commands.acknowledged} acknowledged, ${s.commands.failed} failed`);
  if (s.lastError) console.log(`  last error: ${s.lastError}`);
  process.exit(s.backlog > 0 ? 1 : 0);
} catch (e) {
  console.error(`\nsimulator: ${(e as Error).message}`);
  process.exit(1);
}
