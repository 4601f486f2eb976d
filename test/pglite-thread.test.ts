// @test-lanes pglite
// The embedded database runs in a thread of its own (src/db/pglite-thread.ts): a long statement
// leaves this event loop free; rows, types and errors come back as on the main thread (int8 as
// strings, timestamptz as Date, SQLSTATE codes and constraint names); a transaction that throws
// rolls back, and a statement from outside it waits for its end.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { test } from 'node:test';
import { createPglite, type Db } from '../src/db/db.js';

async function open(): Promise<Db> {
  const file = process.env.TEST_PGLITE_TEMPLATE;
  return createPglite(undefined, file ? new Blob([fs.readFileSync(file)]) : undefined, { sharedBuffersMb: 16 });
}

test('a long statement of the embedded database leaves the event loop free', { timeout: 120_000 }, async (t) => {
  const db = await open();
  t.after(() => db.close());
  // Long enough that, on a busy machine too, timers fire while it runs: on the event loop's own
  // thread none could (WebAssembly runs to the statement's end before anything else).
  let ticks = 0;
  const timer = setInterval(() => ticks++, 5);
  const started = performance.now();
  let done = false;
  const q = db.query<{ n: string }>('SELECT count(*) AS n FROM generate_series(1, 4000000) g, LATERAL (SELECT g * 2) x');
  void q.then(() => (done = true));
  // On the event loop's own thread no timer could fire before the statement's answer: its
  // WebAssembly runs to the end, and the answer settles before timers get their turn.
  while (!done && ticks < 3) await new Promise<void>((resolve) => setTimeout(resolve, 5));
  const ticksWhileRunning = done ? -1 : ticks;
  const { rows } = await q;
  const ms = performance.now() - started;
  clearInterval(timer);
  assert.equal(rows[0]!.n, '4000000', 'int8 as a decimal string');
  assert.ok(ticksWhileRunning >= 3, `three timer ticks while the statement ran (it took ${Math.round(ms)} ms; ${ticks} ticks in all)`);
});

test('types, errors and transactions through the thread are those of the main thread', { timeout: 120_000 }, async (t) => {
  const db = await open();
  t.after(() => db.close());
  await db.query('CREATE TABLE thread_t (id int8 PRIMARY KEY, at timestamptz, v float8, n numeric)');
  await db.query("INSERT INTO thread_t VALUES (9007199254740993, '2026-01-02T03:04:05.678Z', 'NaN', 1.5)");
  const { rows } = await db.query('SELECT * FROM thread_t');
  assert.equal(rows[0]!.id, '9007199254740993');
  assert.ok(rows[0]!.at instanceof Date);
  assert.equal((rows[0]!.at as Date).toISOString(), '2026-01-02T03:04:05.678Z');
  assert.equal(rows[0]!.v, null, 'a non-finite float reads as null');
  assert.equal(rows[0]!.n, 1.5);

  await assert.rejects(
    db.query('INSERT INTO thread_t (id) VALUES (9007199254740993)'),
    (e: any) => e.code === '23505' && e.constraint === 'thread_t_pkey' && /duplicate key/.test(e.message),
  );

  // A transaction that throws rolls back; a statement sent meanwhile from outside waits for its end.
  const order: string[] = [];
  let outside: Promise<unknown> | undefined;
  await assert.rejects(
    db.tx(async (q) => {
      await q.query('INSERT INTO thread_t (id) VALUES (1)');
      outside = db.query('SELECT count(*) AS n FROM thread_t').then((r) => order.push(`outside saw ${r.rows[0]!.n}`));
      await new Promise((resolve) => setTimeout(resolve, 100));
      order.push('transaction ends');
      throw new Error('no');
    }),
    /no/,
  );
  await outside;
  assert.deepEqual(order, ['transaction ends', 'outside saw 1']);
  const committed = await db.tx(async (q) => (await q.query('INSERT INTO thread_t (id) VALUES (2) RETURNING id')).rows[0]!.id);
  assert.equal(committed, '2');
  assert.deepEqual(
    (await db.query('SELECT id FROM thread_t ORDER BY id')).rows.map((r) => r.id),
    ['2', '9007199254740993'],
  );
});
