// The audit log's changes (src/audit/audit.ts): what differs, member by member, and no secret in any form.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { changesOf, MASK, secretPaths } from '../../src/audit/audit.js';

test('an update lists what differs as dotted paths, from and to; unchanged members and timestamps are left out', () => {
  const before = { name: 'a', webhook: { url: 'https://x', timeoutMs: 1000, auth: null }, whenUpdated: '1', tags: ['x'] };
  const after = {
    name: 'b',
    webhook: { url: 'https://x', timeoutMs: 2000, auth: { type: 'basic', username: 'u' } },
    whenUpdated: '2',
    tags: ['x', 'y'],
  };
  assert.deepEqual(changesOf(before, after), {
    name: { from: 'a', to: 'b' },
    'webhook.timeoutMs': { from: 1000, to: 2000 },
    'webhook.auth': { from: null, to: { type: 'basic', username: 'u' } },
    tags: { from: ['x'], to: ['x', 'y'] },
  });
});

test('a create lists what was set (no nulls), a delete what was there', () => {
  assert.deepEqual(changesOf(null, { id: '1', name: 'n', note: null }), { id: { to: '1' }, name: { to: 'n' } });
  assert.deepEqual(changesOf({ id: '1', note: null }, null), { id: { from: '1' } });
});

test('secrets: named ones masked at any depth, those a body sets listed masked, an auth header value too', () => {
  const body = { password: 'p1', webhook: { signingSecret: 'whsec_x', auth: { type: 'header', name: 'X-Key', value: 'v1' } }, value: 3 };
  assert.deepEqual(secretPaths(body), ['password', 'webhook.signingSecret', 'webhook.auth.value']);
  const c = changesOf({ auth: { token: 'old' }, n: 1 }, { auth: { token: 'new' }, n: 2 }, secretPaths(body));
  assert.deepEqual(c['auth.token'], { from: MASK, to: MASK });
  assert.deepEqual(c.password, { from: MASK, to: MASK });
  assert.ok(!JSON.stringify(c).includes('old') && !JSON.stringify(c).includes('new'));
  assert.deepEqual(changesOf(null, { parameters: { value: 5 } }), { parameters: { to: { value: 5 } } }, 'a value elsewhere is data');
});
