// The catalogue of bounds (src/bounds.ts): the API guide's table is the catalogue, row for row, and
// every bound that a setting changes has that setting's default as its value. Pure unit test.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { test } from 'node:test';
import { BOUNDS, type Bound, boundsTable } from '../../src/bounds.js';
import { loadConfig } from '../../src/config.js';

test("the API guide's table of bounds is the catalogue, row for row", () => {
  const guide = fs.readFileSync('docs/API.md', 'utf8').split('\n');
  const start = guide.findIndex((l) => l.startsWith('| Bound | Setting |'));
  assert.ok(start >= 0, 'docs/API.md has the table of bounds (a header "| Bound | Setting | ...")');
  let end = start;
  while (end < guide.length && guide[end]!.startsWith('|')) end++;
  const expected = boundsTable();
  assert.deepEqual(
    guide.slice(start, end),
    expected,
    `docs/API.md's table of bounds differs from src/bounds.ts; the table should read:\n${expected.join('\n')}`,
  );
});

test("each bound that a setting changes states that setting's default", () => {
  const defaults = loadConfig({}) as unknown as Record<string, unknown>;
  for (const [name, b] of Object.entries(BOUNDS) as [string, Bound][]) {
    if (!b.setting) continue;
    assert.ok(b.setting in defaults, `${name}: ${b.setting} is a setting with a default in src/config.ts`);
    assert.equal(defaults[b.setting], b.value, `${name}: ${b.setting}'s default`);
  }
});

test('names are unique and every row says what it bounds and what the caller gets past it', () => {
  const settings = new Set<string>();
  for (const [name, b] of Object.entries(BOUNDS) as [string, Bound][]) {
    assert.ok(b.value > 0, `${name}: a positive value`);
    assert.ok(b.what.length > 5 && b.past.length > 5, `${name}: what and past`);
    if (b.setting) {
      assert.ok(!settings.has(b.setting), `${b.setting} named twice`);
      settings.add(b.setting);
    }
  }
});
