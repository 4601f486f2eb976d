// One error catalogue (API guide 6): a stable code, its HTTP status and a short title.
// Every response >= 400 is written from here as {error, message, code, requestId[, field]}.

export const ERRORS = {
  VALIDATION_FAILED: { status: 400, title: 'Bad Request' },
  BAD_CURSOR: { status: 400, title: 'Bad Request' },
  MALFORMED_REQUEST: { status: 400, title: 'Bad Request' },
  UNAUTHENTICATED: { status: 401, title: 'Unauthorized' },
  TOKEN_EXPIRED: { status: 401, title: 'Unauthorized' },
  FORBIDDEN: { status: 403, title: 'Forbidden' },
  NOT_FOUND: { status: 404, title: 'Not Found' },
  METHOD_NOT_ALLOWED: { status: 405, title: 'Method Not Allowed' },
  CONFLICT: { status: 409, title: 'Conflict' },
  NAME_TAKEN: { status: 409, title: 'Conflict' },
  IDEMPOTENCY_IN_PROGRESS: { status: 409, title: 'Conflict' },
  REQUEST_TIMEOUT: { status: 408, title: 'Request Timeout' },
  GONE: { status: 410, title: 'Gone' },
  PAYLOAD_TOO_LARGE: { status: 413, title: 'Payload Too Large' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, title: 'Unsupported Media Type' },
  IDEMPOTENCY_KEY_REUSED: { status: 422, title: 'Unprocessable Content' },
  HEADERS_TOO_LARGE: { status: 431, title: 'Request Header Fields Too Large' },
  RATE_LIMITED: { status: 429, title: 'Too Many Requests' },
  TOO_MANY_CONCURRENT: { status: 429, title: 'Too Many Requests' },
  INTERNAL: { status: 500, title: 'Internal Server Error' },
  DATABASE_UNAVAILABLE: { status: 503, title: 'Service Unavailable' },
  SERVICE_BUSY: { status: 503, title: 'Service Unavailable' },
} as const;

export type ErrorCode = keyof typeof ERRORS;

export class ApiError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly extra: { field?: string; headers?: Record<string, string> } = {},
  ) {
    super(message);
    this.status = ERRORS[code].status;
  }
}

export const notFound = (what: string) => new ApiError('NOT_FOUND', `${what} not found`);
export const badRequest = (message: string, field?: string) =>
  new ApiError('VALIDATION_FAILED', message, field === undefined ? {} : { field });
export const conflict = (message: string, field?: string) => new ApiError('CONFLICT', message, field === undefined ? {} : { field });
export const forbidden = (message: string) => new ApiError('FORBIDDEN', message);

export interface ErrorBody {
  error: string;
  message: string;
  code: string;
  requestId?: string;
  field?: string;
}

export function errorBody(code: ErrorCode, message: string, requestId?: string, field?: string): ErrorBody {
  const body: ErrorBody = { error: ERRORS[code].title, message, code };
  if (requestId) body.requestId = requestId;
  if (field !== undefined) body.field = field;
  return body;
}

/** JSON pointer escaping (RFC 6901). */
export const pointer = (...parts: (string | number)[]) =>
  parts.map((p) => `/${String(p).replace(/~/g, '~0').replace(/\//g, '~1')}`).join('');

// PostgreSQL failures that mean "the database is not there right now": class 08 (connection),
// 57P0x (shutdown, crash), 53300 (too many connections), plus the socket errors of node.
const UNAVAILABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', '57P01', '57P02', '57P03', '53300']);
export function isDatabaseUnavailable(e: unknown): boolean {
  const err = e as { code?: string; message?: string };
  if (!err || typeof err !== 'object') return false;
  if (typeof err.code === 'string' && (UNAVAILABLE_CODES.has(err.code) || err.code.startsWith('08'))) return true;
  // A server on a Unix socket that is down has no socket file: connect fails with ENOENT.
  if (err.code === 'ENOENT' && (err as { syscall?: string }).syscall === 'connect') return true;
  const msg = err.message ?? '';
  return /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error/.test(msg);
}
