// Chat formats of a webhook (API guide 9, `webhook.format`): a specification's alert reaches a
// Slack incoming webhook and a Teams Workflows webhook (local receivers) as one message a person
// reads, built from the notification; its INFO event (back in range) as a second. The Slack body
// is typed by @slack/types where it is built (tsc checks it) and checked here member by member;
// the Teams card is parsed and validated by the Adaptive Cards library Teams renders with.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { after, before, test } from 'node:test';
import { alertingReefer, bad, ok, startApp, type TestApp } from './helpers.js';
import { Receiver } from './receiver.js';

// The library's own build for Node (its ESM entry imports files without extensions).
const AdaptiveCards = createRequire(import.meta.url)('adaptivecards/dist/adaptivecards.js');

let ta: TestApp;
let rx: Receiver;
before(async () => {
  rx = await new Receiver().start();
  ta = await startApp(undefined, {
    PUSH_ALLOW_HTTP: 'true',
    PUSH_ALLOWED_NETWORKS: '127.0.0.0/8',
    DELIVERY_POLL_MS: '100',
    RATE_LIMIT_MAX: '100000',
    DB_POOL_SIZE: '4',
  });
});
after(() => rx.close());

const stamp = `${process.env.TEST_DB ?? 'postgres'}${Date.now()}`;
let n = 0;

/** A customer with a reefer (named `assetName`) whose specification alerts when supply air is above -10, and a location. */
async function reeferFleet(label: string, assetName: string) {
  const f = await alertingReefer(ta, label, { assetName, specName: 'Frozen <cargo>' });
  const whenCreated = new Date(Date.now() - 300_000).toISOString();
  ok(await f.call('POST', '/locations', { assetId: f.assetId, latitude: 53.54, longitude: 9.98, whenCreated }), 201, 'location');
  return f;
}

/** The customer's own integration of a chat format (the defaults: events and notifications, INFO events only). */
async function chatIntegration(c: Awaited<ReturnType<typeof reeferFleet>>, format: 'slack' | 'teams', path: string) {
  return ok(
    await c.call('POST', '/integrations', {
      name: `chat-${stamp}-${++n}`,
      channel: 'webhook',
      ownerIds: [c.ownerId],
      destination: `${rx.url}${path}`,
      webhook: { format },
      retry: { scheduleSeconds: [0.3] },
    }),
    201,
    `${format} integration`,
  );
}

const bodies = (path: string) => rx.for(path).map((r) => JSON.parse(r.body));

test('an alert reaches Slack as one message built from its notification, and its end as a second; names are escaped', async () => {
  const f = await reeferFleet('slack', 'MSKU<1234565> & *co*');
  const other = await reeferFleet('slack-other', 'OTHER0000001');
  const path = `/slack-${stamp}`;
  const hook = await chatIntegration(f, 'slack', path);
  assert.equal(hook.webhook.format, 'slack');
  assert.deepEqual(hook.objectTypes, ['event', 'notification'], 'the chat defaults');
  assert.deepEqual(hook.filter, { severity: ['INFO'] }, "an ALERT event's notification is the same alert");

  await other.reefer(2, 5); // another customer's alert: never in this integration
  await f.reefer(2, -2);
  await rx.waitFor(() => rx.for(path).length >= 1, 60_000, 'the alert in Slack');
  await f.reefer(1, -20);
  await rx.waitFor(() => rx.for(path).length >= 2, 60_000, 'back in range in Slack');

  const [alert, cleared] = bodies(path);
  assert.equal(rx.for(path).length, 2, 'one message per alert, one for its end');
  assert.equal(alert.text, '[ALERT] MSKU<1234565> & *co*: supplyAirTemperature -2 above maximum -10');
  const [title, fields, actions] = alert.blocks;
  assert.deepEqual(title, {
    type: 'section',
    text: { type: 'mrkdwn', text: '*[ALERT] MSKU&lt;1234565&gt; &amp; *co*: supplyAirTemperature -2 above maximum -10*' },
  });
  const facts = Object.fromEntries(fields.fields.map((x: { type: string; text: string }) => x.text.split('\n')));
  assert.match(facts['*When*'], /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/);
  assert.equal(facts['*Specification*'], 'Frozen &lt;cargo&gt;');
  assert.match(facts['*Last location*'], /^53\.54000, 9\.98000 at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/);
  assert.equal(actions.type, 'actions');
  assert.deepEqual(actions.elements[0].url, `${ta.url}/dashboard/#/assets/${f.assetId}`);
  assert.equal(actions.elements[0].type, 'button');
  assert.equal(actions.elements[0].text.type, 'plain_text');
  assert.equal(cleared.text, '[INFO] supplyAirTemperature back in range (-20)');
  assert.ok(!JSON.stringify(bodies(path)).includes('OTHER0000001'), "another customer's alert is not in it");
  // Every member is one Slack documents for an incoming webhook's message, within its limits
  // (a section's text 3,000 characters, at most 10 fields of 2,000, a button's label 75).
  for (const m of bodies(path)) {
    assert.deepEqual(Object.keys(m).sort(), ['blocks', 'text']);
    for (const b of m.blocks) {
      assert.ok(['section', 'actions'].includes(b.type), b.type);
      if (b.text) assert.ok(b.text.type === 'mrkdwn' && b.text.text.length > 0 && b.text.text.length <= 3000);
      if (b.fields) assert.ok(b.fields.length <= 10 && b.fields.every((x: any) => x.type === 'mrkdwn' && x.text.length <= 2000));
      if (b.type === 'actions') assert.ok(b.elements.every((e: any) => e.text.text.length <= 75 && e.url.length <= 3000));
    }
  }
  // The Standard Webhooks headers still go (Slack ignores them), naming what the message is about.
  assert.deepEqual(
    rx.for(path).map((r) => r.headers['webhook-object-type']),
    ['notification', 'event'],
  );
});

test('an alert reaches Teams as an Adaptive Card the Adaptive Cards library parses without a warning', async () => {
  const f = await reeferFleet('teams', 'MSKU [link](https://evil.example) _x_');
  const path = `/teams-${stamp}`;
  await chatIntegration(f, 'teams', path);
  await f.reefer(1, 3);
  await rx.waitFor(() => rx.for(path).length >= 1, 60_000, 'the alert in Teams');
  const [m] = bodies(path);
  assert.equal(m.type, 'message');
  assert.equal(m.attachments.length, 1);
  assert.equal(m.attachments[0].contentType, 'application/vnd.microsoft.card.adaptive');
  const content = m.attachments[0].content;
  const card = new AdaptiveCards.AdaptiveCard();
  const context = new AdaptiveCards.SerializationContext();
  card.parse(content, context);
  const warnings = Array.from({ length: context.eventCount }, (_, i) => context.getEventAt(i).message);
  assert.deepEqual(warnings, [], 'parsed without a warning');
  assert.deepEqual(card.validateProperties().validationEvents, [], 'valid');
  assert.equal(content.version, '1.4');
  const [title, facts] = content.body;
  assert.equal(title.type, 'TextBlock');
  assert.equal(title.color, 'Attention');
  // Markdown characters of the customer's name are escaped: no link, no emphasis in the card.
  assert.equal(title.text, '\\[ALERT\\] MSKU \\[link\\]\\(https://evil\\.example\\) \\_x\\_: supplyAirTemperature 3 above maximum \\-10');
  assert.deepEqual(
    facts.facts.map((x: { title: string }) => x.title),
    ['When', 'Specification', 'Last location'],
  );
  assert.deepEqual(content.actions, [
    { type: 'Action.OpenUrl', title: 'Open the asset', url: `${ta.url}/dashboard/#/assets/${f.assetId}` },
  ]);
});

test('a chat format takes events and notifications only, one message each, without an injected id; the test endpoint sends a sample alert', async () => {
  const c = await reeferFleet('chat-rules', 'RULE0000001');
  const body = (over: Record<string, unknown>) => ({
    name: `chat-rules-${stamp}-${++n}`,
    channel: 'webhook',
    ownerIds: [c.ownerId],
    destination: `${rx.url}/rules-${stamp}`,
    ...over,
  });
  bad(
    await c.call('POST', '/integrations', body({ webhook: { format: 'slack' }, objectTypes: ['notification', 'location'] })),
    400,
    '/objectTypes',
  );
  bad(await c.call('POST', '/integrations', body({ webhook: { format: 'teams', mode: 'batch' } })), 400, '/webhook/mode');
  bad(await c.call('POST', '/integrations', body({ webhook: { format: 'slack', injectEventId: true } })), 400, '/webhook/injectEventId');
  bad(await c.call('POST', '/integrations', body({ webhook: { format: 'discord' } })), 400, '/webhook/format');
  const std = ok(await c.call('POST', '/integrations', body({})), 201, 'standard');
  assert.equal(std.webhook.format, 'standard', 'the default');
  // Turning an integration of records into a chat names what to change; with its types it is taken.
  bad(await c.call('PATCH', `/integrations/${std.id}`, { webhook: { format: 'slack' } }), 400, '/objectTypes');
  const chat = ok(
    await c.call('PATCH', `/integrations/${std.id}`, { webhook: { format: 'slack' }, objectTypes: ['notification'] }),
    200,
    'patched to slack',
  );
  assert.equal(chat.webhook.format, 'slack');
  assert.equal((await c.call('GET', `/integrations/${std.id}`)).body.webhook.format, 'slack');

  const r = ok(await c.call('POST', '/webhooks/test', { url: `${rx.url}/rules-${stamp}`, integrationId: std.id }), 200, 'test');
  assert.equal(r.success, true);
  const [sample] = bodies(`/rules-${stamp}`);
  assert.match(sample.text, /^\[ALERT\] TEST0000001: Test message from /);
  assert.equal(sample.blocks[0].type, 'section');
});
