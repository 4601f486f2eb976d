// The Event Producer's pages (API guide 18): the events of the caller's equipment that the filters
// leave, in a fixed order (asset id, kind, record time, id) the standard leaves open, with a cursor
// that says where the next page starts. A page examines at most DCSA_PAGE_ROWS (BOUNDS.dcsaPageRows)
// rows of records, however sparse the matching events are: past that it ends early, shorter, with a
// cursor. Its work grows with what it reads, never with the tenant's whole history.
import crypto from 'node:crypto';
import { BOUNDS } from '../bounds.js';
import type { Queryable } from '../db/db.js';
import { badRequest } from '../http/errors.js';
import type { Tenancy } from '../tenancy/tenancy.js';
import { type DcsaEvent, type EventType, KIND_TYPE, KINDS, type Party, toDcsaEvent } from './events.js';
import { Params, type RowFilters, type ScanRow, scanSql } from './sources.js';

export interface EventQuery {
  equipmentReference?: string;
  carrierBookingReference?: string;
  transportDocumentReference?: string;
  eventTypes?: EventType[];
  updatedMin?: Date;
  updatedMax?: Date;
  limit: number;
}

/** Where a page starts: an asset, a kind of it, after a row (t, n) of that kind. */
interface Cursor {
  a: string;
  k: number;
  t?: string;
  n?: string;
  /** The filters the cursor was made for: a cursor is good only with them. */
  h: string;
}

const ASSET_BATCH = 100;
/** Rows one kind's scan of one asset reads at most, before the page's budget is checked again. */
const SCAN_ROWS = 500;

const filterHash = (q: EventQuery) =>
  crypto
    .createHash('sha256')
    .update(
      JSON.stringify([
        q.equipmentReference,
        q.carrierBookingReference,
        q.transportDocumentReference,
        q.eventTypes,
        q.updatedMin?.toISOString(),
        q.updatedMax?.toISOString(),
      ]),
    )
    .digest('base64url')
    .slice(0, 16);

export function encodeCursor(c: Cursor): string {
  return Buffer.from(JSON.stringify(c)).toString('base64url');
}

export function decodeCursor(text: string, q: EventQuery): Cursor {
  let c: Cursor;
  try {
    c = JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as Cursor;
  } catch {
    throw badRequest('cursor: not a cursor this service made; use the Next-Page-Cursor header as it came', '/cursor');
  }
  const ok =
    c &&
    typeof c.a === 'string' &&
    /^[0-9a-f-]{36}$/.test(c.a) &&
    Number.isInteger(c.k) &&
    c.k >= 0 &&
    c.k < KINDS.length &&
    (c.t === undefined || (typeof c.t === 'string' && /^[0-9 :.+-]{19,40}$/.test(c.t))) &&
    (c.n === undefined || (typeof c.n === 'string' && /^\d{1,19}$/.test(c.n)));
  if (!ok) throw badRequest('cursor: not a cursor this service made; use the Next-Page-Cursor header as it came', '/cursor');
  if (c.h !== filterHash(q))
    throw badRequest("cursor: it was made for other filters; send the first page's filters with it, unchanged", '/cursor');
  return c;
}

interface Equipment {
  id: string;
  equipment_reference: string;
  iso_equipment_code: string;
  /** With a booking filter: the time ranges its records must fall in. */
  windows?: { from: Date; to: Date }[];
}

/**
 * The next assets (by id, from `from` on) whose events the filters can reach; with a booking filter,
 * each with its windows: the time ranges of its links to the bookings asked for.
 */
async function nextAssets(q: Queryable, t: Tenancy, query: EventQuery, from: string | undefined, inclusive: boolean): Promise<Equipment[]> {
  const p = new Params();
  const conds = [await t.where('a.owner_id', p.values, q), 'a.equipment_reference IS NOT NULL', 'a.iso_equipment_code IS NOT NULL'];
  if (query.equipmentReference) conds.push(`a.equipment_reference = ${p.add(query.equipmentReference)}`);
  if (from) conds.push(`a.id ${inclusive ? '>=' : '>'} ${p.add(from, '::uuid')}`);
  const booked = query.carrierBookingReference !== undefined || query.transportDocumentReference !== undefined;
  let links = '';
  if (booked) {
    const on = [await t.where('b.owner_id', p.values, q)];
    if (query.carrierBookingReference !== undefined) on.push(`b.carrier_booking_reference = ${p.add(query.carrierBookingReference)}`);
    if (query.transportDocumentReference !== undefined)
      on.push(`b.transport_document_reference = ${p.add(query.transportDocumentReference)}`);
    links = `JOIN booking_assets ba ON ba.asset_id = a.id JOIN booking_data b ON b.id = ba.booking_id AND ${on.join(' AND ')}`;
  }
  const { rows } = await q.query<Equipment & { w?: { f: string; t: string }[] }>(
    `SELECT a.id, a.equipment_reference, a.iso_equipment_code${booked ? `, json_agg(json_build_object('f', ba.valid_from, 't', ba.valid_to)) AS w` : ''}
       FROM assets a ${links} WHERE ${conds.join(' AND ')}${booked ? ' GROUP BY a.id' : ''} ORDER BY a.id LIMIT ${ASSET_BATCH}`,
    p.values,
  );
  return rows.map(({ w, ...a }) => (w ? { ...a, windows: w.map((x) => ({ from: new Date(x.f), to: new Date(x.t) })) } : a));
}

export interface Page {
  events: DcsaEvent[];
  next: string | null;
}

/**
 * One page. `settings`: the publisher party and the locations' thinning interval. Walks the
 * assets in id order and, for each, the kinds asked for, reading each kind's rows in time order,
 * until the page is full (then looks one event further, to know whether there is a next page) or
 * its budget of rows is spent.
 */
export async function eventPage(
  q: Queryable,
  t: Tenancy,
  query: EventQuery,
  cursorText: string | undefined,
  settings: { party: Party | null; thinSeconds: number },
): Promise<Page> {
  const hash = filterHash(query);
  const start = cursorText ? decodeCursor(cursorText, query) : undefined;
  const kinds = KINDS.map((k, i) => ({ k, i })).filter(({ k }) => !query.eventTypes || query.eventTypes.includes(KIND_TYPE[k]));
  const events: DcsaEvent[] = [];
  if (!kinds.length) return { events, next: null };
  let budget = BOUNDS.dcsaPageRows.value;
  const owners = await t.visibleOwners(q);
  let last: Cursor | null = null; // just after the last event emitted
  let assetFrom = start?.a;
  let inclusive = true;
  for (;;) {
    const assets = await nextAssets(q, t, query, assetFrom, inclusive);
    for (const a of assets) {
      const resume = start && a.id === start.a ? start : undefined;
      const todo = kinds.filter(({ i }) => !resume || i >= resume.k);
      if (!todo.length) continue;
      const scan = SCAN_ROWS;
      // The budget is spent: everything before this asset's next kind is done; the next page starts there.
      if (budget < scan * todo.length)
        return { events, next: encodeCursor({ a: a.id, k: todo[0]!.i, h: hash, ...after(resume, todo[0]!.i) }) };
      budget -= scan * todo.length;
      const filters: RowFilters = {
        owners,
        updatedMin: query.updatedMin,
        updatedMax: query.updatedMax,
        windows: a.windows,
      };
      const p = new Params();
      const parts = todo.map(({ k, i }) =>
        scanSql(p, k, a.id, filters, {
          after: resume && i === resume.k && resume.t && resume.n ? { t: resume.t, n: resume.n } : undefined,
          scan,
          keepMax: query.limit - events.length,
          thinSeconds: settings.thinSeconds,
        }),
      );
      const { rows } = await q.query<ScanRow>(parts.join(' UNION ALL '), p.values);
      for (const { k, i } of todo) {
        const mine = rows.filter((x) => x.kind === k).sort((x, y) => x.rn - y.rn);
        for (const r of mine) {
          if (r.keep) {
            const e = toDcsaEvent(
              {
                kind: k,
                id: r.n,
                equipmentReference: a.equipment_reference,
                isoEquipmentCode: a.iso_equipment_code,
                time: r.e,
                stored: r.u,
                data: r.d,
              },
              settings.party,
            );
            if (e) {
              // One event past a full page: there is a next page, from just after the page's last event.
              if (events.length >= query.limit) return { events, next: encodeCursor(last!) };
              events.push(e);
              last = { a: a.id, k: i, t: r.t, n: r.n, h: hash };
            }
          }
          // The scan stopped here with more rows unread: the page ends, the next one reads on from here.
          if (r.last) return { events, next: encodeCursor({ a: a.id, k: i, t: r.t, n: r.n, h: hash }) };
        }
      }
    }
    if (assets.length < ASSET_BATCH) return { events, next: null };
    assetFrom = assets[assets.length - 1]!.id;
    inclusive = false;
  }
}

/** The position inside kind `k` a resumed asset starts from (its cursor's, when it is that kind). */
function after(resume: Cursor | undefined, k: number): { t?: string; n?: string } {
  return resume && resume.k === k && resume.t ? { t: resume.t, n: resume.n } : {};
}
