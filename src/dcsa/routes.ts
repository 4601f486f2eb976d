// DCSA Track & Trace 3.0.0 Event Producer (API guide 18): GET /api/dcsa/tnt/v3/events, behind the
// same credentials and tenancy as /api/v1. Every answer carries `API-Version: 3.0.0`; an error
// keeps the service's envelope ({error, message, ...}) and adds the standard's `feedbackElements`.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type, type Static } from '@sinclair/typebox';
import { BOUNDS } from '../bounds.js';
import type { Db } from '../db/db.js';
import { readDb } from '../db/reads.js';
import { badRequest } from '../http/errors.js';
import { Str } from '../http/schemas.js';
import { API_VERSION, DcsaEvent, EVENT_TYPES, type EventType, type Party } from './events.js';
import { type EventQuery, eventPage } from './producer.js';

export interface DcsaSettings {
  DCSA_PARTY_CODE?: string;
  DCSA_CODE_LIST_PROVIDER: string;
  DCSA_CODE_LIST_NAME?: string;
  DCSA_LOC_INTERVAL_MINUTES: number;
}

/** The publisher party (eventRouting.originatingParty) the settings name; null when DCSA_PARTY_CODE is unset. */
export function partyOf(s: DcsaSettings): Party | null {
  if (!s.DCSA_PARTY_CODE) return null;
  return {
    partyCode: s.DCSA_PARTY_CODE,
    codeListProvider: s.DCSA_CODE_LIST_PROVIDER,
    ...(s.DCSA_CODE_LIST_NAME ? { codeListName: s.DCSA_CODE_LIST_NAME } : {}),
  };
}

const EventsQuery = Type.Object(
  {
    carrierBookingReference: Type.Optional(
      Str(35, { minLength: 1, description: "Events of the equipment linked to this booking, within each link's time range" }),
    ),
    transportDocumentReference: Type.Optional(Str(20, { minLength: 1, description: 'Same, for a transport document reference' })),
    equipmentReference: Type.Optional(Str(11, { minLength: 1, description: 'Events of this equipment (ISO 6346 container number)' })),
    eventTypes: Type.Optional(
      Str(100, { minLength: 1, description: `Comma-separated: ${EVENT_TYPES.join(', ')} (the service produces IOT and REEFER events)` }),
    ),
    eventUpdatedDateTimeMin: Type.Optional(Type.String({ format: 'date-time', description: 'Events stored at or after this time' })),
    eventUpdatedDateTimeMax: Type.Optional(Type.String({ format: 'date-time', description: 'Events stored at or before this time' })),
    limit: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: BOUNDS.dcsaPageEvents.value,
        default: 100,
        description: `Events per page (1-${BOUNDS.dcsaPageEvents.value}, default 100)`,
      }),
    ),
    cursor: Type.Optional(
      Str(1024, { minLength: 1, description: 'The Next-Page-Cursor header of the previous page, with the same filters' }),
    ),
  },
  { additionalProperties: false },
);
type EventsQuery = Static<typeof EventsQuery>;

function parseTypes(text: string): EventType[] {
  const out: EventType[] = [];
  for (const raw of text.split(',')) {
    const v = raw.trim();
    if (!(EVENT_TYPES as readonly string[]).includes(v))
      throw badRequest(`eventTypes: "${v.slice(0, 40)}" is not an event type; use ${EVENT_TYPES.join(', ')}`, '/eventTypes');
    if (!out.includes(v as EventType)) out.push(v as EventType);
  }
  return out;
}

export function toEventQuery(q: EventsQuery): EventQuery {
  const updatedMin = q.eventUpdatedDateTimeMin ? new Date(q.eventUpdatedDateTimeMin) : undefined;
  const updatedMax = q.eventUpdatedDateTimeMax ? new Date(q.eventUpdatedDateTimeMax) : undefined;
  if (updatedMin && updatedMax && updatedMin > updatedMax)
    throw badRequest('eventUpdatedDateTimeMax must not be before eventUpdatedDateTimeMin', '/eventUpdatedDateTimeMax');
  return {
    equipmentReference: q.equipmentReference,
    carrierBookingReference: q.carrierBookingReference,
    transportDocumentReference: q.transportDocumentReference,
    eventTypes: q.eventTypes === undefined ? undefined : parseTypes(q.eventTypes),
    updatedMin,
    updatedMax,
    limit: q.limit ?? 100,
  };
}

export const dcsaRoutes: FastifyPluginAsyncTypebox<{ db: Db; settings: DcsaSettings }> = async (app, { db, settings }) => {
  const party = partyOf(settings);
  const thinSeconds = settings.DCSA_LOC_INTERVAL_MINUTES * 60;

  app.addHook('onSend', async (_req, reply, payload) => {
    reply.header('api-version', API_VERSION);
    if (reply.statusCode < 400 || typeof payload !== 'string') return payload;
    // The standard's error shape beside the service's own envelope.
    try {
      const body = JSON.parse(payload) as { message?: string; field?: string };
      const propertyPath = body.field ? `$${body.field.replace(/\//g, '.')}` : undefined;
      return JSON.stringify({
        ...body,
        feedbackElements: [{ severity: 'ERROR', message: body.message ?? 'error', ...(propertyPath ? { propertyPath } : {}) }],
      });
    } catch {
      return payload;
    }
  });

  app.get('/events', {
    schema: {
      tags: ['dcsa'],
      operationId: 'getDcsaEvents',
      summary: 'DCSA Track & Trace 3.0.0: the events of the equipment the caller sees (Event Producer)',
      description:
        'REEFER events (MEAS from reefer data, ADJU from acknowledged set-point commands) and IOT events (DETC: LOC from ' +
        'locations, thinned; DRO and DRC from door sensors) of assets with an equipmentReference and an isoEquipmentCode. ' +
        'Pages: limit and cursor, with the Next-Page-Cursor header while there is more. API guide 18 maps every member.',
      querystring: EventsQuery,
      response: { 200: Type.Object({ events: Type.Array(DcsaEvent) }, { additionalProperties: false }) },
    },
    handler: async (req, reply) => {
      const query = toEventQuery(req.query);
      const page = await eventPage(readDb(req, db), req.tenancy, query, req.query.cursor, { party, thinSeconds });
      reply.header('cache-control', 'no-store');
      if (page.next) reply.header('next-page-cursor', page.next);
      return { events: page.events };
    },
  });
};
