// What a list answers in (API guide 5, "Exports"): JSON pages by default; CSV (RFC 4180), NDJSON
// and, for locations, GeoJSON, chosen by `format=` or the Accept header.
import type { FastifyRequest } from 'fastify';
import { Type } from '@sinclair/typebox';
import { badRequest } from '../http/errors.js';

export const LIST_FORMATS = ['json', 'csv', 'ndjson', 'geojson'] as const;
export type ListFormat = (typeof LIST_FORMATS)[number];

export const FormatParam = Type.Union(
  LIST_FORMATS.map((f) => Type.Literal(f)),
  { description: 'json (pages, the default); csv, ndjson or geojson (locations): the whole from..to range, streamed' },
);

export const MEDIA_TYPES: Record<Exclude<ListFormat, 'json'>, string> = {
  csv: 'text/csv; charset=utf-8',
  ndjson: 'application/x-ndjson',
  geojson: 'application/geo+json',
};

/** The format a list request asks for: `format=` first, else the Accept header, else JSON. */
export function listFormat(req: FastifyRequest, geo: boolean): ListFormat {
  const asked = (req.query as { format?: ListFormat }).format;
  if (asked) {
    if (asked === 'geojson' && !geo) throw badRequest('format=geojson is offered for locations only.', '/format');
    return asked;
  }
  const accept = req.headers.accept ?? '';
  if (/\btext\/csv\b/i.test(accept)) return 'csv';
  if (/\bapplication\/(x-)?ndjson\b/i.test(accept)) return 'ndjson';
  if (geo && /\bapplication\/geo\+json\b/i.test(accept)) return 'geojson';
  return 'json';
}

/** One CSV field (RFC 4180): nested values as JSON text, quoted when it holds a quote, comma or line break. */
export function csvField(v: unknown): string {
  if (v === null || v === undefined) return '';
  const s = typeof v === 'object' ? JSON.stringify(v) : String(v);
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

export const csvLine = (values: unknown[]) => `${values.map(csvField).join(',')}\n`;
