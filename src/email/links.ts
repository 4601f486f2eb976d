// The links mailed with alerts and to new recipients (API guide 9, "E-mail"). An acknowledgement
// link names one alert mailed to one recipient: its id is a row (email_ack_links) that says which
// alert, whom and until when, and an HMAC of the id (a key derived from SECRETS_KEY) proves the
// service made it, so a guessed or altered id is refused before any row is read. It works once.
// A confirmation link is 32 random bytes, stored only as their SHA-256.
import crypto from 'node:crypto';
import type { Queryable } from '../db/db.js';

const linkKey = (secretsKey: Buffer) => crypto.createHmac('sha256', secretsKey).update('email-ack-links/v1').digest();

const sign = (secretsKey: Buffer, id: string) =>
  crypto.createHmac('sha256', linkKey(secretsKey)).update(id).digest().subarray(0, 24).toString('base64url');

/** A new acknowledgement link's token for `notificationId` mailed to `recipient`, valid `hours`. */
export async function newAckToken(
  q: Queryable,
  secretsKey: Buffer,
  notificationId: string,
  recipient: string,
  hours: number,
): Promise<string> {
  const id = crypto.randomUUID();
  await q.query(
    `INSERT INTO email_ack_links (id, notification_id, recipient, expires_at) VALUES ($1, $2::int8, $3, now() + make_interval(hours => $4))`,
    [id, notificationId, recipient, hours],
  );
  return `${id}.${sign(secretsKey, id)}`;
}

/** The link's id when its signature is the service's; null for anything else (never a row read). */
export function verifiedLinkId(secretsKey: Buffer, token: string): string | null {
  const m = /^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.([A-Za-z0-9_-]{32})$/.exec(token);
  if (!m) return null;
  const want = Buffer.from(sign(secretsKey, m[1]!));
  const got = Buffer.from(m[2]!);
  return want.length === got.length && crypto.timingSafeEqual(want, got) ? m[1]! : null;
}

export interface AckLink {
  id: string;
  notificationId: string;
  recipient: string;
  expiresAt: Date;
  usedAt: Date | null;
}

/** The link's row (`lock`: for the transaction that uses it), or null. */
export async function ackLink(q: Queryable, id: string, lock = false): Promise<AckLink | null> {
  const { rows } = await q.query<{ id: string; notification_id: string; recipient: string; expires_at: Date; used_at: Date | null }>(
    `SELECT id, notification_id::text, recipient, expires_at, used_at FROM email_ack_links WHERE id = $1${lock ? ' FOR UPDATE' : ''}`,
    [id],
  );
  const r = rows[0];
  return r ? { id: r.id, notificationId: r.notification_id, recipient: r.recipient, expiresAt: r.expires_at, usedAt: r.used_at } : null;
}

export const markLinkUsed = (q: Queryable, id: string) => q.query('UPDATE email_ack_links SET used_at = now() WHERE id = $1', [id]);

/** A confirmation token and the hash the table keeps. */
export function newConfirmToken(): { token: string; hash: Buffer } {
  const token = crypto.randomBytes(32).toString('base64url');
  return { token, hash: confirmHash(token) };
}

export const confirmHash = (token: string) => crypto.createHash('sha256').update(token).digest();
