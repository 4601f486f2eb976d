// Every object type the service pushes, as a receiver gets it, against the OpenAPI document's
// `webhooks` entry for it (API guide 8, "Push objects"): one real object of each type is captured by
// a webhook receiver and validated with Ajv against its entry's schema, closed (every object schema
// without an explicit `additionalProperties: true` gets `false`, so an undocumented member fails).
// The records are compared with the same record read from REST, through the guide's table (ids as
// numbers, an asset's tags as words, a sensor's `sensorType` the REST `type`, ...); an event, a
// notification and a command are their REST objects as they are. The types come from the
// document, and the guide's list must be the same, so a new type cannot go untested. Only HTTP:
// the document, the API and the receiver (the health sweep is run on the test's clock, as in
// test/integration-health.test.ts).
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { sweepHealth } from '../src/delivery/queue/index.js';
import { customer, deliveryHistory, frozenSpecification, ok, PUSHED_TYPES, startApp, waitFor } from './helpers.js';
import { Receiver } from './receiver.js';

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

const ta = await startApp(undefined, {
  PUSH_ALLOW_HTTP: 'true',
  PUSH_ALLOWED_NETWORKS: '127.0.0.0/8',
  DELIVERY_POLL_MS: '100',
  RATE_LIMIT_MAX: '100000',
  DB_POOL_SIZE: '4',
});
const rx = await new Receiver().start();
after(() => rx.close());
const { deliveries } = deliveryHistory(() => ta);

/** The schema with unknown members refused: `additionalProperties: false` wherever it is not given. */
function closed(s: unknown): unknown {
  if (Array.isArray(s)) return s.map(closed);
  if (!s || typeof s !== 'object') return s;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(s))
    out[k] = k === 'properties' ? Object.fromEntries(Object.entries(v as object).map(([p, x]) => [p, closed(x)])) : closed(v);
  if ((out.type === 'object' || out.properties) && out.additionalProperties === undefined && !out.patternProperties)
    out.additionalProperties = false;
  return out;
}

type Obj = Record<string, any>;
const words = (tags: string | null) =>
  tags === null
    ? null
    : tags
        .split(',')
        .map((w) => w.trim())
        .filter(Boolean);
/** The push object the API guide's table makes of a REST record. */
const RECORD_FROM_REST: Record<string, (r: Obj) => Obj> = {
  asset: (r) => ({
    id: r.id,
    name: r.name,
    ownerId: r.ownerId,
    whenCreated: r.whenCreated,
    whenUpdated: r.whenUpdated,
    boxId: r.boxId,
    disabled: r.disabled,
    note: r.note,
    tags: words(r.tags),
  }),
  location: (r) => ({ ...r, id: Number(r.id) }),
  sensordata: (r) => ({
    id: Number(r.id),
    assetId: r.assetId,
    ownerId: r.ownerId,
    sensorId: r.sensorId,
    sensorType: r.type,
    whenCreated: r.whenCreated,
    value: String(r.value),
    type: typeof r.value === 'number' ? 'DECIMAL' : 'TEXT',
  }),
  reeferdata: (r) => ({
    id: Number(r.id),
    assetId: r.assetId,
    ownerId: r.ownerId,
    whenCreated: r.whenCreated,
    reeferClass: r.reeferClass,
    data: r.data,
  }),
  gensetdata: (r) => ({ ...r, id: Number(r.id) }),
  oemdata: ({ whenReceived: _, ...r }) => ({ ...r, id: Number(r.id) }),
};
/** Where REST reads one object of each type. */
const REST_PATH: Record<string, string> = {
  asset: '/assets',
  location: '/locations',
  sensordata: '/sensor-data',
  reeferdata: '/reefer-data',
  gensetdata: '/genset-data',
  oemdata: '/oem-data',
  event: '/events',
  notification: '/notifications',
  command: '/commands',
};

test('every pushed object type is as its OpenAPI webhooks entry says, with no unknown member; a record is its REST record', async () => {
  const doc = ok(await ta.call('GET', '/api/v1/openapi.json'), 200, 'openapi');
  const types = Object.keys(doc.webhooks).sort();
  // The guide's list of pushed types (API guide 8) is the document's.
  assert.deepEqual(types, PUSHED_TYPES);

  const c = await customer(ta, 'shapes', { base: '/api/v1' });
  ok(
    await c.call('POST', '/integrations', {
      name: 'shapes',
      channel: 'webhook',
      ownerIds: [c.ownerId],
      destination: `${rx.url}/shapes`,
      objectTypes: types,
      retry: { scheduleSeconds: [0.2] },
    }),
    201,
    'the integration of every type',
  );
  // A second integration that fails: its health changes are the integrationStatus objects.
  rx.on('/down', () => ({ status: 503, body: 'down' }));
  const down = ok(
    await c.call('POST', '/integrations', {
      name: 'shapes-down',
      channel: 'webhook',
      ownerIds: [c.ownerId],
      destination: `${rx.url}/down`,
      objectTypes: ['oemdata'],
      retry: { scheduleSeconds: [0.2], maxAttempts: 10000, deadlineHours: 720 },
    }),
    201,
    'the failing integration',
  );

  // The records: an asset (created, then changed: tags, note, box), each kind of data.
  const assetId = await c.asset('shapes-reefer');
  ok(await c.call('PATCH', `/assets/${assetId}`, { tags: 'frozen, export', note: 'deck 3', boxId: 'BOX-7' }), 200, 'asset change');
  const at = (minutesAgo: number) => new Date(Date.now() - minutesAgo * 60_000).toISOString();
  ok(
    await c.call('POST', '/locations', [
      { assetId, latitude: 51.9, longitude: 4.48, altitude: 12.5, speed: 31.5, heading: 270, whenCreated: at(9) },
    ]),
    201,
  );
  ok(
    await c.call('POST', '/sensor-data', [
      { assetId, sensorId: 'probe-1', type: 'TEMPERATURE', value: -18.5, sensorType: 'PT100', whenCreated: at(8) },
      { assetId, sensorId: 'gauge-1', type: 'PRESSURE', value: 'LOW', whenCreated: at(8) },
    ]),
    201,
  );
  ok(
    await c.call('POST', '/genset-data', [{ assetId, gensetType: 'SG-3000', data: { fuelLevel: 81 }, boxId: 'BOX-7', whenCreated: at(7) }]),
    201,
  );
  ok(await c.call('POST', '/oem-data', [{ assetId, payloadType: 7, data: { door: 'open' }, whenCreated: at(6) }]), 201);
  // A specification that alerts on supply air above -10: the reefer data raises an event and a notification.
  await frozenSpecification(c.call, assetId);
  ok(await c.call('POST', '/reefer-data', [{ assetId, reeferClass: 'CR', data: { supplyAirTemperature: -2 }, whenCreated: at(5) }]), 201);
  // A command (the asset has sent reefer data).
  ok(await c.call('POST', '/commands', { assetId, type: 'SET_TEMPERATURE', parameters: { value: -18 } }), 201, 'command');
  // The failing integration, an hour on on the test's clock: `failing`.
  await waitFor(
    () => 'a failed attempt of the failing integration',
    async () => (await deliveries(down.id)).some((d) => d.attemptsLog.some((a: { success: boolean }) => !a.success)),
  );
  assert.equal(await sweepHealth(ta.app.services.db, new Date(Date.now() + 1.5 * 3600_000)), 1);

  const pushed = () => rx.for('/shapes').map((r) => ({ type: String(r.headers['webhook-object-type']), body: JSON.parse(r.body) as Obj }));
  const want = new Map(types.map((t) => [t, t === 'sensordata' || t === 'asset' ? 2 : 1]));
  await rx.waitFor(
    () => [...want].every(([t, n]) => pushed().filter((p) => p.type === t).length >= n),
    90_000,
    `every type (${[...want].map(([t, n]) => `${t} ${n}`).join(', ')})`,
  );

  const ajv = addFormats(new Ajv2020({ allErrors: true, strict: false }));
  ajv.addFormat('int64', true);
  ajv.addFormat('int32', true);
  const seen = new Set<string>();
  for (const { type, body } of pushed()) {
    seen.add(type);
    assert.ok(doc.webhooks[type], `a pushed ${type} has a webhooks entry`);
    const schema = doc.webhooks[type].post.requestBody.content['application/json'].schema;
    const single = schema.oneOf.find((s: Obj) => s.type !== 'array');
    const validate = ajv.compile(closed(single) as object);
    assert.ok(validate(body), `${type} ${JSON.stringify(body)}: ${ajv.errorsText(validate.errors)}`);
  }
  assert.deepEqual([...seen].sort(), types, 'one object of every type');

  // Each pushed object against REST: the records through the guide's table, the others as they are.
  // The latest push of an object is its REST state (an asset is pushed at each change).
  const latest = new Map<string, Obj>();
  for (const { type, body } of pushed()) {
    const k = `${type}:${body.id}`;
    const before = latest.get(k);
    if (!before || Date.parse(body.whenUpdated ?? 0) >= Date.parse(before.whenUpdated ?? 0)) latest.set(k, body);
  }
  for (const [k, body] of latest) {
    const type = k.slice(0, k.indexOf(':'));
    if (type === 'integrationStatus') {
      const i = ok(await c.call('GET', `/integrations/${down.id}`), 200);
      assert.equal(body.integrationId, down.id);
      assert.equal(body.status, i.health, 'the change is the integration health');
      continue;
    }
    const rest = ok(await c.call('GET', `${REST_PATH[type]}/${body.id}`), 200, `${type} ${body.id} from REST`);
    const fromRest = RECORD_FROM_REST[type];
    if (!fromRest) {
      // A command's get also answers its downlink history (attempts), which is never pushed.
      const { attempts, ...object } = rest;
      if (type === 'command') assert.ok(Array.isArray(attempts), 'the get of a command has its attempts');
      assert.deepEqual(body, type === 'command' ? object : rest, `the pushed ${type} is its REST object`);
      continue;
    }
    const { when_received: received, ...rest_ } = body;
    assert.deepEqual(rest_, fromRest(rest), `the pushed ${type} is its REST record`);
    if (type === 'sensordata' || type === 'oemdata') {
      assert.ok(Number.isSafeInteger(received), `${type} when_received ${received}`);
      // Unix milliseconds; REST's whenReceived (OEM data) is the same instant in whole seconds.
      if (type === 'oemdata')
        assert.equal(Math.floor(received / 1000) * 1000, Date.parse(rest.whenReceived), `${received} vs ${rest.whenReceived}`);
    }
  }
});
