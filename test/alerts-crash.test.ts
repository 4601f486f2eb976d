// The alerts' crash test, on PostgreSQL: 20 reefers stay out of range for an hour of record time,
// sent minute by minute in bulk posts; the service is SIGKILLed three times in the middle of the
// violations (each time with a post in flight) and restarted, and the client sends again every
// post it got no 201 for (which may have been stored: at least once). Each asset must end with
// exactly the alerts its specification asks for: the state survived, and nothing notified twice,
// also for the two minutes sent twice on purpose (a stored post whose answer was lost).
// @test-lanes postgres
// (a SIGKILL and restart against one database: PostgreSQL only, API guide 10)
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createTestDatabase, TEST_DB } from './helpers.js';
import { serviceProcess } from './service-process.js';

const ASSETS = 20;
const MINUTES = 60;
const KILL_AFTER = new Set([12, 31, 47]); // posts (minutes) after which the service is killed

const DOWN_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED']);
const connectionError = (e: unknown) => e instanceof TypeError && DOWN_CODES.has((e as { cause?: { code?: string } }).cause?.code ?? '');

if (TEST_DB === 'postgres') {
  test('SIGKILL in the middle of violations: after restarts and resent posts, exactly the alerts due, none twice', {
    timeout: 300_000,
  }, async (t) => {
    const databaseUrl = await createTestDatabase();
    // The sweep stays out of it (a day of silence needed): every alert here comes from records.
    const svc = await serviceProcess(databaseUrl, { ALERT_SILENCE_SECONDS: '86400' });
    t.after(() => svc.kill());
    const api = async (method: string, path: string, body?: unknown) => {
      const r = await svc.api(method, path, body);
      assert.ok(r.status < 300, `${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body;
    };
    const owner = await api('POST', '/owners', { name: 'alert-crash' });
    const assets: string[] = [];
    for (let i = 0; i < ASSETS; i++) {
      const asset = await api('POST', '/assets', { name: `REEFER${i}`, ownerId: owner.id });
      assets.push(asset.id);
      // Out of range from minute 0: due at 10, then every 20 minutes: 10, 30, 50.
      await api('POST', '/specifications', {
        assetId: asset.id,
        type: 'REEFER',
        ranges: { cargo: { sensors: { supplyAirTemperature: [-1, 4, 10, 20] } } },
      });
    }
    const base = Math.floor(Date.now() / 60_000) * 60_000 - 86400_000;
    const minute = (m: number) => new Date(base + m * 60_000).toISOString();

    let kills = 0;
    let resent = 0;
    for (let m = 0; m < MINUTES; m++) {
      const items = assets.map((assetId) => ({ assetId, whenCreated: minute(m), data: { supplyAirTemperature: 9 } }));
      // A post stored whose answer the client lost looks like this to the service: the same records twice.
      if (m === 29 || m === 30) await api('POST', '/reefer-data', items);
      for (;;) {
        const post = svc.api('POST', '/reefer-data', items);
        if (KILL_AFTER.has(m) && kills < KILL_AFTER.size && [...KILL_AFTER].indexOf(m) === kills) {
          svc.kill();
          kills++;
          await post.catch(() => undefined); // stored or not: the client cannot know
          await svc.start();
          resent++;
          continue; // at least once: send it again
        }
        try {
          const r = await post;
          assert.equal(r.status, 201, JSON.stringify(r.body).slice(0, 300));
          break;
        } catch (e) {
          if (!connectionError(e)) throw e;
          throw new Error(`post for minute ${m} failed with no kill: ${String(e)}`);
        }
      }
    }
    assert.equal(kills, KILL_AFTER.size);

    for (const assetId of assets) {
      const events = await api('GET', `/events?assetId=${assetId}&order=asc`);
      const times = events.map(
        (e: { severity: string; whenCreated: string }) => `${e.severity}@${(Date.parse(e.whenCreated) - base) / 60_000}`,
      );
      assert.deepEqual(times, ['ALERT@10', 'ALERT@30', 'ALERT@50'], `asset ${assetId}`);
      const notes = await api('GET', `/notifications?assetId=${assetId}&order=asc`);
      assert.equal(notes.length, 3);
      assert.deepEqual(
        notes.map((n: { eventId: string }) => n.eventId),
        events.map((e: { id: string }) => e.id),
        'each notification with its own ALERT event',
      );
    }
    const stored = await api('GET', `/reefer-data?assetId=${assets[0]}&limit=1000`);
    assert.ok(stored.length >= MINUTES + 2, 'every minute stored, minutes 29 and 30 twice');
    t.diagnostic(`${kills} kills, ${resent} posts resent, ${stored.length} records stored for one asset`);
    await svc.stop();
  });
}
