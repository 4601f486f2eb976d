// Dotted paths that customers give (`injectEventIdPath`, a Kafka key path, ...): API guide 1.
// A customer string that becomes a property name must never reach an object's prototype, so the
// segments that lead there are refused on input, and the walk below only ever follows own members.
import { badRequest } from './errors.js';

/** Names that lead to an object's prototype: never a customer-given member or path segment. */
export const FORBIDDEN_SEGMENTS: ReadonlySet<string> = new Set(['__proto__', 'prototype', 'constructor']);

/** Splits and checks a dotted path: 400 naming `field` for an empty or forbidden segment. */
export function parseDottedPath(path: string, field: string): string[] {
  const segments = path.split('.');
  for (const s of segments) {
    if (s === '') throw badRequest(`${field}: a dotted path has no empty segments`, field);
    if (FORBIDDEN_SEGMENTS.has(s)) throw badRequest(`${field}: the segment "${s}" is not allowed in a path`, field);
  }
  return segments;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Sets `value` at `segments` inside `root` (which it changes), creating objects on the way
 * (API guide 9). Only own members are followed and every member is defined as an own data property,
 * so even a forbidden segment stored by an older version cannot touch a prototype.
 */
export function setAtPath(root: Record<string, unknown>, segments: readonly string[], value: unknown): void {
  let cur = root;
  for (const [i, s] of segments.entries()) {
    if (i === segments.length - 1) {
      Object.defineProperty(cur, s, { value, enumerable: true, writable: true, configurable: true });
      return;
    }
    const next = Object.hasOwn(cur, s) ? cur[s] : undefined;
    if (isObject(next)) cur = next;
    else {
      const created: Record<string, unknown> = {};
      Object.defineProperty(cur, s, { value: created, enumerable: true, writable: true, configurable: true });
      cur = created;
    }
  }
}

/** Reads the value at `segments` following own members only (undefined when absent). */
export function getAtPath(root: unknown, segments: readonly string[]): unknown {
  let cur = root;
  for (const s of segments) {
    if (!isObject(cur) || !Object.hasOwn(cur, s)) return undefined;
    cur = cur[s];
  }
  return cur;
}
