// Tenancy (API guide 3), enforced in this one place: every query that reads or writes owned
// records takes its owner filter from a Tenancy. A caller sees its own owner and every descendant;
// an operator (admin scope) sees every owner. Records outside that set answer 404, never 403.
import type { Db, Queryable } from '../db/db.js';
import { ApiError, notFound } from '../http/errors.js';

/** What a credential may do (API guide 2): read, write, and admin (an operator sees every owner). */
export const SCOPES = ['read', 'write', 'admin'] as const;
export type Scope = (typeof SCOPES)[number];
export const isScope = (s: unknown): s is Scope => (SCOPES as readonly unknown[]).includes(s);

declare module 'fastify' {
  interface FastifyRequest {
    /** What the caller may see: set by authentication (auth/authenticate.ts) on every /api/v1 route. */
    tenancy: Tenancy;
  }
}

export interface Principal {
  /** Key for rate limits and idempotency: one per API key, or per client+subject of a JWT. */
  credential: string;
  ownerId: string;
  scopes: Scope[];
  /** Who acts, for whoCreated / createdBy: "user:<id>", "client:<id>", "apikey:<id>", "external:<sub>". */
  actor: string;
  /**
   * The owners it sees (its owner and every descendant), when the credential's own lookup read
   * them already (an API key's, ownerTreeSql): one statement less per request.
   */
  visibleOwners?: string[];
}

/**
 * A recursive CTE `tree(id)`: the owners `roots` (a query of owner ids) and every descendant of
 * them, which is what a credential of such an owner sees. For a WITH RECURSIVE.
 */
export const ownerTreeSql = (roots: string) => `tree(id) AS (
    SELECT o.id FROM owners o WHERE o.id IN (${roots})
    UNION
    SELECT o.id FROM owners o JOIN tree ON o.parent_id = tree.id
  )`;

/**
 * Recursive CTEs over owner `$1`: `up(id, parent_id, depth)`, it and its owners up to the
 * top-level one (`WHERE parent_id IS NULL` picks that one), and `tree(id)`, the top-level owner and
 * every owner below it: the organisation a per-tree limit or uniqueness counts over. Starts a WITH.
 */
export const TOP_TREE_SQL = `WITH RECURSIVE up(id, parent_id, depth) AS (
       SELECT id, parent_id, 0 FROM owners WHERE id = $1::uuid
       UNION ALL
       SELECT o.id, o.parent_id, up.depth + 1 FROM owners o JOIN up ON o.id = up.parent_id WHERE up.depth < 100
     ), tree(id) AS (SELECT id FROM up WHERE parent_id IS NULL UNION ALL SELECT o.id FROM owners o JOIN tree ON o.parent_id = tree.id)`;

const VISIBLE_OWNERS_SQL = `WITH RECURSIVE ${ownerTreeSql('$1::uuid')} SELECT id FROM tree`;

export class Tenancy {
  private visible?: Promise<string[] | 'all'>;

  constructor(
    private readonly db: Db,
    readonly principal: Principal,
    /** The client's address (the request's ip), for the audit log. */
    readonly address: string | null = null,
  ) {}

  get isAdmin(): boolean {
    return this.principal.scopes.includes('admin');
  }

  has(scope: Scope): boolean {
    return this.principal.scopes.includes(scope);
  }

  /**
   * The ids of every owner this caller sees, once per request ('all' for an operator).
   * Inside a transaction pass its `q`: PGlite has one connection, which the transaction holds.
   */
  visibleOwners(q: Queryable = this.db): Promise<string[] | 'all'> {
    this.visible ??= (async () => {
      if (this.isAdmin) return 'all' as const;
      const ids =
        this.principal.visibleOwners ?? (await q.query<{ id: string }>(VISIBLE_OWNERS_SQL, [this.principal.ownerId])).rows.map((r) => r.id);
      if (ids.length === 0) throw new ApiError('UNAUTHENTICATED', 'The owner of this credential no longer exists.');
      return ids;
    })();
    return this.visible;
  }

  /**
   * The SQL condition restricting `column` (an owner id column) to what the caller sees.
   * Pushes its parameter onto params; use inside any query on owned rows.
   */
  async where(column: string, params: unknown[], q: Queryable = this.db): Promise<string> {
    const visible = await this.visibleOwners(q);
    if (visible === 'all') return 'TRUE';
    params.push(visible);
    return `${column} = ANY($${params.length}::uuid[])`;
  }

  async sees(ownerId: string, q: Queryable = this.db): Promise<boolean> {
    const visible = await this.visibleOwners(q);
    if (visible !== 'all') return visible.includes(ownerId);
    const { rows } = await q.query('SELECT 1 FROM owners WHERE id = $1', [ownerId]);
    return rows.length > 0;
  }

  /** 404 unless the owner exists and is visible (existence does not leak). */
  async assertOwner(ownerId: string, field = '/ownerId', q: Queryable = this.db): Promise<void> {
    if (!(await this.sees(ownerId, q))) throw new ApiError('NOT_FOUND', `owner ${ownerId} not found`, { field });
  }

  /** The owner a new record goes to: the one named (404 unless visible), else the caller's own. */
  async ownerFor(ownerId: string | undefined, q: Queryable = this.db): Promise<string> {
    const id = ownerId ?? this.principal.ownerId;
    await this.assertOwner(id, '/ownerId', q);
    return id;
  }

  /**
   * Fetches one owned row by id with the tenancy filter applied, or 404.
   * `forUpdate` locks it for the rest of the transaction `q`.
   */
  async one<R>(
    q: Queryable,
    sql: { select: string; from: string; ownerColumn: string; idColumn?: string; idType?: string },
    id: string,
    what: string,
    forUpdate = false,
  ): Promise<R> {
    const params: unknown[] = [id];
    const cond = await this.where(sql.ownerColumn, params, q);
    const { rows } = await q.query<R>(
      `SELECT ${sql.select} FROM ${sql.from} WHERE ${sql.idColumn ?? 'id'} = $1::${sql.idType ?? 'uuid'} AND ${cond}${forUpdate ? ' FOR UPDATE' : ''}`,
      params,
    );
    const row = rows[0];
    if (!row) throw notFound(what);
    return row;
  }
}
