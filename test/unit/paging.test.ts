// Keyset paging (src/http/paging.ts; API guide 5): the conditions a page adds, and cursors that
// carry the exact position of the last row, keep their order, and refuse anything not issued.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../../src/http/errors.js';
import { keyset, page } from '../../src/http/paging.js';

/** The cursor of the Link header a full page sets (a request and a reply are all `page` needs of Fastify). */
function cursorAfter(rows: { id: string; _cursor_ts: string }[], order: 'asc' | 'desc', limit = 2): string {
  let link = '';
  const req = { url: '/api/v1/locations?limit=2' } as FastifyRequest;
  const reply = { header: (_k: string, v: string) => (link = v) } as unknown as FastifyReply;
  const out = page(req, reply, { where: [], orderBy: '', fetch: limit + 1, limit, order }, rows, 'https://t.example');
  assert.equal(out.length, limit);
  return new URL(/<([^>]+)>/.exec(link)![1]!).searchParams.get('cursor')!;
}

test('a page adds from/to on whenCreated, and after a cursor the rows past its exact (microsecond, id) position', () => {
  const params: unknown[] = [];
  const ks = keyset({ from: '2026-01-01T00:00:00Z', to: '2026-02-01T00:00:00Z', limit: 10 }, params, {
    defaultOrder: 'desc',
    idType: 'int8',
  });
  assert.deepEqual(ks.where, ['when_created >= $1::timestamptz', 'when_created < $2::timestamptz']);
  assert.equal(ks.orderBy, 'when_created DESC, id DESC');
  assert.equal(ks.fetch, 11, 'one more than the page, to know whether another follows');
  const rows = [
    { id: '9', _cursor_ts: '1767225600000001' },
    { id: '8', _cursor_ts: '1767225600000000' },
    { id: '7', _cursor_ts: '1767225599999999' },
  ];
  const cursor = cursorAfter(rows, 'desc');
  const p2: unknown[] = [];
  const next = keyset({ cursor, order: 'asc' }, p2, { defaultOrder: 'asc', idType: 'int8' });
  assert.equal(next.order, 'desc', 'a cursor keeps the order it was made with');
  assert.deepEqual(p2, ['1767225600000000', '8']);
  assert.match(next.where[0]!, /^\(when_created, id\) < \(\(timestamptz 'epoch' \+ \$1::int8 \* interval '1 microsecond'\), \$2::int8\)$/);
});

test('a cursor not issued by the service is a 400 BAD_CURSOR: garbage, tampered, out of range, or of another id type', () => {
  const good = cursorAfter(
    [
      { id: '5', _cursor_ts: '100' },
      { id: '4', _cursor_ts: '99' },
      { id: '3', _cursor_ts: '98' },
    ],
    'asc',
  );
  const forged = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  for (const [cursor, idType] of [
    ['not-base64!', 'int8'],
    [forged({ t: '1', i: '1; DROP TABLE x', o: 'asc' }), 'int8'],
    [forged({ t: '99999999999999999999', i: '1', o: 'asc' }), 'int8'],
    [forged({ t: '1', i: '9223372036854775808', o: 'asc' }), 'int8'],
    [forged({ t: '1', i: '1', o: 'sideways' }), 'int8'],
    [good, 'uuid'],
  ] as const) {
    assert.throws(
      () => keyset({ cursor }, [], { defaultOrder: 'asc', idType }),
      (e: unknown) => e instanceof ApiError && e.code === 'BAD_CURSOR' && e.extra.field === '/cursor',
      cursor,
    );
  }
  assert.doesNotThrow(() => keyset({ cursor: good }, [], { defaultOrder: 'asc', idType: 'int8' }));
});
