// Where a request's reads go (API guide 16): the primary, or the streaming replica that the replica
// module (src/replica/) chose for this request. Lists, exports and reports read through readDb();
// everything else (writes, authentication, idempotency, reads inside a write) uses the primary.
import type { FastifyRequest } from 'fastify';
import type { Db } from './db.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by src/replica/ for a read it may serve from the replica; null: the primary. */
    reads: Db | null;
  }
}

/** The database a request's list, export or report reads: the replica when chosen, else `primary`. */
export const readDb = (req: FastifyRequest, primary: Db): Db => req.reads ?? primary;
