// The SMTP client of the e-mail channel: nodemailer, the ecosystem's SMTP and MIME library, over a
// small pool of connections to SMTP_URL (STARTTLS whenever the server offers it; smtps:// is TLS
// from the start). One message per recipient (the envelope names one address, the headers all of
// them), so each recipient's answer is its own: a 4xx is retried for that recipient alone, a 5xx
// fails it alone, and each gets its own acknowledgement link.
import nodemailer from 'nodemailer';
import type { Mail } from './message.js';

export interface SmtpSettings {
  SMTP_URL?: string | undefined;
  SMTP_USERNAME?: string | undefined;
  SMTP_PASSWORD?: string | undefined;
  /** The SMTP server's CA as PEM (SMTP_CA, read), or the system's. */
  ca?: string | undefined;
  SMTP_FROM: string;
}

/** One recipient's answer: the reply code (null: no reply, the connection failed) and its text. */
export interface Reply {
  code: number | null;
  reply: string;
  messageId?: string;
}

/** What a reply means: delivered, worth another try later (4xx, no answer), or refused for good (5xx). */
export const replyKind = (r: Reply): 'ok' | 'retry' | 'refused' =>
  r.code !== null && r.code >= 200 && r.code < 300 ? 'ok' : r.code !== null && r.code >= 500 ? 'refused' : 'retry';

export class Mailer {
  private readonly transport: ReturnType<typeof nodemailer.createTransport>;

  constructor(
    private readonly s: SmtpSettings & { SMTP_URL: string },
    timeoutMs = 15_000,
  ) {
    const u = new URL(s.SMTP_URL);
    const user = decodeURIComponent(u.username) || s.SMTP_USERNAME;
    const pass = decodeURIComponent(u.password) || s.SMTP_PASSWORD;
    this.transport = nodemailer.createTransport({
      pool: true,
      maxConnections: 2,
      host: u.hostname.replace(/^\[|\]$/g, ''),
      port: u.port ? Number(u.port) : u.protocol === 'smtps:' ? 465 : 587,
      secure: u.protocol === 'smtps:',
      ...(user ? { auth: { user, pass: pass ?? '' } } : {}),
      // STARTTLS whenever the server offers it (nodemailer's default); a failed upgrade is an error, never plain text.
      ...(s.ca ? { tls: { ca: s.ca } } : {}),
      connectionTimeout: timeoutMs,
      greetingTimeout: timeoutMs,
      socketTimeout: timeoutMs,
    });
  }

  /** Sends `mail` to `recipient` alone; `to` and `cc` are the headers every recipient sees. */
  async send(recipient: string, mail: Mail, headers: { to: string[]; cc: string[] }): Promise<Reply> {
    try {
      const info = await this.transport.sendMail({
        from: this.s.SMTP_FROM,
        to: headers.to,
        ...(headers.cc.length ? { cc: headers.cc } : {}),
        envelope: { from: this.s.SMTP_FROM, to: [recipient] },
        subject: mail.subject,
        text: mail.text,
        html: mail.html,
      });
      return { code: Number(/^\d{3}/.exec(info.response)?.[0] ?? 250), reply: info.response, messageId: info.messageId };
    } catch (e) {
      const err = e as {
        responseCode?: number;
        response?: string;
        message?: string;
        rejectedErrors?: { responseCode?: number; response?: string }[];
      };
      const rejected = err.rejectedErrors?.[0];
      const code = rejected?.responseCode ?? err.responseCode ?? null;
      return { code, reply: rejected?.response ?? err.response ?? err.message ?? String(e) };
    }
  }

  close(): void {
    this.transport.close();
  }
}
