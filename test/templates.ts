// Migrated databases to start test apps from, made once per run by scripts/test.mjs: a PostgreSQL
// template database (each file's database is a copy: CREATE DATABASE ... TEMPLATE) and a saved
// PGlite data folder (each in-memory PGlite loads it). A migrated PGlite loads in about 0.25 s where
// initdb takes 1.2-1.6 s, and the suite starts some 80 of them. Each test's database is still its
// own; the app then finds every migration applied and bootstraps its operator as on a fresh start.
// Run as a script by the runner (below): `make` prints the templates as JSON, `drop` removes the PostgreSQL one.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { PGlite } from '@electric-sql/pglite';
import { createPostgres, type Db, type Session } from '../src/db/db.js';
import { migrate } from '../src/db/migrate.js';
import { migrationPrograms } from '../src/storage/storage.js';

const ADMIN_PG_URL = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: ADMIN_PG_URL });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

export async function makePostgresTemplate(): Promise<string> {
  const name = `tpl_${crypto.randomBytes(6).toString('hex')}`;
  await admin((c) => c.query(`CREATE DATABASE ${name}`));
  const u = new URL(ADMIN_PG_URL);
  u.pathname = `/${name}`;
  const db = createPostgres(u.toString(), 1);
  try {
    await migrate(db, { programs: migrationPrograms('postgres', 'week') });
  } finally {
    await db.close();
  }
  return name;
}

export async function dropPostgresTemplate(name: string): Promise<void> {
  if (!/^tpl_[0-9a-f]{12}$/.test(name)) throw new Error(`not a template name: ${name}`);
  await admin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
}

export async function makePgliteTemplate(dir: string): Promise<string> {
  // A raw PGlite (the service's handle does not hand out its data folder), migrated through the one
  // method migrate() uses, then saved.
  const raw = await PGlite.create();
  const session: Session = {
    query: async (text, params) => {
      const r = await raw.query(text, params as unknown[]);
      return { rows: r.rows as any[], rowCount: r.affectedRows ?? 0 };
    },
    exec: async (sql) => void (await raw.exec(sql)),
  };
  await migrate({ session: (fn) => fn(session) } as Db, { programs: migrationPrograms('pglite', 'week') });
  const file = path.join(dir, 'pglite-template.tar');
  fs.writeFileSync(file, Buffer.from(await (await raw.dumpDataDir('none')).arrayBuffer()));
  await raw.close();
  return file;
}

// node --import tsx test/templates.ts make <folder>  |  drop <template database>
if (import.meta.url === `file://${process.argv[1]}`) {
  const [cmd, arg] = process.argv.slice(2);
  if (cmd === 'drop') await dropPostgresTemplate(arg!);
  else if (cmd === 'make') console.log(JSON.stringify({ postgres: await makePostgresTemplate(), pglite: await makePgliteTemplate(arg!) }));
  else throw new Error('usage: templates.ts make <folder> | drop <template database>');
}
