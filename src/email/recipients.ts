// An e-mail integration's recipients and their consent (API guide 9, "E-mail"). Nobody is mailed
// alerts through the service without saying yes: a customer-made integration's addresses each
// confirm once, by a link mailed to them; an operator-made integration's are trusted. The rows
// follow the integration's settings at each save (an address removed is forgotten; added again,
// it confirms again).
import type { Queryable } from '../db/db.js';
import { confirmHash } from './links.js';

export interface Recipient {
  address: string;
  confirmedAt: Date | null;
}

/**
 * The table's rows made to match `addresses` (lower case); `trusted`: confirmed as they are saved.
 * An address left out becomes inactive, not forgotten: put back, it is not asked again.
 */
export async function syncRecipients(q: Queryable, integrationId: string, addresses: string[], trusted: boolean): Promise<void> {
  await q.query('UPDATE email_recipients SET active = false WHERE integration_id = $1 AND NOT (address = ANY($2::text[]))', [
    integrationId,
    addresses,
  ]);
  await q.query(
    `INSERT INTO email_recipients (integration_id, address, confirmed_at)
     SELECT $1, a, CASE WHEN $3 THEN now() END FROM unnest($2::text[]) AS a
     ON CONFLICT (integration_id, address) DO UPDATE
       SET confirmed_at = COALESCE(email_recipients.confirmed_at, EXCLUDED.confirmed_at), active = true`,
    [integrationId, addresses, trusted],
  );
}

/** Every recipient of the integrations, by integration id. */
export async function recipientsOf(q: Queryable, integrationIds: string[]): Promise<Map<string, Recipient[]>> {
  const out = new Map<string, Recipient[]>();
  if (integrationIds.length === 0) return out;
  const { rows } = await q.query<{ integration_id: string; address: string; confirmed_at: Date | null }>(
    'SELECT integration_id, address, confirmed_at FROM email_recipients WHERE integration_id = ANY($1::uuid[]) AND active ORDER BY address',
    [integrationIds],
  );
  for (const r of rows) {
    const list = out.get(r.integration_id) ?? [];
    list.push({ address: r.address, confirmedAt: r.confirmed_at });
    out.set(r.integration_id, list);
  }
  return out;
}

/** The addresses of the integration that have confirmed (or were trusted). */
export async function confirmedRecipients(q: Queryable, integrationId: string): Promise<Set<string>> {
  const { rows } = await q.query<{ address: string }>(
    'SELECT address FROM email_recipients WHERE integration_id = $1 AND confirmed_at IS NOT NULL AND active',
    [integrationId],
  );
  return new Set(rows.map((r) => r.address));
}

/**
 * Recipients whose confirmation request is still to be mailed, locked for the caller's
 * transaction: each asked once per integration, and an address at most once a day whatever
 * integrations name it (so integrations made and deleted in a loop mail nobody twice a day).
 */
export async function unaskedRecipients(q: Queryable, limit: number): Promise<{ integrationId: string; address: string }[]> {
  const { rows } = await q.query<{ integration_id: string; address: string }>(
    `SELECT r.integration_id, r.address FROM email_recipients r
      WHERE r.confirmed_at IS NULL AND r.mailed_at IS NULL AND r.active
        AND EXISTS (SELECT 1 FROM integrations i WHERE i.id = r.integration_id AND i.deleted_at IS NULL)
        AND NOT EXISTS (SELECT 1 FROM email_messages m WHERE m.kind = 'confirmation' AND m.request_id = 'confirm:' || r.address
                          AND m.at > now() - interval '1 day' AND m.replies -> r.address ->> 'code' LIKE '2%')
      ORDER BY r.requested_at LIMIT $1 FOR UPDATE OF r SKIP LOCKED`,
    [limit],
  );
  return rows.map((r) => ({ integrationId: r.integration_id, address: r.address }));
}

export const markAsked = (q: Queryable, integrationId: string, address: string, hash: Buffer) =>
  q.query('UPDATE email_recipients SET mailed_at = now(), token_hash = $3 WHERE integration_id = $1 AND address = $2', [
    integrationId,
    address,
    hash,
  ]);

/**
 * The recipient a confirmation link names while it is valid (mailed within `hours`, not used),
 * or null; `confirm` records the consent and spends the link.
 */
export async function recipientByToken(
  q: Queryable,
  token: string,
  hours: number,
  confirm: boolean,
): Promise<{ integrationId: string; address: string; integrationName: string } | null> {
  if (!/^[A-Za-z0-9_-]{43}$/.test(token)) return null;
  // The one row the link names, while valid: its integration not deleted, the address still named.
  const valid = `r.token_hash = $1 AND r.confirmed_at IS NULL AND r.active AND i.id = r.integration_id AND i.deleted_at IS NULL
    AND r.mailed_at > now() - make_interval(hours => $2)`;
  const { rows } = await q.query<{ integration_id: string; address: string; name: string }>(
    confirm
      ? `UPDATE email_recipients r SET confirmed_at = now(), token_hash = NULL FROM integrations i WHERE ${valid}
         RETURNING r.integration_id, r.address, i.name`
      : `SELECT r.integration_id, r.address, i.name FROM email_recipients r, integrations i WHERE ${valid}`,
    [confirmHash(token), hours],
  );
  const r = rows[0];
  return r ? { integrationId: r.integration_id, address: r.address, integrationName: r.name } : null;
}
