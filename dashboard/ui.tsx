// Small pieces every view uses. Text only: nothing here sets HTML.
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
