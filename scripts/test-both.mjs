// The test suite on both databases, PostgreSQL then PGlite (or the stages named as arguments).
// Every stage runs even when an earlier one failed, so a failure on one never hides the other's
// results; each prints node's spec report, then one summary line per stage and a closing
// "tests: N passed, N failed, N skipped" line; the exit code is non-zero when any stage failed.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const STAGES = {
  postgres: { concurrency: 3 },
  pglite: { concurrency: 2 },
};
const names = process.argv.length > 2 ? process.argv.slice(2) : Object.keys(STAGES);
// TEST_FILES="test/a.test.ts test/b.test.ts" runs only those files.
const files = process.env.TEST_FILES
  ? process.env.TEST_FILES.split(/\s+/).filter(Boolean)
  : fs
      .readdirSync('test')
      .filter((f) => f.endsWith('.test.ts'))
      .map((f) => path.join('test', f));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tracking-tests-'));

// The services the tests talk to (PostgreSQL, Redis, Mosquitto, Keycloak, Kafka) are started here
// when down, as .ci/run does, so `npm test` alone passes on a fresh machine (scripts/services.sh;
// about a second when all run). TEST_SERVICES=off leaves them to you.
if (process.env.TEST_SERVICES !== 'off') {
  const s = spawnSync('bash', ['scripts/services.sh'], { stdio: 'inherit' });
  if (s.status !== 0) console.error('scripts/services.sh failed: tests that need a missing service will say how to start it');
}

const results = [];
for (const name of names) {
  const stage = STAGES[name];
  if (!stage) throw new Error(`unknown stage ${name}; known: ${Object.keys(STAGES).join(', ')}`);
  const tap = path.join(tmp, `${name}.tap`);
  const started = Date.now();
  const r = spawnSync(
    process.execPath,
    [
      '--import',
      'tsx',
      '--test',
      `--test-concurrency=${stage.concurrency}`,
      // Per test, and per file (each file is one test of the runner): a file of several broker
      // outages takes 150 s on a quiet machine, more on a busy one. Long tests set their own limits.
      '--test-timeout=420000',
      '--test-reporter=spec',
      '--test-reporter-destination=stdout',
      '--test-reporter=tap',
      `--test-reporter-destination=${tap}`,
      ...files,
    ],
    { stdio: 'inherit', env: { ...process.env, TEST_DB: name } },
  );
  // node's TAP report ends with "# pass N", "# fail N", "# skipped N", ... for the whole run.
  const text = fs.existsSync(tap) ? fs.readFileSync(tap, 'utf8') : '';
  const count = (what) => Number(new RegExp(`^# ${what} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);
  results.push({
    name,
    ok: r.status === 0,
    seconds: Math.round((Date.now() - started) / 1000),
    passed: count('pass'),
    failed: count('fail') + count('cancelled'),
    skipped: count('skipped') + count('todo'),
  });
}
fs.rmSync(tmp, { recursive: true, force: true });

console.log(`\nTest stages (node ${process.version}):`);
for (const r of results) {
  console.log(
    `  ${r.name.padEnd(9)} ${r.ok ? 'passed' : 'FAILED'}: ${r.passed} passed, ${r.failed} failed, ${r.skipped} skipped in ${r.seconds} s`,
  );
}
const sum = (k) => results.reduce((n, r) => n + r[k], 0);
const ok = results.every((r) => r.ok);
// A stage that exits non-zero with no failing test counted (a crash, a file that does not load) still fails.
console.log(`tests: ${sum('passed')} passed, ${Math.max(sum('failed'), ok ? 0 : 1)} failed, ${sum('skipped')} skipped`);
process.exit(ok ? 0 : 1);
