// @test-lanes postgres
// (both databases in one run: PostgreSQL through pg_dump/pg_restore, the embedded one as a copy of
// its stopped data folder)
// Backup and restore as docs/OPERATIONS.md ("Backup and restore") tells an operator: records stored
// through the service, a backup taken as the guide says, restored into a fresh database or folder,
// the service started on it, and the same records read back through the API, with a token issued
// before the backup (its signing key is in the backup, sealed with SECRETS_KEY or DATA_DIR's
// secrets.key). PostgreSQL: a dump taken while the service runs, restored with the server's own
// pg_restore (and refused to start with another SECRETS_KEY). Embedded: the service stopped
// (SIGTERM checkpoints), DATA_DIR copied.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { atEnd, createTestDatabase, requireService } from './helpers.js';
import { embeddedDataDir, type ServiceProcess, serviceProcess } from './service-process.js';

const RECORDS = 50;
const FROM_TO = 'from=1970-01-01T00:00:00Z&to=9999-12-31T23:59:59Z';

/** Stores an owner, an asset and RECORDS locations; returns what a restored service must answer. */
async function store(svc: ServiceProcess) {
  const owner = await svc.api('POST', '/owners', { name: `backup-${crypto.randomBytes(3).toString('hex')}` });
  assert.equal(owner.status, 201, JSON.stringify(owner.body));
  const asset = await svc.api('POST', '/assets', { name: 'MSKU1234565', ownerId: owner.body.id });
  assert.equal(asset.status, 201, JSON.stringify(asset.body));
  const body = Array.from({ length: RECORDS }, (_, i) => ({
    assetId: asset.body.id,
    latitude: i % 90,
    longitude: 1 + i / 100,
    whenCreated: new Date(Date.now() - 600_000 + i * 1000).toISOString(),
  }));
  const stored = await svc.api('POST', '/locations', body);
  assert.equal(stored.status, 201, JSON.stringify(stored.body).slice(0, 500));
  return { assetId: asset.body.id as string, locations: await readBack(svc, asset.body.id) };
}

/** The asset's locations as the API lists them (one page holds them all). */
async function readBack(svc: ServiceProcess, assetId: string): Promise<unknown[]> {
  const r = await svc.api('GET', `/locations?assetId=${assetId}&limit=1000&${FROM_TO}`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body;
}

/** The operator's token from the service before the backup, used as it is on the restored one. */
async function tokenOf(base: string): Promise<string> {
  const r = await fetch(`${base}/auth/realms/tracking/protocol/openid-connect/token`, {
    method: 'POST',
    headers: {
      authorization: `Basic ${Buffer.from('tracking-cli:child-secret').toString('base64')}`,
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: 'grant_type=password&username=operator&password=child-password',
  });
  assert.equal(r.status, 200);
  return ((await r.json()) as { access_token: string }).access_token;
}

async function sameWithOldToken(svc: ServiceProcess, token: string, assetId: string, expected: unknown[]) {
  const r = await fetch(`${svc.base}/api/v1/locations?assetId=${assetId}&limit=1000&${FROM_TO}`, {
    headers: { authorization: `Bearer ${token}` },
  });
  assert.equal(r.status, 200, 'a token issued before the backup is accepted after the restore');
  assert.deepEqual(await r.json(), expected);
}

/** The PostgreSQL client tools of the server's major version, as the guide asks. */
function clientTools(url: string): string | undefined {
  const server = execFileSync('psql', [url, '-Atc', 'SHOW server_version_num'], { encoding: 'utf8' }).trim();
  const major = Math.floor(Number(server) / 10000);
  for (const dir of [`/usr/lib/postgresql/${major}/bin`, '']) {
    const bin = dir ? path.join(dir, 'pg_dump') : 'pg_dump';
    try {
      const v = execFileSync(bin, ['--version'], { encoding: 'utf8' });
      if (new RegExp(`\\) ${major}\\.`).test(v)) return dir;
    } catch {
      /* not there */
    }
  }
  return undefined;
}

test('PostgreSQL: pg_dump while the service runs, pg_restore into a fresh database, the same records and tokens with the same SECRETS_KEY', async (t) => {
  const url = await createTestDatabase();
  const tools = clientTools(url);
  if (!requireService(t, tools !== undefined, 'pg_dump and pg_restore of the server’s major version', 'apt-get install postgresql-client'))
    return;
  const bin = (name: string) => (tools ? path.join(tools, name) : name);
  const SECRETS_KEY = crypto.randomBytes(32).toString('hex');
  const svc = await serviceProcess(url, { SECRETS_KEY, DELIVERY_WORKERS: '0' });
  atEnd(() => svc.stop());
  const { assetId, locations } = await store(svc);
  assert.equal(locations.length, RECORDS);
  const token = await tokenOf(svc.base);

  // The guide's backup: one consistent snapshot, taken while the service runs.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tracking-backup-'));
  atEnd(async () => fs.rmSync(dir, { recursive: true, force: true }));
  const dump = path.join(dir, 'tracking.dump');
  execFileSync(bin('pg_dump'), ['--format=custom', `--file=${dump}`, url]);
  await svc.stop();

  // The guide's restore: a fresh empty database, then pg_restore, then the service with the same key.
  const fresh = await createTestDatabase({ empty: true });
  execFileSync(bin('pg_restore'), ['--no-owner', '--exit-on-error', `--dbname=${fresh}`, dump]);
  // Without the backup's SECRETS_KEY the service cannot open its signing keys, and does not start.
  await assert.rejects(
    serviceProcess(fresh, { SECRETS_KEY: crypto.randomBytes(32).toString('hex'), DELIVERY_WORKERS: '0' }),
    /exited \(1\) before listening/,
  );
  const restored = await serviceProcess(fresh, { SECRETS_KEY, DELIVERY_WORKERS: '0' });
  atEnd(() => restored.stop());
  assert.deepEqual(await readBack(restored, assetId), locations, 'the same records, read through the API');
  await sameWithOldToken(restored, token, assetId, locations);
  // And the restored service takes new records.
  const more = await restored.api('POST', '/locations', [{ assetId, latitude: 1, longitude: 2, whenCreated: new Date().toISOString() }]);
  assert.equal(more.status, 201, JSON.stringify(more.body));
  assert.equal((await readBack(restored, assetId)).length, RECORDS + 1);
});

test('embedded database: the service stopped, DATA_DIR copied, the copy serves the same records and tokens', async () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'tracking-backup-embedded-'));
  atEnd(async () => fs.rmSync(root, { recursive: true, force: true }));
  // The service's folder as after its first start (laid from the run's template: no initdb here).
  const dataDir = embeddedDataDir('tracking-backup-data-');
  atEnd(async () => fs.rmSync(dataDir, { recursive: true, force: true }));
  const svc = await serviceProcess({ dataDir });
  atEnd(() => svc.stop());
  const { assetId, locations } = await store(svc);
  assert.equal(locations.length, RECORDS);
  const token = await tokenOf(svc.base);

  // The guide's backup: SIGTERM (the service checkpoints and releases the folder), then a copy.
  await svc.stop();
  assert.equal(fs.existsSync(path.join(dataDir, 'service.lock')), false, 'a stopped service leaves no lock behind');
  assert.ok(fs.existsSync(path.join(dataDir, 'secrets.key')), 'the folder holds its secrets key');
  const backup = path.join(root, 'backup');
  execFileSync('cp', ['-a', dataDir, backup]);
  // The original goes away, as on a lost disk; the restore is a copy of the backup.
  fs.rmSync(dataDir, { recursive: true, force: true });
  const restoredDir = path.join(root, 'restored');
  execFileSync('cp', ['-a', backup, restoredDir]);

  const restored = await serviceProcess({ dataDir: restoredDir });
  atEnd(() => restored.stop());
  assert.deepEqual(await readBack(restored, assetId), locations, 'the same records, read through the API');
  await sameWithOldToken(restored, token, assetId, locations);
});
