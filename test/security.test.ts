// Regression tests for the holes found by probing the running service as an attacker would
// (API guide 1, 2 and 9): each one reproduced on the old code and pins the fix.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { addressPolicy, isAllowedAddress, vetUrl } from '../src/delivery/address.js';
import { signatureHeader } from '../src/delivery/channels/webhook/webhook.js';
import { getAtPath, setAtPath } from '../src/http/dotted-path.js';
import { bad, customer, ok, startApp, type TestApp } from './helpers.js';
import { Receiver } from './receiver.js';

/** A customer with one asset. */
async function fleet(ta: TestApp) {
  const c = await customer(ta, 'fleet');
  return { ...c, assetId: await c.asset('fleet-MSKU1') };
}

/** Counts rows straight from the database (not capped by any page size). */
async function sqlCount(ta: TestApp, table: string): Promise<number> {
  const { rows } = await ta.app.services.db.query<{ n: string }>(`SELECT count(*)::text AS n FROM ${table}`);
  return Number(rows[0]!.n);
}

test('numbers must be finite everywhere, free JSON included: 1e400 is a 400 naming the field and stores nothing', async (t) => {
  const ta = await startApp(t);
  const f = await fleet(ta);
  const raw = (path: string, json: string) =>
    ta.call('POST', path, { token: f.key, body: json, headers: { 'content-type': 'application/json' } });
  const cases: [string, string, string, string][] = [
    ['/api/v1/sensor-data', `{"assetId":"${f.assetId}","sensorId":"s1","type":"TEMPERATURE","value":1e400}`, '/value', 'sensor_data'],
    ['/api/v1/sensor-data', `[{"assetId":"${f.assetId}","sensorId":"s1","type":"TEMPERATURE","value":-1e400}]`, '/0/value', 'sensor_data'],
    ['/api/v1/locations', `{"assetId":"${f.assetId}","latitude":1e400,"longitude":1}`, '/latitude', 'locations'],
    ['/api/v1/reefer-data', `{"assetId":"${f.assetId}","data":{"deep":{"x":[1,2,1e999]}}}`, '/data/deep/x/2', 'reefer_data'],
    [
      '/api/v1/commands',
      `{"assetId":"${f.assetId}","type":"SET_TEMPERATURE","parameters":{"value":1e400}}`,
      '/parameters/value',
      'commands',
    ],
  ];
  for (const [path, json, field, table] of cases) {
    const before = await sqlCount(ta, table);
    bad(await raw(path, json), 400, field, `${path} ${json}`);
    assert.equal(await sqlCount(ta, table), before, `${path}: nothing stored`);
  }
  // The list still answers for the owner and the operator.
  ok(await ta.call('GET', '/api/v1/sensor-data', { token: f.key }), 200);
  ok(await ta.call('GET', '/api/v1/sensor-data', { token: ta.adminToken }), 200);
});

test('lists survive odd values already in the database (non-finite floats stored before the fix)', async (t) => {
  const ta = await startApp(t);
  const f = await fleet(ta);
  const s = ok(
    await ta.call('POST', '/api/v1/sensor-data', {
      token: f.key,
      body: { assetId: f.assetId, sensorId: 's1', type: 'TEMPERATURE', value: 1 },
    }),
    201,
  );
  await ta.app.services.db.query(`UPDATE sensor_data SET value_number = 'Infinity' WHERE id = $1`, [s.id]);
  const l = ok(
    await ta.call('POST', '/api/v1/locations', { token: f.key, body: { assetId: f.assetId, latitude: 1, longitude: 1, altitude: 3 } }),
    201,
  );
  await ta.app.services.db.query(`UPDATE locations SET altitude = 'NaN', speed = '-Infinity' WHERE id = $1`, [l.id]);
  for (const token of [f.key, ta.adminToken]) {
    const sl = ok(await ta.call('GET', '/api/v1/sensor-data', { token }), 200);
    assert.equal(sl.length, 1);
    assert.equal(sl[0].value, null, 'a value JSON cannot carry is rendered as null');
    ok(await ta.call('GET', `/api/v1/sensor-data/${s.id}`, { token }), 200);
    const ll = ok(await ta.call('GET', '/api/v1/locations', { token }), 200);
    assert.equal(ll[0].altitude, null);
    ok(await ta.call('GET', '/api/v1/locations/latest', { token }), 200);
  }
});

const LOCAL_PUSH = { PUSH_ALLOW_HTTP: 'true', PUSH_ALLOWED_NETWORKS: '127.0.0.0/8' };

test('date-times outside 1970..9999 in bodies and query strings are a 400 at once', async (t) => {
  // A record window reaching 1970 (RECORD_MAX_AGE_DAYS), to test the format's own edges (record-time.test.ts tests the window).
  const ta = await startApp(t, { ...LOCAL_PUSH, RECORD_MAX_AGE_DAYS: '36500' });
  const f = await fleet(ta);
  const year0 = '0000-01-01T00:00:00Z';
  for (const path of ['/api/v1/locations', '/api/v1/sensor-data', '/api/v1/events', '/api/v1/commands', '/api/v1/assets']) {
    bad(await ta.call('GET', `${path}?from=${year0}`, { token: f.key }), 400, '/from', path);
    bad(await ta.call('GET', `${path}?to=1969-12-31T23:59:59Z`, { token: f.key }), 400, '/to', path);
  }
  bad(
    await ta.call('POST', '/api/v1/locations', {
      token: f.key,
      body: { assetId: f.assetId, latitude: 1, longitude: 1, whenCreated: year0 },
    }),
    400,
    '/whenCreated',
  );
  bad(
    await ta.call('POST', '/api/v1/locations', {
      token: f.key,
      body: [{ assetId: f.assetId, latitude: 1, longitude: 1, whenCreated: '1969-12-31T23:59:59.999Z' }],
    }),
    400,
    '/0/whenCreated',
  );
  assert.equal(await sqlCount(ta, 'locations'), 0);
  // The edges themselves are accepted.
  ok(await ta.call('GET', '/api/v1/locations?from=1970-01-01T00:00:00Z&to=9999-12-31T23:59:59Z', { token: f.key }), 200);
  const r = await ta.call('POST', '/api/v1/locations', {
    token: f.key,
    body: { assetId: f.assetId, latitude: 1, longitude: 1, whenCreated: '1970-01-01T00:00:00Z' },
  });
  ok(r, 201);
  // Delivery history and the stream (whose bad since used to hang, holding an in-flight slot).
  const integ = ok(
    await ta.call('POST', '/api/v1/integrations', {
      token: ta.adminToken,
      body: { name: 'h', channel: 'webhook', enabled: false, ownerIds: [f.ownerId], destination: 'http://127.0.0.1:9/hook' },
    }),
    201,
  );
  bad(
    await ta.call('POST', `/api/v1/integrations/${integ.id}/deliveries/redeliver`, {
      token: ta.adminToken,
      body: { status: 'FAILED', from: year0, to: '2026-01-01T00:00:00Z' },
    }),
    400,
    '/from',
  );
  bad(await ta.call('GET', `/api/v1/integrations/${integ.id}/deliveries?from=${year0}`, { token: ta.adminToken }), 400, '/from');
  for (const accept of ['application/x-ndjson', 'text/event-stream']) {
    const s = await ta.call('GET', `/api/v1/deliveries/stream?channel=webhook&since=${year0}`, {
      token: ta.adminToken,
      headers: { accept },
    });
    bad(s, 400, '/since', accept);
  }
  // A year-0 value already stored (by an older version) does not break lists.
  // (Through the service's database handle: the row moves to a partition made for year 1.)
  await ta.app.services.db.query(`UPDATE locations SET when_created = '0001-01-01T00:00:00Z'`);
  ok(await ta.call('GET', '/api/v1/locations', { token: f.key }), 200);
});

test("the webhook test endpoint never sends an integration's credentials to a URL the caller names", async (t) => {
  const ta = await startApp(t, LOCAL_PUSH);
  const rx = await new Receiver().start();
  t.after(() => rx.close());
  const f = await fleet(ta);
  const secret = `whsec_${Buffer.from('0123456789abcdef0123456789abcdef').toString('base64')}`;
  for (const auth of [
    { type: 'apiKey', token: 'stored-api-key' },
    { type: 'basic', username: 'u', password: 'stored-password' },
    { type: 'header', name: 'x-secret', value: 'stored-header' },
  ]) {
    const integ = ok(
      await ta.call('POST', '/api/v1/integrations', {
        token: ta.adminToken,
        body: {
          name: `i-${auth.type}`,
          channel: 'webhook',
          enabled: false,
          ownerIds: [f.ownerId],
          destination: `${rx.url}/own`,
          destinations: { location: `${rx.url}/own-location` },
          webhook: { auth, signingSecret: secret },
        },
      }),
      201,
    );
    const before = rx.received.length;
    // The attacker's URL (a write-scoped key of the customer): refused before anything is sent.
    for (const url of [`${rx.url}/steal`, `${rx.url}/own?x=1`, `${rx.url}/OWN`]) {
      bad(await ta.call('POST', '/api/v1/webhooks/test', { token: f.key, body: { url, integrationId: integ.id } }), 400, '/url', url);
    }
    assert.equal(rx.received.length, before, 'nothing was sent to a URL that is not a destination');
    // Its own destinations get the auth and the signature.
    for (const path of ['/own', '/own-location']) {
      const r = ok(
        await ta.call('POST', '/api/v1/webhooks/test', { token: f.key, body: { url: `${rx.url}${path}`, integrationId: integ.id } }),
        200,
      );
      assert.equal(r.success, true, JSON.stringify(r));
      const got = rx.for(path).at(-1)!;
      assert.ok(got.headers['webhook-signature'], 'signed');
      const sent = JSON.stringify(got.headers);
      assert.ok(/stored-|Basic /.test(sent), `auth sent to its own destination: ${sent}`);
    }
  }
  // Without an integration: no credentials at all, and the URL rules of saving apply (400).
  ok(await ta.call('POST', '/api/v1/webhooks/test', { token: f.key, body: { url: `${rx.url}/plain` } }), 200);
  assert.equal(rx.for('/plain').at(-1)!.headers.authorization, undefined);
  const noInfo = await ta.call('POST', '/api/v1/webhooks/test', {
    token: f.key,
    body: { url: `http://user:pw@127.0.0.1:${new URL(rx.url).port}/userinfo` },
  });
  bad(noInfo, 400, '/url');
  assert.match(noInfo.body.message, /credentials in the URL/);
  assert.equal(rx.for('/userinfo').length, 0);
  bad(await ta.call('POST', '/api/v1/webhooks/test', { token: f.key, body: { url: 'ftp://127.0.0.1/x' } }), 400, '/url');
});

test('dotted paths refuse __proto__, prototype and constructor; nothing reaches Object.prototype', async (t) => {
  const ta = await startApp(t, LOCAL_PUSH);
  const rx = await new Receiver().start();
  t.after(() => rx.close());
  const f = await fleet(ta);
  const base = { channel: 'webhook', ownerIds: [f.ownerId], objectTypes: ['location'], destination: `${rx.url}/hook` };
  for (const path of ['__proto__.public', 'a.__proto__', 'constructor.prototype.x', 'prototype', 'a..b']) {
    const before = await sqlCount(ta, 'integrations');
    bad(
      await ta.call('POST', '/api/v1/integrations', {
        token: ta.adminToken,
        body: { ...base, name: `p-${path}`, webhook: { injectEventId: true, injectEventIdPath: path } },
      }),
      400,
      '/webhook/injectEventIdPath',
      path,
    );
    assert.equal(await sqlCount(ta, 'integrations'), before);
  }
  // One stored by an older version (written straight into the table) is walked safely on delivery.
  const integ = ok(
    await ta.call('POST', '/api/v1/integrations', {
      token: ta.adminToken,
      body: { ...base, name: 'legacy', webhook: { injectEventId: true, injectEventIdPath: 'meta.eventId' } },
    }),
    201,
  );
  await ta.app.services.db.query(
    `UPDATE integrations SET settings = jsonb_set(settings, '{injectEventIdPath}', '"__proto__.public"') WHERE id = $1`,
    [integ.id],
  );
  ok(await ta.call('POST', '/api/v1/locations', { token: f.key, body: { assetId: f.assetId, latitude: 1, longitude: 2 } }), 201);
  await rx.waitFor(() => rx.for('/hook').length === 1, 60_000, 'the delivery');
  assert.equal(({} as Record<string, unknown>).public, undefined, 'Object.prototype untouched');
  assert.equal(Object.hasOwn(Object.prototype, 'public'), false);
  const body = JSON.parse(rx.for('/hook')[0]!.body);
  assert.equal(typeof getAtPath(body, ['__proto__', 'public']), 'string', 'the id sits in an own member named __proto__');
  // The service still authenticates: an unauthenticated call is 401, not a pass.
  assert.equal((await ta.call('GET', '/api/v1/assets')).status, 401);
  ok(await ta.call('GET', '/api/v1/assets', { token: f.key }), 200);
  // Unit level: the walk never leaves own members.
  const o: Record<string, unknown> = {};
  setAtPath(o, ['__proto__', 'polluted'], 1);
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
  assert.equal(getAtPath(o, ['__proto__', 'polluted']), 1);
  assert.equal(getAtPath({}, ['constructor']), undefined);
});

test('addresses: IPv4-translated, NAT64, 6to4, Teredo and mapped forms of private addresses are refused; the message says how to allow', async () => {
  const policy = addressPolicy(true, []);
  for (const ip of [
    '::ffff:0:127.0.0.1',
    '::ffff:0:7f00:1',
    '::ffff:127.0.0.1',
    '::127.0.0.1',
    '64:ff9b::a00:1',
    '64:ff9b:1::c0a8:101',
    '2002:a9fe:a9fe::1',
    '2001:0:4136:e378:8000:63bf:3fff:fdd2',
    '169.254.169.254',
    '100.64.0.1',
    '198.18.0.1',
    'fd00::1',
    'fe80::1',
    '::',
    '0.0.0.0',
  ]) {
    assert.equal(isAllowedAddress(ip, policy), false, ip);
  }
  for (const ip of ['8.8.8.8', '2606:4700:4700::1111', '::ffff:0:8.8.8.8', '64:ff9b::808:808'])
    assert.equal(isAllowedAddress(ip, policy), true, ip);
  const local = addressPolicy(true, ['127.0.0.0/8']);
  assert.equal(isAllowedAddress('::ffff:0:127.0.0.1', local), true, 'the allowlist applies to the embedded address');
  await assert.rejects(vetUrl('http://[::ffff:0:127.0.0.1]/hook', policy), (e: Error) => {
    assert.match(e.message, /not a public address/);
    assert.match(e.message, /PUSH_ALLOWED_NETWORKS/);
    return true;
  });
});

test('a request whose body trickles in is closed with 408 after REQUEST_TIMEOUT_SECONDS, over a real socket, and frees its slot', async (t) => {
  const ta = await startApp(t, { REQUEST_TIMEOUT_SECONDS: '2', RATE_LIMIT_CONCURRENT: '1' });
  const f = await fleet(ta);
  const { port } = new URL(ta.url);
  const sock = net.connect(Number(port), '127.0.0.1');
  await once(sock, 'connect');
  let answer = '';
  sock.on('data', (c: Buffer) => {
    answer += c.toString('utf8');
  });
  const closed = once(sock, 'close');
  const body = JSON.stringify({ assetId: f.assetId, latitude: 1, longitude: 2 });
  sock.write(
    `POST /api/v1/locations HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${f.key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
  );
  // One byte at a time until the server gives up (bounded: the body would be complete long before 60 s of this).
  let sent = 0;
  const trickle = setInterval(() => {
    if (sent < body.length - 1 && !sock.destroyed) sock.write(body[sent++]!);
  }, 250);
  t.after(() => clearInterval(trickle));
  const deadline = setTimeout(() => sock.destroy(new Error('no 408 within 60 s')), 60_000);
  await closed;
  clearTimeout(deadline);
  clearInterval(trickle);
  assert.match(answer, /^HTTP\/1\.1 408 /, answer);
  const json = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4));
  assert.equal(json.code, 'REQUEST_TIMEOUT');
  assert.equal(typeof json.message, 'string');
  assert.equal(await sqlCount(ta, 'locations'), 0, 'nothing stored');
  // The credential's one concurrency slot is free again: a normal request over a socket passes.
  const res = await fetch(`${ta.url}/api/v1/assets`, { headers: { authorization: `Bearer ${f.key}` } });
  assert.equal(res.status, 200);
  // Headers that never finish are cut the same way.
  const slow = net.connect(Number(port), '127.0.0.1');
  await once(slow, 'connect');
  let slowAnswer = '';
  slow.on('data', (c: Buffer) => {
    slowAnswer += c.toString('utf8');
  });
  slow.write('GET /healthz HTTP/1.1\r\nHost: x\r\n');
  const slowDeadline = setTimeout(() => slow.destroy(new Error('no 408 within 60 s')), 60_000);
  await once(slow, 'close');
  clearTimeout(slowDeadline);
  assert.match(slowAnswer, /^HTTP\/1\.1 408 /, slowAnswer);
});

test('every webhook is signed: a whsec_ secret is generated and shown once; rotation keeps the previous one signing for 24 h', async (t) => {
  const ta = await startApp(t, LOCAL_PUSH);
  const rx = await new Receiver().start();
  t.after(() => rx.close());
  const f = await fleet(ta);
  const created = ok(
    await ta.call('POST', '/api/v1/integrations', {
      token: ta.adminToken,
      body: { name: 'signed', channel: 'webhook', ownerIds: [f.ownerId], objectTypes: ['location'], destination: `${rx.url}/signed` },
    }),
    201,
  );
  const first = created.webhook.signingSecret as string;
  assert.match(first, /^whsec_[A-Za-z0-9+/=]{40,}$/);
  assert.equal(created.webhook.signingSecretSet, true);
  const got = ok(await ta.call('GET', `/api/v1/integrations/${created.id}`, { token: ta.adminToken }), 200);
  assert.equal(got.webhook.signingSecret, undefined, 'shown once, never again');
  // The stored secret is encrypted at rest.
  const { rows } = await ta.app.services.db.query<{ secrets: string }>('SELECT secrets FROM integrations WHERE id = $1', [created.id]);
  assert.ok(!rows[0]!.secrets.includes(first.slice(6, 20)));

  const verify = (secret: string, r: { body: string; headers: Record<string, unknown> }) =>
    new Webhook(secret).verify(r.body, {
      'webhook-id': r.headers['webhook-id'] as string,
      'webhook-timestamp': r.headers['webhook-timestamp'] as string,
      'webhook-signature': r.headers['webhook-signature'] as string,
    });
  const store = () => ta.call('POST', '/api/v1/locations', { token: f.key, body: { assetId: f.assetId, latitude: 1, longitude: 2 } });
  ok(await store(), 201);
  await rx.waitFor(() => rx.for('/signed').length === 1, 60_000, 'first delivery');
  verify(first, rx.for('/signed')[0]!);

  const rotated = ok(await ta.call('POST', `/api/v1/integrations/${created.id}/rotate-signing-secret`, { token: ta.adminToken }), 200);
  const second = rotated.webhook.signingSecret as string;
  assert.match(second, /^whsec_/);
  assert.notEqual(second, first);
  const until = Date.parse(rotated.webhook.previousSigningSecretExpiresAt);
  assert.ok(Math.abs(until - (Date.now() + 24 * 3600_000)) < 10 * 60_000, 'the previous secret signs for 24 h');
  ok(await store(), 201);
  await rx.waitFor(() => rx.for('/signed').length === 2, 60_000, 'second delivery');
  const second_ = rx.for('/signed')[1]!;
  assert.equal(String(second_.headers['webhook-signature']).split(' ').length, 2, 'two v1 signatures during the overlap');
  verify(first, second_);
  verify(second, second_);
  // Past the overlap only the new secret signs (checked on the header builder with its own clock).
  const cfg = { webhook: { signingSecret: second, previousSigningSecret: { secret: first, until } } } as any;
  const msg = { url: '', id: 'msg_1', objectType: 'location', body: '{}' };
  assert.equal(signatureHeader(cfg, msg, 1, until - 1)['webhook-signature']!.split(' ').length, 2);
  assert.equal(signatureHeader(cfg, msg, 1, until + 1)['webhook-signature']!.split(' ').length, 1);

  // A GET body PUT back keeps the secret; null is refused (every webhook is signed).
  const current = ok(await ta.call('GET', `/api/v1/integrations/${created.id}`, { token: ta.adminToken }), 200);
  const { id: _i, whenCreated: _c, whenUpdated: _u, ...writable } = current;
  const put = ok(await ta.call('PUT', `/api/v1/integrations/${created.id}`, { token: ta.adminToken, body: writable }), 200);
  assert.equal(put.webhook.signingSecret, undefined, 'no new secret, nothing shown');
  ok(await store(), 201);
  await rx.waitFor(() => rx.for('/signed').length === 3, 60_000, 'third delivery');
  verify(second, rx.for('/signed')[2]!);
  bad(
    await ta.call('PATCH', `/api/v1/integrations/${created.id}`, { token: ta.adminToken, body: { webhook: { signingSecret: null } } }),
    400,
    '/webhook/signingSecret',
  );
});

test('HTTP errors Node finds before any route (oversized headers, malformed requests) answer in the error envelope and close', async (t) => {
  const ta = await startApp(t);
  const { port } = new URL(ta.url);
  const raw = async (request: string) => {
    const sock = net.connect(Number(port), '127.0.0.1');
    await once(sock, 'connect');
    let answer = '';
    sock.on('data', (c: Buffer) => {
      answer += c.toString('utf8');
    });
    let reset: Error | undefined;
    sock.on('error', (e) => {
      reset = e;
    });
    const closed = new Promise((resolve) => sock.once('close', resolve));
    const deadline = setTimeout(() => sock.destroy(), 60_000);
    sock.write(request);
    await closed;
    clearTimeout(deadline);
    assert.ok(answer.startsWith('HTTP/1.1 '), `an answer before the close (${reset?.message ?? 'no error'}): ${answer.slice(0, 200)}`);
    const json = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4));
    return { status: Number(answer.slice(9, 12)), json, connectionClose: /\r\nConnection: close\r\n/i.test(answer) };
  };
  const big = await raw(`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(64 * 1024)}\r\n\r\n`);
  assert.equal(big.status, 431);
  assert.equal(big.json.code, 'HEADERS_TOO_LARGE');
  assert.equal(typeof big.json.message, 'string');
  assert.ok(big.connectionClose);
  const garbage = await raw('NOT-HTTP\r\n\r\n');
  assert.equal(garbage.status, 400);
  assert.equal(garbage.json.code, 'MALFORMED_REQUEST');
  assert.equal(typeof garbage.json.error, 'string');
});
