// `npm run test:quick`: the loop between commits. Lint and format (Biome, the structure check),
// types, the unit lane, and the test files a change reaches, on PostgreSQL; `npm test` (and CI's
// .ci/run) stays the whole suite.
//
// What changed: the working tree against HEAD (staged, unstaged and new files), and the commits
// since TEST_QUICK_BASE, else the branch's upstream, else `main` when on another branch. On main
// with nothing to compare and a clean tree, HEAD's own commit.
// What that reaches (scripts/import-graph.mjs): every test file that loads a changed file, walked
// back through the import graph but not through the files that assemble the service (src/app.ts
// and the entries import every capability, and every test loads them); and the test files named
// after a changed capability's folder (src/zones/ -> test/zones*.test.ts, test/hostile/zones*...),
// since most tests reach a capability through HTTP, not an import. TEST_QUICK_LANES="postgres pglite"
// runs the reached files on both databases; `--list` says what would run and stops.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { importGraph, importersOf } from './import-graph.mjs';

const started = Date.now();
const git = (...a) => spawnSync('git', a, { encoding: 'utf8' });
const lines = (r) => (r.status === 0 ? r.stdout.split('\n').filter(Boolean) : []);

/** The commit the change is measured from, or null (only the working tree). */
function base() {
  if (process.env.TEST_QUICK_BASE) return process.env.TEST_QUICK_BASE;
  const upstream = git('rev-parse', '--abbrev-ref', '--symbolic-full-name', '@{upstream}');
  if (upstream.status === 0) return upstream.stdout.trim();
  const branch = git('rev-parse', '--abbrev-ref', 'HEAD').stdout.trim();
  return branch !== 'main' && git('rev-parse', '--verify', '-q', 'main').status === 0 ? 'main' : null;
}
const from = base();
const tree = [
  ...lines(git('diff', '--name-only', 'HEAD')),
  ...lines(git('ls-files', '--others', '--exclude-standard')),
  ...(from ? lines(git('diff', '--name-only', `${from}...HEAD`)) : []),
];
const changed = [...new Set(tree.length || from ? tree : lines(git('diff', '--name-only', 'HEAD~1', 'HEAD')))].filter((f) =>
  fs.existsSync(f),
);

const ASSEMBLY = new Set(['src/app.ts', 'src/main.ts', 'src/delivery-main.ts']);
const graph = importGraph(['src', 'test', 'sim', 'dashboard', 'bench', 'scripts']);
const isTest = (f) => /^test\/(hostile\/)?[^/]+\.test\.ts$/.test(f);
const reached = new Set([...importersOf(graph, changed, ASSEMBLY)].filter(isTest));
// A capability's own test files, by name: src/zones/x.ts -> test/zones*.test.ts, test/hostile/zones*.test.ts.
const folders = new Set(changed.flatMap((f) => (f.startsWith('dashboard/') ? 'dashboard' : (/^src\/([^/]+)\//.exec(f)?.[1] ?? []))));
for (const dir of ['test', 'test/hostile'])
  for (const name of fs.readdirSync(dir))
    for (const folder of folders) {
      const stem = folder.replace(/s$/, '');
      if (name.endsWith('.test.ts') && name.startsWith(stem)) reached.add(`${dir}/${name}`);
    }
const database = [...reached].filter((f) => !f.startsWith('test/unit/')).sort();

console.log(`test:quick: ${changed.length} changed file(s) since ${from ?? (tree.length ? 'HEAD' : 'HEAD~1')}`);
for (const f of changed) console.log(`  ${f}`);
console.log(`reaching ${database.length} test file(s) besides the unit lane${database.length ? ':' : ''}`);
for (const f of database) console.log(`  ${f}`);

// `--list`: say what would run, and stop.
if (process.argv.includes('--list')) process.exit(0);

const step = (what, cmd, args, env = {}) => {
  const t = Date.now();
  const r = spawnSync(cmd, args, { stdio: 'inherit', env: { ...process.env, ...env } });
  console.log(`test:quick: ${what} ${r.status === 0 ? 'passed' : 'FAILED'} in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  if (r.status !== 0) {
    console.log(`test:quick: FAILED after ${Math.round((Date.now() - started) / 1000)} s`);
    process.exit(r.status ?? 1);
  }
};
const npx = (bin) => path.join('node_modules', '.bin', bin);
step('lint', npx('biome'), ['check', '.']);
step('structure', process.execPath, ['scripts/check-structure.mjs']);
step('types', npx('tsc'), ['--noEmit', '-p', '.']);
const unit = fs
  .readdirSync('test/unit')
  .filter((f) => f.endsWith('.test.ts'))
  .map((f) => `test/unit/${f}`);
const lanes = (process.env.TEST_QUICK_LANES ?? 'postgres').split(/\s+/).filter(Boolean);
step('tests', process.execPath, ['scripts/test.mjs'], {
  TEST_LANES: ['unit', ...(database.length ? lanes : [])].join(' '),
  TEST_FILES: [...unit, ...database].join(' '),
});
console.log(`test:quick: passed in ${Math.round((Date.now() - started) / 1000)} s`);
