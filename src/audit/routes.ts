// GET /audit and /audit/{id} (API guide 14): the operator sees every entry, a customer those of
// the owners it sees (an entry without an owner is the operator's alone). Newest first by default,
// keyset paging on (at, id) like every list.
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { Db } from '../db/db.js';
import { filters } from '../http/filters.js';
import { DateTime, iso, Nullable, Uuid } from '../http/schemas.js';
import { readRoutes } from '../tenancy/read-routes.js';
import { ACTOR_TYPES, type ActorType, type Changes } from './audit.js';

const Change = Type.Object({ from: Type.Optional(Type.Unknown()), to: Type.Optional(Type.Unknown()) });

export const AuditEntry = Type.Object(
  {
    id: Type.String({ description: 'int64 as a decimal string' }),
    at: DateTime,
    actor: Type.Object({
      type: Type.Union(ACTOR_TYPES.map((t) => Type.Literal(t))),
      id: Nullable(Type.String()),
    }),
    ownerId: Nullable(Uuid),
    address: Nullable(Type.String()),
    action: Type.String({ description: 'create, update, delete, enable, disable, rotate, redeliver, test, signIn, signInFailed, signOut' }),
    resource: Type.Object({ type: Type.String(), id: Nullable(Type.String()) }),
    changes: Nullable(
      Type.Record(Type.String(), Change, {
        description: 'Each changed field (a dotted path into the resource) with from and to; secrets masked',
      }),
    ),
  },
  { title: 'AuditEntry' },
);

interface Row {
  id: string;
  at: Date;
  actor_type: ActorType;
  actor_id: string | null;
  owner_id: string | null;
  address: string | null;
  action: string;
  resource_type: string;
  resource_id: string | null;
  changes: Changes | null;
}

const toApi = (r: Row) => ({
  id: String(r.id),
  at: iso(r.at)!,
  actor: { type: r.actor_type, id: r.actor_id },
  ownerId: r.owner_id,
  address: r.address,
  action: r.action,
  resource: { type: r.resource_type, id: r.resource_id },
  changes: r.changes,
});

export const auditRoutes: FastifyPluginAsync<{ db: Db }> = async (app, { db }) => {
  readRoutes(app, db, {
    path: '/audit',
    tags: ['audit'],
    what: 'audit entry',
    listSummary: 'List audit entries (who changed what), newest first by default; from and to bound `at`',
    item: AuditEntry,
    toApi,
    select: 'id::text AS id, at, actor_type, actor_id, owner_id, address, action, resource_type, resource_id, changes',
    from: 'audit_log',
    ownerColumn: 'owner_id',
    idType: 'int8',
    timeColumn: 'at',
    defaultOrder: 'desc',
    filters: {
      ownerId: filters.uuid('owner_id'),
      action: filters.equals('action', Type.String({ maxLength: 64 })),
      resourceType: filters.equals('resource_type', Type.String({ maxLength: 64 })),
    },
  });
};
