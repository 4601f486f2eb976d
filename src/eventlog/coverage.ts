// Which integrations an event from the topic is for: the JavaScript twin of the queue's COVERED and
// AFTER_START (log.ts), decided against the integrations read after the event arrived (relay-sql.ts
// says why that is exact).
import type { Coverage } from './relay-sql.js';

/** An event as the relay publishes it (its headers), with its payload as stored. */
export interface TopicEvent {
  id: string;
  tx: bigint;
  eventId: string;
  objectType: string;
  objectId: string;
  ownerPath: string[];
  whenCreated: Date;
  payload: string;
}

/** jsonb's containment (`a @> b`): objects by their members, arrays by each element, scalars equal. */
export function jsonContains(a: unknown, b: unknown): boolean {
  if (Array.isArray(a)) {
    if (Array.isArray(b)) return b.every((x) => a.some((y) => jsonContains(y, x)));
    return false;
  }
  if (a !== null && typeof a === 'object') {
    if (b === null || typeof b !== 'object' || Array.isArray(b)) return false;
    const o = a as Record<string, unknown>;
    return Object.entries(b as Record<string, unknown>).every(([k, v]) => Object.hasOwn(o, k) && jsonContains(o[k], v));
  }
  return a === b;
}

/**
 * True when `c` covers `e`: its type, an owner of the event's ancestry when stored, each filtered
 * member's value among the allowed ones (a member the object lacks counts as null), and stored by
 * a transaction the integration had not seen committed when it was created.
 */
export function covers(c: Coverage, e: TopicEvent, parsed: () => Record<string, unknown>): boolean {
  if (!c.objectTypes.includes(e.objectType)) return false;
  if (!e.ownerPath.some((o) => c.ownerIds.includes(o))) return false;
  if (!(e.tx >= c.startXmax || c.startXip.has(e.tx))) return false;
  const filter = c.typeFilters?.[e.objectType];
  if (filter) {
    const obj = parsed();
    for (const [field, allowed] of Object.entries(filter)) {
      const v = Object.hasOwn(obj, field) ? obj[field] : null;
      if (!Array.isArray(allowed) || !allowed.some((a) => jsonContains(a, v))) return false;
    }
  }
  return true;
}

/** The owner path as the relay sends it (PostgreSQL's array text: {a,b,c}). */
export function parseOwnerPath(text: string): string[] {
  const inner = text.replace(/^\{|\}$/g, '');
  return inner ? inner.split(',') : [];
}
