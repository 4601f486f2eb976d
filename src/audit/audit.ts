// The audit log (API guide 14): one entry per change of a managed resource, sign-in, sign-out,
// redelivery, enabling and disabling, written with `record` in the transaction of the change, so an
// entry exists exactly when its change committed. Data records are data, not changes: never here.
//
// `changes` names each field (a dotted path into the resource's API shape) whose value differs,
// with `from` (absent on a create) and `to` (absent on a delete). Secrets never reach it: a secret
// set by a request is listed with both sides masked, and any value under a secret's name is masked
// whatever produced it, and so is a URL's query values and userinfo (an `?api_key=` in a webhook URL).
import type { Queryable } from '../db/db.js';
import type { Tenancy } from '../tenancy/tenancy.js';

export const ACTOR_TYPES = ['user', 'apiKey', 'client', 'system'] as const;
export type ActorType = (typeof ACTOR_TYPES)[number];
export interface Actor {
  type: ActorType;
  id: string | null;
}

export const MASK = '********';

/** What a field is called when it holds a secret (its value is masked wherever it appears). */
const SECRET_NAME =
  /^(password|secret|signingSecret|clientSecret|client_secret|key|apiKey|token|accessToken|refreshToken|privateKey|passphrase)$/i;
/** Whether a member holds a secret: by its name, or as an integration's header auth `value`. */
const isSecret = (name: string, parent: string) => SECRET_NAME.test(name) || (name === 'value' && parent === 'auth');

/** Fields that change with every write or are state, not settings: never listed as changes. */
const NOT_CHANGES = new Set(['whenCreated', 'whenUpdated', 'stats', 'healthLog']);

export type Change = { from?: unknown; to?: unknown };
export type Changes = Record<string, Change>;

const isPlain = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const lastName = (path: string) => path.slice(path.lastIndexOf('.') + 1);

/**
 * A URL with what may hold a secret masked: each query value (`?api_key=********`) and the
 * userinfo (`https://********:********@host`); the scheme, host, path and parameter names stay.
 * Any other text as it is.
 */
export function redactedUrl(s: string): string {
  if (!/^[a-z][a-z0-9+.-]*:\/\/\S*$/i.test(s)) return s;
  let u: URL;
  try {
    u = new URL(s);
  } catch {
    return s;
  }
  if (!u.search && !u.username && !u.password) return s;
  if (u.username) u.username = MASK;
  if (u.password) u.password = MASK;
  if (u.search) u.search = [...u.searchParams.keys()].map((k) => `${encodeURIComponent(k)}=${MASK}`).join('&');
  return u.toString();
}

/** A value with every secret-named member masked (at any depth), and the secrets a URL may carry. */
function masked(v: unknown, name = '', parent = ''): unknown {
  if (isSecret(name, parent) && v !== null && v !== undefined && typeof v !== 'boolean') return MASK;
  if (typeof v === 'string') return redactedUrl(v);
  if (Array.isArray(v)) return v.map((x) => masked(x, '', name));
  if (isPlain(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, masked(x, k, name)]));
  return v;
}
const parentName = (path: string) => {
  const parts = path.split('.');
  return parts.length > 1 ? parts[parts.length - 2]! : '';
};

const same = (a: unknown, b: unknown) => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);

/**
 * The fields that differ between two API shapes of a resource (null before: created; null after:
 * deleted), objects compared member by member, and the secrets a request set (paths from
 * `secretPaths`), masked.
 */
export function changesOf(before: object | null, after: object | null, secrets: string[] = []): Changes {
  const out: Changes = {};
  const walk = (b: unknown, a: unknown, path: string) => {
    if (isPlain(b) && isPlain(a)) {
      for (const k of new Set([...Object.keys(b), ...Object.keys(a)])) walk(b[k], a[k], path ? `${path}.${k}` : k);
      return;
    }
    if (same(b, a)) return;
    const c: Change = {};
    if (before !== null) c.from = masked(b ?? null, lastName(path), parentName(path));
    if (after !== null) c.to = masked(a ?? null, lastName(path), parentName(path));
    out[path] = c;
  };
  const b = (before ?? {}) as Record<string, unknown>;
  const a = (after ?? {}) as Record<string, unknown>;
  for (const k of new Set([...Object.keys(b), ...Object.keys(a)])) {
    if (NOT_CHANGES.has(k)) continue;
    if (after === null || before === null) {
      // A create lists what was set, a delete what was there: nulls are not news.
      const v = after === null ? b[k] : a[k];
      if (v === null || v === undefined) continue;
    }
    walk(b[k], a[k], k);
  }
  for (const p of secrets) {
    const c: Change = {};
    if (before !== null) c.from = MASK;
    if (after !== null) c.to = MASK;
    out[p] = c;
  }
  return out;
}

/** The dotted paths of the secret-named members a request body sets (to anything but null). */
export function secretPaths(body: unknown, path = ''): string[] {
  if (!isPlain(body)) return [];
  const out: string[] = [];
  for (const [k, v] of Object.entries(body)) {
    const p = path ? `${path}.${k}` : k;
    if (isSecret(k, lastName(path)) && v !== null && v !== undefined) out.push(p);
    else out.push(...secretPaths(v, p));
  }
  return out;
}

/** The actor of a request's credential (tenancy.ts Principal.actor: "user:<id>", "apikey:<id>", ...). */
export function actorOf(actor: string): Actor {
  const i = actor.indexOf(':');
  const kind = actor.slice(0, i);
  const id = actor.slice(i + 1);
  // An external issuer's subject is a user of that issuer (Keycloak's service accounts are users too).
  if (kind === 'apikey') return { type: 'apiKey', id };
  if (kind === 'client') return { type: 'client', id };
  if (kind === 'system') return { type: 'system', id };
  // An alert acknowledged by a mailed link: the service acted on the recipient's word.
  if (kind === 'email') return { type: 'system', id: actor };
  return { type: 'user', id };
}

export interface Entry {
  actor: Actor;
  address: string | null;
  ownerId: string | null;
  action: string;
  resource: { type: string; id: string | null };
  changes?: Changes | null;
}

/** Every value masked by the name of the field it belongs to (a change's path names it). */
const maskedChanges = (changes: Changes): Changes =>
  Object.fromEntries(
    Object.entries(changes).map(([path, c]) => {
      const out: Change = {};
      if ('from' in c) out.from = masked(c.from, lastName(path), parentName(path));
      if ('to' in c) out.to = masked(c.to, lastName(path), parentName(path));
      return [path, out];
    }),
  );

/** Writes one entry in the caller's transaction. */
export async function record(q: Queryable, e: Entry): Promise<void> {
  await q.query(
    `INSERT INTO audit_log (actor_type, actor_id, owner_id, address, action, resource_type, resource_id, changes)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [
      e.actor.type,
      e.actor.id,
      e.ownerId,
      e.address,
      e.action,
      e.resource.type,
      e.resource.id,
      e.changes === undefined || e.changes === null ? null : JSON.stringify(maskedChanges(e.changes)),
    ],
  );
}

/** Several entries of one request in one statement (a bulk's changes: one row each, one round trip). */
/** Who made a change: a request's tenancy, or one without a credential (an e-mailed link: its actor says whose). */
export type AuditActor = { readonly principal: { readonly actor: string }; readonly address: string | null };

export async function recordMany(q: Queryable, t: AuditActor, changes: AuditedChange[]): Promise<void> {
  if (changes.length === 0) return;
  const actor = actorOf(t.principal.actor);
  await q.query(
    `INSERT INTO audit_log (actor_type, actor_id, owner_id, address, action, resource_type, resource_id, changes)
     SELECT $1, $2, o, $3, a, r, i, c FROM unnest($4::uuid[], $5::text[], $6::text[], $7::text[], $8::jsonb[]) AS x(o, a, r, i, c)`,
    [
      actor.type,
      actor.id,
      t.address,
      changes.map((c) => c.ownerId),
      changes.map((c) => c.action),
      changes.map((c) => c.type),
      changes.map((c) => c.id),
      changes.map((c) => {
        const d =
          c.before === undefined && c.after === undefined ? null : changesOf(c.before ?? null, c.after ?? null, secretPaths(c.body));
        return d === null ? null : JSON.stringify(maskedChanges(d));
      }),
    ],
  );
}

/** What a request's handler says about its change; the actor and address come from its tenancy. */
export interface AuditedChange {
  action: 'create' | 'update' | 'delete' | (string & {});
  type: string;
  id: string | null;
  ownerId: string | null;
  before?: object | null;
  after?: object | null;
  /** The request body, for the secrets it sets (listed masked). */
  body?: unknown;
}

/** One entry for a request's change, in its transaction `q`. */
export function audit(q: Queryable, t: Tenancy, c: AuditedChange): Promise<void> {
  return record(q, {
    actor: actorOf(t.principal.actor),
    address: t.address,
    ownerId: c.ownerId,
    action: c.action,
    resource: { type: c.type, id: c.id },
    changes: c.before === undefined && c.after === undefined ? null : changesOf(c.before ?? null, c.after ?? null, secretPaths(c.body)),
  });
}

/** Removes entries older than `days`, oldest first, in batches (never one long transaction). */
export async function pruneAudit(db: Queryable, days: number): Promise<number> {
  let total = 0;
  for (;;) {
    const { rows } = await db.query<{ n: string }>(
      `WITH gone AS (
         DELETE FROM audit_log WHERE id IN (
           SELECT id FROM audit_log WHERE at < now() - make_interval(days => $1) ORDER BY at, id LIMIT 10000)
         RETURNING 1)
       SELECT count(*)::text AS n FROM gone`,
      [days],
    );
    const n = Number(rows[0]?.n ?? 0);
    total += n;
    if (n < 10000) return total;
  }
}
