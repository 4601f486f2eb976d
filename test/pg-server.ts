// PostgreSQL servers a test starts itself (the server binaries of /usr/lib/postgresql, run as the
// postgres user when the test runs as root: the server refuses root). Each listens on a Unix
// socket in its own private folder only, so no TCP port another process could take while it is
// down. A primary with a streaming replica is made by pg_basebackup, as an operator would.
import { execFileSync } from 'node:child_process';
import type { TestContext } from 'node:test';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const PG_BIN = (() => {
  try {
    const versions = fs.readdirSync('/usr/lib/postgresql').sort();
    return path.join('/usr/lib/postgresql', versions[versions.length - 1]!, 'bin');
  } catch {
    return undefined;
  }
})();

/** Runs a PostgreSQL tool as the postgres user. */
export function asPostgres(tool: string, args: string[]): void {
  const cmd = path.join(PG_BIN!, tool);
  const argv = process.getuid?.() === 0 ? ['runuser', '-u', 'postgres', '--', cmd, ...args] : [cmd, ...args];
  execFileSync(argv[0]!, argv.slice(1), { stdio: 'pipe' });
}

export interface PrivatePostgres {
  /** postgres://... over the server's socket, database `postgres`. */
  url: string;
  /** The socket's folder. */
  dir: string;
  start(): void;
  stop(): void;
  /** Stops it if running and removes its folder. */
  remove(): void;
}

/** A server on `dir`'s socket, its data in `dir`/data (made by `init`, or by the caller). */
function server(dir: string, extra = ''): PrivatePostgres {
  const data = path.join(dir, 'data');
  const stop = () => asPostgres('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']);
  return {
    url: `postgres://postgres@localhost/postgres?host=${encodeURIComponent(dir)}`,
    dir,
    // No TCP (listen_addresses empty): only the socket in the private folder, the same at each start.
    start: () =>
      asPostgres('pg_ctl', [
        '-D',
        data,
        '-l',
        path.join(dir, 'log'),
        '-o',
        `-k ${dir} -c listen_addresses= -c fsync=off ${extra}`,
        '-w',
        'start',
      ]),
    stop,
    remove: () => {
      try {
        stop();
      } catch {
        /* not running */
      }
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

function privateDir(prefix: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  fs.chmodSync(dir, 0o777);
  return dir;
}

/** A new, started PostgreSQL server of the test's own (trust authentication, local replication allowed). */
export function privatePostgres(prefix: string): PrivatePostgres {
  const dir = privateDir(prefix);
  asPostgres('initdb', ['-D', path.join(dir, 'data'), '-A', 'trust', '-U', 'postgres', '--no-sync']);
  const s = server(dir);
  s.start();
  return s;
}

/**
 * A streaming replica of `primary` (pg_basebackup -R: standby.signal and primary_conninfo), started.
 * `pg_wal_replay_pause()` on it holds its replay back, as a lagging replica's.
 */
export function streamingReplica(primary: PrivatePostgres, prefix: string): PrivatePostgres {
  const dir = privateDir(prefix);
  asPostgres('pg_basebackup', ['-h', primary.dir, '-U', 'postgres', '-D', path.join(dir, 'data'), '-R', '--no-sync', '-X', 'stream']);
  const s = server(dir, '-c hot_standby=on');
  s.start();
  return s;
}

/** Whether the server binaries are here: a developer's machine without them skips the test, CI fails. */
export function serverBinaries(t: TestContext, inCi: boolean): boolean {
  if (PG_BIN) return true;
  if (inCi) throw new Error('PostgreSQL server binaries not found under /usr/lib/postgresql');
  t.skip('PostgreSQL server binaries not found under /usr/lib/postgresql');
  return false;
}

/**
 * A primary and its streaming replica, removed when the test ends; null (the test skipped) on a
 * developer's machine without the server binaries, a failure under CI.
 */
export function primaryWithReplica(t: TestContext, inCi: boolean): { primary: PrivatePostgres; replica: PrivatePostgres } | null {
  if (!serverBinaries(t, inCi)) return null;
  const primary = privatePostgres('tracking-primary-');
  t.after(() => primary.remove());
  const replica = streamingReplica(primary, 'tracking-replica-');
  t.after(() => replica.remove());
  return { primary, replica };
}
