// GET /reports/{trips,stops,zones,temperature,summary} (API guide 5, "Reports"): one asset's or
// one owner's assets' report over from..to, as JSON, CSV or (trips, stops) GeoJSON, by `format=`
// or Accept; tenancy as for the lists.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { type TSchema, Type } from '@sinclair/typebox';
import type { Config } from '../config.js';
import type { Db } from '../db/db.js';
import { readDb } from '../db/reads.js';
import { listFormat, MEDIA_TYPES } from '../exports/formats.js';
import { badRequest } from '../http/errors.js';
import { DateTime, Nullable, Uuid } from '../http/schemas.js';
import { pathGeometry, type ReportFormat, sendReport } from './output.js';
import { ReportQuery, reportHead, reportScope } from './scope.js';
import { SUMMARY_COLUMNS, summary } from './summary.js';
import { TEMPERATURE_COLUMNS, temperature } from './temperature.js';
import { movement, STOP_COLUMNS, type StopItem, TRIP_COLUMNS, type TripItem } from './trips.js';
import { VISIT_COLUMNS, zoneVisits } from './visits.js';

const Place = Type.Object({ time: DateTime, latitude: Type.Number(), longitude: Type.Number() });
const Span = Type.Object({ start: DateTime, end: DateTime, durationSeconds: Type.Integer() });
const ITEMS: Record<string, TSchema> = {
  stops: Type.Object({
    assetId: Uuid,
    start: DateTime,
    end: DateTime,
    durationSeconds: Type.Integer(),
    latitude: Type.Number(),
    longitude: Type.Number(),
  }),
  trips: Type.Object({
    assetId: Uuid,
    start: Place,
    end: Place,
    durationSeconds: Type.Integer(),
    distanceMeters: Type.Number(),
    averageSpeed: Nullable(Type.Number({ description: 'km/h' })),
    maxSpeed: Nullable(Type.Number({ description: 'km/h, the highest speed its positions reported' })),
  }),
  zones: Type.Object({
    assetId: Uuid,
    zoneId: Type.String(),
    zoneName: Nullable(Type.String()),
    enteredAt: DateTime,
    leftAt: Nullable(DateTime),
    durationSeconds: Type.Integer(),
    open: Type.Boolean({ description: 'The visit had not ended by `to`' }),
  }),
  temperature: Type.Object({
    assetId: Uuid,
    type: Type.String({ description: 'REEFER or GENSET: the specification' }),
    sensor: Type.String(),
    range: Type.Array(Nullable(Type.Number()), { description: '[min, max]; null is unbounded' }),
    setpoint: Nullable(Type.Number()),
    excursions: Type.Array(Type.Object({ ...Span.properties, min: Type.Number(), max: Type.Number() })),
    minutesOutOfRange: Type.Number(),
    shareInRange: Nullable(Type.Number({ minimum: 0, maximum: 1, description: 'In-range time over the time covered by data' })),
    gaps: Type.Array(Span),
    rollupHoursOutOfRange: Nullable(Type.Integer({ description: 'Before rawDataFrom: hours whose rollup left the range' })),
  }),
  summary: Type.Object({
    assetId: Uuid,
    assetName: Type.String(),
    distanceMeters: Type.Number(),
    records: Type.Record(Type.String(), Type.Integer()),
    firstRecord: Nullable(DateTime),
    lastRecord: Nullable(DateTime),
    alertsRaised: Type.Integer(),
  }),
};
const SUMMARIES: Record<string, string> = {
  trips: 'Trips between stops: start and end, duration, distance, average and maximum speed',
  stops: 'Stops: where an asset stayed within stopRadiusMeters for at least stopMinutes',
  zones: 'Zone visits: entered, left and dwell time, from the same computation as the zone events',
  temperature: 'Cold-chain excursions per specified sensor, gaps, minutes out of range and the share of time in range',
  summary: 'Per asset: distance, records by type, first and last record, alerts raised',
};
const ROLLUP_NOTES: Record<string, string | null> = {
  trips: null,
  stops: null,
  zones: null,
  temperature: 'Before then, rollupHoursOutOfRange counts the hours whose hourly minimum or maximum left the range.',
  summary:
    'Before then, distance, record counts and first and last record come from the hourly rollups (whole hours); alerts raised then are not counted.',
};

export async function reportRoutes(app: FastifyInstance, { db, cfg }: { db: Db; cfg: Config }): Promise<void> {
  for (const kind of Object.keys(ITEMS)) {
    const geo = kind === 'trips' || kind === 'stops';
    const handler = async (req: FastifyRequest, reply: FastifyReply) => {
      const q = req.query as ReportQuery;
      const asked = listFormat(req, geo);
      if (asked === 'ndjson') throw badRequest('A report answers in json, csv or, for trips and stops, geojson.', '/format');
      const format: ReportFormat = asked;
      // From the replica when one serves this request (db/reads.ts), except the temperature report:
      // it folds the rollups first, a write the replica would see only later.
      const rdb = kind === 'temperature' ? db : readDb(req, db);
      const scope = await reportScope(rdb, req.tenancy, q, {
        maxDays: cfg.REPORT_MAX_DAYS,
        systemDays: cfg.RETENTION_DAYS ?? null,
        rollupDays: cfg.ROLLUP_RETENTION_DAYS,
      });
      // Zone visits outlive the records: never expired.
      const head = reportHead(kind, kind === 'zones' ? { ...scope, rawFrom: null } : scope, ROLLUP_NOTES[kind]!);
      if (kind === 'trips' || kind === 'stops') {
        const items = movement(rdb, scope, kind, {
          radiusMeters: q.stopRadiusMeters ?? 200,
          minutes: q.stopMinutes ?? 10,
          paths: format === 'geojson' && kind === 'trips',
        });
        return kind === 'trips'
          ? sendReport(reply, head, format, TRIP_COLUMNS, items as AsyncIterable<TripItem>, (t) => pathGeometry(t.path ?? [t.start, t.end]))
          : sendReport(reply, head, format, STOP_COLUMNS, items as AsyncIterable<StopItem>, (s) => pathGeometry([s]));
      }
      if (kind === 'zones') return sendReport(reply, head, format, VISIT_COLUMNS, zoneVisits(rdb, scope));
      if (kind === 'temperature') return sendReport(reply, head, format, TEMPERATURE_COLUMNS, temperature(db, scope, q.gapMinutes ?? 30));
      return sendReport(reply, head, format, SUMMARY_COLUMNS, summary(rdb, scope));
    };
    app.route({
      method: 'GET',
      url: `/reports/${kind}`,
      schema: {
        tags: ['reports'],
        summary: SUMMARIES[kind],
        description:
          'assetId (one asset) or ownerId (its assets); from..to at most REPORT_MAX_DAYS. format=json|csv' +
          (geo ? '|geojson' : '') +
          ' or Accept. JSON: {kind, from, to, rawDataFrom, sources, notes, items}; CSV: one row per item, nested members as dotted columns.',
        querystring: ReportQuery,
        produces: ['application/json', MEDIA_TYPES.csv, ...(geo ? [MEDIA_TYPES.geojson] : [])],
        response: {
          200: Type.Object({
            kind: Type.String(),
            from: DateTime,
            to: DateTime,
            rawDataFrom: Nullable(DateTime),
            sources: Type.Array(Type.String()),
            notes: Type.Array(Type.String()),
            items: Type.Array(ITEMS[kind]!),
          }),
        },
      },
      handler,
    });
  }
}
