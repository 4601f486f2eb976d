// The OsmAnd protocol (API guide 15), as Traccar's server reads it (OsmAndProtocolDecoder) and the
// Traccar Client app sends it, at /ingest/osmand on the server root (devices carry no token; the
// device's uniqueId is its credential):
//   - parameters in the query (GET, or the legacy apps' POST with an empty body) or a form body
//     (the current client): id or deviceid, lat and lon (or location=lat,lon), timestamp (Unix
//     seconds, milliseconds past 2^31, ISO 8601 with a zone, or "yyyy-MM-dd HH:mm:ss" taken as
//     UTC), speed in knots (stored in km/h, x 1.852), bearing or heading (stored as heading),
//     altitude, accuracy, batt (a percentage), and any other parameter;
//   - the JSON the Traccar Client 9 sends: {device_id, location: {timestamp, coords: {latitude,
//     longitude, speed (m/s), heading, accuracy, altitude}, battery: {level (0..1), is_charging},
//     is_moving, odometer, event, activity: {type}, extras}}.
// A message stores a location, and what the location has no field for (accuracy, the battery
// level, hdop, charge, motion, the rest) as one OEM data record (payloadType OSMAND_PAYLOAD):
// batt is a percentage, not the sensors' BATTERY_VOLTAGE. 200 with an empty body as Traccar
// answers; a bad value is a 400 that stores nothing; an unknown or disabled id a 404.
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { badRequest } from '../http/errors.js';
import { locations, oemData } from '../records/records.js';
import { checkRecordTime } from '../records/time-window.js';
import type { DeviceRow } from './devices.js';
import { type Ingest, IngestRefused } from './ingest.js';
import { checkItem, finite, numberParam, objectOf, timeOf } from './values.js';

/** payloadType of the OEM data an OsmAnd message leaves besides its location. */
export const OSMAND_PAYLOAD = 5055;
const KNOT_KMH = 1.852;
/** The parameters the location takes; every other one is kept as OEM data. */
const LOCATION_PARAMS = new Set(['id', 'deviceid', 'lat', 'lon', 'location', 'timestamp', 'speed', 'bearing', 'heading', 'altitude']);

/** A message as read: the device's id, the location (if it has one) and everything else. */
export interface OsmAndMessage {
  uniqueId: string;
  location: { latitude: number; longitude: number; altitude?: number; heading?: number; speed?: number } | null;
  whenCreated: string | undefined;
  /** Where the time came from, named by a refusal: the timestamp parameter, or the JSON's member. */
  timeField: string;
  extras: Record<string, unknown>;
}

const num = (params: Map<string, string>, ...names: string[]) => {
  for (const n of names) {
    const v = params.get(n);
    if (v !== undefined && v !== '') return numberParam(v, n);
  }
  return undefined;
};

/** The query or form parameters (the last of a repeated one). */
export function fromParams(params: Map<string, string>): OsmAndMessage {
  const uniqueId = params.get('id') ?? params.get('deviceid');
  if (!uniqueId) throw new IngestRefused('bad message', 'VALIDATION_FAILED', 'id (the device’s id) is required.', { field: '/id' });
  let latitude = num(params, 'lat');
  let longitude = num(params, 'lon');
  const location = params.get('location');
  if (location !== undefined && latitude === undefined) {
    const [a, b] = location.split(',');
    latitude = numberParam(a ?? '', 'location');
    longitude = numberParam(b ?? '', 'location');
  }
  if ((latitude === undefined) !== (longitude === undefined)) throw badRequest('lat and lon go together.', '/lat');
  const speed = num(params, 'speed');
  const heading = num(params, 'bearing', 'heading');
  const altitude = num(params, 'altitude');
  const extras: Record<string, unknown> = {};
  for (const [k, v] of params) {
    if (LOCATION_PARAMS.has(k)) continue;
    if (k === 'batt') extras.batteryLevel = numberParam(v, 'batt');
    else if (k === 'accuracy' || k === 'hdop') extras[k] = numberParam(v, k);
    else if (v === 'true' || v === 'false') extras[k] = v === 'true';
    else if (v !== '' && Number.isFinite(Number(v))) extras[k] = Number(v);
    else extras[k] = v;
  }
  return {
    uniqueId,
    location:
      latitude === undefined
        ? null
        : {
            latitude,
            longitude: longitude!,
            ...(altitude !== undefined ? { altitude } : {}),
            ...(heading !== undefined ? { heading } : {}),
            ...(speed !== undefined ? { speed: speed * KNOT_KMH } : {}),
          },
    whenCreated: params.has('timestamp') ? timeOf(params.get('timestamp')!, '/timestamp') : undefined,
    timeField: '/timestamp',
    extras,
  };
}

/** The JSON body of the Traccar Client 9 (the background geolocation plugin's record). */
export function fromJson(body: unknown): OsmAndMessage {
  const root = objectOf(body);
  const uniqueId = root?.device_id;
  if (typeof uniqueId !== 'string' && typeof uniqueId !== 'number') {
    throw new IngestRefused('bad message', 'VALIDATION_FAILED', 'device_id is required.', { field: '/device_id' });
  }
  const loc = objectOf(root!.location);
  if (!loc) throw badRequest('location is required.', '/location');
  if (typeof loc.timestamp !== 'string') throw badRequest('location.timestamp is required (ISO 8601).', '/location/timestamp');
  const whenCreated = timeOf(loc.timestamp, '/location/timestamp');
  const coords = objectOf(loc.coords);
  const extras: Record<string, unknown> = {};
  let location: OsmAndMessage['location'] = null;
  if (coords) {
    const latitude = finite(coords.latitude, '/location/coords/latitude');
    const longitude = finite(coords.longitude, '/location/coords/longitude');
    const speed = coords.speed === undefined ? undefined : finite(coords.speed, '/location/coords/speed');
    const heading = coords.heading === undefined ? undefined : finite(coords.heading, '/location/coords/heading');
    const altitude = coords.altitude === undefined ? undefined : finite(coords.altitude, '/location/coords/altitude');
    if (coords.accuracy !== undefined) extras.accuracy = finite(coords.accuracy, '/location/coords/accuracy');
    location = {
      latitude,
      longitude,
      ...(altitude !== undefined ? { altitude } : {}),
      // Negative: not known (the plugin's -1).
      ...(heading !== undefined && heading >= 0 ? { heading } : {}),
      ...(speed !== undefined && speed >= 0 ? { speed: speed * 3.6 } : {}),
    };
  }
  const battery = objectOf(loc.battery);
  if (battery) {
    const level = battery.level === undefined ? undefined : finite(battery.level, '/location/battery/level');
    if (level !== undefined && level >= 0) extras.batteryLevel = Math.round(level * 100);
    if (typeof battery.is_charging === 'boolean') extras.charge = battery.is_charging;
  }
  if (typeof loc.is_moving === 'boolean') extras.motion = loc.is_moving;
  for (const k of ['odometer', 'event', 'mock', 'alarm'] as const) if (loc[k] !== undefined) extras[k] = loc[k];
  const activity = objectOf(loc.activity);
  if (typeof activity?.type === 'string') extras.activity = activity.type;
  const more = objectOf(loc.extras);
  if (more) for (const [k, v] of Object.entries(more)) if (!(k in extras)) extras[k] = v;
  return { uniqueId: String(uniqueId), location, whenCreated, timeField: '/location/timestamp', extras };
}

/** Stores a message for its device: its location, then its extras as OEM data. */
export async function storeOsmAnd(ingest: Ingest, m: OsmAndMessage): Promise<DeviceRow> {
  const device = await ingest.device('osmand', m.uniqueId);
  // The record time window, named as the device sent it, before either record is stored.
  if (m.whenCreated !== undefined) checkRecordTime(ingest.deps.cfg, m.whenCreated, m.timeField);
  // One time for both records: the message's, or now.
  const whenCreated = m.whenCreated ?? new Date().toISOString();
  const location = m.location ? checkItem(locations, { assetId: device.asset_id, whenCreated, ...m.location }) : null;
  const extras = Object.keys(m.extras).length
    ? checkItem(oemData, { assetId: device.asset_id, whenCreated, payloadType: OSMAND_PAYLOAD, data: m.extras })
    : null;
  if (!location && !extras) throw badRequest('Nothing to store: no position and nothing else.', '/lat');
  if (location) await ingest.store(device, locations, [location], 'osmand');
  if (extras) await ingest.store(device, oemData, [extras], 'osmand');
  return device;
}

const paramsOf = (req: FastifyRequest): Map<string, string> => {
  const q = req.url.indexOf('?');
  const query = q < 0 ? '' : req.url.slice(q + 1);
  // The query when it has parameters, else a form body (Traccar's rule).
  const text = query || (typeof req.body === 'string' ? req.body : '');
  return new Map(new URLSearchParams(text));
};

export const osmandRoutes: FastifyPluginAsync<{ ingest: Ingest }> = async (app, { ingest }) => {
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: 64 * 1024 }, (_req, body, done) =>
    done(null, body),
  );
  app.addContentTypeParser('text/plain', { parseAs: 'string', bodyLimit: 64 * 1024 }, (_req, body, done) => done(null, body));
  const handle = async (req: FastifyRequest, reply: FastifyReply) => {
    const json = String(req.headers['content-type'] ?? '').startsWith('application/json');
    const params = json ? null : paramsOf(req);
    try {
      await storeOsmAnd(ingest, json ? fromJson(req.body) : fromParams(params!));
    } catch (e) {
      // The id as sent, even when the rest could not be read: the device's last error names it.
      const named = json ? (objectOf(req.body)?.device_id ?? null) : (params!.get('id') ?? params!.get('deviceid') ?? null);
      const sample = json ? JSON.stringify(req.body ?? null) : req.url + (typeof req.body === 'string' ? ` ${req.body}` : '');
      await ingest.refused('osmand', e, named === null ? null : String(named), sample, req.ip);
      throw e;
    }
    return reply.code(200).send('');
  };
  const schema = (operationId: string) => ({
    operationId,
    tags: ['devices'],
    summary: 'OsmAnd protocol (Traccar Client): a position from a device, named by its uniqueId',
    description:
      'Query or form parameters (id, lat, lon, timestamp, speed in knots, bearing, altitude, accuracy, batt), or the JSON of Traccar Client 9.',
    response: { 200: { description: 'Stored (an empty body, as Traccar answers)', type: 'string' } },
  });
  app.get('/ingest/osmand', { config: { public: true }, exposeHeadRoute: false, schema: schema('sendOsmAndPositionByQuery') }, handle);
  app.post('/ingest/osmand', { config: { public: true }, schema: schema('sendOsmAndPosition') }, handle);
};
