// A real SMTP server for the tests (smtp-server, the SMTP server library nodemailer's authors keep):
// it listens on a port the system gives, keeps every message it accepts (parsed by mailparser,
// with the envelope's recipients), and answers RCPT TO as a test plans per address: a queue of
// reply codes (451 then 250, 550...), 250 once the queue is empty.
import type { AddressInfo } from 'node:net';
import { type ParsedMail, simpleParser } from 'mailparser';
import { SMTPServer } from 'smtp-server';

export interface Received {
  /** The envelope's recipients (each message goes to one). */
  rcpt: string[];
  /** When its DATA ended (Date.now()): the message was in the mailbox. */
  at: number;
  /** Whether the connection was encrypted (STARTTLS) when it came. */
  secure: boolean;
  mail: ParsedMail;
  subject: string;
  text: string;
  html: string;
}

export class SmtpSink {
  readonly messages: Received[] = [];
  /** Every RCPT TO answered, with its code, in order. */
  readonly answers: { address: string; code: number }[] = [];
  private readonly plans = new Map<string, number[]>();
  private server: SMTPServer;
  port = 0;

  /** `tls`: a certificate and key to offer STARTTLS with (none: the server offers no STARTTLS). */
  constructor(tls?: { cert: string; key: string }) {
    this.server = new SMTPServer({
      authOptional: true,
      disabledCommands: tls ? ['AUTH'] : ['STARTTLS', 'AUTH'],
      ...(tls ?? {}),
      logger: false,
      onRcptTo: (address, _session, cb) => {
        const code = this.plans.get(address.address.toLowerCase())?.shift() ?? 250;
        this.answers.push({ address: address.address.toLowerCase(), code });
        if (code < 400) return cb();
        const err = Object.assign(new Error(code >= 500 ? 'Mailbox unavailable' : 'Try again later'), { responseCode: code });
        cb(err);
      },
      onData: (stream, session, cb) => {
        const chunks: Buffer[] = [];
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('end', () => {
          const at = Date.now();
          simpleParser(Buffer.concat(chunks))
            .then((mail) => {
              this.messages.push({
                rcpt: session.envelope.rcptTo.map((r) => r.address.toLowerCase()),
                at,
                secure: session.secure,
                mail,
                subject: mail.subject ?? '',
                text: mail.text ?? '',
                html: typeof mail.html === 'string' ? mail.html : '',
              });
              cb();
            })
            .catch(cb);
        });
      },
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.server.address() as AddressInfo).port;
    return this;
  }

  get url(): string {
    return `smtp://127.0.0.1:${this.port}`;
  }

  /** RCPT TO for `address` answers these codes, one per attempt, then 250. */
  plan(address: string, codes: number[]): void {
    this.plans.set(address.toLowerCase(), [...codes]);
  }

  /** The messages whose envelope went to `address`. */
  to(address: string): Received[] {
    return this.messages.filter((m) => m.rcpt.includes(address.toLowerCase()));
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
