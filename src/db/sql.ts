// SQL pieces several modules build statements from.

/** ISO 8601 UTC to the second, in SQL (API guide 1: how date-times come out, push objects included). */
export const sqlIso = (col: string) => `to_char(${col} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')`;

/** A value as an SQL literal (strings quoted, arrays as array literals, dates as ISO text). */
export function sqlLiteral(v: unknown): string {
  const quote = (s: string) => `'${s.replaceAll("'", "''")}'`;
  if (v === null || v === undefined) return 'NULL';
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new Error('a non-finite number cannot be inlined');
    return String(v);
  }
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (v instanceof Date) return quote(v.toISOString());
  if (Array.isArray(v)) {
    const items = v.map((x) => (x === null ? 'NULL' : `"${String(x).replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`));
    return quote(`{${items.join(',')}}`);
  }
  return quote(String(v));
}

/**
 * A statement whose `$n` placeholders are replaced by their values as literals, for the one place
 * that cannot take parameters: `COPY (query) TO STDOUT`. The values are the same ones the
 * parameterised statement would bind; each is quoted (strings, arrays, dates) or printed (numbers).
 */
export function inlineParams(sql: string, params: unknown[]): string {
  return sql.replace(/\$(\d+)/g, (_, n: string) => {
    const i = Number(n) - 1;
    if (i < 0 || i >= params.length) throw new Error(`no parameter $${n}`);
    return sqlLiteral(params[i]);
  });
}
