// The pages the links in e-mail open (API guide 9, "E-mail"): no sign-in, the link is the
// credential. Opening one shows what it will do; only the page's button (a POST) does it, so a mail
// scanner that follows links acknowledges and confirms nothing. An acknowledgement link works once,
// for its one alert, until it expires; a confirmation link until it is used or EMAIL_LINK_HOURS
// have passed since it was mailed. A link that does not verify, has expired or was used answers
// a page saying so (404 or 410), and changes nothing.
import formbody from '@fastify/formbody';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyReply } from 'fastify';
import { acknowledgeEvents } from '../alerts/acknowledge.js';
import { readableTime } from '../alerts/text.js';
import type { Db, Queryable } from '../db/db.js';
import { type AckLink, ackLink, markLinkUsed, verifiedLinkId } from './links.js';
import { recipientByToken } from './recipients.js';

const TokenParam = Type.Object({ token: Type.String({ minLength: 1, maxLength: 200 }) });

const CSP = "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

const esc = (s: string) => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

const page = (reply: FastifyReply, status: number, title: string, body: string) =>
  reply
    .code(status)
    .header('Content-Security-Policy', CSP)
    .header('Cache-Control', 'no-store')
    .header('X-Frame-Options', 'DENY')
    .header('Referrer-Policy', 'no-referrer')
    .type('text/html; charset=utf-8')
    .send(
      `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">` +
        `<title>${esc(title)} · Asset tracking</title><link rel="icon" href="data:,"><link rel="stylesheet" href="/dashboard/app.css"></head>` +
        `<body><main class="signin"><h1>${esc(title)}</h1>${body}</main></body></html>`,
    );

/** Why a link does nothing: the page's status and words. */
interface Refused {
  status: number;
  why: string;
}

interface AlertRow {
  id: string;
  subject: string;
  asset_name: string;
  event_id: string | null;
  when_created: Date;
  acknowledged_at: Date | null;
  acknowledged_by: string | null;
}

export const emailLinkRoutes: FastifyPluginAsyncTypebox<{ db: Db; secretsKey: Buffer; linkHours: number }> = async (app, opts) => {
  const { db, secretsKey, linkHours } = opts;
  await app.register(formbody);
  const common = { config: { public: true }, schema: { hide: true, params: TokenParam } };
  const gone = (reply: FastifyReply, status: number, why: string) =>
    page(reply, status, 'Link not valid', `<p class="error" role="alert">${esc(why)}</p>`);

  /** The link's alert, or why not (a status and the words of the page that says it). */
  const ackTarget = async (q: Queryable, token: string, lock: boolean): Promise<Refused | { link: AckLink; alert: AlertRow }> => {
    const id = verifiedLinkId(secretsKey, token);
    const link = id ? await ackLink(q, id, lock) : null;
    if (!link) return { status: 404, why: 'This acknowledgement link is not one this service made.' };
    if (link.usedAt) return { status: 410, why: `This link was used at ${readableTime(link.usedAt.toISOString())}; each works once.` };
    if (link.expiresAt.getTime() <= Date.now())
      return { status: 410, why: 'This link has expired; acknowledge the alert on the dashboard.' };
    const { rows } = await q.query<AlertRow>(
      `SELECT id::text, subject, asset_name, event_id::text, when_created, acknowledged_at, acknowledged_by
         FROM notifications WHERE id = $1::int8`,
      [link.notificationId],
    );
    if (!rows[0]) return { status: 404, why: 'The alert of this link no longer exists.' };
    return { link, alert: rows[0] };
  };
  const describe = (a: AlertRow) =>
    `<p><strong>${esc(a.asset_name)}</strong>: ${esc(a.subject)}</p><p>Raised ${esc(readableTime(a.when_created.toISOString()) ?? '')}</p>`;
  const acknowledged = (a: { acknowledged_at: Date | null; acknowledged_by: string | null }) =>
    `<p>Acknowledged by ${esc(a.acknowledged_by ?? 'someone')} at ${esc(readableTime(a.acknowledged_at?.toISOString()) ?? '')}.</p>`;

  app.get('/email/ack/:token', common, async (req, reply) => {
    const t = await ackTarget(db, (req.params as { token: string }).token, false);
    if ('why' in t) return gone(reply, t.status, t.why);
    if (t.alert.acknowledged_at) return page(reply, 200, 'Already acknowledged', describe(t.alert) + acknowledged(t.alert));
    return page(
      reply,
      200,
      'Acknowledge this alert?',
      `${describe(t.alert)}<form method="post"><button type="submit">Acknowledge as ${esc(t.link.recipient)}</button></form>`,
    );
  });

  app.post('/email/ack/:token', common, async (req, reply) => {
    const token = (req.params as { token: string }).token;
    // Committed before the page answers: whoever reads the alert next sees it acknowledged.
    const t = await db.tx(async (q): Promise<Refused | { alert: AlertRow; now: Pick<AlertRow, 'acknowledged_at' | 'acknowledged_by'> }> => {
      const found = await ackTarget(q, token, true);
      if ('why' in found) return found;
      await markLinkUsed(q, found.link.id);
      if (found.alert.event_id) {
        await acknowledgeEvents(q, { principal: { actor: `email:${found.link.recipient}` }, address: req.ip }, [found.alert.event_id]);
      }
      const { rows } = await q.query<AlertRow>('SELECT acknowledged_at, acknowledged_by FROM notifications WHERE id = $1::int8', [
        found.alert.id,
      ]);
      return { ...found, now: rows[0] ?? found.alert };
    });
    if ('why' in t) return gone(reply, t.status, t.why);
    return page(reply, 200, 'Acknowledged', describe(t.alert) + acknowledged(t.now));
  });

  app.get('/email/confirm/:token', common, async (req, reply) => {
    const r = await recipientByToken(db, (req.params as { token: string }).token, linkHours, false);
    if (!r) return gone(reply, 404, 'This confirmation link is not valid: it was used, it expired, or the integration changed.');
    return page(
      reply,
      200,
      'Receive these alerts?',
      `<p>Alerts of <strong>${esc(r.integrationName)}</strong> will be mailed to <strong>${esc(r.address)}</strong>.</p><form method="post"><button type="submit">Confirm</button></form>`,
    );
  });

  app.post('/email/confirm/:token', common, async (req, reply) => {
    const r = await recipientByToken(db, (req.params as { token: string }).token, linkHours, true);
    if (!r) return gone(reply, 404, 'This confirmation link is not valid: it was used, it expired, or the integration changed.');
    return page(
      reply,
      200,
      'Confirmed',
      `<p>Alerts of <strong>${esc(r.integrationName)}</strong> are now mailed to <strong>${esc(r.address)}</strong>.</p>`,
    );
  });
};
