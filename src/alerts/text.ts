// What a person is told about an event or a notification (API guide 8), whatever carries it: the
// chat formats of a webhook (delivery/channels/webhook/chat.ts) and alert e-mail (src/email).
// Built from the pushed object alone, so a message shows only what its integration may already
// receive: its own owners' objects, never a secret. The text is the customer's: each format
// escapes it for itself.

/** What a person is told, whatever the chat: built once from the object. */
export interface AlertText {
  /** `[ALERT] MSKU1234565: supplyAirTemperature 9.5 above maximum 8` */
  title: string;
  severity: 'ALERT' | 'INFO';
  /** Label and value lines under the title (time, specification, reading, location). */
  facts: [string, string][];
  /** The asset's page on the dashboard (its map and latest data). */
  link: { title: string; url: string };
}

/** Cuts the customer's text (names up to 255, subjects) to `n` characters, before escaping lengthens it (Slack's limits: 3,000 a section, 2,000 a field). */
const cut = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);
const str = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);
const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);

/** An ISO time as people read it in a message: `2026-11-28 23:40:12 UTC`. */
export function readableTime(iso: unknown, timeZone = 'UTC'): string | null {
  const t = str(iso);
  if (!t) return null;
  const d = new Date(t);
  if (Number.isNaN(d.getTime())) return t;
  if (timeZone === 'UTC') return `${d.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
  // Swedish dates are ISO's order (2026-11-28 23:40:12); the zone's short name follows.
  return new Intl.DateTimeFormat('sv-SE', { timeZone, dateStyle: 'short', timeStyle: 'long' }).format(d);
}

/** Whether `tz` is a time zone this runtime knows (an IANA name such as Europe/Amsterdam). */
export function knownTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

/**
 * The text of an event or a notification (their push shapes, API guide 8). A notification is an
 * alert (ALERT, SILENT, DWELL) and names its asset; an event names only the asset's id.
 */
export function alertText(
  objectType: 'event' | 'notification',
  o: Record<string, unknown>,
  publicUrl: string,
  timeZone = 'UTC',
): AlertText {
  const assetId = str(o.assetId) ?? '';
  const link = { title: 'Open the asset', url: `${publicUrl}/dashboard/#/assets/${encodeURIComponent(assetId)}` };
  const facts: [string, string][] = [];
  const add = (label: string, value: string | null) => {
    if (value) facts.push([label, cut(value, 300)]);
  };
  if (objectType === 'notification') {
    const asset = str(o.assetName) ?? assetId;
    add('When', readableTime(o.whenCreated, timeZone));
    add('Specification', str(o.specificationName));
    const loc = (o.location ?? null) as Record<string, unknown> | null;
    const lat = num(loc?.latitude);
    const lon = num(loc?.longitude);
    if (lat !== null && lon !== null) {
      const zone = str(loc?.name);
      add(
        'Last location',
        `${lat.toFixed(5)}, ${lon.toFixed(5)}${zone ? ` (${zone})` : ''} at ${readableTime(loc?.whenCreated, timeZone) ?? 'an unknown time'}`,
      );
    }
    return { title: cut(`[ALERT] ${asset}: ${str(o.subject) ?? String(o.type ?? 'alert')}`, 300), severity: 'ALERT', facts, link };
  }
  const severity = o.severity === 'ALERT' ? 'ALERT' : 'INFO';
  const current = (o.currentData ?? null) as Record<string, unknown> | null;
  const prev = (o.prevData ?? null) as Record<string, unknown> | null;
  add('When', readableTime(o.whenCreated, timeZone));
  add('Reading', str(current?.value));
  add('Before', str(prev?.value));
  add('Asset', assetId);
  return { title: cut(`[${severity}] ${str(o.subject) ?? 'event'}`, 300), severity, facts, link };
}
