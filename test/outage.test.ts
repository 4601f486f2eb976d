// A database outage: the service runs against a PostgreSQL this test starts itself on a
// Unix socket in its own private folder (no TCP port another process could take while it is down), which is stopped for some seconds and started again. Ingest during the outage fails
// with a clear 503 and stores nothing; nothing accepted before or after is lost; delivery resumes
// by itself.
// @test-lanes postgres
// (a database that stops and starts again: PostgreSQL only)
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { IN_CI, ownerWithKey, startApp, TEST_DB, undelivered } from './helpers.js';
import { Receiver } from './receiver.js';

const PG_BIN = (() => {
  try {
    const versions = fs.readdirSync('/usr/lib/postgresql').sort();
    return path.join('/usr/lib/postgresql', versions[versions.length - 1]!, 'bin');
  } catch {
    return undefined;
  }
})();

/** Runs a PostgreSQL tool as the postgres user (the server refuses to run as root). */
function asPostgres(tool: string, args: string[]): void {
  const cmd = path.join(PG_BIN!, tool);
  const argv = process.getuid?.() === 0 ? ['runuser', '-u', 'postgres', '--', cmd, ...args] : [cmd, ...args];
  execFileSync(argv[0]!, argv.slice(1), { stdio: 'pipe' });
}

if (TEST_DB === 'postgres') {
  test('ingest answers 503 while the database is down, nothing accepted is lost, and delivery resumes by itself', async (t) => {
    if (!PG_BIN) {
      if (IN_CI) throw new Error('PostgreSQL server binaries not found under /usr/lib/postgresql');
      t.skip('PostgreSQL server binaries not found under /usr/lib/postgresql');
      return;
    }
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tracking-outage-'));
    fs.chmodSync(dir, 0o777);
    const data = path.join(dir, 'data');
    asPostgres('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync']);
    // No TCP (listen_addresses empty): only the socket in the private folder, the same at each start.
    const start = () =>
      asPostgres('pg_ctl', ['-D', data, '-l', path.join(dir, 'log'), '-o', `-k ${dir} -c listen_addresses= -c fsync=off`, '-w', 'start']);
    const stop = () => asPostgres('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']);
    start();
    t.after(() => {
      try {
        stop();
      } catch {
        /* already stopped */
      }
      fs.rmSync(dir, { recursive: true, force: true });
    });

    const ta = await startApp(
      t,
      { PUSH_ALLOW_HTTP: 'true', PUSH_ALLOWED_NETWORKS: '127.0.0.0/8', DELIVERY_POLL_MS: '100' },
      { databaseUrl: `postgres://postgres@localhost/postgres?host=${encodeURIComponent(dir)}` },
    );
    const rx = await new Receiver().start();
    t.after(() => rx.close());
    const o = await ownerWithKey(ta, 'outage-fleet');
    const asset = await ta.call('POST', '/api/v1/assets', { token: o.key, body: { name: 'OUT1' } });
    const integ = await ta.call('POST', '/api/v1/integrations', {
      token: ta.adminToken,
      body: {
        name: 'outage-hook',
        channel: 'webhook',
        ownerIds: [o.ownerId],
        objectTypes: ['location'],
        destination: `${rx.url}/hook`,
        retry: { scheduleSeconds: [0.2] },
      },
    });
    assert.equal(integ.status, 201);
    const post = (n: number) =>
      ta.call('POST', '/api/v1/locations', {
        token: o.key,
        body: Array.from({ length: n }, () => ({ assetId: asset.body.id, latitude: 5, longitude: 5 })),
      });
    const accepted: string[] = [];
    const before = await post(50);
    assert.equal(before.status, 201);
    accepted.push(...before.body.map((l: { id: string }) => l.id));

    stop();
    for (let i = 0; i < 5; i++) {
      const r = await post(10);
      assert.equal(r.status, 503, r.raw);
      assert.equal(r.body.code, 'DATABASE_UNAVAILABLE');
      assert.ok(r.body.error && r.body.message);
      assert.ok(r.headers['retry-after']);
      await new Promise((x) => setTimeout(x, 500));
    }
    assert.equal((await ta.call('GET', '/readyz')).status, 503);
    start();

    // The pool reconnects by itself; the first requests may still meet a dead connection.
    let after;
    const back = Date.now() + 60_000;
    for (;;) {
      after = await post(50);
      if (after.status === 201) break;
      assert.equal(after.status, 503, after.raw);
      assert.ok(Date.now() < back, 'ingest still refused 60 s after the database came back');
      await new Promise((x) => setTimeout(x, 250));
    }
    accepted.push(...after!.body.map((l: { id: string }) => l.id));

    const db = ta.app.services.db;
    const deadline = Date.now() + 120_000;
    for (;;) {
      const n = await undelivered(db);
      if (n === 0) break;
      assert.ok(Date.now() < deadline, 'delivery did not resume');
      await new Promise((x) => setTimeout(x, 200));
    }
    const stored = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM locations');
    assert.equal(stored.rows[0]!.n, accepted.length, 'every accepted record stored, nothing from the refused requests');
    const delivered = new Set(rx.for('/hook').map((r) => String(JSON.parse(r.body).id)));
    assert.ok(
      accepted.every((id) => delivered.has(id)),
      'every accepted record delivered',
    );
  });
}
