// @test-lanes postgres
// DELIVERY_WORKERS (src/delivery/processes.ts): with PostgreSQL the service's entry delivers from a
// process of its own beside the HTTP one. That process is started again when it dies, its counters
// reach /metrics, and SIGTERM stops both, the delivery process handing its work back.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { test } from 'node:test';
import { createTestDatabase, waitFor } from './helpers.js';
import { Receiver } from './receiver.js';
import { alive, serviceProcess } from './service-process.js';

/** The child processes of `pid` (the service's delivery processes). */
const childrenOf = (pid: number): number[] => {
  try {
    return fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(' ').filter(Boolean).map(Number);
  } catch {
    return [];
  }
};

test('the service delivers from its own delivery process; one that dies is started again; SIGTERM stops both', {
  timeout: 180_000,
}, async (t) => {
  const databaseUrl = await createTestDatabase();
  const rx = await new Receiver().start();
  t.after(() => rx.close());
  rx.on('/hook', () => ({ status: 200 }));
  const svc = await serviceProcess(databaseUrl, { PUSH_ALLOW_HTTP: 'true', PUSH_ALLOWED_NETWORKS: '127.0.0.0/8', DELIVERY_POLL_MS: '200' });
  t.after(() => svc.kill());

  const [first] = await waitFor(
    () => 'one delivery process',
    async () => {
      const c = childrenOf(svc.pid);
      return c.length === 1 ? c : undefined;
    },
  );
  const owner = await svc.api('POST', '/owners', { name: 'processes' });
  const asset = await svc.api('POST', '/assets', { name: 'p-1', ownerId: owner.body.id });
  const integration = await svc.api('POST', '/integrations', {
    name: 'processes',
    channel: 'webhook',
    ownerIds: [owner.body.id],
    objectTypes: ['location'],
    destination: `${rx.url}/hook`,
    webhook: { mode: 'single' },
  });
  assert.equal(integration.status, 201, JSON.stringify(integration.body));
  const store = async (latitude: number) =>
    assert.equal((await svc.api('POST', '/locations', { assetId: asset.body.id, latitude, longitude: 0 })).status, 201);

  await store(1);
  await rx.waitFor(() => rx.for('/hook').length >= 1, 90_000, 'the first location delivered');
  // The HTTP process's /metrics counts what its delivery process sent.
  await waitFor(
    () => 'delivery_requests_sent_total >= 1 in /metrics',
    async () => /delivery_requests_sent_total (\d+)/.exec(await (await fetch(`${svc.base}/metrics`)).text())?.[1] !== '0',
  );

  // The delivery process dies: the service starts another, which delivers what was stored meanwhile.
  process.kill(first!, 'SIGKILL');
  await store(2);
  const [second] = await waitFor(
    () => 'a new delivery process',
    async () => {
      const c = childrenOf(svc.pid);
      return c.length === 1 && c[0] !== first ? c : undefined;
    },
  );
  await rx.waitFor(() => rx.for('/hook').length >= 2, 90_000, 'the location stored while no delivery process ran, delivered');
  const latitudes = rx
    .for('/hook')
    .map((r) => JSON.parse(r.body).latitude)
    .sort();
  assert.deepEqual(latitudes, [1, 2]);

  await svc.stop();
  await waitFor(
    () => 'the delivery process to stop with the service',
    async () => !alive(second!),
  );
});
