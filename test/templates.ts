// Migrated databases to start test apps from, made once per run by scripts/test.mjs: a PostgreSQL
// template database (each file's database is a copy: CREATE DATABASE ... TEMPLATE) and a saved
// PGlite data folder (each in-memory PGlite loads it). A migrated PGlite loads in about 0.25 s where
// initdb takes 1.2-1.6 s, and the suite starts some 80 of them. The templates also hold the partitions
// an app makes at its start (this week's and those FUTURE_TOLERANCE_SECONDS ahead, with the default
// settings), some 0.4 s of statements per app. Each test's database is still its own; the app then
// finds every migration applied and its partitions there, and bootstraps its operator as on a fresh start.
// Run as a script by the runner (below): `make` prints the templates as JSON, `drop` removes the PostgreSQL one.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { PGlite } from '@electric-sql/pglite';
import { createPostgres, type Db, type Session } from '../src/db/db.js';
import { migrate } from '../src/db/migrate.js';
import { loadConfig } from '../src/config.js';
import { Partitions } from '../src/storage/partitions.js';
import { migrationPrograms } from '../src/storage/storage.js';
import { PARTITIONED } from '../src/storage/tables.js';

/** Migrates, then makes the partitions an app's start makes (src/storage/storage.ts, start). */
async function prepare(db: Db, kind: Db['kind']): Promise<void> {
  const cfg = loadConfig({});
  await migrate(db, { programs: migrationPrograms(kind, cfg.PARTITION_INTERVAL) });
  await new Partitions(db, cfg.PARTITION_INTERVAL).prepare(
    PARTITIONED.map((t) => t.name),
    Date.now(),
    cfg.FUTURE_TOLERANCE_SECONDS * 1000,
  );
}

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
    await prepare(db, 'postgres');
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
  // A raw PGlite (the service's handle does not hand out its data folder), migrated and partitioned
  // through the methods migrate() and Partitions use, then saved.
  const raw = await PGlite.create();
  const toRows = (r: { rows: unknown[]; affectedRows?: number }) => ({ rows: r.rows as any[], rowCount: r.affectedRows ?? 0 });
  const session: Session = {
    query: async (text, params) => toRows(await raw.query(text, params as unknown[])),
    exec: async (sql) => void (await raw.exec(sql)),
  };
  await prepare(
    {
      ...session,
      session: (fn) => fn(session),
      tx: (fn) => raw.transaction((t) => fn({ query: async (text, params) => toRows(await t.query(text, params as unknown[])) })),
    } as Partial<Db> as Db,
    'pglite',
  );
  // The app uses the one database, postgres: without template0 and template1 (7.4 MB each) the saved
  // folder is a third smaller, and every in-memory PGlite of the run copies it whole.
  for (const d of ['template0', 'template1']) {
    await raw.exec(`ALTER DATABASE ${d} WITH is_template false`);
    await raw.exec(`DROP DATABASE ${d}`);
  }
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
