// Who an e-mail integration's message goes to at the moment it is sent (API guide 9, "E-mail"):
// the addresses EMAIL_ALLOWED_DOMAINS allows now (a domain removed from it stops mail at once),
// and of a customer-made integration only those that confirmed.
import type { Queryable } from '../../../db/db.js';
import { confirmedRecipients } from '../../../email/recipients.js';
import type { EmailIntegration } from '../../integrations/model.js';

/** Whether an address may be mailed under EMAIL_ALLOWED_DOMAINS (empty: any): the domain or one of its subdomains. */
export function domainAllowed(address: string, allowed: readonly string[]): boolean {
  if (allowed.length === 0) return true;
  const domain = address.slice(address.lastIndexOf('@') + 1).toLowerCase();
  return allowed.some((d) => domain === d || domain.endsWith(`.${d}`));
}

/** The addresses a message goes to now: allowed by the domains, and confirmed where consent is needed. */
export async function mailable(q: Queryable, cfg: EmailIntegration, addresses: string[], allowed: readonly string[]): Promise<string[]> {
  const ok = addresses.filter((a) => domainAllowed(a, allowed));
  if (cfg.managedBy === 'operator' || ok.length === 0) return ok;
  const confirmed = await confirmedRecipients(q, cfg.id);
  return ok.filter((a) => confirmed.has(a));
}
