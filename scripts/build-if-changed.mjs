// `npm start` runs this first: it compiles src/ to dist/ only when a source, a tsconfig or the
// lockfile is newer than the last build, so a start with nothing changed costs no compile. The
// compile itself is incremental (dist/.tsbuildinfo).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const stamp = 'dist/.built';
const newest = (p) => {
  const st = fs.statSync(p);
  if (!st.isDirectory()) return st.mtimeMs;
  return Math.max(0, ...fs.readdirSync(p).map((f) => newest(path.join(p, f))));
};
const inputs = ['src', 'tsconfig.json', 'tsconfig.build.json', 'package-lock.json'].filter((p) => fs.existsSync(p));
const built = fs.existsSync(stamp) ? fs.statSync(stamp).mtimeMs : 0;
if (Math.max(...inputs.map(newest)) <= built) process.exit(0);
console.error('building dist/ (sources changed since the last build)');
const tsc = spawnSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.build.json'], { stdio: 'inherit' });
if (tsc.status !== 0) process.exit(tsc.status ?? 1);
fs.writeFileSync(stamp, `${new Date().toISOString()}\n`);
