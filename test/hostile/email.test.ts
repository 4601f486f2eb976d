// What one customer can make the service mail (API guide 9, "E-mail"; the bounds EMAIL_MAX_RECIPIENTS
// and EMAIL_MAX_MESSAGES_PER_HOUR): never more recipients per integration than the bound, however
// they are split between to, cc and escalateTo or added by a PATCH; never more messages an hour
// than the ceiling, however many assets alert; never a stranger more than one confirmation request
// a day, however often the address is taken out and put back or integrations made and deleted.
// Another tenant's webhook goes on meanwhile.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import type { EmailChannel } from '../../src/delivery/channels/email/index.js';
import { bad, customer, deliveryHistory, fleet, frozenSpecification, ok, startApp, type TestApp, waitFor } from '../helpers.js';
import { Receiver } from '../receiver.js';
import { SmtpSink } from '../smtp.js';

const smtp = await new SmtpSink().start();
const ta: TestApp = await startApp(undefined, {
  SMTP_URL: smtp.url,
  EMAIL_TICK_MS: '0',
  EMAIL_MAX_RECIPIENTS: '3',
  EMAIL_MAX_MESSAGES_PER_HOUR: '4',
  PUSH_ALLOW_HTTP: 'true',
  PUSH_ALLOWED_NETWORKS: '127.0.0.0/8',
  DELIVERY_POLL_MS: '100',
  RATE_LIMIT_MAX: '100000',
  DB_POOL_SIZE: '4',
});
const rx = await new Receiver().start();
after(async () => {
  await rx.close();
  await smtp.close();
});
const { reached } = deliveryHistory(() => ta);
const worker = () => (ta.app.services.engine!.channel('email') as EmailChannel).worker;
let n = 0;

test('a customer cannot name more recipients than EMAIL_MAX_RECIPIENTS, however split or patched', async () => {
  const c = await customer(ta, 'many-recipients', { base: '/api/v1' });
  const post = (email: Record<string, unknown>) =>
    c.call('POST', '/integrations', { name: `r-${++n}`, channel: 'email', ownerIds: [c.ownerId], email });
  const list = Array.from({ length: 1000 }, (_, k) => `victim${k}@example.com`);
  bad(await post({ to: list }), 400, '/email/to', '1000 in to');
  bad(await post({ to: list.slice(0, 2), cc: list.slice(2, 4) }), 400, '/email/to', 'to and cc');
  bad(await post({ to: list.slice(0, 1), cc: list.slice(1, 3), escalateTo: list.slice(3, 4) }), 400, '/email/to', 'with escalateTo');
  const i = ok(await post({ to: list.slice(0, 3) }), 201);
  bad(await c.call('PATCH', `/integrations/${i.id}`, { email: { escalateTo: list.slice(3, 4) } }), 400, '/email/to', 'patched');
  // The same address in another case is one recipient.
  ok(await c.call('PATCH', `/integrations/${i.id}`, { email: { cc: [list[0]!.toUpperCase()] } }), 200);
  bad(await post({ to: list.slice(0, 1), maxMessagesPerHour: 5 }), 400, '/email/maxMessagesPerHour', 'past the hour ceiling');
});

test('a flood of alerts on many assets mails each recipient at most EMAIL_MAX_MESSAGES_PER_HOUR times an hour; the rest wait in a digest; another tenant goes on', async () => {
  const c = await customer(ta, 'flood', { base: '/api/v1' });
  const healthy = await fleet(ta, 'email-neighbour', { channel: 'webhook', destination: `${rx.url}/email-neighbour` });
  const to = 'ops@example.com';
  // Operator-made: trusted recipients, and the hour's ceiling is the customer's default (4).
  const i = ok(
    await ta.call('POST', '/api/v1/integrations', {
      token: ta.adminToken,
      body: { name: `flood-${++n}`, channel: 'email', ownerIds: [c.ownerId], email: { to: [to], minIntervalMinutes: 0 } },
    }),
    201,
  );
  assert.equal(i.email.maxMessagesPerHour, 4);
  const assets: string[] = [];
  for (let k = 0; k < 12; k++) {
    const id = await c.asset(`flood-${k}`);
    await frozenSpecification(c.call, id);
    assets.push(id);
  }
  const at = new Date(Date.now() - 60_000).toISOString();
  ok(
    await c.call(
      'POST',
      '/reefer-data',
      assets.map((assetId) => ({ assetId, whenCreated: at, data: { supplyAirTemperature: 5 } })),
    ),
    201,
  );
  await healthy.store(2);
  await reached(healthy.integrationId, 2, 'SUCCEEDED');
  await reached(i.id, 24, 'SUCCEEDED');
  await worker().tick(new Date());
  assert.equal(smtp.to(to).length, 4, 'four messages in the hour, not twelve');
  // The hour over: one digest tells the other eight.
  await worker().tick(new Date(Date.now() + 61 * 60_000));
  const digest = await waitFor(
    () => 'the digest',
    async () => smtp.to(to)[4],
  );
  assert.equal(digest.subject, '[ALERT] Digest: 8 alerts for 8 assets');
});

test('a stranger named by a customer gets one confirmation request, not one per save or per integration', async () => {
  const c = await customer(ta, 'spam-confirm', { base: '/api/v1' });
  const stranger = `stranger-${Date.now()}@example.com`;
  const make = () =>
    c.call('POST', '/integrations', { name: `s-${++n}`, channel: 'email', ownerIds: [c.ownerId], email: { to: [stranger] } });
  const i = ok(await make(), 201);
  await worker().tick(new Date());
  assert.equal(smtp.to(stranger).length, 1);
  // Taken out and put back, many times; then made again by new integrations.
  for (let k = 0; k < 5; k++) {
    ok(await c.call('PATCH', `/integrations/${i.id}`, { email: { to: ['someone@example.com'] } }), 200);
    ok(await c.call('PATCH', `/integrations/${i.id}`, { email: { to: [stranger] } }), 200);
  }
  ok(await c.call('DELETE', `/integrations/${i.id}`), 204);
  for (let k = 0; k < 3; k++) {
    const j = ok(await make(), 201);
    ok(await c.call('DELETE', `/integrations/${j.id}`), 204);
  }
  ok(await make(), 201);
  await worker().tick(new Date());
  await worker().tick(new Date());
  assert.equal(smtp.to(stranger).length, 1, 'one request a day, whatever the customer does');
});
