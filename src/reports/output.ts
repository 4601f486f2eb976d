// How a report answers (API guide 5, "Reports"): JSON (its head, then `items`), CSV (one row per
// item, nested objects as dotted columns such as `start.time`, arrays as JSON text) or, for the
// reports that have places, GeoJSON (a FeatureCollection, one Feature per item). Every format is
// streamed as the items are computed, so an owner's whole fleet never sits in memory; CSV and
// GeoJSON carry the head's sources in Report-* headers.
import { Readable } from 'node:stream';
import type { FastifyReply } from 'fastify';
import { antimeridianCrossing, csvLine, MEDIA_TYPES } from '../exports/formats.js';
import type { ReportHead } from './scope.js';

export type ReportFormat = 'json' | 'csv' | 'geojson';
type Json = Record<string, unknown>;

/** A GeoJSON geometry of an item (null: the item has no place). */
export type ToGeometry<I> = (item: I) => { type: string; coordinates: unknown } | null;

/** The value at a dotted column of an item. */
const at = (item: Json, column: string): unknown =>
  column.split('.').reduce<unknown>((v, k) => (v !== null && typeof v === 'object' ? (v as Json)[k] : undefined), item);

/** An item's members flattened as its CSV columns are (GeoJSON properties). */
const flat = (item: Json, columns: string[]): Json => Object.fromEntries(columns.map((c) => [c, at(item, c) ?? null]));

async function* lines<I extends Json>(
  head: ReportHead,
  format: ReportFormat,
  columns: string[],
  items: AsyncIterable<I>,
  geometry?: ToGeometry<I>,
): AsyncGenerator<string> {
  if (format === 'csv') {
    yield csvLine(columns);
    for await (const item of items) yield csvLine(columns.map((c) => at(item, c)));
    return;
  }
  if (format === 'geojson') {
    yield '{"type":"FeatureCollection","features":[';
    let first = true;
    for await (const item of items) {
      const g = geometry!(item);
      if (!g) continue;
      yield `${first ? '' : ','}${JSON.stringify({ type: 'Feature', geometry: g, properties: flat(item, columns) })}`;
      first = false;
    }
    yield ']}\n';
    return;
  }
  yield `${JSON.stringify(head).slice(0, -1)},"items":[`;
  let first = true;
  for await (const item of items) {
    yield `${first ? '' : ','}${JSON.stringify(item)}`;
    first = false;
  }
  yield ']}\n';
}

export function sendReport<I extends Json>(
  reply: FastifyReply,
  head: ReportHead,
  format: ReportFormat,
  columns: string[],
  items: AsyncIterable<I>,
  geometry?: ToGeometry<I>,
): FastifyReply {
  reply.header('cache-control', 'no-store');
  if (format !== 'json') {
    reply
      .header('content-disposition', `attachment; filename="${head.kind}.${format}"`)
      .header('report-sources', head.sources.join(', '))
      .header('report-raw-data-from', head.rawDataFrom ?? 'none');
  }
  return reply
    .type(format === 'json' ? 'application/json; charset=utf-8' : MEDIA_TYPES[format])
    .send(Readable.from(lines(head, format, columns, items, geometry), { objectMode: false }));
}

/**
 * A path as GeoJSON (RFC 7946 3.1.9): a LineString, or a MultiLineString cut where it crosses the
 * antimeridian (at the interpolated crossing, on both sides); a Point when it is one position.
 */
export function pathGeometry(points: { latitude: number; longitude: number }[]): { type: string; coordinates: unknown } | null {
  if (points.length === 0) return null;
  if (points.length === 1) return { type: 'Point', coordinates: [points[0]!.longitude, points[0]!.latitude] };
  const lines: number[][][] = [[[points[0]!.longitude, points[0]!.latitude]]];
  const add = (p: number[]) => {
    const line = lines[lines.length - 1]!;
    const last = line[line.length - 1]!;
    if (last[0] !== p[0] || last[1] !== p[1]) line.push(p);
  };
  for (let i = 1; i < points.length; i++) {
    const a = points[i - 1]!;
    const b = points[i]!;
    // Crossing: cut where the shorter way meets ±180 (a position on it is its own end).
    const cut = antimeridianCrossing(a, b);
    if (cut) {
      add([cut.edge, cut.latitude]);
      lines.push([[-cut.edge, cut.latitude]]);
    }
    add([b.longitude, b.latitude]);
  }
  // A piece that is one position (the path ended on the antimeridian) is no line.
  const pieces = lines.filter((l) => l.length > 1);
  if (pieces.length === 0) return { type: 'Point', coordinates: lines[0]![0] };
  return pieces.length === 1 ? { type: 'LineString', coordinates: pieces[0] } : { type: 'MultiLineString', coordinates: pieces };
}
