// Which integrations an event from the Kafka topic is for (src/eventlog/coverage.ts): the JavaScript
// twin of the queue's COVERED and AFTER_START, including jsonb containment for type filters.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Coverage } from '../../src/eventlog/relay-sql.js';
import { covers, jsonContains, parseOwnerPath, type TopicEvent } from '../../src/eventlog/coverage.js';

const integration = (o: Partial<Coverage> = {}): Coverage => ({
  id: 'i1',
  whenUpdated: new Date(),
  enabled: true,
  paused: false,
  objectTypes: ['location'],
  ownerIds: ['parent'],
  typeFilters: null,
  startXmax: 100n,
  startXip: new Set([90n]),
  ...o,
});
const event = (o: Partial<TopicEvent> = {}): TopicEvent => ({
  id: '1',
  tx: 120n,
  eventId: 'e1',
  objectType: 'location',
  objectId: '1',
  ownerPath: ['child', 'parent'],
  whenCreated: new Date(),
  payload: '{"speed": 10, "status": "moving"}',
  ...o,
});
const check = (c: Coverage, e: TopicEvent) => covers(c, e, () => JSON.parse(e.payload));

test('type, owner ancestry and the transactions the integration had not seen committed when created', () => {
  assert.equal(check(integration(), event()), true, 'a child owner of a covered owner');
  assert.equal(check(integration(), event({ objectType: 'sensorData' })), false, 'another type');
  assert.equal(check(integration(), event({ ownerPath: ['other'] })), false, "another owner's data");
  assert.equal(check(integration(), event({ tx: 99n })), false, 'committed before the creation');
  assert.equal(check(integration(), event({ tx: 90n })), true, 'running at the creation, committed after');
});

test('type filters: each member among the allowed values (a missing member is null), compared as jsonb does', () => {
  const c = (f: Record<string, unknown[]>) => integration({ typeFilters: { location: f } });
  assert.equal(check(c({ status: ['moving', 'stopped'] }), event()), true);
  assert.equal(check(c({ status: ['stopped'] }), event()), false);
  assert.equal(check(c({ speed: [10] }), event()), true, 'numbers compare as numbers');
  assert.equal(check(c({ missing: [null] }), event()), true, 'a member the object lacks is null');
  assert.equal(check(c({ missing: ['x'] }), event()), false);
  assert.equal(check(integration({ typeFilters: { sensorData: { a: ['x'] } } }), event()), true, "another type's filter does not apply");
  assert.equal(jsonContains({ a: 1, b: { c: 2 } }, { b: { c: 2 } }), true);
  assert.equal(jsonContains({ a: 1 }, { a: 2 }), false);
  assert.equal(jsonContains([1, 2, 3], [3, 1]), true);
  assert.equal(jsonContains([1, 2], [4]), false);
  assert.equal(jsonContains('1', 1), false, 'a string is not a number');
});

test('the owner path as PostgreSQL prints an array', () => {
  assert.deepEqual(parseOwnerPath('{a,b,c}'), ['a', 'b', 'c']);
  assert.deepEqual(parseOwnerPath('{}'), []);
});
