// `npm run simulate -- [options]`: the fleet simulator against a running service. Credentials
// from options or the environment: an API key (--api-key, TRACKING_API_KEY), a token (--token), or
// a password sign-in (--client-id, --client-secret, --username, --password; TRACKING_CLIENT_ID, ...).
// Progress on one updating line (one line every 5 s when the output is not a terminal); Ctrl-C
// stops it and prints the summary.
import { parseArgs } from 'node:util';
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
  --time-scale X        simulated seconds of movement per second (default ${DEFAULTS.timeScale})
  --prefix P            asset and owner name prefix; a second run reuses the fleet (default ${DEFAULTS.prefix})
  --seed N              the same seed gives the same fleet and trips (default ${DEFAULTS.seed})

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
    signal: controller.signal,
    onProgress,
  });
  if (tty) process.stderr.write('\n');
  console.log(
    `\nSimulated ${s.assets} assets of ${s.ownerIds.length} owner(s) for ${s.seconds} s: ${s.sent.toLocaleString('en-US')} records stored (${s.perSecond}/s)`,
  );
  console.log(
    `  locations ${s.byType.location}, sensor data ${s.byType.sensordata}, reefer data ${s.byType.reeferdata}, genset data ${s.byType.gensetdata}`,
  );
  console.log(`  ${s.posts} bulk posts, p50 ${s.postP50Ms} ms, p99 ${s.postP99Ms} ms; ${s.errors} errors; ${s.backlog} records not stored`);
  if (s.lastError) console.log(`  last error: ${s.lastError}`);
  process.exit(s.backlog > 0 ? 1 : 0);
} catch (e) {
  console.error(`\nsimulator: ${(e as Error).message}`);
  process.exit(1);
}
