// The compatibility set (scripts/test-lanes.mjs) is what the oldest supported Node.js runs beside
// its unit lane in CI. It must load every Node API that the service and its tests use: a `node:`
// module imported by a file of src/, test/, sim/ or dashboard/ must be imported by a file that a
// file of the set, or of the unit lane, loads (itself or through its relative imports). A new use
// of a Node module with no such file fails here, naming the module and where it is used.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { importGraph, loadedBy, specifiers } from '../../scripts/import-graph.mjs';
import { COMPAT } from '../../scripts/test-lanes.mjs';

const graph = importGraph(['src', 'test', 'sim', 'dashboard']);
const files = [...graph.keys()];

test('every file of the compatibility set exists and runs in the database lane it names', () => {
  assert.ok(COMPAT.length > 0);
  for (const c of COMPAT) {
    assert.ok(fs.existsSync(c.file), `${c.file} (scripts/test-lanes.mjs) does not exist`);
    assert.ok(['postgres', 'pglite'].includes(c.lane), `${c.file}: lane ${c.lane} is not a database lane`);
    const named = /^\/\/ @test-lanes (.+)$/m.exec(fs.readFileSync(c.file, 'utf8').slice(0, 4096))?.[1]?.split(/\s+/);
    assert.ok(!named || named.includes(c.lane), `${c.file} runs in ${named?.join(', ')}, not ${c.lane}`);
    assert.ok(c.why.length > 20, `${c.file}: say why it is in the set`);
  }
});

test('the compatibility set and the unit lane load every Node module the service and its tests import', () => {
  const unit = files.filter((f) => f.startsWith(path.join('test', 'unit')) && f.endsWith('.test.ts'));
  const covered = new Set([...loadedBy(graph, [...COMPAT.map((c) => c.file), ...unit])].flatMap((f) => [...(graph.get(f)?.node ?? [])]));
  const missing = new Map<string, string[]>();
  for (const [f, { node }] of graph) for (const m of node) if (!covered.has(m)) missing.set(m, [...(missing.get(m) ?? []), f]);
  assert.deepEqual(
    [...missing].map(([m, where]) => `${m} (imported by ${where.join(', ')})`),
    [],
    'add a file that loads these to COMPAT in scripts/test-lanes.mjs, saying why',
  );
});

test('the check reads every form of import and sees a module the set does not load', () => {
  assert.deepEqual(
    specifiers("import a from 'node:fs';\nexport { b } from './b.js';\nimport './c.js';\nconst z = await import('node:zlib');"),
    ['node:fs', './b.js', './c.js', 'node:zlib'],
  );
  // A test file with a module nothing else imports is outside what the set loads.
  const lone = files.find((f) => f.endsWith('compat-set.test.ts'))!;
  assert.ok(loadedBy(graph, [lone]).has(lone));
  assert.ok(
    !loadedBy(
      graph,
      COMPAT.map((c) => c.file),
    ).has(lone),
    'the set does not load this file',
  );
});
