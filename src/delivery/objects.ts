// The objects pushed to customer systems (API guide 8, "Push objects"): their type names, used in
// integrations' filters and destinations and the webhook-object-type header, and their members.
export const OBJECT_TYPES = ['asset', 'location', 'sensordata', 'reeferdata', 'gensetdata', 'oemdata'] as const;
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
};
