// The asset page's commands (API guide 8 and 12): send a reefer a command (set point, mode,
// defrost, pre-trip inspection, clear alarms), each after a confirmation naming what goes to which
// asset, and follow the asset's last ten commands from PENDING to SENT to ACKNOWLEDGED or FAILED.
// The list is asked for every 2 s only while one of them is still open (PENDING or SENT), so a page
// left open with nothing on its way costs no requests; the polling ends with the page. A
// SETPOINT_MISMATCH alert of the asset still open offers the specification's set point in one
// click, through the same confirmation. A FAILED command shows the device's reason (its answer in
// the command's history, GET /commands/{id}: an MQTT device's message). A credential without
// `write` sees the list only.
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { api, time, usePolling } from './api.js';
import { ErrorLine } from './ui.js';

export interface Command {
  id: string;
  type: string;
  parameters: Record<string, unknown> | null;
  status: 'PENDING' | 'SENT' | 'ACKNOWLEDGED' | 'FAILED' | 'CANCELLED' | 'EXPIRED';
  whoCreated: string;
  whenCreated: string;
  whenUpdated: string;
}
/** A command the operator is about to send, waiting for the confirmation. */
export interface Proposal {
  type: string;
  parameters: Record<string, unknown> | null;
  /** Why it is proposed (the alert it answers), shown in the confirmation. */
  why?: string;
}
interface Alert {
  id: string;
  subject: string;
  severity: string;
  whenCreated: string;
  clearedAt: string | null;
}

/** Still on its way to the device: the list is followed while one is. */
const OPEN = new Set(['PENDING', 'SENT']);
const MODES = ['continuous', 'cycle', 'sleep'];
const POLL_MS = 2000;
/** The set point a reefer controller takes (the API refuses anything else with a 400). */
const SETPOINT_MIN = -40;
const SETPOINT_MAX = 40;

/** A command as people read it: its type and its parameter ("SET_TEMPERATURE -18 °C"). */
export function describe(c: { type: string; parameters: Record<string, unknown> | null }): string {
  const p = c.parameters ?? {};
  if (c.type === 'SET_TEMPERATURE' && typeof p.value === 'number') return `${c.type} ${p.value} °C`;
  if (typeof p.value === 'number') return `${c.type} ${p.value}`;
  if (c.type === 'SET_MODE' && typeof p.mode === 'string') return `${c.type} ${p.mode}`;
  return c.type;
}

/** An open (not yet cleared) SETPOINT_MISMATCH alert: the reefer runs at another set point than its cargo's. */
export const isOpenSetpointMismatch = (e: { severity?: string; subject?: string; clearedAt?: string | null }) =>
  e.severity === 'ALERT' && typeof e.subject === 'string' && e.subject.startsWith('SETPOINT_MISMATCH: ') && !e.clearedAt;

/** The specification's set point, proposed for a mismatch alert. */
export const correctSetpoint = (setpoint: number, alert: { subject: string }): Proposal => ({
  type: 'SET_TEMPERATURE',
  parameters: { value: setpoint },
  why: alert.subject,
});

/** A button that proposes the specification's set point for a mismatch alert (the asset page's events list has it too). */
export function SendSpecSetpoint({
  setpoint,
  alert,
  onPropose,
}: {
  setpoint: number | null;
  alert: Alert;
  onPropose: (p: Proposal) => void;
}) {
  return (
    <button
      type="button"
      class="send-setpoint"
      disabled={setpoint == null}
      title={setpoint == null ? 'The specification names no temperatureSetpoint' : `SET_TEMPERATURE ${setpoint} °C`}
      onClick={() => setpoint != null && onPropose(correctSetpoint(setpoint, alert))}
    >
      Send the specification's set point{setpoint == null ? '' : ` (${setpoint} °C)`}
    </button>
  );
}

export function CommandsPanel({
  assetId,
  name,
  setpoint,
  write,
  proposal,
  onPropose,
}: {
  assetId: string;
  name: string;
  /** The specification's temperatureSetpoint, if it has one. */
  setpoint: number | null;
  /** Whether the credential may send (the `write` scope); undefined while not yet known. */
  write: boolean | undefined;
  proposal: Proposal | null;
  onPropose: (p: Proposal | null) => void;
}) {
  const [commands, setCommands] = useState<Command[]>();
  const [alerts, setAlerts] = useState<Alert[]>([]);
  // What sending or cancelling answered (kept until the next try), and whether the last read failed.
  const [error, setError] = useState('');
  const [readError, setReadError] = useState('');
  const [busy, setBusy] = useState(false);
  const [value, setValue] = useState(setpoint == null ? '' : String(setpoint));
  const [mode, setMode] = useState(MODES[0]!);
  const confirmRef = useRef<HTMLDivElement>(null);
  /** A FAILED command's reason, from its history (asked once per command; null: none given). */
  const [reasons, setReasons] = useState<Record<string, string | null>>({});
  const asked = useRef(new Set<string>());
  useEffect(() => {
    if (setpoint != null) setValue((v) => (v === '' ? String(setpoint) : v));
  }, [setpoint]);

  // The asset's last ten commands, and its open alerts (a set-point mismatch offers its remedy).
  const load = useCallback(async () => {
    try {
      const [c, a] = await Promise.all([
        api<Command[]>('GET', `/commands?assetId=${assetId}&limit=10`),
        api<Alert[]>('GET', `/events?assetId=${assetId}&severity=ALERT&limit=20`),
      ]);
      setCommands(c);
      setAlerts(a);
      setReadError('');
    } catch (x) {
      setReadError(`The commands could not be read: ${(x as Error).message}`);
    }
  }, [assetId]);
  useEffect(() => {
    void load();
  }, [load]);
  const open = commands?.some((c) => OPEN.has(c.status)) ?? false;
  usePolling(load, POLL_MS, open);
  useEffect(() => {
    for (const c of commands ?? []) {
      if (c.status !== 'FAILED' || asked.current.has(c.id)) continue;
      asked.current.add(c.id);
      api<{ attempts?: { kind: string; status: string; message: string | null }[] }>('GET', `/commands/${c.id}`).then(
        (d) => {
          const answer = (d.attempts ?? []).filter((a) => a.kind === 'answer' && a.status === 'FAILED').pop();
          setReasons((cur) => ({ ...cur, [c.id]: answer?.message ?? null }));
        },
        () => undefined,
      );
    }
  }, [commands]);

  // A proposal made elsewhere on the page (an alert's button) is brought into view to be confirmed.
  useEffect(() => {
    if (proposal) confirmRef.current?.scrollIntoView({ block: 'nearest' });
  }, [proposal]);

  const send = async (p: Proposal) => {
    setBusy(true);
    setError('');
    try {
      const made = await api<Command>('POST', '/commands', { assetId, type: p.type, parameters: p.parameters });
      // Shown at once as PENDING; being open, it turns the polling on.
      setCommands((cur) => [made, ...(cur ?? []).filter((c) => c.id !== made.id)].slice(0, 10));
      onPropose(null);
    } catch (x) {
      setError(`${describe(p)} was not sent: ${(x as Error).message}`);
      onPropose(null);
    } finally {
      setBusy(false);
    }
  };
  const cancel = async (c: Command) => {
    setError('');
    try {
      await api('DELETE', `/commands/${c.id}`);
      await load();
    } catch (x) {
      setError(`${describe(c)} could not be cancelled: ${(x as Error).message}`);
    }
  };

  const number = value.trim() === '' ? Number.NaN : Number(value);
  const valueOk = Number.isFinite(number) && number >= SETPOINT_MIN && number <= SETPOINT_MAX;
  const mismatch = alerts.find(isOpenSetpointMismatch);
  // Once the specification's set point was acknowledged after the alert, the alert clears with the
  // reefer's next report: say so rather than offer to send it again.
  const remedied =
    mismatch &&
    setpoint != null &&
    commands?.find(
      (c) =>
        c.type === 'SET_TEMPERATURE' &&
        c.parameters?.value === setpoint &&
        c.status !== 'FAILED' &&
        c.status !== 'CANCELLED' &&
        c.status !== 'EXPIRED' &&
        Date.parse(c.whenCreated) >= Date.parse(mismatch.whenCreated),
    );

  return (
    <section class="commands" data-polling={open ? 'on' : 'off'}>
      <h3>Commands</h3>
      {mismatch ? (
        <div class="mismatch" role="status" data-event={mismatch.id}>
          <span>
            {time(mismatch.whenCreated)} · {mismatch.subject}
          </span>
          {remedied ? (
            <span class="hint">
              {describe(remedied)} {remedied.status.toLowerCase()}: the alert clears when the reefer reports it.
            </span>
          ) : write ? (
            <SendSpecSetpoint setpoint={setpoint} alert={mismatch} onPropose={onPropose} />
          ) : null}
        </div>
      ) : null}
      {write ? (
        <div class="command-form">
          <span class="command">
            <label>
              Set point{' '}
              <input
                type="number"
                name="setpoint"
                step="0.1"
                min={SETPOINT_MIN}
                max={SETPOINT_MAX}
                value={value}
                onInput={(e) => setValue((e.target as HTMLInputElement).value)}
              />{' '}
              °C
            </label>
            <button
              type="button"
              disabled={!valueOk || busy}
              onClick={() => onPropose({ type: 'SET_TEMPERATURE', parameters: { value: number } })}
            >
              Set temperature…
            </button>
          </span>
          <span class="command">
            <label>
              Mode{' '}
              <select name="mode" value={mode} onChange={(e) => setMode((e.target as HTMLSelectElement).value)}>
                {MODES.map((m) => (
                  <option key={m} value={m}>
                    {m}
                  </option>
                ))}
              </select>
            </label>
            <button type="button" disabled={busy} onClick={() => onPropose({ type: 'SET_MODE', parameters: { mode } })}>
              Set mode…
            </button>
          </span>
          <button type="button" disabled={busy} onClick={() => onPropose({ type: 'START_DEFROST', parameters: null })}>
            Defrost…
          </button>
          <button type="button" disabled={busy} onClick={() => onPropose({ type: 'START_PTI', parameters: null })}>
            Pre-trip inspection…
          </button>
          <button type="button" disabled={busy} onClick={() => onPropose({ type: 'CLEAR_ALARMS', parameters: null })}>
            Clear alarms…
          </button>
        </div>
      ) : write === false ? (
        <p class="hint">Read-only: this credential may not send commands.</p>
      ) : null}
      {write && proposal ? (
        <div class="confirm" role="alertdialog" aria-label="Confirm the command" ref={confirmRef}>
          <p>
            Send <strong>{describe(proposal)}</strong> to <strong>{name}</strong>?
            {proposal.why ? <span class="hint"> ({proposal.why})</span> : null}
          </p>
          <button type="button" class="primary" disabled={busy} onClick={() => void send(proposal)}>
            Send
          </button>
          <button type="button" disabled={busy} onClick={() => onPropose(null)}>
            Cancel
          </button>
        </div>
      ) : null}
      <ErrorLine error={error} />
      <ErrorLine error={readError} />
      {!commands ? (
        <p class="hint">Loading…</p>
      ) : commands.length ? (
        <table class="grid compact command-list">
          <thead>
            <tr>
              <th>created</th>
              <th>command</th>
              <th>status</th>
              <th>last change</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {commands.map((c) => (
              <tr key={c.id} data-command={c.id} data-status={c.status}>
                <td>{time(c.whenCreated)}</td>
                <td>{describe(c)}</td>
                <td>
                  <span class={`badge status-${c.status.toLowerCase()}`}>{c.status}</span>
                  {reasons[c.id] ? <span class="reason">{reasons[c.id]}</span> : null}
                </td>
                <td>{c.whenUpdated === c.whenCreated ? '–' : time(c.whenUpdated)}</td>
                <td>
                  {write && c.status === 'PENDING' ? (
                    <button type="button" class="cancel" onClick={() => void cancel(c)}>
                      Cancel
                    </button>
                  ) : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : (
        <p class="hint">No commands yet.</p>
      )}
    </section>
  );
}
