// What the e-mail channel sends on its own time (API guide 9, "E-mail"), every few seconds in each
// process that delivers, each row taken under a lock another process skips:
// - confirmation requests to a customer-made integration's new recipients;
// - digests: the alerts held back for assets whose interval has ended with no newer alert, one
//   message per integration ("12 alerts for 3 assets"), within the integration's hour's cap;
// - escalations: an alert neither acknowledged nor cleared by its due time goes to escalateTo, once.
// A 4xx answer (or none) leaves the row for the next round; everything sent is in email_messages.
import type { Db, Queryable } from '../../../db/db.js';
import { notificationPayload } from '../../../alerts/raise.js';
import { newAckToken, newConfirmToken } from '../../../email/links.js';
import { type Mailer, type Reply, replyKind } from '../../../email/mailer.js';
import { alertMail, confirmationMail, digestMail, type HeldAlert, type Mail } from '../../../email/message.js';
import { markAsked, unaskedRecipients } from '../../../email/recipients.js';
import type { EmailIntegration, IntegrationConfig } from '../../integrations/model.js';
import { loadIntegration } from '../../integrations/store.js';
import { mailable } from './recipients.js';

export interface EmailDeps {
  db: Db;
  secretsKey: Buffer;
  publicUrl: () => string;
  /** The SMTP client, or null when SMTP_URL is unset. */
  mailer: () => Mailer | null;
  allowedDomains: readonly string[];
  linkHours: number;
  /** How often the worker looks (0: only when tick() is called). */
  tickMs: number;
  /** Closes the SMTP pool. */
  onClose: () => void;
}

const record = (q: Queryable, integrationId: string, kind: string, requestId: string, replies: Map<string, Reply>) =>
  q.query('INSERT INTO email_messages (integration_id, kind, request_id, replies) VALUES ($1, $2, $3, $4)', [
    integrationId,
    kind,
    requestId,
    JSON.stringify(Object.fromEntries(replies)),
  ]);

export class EmailWorker {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;

  constructor(private readonly deps: EmailDeps & { log: { warn(o: object, m: string): void } }) {
    if (deps.tickMs > 0) {
      this.timer = setInterval(() => {
        if (!this.running) this.running = this.tick(new Date()).finally(() => (this.running = null));
      }, deps.tickMs);
      this.timer.unref();
    }
  }

  /** One round at `now` (tests pass their own clock): confirmations, digests, escalations. */
  async tick(now: Date): Promise<void> {
    const mailer = this.deps.mailer();
    if (!mailer) return;
    for (const [what, step] of [
      ['confirmations', () => this.confirmations(mailer)],
      ['digests', () => this.digests(mailer, now)],
      ['escalations', () => this.escalations(mailer, now)],
    ] as const) {
      try {
        await step();
      } catch (err) {
        this.deps.log.warn({ err }, `e-mail ${what} failed; tried again next round`);
      }
    }
  }

  private async config(q: Queryable, id: string): Promise<EmailIntegration | null> {
    const cfg: IntegrationConfig | null = await loadIntegration(q, id, this.deps.secretsKey);
    return cfg?.channel === 'email' && cfg.enabled ? cfg : null;
  }

  private async confirmations(mailer: Mailer): Promise<void> {
    await this.deps.db.tx(async (q) => {
      for (const r of await unaskedRecipients(q, 20)) {
        const { rows } = await q.query<{ name: string; owner: string | null }>(
          'SELECT i.name, o.name AS owner FROM integrations i LEFT JOIN owners o ON o.id = i.creator_owner_id WHERE i.id = $1',
          [r.integrationId],
        );
        const { token, hash } = newConfirmToken();
        const mail = confirmationMail({
          integrationName: rows[0]?.name ?? '',
          ownerName: rows[0]?.owner ?? '',
          confirmUrl: `${this.deps.publicUrl()}/email/confirm/${token}`,
          hours: this.deps.linkHours,
        });
        const reply = await mailer.send(r.address, mail, { to: [r.address], cc: [] });
        await record(q, r.integrationId, 'confirmation', `confirm:${r.address}`, new Map([[r.address, reply]]));
        if (replyKind(reply) !== 'retry') await markAsked(q, r.integrationId, r.address, hash);
      }
    });
  }

  /** Sends `mail` to each address; the answers by address. */
  private async sendAll(mailer: Mailer, cfg: EmailIntegration, addresses: string[], mail: (to: string) => Promise<Mail>) {
    const replies = new Map<string, Reply>();
    for (const to of addresses) replies.set(to, await mailer.send(to, await mail(to), { to: cfg.email.to, cc: cfg.email.cc }));
    return replies;
  }

  private async digests(mailer: Mailer, now: Date): Promise<void> {
    const { rows: due } = await this.deps.db.query<{ integration_id: string }>(
      `SELECT DISTINCT h.integration_id FROM email_held h
         JOIN integrations i ON i.id = h.integration_id AND i.enabled AND i.deleted_at IS NULL
         LEFT JOIN email_asset_sent s ON s.integration_id = h.integration_id AND s.asset_id = h.asset_id
        WHERE s.sent_at IS NULL OR s.sent_at + make_interval(mins => COALESCE((i.settings->>'minIntervalMinutes')::int, 15)) <= $1
        LIMIT 100`,
      [now],
    );
    for (const { integration_id: id } of due) {
      await this.deps.db.tx(async (q) => {
        const cfg = await this.config(q, id);
        if (!cfg) return;
        const { rows: sent } = await q.query<{ n: string }>(
          `SELECT count(DISTINCT request_id)::text AS n FROM email_messages
            WHERE integration_id = $1 AND kind <> 'confirmation' AND at > $2::timestamptz - interval '1 hour' AND at <= $2`,
          [id, now],
        );
        if (Number(sent[0]!.n) >= cfg.email.maxMessagesPerHour) return; // the hour's cap: the next round that has room
        const { rows } = await q.query<{ id: string; asset_id: string; alert: HeldAlert }>(
          `SELECT h.id::text, h.asset_id, h.alert FROM email_held h
             LEFT JOIN email_asset_sent s ON s.integration_id = h.integration_id AND s.asset_id = h.asset_id
            WHERE h.integration_id = $1 AND (s.sent_at IS NULL OR s.sent_at + make_interval(mins => $2) <= $3)
            ORDER BY h.id LIMIT 10000 FOR UPDATE OF h SKIP LOCKED`,
          [id, cfg.email.minIntervalMinutes, now],
        );
        if (rows.length === 0) return;
        const recipients = await mailable(q, cfg, [...cfg.email.to, ...cfg.email.cc], this.deps.allowedDomains);
        const mail = digestMail(
          rows.map((r) => r.alert),
          { publicUrl: this.deps.publicUrl(), timeZone: cfg.email.timeZone, integrationName: cfg.name },
        );
        const replies = await this.sendAll(mailer, cfg, recipients, async () => mail);
        if ([...replies.values()].some((r) => replyKind(r) === 'retry')) {
          // Not told to everyone: kept for the next round (those who got it get it again: at least once).
          await record(q, id, 'digest', `digest:${rows[0]!.id}`, replies);
          return;
        }
        await record(q, id, 'digest', `digest:${rows[0]!.id}`, replies);
        await q.query('DELETE FROM email_held WHERE id = ANY($1::int8[])', [rows.map((r) => r.id)]);
        await q.query(
          `INSERT INTO email_asset_sent (integration_id, asset_id, sent_at) SELECT $1, a, $3 FROM unnest($2::uuid[]) AS a
           ON CONFLICT (integration_id, asset_id) DO UPDATE SET sent_at = EXCLUDED.sent_at`,
          [id, [...new Set(rows.map((r) => r.asset_id))], now],
        );
      });
    }
  }

  private async escalations(mailer: Mailer, now: Date): Promise<void> {
    await this.deps.db.tx(async (q) => {
      const { rows } = await q.query<{
        integration_id: string;
        notification_id: string;
        settled: boolean;
        o: Record<string, unknown> | null;
      }>(
        `SELECT x.integration_id, x.notification_id::text,
                (n.id IS NULL OR n.acknowledged_at IS NOT NULL OR e.cleared_at IS NOT NULL) AS settled,
                CASE WHEN n.id IS NOT NULL THEN ${notificationPayload('n')} END AS o
           FROM email_escalations x
           LEFT JOIN notifications n ON n.id = x.notification_id
           LEFT JOIN events e ON e.id = n.event_id
          WHERE x.done_at IS NULL AND x.due_at <= $1
          ORDER BY x.due_at LIMIT 50 FOR UPDATE OF x SKIP LOCKED`,
        [now],
      );
      for (const r of rows) {
        const finish = (outcome: string) =>
          q.query('UPDATE email_escalations SET done_at = $3, outcome = $4 WHERE integration_id = $1 AND notification_id = $2::int8', [
            r.integration_id,
            r.notification_id,
            now,
            outcome,
          ]);
        const cfg = await this.config(q, r.integration_id);
        if (r.settled || !r.o || !cfg) {
          await finish(r.settled ? 'settled' : 'integration gone');
          continue;
        }
        const recipients = await mailable(q, cfg, cfg.email.escalateTo, this.deps.allowedDomains);
        const o = r.o;
        const replies = await this.sendAll(mailer, cfg, recipients, async (to) => {
          const token = await newAckToken(q, this.deps.secretsKey, r.notification_id, to, this.deps.linkHours);
          return alertMail('notification', o, {
            publicUrl: this.deps.publicUrl(),
            timeZone: cfg.email.timeZone,
            reading: null,
            ackUrl: `${this.deps.publicUrl()}/email/ack/${token}`,
            held: [],
            escalation: { minutes: cfg.email.escalateAfterMinutes ?? 0 },
          });
        });
        await record(q, r.integration_id, 'escalation', `escalation:${r.notification_id}`, replies);
        if ([...replies.values()].some((x) => replyKind(x) === 'retry')) {
          await q.query(
            `UPDATE email_escalations SET due_at = $3::timestamptz + interval '1 minute' WHERE integration_id = $1 AND notification_id = $2::int8`,
            [r.integration_id, r.notification_id, now],
          );
        } else await finish(recipients.length ? 'escalated' : 'no confirmed recipient');
      }
    });
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
    this.deps.onClose();
  }
}
