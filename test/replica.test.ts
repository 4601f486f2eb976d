// Reads from a streaming replica (API guide 16) against a real one: a primary and a replica this
// test starts itself (initdb, then pg_basebackup -R, each on a private socket). A credential's
// lists read the replica, except within READ_AFTER_WRITE_SECONDS of its own write; a replica
// whose replay is paused serves what it has until its lag passes REPLICA_MAX_LAG_SECONDS, then
// the primary serves; a replica that stops costs no request; the lag is a metric.
// @test-lanes postgres
// (a streaming replica of a PostgreSQL server: PostgreSQL only)
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { IN_CI, ok, ownerWithKey, REDIS_URL, startApp, TEST_DB, type TestApp, waitFor, connectPg } from './helpers.js';
import { primaryWithReplica } from './pg-server.js';

/** Runs one statement on a server (the replica's replay control). */
async function sql(url: string, text: string): Promise<void> {
  const c = await connectPg(url);
  try {
    await c.query(text);
  } finally {
    await c.end();
  }
}

const metric = async (ta: TestApp, name: string): Promise<number> => {
  const text = await (await fetch(`${ta.url}/metrics`)).text();
  const m = new RegExp(`^${name.replace(/[{}"]/g, (c) => `\\${c}`)} (-?[\\d.e+-]+)$`, 'm').exec(text);
  return m ? Number(m[1]) : Number.NaN;
};

if (TEST_DB === 'postgres') {
  test('lists read the replica; a credential’s own writes, a lagging replica and a stopped one send its reads to the primary', async (t) => {
    const pair = primaryWithReplica(t, IN_CI);
    if (!pair) return;
    const { primary, replica } = pair;

    // A replica that may lag an hour: what it serves is what it has replayed.
    const ta = await startApp(
      t,
      { DATABASE_READ_URL: replica.url, READ_AFTER_WRITE_SECONDS: '2', REPLICA_MAX_LAG_SECONDS: '3600' },
      { databaseUrl: primary.url },
    );
    t.after(() => ta.app.close());
    const writer = await ownerWithKey(ta, 'replica-fleet');
    const reader = ok(await ta.call('POST', '/api/v1/api-keys', { token: writer.key, body: { name: 'reader', scopes: ['read'] } }), 201);
    const list = async (key: string) =>
      ok(await ta.call('GET', '/api/v1/assets', { token: key }), 200).map((a: { name: string }) => a.name);
    const r1 = ok(await ta.call('POST', '/api/v1/assets', { token: writer.key, body: { name: 'R1' } }), 201);
    const position = (latitude: number) =>
      ta.call('POST', '/api/v1/locations', { token: writer.key, body: { assetId: r1.id, latitude, longitude: 4 } });
    ok(await position(51), 201);
    /** The reader's CSV export of the locations: its data lines (PostgreSQL's COPY, on the replica when it serves). */
    const exported = async () => {
      const r = await ta.call('GET', '/api/v1/locations?format=csv', { token: reader.key });
      assert.equal(r.status, 200, r.raw);
      return r.raw.trim().split('\n').length - 1;
    };
    await waitFor(
      () => 'the replica to have R1 and its location, and serve the reader',
      async () => (await metric(ta, 'replica_lag_seconds')) >= 0 && (await list(reader.key)).includes('R1') && (await exported()) === 1,
    );
    const fromReplica = await metric(ta, 'replica_reads_total{target="replica"}');
    assert.ok(fromReplica > 0, 'the reader’s lists came from the replica');

    // Replay paused: the replica keeps what it has. The writer reads its own write (the primary);
    // the reader, another credential, reads the replica and does not see it yet.
    await sql(replica.url, 'SELECT pg_wal_replay_pause()');
    ok(await ta.call('POST', '/api/v1/assets', { token: writer.key, body: { name: 'R2' } }), 201);
    assert.deepEqual((await list(writer.key)).sort(), ['R1', 'R2'], 'read after write: the primary');
    assert.deepEqual(await list(reader.key), ['R1'], 'the replica, paused, has not replayed R2');
    // Exports read the replica too: the location stored while it is paused is not in it yet.
    assert.equal(await exported(), 1);
    ok(await position(52), 201);
    assert.equal(await exported(), 1, 'the export, from the paused replica');
    assert.ok((await metric(ta, 'replica_reads_total{target="replica"}')) > fromReplica);
    // Past READ_AFTER_WRITE_SECONDS the writer reads the replica again.
    await waitFor(
      () => 'the writer back on the replica',
      async () => !(await list(writer.key)).includes('R2'),
    );

    // Another instance that allows 1 second of lag: once the lag passes it, the primary serves.
    const strict = await startApp(t, { DATABASE_READ_URL: replica.url, REPLICA_MAX_LAG_SECONDS: '1' }, { databaseUrl: primary.url });
    t.after(() => strict.app.close());
    await waitFor(
      () => 'the lag past 1 s, and the reader on the primary',
      async () =>
        (await metric(strict, 'replica_lag_seconds')) > 1 &&
        ok(await strict.call('GET', '/api/v1/assets', { token: reader.key }), 200).length === 2,
    );
    await sql(replica.url, 'SELECT pg_wal_replay_resume()');
    await waitFor(
      () => 'the replica to catch up',
      async () => (await metric(strict, 'replica_lag_seconds')) === 0 && (await list(reader.key)).length === 2,
    );
    assert.equal(await exported(), 2, 'the export, from the replica caught up');

    // A replica that stops: reads go on, from the primary; the lag says it cannot be reached.
    replica.stop();
    ok(await ta.call('POST', '/api/v1/assets', { token: writer.key, body: { name: 'R3' } }), 201);
    for (let i = 0; i < 3; i++) assert.equal((await list(reader.key)).length, 3, 'served by the primary');
    await waitFor(
      () => 'the lag metric to show the replica away',
      async () => (await metric(ta, 'replica_lag_seconds')) === -1,
    );
    replica.start();
    await waitFor(
      () => 'the replica back',
      async () => (await metric(ta, 'replica_lag_seconds')) >= 0,
    );
    const before = await metric(ta, 'replica_reads_total{target="replica"}');
    assert.equal((await list(reader.key)).length, 3);
    assert.ok((await metric(ta, 'replica_reads_total{target="replica"}')) > before, 'back on the replica');
  });

  test('with REDIS_URL, read after write holds across instances: a write on one sends the credential’s reads on another to the primary', async (t) => {
    const pair = primaryWithReplica(t, IN_CI);
    if (!pair) return;
    const { primary, replica } = pair;
    const env = { DATABASE_READ_URL: replica.url, READ_AFTER_WRITE_SECONDS: '600', REPLICA_MAX_LAG_SECONDS: '3600', REDIS_URL };
    const a = await startApp(t, env, { databaseUrl: primary.url });
    const b = await startApp(t, env, { databaseUrl: primary.url });
    t.after(() => Promise.all([a.app.close(), b.app.close()]));
    const o = await ownerWithKey(a, 'replica-pair');
    const other = ok(await a.call('POST', '/api/v1/api-keys', { token: o.key, body: { name: 'other', scopes: ['read'] } }), 201);
    await waitFor(
      () => 'both instances to read the replica',
      async () => (await metric(a, 'replica_lag_seconds')) >= 0 && (await metric(b, 'replica_lag_seconds')) >= 0,
    );
    await waitFor(
      () => 'the replica to have the keys',
      async () => (await b.call('GET', '/api/v1/assets', { token: other.key })).status === 200,
    );
    await sql(replica.url, 'SELECT pg_wal_replay_pause()');
    ok(await a.call('POST', '/api/v1/assets', { token: o.key, body: { name: 'P1' } }), 201);
    // On b, which saw no write of this credential: the note in Redis sends it to the primary.
    const names = (r: { body: { name: string }[] }) => r.body.map((x) => x.name);
    assert.deepEqual(names(await b.call('GET', '/api/v1/assets', { token: o.key })), ['P1']);
    // Another credential of the same owner reads the paused replica.
    assert.deepEqual(names(await b.call('GET', '/api/v1/assets', { token: other.key })), []);
    await sql(replica.url, 'SELECT pg_wal_replay_resume()');
  });
}
