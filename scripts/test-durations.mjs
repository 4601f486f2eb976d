// Refreshes test/durations.json, the durations the test runner (scripts/test.mjs) orders a clean
// clone's files by, from a run's own record of them (.cache/test-durations.json, written after every
// run of scripts/test.mjs; another checkout's with an argument). Run it after a full `npm test` on the
// machine CI runs on, and commit the file. Files that no longer exist are dropped; files the run did
// not see keep their kept duration.
//   node scripts/test-durations.mjs [path/to/test-durations.json]
import fs from 'node:fs';
import path from 'node:path';

const KEPT = path.join('test', 'durations.json');
const from = process.argv[2] ?? path.join('.cache', 'test-durations.json');
const read = (file) => (fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')) : {});
const run = read(from);
if (!Object.keys(run).length) {
  console.error(`${from}: no durations (run the suite first)`);
  process.exit(1);
}
const merged = { ...read(KEPT), ...run };
const out = {};
for (const key of Object.keys(merged).sort()) {
  const file = key.slice(key.indexOf(' ') + 1);
  if (fs.existsSync(file)) out[key] = Math.max(1, Math.round(merged[key]));
}
fs.writeFileSync(KEPT, `${JSON.stringify(out, null, 2)}\n`);
const total = Object.values(out).reduce((a, b) => a + b, 0);
console.log(`${KEPT}: ${Object.keys(out).length} files, ${total} s of process time in all`);
