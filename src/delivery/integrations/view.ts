// How an integration is shown (API guide 9): its channel's public settings only, write-only secrets
// replaced by flags (passwordSet, keySet, signingSecretSet), a new signing secret in the one answer
// that shows it.
import type { Static } from '@sinclair/typebox';
import { iso } from '../../http/schemas.js';
import type { IntegrationStats } from '../queue/index.js';
import type { Row } from './model.js';
import { type AuthIn, type AuthOut, type Integration, SECRET_FIELDS } from './schemas.js';

export const publicAuth = (a: AuthIn | null) => {
  if (!a) return null;
  return Object.fromEntries(Object.entries(a).filter(([k]) => !SECRET_FIELDS.includes(k))) as Static<typeof AuthOut>;
};

/** Stored public settings without the flags that describe secrets (a nested sasl or ssl keeps its own shape). */
export function stripSecretFlags(st: Record<string, unknown>): Record<string, unknown> {
  const { passwordSet: _p, keySet: _k, ...out } = st;
  for (const k of ['sasl', 'ssl'] as const) {
    const v = out[k] as Record<string, unknown> | null | undefined;
    if (v) {
      const { passwordSet: _p, keySet: _k, ...rest } = v;
      out[k] = rest;
    }
  }
  return out;
}

type IntegrationApi = Static<typeof Integration>;

/**
 * The channel's settings as the API shows them: only the integration's own channel has a member.
 * The stored settings are the public ones, written by compose.ts in this shape: read as such.
 */
function channelOut(r: Row): Pick<IntegrationApi, 'webhook' | 'mqtt' | 'kafka' | 'email'> {
  const st = r.settings;
  if (r.channel === 'email') return { email: st as IntegrationApi['email'] };
  if (r.channel === 'webhook') {
    return {
      webhook: {
        ...st,
        format: st.format ?? 'standard',
        // Saved before a path turned the injection on: a path that does nothing is shown as none.
        injectEventIdPath: st.injectEventId === true ? (st.injectEventIdPath ?? null) : null,
        signingSecretSet: r.secrets !== null && st.signingSecretSet === true,
        previousSigningSecretExpiresAt: st.previousSigningSecretExpiresAt ?? null,
      } as IntegrationApi['webhook'],
    };
  }
  if (r.channel === 'mqtt') {
    const mqtt = st as NonNullable<IntegrationApi['mqtt']>;
    return { mqtt: mqtt.setEventId ? mqtt : { ...mqtt, eventIdField: null } };
  }
  return { kafka: st as IntegrationApi['kafka'] };
}

export const toApi = (r: Row): IntegrationApi => ({
  id: r.id,
  name: r.name,
  channel: r.channel,
  enabled: r.enabled,
  ownerIds: r.owner_ids,
  objectTypes: r.object_types,
  filter: r.filter,
  destination: r.destination,
  destinations: r.destinations,
  retry: r.retry,
  maxBacklogHours: r.max_backlog_hours,
  autoDisableAfterHours: r.auto_disable_after_hours,
  health: r.health,
  disabledReason: r.disabled_reason,
  disabledAt: iso(r.disabled_at),
  managedBy: r.managed_by,
  ...channelOut(r),
  whenCreated: iso(r.when_created)!,
  whenUpdated: iso(r.when_updated)!,
});

/** The API shape, with a new signing secret in the one answer that shows it. */
export const withShownSecret = (r: Row, shown: string | undefined): IntegrationApi => {
  const out = toApi(r);
  return shown === undefined || !out.webhook ? out : { ...out, webhook: { ...out.webhook, signingSecret: shown } };
};

/** The API shape of stats: dates as ISO strings. */
export const statsApi = (s: IntegrationStats) => ({
  ...s,
  lastSuccessAt: iso(s.lastSuccessAt),
  lastErrorAt: iso(s.lastErrorAt),
  pausedUntil: iso(s.pausedUntil),
});
