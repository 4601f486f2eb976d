// The integrations table (API guide 9): the one module that reads and writes it. Secrets are sealed
// with SECRETS_KEY (AES-256-GCM) and opened only here, for the engine's configuration.
import type { Db, Queryable } from '../../db/db.js';
import { decrypt, encrypt } from '../../auth/crypto.js';
import { notFound } from '../../http/errors.js';
import { isUuid } from '../../http/schemas.js';
import type {
  EmailSettings,
  IntegrationBase,
  IntegrationConfig,
  KafkaIntegration,
  MqttIntegration,
  Row,
  Secrets,
  WebhookIntegration,
} from './model.js';
import { newSigningSecret } from './model.js';

export const SELECT =
  'id, name, channel, enabled, owner_ids::text[] AS owner_ids, object_types, filter, destination, destinations, retry, max_backlog_hours, settings, secrets, managed_by, creator_owner_id, auto_disable_after_hours, health, disabled_reason, disabled_at, when_created, when_updated';

export const readSecrets = (key: Buffer, sealed: string | null): Secrets =>
  sealed ? JSON.parse(decrypt(key, sealed)) : { auth: null, signingSecret: null, previousSigningSecret: null };

export function loadConfigFromRow(r: Row, key: Buffer): IntegrationConfig {
  const secrets = readSecrets(key, r.secrets);
  const base: IntegrationBase = {
    id: r.id,
    name: r.name,
    enabled: r.enabled,
    maxBacklogHours: r.max_backlog_hours,
    ownerIds: r.owner_ids,
    destination: r.destination,
    destinations: r.destinations as IntegrationConfig['destinations'],
    retry: r.retry,
  };
  if (r.channel === 'mqtt') {
    const { passwordSet: _p, keySet: _k, ...st } = r.settings;
    return {
      ...base,
      channel: 'mqtt',
      mqtt: { ...(st as unknown as MqttIntegration['mqtt']), password: secrets.password ?? null, key: secrets.key ?? null },
    };
  }
  if (r.channel === 'email') {
    const { recipients: _r, ...st } = r.settings;
    return { ...base, channel: 'email', email: st as unknown as EmailSettings, objectTypes: r.object_types, managedBy: r.managed_by };
  }
  if (r.channel === 'kafka') {
    const st = r.settings as unknown as Omit<KafkaIntegration['kafka'], 'sasl' | 'ssl'> & {
      sasl: { mechanism: 'plain' | 'scram-sha-256' | 'scram-sha-512'; username: string } | null;
      ssl: { ca: string | null; cert: string | null } | null;
    };
    return {
      ...base,
      channel: 'kafka',
      kafka: {
        ...st,
        sasl: st.sasl ? { mechanism: st.sasl.mechanism, username: st.sasl.username, password: secrets.password ?? null } : null,
        ssl: st.ssl ? { ca: st.ssl.ca, cert: st.ssl.cert, key: secrets.key ?? null } : null,
      },
    };
  }
  const { auth: _a, signingSecretSet: _s, previousSigningSecretExpiresAt: _p, ...settings } = r.settings;
  return {
    ...base,
    channel: 'webhook',
    webhook: {
      ...(settings as Omit<WebhookIntegration['webhook'], 'auth' | 'signingSecret' | 'previousSigningSecret'>),
      // Saved before formats existed: the objects as they are.
      format: (settings.format as WebhookIntegration['webhook']['format'] | undefined) ?? 'standard',
      auth: secrets.auth,
      signingSecret: secrets.signingSecret,
      previousSigningSecret: secrets.previousSigningSecret ?? null,
    },
  };
}

export async function loadIntegration(q: Queryable, id: string, key: Buffer): Promise<IntegrationConfig | null> {
  const { rows } = await q.query<Row>(`SELECT ${SELECT} FROM integrations WHERE id = $1 AND deleted_at IS NULL`, [id]);
  return rows[0] ? loadConfigFromRow(rows[0], key) : null;
}

/** One integration's row (not deleted), or 404; `forUpdate` locks it for the rest of the transaction. */
export async function getRow(q: Queryable, id: string, forUpdate = false): Promise<Row> {
  if (!isUuid(id)) throw notFound('integration');
  const { rows } = await q.query<Row>(
    `SELECT ${SELECT} FROM integrations WHERE id = $1 AND deleted_at IS NULL${forUpdate ? ' FOR UPDATE' : ''}`,
    [id],
  );
  if (!rows[0]) throw notFound('integration');
  return rows[0];
}

/** What a save writes: the composed settings, secrets already sealed. */
export interface Composed {
  name: string;
  channel: string;
  enabled: boolean;
  ownerIds: string[];
  objectTypes: string[];
  /** As given (null: none), and compiled per object type for the event log's readers (eventlog/log.ts). */
  filter: Record<string, unknown[]> | null;
  typeFilters: Record<string, Record<string, unknown[]>> | null;
  destination: string;
  destinations: Record<string, string>;
  retry: Row['retry'];
  maxBacklogHours: number;
  autoDisableAfterHours: number;
  settings: Record<string, unknown>;
  secrets: string;
}

/** Who made an integration: the operator, or a customer's credential of an owner. */
export interface Maker {
  managedBy: 'operator' | 'customer';
  actor: string;
  ownerId: string;
}

/** Inserts (a create, by `maker`) or updates the row; answers it as stored. */
export async function saveRow(q: Queryable, id: string, v: Composed, maker: Maker | null): Promise<Row> {
  const insert = maker !== null;
  const { rows } = await q.query<Row>(
    insert
      ? `INSERT INTO integrations (id, name, enabled, channel, owner_ids, object_types, destination, destinations, retry, settings, secrets,
                                  max_backlog_hours, filter, type_filters, auto_disable_after_hours, managed_by, created_by, creator_owner_id)
         VALUES ($1, $2, $3, $15, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $16, $17, $18) RETURNING ${SELECT}`
      : `UPDATE integrations SET name = $2, enabled = $3, owner_ids = $4, object_types = $5, destination = $6, destinations = $7,
           retry = $8, settings = $9, secrets = $10, max_backlog_hours = $11, filter = $12, type_filters = $13,
           auto_disable_after_hours = $14, when_updated = clock_timestamp()
         WHERE id = $1 RETURNING ${SELECT}`,
    [
      id,
      v.name,
      v.enabled,
      v.ownerIds,
      v.objectTypes,
      v.destination,
      JSON.stringify(v.destinations),
      JSON.stringify(v.retry),
      JSON.stringify(v.settings),
      v.secrets,
      v.maxBacklogHours,
      v.filter === null ? null : JSON.stringify(v.filter),
      v.typeFilters === null ? null : JSON.stringify(v.typeFilters),
      v.autoDisableAfterHours,
      ...(maker ? [v.channel, maker.managedBy, maker.actor, maker.ownerId] : []),
    ],
  );
  return rows[0]!;
}

/**
 * A delete (API guide 9): delivery stops at once (the engine claims only enabled, undeleted
 * integrations) and the credentials are wiped; the row stays for the history.
 */
export async function markDeleted(q: Queryable, id: string): Promise<void> {
  await q.query(
    `UPDATE integrations SET deleted_at = now(), enabled = false, secrets = NULL,
          settings = jsonb_set(settings, '{auth}', 'null'), when_updated = now() WHERE id = $1`,
    [id],
  );
}

/** Seals secrets for the table. */
export const sealSecrets = (key: Buffer, secrets: Secrets) => encrypt(key, JSON.stringify(secrets));

/** Runs fn again (up to 5 times) when PostgreSQL aborts it as a deadlock victim. */
export async function retryDeadlock<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (e) {
      if ((e as { code?: string }).code !== '40P01' || attempt >= 5) throw e;
      await new Promise((r) => setTimeout(r, 10 * attempt));
    }
  }
}

/**
 * Integrations saved before every webhook was signed get a secret at start (the operator sees it
 * by rotating). The condition makes it safe when several instances start at once.
 */
export async function signUnsignedIntegrations(db: Db, key: Buffer): Promise<void> {
  const { rows } = await db.query<Row>(
    `SELECT ${SELECT} FROM integrations WHERE channel = 'webhook' AND (settings->>'signingSecretSet') IS DISTINCT FROM 'true'`,
  );
  for (const r of rows) {
    const secrets: Secrets = { ...readSecrets(key, r.secrets), signingSecret: newSigningSecret(), previousSigningSecret: null };
    await db.query(
      `UPDATE integrations SET secrets = $2, settings = settings || '{"signingSecretSet": true}'::jsonb
        WHERE id = $1 AND (settings->>'signingSecretSet') IS DISTINCT FROM 'true'`,
      [r.id, encrypt(key, JSON.stringify(secrets))],
    );
  }
}
