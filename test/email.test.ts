// The e-mail channel (API guide 9, "E-mail") against a real SMTP server process (smtp-server,
// test/smtp.ts): a specification's alert mailed to each recipient with the subject and body the
// guide gives; a 451 retried for that recipient alone and recorded, a 550 failing that recipient;
// the acknowledgement link (single use, signed, expiring); a customer's recipients mailed only
// after confirming; an asset's flood as one message and one digest; escalation once, and never
// for an acknowledged alert; the hour's cap. The worker (digests, escalations, confirmations) runs
// only when a test calls it, on the test's clock.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { EmailChannel } from '../src/delivery/channels/email/index.js';
import { makeCerts } from './brokers.js';
import { alertingReefer, atEnd, bad, deliveryHistory, frozenSpecification, ok, startApp, type TestApp, waitFor } from './helpers.js';
import { SmtpSink } from './smtp.js';

let ta: TestApp;
let smtp: SmtpSink;
before(async () => {
  smtp = await new SmtpSink().start();
  ta = await startApp(undefined, {
    SMTP_URL: smtp.url,
    SMTP_FROM: 'Alerts <alerts@tracking.test>',
    EMAIL_TICK_MS: '0',
    EMAIL_ALLOWED_DOMAINS: 'example.com,example.org',
    EMAIL_MAX_RECIPIENTS: '5',
    EMAIL_MAX_MESSAGES_PER_HOUR: '50',
    ALERT_MAX_EVENTS_PER_HOUR: '100000',
    DELIVERY_POLL_MS: '100',
    RATE_LIMIT_MAX: '100000',
    DB_POOL_SIZE: '4',
  });
});
after(() => smtp.close());

const history = deliveryHistory(() => ta);
const stamp = `${process.env.TEST_DB ?? 'postgres'}${Date.now()}`;
let n = 0;
/** A fresh address at an allowed domain. */
const addr = (who: string) => `${who}-${stamp}-${++n}@example.com`;
const worker = () => (ta.app.services.engine!.channel('email') as EmailChannel).worker;
const minutesOn = (m: number) => new Date(Date.now() + m * 60_000);

/** A customer's reefer with a location, under the frozen specification (supply air above -10 alerts). */
async function reefer(label: string, assetName = `${label}-${stamp}`) {
  const f = await alertingReefer(ta, label, { assetName, specName: 'Frozen <cargo>' });
  const whenCreated = new Date(Date.now() - 600_000).toISOString();
  ok(await f.call('POST', '/locations', { assetId: f.assetId, latitude: 51.9225, longitude: 4.47917, whenCreated }), 201, 'location');
  return f;
}

/** An e-mail integration for the customer's owner, made by the operator (trusted recipients) or the customer. */
async function emailIntegration(
  f: { ownerId: string; call: (m: string, p: string, b?: unknown) => Promise<any> },
  email: Record<string, unknown>,
  by: 'operator' | 'customer' = 'operator',
) {
  const body = { name: `mail-${stamp}-${++n}`, channel: 'email', ownerIds: [f.ownerId], email, retry: { scheduleSeconds: [0.3] } };
  const r =
    by === 'operator'
      ? await ta.call('POST', '/api/v1/integrations', { token: ta.adminToken, body })
      : await f.call('POST', '/integrations', body);
  return ok(r, 201, 'e-mail integration');
}

/** The page's button: its form posted, as a browser would. */
const press = (path: string) =>
  ta.app.inject({ method: 'POST', url: path, headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: '' });
const ackLinkIn = (text: string) => /Acknowledge: (\S+)/.exec(text)?.[1];

test('an alert reaches each recipient as one message: subject, time in their zone, location, reading, links; no event mail', async () => {
  const f = await reefer('mail', `MSKU<b>1234565</b>-${stamp}`);
  const [a, b, c] = [addr('a'), addr('b'), addr('c')];
  const i = await emailIntegration(f, { to: [a, b.toUpperCase()], cc: [c], timeZone: 'Europe/Amsterdam', minIntervalMinutes: 0 });
  assert.deepEqual(i.objectTypes, ['event', 'notification']);
  assert.deepEqual(i.filter, { severity: ['ALERT'] });
  assert.equal(i.destination, `mailto:${a},${b}`);
  await f.reefer(1, -5);
  const got = await waitFor(
    () => `a message to each of ${a}, ${b}, ${c} (${smtp.messages.length} in all)`,
    async () => [a, b, c].every((x) => smtp.to(x).length === 1) && [a, b, c].map((x) => smtp.to(x)[0]!),
  );
  // The ALERT event is the notification's alert: one message each, not two.
  await history.allSucceeded(i.id, 2);
  assert.deepEqual(
    [a, b, c].map((x) => smtp.to(x).length),
    [1, 1, 1],
  );
  const m = got[0]!;
  assert.equal(m.subject, `[ALERT] MSKU<b>1234565</b>-${stamp}: supplyAirTemperature -5 above maximum -10`);
  assert.equal(m.mail.from?.text, '"Alerts" <alerts@tracking.test>');
  assert.deepEqual(
    (Array.isArray(m.mail.to) ? m.mail.to : [m.mail.to]).flatMap((t) => t!.value.map((v) => v.address)),
    [a, b],
  );
  assert.match(m.text, /When: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d (CET|CEST|GMT\+1|GMT\+2)/);
  assert.match(m.text, /Last location: 51\.92250, 4\.47917/);
  assert.match(m.text, /Reading: -5/);
  assert.match(m.text, /Specification: Frozen <cargo>/);
  assert.ok(m.text.includes(`${ta.url}/dashboard/#/assets/${f.assetId}`), m.text);
  assert.match(ackLinkIn(m.text) ?? '', new RegExp(`^${ta.url}/email/ack/[0-9a-f-]{36}\\.[A-Za-z0-9_-]{32}$`));
  // Each recipient has their own link; names are escaped in the HTML.
  assert.notEqual(ackLinkIn(got[1]!.text), ackLinkIn(m.text));
  assert.ok(m.html.includes('MSKU&lt;b&gt;1234565&lt;/b&gt;'), 'the name is escaped');
  assert.ok(!m.html.includes('<b>1234565'), 'no markup of the customer reaches the HTML');
  assert.ok(!m.text.includes('whsec_') && !m.html.includes(ta.adminToken));
  const d = await history.deliveries(i.id, 'SUCCEEDED');
  const attempt = d.find((x: any) => x.objectType === 'notification').attemptsLog[0];
  assert.equal(attempt.httpStatus, 250);
});

test('451 then 250 is retried for that recipient alone and recorded; 550 fails that recipient and no other', async () => {
  const f = await reefer('retry');
  const [a, b, c] = [addr('soft'), addr('hard'), addr('fine')];
  smtp.plan(a, [451]);
  smtp.plan(b, [550]);
  const i = await emailIntegration(f, { to: [a, b, c], minIntervalMinutes: 0 });
  await f.reefer(1, -4);
  await waitFor(
    () => `${a} to get its message after the retry`,
    async () => smtp.to(a).length === 1,
  );
  const [d] = await history.until(i.id, (ds) => ds.some((x) => x.objectType === 'notification' && x.status === 'SUCCEEDED'));
  const note = (await history.deliveries(i.id)).find((x: any) => x.objectType === 'notification');
  assert.ok(d);
  assert.deepEqual(
    note.attemptsLog.map((x: any) => x.httpStatus),
    [451, 250],
    JSON.stringify(note.attemptsLog),
  );
  assert.equal(smtp.to(c).length, 1, 'the recipient who took it the first time is not mailed again');
  assert.equal(smtp.to(b).length, 0, 'refused for good: never mailed');
  // b was asked once (550), a twice (451, 250), c once.
  assert.deepEqual(
    [a, b, c].map((x) => smtp.answers.filter((y) => y.address === x).map((y) => y.code)),
    [[451, 250], [550], [250]],
  );
  const first = note.attemptsLog[0];
  assert.match(first.error ?? '', new RegExp(`${a}: 451`));
});

test('the acknowledgement link: a page first, the button acknowledges both as the recipient, once; forged and used links refused', async () => {
  const f = await reefer('ack');
  const a = addr('ack');
  await emailIntegration(f, { to: [a], minIntervalMinutes: 0 });
  await f.reefer(1, -3);
  const m = await waitFor(
    () => `a message to ${a}`,
    async () => smtp.to(a)[0],
  );
  const link = new URL(ackLinkIn(m.text)!);
  const page = await ta.app.inject({ method: 'GET', url: link.pathname });
  assert.equal(page.statusCode, 200);
  assert.match(page.body, /Acknowledge this alert\?/);
  assert.match(page.headers['content-security-policy'] as string, /default-src 'none'/);
  // Opening the page acknowledged nothing (a mail scanner follows links).
  const [event] = ok(await f.call('GET', `/events?assetId=${f.assetId}&severity=ALERT`), 200);
  assert.equal(event.acknowledgedAt, null);
  const done = await press(link.pathname);
  assert.equal(done.statusCode, 200, done.body);
  assert.match(done.body, /Acknowledged by email:/);
  const notes = ok(await f.call('GET', `/notifications?assetId=${f.assetId}`), 200);
  // The link's alert, and it alone.
  const acked = notes.filter((x: { acknowledgedBy: string | null }) => x.acknowledgedBy !== null);
  assert.equal(acked.length, 1, JSON.stringify(notes));
  const note = acked[0];
  assert.equal(note.acknowledgedBy, `email:${a}`);
  const events = ok(await f.call('GET', `/events?assetId=${f.assetId}&severity=ALERT`), 200);
  const after = events.find((e: { id: string }) => e.id === note.eventId);
  assert.equal(after?.acknowledgedBy, `email:${a}`, JSON.stringify(events));
  const audit = ok(await ta.call('GET', `/api/v1/audit?resourceType=event&resourceId=${after.id}`, { token: ta.adminToken }), 200);
  assert.equal(audit[0]?.action, 'acknowledge', JSON.stringify(audit));
  // Used: refused, and it changes nothing.
  const again = await press(link.pathname);
  assert.equal(again.statusCode, 410);
  assert.match(again.body, /each works once/);
  // Altered or forged: 404 before any row is read.
  const [id, sig] = link.pathname.split('/').pop()!.split('.');
  for (const token of [`${id}.${sig!.replace(/^./, (c) => (c === 'A' ? 'B' : 'A'))}`, `${crypto.randomUUID()}.${sig}`, 'nonsense']) {
    const r = await ta.app.inject({ method: 'GET', url: `/email/ack/${token}` });
    assert.equal(r.statusCode, 404, token);
  }
  // Expired: refused.
  const { db } = ta.app.services;
  await f.reefer(0.5, -20);
  await f.reefer(0.2, -2);
  const second = await waitFor(
    () => `a second message to ${a}`,
    async () => smtp.to(a)[1],
  );
  const link2 = new URL(ackLinkIn(second.text)!);
  await db.query(`UPDATE email_ack_links SET expires_at = now() - interval '1 second' WHERE id = $1`, [
    link2.pathname.split('/').pop()!.split('.')[0],
  ]);
  const expired = await press(link2.pathname);
  assert.equal(expired.statusCode, 410);
  assert.match(expired.body, /expired/);
});

test("a customer's integration: recipients mailed only after confirming; only its own owners' alerts", async () => {
  const f = await reefer('consent');
  const other = await reefer('consent-other');
  const a = addr('consent');
  const i = await emailIntegration(f, { to: [a], minIntervalMinutes: 0 }, 'customer');
  assert.equal(i.managedBy, 'customer');
  const shown = ok(await f.call('GET', `/integrations/${i.id}`), 200);
  assert.deepEqual(shown.email.recipients, [{ address: a, confirmedAt: null }]);
  // An alert before the confirmation is not mailed to the address.
  await f.reefer(2, -5);
  await history.allSucceeded(i.id, 1);
  await worker().tick(new Date());
  const ask = await waitFor(
    () => `the confirmation request to ${a}`,
    async () => smtp.to(a)[0],
  );
  assert.match(ask.subject, /^Confirm to receive alerts: /);
  assert.equal(smtp.to(a).length, 1, 'only the request, no alert');
  const confirm = new URL(/https?:\/\/\S+\/email\/confirm\/\S+/.exec(ask.text)![0]);
  const page = await ta.app.inject({ method: 'GET', url: confirm.pathname });
  assert.equal(page.statusCode, 200);
  const yes = await press(confirm.pathname);
  assert.equal(yes.statusCode, 200, yes.body);
  const reused = await press(confirm.pathname);
  assert.equal(reused.statusCode, 404);
  // Confirmed: the next alert is mailed; the other customer's alert never is.
  await other.reefer(1, -5);
  await f.reefer(1, -20);
  await f.reefer(0.5, -6);
  const alert = await waitFor(
    () => `an alert to ${a}`,
    async () => smtp.to(a).find((m) => m.subject.startsWith('[ALERT]')),
  );
  assert.ok(alert.subject.includes(`consent-${stamp}`), alert.subject);
  await worker().tick(new Date());
  assert.ok(!smtp.to(a).some((m) => m.subject.includes('consent-other')), "the other customer's alert is not mailed");
});

test('200 alerts for one asset within a minute: the first message, then one digest when the interval ends; none lost', async () => {
  const f = await reefer('flood');
  const a = addr('flood');
  const i = await emailIntegration(f, { to: [a], minIntervalMinutes: 15, maxMessagesPerHour: 50 });
  const t0 = Date.now() - 30 * 60_000;
  const readings = Array.from({ length: 400 }, (_, k) => ({
    assetId: f.assetId,
    whenCreated: new Date(t0 + k * 1000).toISOString(),
    data: { supplyAirTemperature: k % 2 === 0 ? -5 : -20 },
  }));
  ok(await f.call('POST', '/reefer-data', readings), 201, 'bulk');
  // 200 ALERT events (filtered in, folded into their notifications) and 200 notifications. The
  // guide promises no delivery time: with eight test files on two cores the embedded database
  // delivered these 400 in more than 90 s, so the wait is as long as the test's own time allows.
  await history.allSucceeded(i.id, 400, 300_000);
  assert.equal(smtp.to(a).length, 1, 'one message in the interval');
  const { db } = ta.app.services;
  const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM email_held WHERE integration_id = $1', [i.id]);
  assert.equal(rows[0]!.n, 199);
  await worker().tick(minutesOn(5));
  assert.equal(smtp.to(a).length, 1, 'still inside the interval');
  await worker().tick(minutesOn(16));
  const digest = await waitFor(
    () => `the digest to ${a}`,
    async () => smtp.to(a)[1],
  );
  assert.equal(digest.subject, '[ALERT] Digest: 199 alerts for 1 asset');
  assert.match(digest.text, /and 179 more alerts for 1 asset/);
  const left = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM email_held WHERE integration_id = $1', [i.id]);
  assert.equal(left.rows[0]!.n, 0);
  await worker().tick(minutesOn(40));
  assert.equal(smtp.to(a).length, 2, 'one digest, once');
});

test('an alert neither acknowledged nor cleared escalates once; an acknowledged one does not', async () => {
  const f = await reefer('esc');
  const g = await f.asset(`esc-second-${stamp}`);
  await frozenSpecification(f.call, g);
  const [a, boss] = [addr('shift'), addr('boss')];
  await emailIntegration(f, { to: [a], escalateTo: [boss], escalateAfterMinutes: 10, minIntervalMinutes: 0 });
  await f.reefer(1, -5);
  ok(
    await f.call('POST', '/reefer-data', {
      assetId: g,
      whenCreated: new Date(Date.now() - 60_000).toISOString(),
      data: { supplyAirTemperature: -5 },
    }),
    201,
  );
  await waitFor(
    () => `two alerts to ${a}`,
    async () => smtp.to(a).length === 2,
  );
  const [first] = ok(await f.call('GET', `/events?assetId=${f.assetId}&severity=ALERT`), 200);
  ok(await f.call('POST', `/events/${first.id}/acknowledge`), 200);
  await worker().tick(minutesOn(5));
  assert.equal(smtp.to(boss).length, 0, 'not yet due');
  await worker().tick(minutesOn(11));
  const esc = await waitFor(
    () => `the escalation to ${boss}`,
    async () => smtp.to(boss)[0],
  );
  assert.match(esc.subject, new RegExp(`^\\[ESCALATED\\] \\[ALERT\\] esc-second-${stamp}: `));
  assert.match(esc.text, /Not acknowledged or cleared within 10 minutes/);
  assert.ok(ackLinkIn(esc.text));
  await worker().tick(minutesOn(30));
  assert.equal(smtp.to(boss).length, 1, 'once, and never for the acknowledged alert');
});

test('the hour cap: past maxMessagesPerHour alerts are held, not mailed, and told in a digest when the hour has room', async () => {
  const f = await reefer('cap');
  const a = addr('cap');
  const i = await emailIntegration(f, { to: [a], minIntervalMinutes: 0, maxMessagesPerHour: 2 });
  const assets = [f.assetId];
  for (let k = 0; k < 3; k++) {
    const id = await f.asset(`cap-${k}-${stamp}`);
    await frozenSpecification(f.call, id);
    assets.push(id);
  }
  for (const id of assets)
    ok(
      await f.call('POST', '/reefer-data', {
        assetId: id,
        whenCreated: new Date(Date.now() - 60_000).toISOString(),
        data: { supplyAirTemperature: -5 },
      }),
      201,
    );
  await history.allSucceeded(i.id, 8);
  assert.equal(smtp.to(a).length, 2, 'two messages in the hour');
  await worker().tick(new Date());
  assert.equal(smtp.to(a).length, 2, 'no room in the hour: the digest waits');
  await worker().tick(minutesOn(61));
  const digest = await waitFor(
    () => 'the digest',
    async () => smtp.to(a)[2],
  );
  assert.equal(digest.subject, '[ALERT] Digest: 2 alerts for 2 assets');
});

test('e-mail settings: recipients, domains, time zone, caps and fields of other channels refused with the field named', async () => {
  const f = await reefer('bounds');
  const post = (body: Record<string, unknown>, by: 'operator' | 'customer' = 'customer') => {
    const b = { name: `b-${++n}`, channel: 'email', ownerIds: [f.ownerId], ...body };
    return by === 'operator'
      ? ta.call('POST', '/api/v1/integrations', { token: ta.adminToken, body: b })
      : f.call('POST', '/integrations', b);
  };
  bad(await post({ email: { to: [] } }), 400, '/email/to', 'no recipient');
  bad(await post({}), 400, '/email/to', 'no email at all');
  bad(await post({ email: { to: ['x@evil.test'] } }), 400, '/email/to/0', 'a domain not allowed');
  bad(await post({ email: { to: ['ok@example.com'], cc: ['a@sub.example.org', 'x@example.net'] } }), 400, '/email/cc/1');
  const six = Array.from({ length: 6 }, (_, k) => `r${k}@example.com`);
  bad(await post({ email: { to: six } }), 400, '/email/to', 'over EMAIL_MAX_RECIPIENTS');
  bad(await post({ email: { to: six.slice(0, 3), escalateTo: six.slice(3) } }), 400, '/email/to', 'over the cap with escalateTo');
  bad(
    await post({ email: { to: six.slice(0, 1), maxMessagesPerHour: 51 } }),
    400,
    '/email/maxMessagesPerHour',
    "over a customer's ceiling",
  );
  bad(await post({ email: { to: six.slice(0, 1), timeZone: 'Mars/Olympus' } }), 400, '/email/timeZone');
  bad(await post({ email: { to: six.slice(0, 1), escalateAfterMinutes: 5 } }), 400, '/email/escalateAfterMinutes');
  bad(await post({ email: { to: six.slice(0, 1) }, destination: 'x' }), 400, '/destination');
  bad(await post({ email: { to: six.slice(0, 1) }, objectTypes: ['location'] }), 400, '/objectTypes');
  bad(await post({ email: { to: six.slice(0, 1) }, webhook: {} }), 400, '/webhook');
  bad(await post({ email: { to: ['not an address'] } }), 400, undefined, 'the schema refuses it');
  // The operator may go past a customer's hour ceiling; nobody past the recipients'.
  ok(await post({ email: { to: six.slice(0, 1), maxMessagesPerHour: 500 } }, 'operator'), 201);
  bad(await post({ email: { to: six } }, 'operator'), 400, '/email/to');
  // A PATCH merges: the cap is checked on the result.
  const i = ok(await post({ email: { to: six.slice(0, 4) } }), 201);
  bad(await f.call('PATCH', `/integrations/${i.id}`, { email: { cc: six.slice(4) } }), 400, '/email/to');
  const patched = ok(await f.call('PATCH', `/integrations/${i.id}`, { email: { minIntervalMinutes: 5 } }), 200);
  assert.deepEqual(patched.email.to, six.slice(0, 4));
  assert.equal(patched.email.minIntervalMinutes, 5);
});

test('STARTTLS when the server offers it, the certificate checked against SMTP_CA; one that does not verify is retried, never sent in plain text', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smtp-tls-'));
  atEnd(async () => fs.rmSync(dir, { recursive: true, force: true }));
  await makeCerts(dir, 'smtp');
  const read = (f: string) => fs.readFileSync(path.join(dir, f), 'utf8');
  const tls = await new SmtpSink({ cert: read('server.pem'), key: read('server-key.pem') }).start();
  atEnd(() => tls.close());
  for (const [ca, label] of [
    [path.join(dir, 'ca.pem'), 'trusted'],
    [path.join(dir, 'other-ca.pem'), 'untrusted'],
  ] as const) {
    const app = await startApp(undefined, {
      SMTP_URL: tls.url,
      SMTP_CA: ca,
      EMAIL_TICK_MS: '0',
      DELIVERY_POLL_MS: '100',
      RATE_LIMIT_MAX: '100000',
      DB_POOL_SIZE: '3',
    });
    const f = await alertingReefer(app, `tls-${label}`);
    const to = addr(label);
    const i = ok(
      await app.call('POST', '/api/v1/integrations', {
        token: app.adminToken,
        body: { name: `tls-${label}`, channel: 'email', ownerIds: [f.ownerId], email: { to: [to] }, retry: { scheduleSeconds: [0.3] } },
      }),
      201,
    );
    await f.reefer(1, -5);
    if (label === 'trusted') {
      const m = await waitFor(
        () => `a message over TLS to ${to}`,
        async () => tls.to(to)[0],
      );
      assert.equal(m.secure, true, 'upgraded with STARTTLS');
    } else {
      const tries = deliveryHistory(() => app);
      const [d] = await tries.until(i.id, (ds) => ds.some((x) => x.objectType === 'notification' && x.attemptsLog.length >= 2));
      const note = (await tries.deliveries(i.id)).find((x: any) => x.objectType === 'notification');
      assert.ok(d);
      assert.equal(note.status, 'PENDING', 'retried');
      assert.equal(note.attemptsLog[0].httpStatus, null);
      assert.match(note.attemptsLog[0].error ?? '', /certificate|self[- ]signed|verify/i);
      assert.equal(tls.to(to).length, 0, 'nothing sent without verified TLS');
    }
  }
});
