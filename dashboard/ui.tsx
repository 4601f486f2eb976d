// Small pieces every view uses. Text only: nothing here sets HTML.
import { useState } from 'preact/hooks';
import { actor, api, download, time } from './api.js';

export function Badge({ ok, text }: { ok: boolean; text: string }) {
  return <span class={ok ? 'badge ok' : 'badge bad'}>{text}</span>;
}

export function ErrorLine({ error }: { error: string }) {
  return error ? (
    <p class="error" role="alert">
      {error}
    </p>
  ) : null;
}

/** A secret shown once (a new signing secret): copy it now, it is never shown again. */
export function SecretOnce({ label, value, onDone }: { label: string; value: string; onDone: () => void }) {
  return (
    <div class="secret-once" role="alert">
      <p>
        <strong>{label}</strong>: copy it now. It is shown this once and never again.
      </p>
      <code class="secret" data-secret>
        {value}
      </code>
      <button type="button" onClick={onDone}>
        I have copied it
      </button>
    </div>
  );
}

/**
 * "Download CSV": the file a list or report answers with `format=csv` (`path` under /api/v1),
 * fetched with the credential and saved as `name`. A failure shows next to the button.
 */
export function DownloadCsv({ path, name, label = 'Download CSV' }: { path: string; name: string; label?: string }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const go = async () => {
    setBusy(true);
    setError('');
    try {
      await download(path, name);
    } catch (x) {
      setError(`Download failed: ${(x as Error).message}`);
    } finally {
      setBusy(false);
    }
  };
  return (
    <span class="download">
      <button type="button" class="download" disabled={busy} onClick={go} title={`${name} (CSV)`}>
        {busy ? 'Preparing…' : label}
      </button>
      {error ? (
        <span class="error" role="alert">
          {error}
        </span>
      ) : null}
    </span>
  );
}

/** An actor as people read it: "you", or its kind and the start of its id. */
function whoActed(a: string | null): string {
  if (!a) return 'someone';
  if (a === actor()) return 'you';
  const [kind, id = ''] = a.split(/:(.*)/s);
  const label: Record<string, string> = { user: 'a user', apikey: 'API key', client: 'client', external: 'external user' };
  return `${label[kind!] ?? kind} ${id.slice(0, 8)}`.trim();
}

/**
 * An alert's acknowledgement (an ALERT event or a notification, `kind`): who and when once someone
 * acknowledged it, else an "Acknowledge" button; `onDone` gets the object as the API answers it.
 */
export function Acknowledge<T extends { id: string; acknowledgedAt: string | null; acknowledgedBy: string | null }>({
  kind,
  item,
  onDone,
}: {
  kind: 'events' | 'notifications';
  item: T;
  onDone: (updated: T) => void;
}) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  if (item.acknowledgedAt) {
    const by = whoActed(item.acknowledgedBy);
    return (
      <span class="acknowledged" title={`Acknowledged ${time(item.acknowledgedAt)} by ${by}`}>
        ✓ acknowledged by {by}, {time(item.acknowledgedAt)}
      </span>
    );
  }
  return (
    <span class="acknowledge">
      <button
        type="button"
        disabled={busy}
        onClick={() => {
          setBusy(true);
          setError('');
          api<T>('POST', `/${kind}/${item.id}/acknowledge`)
            .then(onDone, (x: Error) => setError(x.message))
            .finally(() => setBusy(false));
        }}
      >
        Acknowledge
      </button>
      {error ? <span class="error">{error}</span> : null}
    </span>
  );
}
