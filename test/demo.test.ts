// The demo (`npm run demo`, scripts/demo.ts): on the embedded database, in its own data
// folder, it starts the service, a receiver and the simulator, prints where to look, delivers, meets
// the reefer started at a wrong set point (the mismatch alert after a minute, the specification's set
// point sent, acknowledged through the REST device side, reported, the alert cleared), makes three
// zones where its routes meet (visited from the start) and an OsmAnd device, reports trips whose
// average speed is at most their maximum, and stops cleanly on Ctrl-C (SIGINT): the database
// closed, the process gone with status 0. On a port in use it says so in one line, before it
// wipes its data folder.
// @test-lanes postgres
// (the demo runs its own embedded database: it runs once)
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { TEST_DB } from './helpers.js';
import { entryArgs } from './service-process.js';

// PGlite whatever TEST_DB says: run it in one stage only.
if (TEST_DB === 'postgres') {
  test('npm run demo: ready with its links and credentials, delivers to its receiver, corrects a set point, and Ctrl-C stops it cleanly', {
    timeout: 300_000,
  }, async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'demo-'));
    const child = spawn(process.execPath, entryArgs('scripts/demo.ts'), {
      env: { ...process.env, DEMO_PORT: '0', DEMO_DATA_DIR: dataDir, DEMO_ASSETS: '9', DEMO_RATE: '60' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (out += d));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    const waitFor = async (re: RegExp, what: string) => {
      const deadline = Date.now() + 180_000;
      while (!re.test(out)) {
        if (child.exitCode !== null) assert.fail(`the demo exited before ${what}:\n${out}`);
        if (Date.now() > deadline) assert.fail(`no ${what} in 180 s:\n${out}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    };
    try {
      await waitFor(/Ready after [\d.]+ s: 9 simulated assets/, 'ready message');
      await waitFor(/First webhook delivery received [\d.]+ s/, 'first delivery');
      assert.match(out, /API docs: +http:\/\/127\.0\.0\.1:\d+\/docs/);
      const dashboard = /Dashboard: +(http:\/\/127\.0\.0\.1:\d+\/dashboard)/.exec(out);
      assert.ok(dashboard, out);
      assert.equal((await fetch(dashboard[1]!)).status, 200, 'the dashboard answers (after its redirect)');
      assert.match(out, /API key: +atk_/);
      // Three zones where the routes meet, and a phone's OsmAnd device with the URL its app would use.
      assert.match(out, /Zones: +Port of Rotterdam, Depot Duisburg, Customer DC Frankfurt/);
      const device = /OsmAnd device: ([a-z2-9]{24}) on DEMO-VAN-1 .*\n +(http:\/\/127\.0\.0\.1:\d+\/ingest\/osmand) /.exec(out);
      assert.ok(device, out);
      const base = dashboard[1]!.replace(/\/dashboard$/, '');
      assert.equal(device[2], `${base}/ingest/osmand`);
      // Alert e-mail goes to the demo's SMTP sink, which keeps each message in the data folder.
      assert.ok(out.includes(`Alert e-mail:  ${path.join(dataDir, 'mail')}`), out);
      assert.ok(fs.existsSync(path.join(dataDir, 'mail')));
      const curls = out.split('\n').filter((l) => l.trim().startsWith('curl '));
      assert.equal(curls.length, 3, out);
      // The first two lines work as printed (the API key and the service's address).
      for (const line of curls.slice(0, 2)) {
        const [, auth, url] = /-H '([^']+)' '([^']+)'/.exec(line)!;
        const r = await fetch(url!, { headers: { authorization: auth!.replace(/^Authorization: /, '') } });
        assert.equal(r.status, 200, line);
        assert.ok(Array.isArray(await r.json()));
      }
      // Records arrive: the simulator's records reach the service, and the service's deliveries the receiver.
      await waitFor(/records stored \(\d+\/s\), [1-9][\d,]* delivered/, 'progress line with deliveries');
      // The reefer started at 4 °C with frozen cargo: its mismatch a minute on, the set point sent,
      // acknowledged, reported, and the alert cleared by it.
      assert.match(out, /DEMOR00002 carries frozen cargo \(-18 °C\) but runs at 4 °C/);
      await waitFor(/Set-point mismatch raised [\d.]+ s after the demo started, on DEMOR00002: SETPOINT_MISMATCH: /, 'the mismatch');
      // Printed once the command is made, a moment after the mismatch line.
      await waitFor(/Sent SET_TEMPERATURE -18 °C to DEMOR00002 \(command (\d+)\)/, 'the command sent');
      const sent = /Sent SET_TEMPERATURE -18 °C to DEMOR00002 \(command (\d+)\)/.exec(out)!;
      await waitFor(/Command \d+ ACKNOWLEDGED [\d.]+ s after the demo started, through the REST device side\./, 'the acknowledgement');
      await waitFor(/DEMOR00002 reports set point -18 °C/, 'the new set point reported');
      await waitFor(/Mismatch cleared [\d.]+ s after the demo started: SETPOINT_MISMATCH cleared/, 'the mismatch cleared');
      // As the API has it, with the printed key.
      const key = /API key: +(atk_\S+)/.exec(out)![1]!;
      const get = async (p: string) => {
        const r = await fetch(`${base}/api/v1${p}`, { headers: { authorization: `Bearer ${key}` } });
        assert.equal(r.status, 200, p);
        return (await r.json()) as any;
      };
      assert.deepEqual(((await get('/zones')) as { name: string }[]).map((z) => z.name).sort(), [
        'Customer DC Frankfurt',
        'Depot Duisburg',
        'Port of Rotterdam',
      ]);
      const [phone] = (await get(`/devices?uniqueId=${device[1]}`)) as { protocol: string; lastSeenAt: string | null }[];
      assert.equal(phone?.protocol, 'osmand');
      assert.ok(phone.lastSeenAt, 'its first position stored');
      // The zone report has visits: assets start at each zone.
      const ownerId = ((await get('/owners?limit=1')) as { id: string }[])[0]!.id;
      const deadline = Date.now() + 60_000;
      let visited: string[] = [];
      while (visited.length < 3 && Date.now() < deadline) {
        visited = [...new Set(((await get(`/reports/zones?ownerId=${ownerId}`)).items as { zoneName: string }[]).map((v) => v.zoneName))];
        if (visited.length < 3) await new Promise((r) => setTimeout(r, 1000));
      }
      assert.deepEqual(visited.sort(), ['Customer DC Frankfurt', 'Depot Duisburg', 'Port of Rotterdam']);
      // Trips read true: the simulator moves at the speeds it reports.
      const trips = (await get(`/reports/trips?ownerId=${ownerId}`)).items as { averageSpeed: number | null; maxSpeed: number | null }[];
      assert.ok(trips.length > 0);
      for (const t of trips) if (t.averageSpeed !== null && t.maxSpeed !== null) assert.ok(t.averageSpeed <= t.maxSpeed, JSON.stringify(t));
      const command = (await get(`/commands/${sent[1]}`)) as { status: string; type: string; parameters: unknown };
      assert.deepEqual([command.type, command.status, command.parameters], ['SET_TEMPERATURE', 'ACKNOWLEDGED', { value: -18 }]);
      child.kill('SIGINT');
      assert.equal(await exited, 0, out);
      assert.match(out, /Demo over after [\d.]+ s: [\d,]+ records stored, [\d,]+ delivered.*, \d+ e-mails\./);
      // Every e-mail counted is a file.
      const mails = Number(/, (\d+) e-mails\./.exec(out)![1]);
      assert.equal(fs.readdirSync(path.join(dataDir, 'mail')).length, mails);
      assert.ok(fs.existsSync(path.join(dataDir, 'secrets.key')), 'the demo kept its own data folder');
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });

  test('npm run demo on a port in use: one line naming the port and DEMO_PORT, a non-zero exit, its data folder untouched', {
    timeout: 120_000,
  }, async (t) => {
    const holder = net.createServer();
    await new Promise<void>((r) => holder.listen(0, '127.0.0.1', r));
    t.after(() => holder.close());
    const port = (holder.address() as net.AddressInfo).port;
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'demo-port-'));
    t.after(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    fs.writeFileSync(path.join(dataDir, 'kept.txt'), 'the last demo');
    const child = spawn(process.execPath, entryArgs('scripts/demo.ts'), {
      env: { ...process.env, DEMO_PORT: String(port), DEMO_DATA_DIR: dataDir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    t.after(() => child.kill('SIGKILL'));
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (out += d));
    const code = await new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
    assert.equal(code, 1, out);
    const lines = out.trim().split('\n');
    assert.equal(lines.length, 1, `one line, not a stack trace:\n${out}`);
    assert.match(lines[0]!, new RegExp(`^Port ${port} on 127\\.0\\.0\\.1 is in use .*set DEMO_PORT to a free port`));
    assert.deepEqual(fs.readdirSync(dataDir), ['kept.txt'], 'nothing wiped, nothing made');
    assert.equal(fs.readFileSync(path.join(dataDir, 'kept.txt'), 'utf8'), 'the last demo');
  });
}
