// Who may see and change an integration (API guide 9). An operator sees and changes all. A customer's
// credential sees the integrations whose owners all lie within the owners it sees (`read` is enough,
// names and attempts included), and with `write` creates integrations for those owners and changes,
// deletes, rotates, tests and redelivers the ones a credential of an owner it sees made
// (`managedBy: customer`); the operator's stay read-only to it (403). Anything it does not see is a 404,
// as for every owned resource. Customer-made integrations are capped per top-level owner and paced
// under the operator's ceilings.
import type { Config } from '../../config.js';
import type { Queryable } from '../../db/db.js';
import { ApiError, badRequest, forbidden, notFound } from '../../http/errors.js';
import { TOP_TREE_SQL, type Tenancy } from '../../tenancy/tenancy.js';
import type { Row } from './model.js';
import { type Composed, getRow } from './store.js';

/** The row if the caller sees the integration (all of its owners), else 404. */
export async function visibleRow(q: Queryable, t: Tenancy, id: string, forUpdate = false): Promise<Row> {
  const row = await getRow(q, id, forUpdate);
  if (t.isAdmin) return row;
  const visible = await t.visibleOwners(q);
  if (visible === 'all' || row.owner_ids.every((o) => visible.includes(o))) return row;
  throw notFound('integration');
}

/** The row, locked, if the caller may change the integration: 404 unless seen, 403 when the operator's. */
export async function manageableRow(q: Queryable, t: Tenancy, id: string): Promise<Row> {
  const row = await visibleRow(q, t, id, true);
  if (t.isAdmin) return row;
  if (row.managed_by !== 'customer' || row.creator_owner_id === null || !(await t.sees(row.creator_owner_id, q))) {
    throw forbidden('This integration is managed by the operator: customers may read it, not change it.');
  }
  return row;
}

type Limits = Pick<
  Config,
  'CUSTOMER_MAX_INTEGRATIONS' | 'CUSTOMER_MAX_ITEMS_PER_MINUTE' | 'CUSTOMER_MAX_CONCURRENT_REQUESTS' | 'EMAIL_MAX_MESSAGES_PER_HOUR'
>;

/**
 * A customer's save within the operator's ceilings: the pace (no maxItemsPerMinute means the
 * ceiling) and, on a create, the number of integrations its top-level owner's tree may have (counted
 * under a lock on that tree, so two creates at once cannot both take the last place).
 */
export async function withinCustomerLimits(q: Queryable, t: Tenancy, limits: Limits, v: Composed, creating: boolean): Promise<void> {
  if (t.isAdmin) return;
  const key = v.channel;
  const s = v.settings;
  if (key === 'email') {
    if ((s.maxMessagesPerHour as number) > limits.EMAIL_MAX_MESSAGES_PER_HOUR) {
      throw badRequest(
        `/email/maxMessagesPerHour: at most ${limits.EMAIL_MAX_MESSAGES_PER_HOUR} for a customer's integration (EMAIL_MAX_MESSAGES_PER_HOUR)`,
        '/email/maxMessagesPerHour',
      );
    }
  } else if (s.maxItemsPerMinute === null || s.maxItemsPerMinute === undefined) s.maxItemsPerMinute = limits.CUSTOMER_MAX_ITEMS_PER_MINUTE;
  if ((s.maxItemsPerMinute as number) > limits.CUSTOMER_MAX_ITEMS_PER_MINUTE) {
    throw badRequest(
      `/${key}/maxItemsPerMinute: at most ${limits.CUSTOMER_MAX_ITEMS_PER_MINUTE} for a customer's integration`,
      `/${key}/maxItemsPerMinute`,
    );
  }
  if (key !== 'email' && (s.maxConcurrentRequests as number) > limits.CUSTOMER_MAX_CONCURRENT_REQUESTS) {
    throw badRequest(
      `/${key}/maxConcurrentRequests: at most ${limits.CUSTOMER_MAX_CONCURRENT_REQUESTS} for a customer's integration`,
      `/${key}/maxConcurrentRequests`,
    );
  }
  if (!creating) return;
  await q.query(
    `${TOP_TREE_SQL} SELECT pg_advisory_xact_lock(hashtext('customer-integrations:' || id::text)) FROM up WHERE parent_id IS NULL`,
    [t.principal.ownerId],
  );
  const { rows } = await q.query<{ n: number }>(
    `${TOP_TREE_SQL} SELECT count(*)::int AS n FROM integrations
      WHERE deleted_at IS NULL AND managed_by = 'customer' AND creator_owner_id IN (SELECT id FROM tree)`,
    [t.principal.ownerId],
  );
  if (rows[0]!.n >= limits.CUSTOMER_MAX_INTEGRATIONS) {
    throw new ApiError(
      'CONFLICT',
      `Your organisation has ${rows[0]!.n} integrations, the most it may have (CUSTOMER_MAX_INTEGRATIONS ${limits.CUSTOMER_MAX_INTEGRATIONS}); delete one first.`,
    );
  }
}

/**
 * The owner an integration's audit entries belong to: the customer's owner that made it, else its
 * only owner; an operator's integration over several owners is the operator's alone.
 */
export const auditOwner = (r: Pick<Row, 'creator_owner_id' | 'owner_ids'>): string | null =>
  r.creator_owner_id ?? (r.owner_ids.length === 1 ? r.owner_ids[0]! : null);
