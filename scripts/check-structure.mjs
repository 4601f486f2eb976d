// The shape of src/, checked with the lint (npm run lint): no import circles (type-only imports
// count: a circle of types is still two modules that cannot be understood apart) and no file over
// MAX_LINES. Reads the import lines as text; every import in src/ is a relative path to a .js
// twin of a .ts file.
import fs from 'node:fs';
import path from 'node:path';

const ROOT = 'src';
const MAX_LINES = 800;

const files = [];
const walk = (dir) => {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p);
    else if (/\.tsx?$/.test(e.name)) files.push(p);
  }
};
walk(ROOT);

const problems = [];
const graph = new Map();
const IMPORT = /^\s*(?:import|export)\s[^;]*?from\s+'(\.{1,2}\/[^']+)'/gm;
for (const f of files) {
  const text = fs.readFileSync(f, 'utf8');
  const lines = text.split('\n').length;
  if (lines > MAX_LINES) problems.push(`${f}: ${lines} lines (at most ${MAX_LINES}): split it by job`);
  const deps = new Set();
  for (const m of text.matchAll(IMPORT)) {
    const target = path.join(path.dirname(f), m[1].replace(/\.js$/, '.ts'));
    if (fs.existsSync(target)) deps.add(target);
    else if (fs.existsSync(target.replace(/\.ts$/, '.tsx'))) deps.add(target.replace(/\.ts$/, '.tsx'));
  }
  graph.set(f, deps);
}

// Tarjan's strongly connected components: each one with more than a file is a circle.
let index = 0;
const stack = [];
const on = new Set();
const idx = new Map();
const low = new Map();
const strong = (v) => {
  idx.set(v, index);
  low.set(v, index++);
  stack.push(v);
  on.add(v);
  for (const w of graph.get(v) ?? []) {
    if (!idx.has(w)) {
      strong(w);
      low.set(v, Math.min(low.get(v), low.get(w)));
    } else if (on.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
  }
  if (low.get(v) === idx.get(v)) {
    const scc = [];
    let w;
    do {
      w = stack.pop();
      on.delete(w);
      scc.push(w);
    } while (w !== v);
    if (scc.length > 1) problems.push(`import circle: ${scc.sort().join(' <-> ')}`);
  }
};
for (const f of files) if (!idx.has(f)) strong(f);

if (problems.length) {
  console.error(`src/ structure:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  process.exit(1);
}
console.log(`src/ structure: ${files.length} files, no import circles, none over ${MAX_LINES} lines`);
