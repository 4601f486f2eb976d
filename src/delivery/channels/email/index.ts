// The e-mail channel (API guide 9, "E-mail"): alerts mailed to people, on the same engine as the
// other channels (claims, attempts, retries, history, health). One message per alert: a
// notification is the alert, so an ALERT event whose integration also takes notifications is
// folded into it. Each recipient gets their own copy (their own answer from the SMTP server, their
// own acknowledgement link): a 4xx answer is retried for that recipient alone, a 5xx fails it alone.
// An asset is mailed at most once per minIntervalMinutes and the integration at most
// maxMessagesPerHour times: what arrives past either is held (email_held), told in the asset's next
// message or in a digest when its interval ends (worker.ts), and never dropped.
import type { FastifyBaseLogger } from 'fastify';
import { alertText } from '../../../alerts/text.js';
import type { Queryable } from '../../../db/db.js';
import { newAckToken } from '../../../email/links.js';
import { type Reply, replyKind } from '../../../email/mailer.js';
import { alertMail, type HeldAlert } from '../../../email/message.js';
import type { EmailIntegration } from '../../integrations/model.js';
import { type AttemptRecord, type Channel, configOf, type OutMessage } from '../channel.js';
import { mailable } from './recipients.js';
import { type EmailDeps, EmailWorker } from './worker.js';

const done = (receiptId: string, started: number): AttemptRecord => ({
  outcome: 'success',
  retryAfterSeconds: null,
  httpStatus: null,
  responseTimeMs: Date.now() - started,
  receiptId,
  topic: null,
  partition: null,
  qos: null,
  error: null,
  responseHeaders: null,
  responseBody: null,
  responseBodyBytes: null,
  truncated: false,
});

/** Every recipient's latest answer to a request so far (earlier attempts), by address. */
async function priorReplies(q: Queryable, integrationId: string, requestId: string): Promise<Map<string, Reply>> {
  const { rows } = await q.query<{ replies: Record<string, Reply> }>(
    'SELECT replies FROM email_messages WHERE integration_id = $1 AND request_id = $2 ORDER BY id',
    [integrationId, requestId],
  );
  const out = new Map<string, Reply>();
  for (const r of rows) for (const [a, reply] of Object.entries(r.replies)) out.set(a, reply);
  return out;
}

/** The outcome of a message's answers: every recipient's, this attempt's and before. */
export function outcomeOf(replies: Map<string, Reply>, started: number, receiptId: string | null): AttemptRecord {
  const all = [...replies.entries()];
  const retry = all.find(([, r]) => replyKind(r) === 'retry');
  const okCount = all.filter(([, r]) => replyKind(r) === 'ok').length;
  const refused = all.find(([, r]) => replyKind(r) === 'refused');
  const body = Buffer.from(JSON.stringify(Object.fromEntries(all)));
  const outcome = retry ? 'retry' : okCount === 0 && refused ? 'fail' : 'success';
  const worst = retry ?? (outcome === 'fail' ? refused : undefined);
  const told = worst ?? refused;
  return {
    outcome,
    retryAfterSeconds: null,
    httpStatus: worst ? worst[1].code : (all.find(([, r]) => replyKind(r) === 'ok')?.[1].code ?? null),
    responseTimeMs: Date.now() - started,
    receiptId,
    topic: null,
    partition: null,
    qos: null,
    // What went wrong, even when another recipient took it: the deciding answer, else a refusal.
    error: told ? `${told[0]}: ${told[1].reply}`.slice(0, 1000) : null,
    responseHeaders: null,
    responseBody: body,
    responseBodyBytes: body.length,
    truncated: false,
  };
}

export class EmailChannel implements Channel {
  readonly name = 'email' as const;
  readonly worker: EmailWorker;

  constructor(private readonly deps: EmailDeps & { log: FastifyBaseLogger }) {
    this.worker = new EmailWorker(deps);
  }

  limits() {
    // One message at a time per integration: an asset's interval and the hour's count are decided in order.
    return { batchSize: 1, keepBatches: false, maxItemsPerMinute: null, maxConcurrentRequests: 1, timeoutMs: 30_000 };
  }

  messages(_cfg: unknown, events: OutMessage['events']): OutMessage[] {
    return events.map((e) => ({ requestId: e.eventId, objectType: e.objectType, events: [e], body: '' }));
  }

  async send(any: Parameters<Channel['send']>[0], msg: OutMessage): Promise<AttemptRecord> {
    const started = Date.now();
    const cfg = configOf(any, 'email');
    const { db } = this.deps;
    const mailer = this.deps.mailer();
    const e = msg.events[0]!;
    const o = JSON.parse(e.payload) as Record<string, unknown>;
    const objectType = e.objectType === 'notification' ? 'notification' : 'event';
    if (objectType === 'event' && o.severity === 'ALERT' && cfg.objectTypes.includes('notification')) {
      return done('sent as its notification', started);
    }
    if (!mailer) {
      return { ...done('', started), outcome: 'retry', receiptId: null, error: 'SMTP_URL is not set: no mail can be sent' };
    }
    const notificationId = objectType === 'notification' ? String(o.id) : await notificationOf(db, o);
    const prior = await priorReplies(db, cfg.id, msg.requestId);
    const assetId = typeof o.assetId === 'string' ? o.assetId : '';
    const title = alertText(objectType, o, '').title;
    let held: { ids: string[]; alerts: HeldAlert[] } = { ids: [], alerts: [] };
    if (prior.size === 0) {
      // The first attempt decides: escalation booked, then mailed now or held for the asset's digest.
      if (notificationId && cfg.email.escalateTo.length && cfg.email.escalateAfterMinutes) {
        await db.query(
          `INSERT INTO email_escalations (integration_id, notification_id, due_at)
           VALUES ($1, $2::int8, now() + make_interval(mins => $3)) ON CONFLICT DO NOTHING`,
          [cfg.id, notificationId, cfg.email.escalateAfterMinutes],
        );
      }
      const alert: HeldAlert = {
        assetId,
        assetName: String(o.assetName ?? assetId),
        title,
        at: String(o.whenCreated ?? new Date().toISOString()),
      };
      const decision = await this.deps.db.tx((q) => this.now(q, cfg, msg.requestId, alert));
      if (decision === 'held') return done('held for the digest', started);
      held = decision;
    } else {
      held = await heldFor(db, cfg.id, assetId);
    }
    const recipients = await mailable(db, cfg, [...cfg.email.to, ...cfg.email.cc], this.deps.allowedDomains);
    if (recipients.length === 0) return done('no confirmed recipient', started);
    const reading = objectType === 'notification' && o.eventId ? await readingOf(db, String(o.eventId)) : readingIn(o);
    const replies = new Map(prior);
    const now = new Map<string, Reply>();
    let receipt: string | null = null;
    for (const to of recipients) {
      const last = prior.get(to);
      if (last && replyKind(last) !== 'retry') continue;
      const ackUrl = notificationId
        ? `${this.deps.publicUrl()}/email/ack/${await newAckToken(db, this.deps.secretsKey, notificationId, to, this.deps.linkHours)}`
        : null;
      const mail = alertMail(objectType, o, {
        publicUrl: this.deps.publicUrl(),
        timeZone: cfg.email.timeZone,
        reading,
        ackUrl,
        held: held.alerts,
      });
      const r = await mailer.send(to, mail, { to: cfg.email.to, cc: cfg.email.cc });
      receipt ??= r.messageId ?? null;
      now.set(to, r);
      replies.set(to, r);
    }
    await db.tx(async (q) => {
      await q.query(`INSERT INTO email_messages (integration_id, kind, request_id, replies) VALUES ($1, 'alert', $2, $3)`, [
        cfg.id,
        msg.requestId,
        JSON.stringify(Object.fromEntries(now)),
      ]);
      // Told to someone: the held alerts this message carried are done.
      if (held.ids.length && [...now.values()].some((r) => replyKind(r) === 'ok')) {
        await q.query('DELETE FROM email_held WHERE id = ANY($1::int8[])', [held.ids]);
      }
    });
    return outcomeOf(replies, started, receipt);
  }

  /**
   * Mail now, or hold: held when the asset was mailed within its interval or the integration has
   * sent its hour's messages. Mailing now marks the asset, and takes its held alerts along.
   */
  private async now(
    q: Queryable,
    cfg: EmailIntegration,
    requestId: string,
    alert: HeldAlert,
  ): Promise<'held' | { ids: string[]; alerts: HeldAlert[] }> {
    const { rows } = await q.query<{ recent: boolean; sent: string }>(
      `SELECT EXISTS (SELECT 1 FROM email_asset_sent WHERE integration_id = $1 AND asset_id = $2::uuid
                        AND sent_at > now() - make_interval(mins => $3)) AS recent,
              (SELECT count(DISTINCT request_id) FROM email_messages WHERE integration_id = $1 AND kind <> 'confirmation'
                  AND at > now() - interval '1 hour')::text AS sent`,
      [cfg.id, alert.assetId, cfg.email.minIntervalMinutes],
    );
    if (rows[0]!.recent || Number(rows[0]!.sent) >= cfg.email.maxMessagesPerHour) {
      await q.query(
        `INSERT INTO email_held (integration_id, asset_id, request_id, alert) VALUES ($1, $2::uuid, $3, $4) ON CONFLICT DO NOTHING`,
        [cfg.id, alert.assetId, requestId, JSON.stringify(alert)],
      );
      return 'held';
    }
    await q.query(
      `INSERT INTO email_asset_sent (integration_id, asset_id, sent_at) VALUES ($1, $2::uuid, now())
       ON CONFLICT (integration_id, asset_id) DO UPDATE SET sent_at = now()`,
      [cfg.id, alert.assetId],
    );
    return heldFor(q, cfg.id, alert.assetId);
  }

  async close(): Promise<void> {
    await this.worker.close();
  }
}

/** The alerts held for an asset, oldest first. */
async function heldFor(q: Queryable, integrationId: string, assetId: string): Promise<{ ids: string[]; alerts: HeldAlert[] }> {
  const { rows } = await q.query<{ id: string; alert: HeldAlert }>(
    'SELECT id::text, alert FROM email_held WHERE integration_id = $1 AND asset_id = $2::uuid ORDER BY id',
    [integrationId, assetId],
  );
  return { ids: rows.map((r) => r.id), alerts: rows.map((r) => r.alert) };
}

/** The notification raised with an ALERT event (its acknowledgement link), or null. */
async function notificationOf(q: Queryable, o: Record<string, unknown>): Promise<string | null> {
  if (o.severity !== 'ALERT' || typeof o.id !== 'string') return null;
  const { rows } = await q.query<{ id: string }>('SELECT id::text FROM notifications WHERE event_id = $1::int8', [o.id]);
  return rows[0]?.id ?? null;
}

const readingIn = (o: Record<string, unknown>) => ({
  current: ((o.currentData as { value?: string } | null)?.value ?? null) || null,
  before: ((o.prevData as { value?: string } | null)?.value ?? null) || null,
});

/** The reading behind a notification: its event's current and previous values. */
async function readingOf(q: Queryable, eventId: string): Promise<{ current: string | null; before: string | null } | null> {
  const { rows } = await q.query<{ current: string | null; before: string | null }>(
    `SELECT current_data->>'value' AS current, prev_data->>'value' AS before FROM events WHERE id = $1::int8`,
    [eventId],
  );
  return rows[0] ?? null;
}

export type { EmailDeps };
export const emailChannel = (deps: EmailDeps & { log: FastifyBaseLogger }) => new EmailChannel(deps);
