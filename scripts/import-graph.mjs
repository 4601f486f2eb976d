// The repository's import graph, read from the import lines as text: which files each file
// imports by relative path (a `.js` specifier names its `.ts` twin), and which `node:` modules.
// Used by the structure check (scripts/check-structure.mjs: circles, the folder graph), the quick
// test loop (scripts/test-quick.mjs: the test files a change reaches) and the compatibility set's
// guard (test/unit/compat-set.test.ts: the Node modules the oldest Node loads).
import fs from 'node:fs';
import path from 'node:path';

const SOURCE = /\.(ts|tsx|mts|mjs)$/;

/** The source files under `dir` (TypeScript and ES modules; declarations and node_modules left out). */
export function sourcesUnder(dir) {
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return e.name === 'node_modules' ? [] : sourcesUnder(p);
    return SOURCE.test(e.name) && !e.name.endsWith('.d.ts') ? [p] : [];
  });
}

/**
 * Every specifier a text imports: `import x from '...'` and `export ... from '...'` (type-only
 * ones too), `import '...'`, and `import('...')` (a dynamic import or an inline type).
 */
export function specifiers(text) {
  const found = [];
  for (const m of text.matchAll(/^\s*(?:import|export)\s[^;]*?\sfrom\s+'([^']+)'/gm)) found.push(m[1]);
  for (const m of text.matchAll(/^\s*import\s+'([^']+)'/gm)) found.push(m[1]);
  for (const m of text.matchAll(/\bimport\(\s*'([^']+)'\s*\)/g)) found.push(m[1]);
  return found;
}

/** The file a relative specifier names, or undefined (a file that does not exist, or no source). */
function resolve(from, spec) {
  const base = path.join(path.dirname(from), spec);
  for (const c of [base, base.replace(/\.js$/, '.ts'), base.replace(/\.js$/, '.tsx'), base.replace(/\.mjs$/, '.mts')])
    if (SOURCE.test(c) && fs.existsSync(c) && fs.statSync(c).isFile()) return c;
  return undefined;
}

/**
 * The graph of the files under `roots`: file -> { local: the files it imports, node: the `node:`
 * modules it imports }. Paths are relative to the working directory, as given.
 */
export function importGraph(roots) {
  const graph = new Map();
  for (const f of roots.flatMap(sourcesUnder)) {
    const specs = specifiers(fs.readFileSync(f, 'utf8'));
    graph.set(f, {
      local: new Set(specs.filter((s) => s.startsWith('.')).flatMap((s) => resolve(f, s) ?? [])),
      node: new Set(specs.filter((s) => s.startsWith('node:'))),
    });
  }
  return graph;
}

/** Every file reached from `roots` by `next` (each root included). */
function reach(roots, next) {
  const seen = new Set();
  const todo = [...roots];
  while (todo.length) {
    const f = todo.pop();
    if (seen.has(f)) continue;
    seen.add(f);
    todo.push(...next(f));
  }
  return seen;
}

/** Every file that `roots` load: themselves and what they import, all the way down. */
export function loadedBy(graph, roots) {
  return reach(roots, (f) => graph.get(f)?.local ?? []);
}

/**
 * Every file that loads one of `changed`, itself included: the graph walked backwards, never through
 * a file of `stops` (the files that assemble the whole service import every capability; walking
 * through them would reach every test).
 */
export function importersOf(graph, changed, stops = new Set()) {
  const back = new Map();
  for (const [f, { local }] of graph) for (const d of local) back.set(d, [...(back.get(d) ?? []), f]);
  return reach(changed, (f) => (back.get(f) ?? []).filter((g) => !stops.has(g)));
}
