// Runs the whole test suite on both databases, PostgreSQL then PGlite, always both (a failure on
// one must not hide the other's results), prints a summary line per stage, and exits non-zero when
// either stage failed.
import { spawnSync } from 'node:child_process';

const stages = [
  { name: 'postgres', script: 'test:postgres' },
  { name: 'pglite', script: 'test:pglite' },
];
const results = [];
for (const s of stages) {
  const started = Date.now();
  const r = spawnSync('npm', ['run', '--silent', s.script], { stdio: 'inherit' });
  results.push({ ...s, ok: r.status === 0, seconds: Math.round((Date.now() - started) / 1000) });
}
console.log('\nTest stages (node ' + process.version + '):');
for (const r of results) console.log(`  ${r.name.padEnd(9)} ${r.ok ? 'passed' : 'FAILED'} in ${r.seconds} s`);
process.exit(results.every((r) => r.ok) ? 0 : 1);
