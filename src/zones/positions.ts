// Storing locations (API guide 8): a location without zoneId gets the ascending ids of its
// owner's zones that contain it (as many as fit in 100 characters); a location newer than the
// asset's latest one goes through the zone rules (alerts/visits.ts: visits, Entered and Left events
// after enterAfterSeconds / leaveAfterSeconds, dwell alerts); late records never do.
// While the owner has zones, the asset is locked (Db.serialized) from reading the position to the
// commit of the store's statement, so concurrent stores for one asset see each other's positions in order.
// Plugged into the records module as a hook (registered by the app).
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { Db, Queryable } from '../db/db.js';
import { WriteStatement } from '../db/statement.js';
import { AssetVisits, openVisits, saveVisits, ZONE_RULE_COLUMNS, type ZoneRule, type ZoneRuleRow, zoneRule } from '../alerts/visits.js';
import type { OwnerPaths } from '../eventlog/log.js';
import { applyFilters, filters, listQuery } from '../http/filters.js';
import { listPage } from '../http/paging.js';
import type { More, PreparedItem, RecordHook, StoredItem } from '../records/hooks.js';
import { locations, round } from '../records/records.js';
import type { Circle } from './geo.js';
import { ZoneMatcher } from './matcher.js';
import { Slices } from './slices.js';
import { BOUNDS } from '../bounds.js';

interface ZoneRow extends ZoneRuleRow {
  /** As text: parsed by the matcher, in its slices, and only for zones whose box a location is in. */
  geometry: string | null;
  circle: Circle | null;
  min_lat: number | null;
  max_lat: number | null;
  min_lon: number | null;
  max_lon: number | null;
}

interface LocationLike {
  latitude: number;
  longitude: number;
  zoneId?: string | null;
}

/** Ascending zone ids joined by commas, as many as fit in `max` characters. */
export function zoneIdText(ids: string[], max = 100): string | null {
  let out = '';
  for (const id of [...ids].sort(byDecimal)) {
    const next = out ? `${out},${id}` : id;
    if (next.length > max) break;
    out = next;
  }
  return out || null;
}

/**
 * Numeric order of positive decimal id strings (int8 ids have no sign and no leading zeros): the
 * shorter is smaller, equal lengths compare as text. As BigInt order, without making BigInts.
 */
export const byDecimal = (a: string, b: string) => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);

interface ZoneContext {
  zones: ZoneRow[];
  /** Per item, the ids of its owner's zones that contain it. */
  inside: string[][];
}

/**
 * Before the insert: which zones contain each location; fills zoneId where the client gave none.
 * Matched in slices (slices.ts): a bulk inside big zones never holds the event loop for long.
 */
async function before(q: Queryable, batch: PreparedItem<LocationLike>[]): Promise<ZoneContext> {
  const ownerIds = [...new Set(batch.map((p) => p.ownerId))];
  const zones = await q.query<ZoneRow>(
    `SELECT ${ZONE_RULE_COLUMNS}, z.geometry::text AS geometry, z.circle, z.min_lat, z.max_lat, z.min_lon, z.max_lon FROM zones z WHERE z.owner_id = ANY($1::uuid[])`,
    [ownerIds],
    'store_zones_of_owners',
  );
  const zonesByOwner = new Map<string, ZoneRow[]>();
  for (const z of zones.rows) {
    const list = zonesByOwner.get(z.owner_id);
    if (list) list.push(z);
    else zonesByOwner.set(z.owner_id, [z]);
  }
  const matchers = new Map([...zonesByOwner].map(([owner, list]) => [owner, new ZoneMatcher(list)]));
  const slices = new Slices();
  const inside: string[][] = [];
  for (const p of batch) {
    const m = matchers.get(p.ownerId);
    inside.push(m ? await m.inside(round(p.item.latitude, 6)!, round(p.item.longitude, 6)!, slices) : []);
    await slices.tick();
  }
  for (const [n, p] of batch.entries()) {
    if (p.item.zoneId === undefined || p.item.zoneId === null) p.item = { ...p.item, zoneId: zoneIdText(inside[n]!) };
  }
  return { zones: zones.rows, inside };
}

/** The newest position per asset, and zone enter/leave events (under the assets' locks when zones exist). */
async function write(
  q: Queryable,
  stmt: WriteStatement,
  rows: StoredItem[],
  { zones, inside }: ZoneContext,
  records: string,
  paths: OwnerPaths,
): Promise<More | undefined> {
  // The position keeps the whole location (read from the statement's records), so the latest
  // location still answers once retention removed the row behind it.
  const upsert = (latest: { locationId: string; zones: string[] }[], condition: string) =>
    stmt.with(
      `INSERT INTO asset_positions AS p (asset_id, location_id, when_created, zone_ids, owner_id, latitude, longitude, altitude,
                                         heading, speed, zone_id, when_received)
       SELECT r.asset_id, r.id, r.when_created, string_to_array(u.z, ',')::bigint[], r.owner_id, r.latitude, r.longitude, r.altitude,
              r.heading, r.speed, r.zone_id, r.when_received
         FROM unnest(${stmt.arrays(latest, [
           [(r) => r.locationId, 'int8'],
           [(r) => r.zones.join(','), 'text'],
         ])}) AS u(l, z) JOIN ${records} r ON r.id = u.l
       ON CONFLICT (asset_id) DO UPDATE SET location_id = EXCLUDED.location_id, when_created = EXCLUDED.when_created,
         zone_ids = EXCLUDED.zone_ids, owner_id = EXCLUDED.owner_id, latitude = EXCLUDED.latitude, longitude = EXCLUDED.longitude,
         altitude = EXCLUDED.altitude, heading = EXCLUDED.heading, speed = EXCLUDED.speed, zone_id = EXCLUDED.zone_id,
         when_received = EXCLUDED.when_received ${condition}`,
    );
  if (zones.length === 0) {
    // No zones, so no zone events: keep the newest position per asset with one conditional upsert,
    // which is atomic per row and needs no lock (later-but-older stores lose the WHERE).
    const newest = new Map<string, StoredItem>();
    for (const r of rows) {
      const cur = newest.get(r.item.assetId);
      if (!cur || r.time > cur.time || (+r.time === +cur.time && byDecimal(r.id, cur.id) > 0)) newest.set(r.item.assetId, r);
    }
    const latest = [...newest.values()].map((r) => ({ locationId: r.id, zones: [] }));
    upsert(latest, 'WHERE EXCLUDED.when_created > p.when_created');
    return;
  }

  // Zones exist: zone events depend on the previous position and the open visits, read under the
  // assets' locks (the store is serialised per asset from here to its statement's commit).
  const assetIds = [...new Set(rows.map((r) => r.item.assetId as string))];
  const positions = await q.query<{ asset_id: string; when_created: Date }>(
    'SELECT asset_id, when_created FROM asset_positions WHERE asset_id = ANY($1::uuid[])',
    [assetIds],
  );
  const rules = new Map(zones.map((z) => [z.id, zoneRule(z)]));

  // Each asset's new locations in time order from its stored position (late ones never count).
  const state = new Map(
    positions.rows.map((r) => [r.asset_id, { at: r.when_created.getTime(), zones: [] as string[], locationId: '', changed: false }]),
  );
  const order = rows.map((r, n) => ({ r, zones: inside[n]! })).sort((a, b) => +a.r.time - +b.r.time || byDecimal(a.r.id, b.r.id));
  const walks = new Map<string, Walk>();
  let work = 0;
  for (const { r, zones: now } of order) {
    const s = state.get(r.item.assetId);
    const at = r.time.getTime();
    if (s && at <= s.at) continue; // late: older than (or as old as) the latest location
    const w = walks.get(r.item.assetId) ?? { ownerId: r.ownerId, steps: [] };
    walks.set(r.item.assetId, w);
    w.steps.push({ at, zones: now });
    work += now.length;
    state.set(r.item.assetId, { at, zones: now, locationId: r.id, changed: true });
  }
  const moved = [...state.entries()].filter(([, s]) => s.changed);
  if (moved.length)
    upsert(
      moved.map(([, s]) => ({ locationId: s.locationId, zones: s.zones })),
      '',
    );
  if (!walks.size) return;
  // Small enough (open visits and zone memberships within one chunk): in the store's statement.
  const visits = work < ZONE_WRITE_CHUNK_ROWS ? await openVisits(q, [...walks.keys()], ZONE_WRITE_CHUNK_ROWS + 1 - work) : null;
  let open = 0;
  for (const list of visits?.values() ?? []) open += list.length;
  if (!visits || open + work > ZONE_WRITE_CHUNK_ROWS) return (after) => writeInChunks(after, walks, rules, paths);
  const evaluated: AssetVisits[] = [];
  // Many locations inside many zones are a lot of visits to walk: in slices too.
  const slices = new Slices();
  for (const [assetId, w] of walks) {
    const e = new AssetVisits(assetId, w.ownerId, visits.get(assetId) ?? [], rules);
    evaluated.push(e);
    for (const step of w.steps) {
      await slices.tick();
      e.location(step.at, step.zones);
    }
  }
  await saveVisits(q, stmt, evaluated, paths);
}

/** One asset's new locations, in time order, and the zones each is inside. */
interface Walk {
  ownerId: string;
  steps: { at: number; zones: string[] }[];
}

/**
 * The most zone events held in memory and written by one statement, with the visits they changed,
 * when a store's zone rules go past one chunk: its assets are walked a few at a time (their open
 * visits read per group, at most one per zone each), and what they changed is written each time
 * their events reach this many, or their changed visits and events do once an asset's walk ends,
 * after the store's own statement and in one transaction with it (Db.serialized's
 * Atomic). So memory, each statement's size and its time (on PGlite, in the service's own thread)
 * stay bounded whatever the number of zones times assets; the event loop is given back between
 * statements and every SLICE_MS of the walk.
 */
export const ZONE_WRITE_CHUNK_ROWS: number = BOUNDS.zoneRowsPerStatement.value;

async function writeInChunks(q: Queryable, walks: Map<string, Walk>, rules: Map<string, ZoneRule>, paths: OwnerPaths): Promise<void> {
  const slices = new Slices();
  const list = [...walks];
  // An asset has at most one open visit per zone of its owner: a group's read is within a chunk.
  const perRead = Math.max(1, Math.floor(ZONE_WRITE_CHUNK_ROWS / Math.max(1, rules.size)));
  let pending: AssetVisits[] = [];
  let held = 0; // rows of the pending assets before the current one
  const rowsOf = (e: AssetVisits) => {
    let n = e.fired.length;
    for (const v of e.visits) if (v.changed) n++;
    return n;
  };
  // What piles up while an asset is walked is its events: its visits are held whatever happens (at
  // most one open per zone), and a location inside every zone changes each of them. Counting those
  // at every step wrote every open visit again after every location: 1000 zones and 50 locations an
  // asset made 1000 statements of 1000 rows, 195 s for one bulk. Changed visits are counted, and
  // written, when their asset's walk ends.
  const piled = (e: AssetVisits) => e.fired.length;
  const flush = async () => {
    if (!pending.length) return;
    const stmt = new WriteStatement();
    await saveVisits(q, stmt, pending, paths, true);
    if (!stmt.empty) await stmt.run(q);
    for (const e of pending) e.saved();
    pending = [];
    held = 0;
  };
  for (let i = 0; i < list.length; i += perRead) {
    const group = list.slice(i, i + perRead);
    const open = await openVisits(
      q,
      group.map(([id]) => id),
    );
    for (const [assetId, w] of group) {
      const e = new AssetVisits(assetId, w.ownerId, open.get(assetId) ?? [], rules);
      pending.push(e);
      for (const step of w.steps) {
        await slices.tick();
        e.location(step.at, step.zones);
        if (held + piled(e) >= ZONE_WRITE_CHUNK_ROWS) {
          await flush();
          pending.push(e);
        }
      }
      held += rowsOf(e);
      if (held >= ZONE_WRITE_CHUNK_ROWS) await flush();
    }
  }
  await flush();
}

/** The zones hook on stored locations (registered by the app). */
export const zoneHook: RecordHook<ZoneContext> = {
  name: 'zones',
  types: ['location'],
  before,
  serial: (c) => c.zones.length > 0,
  write,
};

const LATEST_FILTERS = { assetId: filters.anyUuid('p.asset_id'), ownerId: filters.uuid('p.owner_id') };

/** GET /locations/latest: the newest location of each visible asset, kept by the hook above. */
export const positionRoutes: FastifyPluginAsyncTypebox<{ db: Db }> = async (app, { db }) => {
  const def = locations;
  app.get(`${def.path}/latest`, {
    schema: {
      tags: [def.tag],
      summary: 'The newest location of each visible asset',
      querystring: listQuery(LATEST_FILTERS),
      response: { 200: Type.Array(def.output) },
    },
    handler: async (req, reply) => {
      const rows = await listPage<{ id: string }>(db, req, reply, {
        select: `p.location_id AS id, p.asset_id, p.owner_id, p.latitude, p.longitude, p.altitude, p.heading, p.speed, p.zone_id,
                 p.when_created, p.when_received`,
        from: 'asset_positions p',
        owners: { column: 'p.owner_id', scope: req.tenancy },
        defaultOrder: 'desc',
        idType: 'int8',
        timeColumn: 'p.when_created',
        idColumn: 'p.location_id',
        filters: (params, where) => applyFilters(LATEST_FILTERS, req.query, params, where),
      });
      return rows.map(def.toApi);
    },
  });
};
