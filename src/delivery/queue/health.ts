// Integration health (API guide 9): every attempt's result moves integration_state.failing_since
// (results.ts); a sweep turns it into changes of health, each kept in integration_health and
// pushed as an `integrationStatus` object to the integrations that ask for that type:
//   failing    every attempt has failed for an hour;
//   disabled   ... for autoDisableAfterHours (0: never): the integration is disabled, saying why;
//   recovered  a failing integration delivered again;
//   enabled    a disabled one was enabled again (its streak starts afresh).
// In the event log's Kafka mode an integration is failing too while the consumer group has lost
// unread messages on a partition (Kafka deleted them: their events are not handed over until an
// operator moves the group's offsets; API guide 17). Partitions are keyed by asset, so any enabled
// integration may have events there: each is told, and recovers once no partition is lost.
// Each change is one conditional UPDATE, so sweeps of several processes never record one twice.
import type { Db, Queryable } from '../../db/db.js';
import { sqlIso } from '../../db/sql.js';
import { iso } from '../../http/schemas.js';
import { appendEvents, wakeReaders } from '../../eventlog/log.js';
import { record as audit } from '../../audit/audit.js';

export type HealthStatus = 'failing' | 'disabled' | 'recovered' | 'enabled';

interface Changed {
  id: string;
  name: string;
  channel: string;
  owner_id: string;
  detail: string;
  audit_owner?: string | null;
}

/** What a change says, as pushed: `id` is the change's, `at` when it was seen. */
export interface IntegrationStatus {
  id: string;
  integrationId: string;
  integrationName: string;
  channel: string;
  ownerId: string;
  status: HealthStatus;
  detail: string;
  at: string;
}

/** Records the changes and pushes them, in the caller's transaction. */
async function record(q: Queryable, status: HealthStatus, changed: Changed[]): Promise<void> {
  if (!changed.length) return;
  const { rows } = await q.query<{ id: string; integration_id: string; at: Date }>(
    `INSERT INTO integration_health (integration_id, status, detail)
     SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[]) RETURNING id::text, integration_id, at`,
    [changed.map((c) => c.id), changed.map(() => status), changed.map((c) => c.detail)],
  );
  const at = new Map(rows.map((r) => [r.integration_id, r]));
  await appendEvents(
    q,
    'integrationStatus',
    changed.map((c) => {
      const row = at.get(c.id)!;
      const payload: IntegrationStatus = {
        id: row.id,
        integrationId: c.id,
        integrationName: c.name,
        channel: c.channel,
        ownerId: c.owner_id,
        status,
        detail: c.detail,
        at: iso(row.at)!,
      };
      return { objectId: c.id, ownerId: c.owner_id, payload };
    }),
  );
}

// The owner a change belongs to: the one whose credential made the integration, else its first.
const OWNER = 'COALESCE(i.creator_owner_id, i.owner_ids[1])';
// The audit log's owner (access.ts auditOwner): an operator's integration over several owners has none.
const AUDIT_OWNER = 'COALESCE(i.creator_owner_id, CASE WHEN cardinality(i.owner_ids) = 1 THEN i.owner_ids[1] END)';
const LAST_ERROR = `(SELECT a.error FROM delivery_attempts a WHERE a.integration_id = i.id AND NOT a.success
                      ORDER BY a.when_attempted DESC LIMIT 1)`;

/**
 * The sweep: the changes of health due by `now`. `lost`: the event log's partitions whose unread
 * messages were deleted (none in the PostgreSQL mode; null: not known now, so no integration
 * recovers in this sweep). Returns how many changes were recorded.
 */
export async function sweepHealth(db: Db, now = new Date(), lost: number[] | null = []): Promise<number> {
  const n = await db.tx(async (q) => {
    const at = now.toISOString();
    const { rows: disabled } = await q.query<Changed>(
      `UPDATE integrations i SET enabled = false, health = 'disabled', disabled_at = $1,
              disabled_reason = 'Every attempt failed for ' || i.auto_disable_after_hours || ' hours, since '
                || ${sqlIso('s.failing_since')}
                || COALESCE('; last error: ' || left(${LAST_ERROR}, 500), ''),
              when_updated = clock_timestamp()
         FROM integration_state s
        WHERE s.integration_id = i.id AND i.deleted_at IS NULL AND i.enabled AND i.auto_disable_after_hours > 0
          AND s.failing_since <= $1::timestamptz - make_interval(secs => i.auto_disable_after_hours * 3600)
        RETURNING i.id, i.name, i.channel, ${OWNER} AS owner_id, i.disabled_reason AS detail, ${AUDIT_OWNER} AS audit_owner`,
      [at],
    );
    await record(q, 'disabled', disabled);
    for (const d of disabled) {
      await audit(q, {
        actor: { type: 'system', id: 'health' },
        address: null,
        ownerId: d.audit_owner ?? null,
        action: 'disable',
        resource: { type: 'integration', id: d.id },
        changes: { enabled: { from: true, to: false }, disabledReason: { from: null, to: d.detail } },
      });
    }
    const { rows: failing } = await q.query<Changed>(
      `UPDATE integrations i SET health = 'failing'
         FROM integration_state s
        WHERE s.integration_id = i.id AND i.deleted_at IS NULL AND i.enabled AND i.health = 'ok'
          AND s.failing_since <= $1::timestamptz - interval '1 hour'
        RETURNING i.id, i.name, i.channel, ${OWNER} AS owner_id,
                  'Every attempt has failed since ' || ${sqlIso('s.failing_since')}
                  || COALESCE('; last error: ' || left(${LAST_ERROR}, 500), '') AS detail`,
      [at],
    );
    await record(q, 'failing', failing);
    let unread: Changed[] = [];
    if (lost?.length) {
      const parts = [...lost].sort((a, b) => a - b).join(', ');
      ({ rows: unread } = await q.query<Changed>(
        `UPDATE integrations i SET health = 'failing'
          WHERE i.deleted_at IS NULL AND i.enabled AND i.health = 'ok'
          RETURNING i.id, i.name, i.channel, ${OWNER} AS owner_id, $1 AS detail`,
        [
          `The event log lost messages Kafka deleted before they were read (partition${lost.length > 1 ? 's' : ''} ${parts}): ` +
            "their events are not sent until an operator moves the consumer group's offsets",
        ],
      ));
      await record(q, 'failing', unread);
    }
    let recovered: Changed[] = [];
    if (lost && !lost.length) {
      ({ rows: recovered } = await q.query<Changed>(
        `UPDATE integrations i SET health = 'ok'
           FROM integration_state s
          WHERE s.integration_id = i.id AND i.deleted_at IS NULL AND i.health = 'failing' AND s.failing_since IS NULL
          RETURNING i.id, i.name, i.channel, ${OWNER} AS owner_id, 'Delivering again' AS detail`,
      ));
      await record(q, 'recovered', recovered);
    }
    return disabled.length + failing.length + unread.length + recovered.length;
  });
  if (n) wakeReaders(db);
  return n;
}

/**
 * An integration enabled again by `actor` (the caller's transaction, after the save): its health is
 * ok, its failing streak starts afresh, and a disable it had is recorded as over.
 */
export async function enabledAgain(q: Queryable, integrationId: string, actor: string): Promise<void> {
  await q.query('UPDATE integration_state SET failing_since = NULL WHERE integration_id = $1', [integrationId]);
  const { rows } = await q.query<Changed>(
    `UPDATE integrations i SET health = 'ok', disabled_reason = NULL, disabled_at = NULL
      WHERE i.id = $1 AND i.health = 'disabled'
      RETURNING i.id, i.name, i.channel, ${OWNER} AS owner_id, 'Enabled again by ' || $2 AS detail`,
    [integrationId, actor],
  );
  await record(q, 'enabled', rows);
}

export interface HealthEntry {
  at: Date;
  status: string;
  detail: string;
}

/** The latest changes of an integration's health, newest first. */
export async function healthLog(q: Queryable, integrationId: string, limit = 20): Promise<HealthEntry[]> {
  const { rows } = await q.query<HealthEntry>(
    'SELECT at, status, detail FROM integration_health WHERE integration_id = $1 ORDER BY at DESC, id DESC LIMIT $2',
    [integrationId, limit],
  );
  return rows;
}
