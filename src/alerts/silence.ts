// The silence rule (API guide 8): an asset with no record of any type for silentAlertMinutes
// (its own, else the nearest owner's up the tree; 0 turns it off) raises a SILENT alert, an ALERT
// event and its notification, once per silence; its next record clears it with an INFO event, which
// names that ALERT (clearsEventId) and sets its clearedAt.
//
// Every store keeps the asset's newest record time (asset_activity.last_at) in its own statement,
// with no read first: an upsert that, when it ends an alerted silence, returns the record time the
// silence began at and its ALERT event's id (silent_event_id, kept by the sweep that raised it),
// from which the same statement writes the INFO event and clears the ALERT. The sweep (server clock)
// raises what fell due. Silence is measured from the newest record time (whenCreated), as every
// duration of the alert engine is.
import type { Db } from '../db/db.js';
import { WriteStatement } from '../db/statement.js';
import { sqlIso } from '../db/sql.js';
import type { ObjectType } from '../eventlog/objects.js';
import { type AlertRef, pushEvents } from '../events/events.js';
import { iso } from '../http/schemas.js';
import type { RecordHook } from '../records/hooks.js';
import { raise } from './raise.js';

/** The records hook: the newest record time per asset, and the end of an alerted silence. */
export function silenceHook(types: readonly ObjectType[]): RecordHook<void> {
  return {
    name: 'alerts:silence',
    types,
    write: async (_q, stmt, _rows, _c, records, paths) => {
      // Rows in asset order: concurrent stores lock the same assets in the same order.
      const act = stmt.with(
        `INSERT INTO asset_activity AS t (asset_id, last_at)
         SELECT asset_id, max(when_created) FROM ${records} GROUP BY asset_id ORDER BY asset_id
         ON CONFLICT (asset_id) DO UPDATE SET last_at = EXCLUDED.last_at, silent_since = NULL,
           resumed_from = CASE WHEN t.silent_since IS NOT NULL THEN t.last_at END,
           silent_event_id = CASE WHEN t.silent_since IS NOT NULL THEN t.silent_event_id END
         WHERE EXCLUDED.last_at > t.last_at
         RETURNING asset_id, resumed_from, silent_event_id`,
      );
      const lasted = `round(extract(epoch FROM f.first - a.resumed_from) / 60)::int8::text`;
      const events = stmt.with(
        `INSERT INTO events (owner_id, asset_id, subject, severity, current_data, when_created, clears_event_id)
         SELECT f.owner_id, a.asset_id, 'Data again after ' || ${lasted} || ' minutes without', 'INFO',
                jsonb_build_object('value', ${lasted}, 'whenCreated', ${sqlIso('f.first')}), f.first, a.silent_event_id
           FROM ${act} a
           CROSS JOIN LATERAL (SELECT min(r.when_created) AS first, (array_agg(r.owner_id))[1] AS owner_id
                                 FROM ${records} r WHERE r.asset_id = a.asset_id AND r.when_created > a.resumed_from) f
          WHERE a.resumed_from IS NOT NULL
         RETURNING *`,
      );
      // The ALERT is dated after the silence began (its minutes after resumed_from): that bounds
      // the partitions looked in. A silence alerted before ALERTs were kept (NULL) clears nothing.
      stmt.with(
        `UPDATE events e SET cleared_at = i.when_created
           FROM ${events} i JOIN ${act} a ON a.asset_id = i.asset_id
          WHERE e.id = i.clears_event_id AND e.when_created >= a.resumed_from AND e.cleared_at IS NULL`,
      );
      pushEvents(stmt, events, paths);
    },
  };
}

interface Due {
  asset_id: string;
  owner_id: string;
  last_at: Date;
  minutes: number;
}

const BATCH = 200;

/**
 * The sweep (server clock): raises the silences that lasted their minutes by `now`, in batches
 * locked with SKIP LOCKED (several instances share the work; a store holding a row skips it).
 * Returns the alerts raised.
 */
export async function sweepSilence(db: Db, now: Date): Promise<number> {
  const { rows } = await db.query<{ on: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM owners WHERE silent_alert_minutes > 0) OR EXISTS (SELECT 1 FROM assets WHERE silent_alert_minutes > 0) AS on`,
  );
  if (!rows[0]?.on) return 0;
  let total = 0;
  for (;;) {
    const n = await db.tx(async (q) => {
      const { rows: due } = await q.query<Due>(
        `WITH RECURSIVE eff(id, m) AS (
           SELECT id, silent_alert_minutes FROM owners WHERE parent_id IS NULL
           UNION ALL
           SELECT o.id, COALESCE(o.silent_alert_minutes, eff.m) FROM owners o JOIN eff ON o.parent_id = eff.id
         )
         SELECT t.asset_id, a.owner_id, t.last_at, COALESCE(a.silent_alert_minutes, eff.m) AS minutes
           FROM asset_activity t JOIN assets a ON a.id = t.asset_id JOIN eff ON eff.id = a.owner_id
          WHERE t.silent_since IS NULL AND NOT a.disabled AND COALESCE(a.silent_alert_minutes, eff.m) > 0
            AND t.last_at + make_interval(mins => COALESCE(a.silent_alert_minutes, eff.m)) <= $1
          ORDER BY t.asset_id LIMIT ${BATCH}
          FOR UPDATE OF t SKIP LOCKED`,
        [now.toISOString()],
      );
      if (!due.length) return 0;
      const stmt = new WriteStatement();
      // Dated when the minutes passed; `ref` gets the ALERT's id from raise().
      const alerts = due.map((d) => ({ d, ref: { at: d.last_at.getTime() + d.minutes * 60_000 } as AlertRef }));
      await raise(
        q,
        stmt,
        alerts.map(({ d, ref }) => ({
          event: {
            ownerId: d.owner_id,
            assetId: d.asset_id,
            subject: `No data for more than ${d.minutes} minutes`,
            severity: 'ALERT',
            currentData: { value: String(d.minutes), whenCreated: iso(d.last_at)! },
            prevData: null,
            whenCreated: new Date(ref.at).toISOString(),
            ref,
          },
          notification: {
            type: 'SILENT',
            specificationId: null,
            specificationName: null,
            zoneId: null,
            recordId: null,
            assetState: null,
            cmData: null,
          },
        })),
      );
      // The ALERT's id (raise() took it) stays with the silence, for the INFO that ends it.
      const cols = stmt.arrays(alerts, [
        [(x) => x.d.asset_id, 'uuid'],
        [(x) => x.ref.id, 'int8'],
      ]);
      stmt.with(
        `UPDATE asset_activity t SET silent_since = t.last_at, resumed_from = NULL, silent_event_id = u.event_id
           FROM unnest(${cols}) AS u(asset_id, event_id) WHERE t.asset_id = u.asset_id`,
      );
      await stmt.run(q);
      return due.length;
    });
    total += n;
    if (n < BATCH) return total;
  }
}
