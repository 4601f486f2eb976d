// Driver of scripts/dcsa-conformance.sh (read its header first): with DCSA's Conformance Framework
// and the service already running, seeds the service through its public API, runs the IOT- and
// REEFER-relevant Track & Trace 3.0.0 scenarios of the Producer role in a sandbox, and reports.
//
// The framework is driven through its web UI's endpoint (POST /conformance/webui {operation, ...}),
// as its ManualTestBase does: createSandbox, updateSandboxConfig, getScenarioDigests,
// startOrStopScenario, getScenarioStatus, handleActionInput, getCurrentActionExchanges,
// completeCurrentAction. The sandbox plays the Consumer: it GETs <service>/api/dcsa/tnt/v3/events
// itself, and for the POST scenarios the service's webhook (format dcsa-tnt-3) POSTs to it.
//
// Plain Node (22+, global fetch), no dependencies. Inputs come from the environment (set by the
// shell script): DCSA_FRAMEWORK_URL, DCSA_SERVICE_URL, DCSA_OPERATOR_CLIENT_ID,
// DCSA_OPERATOR_CLIENT_SECRET, DCSA_OPERATOR_USERNAME, DCSA_OPERATOR_PASSWORD; optional
// DCSA_SCENARIO_TIMEOUT_S (60), DCSA_WORK_DIR (where exchanges.json is written).
// Arguments: [--report FILE] [--only REGEX] [--force]. Exit: 0 all conformant, 1 non-conformant,
// 2 could not run.
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({
  options: { report: { type: 'string' }, only: { type: 'string' }, force: { type: 'boolean', default: false } },
});
const env = process.env;
const need = (k) => env[k] || fail(`${k} is not set (run scripts/dcsa-conformance.sh)`);
function fail(msg) {
  console.error(`[dcsa-conformance] ${msg}`);
  process.exit(2);
}
const FRAMEWORK = need('DCSA_FRAMEWORK_URL');
const SERVICE = need('DCSA_SERVICE_URL');
const SCENARIO_TIMEOUT_MS = Number(env.DCSA_SCENARIO_TIMEOUT_S ?? 60) * 1000;
const TNT_PATH = '/api/dcsa/tnt/v3';
const log = (msg) => console.error(`[dcsa-conformance] ${msg}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const isoSeconds = (d) => new Date(Math.floor(d.getTime() / 1000) * 1000).toISOString().replace('.000Z', 'Z');

// What is seeded (the same values are answered to the scenarios' parameter prompts).
const SEED = {
  equipmentReference: 'APZU4812090', // ISO 6346, check digit 0
  isoEquipmentCode: '45R1',
  carrierBookingReference: 'TRK39CBR0001',
  transportDocumentReference: 'TRK39TDR0001',
};

// ---- HTTP helpers -------------------------------------------------------------------------------
class HttpError extends Error {
  constructor(what, status, body) {
    super(`${what}: HTTP ${status} ${typeof body === 'string' ? body : JSON.stringify(body)}`.slice(0, 2000));
    this.status = status;
    this.body = body;
  }
}
async function readBody(r) {
  const text = await r.text();
  try {
    return text ? JSON.parse(text) : undefined;
  } catch {
    return text;
  }
}
async function webui(operation, fields = {}) {
  const r = await fetch(`${FRAMEWORK}/conformance/webui`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ operation, ...fields }),
  });
  const body = await readBody(r);
  // The framework answers its exceptions as {error, exception, message} (HTTP 500 or 200).
  if (!r.ok || (body && typeof body === 'object' && !Array.isArray(body) && body.exception))
    throw new HttpError(`framework ${operation}`, r.status, body?.message ?? body);
  return body;
}
let token;
async function api(method, p, body, credential = token) {
  const r = await fetch(`${SERVICE}/api/v1${p}`, {
    method,
    headers: { authorization: `Bearer ${credential}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const out = await readBody(r);
  if (!r.ok) throw new HttpError(`${method} /api/v1${p}`, r.status, out);
  return out;
}
async function waitFor(what, probe, ms = 120_000) {
  const until = Date.now() + ms;
  let last;
  while (Date.now() < until) {
    try {
      if (await probe()) return;
    } catch (e) {
      last = e;
    }
    await sleep(500);
  }
  fail(`${what} did not come up within ${ms / 1000} s${last ? ` (${last.message})` : ''}`);
}

// ---- results --------------------------------------------------------------------------------------
const results = []; // {name, result, messages: string[], exchanges: []}
const exchangesLog = [];
function finish() {
  const line = (r) => `${r.name} | ${r.result}${r.messages.length ? ` | ${r.messages.join(' ; ')}` : ''}`;
  for (const r of results) console.log(line(r));
  if (args.report) fs.writeFileSync(args.report, markdown());
  if (env.DCSA_WORK_DIR) fs.writeFileSync(path.join(env.DCSA_WORK_DIR, 'exchanges.json'), JSON.stringify(exchangesLog, null, 2));
  const code = results.some((r) => r.result === 'non-conformant') ? 1 : results.some((r) => r.result !== 'conformant') ? 2 : 0;
  process.exit(code);
}
const cell = (s) => String(s).replace(/\|/g, '\\|').replace(/\r?\n/g, '<br>');
function markdown() {
  const out = [
    '# DCSA Track & Trace 3.0.0 conformance (Producer role)',
    '',
    `DCSA Conformance Framework at commit 283bf7a1dcbcd9ea8fa6a25230af7c45c136e892, run ${new Date().toISOString()} by scripts/dcsa-conformance.sh.`,
    '',
    '| Scenario | Result | Framework messages |',
    '|---|---|---|',
    ...results.map((r) => `| ${cell(r.name)} | ${r.result} | ${cell(r.messages.join('\n')) || ''} |`),
  ];
  const failing = results.filter((r) => r.result !== 'conformant' && r.exchanges.length);
  if (failing.length) {
    out.push('', '## Exchanges of the scenarios that did not conform', '');
    for (const r of failing) {
      out.push(`### ${r.name}`, '');
      for (const x of r.exchanges) out.push('```', describeExchange(x), '```', '');
    }
  }
  return `${out.join('\n')}\n`;
}

// ---- the framework's report -------------------------------------------------------------------------
/** The framework's own messages: every check that did not conform, with its error messages. */
function failures(report, trail = []) {
  if (!report || report.status === 'CONFORMANT') return [];
  const title = String(report.title ?? '').trim();
  const here = [...trail, title].filter(Boolean);
  const subs = (report.subReports ?? []).flatMap((s) => failures(s, here));
  const own = (report.errorMessages ?? []).map((m) => `${title}: ${m}`);
  if (!own.length && !subs.length && report.status === 'NO_TRAFFIC') return [`${title}: no traffic`];
  if (!own.length && !subs.length) return [`${title}: ${report.status}`];
  return [...own, ...subs];
}
const headerValues = (headers, name) => (headers ?? []).filter((h) => h.key.toLowerCase() === name.toLowerCase()).flatMap((h) => h.values);
function bodyOf(message) {
  const b = message?.body;
  if (!b) return '';
  if (b.jsonBody !== undefined && b.jsonBody !== null) return JSON.stringify(b.jsonBody);
  return b.stringBody ?? '';
}
function describeExchange(x) {
  const q = (x.request.queryParams ?? []).map((p) => p.values.map((v) => `${p.key}=${v}`).join('&')).join('&');
  const lines = [`${x.request.method} ${x.request.url}${q ? `?${q}` : ''}`];
  const reqVersion = headerValues(x.request.message?.headers, 'API-Version');
  if (reqVersion.length) lines.push(`  request API-Version: ${reqVersion.join(', ')}`);
  const reqBody = bodyOf(x.request.message);
  if (reqBody) lines.push(`  request body: ${truncate(reqBody, 3000)}`);
  lines.push(`  -> ${x.response.statusCode}`);
  for (const h of ['API-Version', 'Next-Page-Cursor', 'Content-Type']) {
    const v = headerValues(x.response.message?.headers, h);
    if (v.length) lines.push(`  response ${h}: ${v.join(', ')}`);
  }
  const resBody = bodyOf(x.response.message);
  if (resBody) lines.push(`  response body: ${truncate(resBody, 3000)}`);
  return lines.join('\n');
}
const truncate = (s, n) => (s.length > n ? `${s.slice(0, n)}... (${s.length} characters)` : s);

// ---- 1. wait for both -------------------------------------------------------------------------------
await waitFor('the framework', async () => Array.isArray(await webui('getAvailableStandards')));
await waitFor('the service', async () => (await fetch(`${SERVICE}/readyz`)).ok);
log(`framework ${FRAMEWORK}, service ${SERVICE}`);

// ---- 2. seed the service through its public API ------------------------------------------------------
const seeded = {};
const seedStart = new Date();
async function seed() {
  const basic = Buffer.from(`${env.DCSA_OPERATOR_CLIENT_ID}:${env.DCSA_OPERATOR_CLIENT_SECRET}`).toString('base64');
  const realm = env.AUTH_REALM || 'tracking';
  const tr = await fetch(`${SERVICE}/auth/realms/${realm}/protocol/openid-connect/token`, {
    method: 'POST',
    headers: { authorization: `Basic ${basic}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'password',
      username: need('DCSA_OPERATOR_USERNAME'),
      password: need('DCSA_OPERATOR_PASSWORD'),
      scope: 'openid read write admin',
    }),
  });
  const tb = await readBody(tr);
  if (!tr.ok) throw new HttpError('operator token', tr.status, tb);
  token = tb.access_token;

  const owner = await api('POST', '/owners', { name: 'DCSA conformance carrier', note: 'scripts/dcsa-conformance.sh' });
  const key = await api('POST', '/api-keys', { name: 'dcsa-conformance', ownerId: owner.id, scopes: ['read', 'write'] });
  seeded.ownerId = owner.id;
  seeded.apiKey = key.key;
  const k = key.key;
  const asset = await api(
    'POST',
    '/assets',
    {
      name: SEED.equipmentReference,
      ownerId: owner.id,
      equipmentReference: SEED.equipmentReference,
      isoEquipmentCode: SEED.isoEquipmentCode,
    },
    k,
  );
  seeded.assetId = asset.id;
  if (asset.equipmentReference !== SEED.equipmentReference || asset.isoEquipmentCode !== SEED.isoEquipmentCode)
    log(`note: the asset answered equipmentReference=${asset.equipmentReference} isoEquipmentCode=${asset.isoEquipmentCode}`);
  const booking = await api(
    'POST',
    '/booking-data',
    {
      name: 'DCSA conformance booking',
      type: env.BOOKING_DATA_TYPE || 'MAERSK_V1',
      carrierBookingReference: SEED.carrierBookingReference,
      transportDocumentReference: SEED.transportDocumentReference,
      jsonData: { note: 'scripts/dcsa-conformance.sh' },
    },
    k,
  );
  seeded.bookingId = booking.id;
  const now = Date.now();
  await api(
    'POST',
    `/booking-data/${booking.id}/assets`,
    { assetId: asset.id, from: new Date(now - 2 * 86400_000).toISOString(), to: new Date(now + 30 * 86400_000).toISOString() },
    k,
  );
  // Records over the last hour, oldest first: positions (IOT DETC LOC), the door opened (DRO),
  // reefer readings (REEFER MEAS), and a set point changed and acknowledged (REEFER ADJU).
  const at = (minutesAgo) => new Date(now - minutesAgo * 60_000).toISOString();
  await api(
    'POST',
    '/locations',
    [
      { assetId: asset.id, whenCreated: at(60), latitude: 51.9496, longitude: 4.1453 },
      { assetId: asset.id, whenCreated: at(40), latitude: 51.9311, longitude: 4.2412, speed: 12.5, heading: 80 },
      { assetId: asset.id, whenCreated: at(20), latitude: 51.9225, longitude: 4.4792 },
    ],
    k,
  );
  await api('POST', '/sensor-data', doorRecord(at(30), 'OPEN'), k);
  await api('POST', '/reefer-data', [reeferRecord(at(50), -18.4), reeferRecord(at(25), -18.1), reeferRecord(at(10), -17.9)], k);
  const cmd = await api('POST', '/commands', { assetId: asset.id, type: 'SET_TEMPERATURE', parameters: { value: -18 } }, k);
  await api('PATCH', `/commands/${cmd.id}`, { status: 'SENT' }, k);
  await api('PATCH', `/commands/${cmd.id}`, { status: 'ACKNOWLEDGED' }, k);
}
// A door sensor is sensor data with sensorType DOOR (the service's DCSA source reads sensorType and
// the value OPEN/CLOSED); `type`, the measured quantity, has no door member, so a listed one is sent.
function doorRecord(whenCreated, value) {
  return { assetId: seeded.assetId, whenCreated, sensorId: 'door-1', type: 'PRESSURE', sensorType: 'DOOR', value };
}
function reeferRecord(whenCreated, supply) {
  return {
    assetId: seeded.assetId,
    whenCreated,
    reeferClass: 'CR',
    data: {
      temperatureSetpoint: -18,
      supplyAirTemperature: supply,
      returnAirTemperature: supply + 0.8,
      ambientTemperature: 22.3,
      humidity: 75,
      usda1Temperature: supply + 0.2,
      usda2Temperature: supply - 0.3,
      powerOn: true,
    },
  };
}

try {
  await seed();
} catch (e) {
  log(`seeding failed: ${e.message}`);
  results.push({ name: '(all scenarios)', result: 'could not run', messages: [`seeding the service failed: ${e.message}`], exchanges: [] });
  finish();
}
log(`seeded owner ${seeded.ownerId}, asset ${seeded.assetId} (${SEED.equipmentReference}), booking ${seeded.bookingId}`);

// ---- 3. is the Event Producer there? -----------------------------------------------------------------
{
  const r = await fetch(`${SERVICE}${TNT_PATH}/events?equipmentReference=${SEED.equipmentReference}`, {
    headers: { authorization: `Bearer ${seeded.apiKey}`, 'API-Version': '3.0.0' },
  });
  const body = await readBody(r);
  log(
    `preflight GET ${TNT_PATH}/events?equipmentReference=${SEED.equipmentReference} -> ${r.status} ${truncate(JSON.stringify(body) ?? '', 400)}`,
  );
  if (r.status === 404 && !args.force) {
    results.push({
      name: '(all scenarios)',
      result: 'could not run',
      messages: [
        `the service answers GET ${TNT_PATH}/events with 404: the Event Producer is not there yet (--force runs the scenarios anyway)`,
      ],
      exchanges: [],
    });
    finish();
  }
}

// ---- 4. the sandbox --------------------------------------------------------------------------------------
const sandboxName = `tracking service TnT 3.0.0 Producer ${new Date().toISOString()}`;
const { sandboxId } = await webui('createSandbox', {
  standardName: 'TnT',
  versionNumber: '3.0.0',
  scenarioSuite: 'Conformance',
  testedPartyRole: 'Producer',
  isDefaultType: true,
  sandboxName,
});
await webui('updateSandboxConfig', {
  sandboxId,
  sandboxName,
  externalPartyUrl: `${SERVICE}${TNT_PATH}`,
  externalPartyAuthHeaderName: 'Authorization',
  externalPartyAuthHeaderValue: `Bearer ${seeded.apiKey}`,
});
const sandboxConfig = await webui('getSandboxConfig', { sandboxId });
// Where the Producer POSTs (the sandbox's Consumer): <sandboxUrl>/events with the sandbox's header.
// The framework names itself "localhost"; the service pushes to the loopback address it allows.
const consumerUrl = `${sandboxConfig.sandboxUrl.replace('://localhost:', '://127.0.0.1:')}/events`;
log(`sandbox ${sandboxId}: GETs ${SERVICE}${TNT_PATH}/events, takes POSTs at ${consumerUrl}`);

const digests = await webui('getScenarioDigests', { sandboxId });
const all = digests.flatMap((m) => m.scenarios.map((s) => ({ ...s, module: m.moduleName })));
const relevant = (s) => /\((IOT|REEFER)\)$/.test(s.name) || /^GET \/events - (Filter|Validate pagination)/.test(s.module);
let chosen = all.filter(relevant);
const skipped = all.filter((s) => !relevant(s)).map((s) => s.name);
if (args.only) chosen = chosen.filter((s) => new RegExp(args.only).test(s.name));
// POST scenarios last: their integration must not push into a GET scenario.
chosen.sort((a, b) => Number(a.name.startsWith('POST')) - Number(b.name.startsWith('POST')));
log(`running ${chosen.length} scenarios; not run (event types the service does not produce): ${skipped.join(', ')}`);

// ---- 5. run each scenario ------------------------------------------------------------------------------
function answerPrompt(prompt) {
  const now = new Date();
  const values = {
    carrierBookingReference: SEED.carrierBookingReference,
    transportDocumentReference: SEED.transportDocumentReference,
    equipmentReference: SEED.equipmentReference,
    eventTypes: 'IOT,REEFER',
    eventUpdatedDateTimeMin: isoSeconds(new Date(seedStart.getTime() - 3600_000)),
    eventUpdatedDateTimeMax: isoSeconds(new Date(now.getTime() + 3600_000)),
    limit: '1',
  };
  const out = {};
  for (const k of Object.keys(prompt ?? {})) {
    if (!(k in values)) throw new Error(`the framework asks for a parameter this script does not know: ${k}`);
    out[k] = values[k];
  }
  return out;
}

let integrationId;
async function startPush(type) {
  const objectTypes = type === 'IOT' ? ['location', 'sensordata'] : ['reeferdata', 'command'];
  const body = {
    name: `dcsa-conformance ${type}`,
    channel: 'webhook',
    ownerIds: [seeded.ownerId],
    objectTypes,
    destination: consumerUrl,
    webhook: {
      format: 'dcsa-tnt-3',
      auth: { type: 'header', name: sandboxConfig.sandboxAuthHeaderName, value: sandboxConfig.sandboxAuthHeaderValue },
    },
  };
  let integration;
  try {
    integration = await api('POST', '/integrations', body, seeded.apiKey);
  } catch (e) {
    if (!(e instanceof HttpError && e.status === 400 && /objectTypes/.test(e.message))) throw e;
    log(`integration with objectTypes ${objectTypes} refused (${e.message}); trying the default object types`);
    delete body.objectTypes;
    integration = await api('POST', '/integrations', body, seeded.apiKey);
  }
  integrationId = integration.id;
  // New records while the scenario waits for the Producer's POST.
  const now = new Date().toISOString();
  if (type === 'IOT') {
    await api('POST', '/locations', { assetId: seeded.assetId, whenCreated: now, latitude: 51.9, longitude: 4.5 }, seeded.apiKey);
    await api('POST', '/sensor-data', doorRecord(now, 'OPEN'), seeded.apiKey);
  } else {
    await api('POST', '/reefer-data', reeferRecord(now, -18.0), seeded.apiKey);
  }
}
/** What the service says of the integration that should have POSTed: its health and deliveries. */
async function diagnosePush() {
  try {
    const i = await api('GET', `/integrations/${integrationId}`, undefined, seeded.apiKey);
    const d = await api('GET', `/integrations/${integrationId}/deliveries?limit=5`, undefined, seeded.apiKey);
    const items = d?.items ?? d?.data ?? d;
    return `the service's integration ${integrationId}: enabled=${i.enabled} health=${i.health} disabledReason=${i.disabledReason ?? null}; deliveries: ${truncate(JSON.stringify(items), 1500)}`;
  } catch (e) {
    return `reading the service's integration failed: ${e.message}`;
  }
}
async function stopPush() {
  if (!integrationId) return;
  const id = integrationId;
  integrationId = undefined;
  await api('DELETE', `/integrations/${id}`, undefined, seeded.apiKey).catch((e) => log(`deleting integration ${id}: ${e.message}`));
}

async function runScenario(s) {
  const rec = { name: s.name, result: 'could not run', messages: [], exchanges: [] };
  results.push(rec);
  const seen = new Set();
  const pushed = new Set();
  let status;
  let lastAction = '';
  await webui('startOrStopScenario', { sandboxId, scenarioId: s.id });
  const deadline = Date.now() + SCENARIO_TIMEOUT_MS;
  try {
    for (;;) {
      status = await webui('getScenarioStatus', { sandboxId, scenarioId: s.id });
      if (!status.isRunning) break;
      if (Date.now() > deadline) {
        rec.messages.push(`timed out after ${SCENARIO_TIMEOUT_MS / 1000} s at action "${status.nextActions}"`);
        if (integrationId) rec.messages.push(await diagnosePush());
        await webui('startOrStopScenario', { sandboxId, scenarioId: s.id }); // stops it
        status = await webui('getScenarioStatus', { sandboxId, scenarioId: s.id });
        rec.messages.push(...failures(status.conformanceSubReport));
        return rec;
      }
      const action = String(status.nextActions ?? '').split(' - ')[0];
      lastAction = action;
      if (status.inputRequired) {
        await webui('handleActionInput', {
          sandboxId,
          scenarioId: s.id,
          actionId: status.promptActionId,
          actionInput: answerPrompt(status.jsonForPromptText),
        });
        continue;
      }
      const post = /^POST Events \((\w+)\)/.exec(action);
      if (post && !pushed.has(action)) {
        pushed.add(action);
        await startPush(post[1]);
      }
      const ex = await webui('getCurrentActionExchanges', { sandboxId, scenarioId: s.id });
      const x = ex?.primaryExchange;
      if (x && !seen.has(x.uuid)) {
        seen.add(x.uuid);
        rec.exchanges.push(x);
        exchangesLog.push({ scenario: s.name, action, exchange: x });
        if (post) await stopPush();
        await webui('completeCurrentAction', { sandboxId, skip: false });
        continue;
      }
      await sleep(250);
    }
  } finally {
    await stopPush();
  }
  const report = status.conformanceSubReport;
  if (report?.status === 'CONFORMANT') rec.result = 'conformant';
  else if (!rec.exchanges.length || report?.status === 'NO_TRAFFIC') rec.result = 'could not run';
  else rec.result = 'non-conformant';
  rec.messages.push(...failures(report));
  if (rec.result !== 'conformant' && !rec.messages.length) rec.messages.push(`ended at "${lastAction}" with ${report?.status}`);
  return rec;
}

for (const s of chosen) {
  let rec;
  try {
    rec = await runScenario(s);
  } catch (e) {
    // runScenario pushed its record first, unless the very first call failed.
    rec = results.at(-1)?.name === s.name ? results.at(-1) : { name: s.name, messages: [], exchanges: [] };
    if (!results.includes(rec)) results.push(rec);
    rec.result = 'could not run';
    rec.messages.push(e.message);
    await webui('getScenarioStatus', { sandboxId, scenarioId: s.id })
      .then((st) => st.isRunning && webui('startOrStopScenario', { sandboxId, scenarioId: s.id }))
      .catch(() => undefined);
  }
  log(`${rec.name}: ${rec.result}`);
}
await webui('deleteSandbox', { sandboxId }).catch(() => undefined);
finish();
