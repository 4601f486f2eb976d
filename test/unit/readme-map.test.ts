// The README is a map: every path it names (in backticks or as a link) exists, and every folder
// under src/ is named in its `src/` row. The rule the README states under its source table: names
// in the `src/` row are files and folders in src/; every other path is from the repository's root.
// A path git ignores (made by a run: `dist/`, `./data-demo`) may be absent. No service, no database.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

const README = fs.readFileSync('README.md', 'utf8');
/** The README without its fenced code blocks (commands, not names). */
const prose = README.replace(/^```[\s\S]*?^```$/gm, '');
const srcRow = prose.split('\n').find((l) => l.startsWith('| `src/` |'));

/** A backticked text that names a path: no spaces or URL, a slash or a file extension. */
const PATH = /^(?:\.\/)?[A-Za-z0-9_.-]+(?:\/[A-Za-z0-9_.-]*)*$/;
const looksLikePath = (s: string) => PATH.test(s) && (s.includes('/') || /\.(?:ts|tsx|mjs|js|json|md|sh|sql|yml|yaml)$/.test(s));

/** Whether git ignores the path, as a file or (a pattern like `data-demo/`) as a folder. */
const ignoredByGit = (p: string) => [p, p.replace(/\/?$/, '/')].some((q) => spawnSync('git', ['check-ignore', '-q', q]).status === 0);
const exists = (p: string) => fs.existsSync(p) || ignoredByGit(p);

/** The backticked names of one text, each once. */
const backticked = (text: string) => [...new Set([...text.matchAll(/`([^`\n]+)`/g)].map((m) => m[1]!))];

test('the README has its src/ row', () => {
  assert.ok(srcRow, 'a table row starting "| `src/` |"');
});

test('every path the README names in backticks exists (names in the src/ row under src/)', () => {
  const outside = prose
    .split('\n')
    .filter((l) => l !== srcRow)
    .join('\n');
  const checked: string[] = [];
  const missing: string[] = [];
  for (const name of backticked(outside).filter(looksLikePath)) {
    checked.push(name);
    if (!exists(name)) missing.push(name);
  }
  for (const name of backticked(srcRow ?? '')) {
    if (name === 'src/') continue;
    const p = path.join('src', name);
    checked.push(p);
    if (!exists(p)) missing.push(`${name} (in the src/ row: ${p})`);
  }
  assert.ok(checked.length >= 20, `the README names paths: ${checked.join(', ')}`);
  assert.deepEqual(missing, [], 'paths the README names that do not exist');
});

test('every link of the README to a file of this repository exists', () => {
  const targets = [...prose.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!).filter((t) => !/^[a-z]+:/.test(t) && !t.startsWith('#'));
  assert.ok(targets.length >= 5, `the README links files: ${targets.join(', ')}`);
  const missing = targets.map((t) => t.replace(/#.*$/, '')).filter((t) => !exists(t));
  assert.deepEqual(missing, [], 'links to files that do not exist');
});

test('every folder directly under src/ is named in the README’s src/ row', () => {
  const named = new Set(backticked(srcRow ?? ''));
  const folders = fs
    .readdirSync('src', { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .map((d) => d.name);
  assert.ok(folders.length > 5);
  const unnamed = folders.filter((f) => !named.has(f) && !named.has(`${f}/`));
  assert.deepEqual(unnamed, [], 'folders under src/ the README’s map does not name');
});
