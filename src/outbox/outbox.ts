// The seam between storing and pushing (spec 6.1, API.md section 9): every stored asset change and
// data record is appended to the delivery log (src/delivery/queue.ts) in its push shape (spec 2.12)
// with a new event id, inside the transaction that stores the record. A record is never pushed
// that was not stored, and never lost once stored.
import { EventEmitter } from 'node:events';

export const OBJECT_TYPES = ['asset', 'location', 'sensordata', 'reeferdata', 'gensetdata', 'oemdata'] as const;
export type ObjectType = (typeof OBJECT_TYPES)[number];

/**
 * The members of each push object (spec 2.12). A name a customer adds to pushed objects (a Kafka
 * metadata field, the MQTT event id field) must not be one of these: it would overwrite the object.
 */
export const PUSH_FIELDS: Record<ObjectType, readonly string[]> = {
  asset: ['id', 'name', 'ownerId', 'whenCreated', 'whenUpdated', 'boxId', 'disabled', 'note', 'tags'],
  location: ['id', 'assetId', 'ownerId', 'whenCreated', 'latitude', 'longitude', 'altitude', 'speed', 'heading', 'zoneId'],
  sensordata: ['id', 'assetId', 'ownerId', 'sensorId', 'sensorType', 'whenCreated', 'value', 'type', 'when_received'],
  reeferdata: ['id', 'assetId', 'ownerId', 'whenCreated', 'reeferClass', 'data'],
  gensetdata: ['id', 'assetId', 'ownerId', 'whenCreated', 'gensetType', 'data', 'boxId'],
  oemdata: ['id', 'assetId', 'ownerId', 'whenCreated', 'payloadType', 'data', 'boxId', 'when_received'],
};

/** Wakes this process's delivery engine after a commit that appended events. */
export const deliveryWakeups = new EventEmitter();
export const NOTIFY_CHANNEL = 'tracking_deliveries';

/** ISO 8601 UTC to the second, in SQL (the push shapes' date-times). */
export const sqlIso = (col: string) => `to_char(${col} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')`;
