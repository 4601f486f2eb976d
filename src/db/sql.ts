// SQL pieces several modules build statements from.

/** ISO 8601 UTC to the second, in SQL (API guide 1: how date-times come out, push objects included). */
export const sqlIso = (col: string) => `to_char(${col} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')`;
