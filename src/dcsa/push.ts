// DCSA events pushed (API guide 18, webhook format dcsa-tnt-3): a request's records, read again by
// id with the rules the Event Producer applies (sources.ts), as `{"events": [...]}` in the records'
// order. A record that makes no event (its asset has no equipment identity, a location thinned out,
// a sensor other than a door, a command that is not an acknowledged set point) is left out; a
// request none of whose records makes one is not sent (the webhook channel says so in its attempt).
import type { Db } from '../db/db.js';
import type { LogEvent } from '../eventlog/log.js';
import type { ObjectType } from '../eventlog/objects.js';
import { API_VERSION, type DcsaEvent, type Kind, type Party, toDcsaEvent } from './events.js';
import { KIND_DEFS, Params } from './sources.js';

const KIND_OF: Partial<Record<ObjectType, Kind>> = { reeferdata: 'MEAS', command: 'ADJU', location: 'LOC', sensordata: 'DOOR' };
/** Tables partitioned by record time: their rows are found within the batch's times, one partition or a few. */
const BY_TIME = new Set<Kind>(['MEAS', 'LOC', 'DOOR']);

interface Row {
  n: string;
  e: Date;
  u: Date;
  d: unknown;
  keep: boolean;
  equipment_reference: string;
  iso_equipment_code: string;
}

export function dcsaRenderer(db: Db, settings: { party: Party | null; thinSeconds: number }) {
  const render = async (events: LogEvent[]): Promise<string | null> => {
    const out: DcsaEvent[] = [];
    // A request holds one object type (the channel groups them); read each type's rows at once.
    const byKind = new Map<Kind, { id: string; time: string }[]>();
    for (const e of events) {
      const kind = KIND_OF[e.objectType];
      if (!kind) continue;
      const p = JSON.parse(e.payload) as { id?: unknown; whenCreated?: unknown; status?: unknown };
      if (kind === 'ADJU' && p.status !== 'ACKNOWLEDGED') continue;
      if (typeof p.id !== 'string' && typeof p.id !== 'number') continue;
      const list = byKind.get(kind) ?? [];
      list.push({ id: String(p.id), time: String(p.whenCreated) });
      byKind.set(kind, list);
    }
    for (const [kind, items] of byKind) {
      const k = KIND_DEFS[kind];
      const p = new Params();
      const conds = [
        `x.id = ANY(${p.add(items.map((i) => i.id))}::bigint[])`,
        k.where,
        'a.equipment_reference IS NOT NULL',
        'a.iso_equipment_code IS NOT NULL',
      ];
      const times = items.map((i) => Date.parse(i.time)).filter(Number.isFinite);
      if (BY_TIME.has(kind) && times.length === items.length) {
        conds.push(`x.when_created >= ${p.add(new Date(Math.min(...times)))}::timestamptz`);
        // The pushed whenCreated is to the second; the stored time may have its fraction.
        conds.push(`x.when_created < ${p.add(new Date(Math.max(...times) + 1000))}::timestamptz`);
      }
      const { rows } = await db.query<Row>(
        `SELECT x.id::text AS n, ${k.e} AS e, ${k.u} AS u, ${k.data} AS d, (${k.keep(p, settings.thinSeconds)}) AS keep,
                a.equipment_reference, a.iso_equipment_code
           FROM ${k.from} JOIN assets a ON a.id = x.asset_id
          WHERE ${conds.join(' AND ')}`,
        p.values,
      );
      const byId = new Map(rows.map((r) => [r.n, r]));
      for (const item of items) {
        const r = byId.get(item.id);
        if (!r?.keep) continue;
        const e = toDcsaEvent(
          {
            kind,
            id: r.n,
            equipmentReference: r.equipment_reference,
            isoEquipmentCode: r.iso_equipment_code,
            time: r.e,
            stored: r.u,
            data: r.d,
          },
          settings.party,
        );
        if (e) out.push(e);
      }
    }
    return out.length ? JSON.stringify({ events: out }) : null;
  };
  return { headers: { 'api-version': API_VERSION }, render };
}
