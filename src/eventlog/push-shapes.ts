// The pushed objects (API guide 8, "Push objects") in the OpenAPI document, as its `webhooks`: the
// request an integration's receiver gets for each object type, one object (single mode) or an array
// of one type (batch mode), with the Standard Webhooks headers. MQTT and Kafka carry the same objects
// as message values. The records' shapes are spec 2.12's and are here; an event, a notification and
// a command are pushed in their REST shapes, which their folders own and app.ts hands in.
import { type TSchema, Type } from '@sinclair/typebox';
import { OBJECT_TYPES, type ObjectType } from './objects.js';
import { DateTime, Nullable, Uuid } from '../http/schemas.js';

const Int64 = Type.Integer({ format: 'int64' });
const Free = Type.Object({}, { additionalProperties: true, description: 'Free members, as stored' });
const record = { id: Int64, assetId: Uuid, ownerId: Uuid, whenCreated: DateTime };
const opt = <T extends TSchema>(t: T) => Type.Optional(Nullable(t));
const Millis = Type.Integer({ format: 'int64', description: 'When the service received it, Unix milliseconds' });

/** The object types pushed in their REST shapes, owned by their folders. */
export type RestPushShapes = Record<'event' | 'notification' | 'command', TSchema>;

const SHAPES: Omit<Record<ObjectType, TSchema>, keyof RestPushShapes> = {
  asset: Type.Object(
    {
      id: Uuid,
      name: Type.String(),
      ownerId: Uuid,
      whenCreated: DateTime,
      whenUpdated: DateTime,
      boxId: opt(Type.String()),
      disabled: opt(Type.Boolean()),
      note: opt(Type.String()),
      tags: opt(Type.Array(Type.String())),
    },
    { title: 'AssetPush' },
  ),
  location: Type.Object(
    {
      ...record,
      latitude: Type.Number(),
      longitude: Type.Number(),
      altitude: opt(Type.Number({ description: 'Metres' })),
      speed: opt(Type.Number({ description: 'km/h' })),
      heading: opt(Type.Number({ description: '0-360' })),
      zoneId: opt(Type.String()),
    },
    { title: 'LocationPush' },
  ),
  sensordata: Type.Object(
    {
      ...record,
      sensorId: Type.String(),
      sensorType: Type.String(),
      value: Type.String(),
      type: Type.String({ description: 'DECIMAL or TEXT' }),
      when_received: Type.Optional(Millis),
    },
    { title: 'SensorDataPush' },
  ),
  reeferdata: Type.Object({ ...record, reeferClass: Nullable(Type.String()), data: Free }, { title: 'ReeferDataPush' }),
  gensetdata: Type.Object({ ...record, gensetType: Type.String(), data: Free, boxId: opt(Type.String()) }, { title: 'GensetDataPush' }),
  oemdata: Type.Object(
    {
      ...record,
      payloadType: Type.Integer({ format: 'int32' }),
      data: Free,
      boxId: opt(Type.String()),
      when_received: Type.Optional(Millis),
    },
    { title: 'OemDataPush' },
  ),
  integrationStatus: Type.Object(
    {
      id: Type.String({ description: 'The change (int64 as a decimal string)' }),
      integrationId: Uuid,
      integrationName: Type.String(),
      channel: Type.String(),
      ownerId: Uuid,
      status: Type.Union([Type.Literal('failing'), Type.Literal('disabled'), Type.Literal('recovered'), Type.Literal('enabled')]),
      detail: Type.String(),
      at: DateTime,
    },
    { title: 'IntegrationStatusPush' },
  ),
};

const header = (name: string, description: string) => ({ name, in: 'header', required: true, schema: { type: 'string' }, description });

/** The OpenAPI 3.1 `webhooks` member: one entry per object type. */
export function pushWebhooks(rest: RestPushShapes): Record<string, any> {
  const plain = (s: TSchema) => JSON.parse(JSON.stringify(s));
  const shapes: Record<ObjectType, TSchema> = { ...SHAPES, ...rest };
  return Object.fromEntries(
    OBJECT_TYPES.map((type) => [
      type,
      {
        post: {
          summary: `A pushed ${type}`,
          description:
            'Sent to an integration that covers this object type: one object (mode single) or an array of up to batchSize objects of this type (mode batch). The same object is the value of an MQTT or Kafka message.',
          operationId: `push${type[0]!.toUpperCase()}${type.slice(1)}`,
          parameters: [
            header('webhook-id', 'The event id (single) or the batch id; the same on every retry'),
            header('webhook-timestamp', 'The attempt time, Unix seconds'),
            header('webhook-signature', 'Standard Webhooks signatures (v1,<base64 HMAC-SHA256>) over id, timestamp and the exact body'),
            header('webhook-object-type', `"${type}"`),
            header('webhook-schema-version', 'The push payloads version: "1"'),
          ],
          requestBody: {
            required: true,
            content: { 'application/json': { schema: { oneOf: [plain(shapes[type]), { type: 'array', items: plain(shapes[type]) }] } } },
          },
          responses: {
            '2XX': { description: 'Delivered (a body {success, id} has its id stored as the receipt)' },
            '429': { description: 'The whole integration pauses for Retry-After' },
            default: { description: '5xx and timeouts are retried; 3xx and other 4xx fail the delivery' },
          },
        },
      },
    ]),
  );
}
