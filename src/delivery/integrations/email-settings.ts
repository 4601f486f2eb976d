// An e-mail integration's settings as a save makes them (API guide 9, "E-mail"): the body laid over
// the stored settings (PATCH) or the defaults, addresses in lower case, and the service's rules:
// SMTP configured, every address at an allowed domain, at most EMAIL_MAX_RECIPIENTS distinct
// addresses, a time zone the runtime knows. Each refusal is a 400 naming its field.
import { knownTimeZone } from '../../alerts/text.js';
import { badRequest } from '../../http/errors.js';
import { mergePatch } from '../../http/merge-patch.js';
import { domainAllowed } from '../channels/email/recipients.js';
import type { EmailSettings } from './model.js';

export interface EmailRules {
  smtpConfigured: boolean;
  allowedDomains: readonly string[];
  maxRecipients: number;
  defaultMessagesPerHour: number;
}

const lower = (list: unknown): string[] => (Array.isArray(list) ? list.map((a) => String(a).toLowerCase()) : []);

export function composeEmail(
  given: Record<string, unknown> | undefined,
  stored: Record<string, unknown> | null,
  rules: EmailRules,
): EmailSettings {
  if (!rules.smtpConfigured) {
    throw badRequest('/channel: this service sends no e-mail (its operator has not set SMTP_URL)', '/channel');
  }
  const { recipients: _r, ...kept } = stored ?? {};
  const w = (stored ? mergePatch(kept, given ?? {}) : (given ?? {})) as Record<string, unknown>;
  const dedupe = (l: string[]) => [...new Set(l)];
  const to = dedupe(lower(w.to));
  if (to.length === 0) throw badRequest('/email/to: at least one recipient is required', '/email/to');
  const cc = dedupe(lower(w.cc)).filter((a) => !to.includes(a));
  const escalateTo = dedupe(lower(w.escalateTo));
  for (const [field, list] of [
    ['to', to],
    ['cc', cc],
    ['escalateTo', escalateTo],
  ] as const) {
    for (const [n, a] of list.entries()) {
      if (!domainAllowed(a, rules.allowedDomains)) {
        throw badRequest(
          `/email/${field}/${n}: ${a} is not at a domain this service mails (EMAIL_ALLOWED_DOMAINS: ${rules.allowedDomains.join(', ')})`,
          `/email/${field}/${n}`,
        );
      }
    }
  }
  const distinct = new Set([...to, ...cc, ...escalateTo]).size;
  if (distinct > rules.maxRecipients) {
    throw badRequest(
      `/email/to: ${distinct} distinct recipients (to, cc and escalateTo); at most ${rules.maxRecipients} per integration (EMAIL_MAX_RECIPIENTS)`,
      '/email/to',
    );
  }
  const timeZone = (w.timeZone as string | undefined) ?? 'UTC';
  if (!knownTimeZone(timeZone))
    throw badRequest(`/email/timeZone: "${timeZone}" is not a time zone (an IANA name such as Europe/Amsterdam)`, '/email/timeZone');
  const after = w.escalateAfterMinutes as number | null | undefined;
  if (after != null && escalateTo.length === 0) {
    throw badRequest(
      '/email/escalateAfterMinutes is given with no escalateTo: name who an alert escalates to, or leave it out',
      '/email/escalateAfterMinutes',
    );
  }
  return {
    to,
    cc,
    escalateTo,
    escalateAfterMinutes: escalateTo.length ? (after ?? 30) : null,
    minIntervalMinutes: (w.minIntervalMinutes as number | undefined) ?? 15,
    maxMessagesPerHour: (w.maxMessagesPerHour as number | undefined) ?? rules.defaultMessagesPerHour,
    timeZone,
  };
}
