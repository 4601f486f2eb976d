// The shape of src/, checked with the lint (npm run lint): no import circles between files nor
// between folders (type-only imports count: a circle of types is still two modules that cannot be
// understood apart) and no file over MAX_LINES. The graph is scripts/import-graph.mjs's, read from
// the import lines as text; every import in src/ is a relative path to a .js twin of a .ts file.
//
// The folder graph: each top-level folder under src/ is a node (a file in src/a/ importing one in
// src/b/ is an edge a/ -> b/), and so is each file directly in src/. The files that assemble the
// service (ASSEMBLY) may import any folder, and no folder may import them; the leaves (LEAVES) are
// imported by anyone and import no folder.
import fs from 'node:fs';
import path from 'node:path';
import { importGraph } from './import-graph.mjs';

const ROOT = 'src';
const MAX_LINES = 800;
const ASSEMBLY = new Set(['app.ts', 'main.ts', 'delivery-main.ts']);
const LEAVES = new Set(['config.ts', 'bounds.ts']);

const full = importGraph([ROOT]);
const files = [...full.keys()];
const problems = [];
const graph = new Map();
for (const [f, { local }] of full) {
  const lines = fs.readFileSync(f, 'utf8').split('\n').length;
  if (lines > MAX_LINES) problems.push(`${f}: ${lines} lines (at most ${MAX_LINES}): split it by job`);
  graph.set(f, local);
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

// The folder graph, each edge with the imports that make it.
const nodeOf = (f) => {
  const rel = path.relative(ROOT, f).split(path.sep);
  return rel.length > 1 ? `${rel[0]}/` : rel[0];
};
const folders = new Map();
const because = new Map();
for (const [f, deps] of graph) {
  const a = nodeOf(f);
  if (!folders.has(a)) folders.set(a, new Set());
  for (const d of deps) {
    const b = nodeOf(d);
    if (a === b) continue;
    folders.get(a).add(b);
    const k = `${a} -> ${b}`;
    if (!because.has(k)) because.set(k, []);
    because.get(k).push(`${f} imports ${d}`);
    if (ASSEMBLY.has(b) && !ASSEMBLY.has(a)) problems.push(`${f} imports ${d}: only the entry assembles the service, nothing imports it`);
    if (LEAVES.has(a) && a !== b) problems.push(`${f} imports ${d}: ${a} is a leaf and imports no folder`);
  }
}

// Tarjan again, on folders: a component of several folders is a circle. It is named by one cycle
// through it (the shortest from its first folder back to itself) and the imports of each edge.
const shortestCycle = (scc) => {
  const inside = new Set(scc);
  const start = scc[0];
  const prev = new Map([[start, null]]);
  const todo = [start];
  while (todo.length) {
    const v = todo.shift();
    for (const w of folders.get(v) ?? []) {
      if (!inside.has(w)) continue;
      if (w === start) {
        const cycle = [start];
        for (let u = v; u !== start; u = prev.get(u)) cycle.splice(1, 0, u);
        return [...cycle, start];
      }
      if (!prev.has(w)) {
        prev.set(w, v);
        todo.push(w);
      }
    }
  }
  return scc;
};
let fIndex = 0;
const fStack = [];
const fOn = new Set();
const fIdx = new Map();
const fLow = new Map();
const folderCircles = [];
const strongFolders = (v) => {
  fIdx.set(v, fIndex);
  fLow.set(v, fIndex++);
  fStack.push(v);
  fOn.add(v);
  for (const w of folders.get(v) ?? []) {
    if (!fIdx.has(w)) {
      strongFolders(w);
      fLow.set(v, Math.min(fLow.get(v), fLow.get(w)));
    } else if (fOn.has(w)) fLow.set(v, Math.min(fLow.get(v), fIdx.get(w)));
  }
  if (fLow.get(v) === fIdx.get(v)) {
    const scc = [];
    let w;
    do {
      w = fStack.pop();
      fOn.delete(w);
      scc.push(w);
    } while (w !== v);
    if (scc.length > 1) folderCircles.push(scc.sort());
  }
};
for (const v of [...folders.keys()].sort()) if (!fIdx.has(v)) strongFolders(v);
for (const scc of folderCircles) {
  const cycle = shortestCycle(scc);
  const edges = [];
  for (let i = 0; i + 1 < cycle.length; i++) {
    const k = `${cycle[i]} -> ${cycle[i + 1]}`;
    const imports = because.get(k);
    edges.push(`      ${k}: ${imports.slice(0, 3).join('; ')}${imports.length > 3 ? ` (and ${imports.length - 3} more)` : ''}`);
  }
  problems.push(`folder circle of ${scc.length} (${scc.join(', ')}), for example ${cycle.join(' -> ')}:\n${edges.join('\n')}`);
}

if (process.argv.includes('--folders')) {
  for (const [a, bs] of [...folders].sort()) console.log(`${a} -> ${[...bs].sort().join(' ')}`);
}

if (problems.length) {
  console.error(`src/ structure:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  process.exit(1);
}
console.log(
  `src/ structure: ${files.length} files in ${folders.size} folders and root files, no import circles between files or folders, none over ${MAX_LINES} lines`,
);
