// The whole test suite, as `npm test` runs it after lint and typecheck: four lanes of test files,
//   unit      test/unit/*.test.ts: pure logic, no service and no database, run once;
//   postgres  test/*.test.ts on PostgreSQL (TEST_DB=postgres, a new database per file);
//   pglite    test/*.test.ts on the embedded PGlite (TEST_DB=pglite, in memory);
//   (both database lanes also run the hostile-tenant suite, test/hostile/*.test.ts);
//   kafka     the files that name it (`// @test-lanes ... kafka`: the delivery, broker, crash and
//             outage suites) on PostgreSQL with the event log on Kafka (TEST_EVENT_LOG=kafka),
// all in one pool of TEST_CONCURRENCY processes (default 4), one process per file and lane, the
// slowest first (by their durations in test/durations.json, kept in git, or this checkout's own last
// run in .cache/test-durations.json). The long files of one lane (a crash test waits for restarts) then
// overlap the many short files of the others, instead of each lane waiting for its own slowest.
// Each file's report is printed whole when it ends (never interleaved), then one summary line per
// lane, the slowest files, and a closing "tests: N passed, N failed, N skipped" line; the exit
// code is non-zero when any file failed.
//
// The files run as JavaScript: the runner compiles the repository's TypeScript once per run (esbuild,
// file by file, as tsx would, with source maps back to the .ts) into a mirror of the repository in its
// temporary folder (every other file and folder there is a link to the real one, so paths taken from
// import.meta.url still lead where they should), and the processes share one V8 compile cache. A
// test process then starts in about half the CPU time it takes under tsx (0.7 s instead of 1.65 s to
// load the service here), and the suite starts some 300. TEST_COMPILED=off runs the .ts files under tsx.
//
// Arguments name the lanes to run (default all three; TEST_LANES="unit postgres" too);
// TEST_FILES="test/a.test.ts test/unit/b.test.ts" narrows to some files; TEST_BROWSER=off leaves out the browser tests;
// TEST_OTHER_NODES="<folder holding node>=unit,compat" also runs those lanes' files on another Node.js in
// the same pool (CI's oldest supported line: its unit lane and the compatibility set of
// scripts/test-lanes.mjs; their lanes read unit@node22 and so on; `compat` may name a lane here too). The services the tests
// talk to are started first when down (scripts/services.sh); TEST_SERVICES=off leaves them to you.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { stripVTControlCharacters } from 'node:util';
import * as esbuild from 'esbuild';
import { COMPAT, CPU_BUDGET_SECONDS, FILE_CPU_LIMIT_SECONDS } from './test-lanes.mjs';

const LANES = ['unit', 'postgres', 'pglite', 'kafka'];
/**
 * `compat` is no lane of its own: it names the compatibility set (scripts/test-lanes.mjs), the few
 * database files that the oldest supported Node runs beside its unit lane, each in its own lane.
 */
const PSEUDO_LANES = ['compat'];
const DURATIONS = path.join('.cache', 'test-durations.json');
/** Each file's CPU seconds in its last run (with GNU time), beside its duration. */
const CPU = path.join('.cache', 'test-cpu.json');
// Per test (a file of several broker outages takes 150 s on a quiet machine): long tests set their own.
const TEST_TIMEOUT_MS = 420_000;
// A file that runs longer than this is stopped and counted as failed, so a hang cannot stall CI.
const FILE_TIMEOUT_MS = 15 * 60_000;
// Each file's duration in its lane, kept in the repository (refreshed with `node scripts/test-durations.mjs`
// after a full run, and committed), so that a clean clone starts the slowest first. A file it does not
// know yet (new since the last refresh) is guessed long: a long file left to the end makes the whole
// run wait for it, a short one started early costs little.
const KEPT_DURATIONS = path.join('test', 'durations.json');
/**
 * A database file neither record knows (new since the last refresh) is guessed at two minutes: ahead of
 * the many short files, behind the known long ones.
 */
const UNKNOWN_SECONDS = 120;

const args = process.argv.slice(2);
const lanes = args.length ? args : (process.env.TEST_LANES ?? LANES.join(' ')).split(/\s+/).filter(Boolean);
/** Throws on a lane name the runner does not know (`where` says where it was named). */
const knownLane = (l, where = '') => {
  if (!LANES.includes(l) && !PSEUDO_LANES.includes(l))
    throw new Error(`unknown lane ${l}${where}; known: ${[...LANES, ...PSEUDO_LANES].join(', ')}`);
};
for (const l of lanes) knownLane(l);
const concurrency = Math.max(1, Number(process.env.TEST_CONCURRENCY ?? 4));
const only = process.env.TEST_FILES?.split(/\s+/).filter(Boolean);
const list = (dir) =>
  fs.existsSync(dir)
    ? fs
        .readdirSync(dir)
        .filter((f) => f.endsWith('.test.ts'))
        .map((f) => path.join(dir, f))
    : [];
/** A file may name its lanes in a first-lines comment, `// @test-lanes postgres` (what needs PostgreSQL, or no database). */
const lanesOf = (file) => /^\/\/ @test-lanes (.+)$/m.exec(fs.readFileSync(file, 'utf8').slice(0, 4096))?.[1]?.split(/\s+/);
/**
 * A browser test says so in its first lines (`// @test-browser`): TEST_BROWSER=off leaves it out
 * (CI's run on the oldest Node: the page is the same on every Node, and the browser tests are the
 * slowest to repeat).
 */
const isBrowserTest = (file) => /^\/\/ @test-browser$/m.test(fs.readFileSync(file, 'utf8').slice(0, 4096));
const filesOf = (lane) => {
  const all = (lane === 'unit' ? list(path.join('test', 'unit')) : [...list('test'), ...list(path.join('test', 'hostile'))])
    // The kafka lane runs only the files that name it (the delivery suite, in the event log's Kafka mode).
    .filter((f) => lanesOf(f)?.includes(lane) ?? lane !== 'kafka')
    .filter((f) => process.env.TEST_BROWSER !== 'off' || !isBrowserTest(f));
  return only ? all.filter((f) => only.includes(f)) : all;
};

if (process.env.TEST_SERVICES !== 'off' && lanes.some((l) => l !== 'unit')) {
  const s = spawnSync('bash', ['scripts/services.sh'], { stdio: 'inherit' });
  if (s.status !== 0) console.error('scripts/services.sh failed: tests that need a missing service will say how to start it');
}

const readJson = (file) => {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch {
    return {}; // none yet
  }
};
// This checkout's own last durations (.cache, outside git) come before the kept ones.
const kept = readJson(KEPT_DURATIONS);
const known = readJson(DURATIONS);
const guess = (job) => {
  // A file on another Node not timed there yet takes about as long as on the runner's own.
  const last = known[job.key] ?? kept[job.key] ?? known[job.alike] ?? kept[job.alike];
  if (typeof last === 'number') return last;
  return job.lane === 'unit' ? 0 : UNKNOWN_SECONDS;
};
/** A Node.js the files run on: the runner's own, or one of TEST_OTHER_NODES. */
const nodeOf = (exec) => {
  const version =
    exec === process.execPath
      ? process.versions.node
      : spawnSync(exec, ['-p', 'process.versions.node'], { encoding: 'utf8' }).stdout?.trim();
  if (!/^\d+\.\d+\.\d+$/.test(version ?? '')) throw new Error(`${exec} is not a working node (TEST_OTHER_NODES)`);
  const [major, minor] = version.split('.').map(Number);
  // The file runs in the test runner's own process (one process per file, not two); Node 22 names
  // the flag as experimental.
  const inProcess = major > 23 || (major === 23 && minor >= 6) ? '--test-isolation=none' : '--experimental-test-isolation=none';
  return { exec, version, major, inProcess, tag: exec === process.execPath ? '' : `@node${major}` };
};
const ownNode = nodeOf(process.execPath);
// TEST_OTHER_NODES="<folder holding node>=<lane>,<lane> ...": the same files also run on those
// Node.js binaries, in the same pool (CI: the oldest supported line runs the unit and PostgreSQL
// lanes beside the newest's; one pool keeps both cores busy while the other's files wait on
// brokers and restarts). Their files are told apart as lane@nodeNN; browser tests run on the
// runner's own Node only (the page is the same on every Node).
const otherNodes = (process.env.TEST_OTHER_NODES ?? '')
  .split(/\s+/)
  .filter(Boolean)
  .map((entry) => {
    const [dir, laneList = 'unit,compat'] = entry.split('=');
    const ls = laneList.split(',').filter(Boolean);
    for (const l of ls) knownLane(l, ' in TEST_OTHER_NODES');
    return { node: nodeOf(path.join(path.resolve(dir), 'node')), lanes: ls };
  });
/** The files of a lane, as [lane, file] pairs: `compat` gives the compatibility set's files, each in its database lane. */
const pairsOf = (lane) =>
  lane === 'compat'
    ? COMPAT.flatMap((c) => (filesOf(c.lane).includes(c.file) ? [[c.lane, c.file]] : []))
    : filesOf(lane).map((file) => [lane, file]);
const jobsOn = (node, ls, browser) =>
  ls
    .flatMap(pairsOf)
    .filter(([, file]) => browser || !isBrowserTest(file))
    .map(([lane, file]) => ({ lane, file, node, key: `${lane}${node.tag} ${file}`, alike: `${lane} ${file}` }));
// One job per key (a file named by its lane and by the compatibility set runs once).
const jobs = [
  ...new Map(
    [...jobsOn(ownNode, lanes, true), ...otherNodes.flatMap((o) => jobsOn(o.node, o.lanes, false))].map((j) => [j.key, j]),
  ).values(),
].sort((a, b) => guess(b) - guess(a));

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tracking-tests-'));

/** The folders whose TypeScript the tests load (dashboard/: its stream parser, test/live-stream.ts); everything else in the mirror is a link. */
const COMPILED = ['src', 'test', 'sim', 'bench', 'scripts', 'dashboard'];
/**
 * Mirrors the repository into `into`: each .ts file of COMPILED compiled to .js (its source linked) beside a linked
 * source map, every other file and folder a symbolic link to the original. Returns `into`.
 */
async function compileTree(into) {
  const sources = [];
  const mirror = (rel) => {
    fs.mkdirSync(path.join(into, rel), { recursive: true });
    for (const e of fs.readdirSync(rel || '.', { withFileTypes: true })) {
      const from = path.join(rel, e.name);
      if (!rel && ['.git', '.cache'].includes(e.name)) continue;
      if (e.isDirectory() && e.name !== 'node_modules' && (rel || COMPILED.includes(e.name))) mirror(from);
      else if (e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') && rel) {
        sources.push(from);
        // The source stays readable beside its compiled twin (a test may read a file's text).
        fs.symlinkSync(path.resolve(from), path.join(into, from));
      } else fs.symlinkSync(path.resolve(from), path.join(into, from));
    }
  };
  mirror('');
  await esbuild.build({
    entryPoints: sources,
    outdir: into,
    outbase: '.',
    format: 'esm',
    platform: 'node',
    // For the oldest Node the files run on.
    target: `node${Math.min(ownNode.major, ...otherNodes.map((o) => o.node.major))}`,
    sourcemap: 'linked',
    logLevel: 'warning',
  });
  return into;
}
const compiled = process.env.TEST_COMPILED === 'off' ? null : await compileTree(path.join(tmp, 'tree'));
/** The file a job runs: its compiled twin, or the .ts itself under tsx. */
const runnable = (file) => (compiled ? path.join(compiled, file.replace(/\.ts$/, '.js')) : file);
const nodeArgs = compiled ? ['--enable-source-maps'] : ['--import', 'tsx'];
/** One V8 compile cache for the run's processes (each file is loaded by hundreds). */
const compileCache = compiled ? { NODE_COMPILE_CACHE: path.join(tmp, 'compile-cache') } : {};
const results = [];
const started = Date.now();

// Migrated databases every test app starts from (test/templates.ts): a template database on
// PostgreSQL, a saved data folder for PGlite. Without them (PostgreSQL down) each app migrates its own.
const templatesScript = (...a) =>
  spawnSync(process.execPath, [...nodeArgs, runnable('test/templates.ts'), ...a], {
    encoding: 'utf8',
    env: { ...process.env, ...compileCache },
  });
let templates = {};
if (jobs.some((j) => j.lane !== 'unit')) {
  const made = templatesScript('make', tmp);
  if (made.status === 0) templates = JSON.parse(made.stdout.trim().split('\n').at(-1));
  else console.error(`No template databases (each test app will migrate its own):\n${made.stderr}`);
}
const templateEnv = {
  ...(templates.postgres ? { TEST_PG_TEMPLATE: templates.postgres } : {}),
  ...(templates.pglite ? { TEST_PGLITE_TEMPLATE: templates.pglite } : {}),
};

/**
 * The PGlite lane's test processes run the embedded database's WebAssembly on V8's baseline
 * compiler alone (Liftoff): a test process lives for seconds and runs a few thousand statements,
 * and the optimising tier's compile of PostgreSQL's functions cost it more CPU than it saved (a
 * process opening two databases and running 6,000 statements: 4.3-4.7 s of CPU instead of
 * 5.1-5.9 s). The same code, compiled more simply; the service (`npm start`, and the processes the
 * tests start as the service) keeps V8's default, which pays off over hours.
 */
const WASM_BASELINE_ONLY = ['--liftoff-only'];

const TIME = fs.existsSync('/usr/bin/time') ? '/usr/bin/time' : null;
const childrenOf = (pid) => {
  try {
    return fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
};
/** User + system CPU seconds that GNU time wrote, or null. */
const cpuOf = (file) => {
  const m = fs.existsSync(file) ? /^([\d.]+) ([\d.]+)$/m.exec(fs.readFileSync(file, 'utf8')) : null;
  return m ? Number(m[1]) + Number(m[2]) : null;
};

/** Runs one file in its own process with the spec report captured and a TAP file for the counts. */
function run(job, n) {
  return new Promise((resolve) => {
    const tap = path.join(tmp, `${n}.tap`);
    const begin = Date.now();
    let out = '';
    const cpuFile = path.join(tmp, `${n}.cpu`);
    const argv = [
      job.node.exec,
      ...nodeArgs,
      ...(job.lane === 'pglite' ? WASM_BASELINE_ONLY : []),
      '--test',
      job.node.inProcess,
      `--test-timeout=${TEST_TIMEOUT_MS}`,
      '--test-reporter=spec',
      '--test-reporter-destination=stdout',
      '--test-reporter=tap',
      `--test-reporter-destination=${tap}`,
      runnable(job.file),
    ];
    // GNU time, where there is one, counts the CPU seconds of the file's process and of every
    // process it started and waited for (its services, brokers, browsers; not the database server's).
    const child = spawn(TIME ?? argv[0], TIME ? ['-f', '%U %S', '-o', cpuFile, ...argv] : argv.slice(1), {
      env: {
        ...process.env,
        ...compileCache,
        ...(job.lane === 'unit'
          ? {}
          : job.lane === 'kafka'
            ? { TEST_DB: 'postgres', TEST_EVENT_LOG: 'kafka', ...templateEnv }
            : { TEST_DB: job.lane, ...templateEnv }),
        FORCE_COLOR: process.stdout.isTTY ? '1' : '0',
        // What the file starts by name (npm, node) runs on the file's own Node too.
        ...(job.node === ownNode ? {} : { PATH: `${path.dirname(job.node.exec)}${path.delimiter}${process.env.PATH}` }),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const watchdog = setTimeout(() => {
      out += `\n${job.file} ran longer than ${FILE_TIMEOUT_MS / 60_000} minutes: stopped.\n`;
      // Under GNU time the file's process is time's child: that one is killed, and time ends with it.
      for (const pid of TIME ? childrenOf(child.pid) : [child.pid]) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          /* gone */
        }
      }
    }, FILE_TIMEOUT_MS);
    child.on('close', (code, signal) => {
      clearTimeout(watchdog);
      const text = fs.existsSync(tap) ? fs.readFileSync(tap, 'utf8') : '';
      const count = (what) => Number(new RegExp(`^# ${what} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);
      const r = {
        ...job,
        ok: code === 0,
        seconds: (Date.now() - begin) / 1000,
        cpu: cpuOf(cpuFile),
        passed: count('pass'),
        failed: count('fail') + count('cancelled'),
        skipped: count('skipped') + count('todo'),
      };
      // A file that exits non-zero with no failing test counted (a crash, a syntax error) still fails.
      if (!r.ok && r.failed === 0) r.failed = 1;
      if (!r.ok) r.failures = failuresOf(out);
      const cpu = r.cpu === null ? '' : ` (${r.cpu.toFixed(1)} s of CPU)`;
      console.log(
        `\n── ${job.lane}${job.node.tag} ${job.file}: ${r.ok ? 'passed' : `FAILED (${signal ?? `exit ${code}`})`} in ${r.seconds.toFixed(1)} s${cpu}, ended ${Math.round((Date.now() - started) / 1000)} s into the run`,
      );
      process.stdout.write(out);
      results.push(r);
      resolve();
    });
  });
}

// A file never runs in one lane on two Nodes at once: its brokers and servers are named and
// numbered per file and lane (`mqtt-ingest-postgres` on its port base), and two copies would take
// each other's. A process that is free takes the slowest job whose twin is not running; when only
// such twins are left, it waits for one to end.
const waiting = jobs.map((job, n) => ({ job, n }));
const running = new Set();
let ended = Promise.withResolvers(); // resolved (and replaced) whenever a file ends
await Promise.all(
  Array.from({ length: Math.min(concurrency, jobs.length) }, async () => {
    while (waiting.length) {
      const i = waiting.findIndex((w) => !running.has(w.job.alike));
      if (i < 0) {
        await ended.promise;
        continue;
      }
      const [{ job, n }] = waiting.splice(i, 1);
      running.add(job.alike);
      await run(job, n);
      running.delete(job.alike);
      ended.resolve();
      ended = Promise.withResolvers();
    }
  }),
);
if (templates.postgres) templatesScript('drop', templates.postgres);
fs.rmSync(tmp, { recursive: true, force: true });

// Kept for the next run's order; a narrowed run adds to what is known.
try {
  fs.mkdirSync(path.dirname(DURATIONS), { recursive: true });
  for (const r of results) known[r.key] = Math.round(r.seconds * 10) / 10;
  fs.writeFileSync(DURATIONS, `${JSON.stringify(known, null, 1)}\n`);
  const cpuSeconds = readJson(CPU);
  for (const r of results) if (r.cpu !== null) cpuSeconds[r.key] = Math.round(r.cpu * 10) / 10;
  fs.writeFileSync(CPU, `${JSON.stringify(cpuSeconds, null, 1)}\n`);
} catch {
  /* a read-only checkout: the next run uses the default order */
}

/**
 * The reporter's closing "failing tests" section of a file's output (each test and its error), at
 * most 40 lines; or the output's last 20 lines when it has none (a crash, a file stopped).
 */
function failuresOf(out) {
  const lines = stripVTControlCharacters(out).split('\n');
  const at = lines.findIndex((l) => l.includes('failing tests:'));
  const part = (at >= 0 ? lines.slice(at + 1) : lines.slice(-20)).filter((l) => l.trim() && !l.includes('node:internal/'));
  return part.length > 40 ? [...part.slice(0, 40), `... and ${part.length - 40} more lines, in the file's output above`] : part;
}

const sum = (rs, k) => rs.reduce((n, r) => n + r[k], 0);
console.log(
  `\nTest lanes (node ${[ownNode, ...otherNodes.map((o) => o.node)].map((n) => `v${n.version}`).join(' and ')}, ${concurrency} files at a time, ${Math.round((Date.now() - started) / 1000)} s in all):`,
);
const laneNames = [...new Set(jobs.map((j) => `${j.lane}${j.node.tag}`))].sort(
  (x, y) => LANES.indexOf(x.split('@')[0]) - LANES.indexOf(y.split('@')[0]) || x.localeCompare(y),
);
const measured = results.filter((r) => r.cpu !== null);
const allCpu = sum(measured, 'cpu');
for (const lane of laneNames) {
  const rs = results.filter((r) => `${r.lane}${r.node.tag}` === lane);
  const ok = rs.every((r) => r.ok);
  const laneCpu = sum(
    rs.filter((r) => r.cpu !== null),
    'cpu',
  );
  const share = measured.length ? `, ${Math.round(laneCpu)} s of CPU (${Math.round((100 * laneCpu) / (allCpu || 1))}%)` : '';
  console.log(
    `  ${lane.padEnd(16)} ${ok ? 'passed' : 'FAILED'}: ${sum(rs, 'passed')} passed, ${sum(rs, 'failed')} failed, ${sum(rs, 'skipped')} skipped; ${rs.length} files, ${Math.round(sum(rs, 'seconds'))} s of process time${share}`,
  );
}
const failedFiles = results.filter((r) => !r.ok);
for (const r of failedFiles) {
  console.log(`  failed: ${r.lane}${r.node.tag} ${r.file}`);
  // Why, again here: a CI log cut to its tail keeps the summary, not the file's output far above.
  for (const l of r.failures) console.log(`    ${l}`);
}
console.log(
  '  slowest:',
  [...results]
    .sort((a, b) => b.seconds - a.seconds)
    .slice(0, 6)
    .map((r) => `${r.lane}${r.node.tag} ${path.basename(r.file)} ${r.seconds.toFixed(0)} s`)
    .join(', '),
);
if (measured.length) {
  // Where the two cores went (the test processes and what they started; the database server's share
  // is not in it), against the budget of a whole run (scripts/test-lanes.mjs). A narrowed run is
  // measured against it too: it says what the files run cost, not whether a whole run fits.
  const top = [...measured].sort((a, b) => b.cpu - a.cpu);
  const whole = !only && LANES.every((l) => lanes.includes(l));
  console.log(
    `  CPU: ${Math.round(allCpu)} s of test processes${whole ? `, budget ${CPU_BUDGET_SECONDS} s (${allCpu <= CPU_BUDGET_SECONDS ? 'within' : `OVER by ${Math.round(allCpu - CPU_BUDGET_SECONDS)} s`})` : ''}; most:`,
    top
      .slice(0, 8)
      .map((r) => `${r.lane}${r.node.tag} ${path.basename(r.file)} ${r.cpu.toFixed(0)} s`)
      .join(', '),
  );
  const heavy = top.filter((r) => r.cpu > FILE_CPU_LIMIT_SECONDS);
  if (heavy.length)
    console.log(
      `  over ${FILE_CPU_LIMIT_SECONDS} s of CPU each (make them cheaper; docs/TESTING.md): ${heavy.map((r) => `${r.lane}${r.node.tag} ${r.file} ${r.cpu.toFixed(0)} s`).join(', ')}`,
    );
}
console.log(`tests: ${sum(results, 'passed')} passed, ${sum(results, 'failed')} failed, ${sum(results, 'skipped')} skipped`);
process.exit(failedFiles.length ? 1 : 0);
