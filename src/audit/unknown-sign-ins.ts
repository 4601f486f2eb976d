// Failed sign-ins that name no existing user or client (API guide 14). Nobody signed in can make
// the audit log grow with them: per client address, kind (user or client) and window of
// AUDIT_UNKNOWN_SIGN_IN_WINDOW_SECONDS, one entry, whose `attempts` counts them and `lastAt` says
// when the last came. A name typed there is no user's, and may be a password typed into the wrong
// box: it is kept masked (maskedName). The open windows are this instance's (a bounded map, in the
// coordinator when it has several HTTP processes), so each instance writes its own entry for an
// address and window.
import type { Db } from '../db/db.js';

/** Open windows kept at most (addresses x kinds); past it, the oldest go first. */
const MAX_OPEN = 10_000;

/** A name that names nobody, as the audit log keeps it: its first character and its length (`p…(11)`). */
export function maskedName(name: string): string {
  const chars = [...name];
  return chars.length ? `${chars[0]}…(${chars.length})` : '';
}

export type UnknownKind = 'user' | 'client';

interface Window {
  id: Promise<string>;
  start: number;
  attempts: number;
}

/** Where a failed sign-in naming nobody is noted: an UnknownSignIns, here or in the instance's coordinator. */
export interface SignInFailures {
  failed(kind: UnknownKind, address: string | null, name: string, reason: string): Promise<void>;
}

export class UnknownSignIns implements SignInFailures {
  private readonly open = new Map<string, Window>();

  constructor(
    private readonly db: Db,
    private readonly windowSeconds: number,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Notes a failed sign-in naming no existing `kind` from `address`: a new entry (`name` masked),
   * or one more attempt on the window's entry.
   */
  async failed(kind: UnknownKind, address: string | null, name: string, reason: string): Promise<void> {
    const now = this.now();
    const key = `${kind}\n${address ?? ''}`;
    let w = this.open.get(key);
    if (w && w.start > now - this.windowSeconds * 1000) {
      const attempts = ++w.attempts;
      const id = await w.id;
      await this.db.query(
        `UPDATE audit_log SET changes = changes || jsonb_build_object('attempts', jsonb_build_object('to', GREATEST(COALESCE((changes->'attempts'->>'to')::int, 0), $2::int)),
           'lastAt', jsonb_build_object('to', $3::text)) WHERE id = $1::bigint`,
        [id, attempts, new Date(now).toISOString()],
      );
      return;
    }
    this.open.delete(key);
    if (this.open.size >= MAX_OPEN) this.evict(now);
    const field = kind === 'user' ? 'username' : 'clientId';
    const changes = {
      [field]: { to: maskedName(name) },
      reason: { to: reason },
      attempts: { to: 1 },
      lastAt: { to: new Date(now).toISOString() },
    };
    const id = this.db
      .query<{ id: string }>(
        `INSERT INTO audit_log (actor_type, actor_id, owner_id, address, action, resource_type, resource_id, changes)
         VALUES ($1, NULL, NULL, $2, 'signInFailed', $1, NULL, $3) RETURNING id::text AS id`,
        [kind, address, JSON.stringify(changes)],
      )
      .then((r) => r.rows[0]!.id);
    w = { id, start: now, attempts: 1 };
    this.open.set(key, w);
    try {
      await id;
    } catch (e) {
      if (this.open.get(key) === w) this.open.delete(key);
      throw e;
    }
  }

  /** Makes room: windows that are over go first, else the oldest tenth (a Map keeps insertion order). */
  private evict(now: number): void {
    for (const [k, v] of this.open) if (v.start <= now - this.windowSeconds * 1000) this.open.delete(k);
    let drop = this.open.size >= MAX_OPEN ? Math.ceil(MAX_OPEN / 10) : 0;
    for (const k of this.open.keys()) {
      if (drop-- <= 0) break;
      this.open.delete(k);
    }
  }
}
