// @test-lanes postgres
// A PostgreSQL at its connection limit (53300, "too many clients"): a new connection waits up to 5 s
// for a slot instead of failing at once; when none comes, the error is the one the API answers 503
// for. The limit is a role's CONNECTION LIMIT (superusers pass every limit), on this file's database.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { test } from 'node:test';
import { createPostgres, type Db } from '../src/db/db.js';
import { isDatabaseUnavailable } from '../src/http/errors.js';
import { ADMIN_PG_URL, atEnd, createTestDatabase, waitFor, connectPg } from './helpers.js';

test('a connection refused for the server’s limit waits for a slot; none within 5 s is a 53300 the API calls unavailable', async () => {
  const url = await createTestDatabase();
  const role = `slots_${crypto.randomBytes(4).toString('hex')}`;
  const admin = await connectPg(ADMIN_PG_URL);
  await admin.query(`CREATE ROLE ${role} LOGIN CONNECTION LIMIT 1`);
  await admin.end();
  atEnd(async () => {
    const c = await connectPg(ADMIN_PG_URL);
    await c.query(`DROP ROLE IF EXISTS ${role}`);
    await c.end();
  });
  const u = new URL(url);
  u.username = role;
  const db = createPostgres(u.toString(), 2);
  atEnd(() => db.close());

  // One session holds the role's one connection until released.
  let held = await holdOne(db);

  // A query needs a second connection: refused for the limit, tried again until the slot is free.
  const started = Date.now();
  const query = db.query<{ n: number }>('SELECT 2 AS n');
  setTimeout(() => held.release(), 300);
  const { rows } = await query;
  assert.equal(rows[0]?.n, 2);
  assert.ok(Date.now() - started >= 250, 'the query waited for the slot');
  await held.done;

  // Nothing frees the slot: after about 5 s the refusal stands, as an unavailable database.
  held = await holdOne(db);
  // The pool keeps the freed connection idle; a second pool of the same role has none.
  const other = createPostgres(u.toString(), 1);
  atEnd(() => other.close());
  const t0 = Date.now();
  const err = await other.query('SELECT 3').then(
    () => undefined,
    (e: unknown) => e,
  );
  const waited = Date.now() - t0;
  held.release();
  await held.done;
  assert.equal((err as { code?: string } | undefined)?.code, '53300', String(err));
  assert.ok(isDatabaseUnavailable(err));
  assert.ok(waited >= 4000 && waited < 15_000, `waited ${waited} ms for a slot`);
});

/** A session on one of db's connections, held until release(); resolves once it holds it. */
async function holdOne(db: Db): Promise<{ release(): void; done: Promise<void> }> {
  let release = () => {};
  let holding = false;
  const done = db.session(async (s) => {
    await s.query('SELECT 1');
    holding = true;
    await new Promise<void>((r) => {
      release = r;
    });
  });
  await waitFor(
    () => 'a session holding a connection',
    async () => holding || undefined,
  );
  return { release: () => release(), done };
}
