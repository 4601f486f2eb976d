// The event log consumer's wait before it joins the group again (API guide 17, "Messages Kafka
// deleted unread"): each join rebalances the whole group, so lost offsets, which stay lost until an
// operator moves them, are tried again at 0.5 s, then 1, 2, 4 ... up to every 30 s. Pure unit test.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { nextRejoinDelay } from '../../src/eventlog/consumer.js';

test('lost offsets: 0.5 s, doubling to 30 s while they stay lost; any other failure, or lost again after a quiet minute: 0.5 s', () => {
  // The first lost-offsets failure (none in the last minute).
  let delay = nextRejoinDelay(500, true, Number.POSITIVE_INFINITY);
  assert.equal(delay, 500);
  const seen = [delay];
  for (let i = 0; i < 8; i++) {
    delay = nextRejoinDelay(delay, true, delay + 100);
    seen.push(delay);
  }
  assert.deepEqual(seen, [500, 1000, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000]);
  assert.equal(nextRejoinDelay(30_000, false, 1000), 500, 'another failure');
  assert.equal(nextRejoinDelay(30_000, true, 61_000), 500, 'lost again after a minute without');
});
