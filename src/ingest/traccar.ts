// Traccar's JSON forwarding (API guide 15), at /ingest/traccar on the server root: a Traccar
// server decodes its 200-odd device protocols and posts each position as {position, device}
// (forward.type json) and each event as {event, position?, device} (event.forward.url),
// authenticated by the header the operator configures there: Authorization: Bearer
// INGEST_TRACCAR_TOKEN. device.uniqueId names the device (protocol traccar). A position stores a
// location (speed in knots stored in km/h, course as heading, fixTime as its time); its attributes
// that a sensor type fits become sensor data (temp1.., deviceTemp, coolantTemp: TEMPERATURE;
// battery: BATTERY_VOLTAGE; power: EXTERNAL_POWER_VOLTAGE; fuel, fuelLevel: FUEL_LEVEL; humidity:
// HUMIDITY), the rest OEM data (payloadType TRACCAR_PAYLOAD). An event is OEM data (payloadType
// TRACCAR_EVENT_PAYLOAD): its position was forwarded on its own.
import crypto from 'node:crypto';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, badRequest } from '../http/errors.js';
import { locations, MAX_BULK, oemData, type SENSOR_TYPES, sensorData } from '../records/records.js';
import { checkRecordTime } from '../records/time-window.js';
import { type Ingest, IngestRefused } from './ingest.js';
import { checkItem, finite, isoTime, objectOf } from './values.js';

/** payloadType of the OEM data of a forwarded position's other attributes, and of an event. */
export const TRACCAR_PAYLOAD = 8082;
export const TRACCAR_EVENT_PAYLOAD = 8083;
const KNOT_KMH = 1.852;

type SensorType = (typeof SENSOR_TYPES)[number];
/** The attributes a sensor type fits (Traccar's Position.KEY_*: volts, litres or percent, °C). */
function sensorTypeOf(key: string): SensorType | null {
  if (/^temp\d+$/.test(key) || key === 'deviceTemp' || key === 'coolantTemp') return 'TEMPERATURE';
  switch (key) {
    case 'battery':
      return 'BATTERY_VOLTAGE';
    case 'power':
      return 'EXTERNAL_POWER_VOLTAGE';
    case 'fuel':
    case 'fuelLevel':
      return 'FUEL_LEVEL';
    case 'humidity':
      return 'HUMIDITY';
    default:
      return null;
  }
}

/** The bearer token, compared in constant time. */
function authorized(req: FastifyRequest, token: string): boolean {
  const m = /^Bearer\s+(.+)$/i.exec(String(req.headers.authorization ?? ''));
  if (!m) return false;
  const a = crypto.createHash('sha256').update(m[1]!.trim()).digest();
  const b = crypto.createHash('sha256').update(token).digest();
  return crypto.timingSafeEqual(a, b);
}

export async function storeTraccar(ingest: Ingest, body: unknown): Promise<void> {
  const root = objectOf(body);
  const dev = objectOf(root?.device);
  const uniqueId = dev?.uniqueId;
  if (typeof uniqueId !== 'string' || !uniqueId) {
    throw new IngestRefused('bad message', 'VALIDATION_FAILED', 'device.uniqueId is required.', { field: '/device/uniqueId' });
  }
  const device = await ingest.device('traccar', uniqueId);
  const assetId = device.asset_id;
  const event = objectOf(root!.event);
  if (event) {
    const whenCreated = isoTime(event.eventTime, '/event/eventTime');
    checkRecordTime(ingest.deps.cfg, whenCreated, '/event/eventTime');
    const data = {
      type: event.type,
      eventTime: event.eventTime,
      attributes: event.attributes ?? {},
      ...(objectOf(root!.geofence) ? { geofence: root!.geofence } : {}),
    };
    if (typeof event.type !== 'string') throw badRequest('event.type is required.', '/event/type');
    await ingest.store(
      device,
      oemData,
      [checkItem(oemData, { assetId, whenCreated, payloadType: TRACCAR_EVENT_PAYLOAD, data })],
      'traccar',
    );
    return;
  }
  const position = objectOf(root!.position);
  if (!position) throw badRequest('position (or event) is required.', '/position');
  const whenCreated = isoTime(position.fixTime ?? position.deviceTime, '/position/fixTime');
  checkRecordTime(ingest.deps.cfg, whenCreated, '/position/fixTime');
  const attributes = objectOf(position.attributes) ?? {};
  // The attributes first: a position that cannot be stored whole stores nothing.
  const sensors = [];
  const rest: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(attributes)) {
    const type = sensorTypeOf(k);
    if (type && typeof v === 'number' && Number.isFinite(v))
      sensors.push(checkItem(sensorData, { assetId, whenCreated, sensorId: k, type, value: v }));
    else rest[k] = v;
  }
  // One store's bulk at most (records.ts MAX_BULK), as a REST create or an MQTT payload.
  if (sensors.length > MAX_BULK) {
    throw badRequest(
      `position.attributes has ${sensors.length} sensor values (temp1.., battery, power, fuel, humidity); a position carries at most ${MAX_BULK}.`,
      '/position/attributes',
    );
  }
  if (typeof position.accuracy === 'number' && position.accuracy > 0) rest.accuracy = position.accuracy;
  const others = Object.keys(rest).length ? checkItem(oemData, { assetId, whenCreated, payloadType: TRACCAR_PAYLOAD, data: rest }) : null;
  // An invalid fix is the last known position again: its attributes are news, its place is not.
  if (position.valid !== false) {
    const speed = position.speed === undefined || position.speed === null ? undefined : finite(position.speed, '/position/speed');
    const location = checkItem(locations, {
      assetId,
      whenCreated,
      latitude: finite(position.latitude, '/position/latitude'),
      longitude: finite(position.longitude, '/position/longitude'),
      ...(typeof position.altitude === 'number' ? { altitude: position.altitude } : {}),
      ...(typeof position.course === 'number' ? { heading: position.course } : {}),
      ...(speed !== undefined ? { speed: speed * KNOT_KMH } : {}),
    });
    await ingest.store(device, locations, [location], 'traccar');
  }
  if (sensors.length) await ingest.store(device, sensorData, sensors, 'traccar');
  if (others) await ingest.store(device, oemData, [others], 'traccar');
}

export const traccarRoutes: FastifyPluginAsync<{ ingest: Ingest; token: string | undefined }> = async (app, { ingest, token }) => {
  const handle = async (req: FastifyRequest, reply: FastifyReply) => {
    if (!token) throw new ApiError('NOT_FOUND', 'Traccar forwarding is not set up here (INGEST_TRACCAR_TOKEN).');
    if (!authorized(req, token)) {
      throw new ApiError('UNAUTHENTICATED', 'Authorization: Bearer <INGEST_TRACCAR_TOKEN> is required (Traccar: forward.header).');
    }
    const uniqueId = objectOf(objectOf(req.body)?.device)?.uniqueId;
    try {
      await storeTraccar(ingest, req.body);
    } catch (e) {
      await ingest.refused('traccar', e, typeof uniqueId === 'string' ? uniqueId : null, JSON.stringify(req.body ?? null), req.ip);
      throw e;
    }
    return reply.code(204).send();
  };
  app.post(
    '/ingest/traccar',
    {
      config: { public: true },
      schema: {
        tags: ['devices'],
        summary: "Traccar's JSON forwarding: a position ({position, device}) or an event ({event, position, device})",
        description: 'Authorization: Bearer INGEST_TRACCAR_TOKEN (forward.header and event.forward.header in traccar.xml).',
        response: { 204: { description: 'Stored', type: 'null' } },
      },
    },
    handle,
  );
};
