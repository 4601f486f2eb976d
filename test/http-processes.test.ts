// @test-lanes postgres
// HTTP_WORKERS (src/instance/): one instance serves HTTP from several processes on one port, and
// behaves as one toward its users: a credential's rate limit, an owner's open result streams, a
// device disabled through the API and /metrics count for the instance, whichever process a
// connection reaches. An HTTP process that dies is started again; SIGTERM stops them all, and so does
// the coordinator's death.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import { test } from 'node:test';
import { createTestDatabase, waitFor } from './helpers.js';
import { alive, serviceProcess } from './service-process.js';

/** The child processes of `pid`: its HTTP processes and its delivery process. */
const childrenOf = (pid: number): number[] => {
  try {
    return fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(' ').filter(Boolean).map(Number);
  } catch {
    return [];
  }
};
const isHttp = (pid: number) => {
  try {
    return !fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('delivery-main');
  } catch {
    return false;
  }
};
const httpChildren = (pid: number) => childrenOf(pid).filter(isHttp);

/** One request on a connection of its own (so the kernel picks a process for each), with a request id to find in the log. */
function fresh(
  base: string,
  method: string,
  path: string,
  opts: { key?: string; body?: unknown; id?: string; accept?: string; keepOpen?: boolean } = {},
): Promise<{ status: number; text: string; res: http.IncomingMessage }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = {};
    if (opts.key) headers.authorization = `Bearer ${opts.key}`;
    if (opts.id) headers['x-request-id'] = opts.id;
    if (opts.accept) headers.accept = opts.accept;
    const body = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    if (body) headers['content-type'] = 'application/json';
    const req = http.request(`${base}${path}`, { method, headers, agent: false }, (res) => {
      // A stream that is to stay open answers with its headers only.
      if (opts.keepOpen && res.statusCode === 200) return resolve({ status: 200, text: '', res });
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text, res }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

test('two HTTP processes on one port count limits, streams, devices and /metrics for the instance; a dead one comes back; they stop with the coordinator', {
  timeout: 240_000,
}, async (t) => {
  const databaseUrl = await createTestDatabase();
  const svc = await serviceProcess(databaseUrl, {
    HTTP_WORKERS: '2',
    LOG_LEVEL: 'info',
    RATE_LIMIT_MAX: '30',
    STREAM_MAX_OPEN_PER_OWNER: '2',
  });
  t.after(() => svc.kill());
  const [a, b] = await waitFor(
    () => 'two HTTP processes',
    async () => {
      const c = httpChildren(svc.pid);
      return c.length === 2 ? c : undefined;
    },
  );
  assert.ok(a && b);

  const owner = await svc.api('POST', '/owners', { name: 'processes' });
  assert.equal(owner.status, 201, JSON.stringify(owner.body));
  const newKey = async (name: string) => {
    const k = await svc.api('POST', '/api-keys', { name, ownerId: owner.body.id, scopes: ['read', 'write', 'admin'] });
    assert.equal(k.status, 201, JSON.stringify(k.body));
    return k.body.key as string;
  };
  const counted = await newKey('counted');

  // A credential's limit (RATE_LIMIT_MAX=30 per hour): 45 requests, each on a connection of its own,
  // reach both processes; 30 pass in all, not 30 in each.
  const statuses: number[] = [];
  for (let i = 0; i < 45; i++) statuses.push((await fresh(svc.base, 'GET', '/api/v1/assets', { key: counted, id: `limit-${i}` })).status);
  assert.equal(statuses.filter((s) => s === 200).length, 30, `200s: ${statuses.join(' ')}`);
  assert.equal(statuses.filter((s) => s === 429).length, 15, `429s: ${statuses.join(' ')}`);
  // The log says which process answered each: both did.
  const answeredBy = new Set<number>();
  await waitFor(
    () => 'the log lines of the 45 requests',
    async () => {
      for (const line of svc.logTail().split('\n')) {
        const m = /"pid":(\d+).*"reqId":"limit-\d+"/.exec(line);
        if (m) answeredBy.add(Number(m[1]));
      }
      return answeredBy.size >= 2 || undefined;
    },
  );
  assert.deepEqual([...answeredBy].sort(), [a, b].sort());

  // /metrics, from whichever process a scrape reaches, sums them: the 45 requests of that route.
  for (let i = 0; i < 4; i++) {
    const text = (await fresh(svc.base, 'GET', '/metrics')).text;
    let sum = 0;
    for (const m of text.matchAll(/^http_requests_total\{method="GET",route="\/api\/v1\/assets",status="(\d+)"\} (\d+)$/gm))
      sum += Number(m[2]);
    assert.equal(sum, 45, 'GET /api/v1/assets answered, in all processes');
    assert.match(text, /^deliveries_pending \d+$/m, 'the instance-wide gauges, once');
    assert.equal(text.match(/^deliveries_pending /gm)?.length, 1);
  }

  // An owner's open result streams (STREAM_MAX_OPEN_PER_OWNER=2), each on a connection of its own.
  const streamer = await newKey('streamer');
  const sse = { key: streamer, accept: 'text/event-stream', keepOpen: true };
  const open: http.IncomingMessage[] = [];
  t.after(() => {
    for (const r of open) r.destroy();
  });
  for (let i = 0; i < 2; i++) {
    const s = await fresh(svc.base, 'GET', '/api/v1/deliveries/stream', sse);
    assert.equal(s.status, 200, s.text);
    open.push(s.res);
  }
  for (let i = 0; i < 6; i++) {
    const s = await fresh(svc.base, 'GET', '/api/v1/deliveries/stream', sse);
    assert.equal(s.status, 429, `a third stream of the owner, attempt ${i + 1}: ${s.text}`);
  }
  open.shift()!.destroy();
  const again = await waitFor(
    () => 'a stream admitted once one closed',
    async () => {
      const s = await fresh(svc.base, 'GET', '/api/v1/deliveries/stream', sse);
      if (s.status === 200) return s;
      return undefined;
    },
  );
  open.push(again.res);

  // A device disabled through one process is refused by every process at once (they cached it).
  const asset = await svc.api('POST', '/assets', { name: 'tracker', ownerId: owner.body.id });
  const device = await svc.api('POST', '/devices', { uniqueId: 'proc-dev-1', protocol: 'osmand', assetId: asset.body.id });
  assert.equal(device.status, 201, JSON.stringify(device.body));
  const send = (i: number) => fresh(svc.base, 'GET', `/ingest/osmand?id=proc-dev-1&lat=1&lon=${i / 100}`);
  for (let i = 0; i < 8; i++) assert.equal((await send(i)).status, 200);
  const disabled = await svc.api('PATCH', `/devices/${device.body.id}`, { disabled: true });
  assert.equal(disabled.status, 200, JSON.stringify(disabled.body));
  for (let i = 0; i < 8; i++) assert.equal((await send(100 + i)).status, 404, `a position after the device was disabled, ${i + 1}`);

  // An HTTP process that dies is started again; meanwhile and after, the instance answers.
  process.kill(a, 'SIGKILL');
  await waitFor(
    () => 'a new HTTP process beside the one left',
    async () => {
      const now = httpChildren(svc.pid);
      return (now.length === 2 && now.includes(b) && !now.includes(a)) || undefined;
    },
  );
  for (let i = 0; i < 8; i++) assert.equal((await fresh(svc.base, 'GET', '/healthz')).status, 200);

  // SIGTERM stops them all.
  const before = childrenOf(svc.pid);
  await svc.stop();
  await waitFor(
    () => 'every child process to stop with the service',
    async () => before.every((p) => !alive(p)) || undefined,
  );

  // The coordinator killed outright: its HTTP processes notice and stop (no orphan holds the port).
  await svc.start();
  const orphans = await waitFor(
    () => 'two HTTP processes after the start',
    async () => {
      const now = httpChildren(svc.pid);
      return now.length === 2 ? now : undefined;
    },
  );
  process.kill(svc.pid, 'SIGKILL');
  await waitFor(
    () => 'the HTTP processes to stop once their coordinator is gone',
    async () => orphans.every((p) => !alive(p)) || undefined,
  );
});
