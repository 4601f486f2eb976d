// Numbered SQL migrations (migrations/NNNN_verb_noun.sql), each applied in its own transaction and
// recorded once. A session-level advisory lock serialises instances that start at the same time:
// the first applies what is missing, the others wait and then find everything applied.
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Db, Session } from './db.js';

export const MIGRATION_LOCK_KEY = 7_301_946_211; // arbitrary, fixed: pg_advisory_lock(bigint)
const DEFAULT_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../migrations');

export interface Migration {
  id: number;
  name: string;
  sql: string;
}

export async function readMigrations(dir = DEFAULT_DIR): Promise<Migration[]> {
  const files = (await fs.readdir(dir)).filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f)).sort();
  return Promise.all(
    files.map(async (f) => ({
      id: Number(f.slice(0, 4)),
      name: f.replace(/\.sql$/, ''),
      sql: await fs.readFile(path.join(dir, f), 'utf8'),
    })),
  );
}

/**
 * A migration that SQL in one transaction cannot express (one that must not hold a lock while it
 * scans, or that builds an index CONCURRENTLY): its file holds `-- @program <name>` and documents
 * it; the program, given by the caller, runs its own transactions and can run again after a crash.
 */
export type MigrationProgram = (s: Session) => Promise<void>;

export interface MigrateOptions {
  dir?: string;
  programs?: Record<string, MigrationProgram>;
  /** Applies only the migrations up to this id (the upgrade test builds an older database). */
  upTo?: number;
}

/** Applies pending migrations; returns the names this call applied. */
export async function migrate(db: Db, o: MigrateOptions = {}): Promise<string[]> {
  const migrations = (await readMigrations(o.dir)).filter((m) => o.upTo === undefined || m.id <= o.upTo);
  return db.session(async (s) => {
    await s.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    try {
      await s.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
        id integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
      const done = new Set((await s.query<{ id: number }>('SELECT id FROM schema_migrations')).rows.map((r) => r.id));
      const applied: string[] = [];
      for (const m of migrations) {
        if (done.has(m.id)) continue;
        const program = /^-- @program ([a-z0-9-]+)$/m.exec(m.sql)?.[1];
        if (program) {
          const run = o.programs?.[program];
          if (!run) throw new Error(`migration ${m.name} needs the program ${program}, which was not given`);
          try {
            await run(s);
          } catch (e) {
            throw new Error(`migration ${m.name} failed: ${(e as Error).message}`, { cause: e });
          }
          await s.query('INSERT INTO schema_migrations (id, name) VALUES ($1, $2)', [m.id, m.name]);
          applied.push(m.name);
          continue;
        }
        await s.exec('BEGIN');
        try {
          await s.exec(m.sql);
          await s.query('INSERT INTO schema_migrations (id, name) VALUES ($1, $2)', [m.id, m.name]);
          await s.exec('COMMIT');
        } catch (e) {
          await s.exec('ROLLBACK');
          throw new Error(`migration ${m.name} failed: ${(e as Error).message}`, { cause: e });
        }
        applied.push(m.name);
      }
      return applied;
    } finally {
      await s.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
    }
  });
}
