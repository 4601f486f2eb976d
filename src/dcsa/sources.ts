// Where DCSA events come from (API guide 18): one SQL scan per kind of event and asset, each
// through the index its table already has on (asset_id, when_created, id) (commands: on
// (asset_id, status, when_created)), so a page costs what it reads whoever else stores what.
//
// A scan reads at most `scan` rows past its cursor in that order and says which of them make an
// event (`keep`): a row it read but dropped (a temperature sensor, a location thinned out, a record
// outside the updated-time or booking filters) still moves the cursor, so a page's work is bounded
// however sparse the events are. The last row read comes back too (`last`), for the cursor.
//
// The push side (push.ts) reads the same rows by id with the same rules.
import type { Kind } from './events.js';

/** Builds `$n` placeholders over one parameter list. */
export class Params {
  readonly values: unknown[] = [];
  add(v: unknown, cast = ''): string {
    this.values.push(v);
    return `$${this.values.length}${cast}`;
  }
}

/** One kind's table and columns: `t` orders the scan, `e` is the event's time, `u` when it was stored. */
interface KindDef {
  from: string;
  /** Rows of the asset that can make an event of this kind. */
  where: string;
  t: string;
  e: string;
  u: string;
  data: string;
  /** Whether a row makes an event by itself (before the request's filters); `p`: Params, for settings. */
  keep(p: Params, thinSeconds: number): string;
}

export const KIND_DEFS: Record<Kind, KindDef> = {
  MEAS: {
    from: 'reefer_data x',
    where: 'TRUE',
    t: 'x.when_created',
    e: 'x.when_created',
    u: 'x.when_received',
    data: 'x.data',
    keep: () => 'TRUE',
  },
  ADJU: {
    from: 'commands x',
    where: `x.status = 'ACKNOWLEDGED'`,
    t: 'x.when_created',
    e: 'x.when_updated',
    u: 'x.when_updated',
    data: `jsonb_build_object('type', x.type, 'parameters', x.parameters)`,
    keep: () => `x.type IN ('SET_TEMPERATURE', 'SET_HUMIDITY', 'SET_CO2', 'SET_O2')`,
  },
  // Thinned: of an asset's locations in one interval of GPS time (DCSA_LOC_INTERVAL_MINUTES,
  // aligned to the epoch), the first stored (lowest id) is the event; a later one, even an earlier
  // fix that arrives late, makes none, so an event once produced stays produced.
  LOC: {
    from: 'locations x',
    where: 'TRUE',
    t: 'x.when_created',
    e: 'x.when_created',
    u: 'x.when_received',
    data: `jsonb_build_object('latitude', x.latitude, 'longitude', x.longitude)`,
    keep: (p, thin) => {
      const s = p.add(thin, '::float8');
      return `NOT EXISTS (SELECT 1 FROM locations l2 WHERE l2.asset_id = x.asset_id
          AND l2.when_created >= to_timestamp(floor(extract(epoch FROM x.when_created) / ${s}) * ${s})
          AND l2.when_created < to_timestamp((floor(extract(epoch FROM x.when_created) / ${s}) + 1) * ${s})
          AND l2.id < x.id)`;
    },
  },
  // A door sensor: sensor data whose sensorType is DOOR, its value OPEN or CLOSED (also 1/0, true/false).
  DOOR: {
    from: 'sensor_data x',
    where: 'TRUE',
    t: 'x.when_created',
    e: 'x.when_created',
    u: 'x.when_received',
    data: `jsonb_build_object('value', COALESCE(x.value_text, x.value_number::text))`,
    keep: () => `upper(x.sensor_type) = 'DOOR'
        AND upper(trim(COALESCE(x.value_text, x.value_number::text))) IN ('OPEN', 'OPENED', '1', 'TRUE', 'CLOSED', 'CLOSE', '0', 'FALSE')`,
  },
};

/** What a scan keeps besides its kind's own rule: the request's filters. */
export interface RowFilters {
  /** The owners whose records the caller sees (records keep the owner they were stored for); 'all': an operator. */
  owners: string[] | 'all';
  updatedMin?: Date;
  updatedMax?: Date;
  /** Booking windows of the asset ([from, to) of its links to the bookings asked for); undefined: any time. */
  windows?: { from: Date; to: Date }[];
}

/** A position in one asset's scan of one kind: after (t, n). */
export interface ScanFrom {
  t: string;
  n: string;
}

/** The columns each scan returns. */
export interface ScanRow {
  kind: Kind;
  /** The scan's order column as PostgreSQL writes it (microseconds and offset): fed back as it is in a cursor. */
  t: string;
  /** Its place in the scan. */
  rn: number;
  n: string;
  e: Date;
  u: Date;
  d: unknown;
  keep: boolean;
  /** The last row the scan read (it may be kept too). */
  last: boolean;
}

/**
 * One kind's scan of one asset as a subquery of a UNION ALL: at most `scan` rows after `after`,
 * the kept ones (at most `keepMax`) and the last one read.
 */
export function scanSql(
  p: Params,
  kind: Kind,
  assetId: string,
  f: RowFilters,
  opts: { after?: ScanFrom; scan: number; keepMax: number; thinSeconds: number },
): string {
  const k = KIND_DEFS[kind];
  const asset = p.add(assetId, '::uuid');
  const conds = [`x.asset_id = ${asset}`, k.where];
  if (opts.after) conds.push(`(${k.t}, x.id) > (${p.add(opts.after.t, '::timestamptz')}, ${p.add(opts.after.n, '::bigint')})`);
  // The booking windows bound the scan itself where the scan is in event time.
  if (f.windows && k.t === k.e && f.windows.length) {
    conds.push(`${k.t} >= ${p.add(new Date(Math.min(...f.windows.map((w) => w.from.getTime()))))}::timestamptz`);
    conds.push(`${k.t} < ${p.add(new Date(Math.max(...f.windows.map((w) => w.to.getTime()))))}::timestamptz`);
  }
  const keep = [`y.k`];
  if (f.owners !== 'all') keep.push(`y.ow = ANY(${p.add(f.owners, '::uuid[]')})`);
  if (f.updatedMin) keep.push(`y.u >= ${p.add(f.updatedMin)}::timestamptz`);
  if (f.updatedMax) keep.push(`y.u <= ${p.add(f.updatedMax)}::timestamptz`);
  if (f.windows) {
    const froms = p.add(
      f.windows.map((w) => w.from),
      '::timestamptz[]',
    );
    const tos = p.add(
      f.windows.map((w) => w.to),
      '::timestamptz[]',
    );
    keep.push(`EXISTS (SELECT 1 FROM unnest(${froms}, ${tos}) w(f, t) WHERE y.e >= w.f AND y.e < w.t)`);
  }
  const scan = p.add(opts.scan, '::int');
  return `(SELECT '${kind}' AS kind, z.t::text AS t, z.n, z.e, z.u, z.d, z.keep, z.rn::int AS rn, z.rn = ${scan} AS last FROM (
      SELECT y.*, (${keep.join(' AND ')}) AS keep, row_number() OVER (ORDER BY y.t, y.o) AS rn FROM (
        SELECT ${k.t} AS t, x.id AS o, x.id::text AS n, x.owner_id AS ow, ${k.e} AS e, ${k.u} AS u, ${k.data} AS d, (${k.keep(p, opts.thinSeconds)}) AS k
        FROM ${k.from} WHERE ${conds.join(' AND ')}
        ORDER BY ${k.t}, x.id LIMIT ${scan}) y) z
    WHERE z.keep OR z.rn = ${scan}
    ORDER BY z.t, z.o LIMIT ${p.add(opts.keepMax + 1, '::int')})`;
}
