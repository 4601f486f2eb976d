// The previous release beside today's service: BENCH_BASELINE names a commit (default dfd22b3, the
// commit before the wave that made steady delivery slower; "off" leaves it out), which is checked out
// in a git worktree under .cache/bench-baseline/<commit>, installed (`npm ci`) and built (its own
// `tsc -p tsconfig.build.json`) once, and started with its own `npm start` flags. Parts that compare
// run each shape on today's service and on the baseline in turn, alternating, so that both see the
// same machine in the same minutes, and report the ratio.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from './lib.js';

export const DEFAULT_BASELINE = 'dfd22b3';

function run(cmd: string, args: string[], cwd: string): string {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} (in ${cwd}) failed: ${r.stderr || r.stdout}`);
  return r.stdout.trim();
}

/** The baseline's commit (abbreviated) and root, built; null when BENCH_BASELINE=off. */
export function baselineRoot(): { commit: string; root: string } | null {
  const named = (process.env.BENCH_BASELINE ?? DEFAULT_BASELINE).trim();
  if (!named || named === 'off') return null;
  const sha = run('git', ['rev-parse', '--verify', `${named}^{commit}`], ROOT);
  const commit = sha.slice(0, 7);
  const root = path.join(ROOT, '.cache', 'bench-baseline', sha);
  const stamp = path.join(root, 'dist', '.bench-built');
  if (fs.existsSync(stamp)) return { commit, root };
  console.error(`[baseline] building ${commit} in ${path.relative(ROOT, root)} (once: npm ci, tsc)`);
  if (fs.existsSync(root)) {
    spawnSync('git', ['worktree', 'remove', '--force', root], { cwd: ROOT });
    fs.rmSync(root, { recursive: true, force: true });
  }
  spawnSync('git', ['worktree', 'prune'], { cwd: ROOT });
  run('git', ['worktree', 'add', '--detach', root, sha], ROOT);
  run('npm', ['ci', '--no-audit', '--no-fund'], root);
  run(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.build.json'], root);
  // Its own build-if-changed (run by startService) then sees nothing newer than its build.
  fs.writeFileSync(path.join(root, 'dist', '.built'), `${new Date().toISOString()}\n`);
  fs.writeFileSync(stamp, `${sha}\n`);
  return { commit, root };
}
