// The hostile-tenant suite, DCSA Track & Trace (GET /api/dcsa/tnt/v3/events; the bounds
// dcsaPageEvents and dcsaPageRows): tenant A has equipped boxes with dense data that makes few
// events (positions a tenth of a second apart, thinned to one per 15 minutes; temperature sensors,
// which make none) and asks for the widest filter over the widest range, the largest pages, and
// pages one event deep followed to the end, while tenant B works: B is not held, no page is past
// its bounds, every walk ends with every event once, and nothing of B's shows in A's answers. And
// A fills a booking to its bound of asset links (bookingAssetLinks), lists them and pulls the
// booking's events through all of those windows, while B works.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { iso6346CheckDigit } from '../../src/dcsa/iso6346.js';
import { hostileService, storePositions, whileBWorks } from './tenants.js';

const DCSA = '/api/dcsa/tnt/v3/events';
// A's link test makes over a thousand requests: past the default hourly rate limit, which is not what it tests.
const h = await hostileService({ RATE_LIMIT_MAX: '100000' });
const a = await h.tenant('dcsa-a', 12);
const b = await h.tenant('dcsa-b');

/** A valid ISO 6346 number for serial n of owner code `owner`. */
const containerNumber = (owner: string, n: number) => {
  const first = `${owner}U${String(n).padStart(6, '0')}`;
  return `${first}${iso6346CheckDigit(first)}`;
};

test('a tenant asks for its widest DCSA range, its largest pages and its deepest paging: B is not held, every page is bounded', async () => {
  for (const [n, assetId] of a.assetIds.entries()) {
    const r = await h.call('PATCH', `/api/v1/assets/${assetId}`, {
      key: a.key,
      body: { equipmentReference: containerNumber('HOS', n), isoEquipmentCode: '45R1' },
    });
    assert.equal(r.status, 200, r.text);
  }
  const theirs = containerNumber('BEE', 1);
  assert.equal(
    (
      await h.call('PATCH', `/api/v1/assets/${b.assetIds[0]}`, {
        key: b.key,
        body: { equipmentReference: theirs, isoEquipmentCode: '22R1' },
      })
    ).status,
    200,
  );
  assert.equal(
    (await h.call('POST', '/api/v1/reefer-data', { key: b.key, body: { assetId: b.assetIds[0], data: { supplyAirTemperature: 5 } } }))
      .status,
    201,
  );
  // 4,000 positions over 400 s (each asset's in one or two 15-minute buckets), 2,000 temperature
  // readings (no events) and 300 reefer records (one event each).
  await storePositions(h, a, 4);
  const now = Date.now();
  for (let k = 0; k < 2; k++) {
    const sensors = Array.from({ length: 1000 }, (_, i) => ({
      assetId: a.assetIds[i % a.assetIds.length],
      sensorId: `t-${i % 3}`,
      type: 'TEMPERATURE',
      value: -18 + (i % 5),
      whenCreated: new Date(now - 7_200_000 + (k * 1000 + i) * 1000).toISOString(),
    }));
    assert.equal((await h.call('POST', '/api/v1/sensor-data', { key: a.key, body: sensors })).status, 201);
  }
  const reefer = Array.from({ length: 300 }, (_, i) => ({
    assetId: a.assetIds[i % a.assetIds.length],
    whenCreated: new Date(now - 5_400_000 + i * 10_000).toISOString(),
    data: { supplyAirTemperature: -18 - (i % 3), temperatureSetpoint: -18 },
  }));
  assert.equal((await h.call('POST', '/api/v1/reefer-data', { key: a.key, body: reefer })).status, 201);

  const wide = `eventTypes=SHIPMENT,TRANSPORT,EQUIPMENT,IOT,REEFER&eventUpdatedDateTimeMin=1970-01-01T00:00:00Z&eventUpdatedDateTimeMax=9999-12-31T23:59:59Z`;
  /** Follows a query's cursors to the end: its pages' sizes and every event id. */
  const walk = async (query: string, limit: number) => {
    const ids: string[] = [];
    let pages = 0;
    let cursor: string | null = null;
    do {
      const r = await h.call('GET', `${DCSA}?${query}&limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, {
        key: a.key,
      });
      assert.equal(r.status, 200, `${query} page ${pages}: ${r.text.slice(0, 300)}`);
      assert.equal(r.headers.get('api-version'), '3.0.0');
      assert.ok(r.body.events.length <= limit, `a page of ${r.body.events.length} past limit ${limit}`);
      assert.ok(!r.text.includes(theirs), "B's equipment in A's answer");
      ids.push(...r.body.events.map((e: { eventID: string }) => e.eventID));
      cursor = r.headers.get('next-page-cursor');
      pages++;
      assert.ok(pages < 2000, 'the walk ends');
    } while (cursor);
    return { ids, pages };
  };
  const past = await h.call('GET', `${DCSA}?limit=1001`, { key: a.key });
  assert.equal(past.status, 400, 'a page past the bound is refused');

  const seen = await whileBWorks(h, b, () =>
    Promise.all([
      walk(wide, 1000),
      walk(wide, 1000),
      walk('eventTypes=IOT', 1),
      walk(wide, 7),
      h.call('GET', `${DCSA}?cursor=forged`, { key: a.key }),
    ]),
  );
  const [big, again, deep, small, forged] = seen.result as [
    Awaited<ReturnType<typeof walk>>,
    Awaited<ReturnType<typeof walk>>,
    Awaited<ReturnType<typeof walk>>,
    Awaited<ReturnType<typeof walk>>,
    { status: number },
  ];
  console.log(
    `dcsa: ${JSON.stringify({ events: big.ids.length, pagesOf1000: big.pages, pagesOf1: deep.pages, pagesOf7: small.pages, control: seen.control, during: seen.during, crowding: seen.crowding })}`,
  );
  assert.equal(forged.status, 400);
  // Every event once, whatever the page size; the same events asked again.
  assert.equal(new Set(big.ids).size, big.ids.length, 'no event twice');
  assert.deepEqual([...small.ids].sort(), [...big.ids].sort());
  assert.deepEqual(again.ids, big.ids);
  assert.deepEqual([...deep.ids].sort(), big.ids.filter((id) => id.startsWith('IOT-')).sort());
  // 300 reefer records, and per asset one position per 15 minutes its 400 s of positions touch.
  assert.equal(big.ids.filter((id) => id.startsWith('REEFER-MEAS-')).length, 300);
  const locations = big.ids.filter((id) => id.startsWith('IOT-LOC-')).length;
  assert.ok(locations >= a.assetIds.length && locations <= 2 * a.assetIds.length, `${locations} LOC events`);
  assert.equal(big.ids.length, 300 + locations, 'temperature readings make no events');
});

test('a tenant fills a booking to its bound of asset links, lists them and pulls its events through every window: B is not held', async () => {
  const booking = await h.call('POST', '/api/v1/booking-data', {
    key: a.key,
    body: { type: 'MAERSK_V1', name: 'many voyages', carrierBookingReference: 'HOSTILE0001' },
  });
  assert.equal(booking.status, 201, booking.text);
  const links = `/api/v1/booking-data/${booking.body.id}/assets`;
  const max = 1000;
  // One box, a thousand back-to-back minutes over the last 17 hours (its positions and readings fall in them).
  const start = Math.floor((Date.now() - 17 * 3_600_000) / 60_000) * 60_000;
  const minute = (i: number) => new Date(start + i * 60_000).toISOString();
  const statuses: number[] = [];
  const seen = await whileBWorks(h, b, async () => {
    for (let i = 0; i < max; i += 8) {
      const batch = await Promise.all(
        Array.from({ length: Math.min(8, max - i) }, (_, k) =>
          h.call('POST', links, { key: a.key, body: { assetId: a.assetIds[0], from: minute(i + k), to: minute(i + k + 1) } }),
        ),
      );
      statuses.push(...batch.map((r) => r.status));
    }
    const over = await h.call('POST', links, { key: a.key, body: { assetId: a.assetIds[1], from: minute(0), to: minute(1) } });
    const lists = await Promise.all(Array.from({ length: 4 }, () => h.call('GET', links, { key: a.key })));
    const pulled = await h.call('GET', `${DCSA}?carrierBookingReference=HOSTILE0001&limit=1000`, { key: a.key });
    return { over, lists, pulled };
  });
  const { over, lists, pulled } = seen.result as {
    over: { status: number; body: { field?: string } };
    lists: { status: number; body: unknown[] }[];
    pulled: { status: number; body: { events: { equipmentDetails: { equipmentReference: string } }[] }; text: string };
  };
  console.log(
    `dcsa links: ${JSON.stringify({ links: statuses.length, control: seen.control, during: seen.during, crowding: seen.crowding })}`,
  );
  assert.deepEqual([...new Set(statuses)], [201], 'every link up to the bound is made');
  assert.equal(over.status, 409, 'one past the bound is refused');
  for (const l of lists) {
    assert.equal(l.status, 200);
    assert.equal(l.body.length, max);
  }
  assert.equal(pulled.status, 200, pulled.text.slice(0, 300));
  assert.ok(pulled.body.events.length <= 1000);
  assert.ok(pulled.body.events.every((e) => e.equipmentDetails.equipmentReference === containerNumber('HOS', 0)));
  // B's booking of the same reference would be B's own: A's sees nothing of B, B's nothing of A.
  const theirs = await h.call('GET', `${DCSA}?carrierBookingReference=HOSTILE0001`, { key: b.key });
  assert.deepEqual(theirs.body.events, []);
});
