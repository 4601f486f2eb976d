// The catalogue of bounds (API guide 7, "Bounds"): every dimension a caller controls, with its
// value, the setting that changes it (null: fixed), what it bounds and what the caller gets past it.
// A route or ingest path takes its bounds from here (fixed ones) or from the setting named here
// (read from the configuration); the API guide's table is this list, and a test compares the two
// and checks that each setting's default is the value stated here. A new way in adds its rows.
//
// Why a bound at all: the service is shared. Whatever one caller can make grow without limit
// (bytes, rows, partitions, CPU on the event loop, open streams) is paid by every other tenant.

export type BoundUnit =
  | 'bytes'
  | 'count'
  | 'milliseconds'
  | 'seconds'
  | 'days'
  | 'hours'
  | 'per second'
  | 'per minute'
  | 'per hour'
  | 'characters';

export interface Bound {
  /** The configuration variable that changes it, or null where it is fixed. */
  readonly setting: string | null;
  /** The value (the setting's default where there is one). */
  readonly value: number;
  readonly unit: BoundUnit;
  /** What it bounds. */
  readonly what: string;
  /** What the caller gets past it. */
  readonly past: string;
}

const MiB = 1024 * 1024;

export const BOUNDS = {
  // ---- HTTP requests ----
  bodyBytes: {
    setting: null,
    value: MiB,
    unit: 'bytes',
    what: 'a request body (JSON, form) on every route but the data-record creates',
    past: '413 PAYLOAD_TOO_LARGE',
  },
  recordBodyBytes: {
    setting: null,
    value: 8 * MiB,
    unit: 'bytes',
    what: 'a body of the data-record creates (bulk)',
    past: '413 PAYLOAD_TOO_LARGE',
  },
  recordBodyBytesPerCredential: {
    setting: null,
    value: 8 * MiB,
    unit: 'bytes',
    what: "a credential's request bodies over 1 MiB (data-record creates) in flight at once",
    past: '429 TOO_MANY_CONCURRENT with Retry-After, before the body is read',
  },
  recordBodyBytesInFlight: {
    setting: 'RECORD_BODY_BYTES_IN_FLIGHT',
    value: 8 * MiB,
    unit: 'bytes',
    what: 'request bodies over 1 MiB (data-record creates) in flight at once, per HTTP process (its heap holds them)',
    past: '503 SERVICE_BUSY with Retry-After, before the body is read',
  },
  alertsPerAcknowledge: {
    setting: null,
    value: 1000,
    unit: 'count',
    what: 'event ids in one POST /events/acknowledge',
    past: '400 VALIDATION_FAILED naming /ids',
  },
  recordsPerRequest: {
    setting: null,
    value: 1000,
    unit: 'count',
    what: 'records in one create or one MQTT message; sensor values of one Traccar position',
    past: '400 VALIDATION_FAILED naming the body',
  },
  dataObjectBytes: {
    setting: null,
    value: 64 * 1024,
    unit: 'bytes',
    what: 'one `data` (reefer, genset, OEM) or `jsonData` (booking) object, as JSON',
    past: '400 VALIDATION_FAILED naming the field',
  },
  textLength: {
    setting: null,
    value: 65536,
    unit: 'characters',
    what: 'any text field of a request (each has its own maxLength in the OpenAPI document, names 32 to 255; this is the longest, a PEM)',
    past: '400 VALIDATION_FAILED naming the field',
  },
  arrayItems: {
    setting: null,
    value: 1000,
    unit: 'count',
    what: 'any list in a request (filter values, owner ids; each has its own maxItems in the OpenAPI document)',
    past: '400 VALIDATION_FAILED naming the field',
  },
  pageSize: {
    setting: null,
    value: 1000,
    unit: 'count',
    what: 'items in one page of a list (`limit`)',
    past: '400 VALIDATION_FAILED naming /limit',
  },
  pageBytes: {
    setting: null,
    value: MiB,
    unit: 'bytes',
    what: "the `data` (reefer, genset, OEM) or `jsonData` (booking) objects of one page of a list, as JSON, and of one export query's rows",
    past: 'the page ends early (at least one item); its Link rel="next" goes on after its last item',
  },
  requestSeconds: {
    setting: 'REQUEST_TIMEOUT_SECONDS',
    value: 30,
    unit: 'seconds',
    what: "a request's headers and body to arrive",
    past: '408 REQUEST_TIMEOUT, connection closed',
  },
  requestsPerWindow: {
    setting: 'RATE_LIMIT_MAX',
    value: 1000,
    unit: 'count',
    what: "a credential's requests per rolling window (RATE_LIMIT_WINDOW_SECONDS, 3600 s)",
    past: '429 RATE_LIMITED with Retry-After',
  },
  requestsInFlight: {
    setting: 'RATE_LIMIT_CONCURRENT',
    value: 10,
    unit: 'count',
    what: "a credential's requests in flight at once",
    past: '429 TOO_MANY_CONCURRENT with Retry-After',
  },
  // ---- Sign-in ----
  signInFailures: {
    setting: 'AUTH_THROTTLE_FAILURES',
    value: 10,
    unit: 'count',
    what: 'failed token requests per username (or client id) and client address in AUTH_THROTTLE_WINDOW_SECONDS (300 s)',
    past: '429 until the window has passed',
  },
  // ---- Data records ----
  futureSeconds: {
    setting: 'FUTURE_TOLERANCE_SECONDS',
    value: 600,
    unit: 'seconds',
    what: "how far in the future a record's time may be",
    past: '400 VALIDATION_FAILED naming the field',
  },
  recordMaxAgeDays: {
    setting: 'RECORD_MAX_AGE_DAYS',
    value: 366,
    unit: 'days',
    what: "how far in the past a record's time may be, on every way in (with futureSeconds it bounds the partitions any input makes: 54 a table, weekly)",
    past: '400 VALIDATION_FAILED naming the field (MQTT: the ingest error log)',
  },
  alertCodesPerList: {
    setting: 'ALERT_MAX_CODES_PER_LIST',
    value: 32,
    unit: 'count',
    what: 'alarm or error codes in one list of one record',
    past: '400 VALIDATION_FAILED naming the list',
  },
  alertEventsPerHour: {
    setting: 'ALERT_MAX_EVENTS_PER_HOUR',
    value: 100,
    unit: 'count',
    what: 'alert events one asset raises per hour of record time',
    past: 'one summary event with a count; the rest not raised',
  },
  // ---- Devices ----
  deviceMessagesPerMinute: {
    setting: 'DEVICE_RATE_LIMIT_MAX',
    value: 600,
    unit: 'per minute',
    what: 'messages one device sends (OsmAnd, Traccar, MQTT refusals counted)',
    past: '429 RATE_LIMITED with Retry-After',
  },
  deviceBodyBytes: {
    setting: null,
    value: 64 * 1024,
    unit: 'bytes',
    what: 'an OsmAnd form or text body',
    past: '413 PAYLOAD_TOO_LARGE',
  },
  ingestMqttMessageBytes: {
    setting: 'INGEST_MQTT_MAX_MESSAGE_BYTES',
    value: 512 * 1024,
    unit: 'bytes',
    what: "one MQTT message's payload (announced to the broker as the Maximum Packet Size)",
    past: 'the broker drops it; one that still arrives is refused unread into the ingest error log',
  },
  ingestMqttBytesInFlight: {
    setting: 'INGEST_MQTT_MAX_BYTES_IN_FLIGHT',
    value: 2 * MiB,
    unit: 'bytes',
    what: 'MQTT payloads received and not yet stored or refused, per instance',
    past: 'the service stops reading; the broker holds the rest',
  },
  ingestMqttReceiveMaximum: {
    setting: 'INGEST_MQTT_RECEIVE_MAXIMUM',
    value: 1000,
    unit: 'count',
    what: 'MQTT messages handed to one instance and not yet acknowledged',
    past: 'the broker holds the rest',
  },
  // ---- Zones ----
  zonesPerOwner: {
    setting: 'ZONES_MAX_PER_OWNER',
    value: 1000,
    unit: 'count',
    what: "zones in one top-level owner's tree",
    past: '409 CONFLICT naming /ownerId, nothing saved',
  },
  zonePositionsPerOwner: {
    setting: 'ZONES_MAX_VERTICES_PER_OWNER',
    value: 100_000,
    unit: 'count',
    what: "positions over the zone shapes of one top-level owner's tree (a circle counts one)",
    past: '409 CONFLICT naming /geometry, nothing saved',
  },
  zonePositions: {
    setting: null,
    value: 10_000,
    unit: 'count',
    what: "positions in one zone's geometry",
    past: '400 VALIDATION_FAILED naming /geometry',
  },
  zoneRowsPerStatement: {
    setting: null,
    value: 1000,
    unit: 'count',
    what: 'zone events one location store holds in memory before it writes them, with the visits they changed (one per zone and asset), in one statement',
    past: 'nothing refused: the store writes more statements',
  },
  eventLoopSliceMs: {
    setting: null,
    value: 10,
    unit: 'milliseconds',
    what: "the event loop's time one tenant's zone matching or zone rules, or the rollup fold's decoding, take before giving it back",
    past: 'nothing refused: the work goes on in the next slice',
  },
  // ---- Integrations and delivery ----
  customerIntegrations: {
    setting: 'CUSTOMER_MAX_INTEGRATIONS',
    value: 10,
    unit: 'count',
    what: "integrations customers' credentials make per top-level owner's tree",
    past: '409 CONFLICT',
  },
  customerItemsPerMinute: {
    setting: 'CUSTOMER_MAX_ITEMS_PER_MINUTE',
    value: 60000,
    unit: 'per minute',
    what: "a customer integration's maxItemsPerMinute",
    past: '400 VALIDATION_FAILED naming the field',
  },
  customerConcurrentRequests: {
    setting: 'CUSTOMER_MAX_CONCURRENT_REQUESTS',
    value: 8,
    unit: 'count',
    what: "a customer integration's maxConcurrentRequests",
    past: '400 VALIDATION_FAILED naming the field',
  },
  commandsOpenPerAsset: {
    setting: 'COMMAND_MAX_OPEN_PER_ASSET',
    value: 100,
    unit: 'count',
    what: 'open commands (PENDING or SENT, not expired) of one asset',
    past: '409 CONFLICT naming /assetId, nothing saved',
  },
  commandPublishes: {
    setting: 'COMMAND_MAX_PUBLISHES',
    value: 10,
    unit: 'count',
    what: 'publishes of one command to its MQTT devices (first, after a lost lease or a refusal, again for a silent device)',
    past: 'not published again; it stays as it is until it is answered or expires',
  },
  commandAttempts: {
    setting: null,
    value: 50,
    unit: 'count',
    what: "entries in one command's history (publishes and answers)",
    past: 'counted in command_attempts_unrecorded_total, not stored; a repeated answer changes nothing anyway',
  },
  emailRecipients: {
    setting: 'EMAIL_MAX_RECIPIENTS',
    value: 10,
    unit: 'count',
    what: "distinct addresses of one e-mail integration (to, cc and escalateTo together), anyone's",
    past: '400 VALIDATION_FAILED naming /email/to',
  },
  emailMessagesPerHour: {
    setting: 'EMAIL_MAX_MESSAGES_PER_HOUR',
    value: 60,
    unit: 'per hour',
    what: "messages a customer's e-mail integration sends in any hour (its maxMessagesPerHour, which defaults to this)",
    past: '400 VALIDATION_FAILED naming /email/maxMessagesPerHour; past the hour, alerts wait for the next digest',
  },
  streamsPerOwner: {
    setting: 'STREAM_MAX_OPEN_PER_OWNER',
    value: 5,
    unit: 'count',
    what: 'result streams open at once per owner (per instance)',
    past: '429 TOO_MANY_CONCURRENT',
  },
  streamWindowHours: {
    setting: 'STREAM_MAX_WINDOW_HOURS',
    value: 168,
    unit: 'hours',
    what: "how far back a result stream's `since` reaches",
    past: '400 VALIDATION_FAILED naming /since',
  },
  streamAnswerBytes: {
    setting: 'STREAM_MAX_ANSWER_BYTES',
    value: 64 * MiB,
    unit: 'bytes',
    what: 'one NDJSON result-stream answer',
    past: 'the answer ends with a `next` line naming where to go on',
  },
  streamLast: {
    setting: null,
    value: 10_000,
    unit: 'count',
    what: "lines a result stream's replay starts back from (`last`; the dashboard asks for 2,000)",
    past: '400 VALIDATION_FAILED naming /last',
  },
  liveStreamsPerOwner: {
    setting: 'LIVE_MAX_OPEN_PER_OWNER',
    value: 10,
    unit: 'count',
    what: 'live fleet streams open at once per owner (per instance)',
    past: '429 TOO_MANY_CONCURRENT with Retry-After',
  },
  liveStreams: {
    setting: 'LIVE_MAX_OPEN',
    value: 1000,
    unit: 'count',
    what: 'live fleet streams open at once per HTTP process, all owners together',
    past: '503 SERVICE_BUSY with Retry-After',
  },
  liveSnapshotAssets: {
    setting: null,
    value: 10_000,
    unit: 'count',
    what: "assets in a live fleet stream's snapshot (those with the newest positions first)",
    past: 'the snapshot says `truncated: true`; updates still come for every visible asset',
  },
  liveQueuedMessages: {
    setting: null,
    value: 1000,
    unit: 'count',
    what: "a live fleet stream's events, notifications and asset changes waiting for a client that does not read (positions wait as one per asset, the latest)",
    past: 'the stream ends with an `end` event, reason SLOW_CLIENT',
  },
  liveBufferedBytes: {
    setting: null,
    value: MiB,
    unit: 'bytes',
    what: 'bytes written to a live fleet stream and not yet taken by its client',
    past: 'the stream ends with an `end` event, reason SLOW_CLIENT',
  },
  // ---- Exports and reports ----
  exportDays: {
    setting: 'EXPORT_MAX_DAYS',
    value: 366,
    unit: 'days',
    what: "an export's from..to range",
    past: '400 VALIDATION_FAILED naming /from',
  },
  reportDays: {
    setting: 'REPORT_MAX_DAYS',
    value: 92,
    unit: 'days',
    what: "a report's from..to range",
    past: '400 VALIDATION_FAILED naming /from',
  },
  overviewAssets: {
    setting: 'OVERVIEW_MAX_ASSETS',
    value: 1000,
    unit: 'count',
    what: 'assets one asset overview answer covers (GET /assets/overview, JSON pages and CSV): the first by name that its search and asset filters leave',
    past: 'the rest are left out of that answer, which says `Overview-Truncated: true`; search or filter (q, ownerId, disabled) to reach them',
  },
  // ---- Share links (API guide 8, "Share links") ----
  shareAssetsPerLink: {
    setting: null,
    value: 100,
    unit: 'count',
    what: 'assets in one share link (`assetIds`)',
    past: '400 VALIDATION_FAILED naming /assetIds',
  },
  shareLinksPerOwner: {
    setting: 'SHARE_MAX_LINKS_PER_OWNER',
    value: 1000,
    unit: 'count',
    what: "share links in effect (neither expired nor revoked) in one top-level owner's tree; as many ended ones are kept (their pages answer 410), older ended ones are removed",
    past: '409 CONFLICT, nothing saved',
  },
  shareExpiryDays: {
    setting: null,
    value: 90,
    unit: 'days',
    what: "how far ahead a share link's `expiresAt` may lie",
    past: '400 VALIDATION_FAILED naming /expiresAt',
  },
  shareWindowHours: {
    setting: null,
    value: 168,
    unit: 'hours',
    what: 'the time back a share link shows a track and temperatures for (`windowHours`)',
    past: '400 VALIDATION_FAILED naming /windowHours',
  },
  shareRowsRead: {
    setting: null,
    value: 10_000,
    unit: 'count',
    what: 'records one share page or data answer reads of its asset per source (locations, reefer data, temperature sensor data): the newest of the window',
    past: 'the series start later; each one says from when (`from`)',
  },
  sharePoints: {
    setting: null,
    value: 1000,
    unit: 'count',
    what: 'points of one series in a share page or data answer',
    past: 'thinned evenly (every n-th point, the newest always kept)',
  },
  shareUsesPerMinute: {
    setting: 'SHARE_MAX_USES_PER_MINUTE',
    value: 60,
    unit: 'per minute',
    what: 'answered uses of one share link (its page and its data, from every address; counted in the database, so for the whole service)',
    past: '429 RATE_LIMITED with Retry-After; not counted as a use',
  },
  shareRequestsPerAddress: {
    setting: 'SHARE_MAX_REQUESTS_PER_ADDRESS',
    value: 300,
    unit: 'per minute',
    what: 'requests for share pages and data from one client address, whatever their token (per HTTP process; per instance with REDIS_URL)',
    past: '429 RATE_LIMITED with Retry-After, before the token is looked up',
  },
  // ---- Booking data (API guide 8, "Booking data") ----
  bookingAssetLinks: {
    setting: null,
    value: 1000,
    unit: 'count',
    what: 'asset links of one booking (`POST /booking-data/{id}/assets`)',
    past: '409 CONFLICT, nothing saved; delete a link first',
  },
  // ---- DCSA Track & Trace (API guide 18) ----
  dcsaPageEvents: {
    setting: null,
    value: 1000,
    unit: 'count',
    what: 'events one page of `GET /api/dcsa/tnt/v3/events` holds (`limit`, default 100)',
    past: '400 BAD_REQUEST naming /limit',
  },
  dcsaPageRows: {
    setting: null,
    value: 20_000,
    unit: 'count',
    what: 'rows of records one page of DCSA events reads to find its events (however few of them make events: other sensors, thinned locations, rows outside the filters)',
    past: 'the page ends early, shorter, with a Next-Page-Cursor that reads on from where it stopped',
  },
  // ---- Rows that nobody signed in can cause ----
  ingestErrorRowsPerSecond: {
    setting: null,
    value: 100,
    unit: 'per second',
    what: "ingest error log rows for known devices' messages, per instance",
    past: 'counted in ingest_errors_unlogged_total, not written',
  },
  ingestUnknownErrorsPerAddress: {
    setting: 'INGEST_UNKNOWN_ERRORS_PER_ADDRESS',
    value: 10,
    unit: 'per minute',
    what: 'ingest error log rows for messages naming no known device, per client address and instance',
    past: 'counted in ingest_errors_unlogged_total, not written',
  },
  ingestUnknownErrorsPerMinute: {
    setting: 'INGEST_UNKNOWN_ERRORS_PER_MINUTE',
    value: 300,
    unit: 'per minute',
    what: 'the same rows from all addresses together, per instance',
    past: 'counted in ingest_errors_unlogged_total, not written',
  },
  unknownSignInWindow: {
    setting: 'AUDIT_UNKNOWN_SIGN_IN_WINDOW_SECONDS',
    value: 3600,
    unit: 'seconds',
    what: 'failed sign-ins naming no existing user or client: one audit entry per client address, kind and window (per instance)',
    past: "later attempts add to that entry's `attempts`",
  },
} as const satisfies Record<string, Bound>;

export type BoundName = keyof typeof BOUNDS;

/** A bound's value as the API guide's table shows it (bytes in KiB or MiB where whole). */
export function formatBound(b: Bound): string {
  const n = b.value;
  if (b.unit === 'bytes') {
    if (n >= MiB && n % MiB === 0) return `${n / MiB} MiB`;
    if (n >= 1024 && n % 1024 === 0) return `${n / 1024} KiB`;
    return `${n} B`;
  }
  const grouped = n.toLocaleString('en-US');
  if (b.unit === 'count') return grouped;
  if (b.unit === 'seconds') return `${grouped} s`;
  if (b.unit === 'milliseconds') return `${grouped} ms`;
  return `${grouped} ${b.unit}`;
}

/** The API guide's table, row by row (a test compares it with docs/API.md). */
export function boundsTable(): string[] {
  const rows = ['| Bound | Setting | Value | What it bounds | Past it |', '|---|---|---|---|---|'];
  for (const [name, b] of Object.entries(BOUNDS) as [string, Bound][]) {
    rows.push(`| \`${name}\` | ${b.setting ? `\`${b.setting}\`` : 'fixed'} | ${formatBound(b)} | ${b.what} | ${b.past} |`);
  }
  return rows;
}
