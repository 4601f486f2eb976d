// The objects pushed to customer systems (API guide 8, "Push objects"): their type names, used in
// integrations' filters and destinations and the webhook-object-type header, and their members.
/** The data records and assets: what an integration receives unless it names its types. */
export const RECORD_TYPES = ['asset', 'location', 'sensordata', 'reeferdata', 'gensetdata', 'oemdata'] as const;
/**
 * Every pushed type: the records, and the events, notifications, commands and integrations' health
 * changes an integration opts into.
 */
export const OBJECT_TYPES = [...RECORD_TYPES, 'event', 'notification', 'command', 'integrationStatus'] as const;
export type ObjectType = (typeof OBJECT_TYPES)[number];

/**
 * The members of each push object. A name a customer adds to pushed objects (a Kafka metadata
 * field, the MQTT event id field) must not be one of these: it would overwrite the object.
 */
export const PUSH_FIELDS: Record<ObjectType, readonly string[]> = {
  asset: ['id', 'name', 'ownerId', 'whenCreated', 'whenUpdated', 'boxId', 'disabled', 'note', 'tags'],
  location: ['id', 'assetId', 'ownerId', 'whenCreated', 'latitude', 'longitude', 'altitude', 'speed', 'heading', 'zoneId'],
  sensordata: ['id', 'assetId', 'ownerId', 'sensorId', 'sensorType', 'whenCreated', 'value', 'type', 'when_received'],
  reeferdata: ['id', 'assetId', 'ownerId', 'whenCreated', 'reeferClass', 'data'],
  gensetdata: ['id', 'assetId', 'ownerId', 'whenCreated', 'gensetType', 'data', 'boxId'],
  oemdata: ['id', 'assetId', 'ownerId', 'whenCreated', 'payloadType', 'data', 'boxId', 'when_received'],
  event: [
    'id',
    'subject',
    'assetId',
    'ownerId',
    'severity',
    'currentData',
    'prevData',
    'whenCreated',
    'acknowledgedAt',
    'acknowledgedBy',
    'clearedAt',
    'clearsEventId',
  ],
  notification: [
    'id',
    'ownerId',
    'assetId',
    'assetName',
    'whenCreated',
    'whenReceived',
    'type',
    'subject',
    'eventId',
    'specificationId',
    'specificationName',
    'zoneId',
    'location',
    'reeferData',
    'assetState',
    'cmData',
    'acknowledgedAt',
    'acknowledgedBy',
  ],
  command: [
    'id',
    'assetId',
    'ownerId',
    'type',
    'command',
    'parameters',
    'status',
    'uniqueId',
    'ttlSeconds',
    'whoCreated',
    'whenCreated',
    'whenUpdated',
  ],
  integrationStatus: ['id', 'integrationId', 'integrationName', 'channel', 'ownerId', 'status', 'detail', 'at'],
};

/** Members whose values are objects or arrays: an integration's filter cannot name them. */
const STRUCTURED = new Set(['tags', 'data', 'currentData', 'prevData', 'location', 'reeferData', 'assetState', 'cmData', 'parameters']);

/** The members of a type an integration's filter may name (those with a single value). */
export const filterFields = (type: ObjectType): readonly string[] => PUSH_FIELDS[type].filter((f) => !STRUCTURED.has(f));
