// An integration's settings as a save makes them (API guide 9): the body merged over the stored
// ones (PATCH) or over the defaults (create, PUT), then checked whole: owners the caller sees,
// addresses that pass the rules, topics brokers accept, write-only secrets kept only where they
// would go to the same place, the event id injection neither contradicted nor ignored, and the
// signing secret generated or rotated.
import { isDeepStrictEqual } from 'node:util';
import type { Queryable } from '../../db/db.js';
import { ApiError, badRequest } from '../../http/errors.js';
import { parseDottedPath } from '../../http/dotted-path.js';
import { mergePatch } from '../../http/merge-patch.js';
import { iso } from '../../http/schemas.js';
import type { Tenancy } from '../../tenancy/tenancy.js';
import { type AddressPolicy, refusedAs400, vetUrl } from '../address.js';
import { filterFields, OBJECT_TYPES, type ObjectType, PUSH_FIELDS, RECORD_TYPES } from '../../eventlog/objects.js';
import { checkTopics, composeKafka, composeMqtt } from './broker-settings.js';
import { composeEmail, type EmailRules } from './email-settings.js';
import { newSigningSecret, type Row, SECRET_OVERLAP_MS, type Secrets } from './model.js';
import {
  type AuthIn,
  CHANNELS,
  CHAT_FORMATS,
  CHAT_TYPES,
  type ChannelName,
  DCSA_TYPES,
  DEFAULT_SCHEDULE_SECONDS,
  type IntegrationInput,
  type WebhookFormat,
} from './schemas.js';
import { type Composed, readSecrets, sealSecrets } from './store.js';
import { publicAuth, stripSecretFlags } from './view.js';

/** Merges input over the current row (PATCH) or defaults (create/PUT) and validates it all. */
export async function compose(
  deps: { secretsKey: Buffer; policy: AddressPolicy; email: EmailRules },
  t: Tenancy,
  q: Queryable,
  b: IntegrationInput,
  cur: Row | null,
  mode: 'create' | 'put' | 'patch',
): Promise<Composed & { shownSecret: string | undefined }> {
  const { secretsKey, policy } = deps;
  const base = mode === 'patch' ? cur : null;
  const curSecrets = readSecrets(secretsKey, cur?.secrets ?? null);
  const channel: ChannelName = b.channel ?? cur?.channel ?? 'webhook';
  if (cur && channel !== cur.channel) {
    throw badRequest(`/channel: an integration's channel is fixed (${cur.channel}); create a new integration for ${channel}`, '/channel');
  }
  for (const other of CHANNELS) {
    if (other !== channel && b[other] !== undefined) {
      throw badRequest(`/${other}: settings of the ${other} channel, but this integration's channel is ${channel}`, `/${other}`);
    }
  }
  const ownerIds = b.ownerIds ?? base?.owner_ids ?? [];
  for (const [n, id] of ownerIds.entries()) {
    if (!(await t.sees(id, q))) throw new ApiError('NOT_FOUND', `owner ${id} not found`, { field: `/ownerIds/${n}` });
  }
  // A chat format's defaults: events and notifications, and of the events only INFO ones (an ALERT
  // event's notification is the same alert, and the message is built from it: one alert, one message).
  // E-mail's: the same types, and only ALERT events (the filter the API guide's example shows).
  const email = channel === 'email';
  const format = channel === 'webhook' ? (b.webhook?.format ?? (base?.settings.format as WebhookFormat | undefined) ?? 'standard') : null;
  const chat = format !== null && (CHAT_FORMATS as readonly string[]).includes(format);
  const objectTypes =
    b.objectTypes ??
    base?.object_types ??
    (chat || email ? [...CHAT_TYPES] : format === 'dcsa-tnt-3' ? [...DCSA_TYPES] : [...RECORD_TYPES]);
  const chatFilter =
    (chat || email) && mode !== 'patch' && CHAT_TYPES.every((t) => objectTypes.includes(t))
      ? { severity: [email ? 'ALERT' : 'INFO'] }
      : null;
  // A merge patch merges into the stored filter ({"filter": {"severity": null}} drops that member).
  const filterIn =
    b.filter === undefined
      ? (base?.filter ?? chatFilter)
      : mode === 'patch' && b.filter
        ? mergePatch(base?.filter ?? {}, b.filter)
        : b.filter;
  const { filter, typeFilters } = compileFilter(filterIn as Record<string, unknown[]> | null, objectTypes as ObjectType[]);
  if (email) {
    for (const f of ['destination', 'destinations'] as const) {
      if (b[f] !== undefined) throw badRequest(`/${f}: an e-mail integration's recipients are in email.to; leave ${f} out`, `/${f}`);
    }
    checkAlertTypes('email', objectTypes);
  } else if (!(b.destination ?? base?.destination)) {
    throw badRequest(`/destination is required: the ${channel === 'webhook' ? 'URL' : 'topic prefix'} events go to`, '/destination');
  }
  const destination = b.destination ?? base?.destination ?? '';
  const destinations = (b.destinations ?? base?.destinations ?? {}) as Record<string, string>;
  if (channel === 'webhook') {
    if (b.destination !== undefined) await refusedAs400('/destination', () => vetUrl(destination, policy));
    for (const [type, url] of Object.entries(b.destinations ?? {})) {
      if (!(OBJECT_TYPES as readonly string[]).includes(type))
        throw badRequest(`/destinations: unknown object type "${type}"`, `/destinations/${type}`);
      await refusedAs400(`/destinations/${type}`, () => vetUrl(url, policy));
    }
  } else if (!email) checkTopics(channel, destination, destinations);
  const retryIn = { ...(base?.retry ?? {}), ...(b.retry ?? {}) };
  const retry = {
    scheduleSeconds: retryIn.scheduleSeconds ?? DEFAULT_SCHEDULE_SECONDS,
    maxAttempts: retryIn.maxAttempts ?? 30,
    deadlineHours: retryIn.deadlineHours ?? 24,
  };
  const common = {
    name: b.name ?? base?.name ?? '',
    channel,
    enabled: b.enabled ?? base?.enabled ?? true,
    ownerIds,
    objectTypes,
    filter,
    typeFilters,
    destination,
    destinations,
    retry,
    maxBacklogHours: b.maxBacklogHours ?? base?.max_backlog_hours ?? 72,
    autoDisableAfterHours: b.autoDisableAfterHours ?? base?.auto_disable_after_hours ?? 48,
  };
  if (email) {
    const settings = composeEmail(
      b.email as Record<string, unknown> | undefined,
      mode === 'patch' ? (cur?.settings ?? null) : null,
      deps.email,
    );
    return {
      ...common,
      // What the history and lists show as where it goes.
      destination: `mailto:${settings.to.join(',')}`,
      settings: settings as unknown as Record<string, unknown>,
      secrets: sealSecrets(secretsKey, { auth: null, signingSecret: null }),
      shownSecret: undefined,
    };
  }
  if (channel !== 'webhook') {
    // The stored public settings without the flags that only describe secrets; PATCH merges over them.
    const stored = stripSecretFlags(cur?.settings ?? {});
    const given = (b[channel] ?? {}) as Record<string, unknown>;
    const input = { ...((mode === 'patch' ? mergePatch(stored, given) : given) as Record<string, unknown>) };
    if (channel === 'mqtt') {
      const set = eventIdInjection(
        { on: given.setEventId as boolean | undefined, field: given.eventIdField as string | null | undefined },
        mode === 'patch' ? { on: stored.setEventId === true, field: (stored.eventIdField as string | null | undefined) ?? null } : null,
        { on: 'setEventId', field: '/mqtt/eventIdField', defaultField: 'eventId' },
      );
      input.setEventId = set.on;
      input.eventIdField = set.field;
    }
    const curBroker = cur ? { settings: stored, secrets: { password: curSecrets.password ?? null, key: curSecrets.key ?? null } } : null;
    const made =
      channel === 'mqtt'
        ? await composeMqtt(input, curBroker, objectTypes, policy)
        : await composeKafka(input, curBroker, objectTypes, policy);
    const secrets: Secrets = { auth: null, signingSecret: null, ...made.secrets };
    return {
      ...common,
      settings: made.settings as Record<string, unknown>,
      secrets: sealSecrets(secretsKey, secrets),
      shownSecret: undefined,
    };
  }
  const w = { ...(base?.settings ?? {}), ...(b.webhook ?? {}) } as Record<string, unknown>;
  const inject = eventIdInjection(
    { on: b.webhook?.injectEventId, field: b.webhook?.injectEventIdPath },
    mode === 'patch' && base
      ? { on: base.settings.injectEventId === true, field: (base.settings.injectEventIdPath as string | null | undefined) ?? null }
      : null,
    { on: 'injectEventId', field: '/webhook/injectEventIdPath', defaultField: null },
  );
  const settings = {
    format: (w.format as WebhookFormat | undefined) ?? 'standard',
    mode: (w.mode as string) ?? 'single',
    batchSize: (w.batchSize as number) ?? 100,
    maxItemsPerMinute: (w.maxItemsPerMinute as number | null) ?? null,
    maxConcurrentRequests: (w.maxConcurrentRequests as number) ?? 4,
    timeoutMs: (w.timeoutMs as number) ?? 10_000,
    injectEventId: inject.on,
    injectEventIdPath: inject.field,
  };
  if (settings.injectEventIdPath !== null) parseDottedPath(settings.injectEventIdPath, '/webhook/injectEventIdPath');
  if (settings.format === 'dcsa-tnt-3') checkDcsaFormat(settings, objectTypes);
  else if (settings.format !== 'standard') checkChatFormat(settings.format, settings, objectTypes);
  // Write-only secrets: absent = keep (PUT included), null = remove, a value = replace; but a stored
  // credential is kept only while every destination keeps its origin (scheme, host, port): a
  // changed destination never receives a secret entered for another, so it is dropped.
  const inAuth = b.webhook?.auth;
  const sameOrigins = cur === null || originsOf(cur.destination, cur.destinations) === originsOf(destination, destinations);
  const stored = sameOrigins ? curSecrets.auth : null;
  const auth = inAuth === undefined ? stored : keepSecret(inAuth as Record<string, unknown> | null, stored);
  if (auth?.type === 'oauth2' && 'tokenUrl' in auth) await refusedAs400('/webhook/auth/tokenUrl', () => vetUrl(auth.tokenUrl, policy));
  // API guide 9: every webhook is signed. No secret yet: one is generated (shown once in the
  // answer); a different one given: a rotation, the previous one signing on for 24 h.
  const signing = rotate(curSecrets, b.webhook?.signingSecret ?? (curSecrets.signingSecret ? undefined : newSigningSecret()));
  const secrets: Secrets = { auth, ...signing.secrets };
  return {
    ...common,
    settings: {
      ...settings,
      auth: publicAuth(auth),
      signingSecretSet: true,
      previousSigningSecretExpiresAt: signing.previousExpiresAt,
    } as Record<string, unknown>,
    secrets: sealSecrets(secretsKey, secrets),
    /** The new secret, for the one answer that shows it. */
    shownSecret: signing.shown,
  };
}

/**
 * A chat format (slack, teams) tells a person about alerts: one message per event or notification,
 * so any other object type, batches or an injected event id (the body is the chat's, not the
 * object) would send what no chat shows; each is a 400 naming what to change.
 */
function checkChatFormat(format: WebhookFormat, settings: { mode: string; injectEventId: boolean }, objectTypes: readonly string[]): void {
  checkAlertTypes(`${format} format`, objectTypes);
  if (settings.mode !== 'single')
    throw badRequest(`/webhook/mode: the ${format} format sends one message per object (mode single)`, '/webhook/mode');
  if (settings.injectEventId) {
    throw badRequest(
      `/webhook/injectEventId: the ${format} format's body is a chat message, which carries no event id`,
      '/webhook/injectEventId',
    );
  }
}

/**
 * The dcsa-tnt-3 format (API guide 18) sends DCSA events, made from locations, sensor data, reefer
 * data and commands: another object type would make none, and an injected event id would be a
 * member the standard does not have; each is a 400 naming what to change.
 */
function checkDcsaFormat(settings: { injectEventId: boolean }, objectTypes: readonly string[]): void {
  const other = objectTypes.filter((t) => !(DCSA_TYPES as readonly string[]).includes(t));
  if (other.length) {
    throw badRequest(
      `/objectTypes: the dcsa-tnt-3 format makes DCSA events from ${DCSA_TYPES.join(', ')} only; leave out ${other.join(', ')}`,
      '/objectTypes',
    );
  }
  if (settings.injectEventId) {
    throw badRequest('/webhook/injectEventId: a DCSA event carries its own eventID; leave injectEventId out', '/webhook/injectEventId');
  }
}

/** A message a person reads (chat, e-mail) tells of events and notifications: any other type is a 400. */
function checkAlertTypes(what: string, objectTypes: readonly string[]): void {
  const other = objectTypes.filter((t) => !(CHAT_TYPES as readonly string[]).includes(t));
  if (other.length) {
    throw badRequest(
      `/objectTypes: the ${what} sends events and notifications only; leave out ${other.join(', ')} (a webhook of the standard format sends them)`,
      '/objectTypes',
    );
  }
}

/**
 * An integration's filter (API guide 9), checked against its object types and compiled per type:
 * a member applies to the types that have that field; a member none of them has is a 400 naming
 * it (it would do nothing), as is one naming an object or array member.
 */
export function compileFilter(
  filter: Record<string, unknown[]> | null,
  objectTypes: readonly ObjectType[],
): { filter: Record<string, unknown[]> | null; typeFilters: Record<string, Record<string, unknown[]>> | null } {
  if (filter === null || Object.keys(filter).length === 0) return { filter: null, typeFilters: null };
  const typeFilters: Record<string, Record<string, unknown[]>> = {};
  for (const [field, values] of Object.entries(filter)) {
    const types = objectTypes.filter((t) => filterFields(t).includes(field));
    if (types.length === 0) {
      const structured = objectTypes.filter((t) => PUSH_FIELDS[t].includes(field));
      throw badRequest(
        structured.length
          ? `/filter/${field}: "${field}" of ${structured.join(', ')} is an object or array; a filter compares single values`
          : `/filter/${field}: none of this integration's objectTypes (${objectTypes.join(', ')}) has a field "${field}"`,
        `/filter/${field}`,
      );
    }
    for (const t of types) typeFilters[t] = { ...typeFilters[t], [field]: [...new Set(values)] };
  }
  return { filter, typeFilters };
}

/** The origins of an integration's webhook URLs, per object type, as one comparable text. */
function originsOf(destination: string, destinations: Record<string, string>): string {
  const origin = (u: string) => {
    try {
      return new URL(u).origin;
    } catch {
      return u;
    }
  };
  return JSON.stringify([
    origin(destination),
    ...Object.entries(destinations)
      .sort()
      .map(([t, u]) => `${t} ${origin(u)}`),
  ]);
}

/** Applies a new signing secret (or none) to the stored ones; a change keeps the old one for 24 h. */
function rotate(cur: Secrets, next: string | undefined) {
  const now = Date.now();
  const livePrevious = cur.previousSigningSecret && cur.previousSigningSecret.until > now ? cur.previousSigningSecret : null;
  if (next === undefined || next === cur.signingSecret) {
    return {
      secrets: { signingSecret: cur.signingSecret, previousSigningSecret: livePrevious },
      previousExpiresAt: livePrevious ? iso(new Date(livePrevious.until)) : null,
      shown: undefined,
    };
  }
  const previous = cur.signingSecret ? { secret: cur.signingSecret, until: now + SECRET_OVERLAP_MS } : null;
  return {
    secrets: { signingSecret: next, previousSigningSecret: previous },
    previousExpiresAt: previous ? iso(new Date(previous.until)) : null,
    shown: next,
  };
}

/**
 * Auth given without its secret keeps the stored secret only when every other member is unchanged
 * (a GET body put back): a stored secret never follows a new tokenUrl, header name or username.
 */
function keepSecret(given: Record<string, unknown> | null, stored: AuthIn | null): AuthIn | null {
  if (given === null) return null;
  const t = given.type;
  const need =
    t === 'apiKey' ? 'token' : t === 'header' ? 'value' : t === 'basic' ? 'password' : 'tokenUrl' in given ? 'clientSecret' : 'token';
  if (given[need] !== undefined) return given as AuthIn;
  if (stored && isDeepStrictEqual(publicAuth(stored), given)) return stored;
  throw badRequest(
    `/webhook/auth/${need} is required (left out, the stored one is kept only when the rest of auth is unchanged).`,
    `/webhook/auth/${need}`,
  );
}

/**
 * Event id injection (API guide 9), one rule for the webhook path and the MQTT field: naming the
 * field turns it on; on alone uses the default (a webhook's top-level `eventId`, MQTT's field
 * `eventId`); off keeps no field. A field given while off would be accepted and ignored: a 400
 * instead. `stored` (a PATCH) is what the given members are laid over; its field counts only while on.
 */
function eventIdInjection(
  given: { on?: boolean | undefined; field?: string | null | undefined },
  stored: { on: boolean; field: string | null } | null,
  names: { on: string; field: string; defaultField: string | null },
): { on: boolean; field: string | null } {
  if (given.on === false && given.field != null) {
    throw badRequest(`${names.field} is given while ${names.on} is false: remove it, or set ${names.on} to true`, names.field);
  }
  const on = given.on ?? (given.field != null || (stored?.on ?? false));
  if (!on) return { on: false, field: null };
  const field = given.field !== undefined ? given.field : stored?.on ? stored.field : null;
  return { on: true, field: field ?? names.defaultField };
}
