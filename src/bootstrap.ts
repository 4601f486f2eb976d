// First start with an empty database (API guide 11): create the operator owner,
// client and user from configuration, or generate the secrets and hand them back to print once.
// Several instances starting together: a transaction-level advisory lock lets one of them do it.
import type { Config } from './config.js';
import type { Db, Queryable } from './db/db.js';
import { randomSecret } from './auth/crypto.js';
import { createClient, createUser, ensurePublicClient } from './auth/credentials.js';
import { createOwner } from './owners/owners.js';

const BOOTSTRAP_LOCK_KEY = 7_301_946_212;

export interface BootstrapResult {
  ownerId: string;
  clientId: string;
  clientSecret?: string; // only when generated
  username: string;
  password?: string; // only when generated
}

/** The dashboard's public client (authorization code with PKCE; API guide 2 and 12). */
export const DASHBOARD_CLIENT_ID = 'dashboard';

/**
 * The dashboard signs users in with the authorization code flow and PKCE as this public client:
 * no secret, redirects only to /dashboard/ of the service itself, the user's own scopes. Made on
 * every start when missing (an operator may have deleted it).
 */
const ensureDashboardClient = (q: Queryable, ownerId: string) =>
  ensurePublicClient(q, { clientId: DASHBOARD_CLIENT_ID, name: 'Dashboard (public, PKCE)', ownerId, redirectPaths: ['/dashboard/'] });

export async function bootstrap(db: Db, cfg: Config): Promise<BootstrapResult | null> {
  return db.tx(async (q) => {
    await q.query('SELECT pg_advisory_xact_lock($1)', [BOOTSTRAP_LOCK_KEY]);
    const done = await q.query<{ value: { ownerId: string } }>("SELECT value FROM service_state WHERE name = 'bootstrap'");
    if (done.rows.length) {
      await ensureDashboardClient(q, done.rows[0]!.value.ownerId);
      return null;
    }
    const clientSecret = cfg.BOOTSTRAP_CLIENT_SECRET ?? randomSecret('', 24);
    const password = cfg.BOOTSTRAP_PASSWORD ?? randomSecret('', 18);
    const result: BootstrapResult = {
      ownerId: await createOwner(q, { name: cfg.BOOTSTRAP_OWNER_NAME, note: 'Operator (created on first start)' }),
      clientId: cfg.BOOTSTRAP_CLIENT_ID ?? 'tracking-cli',
      username: cfg.BOOTSTRAP_USERNAME ?? 'operator',
    };
    await createClient(q, {
      clientId: result.clientId,
      secret: clientSecret,
      name: 'Operator client',
      grants: ['password', 'refresh_token', 'client_credentials'],
      ownerId: result.ownerId,
      scopes: ['read', 'write', 'admin'],
    });
    await createUser(
      q,
      { username: result.username, password, ownerId: result.ownerId, scopes: ['read', 'write', 'admin'] },
      cfg.PASSWORD_HASH_COST,
    );
    await ensureDashboardClient(q, result.ownerId);
    await q.query("INSERT INTO service_state (name, value) VALUES ('bootstrap', $1)", [
      JSON.stringify({ ownerId: result.ownerId, at: new Date().toISOString() }),
    ]);
    if (!cfg.BOOTSTRAP_CLIENT_SECRET) result.clientSecret = clientSecret;
    if (!cfg.BOOTSTRAP_PASSWORD) result.password = password;
    return result;
  });
}
