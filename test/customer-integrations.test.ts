// Customers run their own integrations (API guide 9): a customer's key creates, changes, tests,
// rotates, redelivers and deletes its own integration end to end; another owner's is a 404 to it;
// the operator's are read-only to it (403); a changed destination drops a stored credential; the
// operator's caps hold.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { bad, customer, ok, startApp, storeLocations } from './helpers.js';
import { Receiver } from './receiver.js';

const ta = await startApp(undefined, {
  PUSH_ALLOW_HTTP: 'true',
  PUSH_ALLOWED_NETWORKS: '127.0.0.0/8',
  DELIVERY_POLL_MS: '100',
  RATE_LIMIT_MAX: '100000',
  CUSTOMER_MAX_INTEGRATIONS: '3',
  CUSTOMER_MAX_CONCURRENT_REQUESTS: '6',
  DB_POOL_SIZE: '4',
});
const rx = await new Receiver().start();
const other = await new Receiver().start(); // another origin (port)
after(async () => {
  await rx.close();
  await other.close();
});

let n = 0;
const hook = (extra: Record<string, unknown> = {}) => ({
  name: `own-${++n}`,
  channel: 'webhook',
  destination: `${rx.url}/own-${n}`,
  objectTypes: ['location'],
  retry: { scheduleSeconds: [0.2] },
  ...extra,
});

test("a customer's key manages its own integration end to end; its read key sees it; nobody else's credentials reach it", async () => {
  const c = await customer(ta, 'self', { base: '/api/v1' });
  const child = await customer(ta, 'self-child', { base: '/api/v1', parentId: c.ownerId });
  const readKey = ok(
    await ta.call('POST', '/api/v1/api-keys', { token: ta.adminToken, body: { name: 'self-read', ownerId: c.ownerId, scopes: ['read'] } }),
    201,
  ).key as string;
  const read = (method: string, url: string, body?: unknown) =>
    ta.call(method, `/api/v1${url}`, { token: readKey, ...(body === undefined ? {} : { body }) });
  const stranger = await customer(ta, 'stranger', { base: '/api/v1' });
  const asset = await c.asset('self-1');
  const made = ok(await c.call('POST', '/integrations', { ...hook(), ownerIds: [c.ownerId] }), 201, 'create');
  assert.equal(made.managedBy, 'customer');
  assert.match(made.webhook.signingSecret, /^whsec_/, 'the secret, shown once');
  const path = new URL(made.destination).pathname;
  // Delivered end to end.
  const [locationId] = await storeLocations(ta, c.key, asset, [12]);
  await rx.waitFor(() => rx.for(path).length >= 1, 60_000, 'the location');
  assert.equal(JSON.parse(rx.for(path)[0]!.body).id, Number(locationId));
  // Changed, tested, rotated, redelivered.
  assert.equal(ok(await c.call('PATCH', `/integrations/${made.id}`, { name: 'renamed' }), 200).name, 'renamed');
  const sent = ok(await c.call('POST', '/webhooks/test', { url: made.destination, integrationId: made.id }), 200);
  assert.equal(sent.success, true);
  assert.ok(rx.for(path).some((r) => r.headers['webhook-id']?.toString().startsWith('test_')));
  const rotated = ok(await c.call('POST', `/integrations/${made.id}/rotate-signing-secret`, {}), 200);
  assert.notEqual(rotated.webhook.signingSecret, made.webhook.signingSecret);
  const deliveries = ok(await c.call('GET', `/integrations/${made.id}/deliveries`), 200) as any[];
  assert.equal(deliveries.length, 1);
  assert.equal(ok(await c.call('POST', `/integrations/${made.id}/deliveries/${deliveries[0].id}/redeliver`, {}), 202).count, 1);
  await rx.waitFor(() => rx.for(path).filter((r) => !r.headers['webhook-id']?.toString().startsWith('test_')).length >= 2, 60_000, 'again');
  // A read key of the owner sees it, with its name and attempts, and changes nothing; a child owner's
  // key does not see it (its owner is the parent's).
  assert.ok((ok(await read('GET', '/integrations'), 200) as any[]).some((i) => i.id === made.id && i.name === 'renamed'));
  assert.ok((ok(await read('GET', `/integrations/${made.id}/deliveries`), 200) as any[])[0].attemptsLog.length >= 1);
  bad(await read('PATCH', `/integrations/${made.id}`, { name: 'read only' }), 403, undefined, 'read scope');
  assert.equal((await child.call('GET', `/integrations/${made.id}`)).status, 404);
  // Another owner: 404 on every route, nothing changed.
  for (const [method, url, body] of [
    ['GET', `/integrations/${made.id}`, undefined],
    ['PATCH', `/integrations/${made.id}`, { name: 'stolen' }],
    ['POST', `/integrations/${made.id}/rotate-signing-secret`, {}],
    ['GET', `/integrations/${made.id}/deliveries`, undefined],
    ['DELETE', `/integrations/${made.id}`, undefined],
  ] as const) {
    bad(await stranger.call(method, url, body), 404, undefined, `${method} ${url}`);
  }
  assert.ok(!(ok(await stranger.call('GET', '/integrations'), 200) as any[]).some((i) => i.id === made.id));
  bad(await stranger.call('POST', '/integrations', { ...hook(), ownerIds: [c.ownerId] }), 404, '/ownerIds/0', "another owner's owner");
  assert.equal(ok(await ta.call('GET', `/api/v1/integrations/${made.id}`, { token: ta.adminToken }), 200).name, 'renamed');
  // Deleted by its customer.
  assert.equal((await c.call('DELETE', `/integrations/${made.id}`)).status, 204);
  assert.equal((await c.call('GET', `/integrations/${made.id}`)).status, 404);
});

test("the operator's integration is read-only to the customer it serves", async () => {
  const c = await customer(ta, 'served', { base: '/api/v1' });
  const op = ok(await ta.call('POST', '/api/v1/integrations', { token: ta.adminToken, body: { ...hook(), ownerIds: [c.ownerId] } }), 201);
  assert.equal(op.managedBy, 'operator');
  const seen = ok(await c.call('GET', `/integrations/${op.id}`), 200);
  assert.equal(seen.name, op.name);
  assert.ok(seen.stats, 'with its stats');
  bad(await c.call('PATCH', `/integrations/${op.id}`, { name: 'mine now' }), 403, undefined, 'patch');
  bad(await c.call('PUT', `/integrations/${op.id}`, { ...hook(), ownerIds: [c.ownerId] }), 403, undefined, 'put');
  bad(await c.call('POST', `/integrations/${op.id}/rotate-signing-secret`, {}), 403, undefined, 'rotate');
  bad(await c.call('DELETE', `/integrations/${op.id}`), 403, undefined, 'delete');
  assert.equal(ok(await c.call('GET', `/integrations/${op.id}`), 200).name, op.name, 'unchanged');
});

test('a changed destination origin drops the stored credential; the same origin keeps it', async () => {
  const c = await customer(ta, 'moved', { base: '/api/v1' });
  const asset = await c.asset('moved-1');
  const made = ok(
    await c.call('POST', '/integrations', {
      ...hook({ webhook: { auth: { type: 'apiKey', token: 'secret-for-rx' } } }),
      ownerIds: [c.ownerId],
    }),
    201,
  );
  // Another path on the same origin: kept.
  const samePath = `/moved-same-${n}`;
  const same = ok(await c.call('PATCH', `/integrations/${made.id}`, { destination: `${rx.url}${samePath}` }), 200);
  assert.deepEqual(same.webhook.auth, { type: 'apiKey' });
  await storeLocations(ta, c.key, asset, [1]);
  await rx.waitFor(() => rx.for(samePath).length >= 1, 60_000, 'the same origin');
  assert.equal(rx.for(samePath)[0]!.headers.authorization, 'Bearer secret-for-rx');
  // Another origin: dropped, and nothing reaches it with the secret.
  const otherPath = `/moved-other-${n}`;
  const moved = ok(await c.call('PATCH', `/integrations/${made.id}`, { destination: `${other.url}${otherPath}` }), 200);
  assert.equal(moved.webhook.auth, null, 'the credential entered for the old origin is dropped');
  await storeLocations(ta, c.key, asset, [2]);
  await other.waitFor(() => other.for(otherPath).length >= 1, 60_000, 'the other origin');
  assert.equal(other.for(otherPath)[0]!.headers.authorization, undefined);
  // Putting the auth back without its secret is a 400 (the stored one is gone), with it fine.
  bad(await c.call('PATCH', `/integrations/${made.id}`, { webhook: { auth: { type: 'apiKey' } } }), 400, '/webhook/auth/token');
});

test("the operator's caps: integrations per organisation, and the pace ceilings", async () => {
  const top = await customer(ta, 'capped', { base: '/api/v1' });
  const child = await customer(ta, 'capped-child', { base: '/api/v1', parentId: top.ownerId });
  bad(
    await top.call('POST', '/integrations', { ...hook({ webhook: { maxConcurrentRequests: 7 } }), ownerIds: [top.ownerId] }),
    400,
    '/webhook/maxConcurrentRequests',
  );
  const first = ok(await top.call('POST', '/integrations', { ...hook(), ownerIds: [top.ownerId] }), 201);
  assert.equal(first.webhook.maxItemsPerMinute, 60000, 'no pace given: the ceiling');
  ok(await child.call('POST', '/integrations', { ...hook(), ownerIds: [child.ownerId] }), 201);
  ok(await top.call('POST', '/integrations', { ...hook(), ownerIds: [child.ownerId] }), 201);
  // The child counts towards its top-level owner's three.
  const refused = await child.call('POST', '/integrations', { ...hook(), ownerIds: [child.ownerId] });
  assert.equal(refused.status, 409, refused.raw);
  assert.match(refused.body.message, /CUSTOMER_MAX_INTEGRATIONS 3/);
  // The operator is not capped; a delete frees a place.
  ok(await ta.call('POST', '/api/v1/integrations', { token: ta.adminToken, body: { ...hook(), ownerIds: [top.ownerId] } }), 201);
  assert.equal((await top.call('DELETE', `/integrations/${first.id}`)).status, 204);
  ok(await child.call('POST', '/integrations', { ...hook(), ownerIds: [child.ownerId] }), 201);
  // A read-only key creates nothing.
  const reader = await customer(ta, 'capped-reader', { base: '/api/v1', parentId: top.ownerId, scopes: ['read'] });
  bad(await reader.call('POST', '/integrations', { ...hook(), ownerIds: [reader.ownerId] }), 403, undefined);
});
