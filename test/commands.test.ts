// API guide 3, 4 and 8: commands to reefer-connected assets. Created PENDING;
// PENDING -> SENT -> ACKNOWLEDGED | FAILED; PENDING -> CANCELLED by DELETE; past its time-to-live an
// open command reads EXPIRED; every other move is a 409.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { customer, startApp, ok, bad } from './helpers.js';

const ta = await startApp(undefined, { RATE_LIMIT_MAX: '100000', RATE_LIMIT_CONCURRENT: '1000' });

let n = 0;
async function tenant(label: string, opts: { parentId?: string } = {}) {
  const c = await customer(ta, label, opts);
  const { call } = c;
  /** An asset that has sent reefer data (so it may be commanded) unless `reefer` is false. */
  const asset = async (name: string, reefer = true): Promise<string> => {
    const id = await c.asset(name);
    if (reefer)
      ok(
        await call('POST', '/api/v1/reefer-data', { assetId: id, reeferClass: 'MH', data: { supplyAirTemperature: 4.5 } }),
        201,
        'reefer data',
      );
    return id;
  };
  const command = async (body: Record<string, unknown>): Promise<any> =>
    ok(await call('POST', '/api/v1/commands', body), 201, `command ${JSON.stringify(body)}`);
  const status = async (id: string): Promise<string> => ok(await call('GET', `/api/v1/commands/${id}`), 200, `get ${id}`).status;
  const list = async (query: string): Promise<any[]> => ok(await call('GET', `/api/v1/commands?${query}`), 200, `list ?${query}`);
  return { ...c, asset, command, status, list };
}

async function readOnlyKey(ownerId: string): Promise<string> {
  return ok(
    await ta.call('POST', '/api/v1/api-keys', { token: ta.adminToken, body: { name: `ro-${++n}`, ownerId, scopes: ['read'] } }),
    201,
    'reader key',
  ).key;
}

test('create: only for assets that sent reefer data; type echoed as command; uniqueId generated and unique per asset; validation', async () => {
  const a = await tenant('create');
  const quiet = await a.asset('quiet', false);
  const none = await a.call('POST', '/api/v1/commands', { assetId: quiet, type: 'POWER_ON' });
  bad(none, 409, '/assetId', 'asset without reefer data');
  assert.equal(none.body.code, 'CONFLICT');
  // Other data (a location) does not make an asset reefer-connected.
  ok(await a.call('POST', '/api/v1/locations', { assetId: quiet, latitude: 1, longitude: 2 }), 201);
  bad(await a.call('POST', '/api/v1/commands', { assetId: quiet, type: 'POWER_ON' }), 409, '/assetId', 'still no reefer data');
  ok(await a.call('POST', '/api/v1/reefer-data', { assetId: quiet, data: {} }), 201, 'first reefer data');

  const r = await a.call('POST', '/api/v1/commands', { assetId: quiet, type: 'SET_TEMPERATURE', parameters: { value: -18.5 } });
  const c = ok(r, 201, 'create after reefer data');
  assert.equal(r.headers.location, `${ta.url}/api/v1/commands/${c.id}`);
  assert.match(c.id, /^[1-9]\d*$/);
  assert.equal(c.status, 'PENDING');
  assert.equal(c.type, 'SET_TEMPERATURE');
  assert.equal(c.command, 'SET_TEMPERATURE');
  assert.deepEqual(c.parameters, { value: -18.5 });
  assert.equal(c.assetId, quiet);
  assert.equal(c.ownerId, a.ownerId);
  assert.equal(c.ttlSeconds, 3600);
  assert.equal(typeof c.uniqueId, 'string');
  assert.ok(c.uniqueId.length >= 8, 'a generated uniqueId');
  assert.match(c.whoCreated, /^apikey:/);
  assert.match(c.whenCreated, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  assert.deepEqual(
    ok(await a.call('GET', `/api/v1/commands/${c.id}`), 200),
    { ...c, attempts: [] },
    'the get adds the (empty) downlink history',
  );
  const c2 = await a.command({ assetId: quiet, type: 'POWER_OFF' });
  assert.notEqual(c2.uniqueId, c.uniqueId, 'generated ids differ');
  assert.equal(c2.parameters, null);
  assert.equal(c2.command, 'POWER_OFF');

  // uniqueId: the client's correlation id, unique per asset.
  const reefer = await a.asset('reefer');
  const mine = await a.command({ assetId: reefer, type: 'START_DEFROST', uniqueId: 'corr-1' });
  assert.equal(mine.uniqueId, 'corr-1');
  const dup = await a.call('POST', '/api/v1/commands', { assetId: reefer, type: 'START_PTI', uniqueId: 'corr-1' });
  bad(dup, 409, '/uniqueId', 'repeated uniqueId');
  assert.equal(
    (await a.command({ assetId: quiet, type: 'START_PTI', uniqueId: 'corr-1' })).uniqueId,
    'corr-1',
    'same uniqueId, another asset',
  );
  assert.equal((await a.list(`assetId=${reefer}`)).length, 1, 'the refused duplicate stored nothing');

  // Every type; the four SET_ types need a numeric parameters.value.
  for (const type of ['SET_TEMPERATURE', 'SET_HUMIDITY', 'SET_CO2', 'SET_O2']) {
    bad(await a.call('POST', '/api/v1/commands', { assetId: reefer, type }), 400, '/parameters/value', `${type} without parameters`);
    bad(
      await a.call('POST', '/api/v1/commands', { assetId: reefer, type, parameters: {} }),
      400,
      '/parameters/value',
      `${type} without value`,
    );
    bad(
      await a.call('POST', '/api/v1/commands', { assetId: reefer, type, parameters: { value: '5' } }),
      400,
      '/parameters/value',
      `${type} text value`,
    );
    bad(
      await a.call('POST', '/api/v1/commands', { assetId: reefer, type, parameters: { value: null } }),
      400,
      '/parameters/value',
      `${type} null value`,
    );
    assert.equal((await a.command({ assetId: reefer, type, parameters: { value: 0 } })).command, type);
  }
  for (const type of ['START_DEFROST', 'START_PTI', 'POWER_ON', 'POWER_OFF']) {
    assert.equal((await a.command({ assetId: reefer, type })).command, type);
  }
  bad(await a.call('POST', '/api/v1/commands', { assetId: reefer, type: 'SELF_DESTRUCT' }), 400, '/type', 'unknown type');
  bad(await a.call('POST', '/api/v1/commands', { assetId: reefer, type: 'power_on' }), 400, '/type', 'lower case type');
  bad(await a.call('POST', '/api/v1/commands', { assetId: reefer }), 400, '/type', 'type missing');
  bad(await a.call('POST', '/api/v1/commands', { type: 'POWER_ON' }), 400, '/assetId', 'assetId missing');
  bad(await a.call('POST', '/api/v1/commands', { assetId: reefer, type: 'POWER_ON', ttlSeconds: 0 }), 400, '/ttlSeconds', 'ttl 0');
  bad(
    await a.call('POST', '/api/v1/commands', { assetId: reefer, type: 'POWER_ON', ttlSeconds: 1.5 }),
    400,
    '/ttlSeconds',
    'fractional ttl',
  );
  bad(await a.call('POST', '/api/v1/commands', { assetId: reefer, type: 'POWER_ON', uniqueId: '' }), 400, '/uniqueId', 'empty uniqueId');
  bad(await a.call('POST', '/api/v1/commands', { assetId: reefer, type: 'POWER_ON', uniqueId: 'u\u0000' }), 400, '/uniqueId', 'NUL');
  bad(
    await a.call('POST', '/api/v1/commands', { assetId: reefer, type: 'POWER_ON', ownerId: '00000000-0000-4000-8000-000000000000' }),
    400,
    '/ownerId',
    'another ownerId',
  );
  assert.equal((await a.command({ assetId: reefer, type: 'POWER_ON', ownerId: a.ownerId })).ownerId, a.ownerId, 'its own ownerId');
  bad(
    await a.call('POST', '/api/v1/commands', { assetId: '00000000-0000-4000-8000-000000000000', type: 'POWER_ON' }),
    404,
    '/assetId',
    'unknown asset',
  );
  assert.equal((await a.command({ assetId: reefer, type: 'POWER_ON', ttlSeconds: 60 })).ttlSeconds, 60);
});

test('lifecycle: the device side lists PENDING, moves PENDING -> SENT -> ACKNOWLEDGED | FAILED; every other move is 409', async () => {
  const a = await tenant('life');
  const reefer = await a.asset('r1');
  const other = await a.asset('r2');
  const c = await a.command({ assetId: reefer, type: 'SET_TEMPERATURE', parameters: { value: 5 } });
  const d = await a.command({ assetId: reefer, type: 'START_DEFROST' });
  await a.command({ assetId: other, type: 'POWER_ON' });

  // The device polls its PENDING commands.
  assert.deepEqual(
    (await a.list(`status=PENDING&assetId=${reefer}&order=asc`)).map((x) => x.id),
    [c.id, d.id],
  );
  assert.deepEqual(
    (await a.list(`status=PENDING&assetId=${reefer}`)).map((x) => x.id),
    [d.id, c.id],
    'newest first by default',
  );
  assert.deepEqual(
    (await a.list(`type=START_DEFROST&assetId=${reefer}`)).map((x) => x.id),
    [d.id],
  );
  bad(await a.call('GET', '/api/v1/commands?status=DONE'), 400, '/status', 'unknown status filter');

  const patch = (id: string, status: string) => a.call('PATCH', `/api/v1/commands/${id}`, { status });
  bad(await patch(c.id, 'ACKNOWLEDGED'), 409, '/status', 'PENDING -> ACKNOWLEDGED');
  bad(await patch(c.id, 'FAILED'), 409, '/status', 'PENDING -> FAILED');
  bad(await patch(c.id, 'PENDING'), 409, '/status', 'PENDING is not a target (a well-formed status, an illegal move)');
  bad(await patch(c.id, 'EXPIRED'), 409, '/status', 'EXPIRED is not a target (only time makes a command expire)');
  bad(await a.call('PATCH', `/api/v1/commands/${c.id}`, {}), 400, '/status', 'no status');
  assert.equal(await a.status(c.id), 'PENDING', 'refused moves change nothing');

  const sent = ok(await patch(c.id, 'SENT'), 200, 'PENDING -> SENT');
  assert.equal(sent.status, 'SENT');
  bad(await patch(c.id, 'PENDING'), 409, '/status', 'SENT -> PENDING');
  assert.ok(Date.parse(sent.whenUpdated) >= Date.parse(c.whenUpdated));
  assert.deepEqual(
    (await a.list(`status=PENDING&assetId=${reefer}`)).map((x) => x.id),
    [d.id],
    'no longer pending',
  );
  assert.deepEqual(
    (await a.list(`status=SENT&assetId=${reefer}`)).map((x) => x.id),
    [c.id],
  );
  bad(await patch(c.id, 'SENT'), 409, '/status', 'SENT -> SENT');
  bad(await patch(c.id, 'CANCELLED'), 409, '/status', 'SENT -> CANCELLED');
  bad(await a.call('DELETE', `/api/v1/commands/${c.id}`), 409, undefined, 'DELETE a SENT command');
  assert.equal(ok(await patch(c.id, 'ACKNOWLEDGED'), 200, 'SENT -> ACKNOWLEDGED').status, 'ACKNOWLEDGED');
  for (const to of ['SENT', 'FAILED', 'ACKNOWLEDGED', 'CANCELLED']) bad(await patch(c.id, to), 409, '/status', `ACKNOWLEDGED -> ${to}`);
  bad(await a.call('DELETE', `/api/v1/commands/${c.id}`), 409, undefined, 'DELETE an ACKNOWLEDGED command');
  assert.equal(await a.status(c.id), 'ACKNOWLEDGED');

  // SENT -> FAILED is final too.
  ok(await patch(d.id, 'SENT'), 200);
  assert.equal(ok(await patch(d.id, 'FAILED'), 200, 'SENT -> FAILED').status, 'FAILED');
  for (const to of ['SENT', 'ACKNOWLEDGED', 'FAILED', 'CANCELLED']) bad(await patch(d.id, to), 409, '/status', `FAILED -> ${to}`);

  // DELETE cancels a PENDING command; the record stays readable.
  const e = await a.command({ assetId: reefer, type: 'POWER_OFF' });
  const del = await a.call('DELETE', `/api/v1/commands/${e.id}`);
  assert.equal(del.status, 204, del.raw);
  assert.equal(del.raw, '');
  assert.equal(await a.status(e.id), 'CANCELLED');
  assert.deepEqual(
    (await a.list(`status=CANCELLED&assetId=${reefer}`)).map((x) => x.id),
    [e.id],
  );
  bad(await a.call('DELETE', `/api/v1/commands/${e.id}`), 409, undefined, 'cancel twice');
  for (const to of ['SENT', 'ACKNOWLEDGED', 'FAILED']) bad(await patch(e.id, to), 409, '/status', `CANCELLED -> ${to}`);
  // PATCH to CANCELLED is the same move as DELETE.
  const f = await a.command({ assetId: reefer, type: 'POWER_ON' });
  assert.equal(ok(await patch(f.id, 'CANCELLED'), 200).status, 'CANCELLED');

  // Two devices racing to send the same command: one wins, the other gets 409.
  const g = await a.command({ assetId: reefer, type: 'START_PTI' });
  const race = await Promise.all([patch(g.id, 'SENT'), patch(g.id, 'SENT')]);
  assert.deepEqual(race.map((x) => x.status).sort(), [200, 409]);

  bad(await a.call('GET', '/api/v1/commands/abc'), 404, undefined, 'bad id');
  bad(await a.call('PATCH', '/api/v1/commands/987654321', { status: 'SENT' }), 404, undefined, 'unknown id');
});

test('time-to-live: an open command past it reads EXPIRED, is listed as EXPIRED only, and can no longer move', async () => {
  const a = await tenant('ttl');
  const reefer = await a.asset('ttl-1');
  // One-minute commands, moved long before their minute is up however busy the machine is; then
  // the test moves their clock a minute on (it owns that clock) instead of waiting for it.
  const lasting = await a.command({ assetId: reefer, type: 'SET_CO2', parameters: { value: 5 } });
  const acked = await a.command({ assetId: reefer, type: 'START_PTI', ttlSeconds: 60 });
  ok(await a.call('PATCH', `/api/v1/commands/${acked.id}`, { status: 'SENT' }), 200);
  ok(await a.call('PATCH', `/api/v1/commands/${acked.id}`, { status: 'ACKNOWLEDGED' }), 200);
  const cancelled = await a.command({ assetId: reefer, type: 'START_DEFROST', ttlSeconds: 60 });
  assert.equal((await a.call('DELETE', `/api/v1/commands/${cancelled.id}`)).status, 204);
  const sent = await a.command({ assetId: reefer, type: 'POWER_OFF', ttlSeconds: 60 });
  ok(await a.call('PATCH', `/api/v1/commands/${sent.id}`, { status: 'SENT' }), 200);
  const pending = await a.command({ assetId: reefer, type: 'POWER_ON', ttlSeconds: 60 });
  assert.equal(pending.ttlSeconds, 60);
  assert.deepEqual(
    (await a.list(`status=PENDING&assetId=${reefer}&order=asc`)).map((x) => x.id),
    [lasting.id, pending.id],
  );
  const db = ta.app.services.db;
  const ttlIds = [acked.id, cancelled.id, sent.id, pending.id];
  const { rows: exact } = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM commands WHERE id = ANY($1::int8[]) AND expires_at = when_created + make_interval(secs => 60)`,
    [ttlIds],
  );
  assert.equal(exact[0]!.n, 4, 'a command expires its time-to-live after its creation');
  await db.query(
    `UPDATE commands SET when_created = when_created - interval '61 seconds', expires_at = expires_at - interval '61 seconds'
      WHERE id = ANY($1::int8[])`,
    [[lasting.id, ...ttlIds]],
  );
  // And on the real clock: a 1-second command left alone reads EXPIRED once its second is over.
  const short = await a.command({ assetId: await a.asset('ttl-2'), type: 'POWER_ON', ttlSeconds: 1 });
  const deadline = Date.now() + 30_000;
  while ((await a.status(short.id)) !== 'EXPIRED') {
    assert.ok(Date.now() < deadline, 'a 1-second command still open after 30 s');
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(await a.status(pending.id), 'EXPIRED');
  assert.equal(await a.status(sent.id), 'EXPIRED', 'SENT is open too');
  assert.equal(await a.status(acked.id), 'ACKNOWLEDGED', 'a closed command never expires');
  assert.equal(await a.status(cancelled.id), 'CANCELLED');
  assert.equal(await a.status(lasting.id), 'PENDING');
  assert.deepEqual(
    (await a.list(`status=EXPIRED&assetId=${reefer}&order=asc`)).map((x) => x.id),
    [sent.id, pending.id],
  );
  assert.deepEqual(
    (await a.list(`status=PENDING&assetId=${reefer}`)).map((x) => x.id),
    [lasting.id],
  );
  assert.deepEqual(
    (await a.list(`status=SENT&assetId=${reefer}`)).map((x) => x.id),
    [],
  );
  const all = await a.list(`assetId=${reefer}&order=asc`);
  assert.deepEqual(
    all.map((x) => x.status),
    ['PENDING', 'ACKNOWLEDGED', 'CANCELLED', 'EXPIRED', 'EXPIRED'],
    'the list shows the effective status',
  );
  bad(await a.call('PATCH', `/api/v1/commands/${pending.id}`, { status: 'SENT' }), 409, '/status', 'EXPIRED -> SENT');
  bad(await a.call('PATCH', `/api/v1/commands/${sent.id}`, { status: 'ACKNOWLEDGED' }), 409, '/status', 'EXPIRED -> ACKNOWLEDGED');
  bad(await a.call('DELETE', `/api/v1/commands/${pending.id}`), 409, undefined, 'cancel an EXPIRED command');
  assert.equal(await a.status(pending.id), 'EXPIRED');
});

test("tenancy and scopes: another owner's command is 404; a read-only key reads but cannot write; a parent commands its child's assets", async () => {
  const a = await tenant('ten-a');
  const b = await tenant('ten-b');
  const ar = await a.asset('a-r');
  const br = await b.asset('b-r');
  const bc = await b.command({ assetId: br, type: 'POWER_ON' });
  for (const [m, body] of [['GET'], ['PATCH', { status: 'SENT' }], ['DELETE']] as [string, unknown?][]) {
    bad(await a.call(m, `/api/v1/commands/${bc.id}`, body), 404, undefined, `${m} another owner's command`);
  }
  assert.equal(await b.status(bc.id), 'PENDING', 'untouched');
  assert.deepEqual(await a.list(`assetId=${br}`), []);
  assert.ok((await a.list('')).every((x) => x.ownerId === a.ownerId));
  bad(await a.call('POST', '/api/v1/commands', { assetId: br, type: 'POWER_ON' }), 404, '/assetId', "another owner's asset");

  const ro = await readOnlyKey(a.ownerId);
  const ac = await a.command({ assetId: ar, type: 'POWER_OFF' });
  const w = await ta.call('POST', '/api/v1/commands', { token: ro, body: { assetId: ar, type: 'POWER_ON' } });
  bad(w, 403, undefined, 'read-only POST');
  assert.equal(w.body.code, 'FORBIDDEN');
  bad(await ta.call('PATCH', `/api/v1/commands/${ac.id}`, { token: ro, body: { status: 'SENT' } }), 403, undefined, 'read-only PATCH');
  bad(await ta.call('DELETE', `/api/v1/commands/${ac.id}`, { token: ro }), 403, undefined, 'read-only DELETE');
  assert.equal(ok(await ta.call('GET', `/api/v1/commands/${ac.id}`, { token: ro }), 200).status, 'PENDING');
  assert.equal((ok(await ta.call('GET', '/api/v1/commands?status=PENDING', { token: ro }), 200) as any[]).length, 1);

  // Write on a descendant: the parent creates and moves its child's commands; the child never sees the parent's.
  const child = await tenant('ten-child', { parentId: a.ownerId });
  const cr = await child.asset('c-r');
  const pc = await a.command({ assetId: cr, type: 'SET_O2', parameters: { value: 21 } });
  assert.equal(pc.ownerId, child.ownerId, "a command belongs to its asset's owner");
  assert.equal(ok(await child.call('PATCH', `/api/v1/commands/${pc.id}`, { status: 'SENT' }), 200).status, 'SENT');
  bad(await child.call('GET', `/api/v1/commands/${ac.id}`), 404, undefined, 'child reads parent command');
  bad(
    await a.call('POST', '/api/v1/commands', { assetId: cr, type: 'POWER_ON', ownerId: a.ownerId }),
    400,
    '/ownerId',
    "the parent's ownerId on a child asset",
  );
});

test('set points take the ranges a reefer controller takes: 1e308 degrees is a 400 naming the value, and nothing is stored', async () => {
  const a = await tenant('setpoints');
  const assetId = await a.asset('SP1');
  for (const [type, value] of [
    ['SET_TEMPERATURE', 1e308],
    ['SET_TEMPERATURE', -40.5],
    ['SET_TEMPERATURE', 40.1],
    ['SET_HUMIDITY', 101],
    ['SET_HUMIDITY', -1],
    ['SET_CO2', 31],
    ['SET_O2', 22],
  ] as const) {
    const r = await a.call('POST', '/api/v1/commands', { assetId, type, parameters: { value } });
    bad(r, 400, '/parameters/value', `${type} ${value}`);
    assert.match(r.body.message, /takes parameters.value from/);
  }
  assert.equal((await a.list(`assetId=${assetId}`)).length, 0, 'nothing stored');
  for (const [type, value] of [
    ['SET_TEMPERATURE', -40],
    ['SET_TEMPERATURE', 40],
    ['SET_TEMPERATURE', -18.5],
    ['SET_HUMIDITY', 85],
    ['SET_CO2', 5],
    ['SET_O2', 2.5],
  ] as const) {
    await a.command({ assetId, type, parameters: { value } });
  }
});

test('SET_MODE takes parameters.mode (continuous, cycle, sleep); CLEAR_ALARMS takes none; expiresAt is whenCreated + ttlSeconds', async () => {
  const a = await tenant('modes');
  const assetId = await a.asset('moded');
  bad(await a.call('POST', '/api/v1/commands', { assetId, type: 'SET_MODE' }), 400, '/parameters/mode', 'no mode');
  bad(
    await a.call('POST', '/api/v1/commands', { assetId, type: 'SET_MODE', parameters: { mode: 'turbo' } }),
    400,
    '/parameters/mode',
    'unknown mode',
  );
  bad(
    await a.call('POST', '/api/v1/commands', { assetId, type: 'SET_MODE', parameters: { mode: 5 } }),
    400,
    '/parameters/mode',
    'not a string',
  );
  for (const mode of ['continuous', 'cycle', 'sleep']) {
    const c = await a.command({ assetId, type: 'SET_MODE', parameters: { mode } });
    assert.deepEqual(c.parameters, { mode });
  }
  const clear = await a.command({ assetId, type: 'CLEAR_ALARMS', ttlSeconds: 90 });
  assert.equal(Date.parse(clear.expiresAt) - Date.parse(clear.whenCreated), 90_000);
  assert.equal(clear.message, null);
  const got = ok(await a.call('GET', `/api/v1/commands/${clear.id}`), 200);
  assert.deepEqual(got.attempts, [], 'no MQTT device: no downlink history');
});

test('a flood of commands for one asset stops at COMMAND_MAX_OPEN_PER_ASSET open ones (409, nothing saved); ended ones free the room', async () => {
  const small = await startApp(undefined, { RATE_LIMIT_MAX: '100000', COMMAND_MAX_OPEN_PER_ASSET: '3' });
  try {
    const c = await customer(small, 'flood');
    const assetId = await c.asset('flooded');
    ok(await c.call('POST', '/api/v1/reefer-data', { assetId, data: {} }), 201);
    const made = [];
    for (let i = 0; i < 3; i++) made.push(ok(await c.call('POST', '/api/v1/commands', { assetId, type: 'POWER_ON' }), 201));
    const r = await c.call('POST', '/api/v1/commands', { assetId, type: 'POWER_ON' });
    bad(r, 409, '/assetId', 'the fourth open one');
    assert.match(r.body.message, /COMMAND_MAX_OPEN_PER_ASSET allows 3/);
    const list = ok(await c.call('GET', `/api/v1/commands?assetId=${assetId}`), 200);
    assert.equal(list.length, 3, 'nothing saved');
    assert.equal((await c.call('DELETE', `/api/v1/commands/${made[0].id}`)).status, 204);
    ok(await c.call('POST', '/api/v1/commands', { assetId, type: 'POWER_ON' }), 201, 'room again');
  } finally {
    await small.app.close();
  }
});
