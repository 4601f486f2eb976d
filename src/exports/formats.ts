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

/**
 * Formula injection (OWASP "CSV injection"): a text cell that begins with one of these is read by a
 * spreadsheet as a formula (`=HYPERLINK(...)`, `+cmd|...`, `@SUM(...)`), so it is written with a
 * single quote before it, and quoted. A number is no formula: one written as text (`-33.9`, a
 * sensor's text value "-5") matches NUMBER and stays as it is. The one rule for every CSV this
 * service writes: csvField below, and csvTextSql for PostgreSQL's COPY (the same characters and
 * the same NUMBER, as SQL).
 */
const FORMULA_START = ['=', '+', '-', '@', '\t', '\r'];
/** A number as text: never neutralised (the same pattern in PostgreSQL's and JavaScript's regular expressions). */
const NUMBER = '^-?[0-9]+(\\.[0-9]+)?([eE][-+]?[0-9]+)?$';
const NUMBER_RE = new RegExp(NUMBER);

/** Whether a text cell would be read as a formula. */
export const isFormula = (s: string) => FORMULA_START.includes(s.charAt(0)) && !NUMBER_RE.test(s);

/**
 * One CSV field (RFC 4180): nested values as JSON text, quoted when it holds a quote, comma or line
 * break; a text that would be read as a formula with `'` before it, quoted.
 */
export function csvField(v: unknown): string {
  if (v === null || v === undefined) return '';
  if (typeof v === 'string' && isFormula(v)) return `"'${v.replace(/"/g, '""')}"`;
  const s = typeof v === 'object' ? JSON.stringify(v) : String(v);
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

export const csvLine = (values: unknown[]) => `${values.map(csvField).join(',')}\n`;

/** A character as an SQL literal (tab and carriage return as E'\t', E'\r'). */
const sqlChar = (c: string) => (c === '\t' ? "E'\\t'" : c === '\r' ? "E'\\r'" : `'${c}'`);

/**
 * A text SQL expression as csvField writes it, for PostgreSQL's COPY (exports/export.ts): `'`
 * before a formula (COPY quotes the text columns: FORCE_QUOTE).
 */
export const csvTextSql = (expr: string): string =>
  `(CASE WHEN left(${expr}, 1) IN (${FORMULA_START.map(sqlChar).join(', ')}) AND ${expr} !~ '${NUMBER}' THEN '''' || ${expr} ELSE ${expr} END)`;

/**
 * Where the shorter way from `a` to `b` crosses the antimeridian (their longitudes more than 180°
 * apart): the edge it leaves by (180 going east, -180 going west), and the interpolated latitude
 * there. Null when it does not cross. GeoJSON (RFC 7946 3.1.9) cuts a line there, on both sides.
 */
export function antimeridianCrossing(
  a: { latitude: number; longitude: number },
  b: { latitude: number; longitude: number },
): { edge: 180 | -180; latitude: number } | null {
  const d = b.longitude - a.longitude;
  if (Math.abs(d) <= 180) return null;
  const east = d < 0; // from near +180 on to near -180
  const span = 360 - Math.abs(d);
  const toEdge = east ? 180 - a.longitude : a.longitude + 180;
  return { edge: east ? 180 : -180, latitude: a.latitude + ((b.latitude - a.latitude) * toEdge) / span };
}
