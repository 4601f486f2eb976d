// The one rule on a record's time (docs/DESIGN.md, "Storage", API guide 1), which every way in applies: the
// REST creates and the store they share with the device adapters (records.ts storeRecords), and the
// adapters themselves, first, so that their refusal names their own field (OsmAnd's timestamp,
// Traccar's fixTime, an MQTT payload's whenCreated) and a message stores nothing.
//
// A record's time decides the partition its row lands in, and so do the rows it makes (rollups by
// its hour, events and notifications it raises at its time); partitions are made on demand for any
// time (storage/partitions.ts). The window keeps what any caller can make to
//   ceil((RECORD_MAX_AGE_DAYS days + max(FUTURE_TOLERANCE_SECONDS, 1 day)) / PARTITION_INTERVAL) + 1
// partitions per table at any one moment, beside those that time itself leaves behind and retention
// drops (the 1 day: the maintenance task makes the next day's partitions ahead anyway).
import type { Config } from '../config.js';
import { badRequest } from '../http/errors.js';

const DAY = 86_400_000;

export type TimeWindowSettings = Pick<Config, 'RECORD_MAX_AGE_DAYS' | 'FUTURE_TOLERANCE_SECONDS'>;

/** The record times accepted at `now` (ms, inclusive). */
export function recordTimeWindow(cfg: TimeWindowSettings, now = Date.now()): { earliest: number; latest: number } {
  return { earliest: now - cfg.RECORD_MAX_AGE_DAYS * DAY, latest: now + cfg.FUTURE_TOLERANCE_SECONDS * 1000 };
}

/**
 * Refuses a record time (ISO 8601 or ms) outside the window, or no time at all (NaN, a date past
 * JavaScript's range): a 400 naming `field`, the JSON pointer (or query parameter) it came in.
 */
export function checkRecordTime(cfg: TimeWindowSettings, time: string | number, field: string, now = Date.now()): void {
  const ms = typeof time === 'number' ? time : Date.parse(time);
  const name = field.slice(1) || 'the time';
  if (!Number.isFinite(ms) || Number.isNaN(new Date(ms).getTime())) throw badRequest(`${name} is not a time.`, field);
  const { earliest, latest } = recordTimeWindow(cfg, now);
  if (ms < earliest) {
    throw badRequest(
      `${name} (${new Date(ms).toISOString()}) is more than ${cfg.RECORD_MAX_AGE_DAYS} days in the past (RECORD_MAX_AGE_DAYS).`,
      field,
    );
  }
  if (ms > latest) {
    throw badRequest(
      `${name} (${new Date(ms).toISOString()}) is more than ${cfg.FUTURE_TOLERANCE_SECONDS} s in the future (FUTURE_TOLERANCE_SECONDS).`,
      field,
    );
  }
}
