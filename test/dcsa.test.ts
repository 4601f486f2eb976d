// DCSA Track & Trace 3.0.0 (API guide 18): the Event Producer (GET /api/dcsa/tnt/v3/events) makes
// REEFER events (MEAS from reefer data, ADJU from an acknowledged set point) and IOT events (LOC
// from locations, thinned to one per 15 minutes; DRO and DRC from a door sensor) of the caller's
// equipment only; every answer is checked against DCSA's schema as vendored, with unknown members
// refused, codes checked against the schema's lists and the Conformance Framework's v300 checks
// (test/dcsa/check.ts). Filters (the standard's required combinations), paging, the API-Version
// header and errors; and a dcsa-tnt-3 webhook delivering schema-valid batches.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { checkTnt } from './dcsa/check.js';
import { customer, deliveryHistory, ok, startApp, type TestApp, waitFor } from './helpers.js';
import { Receiver } from './receiver.js';

const DCSA = '/api/dcsa/tnt/v3/events';
let ta: TestApp;
let rx: Receiver;
before(async () => {
  rx = await new Receiver().start();
  ta = await startApp(undefined, {
    PUSH_ALLOW_HTTP: 'true',
    PUSH_ALLOWED_NETWORKS: '127.0.0.0/8',
    DELIVERY_POLL_MS: '100',
    RATE_LIMIT_MAX: '100000',
    DCSA_PARTY_CODE: 'TRACKSVC',
  });
});
after(() => rx.close());

/** A fixed hour well in the past, aligned to the 15-minute buckets, so thinning is predictable. */
const HOUR = Date.UTC(2026, 10, 20, 8, 0, 0);
const at = (minutes: number) => new Date(HOUR + minutes * 60_000).toISOString();

type Customer = Awaited<ReturnType<typeof customer>>;
async function equipped(c: Customer, name: string, equipmentReference: string, isoEquipmentCode = '45R1') {
  const id = await c.asset(name);
  ok(await c.call('PATCH', `/api/v1/assets/${id}`, { equipmentReference, isoEquipmentCode }), 200, 'equipment identity');
  return id;
}

/** Every event the key sees for `query`, page by page (limit `limit`), checking each page. */
async function allPages(key: string, query: string, limit: number) {
  const events: any[] = [];
  let cursor: string | undefined;
  for (let pages = 1; ; pages++) {
    assert.ok(pages < 200, 'too many pages');
    const r = await ta.call(
      'GET',
      `${DCSA}?${query}${query ? '&' : ''}limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      {
        token: key,
      },
    );
    const body = ok(r, 200, `page ${pages}`);
    assert.equal(r.headers['api-version'], '3.0.0');
    assert.ok(body.events.length <= limit, 'a page holds at most limit events');
    if (body.events.length) assert.deepEqual(checkTnt(body, 'GetEventsResponse'), []);
    events.push(...body.events);
    cursor = r.headers['next-page-cursor'] as string | undefined;
    if (!cursor) return { events, pages };
  }
}

const get = async (key: string, query = '') => {
  const r = await ta.call('GET', `${DCSA}${query ? `?${query}` : ''}`, { token: key });
  return { r, body: r.body };
};
const codes = (events: any[]) =>
  events
    .map((e) => `${e.eventClassification.eventTypeCode}/${e.eventClassification.reeferEventTypeCode ?? e.iotDetails?.iotEventCode}`)
    .sort();

let a: Customer;
let b: Customer;
let box: string;
let bare: string;
const stored: Record<string, string> = {};

test('set-up: a customer with a reefer box (ISO 6346 identity), one without identity, and another tenant', async () => {
  a = await customer(ta, 'dcsa-a');
  b = await customer(ta, 'dcsa-b');
  box = await equipped(a, 'Reefer APZU', 'APZU4812090');
  bare = await a.asset('No identity');
  const other = await equipped(b, 'Other tenant box', 'MSKU1234565', '22R1');
  const reefer = async (assetId: string, minutes: number, data: unknown) =>
    ok(await a.call('POST', '/api/v1/reefer-data', { assetId, whenCreated: at(minutes), data }), 201, 'reefer');
  // Flat and grouped members, as devices and the simulator send them.
  stored.meas = (
    await ok(
      await a.call('POST', '/api/v1/reefer-data', {
        assetId: box,
        whenCreated: at(1),
        data: {
          temperatureSetpoint: -18,
          ambientTemperature: '21.5',
          usda1Temperature: -17.9,
          usda2Temperature: -18.1,
          humiditySetpoint: 85,
          bulbMode: false,
          coldTreatmentRequired: true,
          cargo: {
            sensors: { supplyAirTemperature: -18.4, returnAirTemperature: -16.2, humidity: 82, co2: 0.4, o2: 20.8, airExchange: 15 },
          },
        },
      }),
      201,
      'reefer',
    )
  ).id;
  await reefer(bare, 1, { supplyAirTemperature: 4 });
  ok(await b.call('POST', '/api/v1/reefer-data', { assetId: other, whenCreated: at(1), data: { supplyAirTemperature: 4 } }), 201, 'b');
  // Three fixes in 08:00-08:15 (one LOC), one in 08:15-08:30 (another), one arriving late in the first (none).
  const locs = ok(
    await a.call('POST', '/api/v1/locations', [
      { assetId: box, latitude: 51.9, longitude: 4.48, whenCreated: at(2) },
      { assetId: box, latitude: 51.91, longitude: 4.49, whenCreated: at(7) },
      { assetId: box, latitude: 51.92, longitude: 4.5, whenCreated: at(14) },
      { assetId: box, latitude: 51.95, longitude: 4.55, whenCreated: at(16) },
      { assetId: bare, latitude: 1, longitude: 1, whenCreated: at(2) },
    ]),
    201,
    'locations',
  );
  stored.loc1 = String(locs[0].id);
  stored.loc2 = String(locs[3].id);
  ok(await a.call('POST', '/api/v1/locations', { assetId: box, latitude: 51.8, longitude: 4.4, whenCreated: at(0.5) }), 201, 'late fix');
  // A door sensor (opened, closed) and a temperature sensor, which makes no event.
  const sensors = ok(
    await a.call('POST', '/api/v1/sensor-data', [
      { assetId: box, sensorId: 'door-1', type: 'PRESSURE', sensorType: 'DOOR', value: 'OPEN', whenCreated: at(20) },
      { assetId: box, sensorId: 'door-1', type: 'PRESSURE', sensorType: 'DOOR', value: 'CLOSED', whenCreated: at(25) },
      { assetId: box, sensorId: 't-1', type: 'TEMPERATURE', value: -18, whenCreated: at(20) },
    ]),
    201,
    'sensors',
  );
  stored.dro = String(sensors[0].id);
  stored.drc = String(sensors[1].id);
  // A set point acknowledged by the device (ADJU); one still pending makes none.
  const cmd = ok(
    await a.call('POST', '/api/v1/commands', { assetId: box, type: 'SET_TEMPERATURE', parameters: { value: -20 } }),
    201,
    'command',
  );
  ok(await a.call('PATCH', `/api/v1/commands/${cmd.id}`, { status: 'SENT' }), 200, 'sent');
  ok(await a.call('PATCH', `/api/v1/commands/${cmd.id}`, { status: 'ACKNOWLEDGED' }), 200, 'acknowledged');
  stored.adju = String(cmd.id);
  ok(await a.call('POST', '/api/v1/commands', { assetId: box, type: 'SET_HUMIDITY', parameters: { value: 80 } }), 201, 'pending');
});

test("the producer serves the caller's equipment's events, valid by DCSA's schema and checks, and nothing else", async () => {
  const { r, body } = await get(a.key);
  ok(r, 200);
  assert.equal(r.headers['api-version'], '3.0.0');
  assert.deepEqual(checkTnt(body, 'GetEventsResponse'), []);
  assert.deepEqual(codes(body.events), ['IOT/DRC', 'IOT/DRO', 'IOT/LOC', 'IOT/LOC', 'REEFER/ADJU', 'REEFER/MEAS']);
  for (const e of body.events) {
    assert.deepEqual(e.equipmentDetails, { equipmentReference: 'APZU4812090', ISOEquipmentCode: '45R1' });
    assert.deepEqual(e.eventRouting, { originatingParty: { partyCode: 'TRACKSVC', codeListProvider: 'ZZZ' } });
    assert.equal(e.eventClassification.eventClassifierCode, 'ACT');
  }
  const byId = new Map(body.events.map((e: any) => [e.eventID, e]));
  // The first stored fix of each 15 minutes, never the late one.
  assert.ok(byId.has(`IOT-LOC-${stored.loc1}`) && byId.has(`IOT-LOC-${stored.loc2}`));
  assert.deepEqual((byId.get(`IOT-LOC-${stored.loc1}`) as any).eventLocation, { geoCoordinate: { latitude: '51.9', longitude: '4.48' } });
  assert.equal((byId.get(`IOT-LOC-${stored.loc1}`) as any).eventDateTime, at(2).replace('.000Z', 'Z'));
  assert.ok(byId.has(`IOT-DRO-${stored.dro}`) && byId.has(`IOT-DRC-${stored.drc}`));
  const meas = byId.get(`REEFER-MEAS-${stored.meas}`) as any;
  assert.deepEqual(meas.reeferDetails, {
    temperatureUnit: 'CEL',
    internalSetpointTemperature: -18,
    temperatureProbeMeasurements: [
      { measuredTemperatureValue: -17.9, USDAProbeNumber: 1, COAProbeUDMKey: 'P19' },
      { measuredTemperatureValue: -18.1, USDAProbeNumber: 2, COAProbeUDMKey: 'P20' },
      { measuredTemperatureValue: -18.4, probeLabel: 'Supply air' },
      { measuredTemperatureValue: -16.2, probeLabel: 'Return air' },
    ],
    ambientMeasuredTemperature: 21.5,
    setpointParameters: { humidityPercentage: 85, isBulbMode: false, isColdTreatmentRequired: true },
    measuredParameters: { o2Percentage: 20.8, co2Percentage: 0.4, humidityPercentage: 82, airExchangeValue: 15, airExchangeUnit: 'MQH' },
  });
  assert.deepEqual((byId.get(`REEFER-ADJU-${stored.adju}`) as any).reeferDetails, {
    temperatureUnit: 'CEL',
    internalSetpointTemperature: -20,
  });
  // Stable: the same ids, the same events, asked again.
  assert.deepEqual((await get(a.key)).body, body);
  // The other tenant sees its own box only (its reefer record), and none of a's.
  const theirs = (await get(b.key)).body.events;
  assert.deepEqual(
    theirs.map((e: any) => e.equipmentDetails.equipmentReference),
    ['MSKU1234565'],
  );
  assert.deepEqual((await get(b.key, 'equipmentReference=APZU4812090')).body.events, []);
});

test('filters: equipmentReference, eventTypes, eventUpdatedDateTime; bad values are 400s with feedbackElements', async () => {
  assert.equal((await get(a.key, 'equipmentReference=APZU4812090')).body.events.length, 6);
  assert.deepEqual((await get(a.key, 'equipmentReference=MSKU1234565')).body.events, []);
  assert.deepEqual(codes((await get(a.key, 'eventTypes=IOT')).body.events), ['IOT/DRC', 'IOT/DRO', 'IOT/LOC', 'IOT/LOC']);
  assert.deepEqual(codes((await get(a.key, 'eventTypes=REEFER,SHIPMENT')).body.events), ['REEFER/ADJU', 'REEFER/MEAS']);
  assert.deepEqual((await get(a.key, 'eventTypes=SHIPMENT,TRANSPORT,EQUIPMENT')).body.events, []);
  const future = new Date(Date.now() + 3600_000).toISOString();
  const past = new Date(Date.now() - 3600_000).toISOString();
  assert.deepEqual((await get(a.key, `eventUpdatedDateTimeMin=${future}`)).body.events, []);
  assert.equal((await get(a.key, `eventUpdatedDateTimeMin=${past}&eventUpdatedDateTimeMax=${future}`)).body.events.length, 6);
  assert.deepEqual((await get(a.key, `eventUpdatedDateTimeMax=${past}`)).body.events, []);
  for (const [query, field] of [
    ['eventTypes=IOT,PARCEL', '/eventTypes'],
    [`eventUpdatedDateTimeMin=${future}&eventUpdatedDateTimeMax=${past}`, '/eventUpdatedDateTimeMax'],
    ['eventUpdatedDateTimeMin=yesterday', '/eventUpdatedDateTimeMin'],
    ['limit=0', '/limit'],
    ['limit=1001', '/limit'],
    ['cursor=not-a-cursor', '/cursor'],
    ['equipmentReference=APZU48120901', '/equipmentReference'],
    ['eventType=IOT', '/eventType'],
  ] as const) {
    const { r, body } = await get(a.key, query);
    assert.equal(r.status, 400, `${query}: ${r.raw}`);
    assert.equal(body.error, 'Bad Request');
    assert.equal(body.field, field, query);
    assert.equal(r.headers['api-version'], '3.0.0');
    assert.equal(body.feedbackElements[0].severity, 'ERROR');
    assert.equal(body.feedbackElements[0].message, body.message);
  }
  // Another tenant's key is refused without one; no key is a 401, with the header still.
  const none = await ta.call('GET', DCSA, { token: 'nope' });
  assert.equal(none.status, 401);
  assert.equal(none.headers['api-version'], '3.0.0');
});

test('booking filters: carrierBookingReference and transportDocumentReference, alone and with equipmentReference, within the link', async () => {
  const booking = ok(
    await a.call('POST', '/api/v1/booking-data', {
      type: ta.cfg.BOOKING_DATA_TYPE,
      name: 'Voyage 2103S',
      carrierBookingReference: 'ABC709951',
      transportDocumentReference: 'HHL71800000',
    }),
    201,
    'booking',
  );
  // The box carries it from 08:10 to 08:22: the 08:16 fix and the 08:20 door opening, not the rest.
  ok(await a.call('POST', `/api/v1/booking-data/${booking.id}/assets`, { assetId: box, from: at(10), to: at(22) }), 201, 'link');
  const inWindow = ['IOT/DRO', 'IOT/LOC'];
  for (const q of [
    'carrierBookingReference=ABC709951',
    'carrierBookingReference=ABC709951&equipmentReference=APZU4812090',
    'transportDocumentReference=HHL71800000',
    'transportDocumentReference=HHL71800000&equipmentReference=APZU4812090',
  ]) {
    assert.deepEqual(codes((await get(a.key, q)).body.events), inWindow, q);
  }
  assert.deepEqual((await get(a.key, 'carrierBookingReference=ABC709951&equipmentReference=MSKU1234565')).body.events, []);
  assert.deepEqual((await get(a.key, 'carrierBookingReference=NOSUCH')).body.events, []);
  assert.deepEqual(codes((await get(a.key, 'carrierBookingReference=ABC709951&eventTypes=IOT')).body.events), inWindow);
  assert.deepEqual((await get(a.key, 'carrierBookingReference=ABC709951&eventTypes=REEFER')).body.events, []);
  // Another tenant's booking reference finds nothing of it.
  assert.deepEqual((await get(b.key, 'carrierBookingReference=ABC709951')).body.events, []);
});

test('paging: every event once over pages of 1, 2 and 4; no cursor on the last; a cursor keeps its filters', async () => {
  const whole = (await get(a.key)).body.events.map((e: any) => e.eventID).sort();
  for (const limit of [1, 2, 4]) {
    const { events, pages } = await allPages(a.key, '', limit);
    assert.deepEqual(events.map((e) => e.eventID).sort(), whole, `limit ${limit}`);
    assert.equal(pages, Math.ceil(whole.length / limit), `limit ${limit}: pages`);
  }
  const first = await ta.call('GET', `${DCSA}?limit=2`, { token: a.key });
  const cursor = first.headers['next-page-cursor'] as string;
  assert.ok(cursor);
  const changed = await get(a.key, `limit=2&eventTypes=IOT&cursor=${encodeURIComponent(cursor)}`);
  assert.equal(changed.r.status, 400);
  assert.equal(changed.body.field, '/cursor');
  // The last page says so by having no cursor.
  const all = await ta.call('GET', `${DCSA}?limit=100`, { token: a.key });
  assert.equal(all.headers['next-page-cursor'], undefined);
});

test('a dcsa-tnt-3 webhook posts {"events": [...]} with API-Version in both modes; records that make no event send nothing', async () => {
  for (const mode of ['batch', 'single'] as const) {
    const path = `/dcsa-${mode}`;
    const integration = ok(
      await a.call('POST', '/api/v1/integrations', {
        name: `dcsa-${mode}-${process.env.TEST_DB}`,
        channel: 'webhook',
        ownerIds: [a.ownerId],
        destination: `${rx.url}${path}`,
        webhook: { format: 'dcsa-tnt-3', mode, batchSize: 50 },
      }),
      201,
      'integration',
    );
    assert.deepEqual([...integration.objectTypes].sort(), ['command', 'location', 'reeferdata', 'sensordata']);
    const now = Date.now();
    const when = (s: number) => new Date(now - 120_000 + s * 1000).toISOString();
    ok(
      await a.call('POST', '/api/v1/reefer-data', { assetId: box, whenCreated: when(1), data: { supplyAirTemperature: -18.2 } }),
      201,
      'reefer',
    );
    ok(
      await a.call('POST', '/api/v1/sensor-data', {
        assetId: box,
        sensorId: 'door-1',
        type: 'PRESSURE',
        sensorType: 'door',
        value: 1,
        whenCreated: when(2),
      }),
      201,
      'door',
    );
    const received = await waitFor(
      () => `${mode}: the reefer and door events at ${path}`,
      async () => {
        const got = rx.for(path).flatMap((x) => JSON.parse(x.body).events);
        return got.length >= 2 ? got : undefined;
      },
    );
    const story = `${mode}: ${JSON.stringify(rx.for(path).map((x) => x.body))}`;
    for (const req of rx.for(path)) {
      assert.equal(req.headers['api-version'], '3.0.0', story);
      const body = JSON.parse(req.body);
      assert.deepEqual(checkTnt(body, 'PostEventsRequest'), [], story);
    }
    assert.deepEqual(codes(received), ['IOT/DRO', 'REEFER/MEAS'], story);
    assert.ok(received.every((e: any) => e.equipmentDetails.equipmentReference === 'APZU4812090'));
    // A record of the asset without identity makes no request; its attempt says why.
    const sent = rx.for(path).length;
    ok(
      await a.call('POST', '/api/v1/reefer-data', { assetId: bare, whenCreated: when(3), data: { supplyAirTemperature: 3 } }),
      201,
      'bare',
    );
    const history = deliveryHistory(() => ta);
    const quiet = await waitFor(
      () => `${mode}: a delivery whose attempt sent nothing`,
      async () => (await history.deliveries(integration.id)).find((d) => d.attemptsLog.some((x: any) => x.error?.startsWith('not sent'))),
    );
    assert.equal(quiet.status, 'SUCCEEDED', JSON.stringify(quiet));
    assert.equal(quiet.attemptsLog[0].httpStatus ?? null, null, JSON.stringify(quiet));
    assert.equal(
      rx.for(path).length,
      sent,
      `${mode}: ${JSON.stringify(
        rx
          .for(path)
          .slice(sent)
          .map((x) => x.body),
      )}`,
    );
  }
});

test('integration settings: dcsa-tnt-3 takes only the types it makes events from, and no injected event id', async () => {
  const base = { name: `dcsa-bad-${process.env.TEST_DB}`, channel: 'webhook', ownerIds: [a.ownerId], destination: `${rx.url}/x` };
  const r1 = await a.call('POST', '/api/v1/integrations', {
    ...base,
    objectTypes: ['asset', 'location'],
    webhook: { format: 'dcsa-tnt-3' },
  });
  assert.equal(r1.status, 400);
  assert.equal(r1.body.field, '/objectTypes');
  const r2 = await a.call('POST', '/api/v1/integrations', { ...base, webhook: { format: 'dcsa-tnt-3', injectEventId: true } });
  assert.equal(r2.status, 400);
  assert.equal(r2.body.field, '/webhook/injectEventId');
});

test('an asset moved to another owner: each owner sees the events of the records stored for it, never the other’s', async () => {
  const moving = await equipped(a, 'Moving box', 'CSQU3054383', '22R1');
  ok(
    await a.call('POST', '/api/v1/reefer-data', { assetId: moving, whenCreated: at(30), data: { supplyAirTemperature: 2 } }),
    201,
    'before',
  );
  ok(await ta.call('PATCH', `/api/v1/assets/${moving}`, { token: ta.adminToken, body: { ownerId: b.ownerId } }), 200, 'move');
  ok(
    await b.call('POST', '/api/v1/reefer-data', { assetId: moving, whenCreated: at(31), data: { supplyAirTemperature: 3 } }),
    201,
    'after',
  );
  const theirs = (await get(b.key, 'equipmentReference=CSQU3054383')).body.events;
  assert.deepEqual(
    theirs.map((e: any) => e.eventDateTime),
    [at(31).replace('.000Z', 'Z')],
  );
  // a no longer sees the box at all; the operator sees both records.
  assert.deepEqual((await get(a.key, 'equipmentReference=CSQU3054383')).body.events, []);
  assert.equal((await get(ta.adminToken, 'equipmentReference=CSQU3054383')).body.events.length, 2);
});

test('a dcsa-tnt-3 batch that failed is retried byte for byte under its id', async () => {
  const path = '/dcsa-retry';
  rx.on(path, (_r, n) => (n === 1 ? { status: 503, body: 'busy' } : { status: 200 }));
  const integration = ok(
    await a.call('POST', '/api/v1/integrations', {
      name: `dcsa-retry-${process.env.TEST_DB}`,
      channel: 'webhook',
      ownerIds: [a.ownerId],
      destination: `${rx.url}${path}`,
      objectTypes: ['reeferdata'],
      webhook: { format: 'dcsa-tnt-3', mode: 'batch', batchSize: 50 },
      retry: { scheduleSeconds: [0.3] },
    }),
    201,
    'integration',
  );
  ok(
    await a.call('POST', '/api/v1/reefer-data', {
      assetId: box,
      whenCreated: new Date(Date.now() - 30_000).toISOString(),
      data: { supplyAirTemperature: -18.7 },
    }),
    201,
    'reefer',
  );
  const [first, second] = await waitFor(
    () => 'the batch and its retry',
    async () => (rx.for(path).length >= 2 ? rx.for(path) : undefined),
  );
  assert.equal(second!.body, first!.body);
  assert.equal(second!.headers['webhook-id'], first!.headers['webhook-id']);
  assert.equal(second!.headers['api-version'], '3.0.0');
  assert.deepEqual(checkTnt(JSON.parse(second!.body), 'PostEventsRequest'), []);
  await deliveryHistory(() => ta).allSucceeded(integration.id, 1);
});
