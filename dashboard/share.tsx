// The asset page's share links (API guide 8, "Share links"; 12): make a read-only link to this
// asset (what it shows, until when), copy its URL (shown this once: the service keeps only its
// digest), and list and revoke the asset's links. Asked for once when the page opens and after each
// change: nothing polls.
import { useCallback, useEffect, useState } from 'preact/hooks';
import { all, api, plural, time } from './api.js';
import { ErrorLine } from './ui.js';

interface ShareLink {
  id: string;
  assetIds: string[];
  show: string[];
  windowHours: number;
  note: string | null;
  expiresAt: string;
  status: 'active' | 'expired' | 'revoked';
  uses: number;
  lastUsedAt: string | null;
  whenCreated: string;
}

const PARTS = [
  { key: 'position', label: 'latest position' },
  { key: 'track', label: 'track' },
  { key: 'temperature', label: 'temperature' },
] as const;
/** How long a new link lasts: the choices offered (the API takes up to 90 days). */
const EXPIRIES = [
  { days: 1, label: '1 day' },
  { days: 7, label: '7 days' },
  { days: 30, label: '30 days' },
  { days: 90, label: '90 days' },
];

export function SharePanel({ assetId, name, write }: { assetId: string; name: string; write: boolean | undefined }) {
  const [links, setLinks] = useState<ShareLink[] | null>(null);
  const [show, setShow] = useState<string[]>(['position', 'track']);
  const [days, setDays] = useState(7);
  const [note, setNote] = useState('');
  const [made, setMade] = useState<string | null>(null);
  const [copied, setCopied] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  /** The link whose revocation waits for a second click. */
  const [confirming, setConfirming] = useState<string | null>(null);

  const load = useCallback(async () => {
    try {
      setLinks(await all<ShareLink>(`/share-links?assetId=${encodeURIComponent(assetId)}`, 200));
    } catch (x) {
      setError(`The share links could not be read: ${(x as Error).message}`);
    }
  }, [assetId]);
  useEffect(() => {
    void load();
  }, [load]);

  const create = async () => {
    setBusy(true);
    setError('');
    setCopied(false);
    try {
      const expiresAt = new Date(Date.now() + days * 86_400_000).toISOString();
      const r = await api<ShareLink & { url: string }>('POST', '/share-links', {
        assetIds: [assetId],
        show,
        expiresAt,
        ...(note.trim() ? { note: note.trim() } : {}),
      });
      setMade(r.url);
      setNote('');
      await load();
    } catch (x) {
      setError(`The link could not be made: ${(x as Error).message}`);
    } finally {
      setBusy(false);
    }
  };
  const copy = async () => {
    if (!made) return;
    try {
      await navigator.clipboard.writeText(made);
      setCopied(true);
    } catch {
      setError('Copying was refused by the browser: select the link and copy it.');
    }
  };
  const revoke = async (l: ShareLink) => {
    setConfirming(null);
    setError('');
    try {
      await api('DELETE', `/share-links/${l.id}`);
      await load();
    } catch (x) {
      setError(`The link could not be revoked: ${(x as Error).message}`);
    }
  };
  const toggle = (key: string) => setShow((s) => (s.includes(key) ? s.filter((k) => k !== key) : [...s, key]));

  return (
    <section class="share-links" data-links={links?.length ?? 0}>
      <h3>Share links</h3>
      {write ? (
        <div class="command-form share-form">
          <span class="command">
            Show{' '}
            {PARTS.map((p) => (
              <label key={p.key}>
                <input type="checkbox" name={`share-${p.key}`} checked={show.includes(p.key)} onChange={() => toggle(p.key)} /> {p.label}
              </label>
            ))}
          </span>
          <label>
            for{' '}
            <select name="share-days" value={String(days)} onChange={(e) => setDays(Number((e.target as HTMLSelectElement).value))}>
              {EXPIRIES.map((x) => (
                <option key={x.days} value={String(x.days)}>
                  {x.label}
                </option>
              ))}
            </select>
          </label>
          <label>
            note{' '}
            <input
              type="text"
              name="share-note"
              maxLength={255}
              placeholder="who it is for"
              value={note}
              onInput={(e) => setNote((e.target as HTMLInputElement).value)}
            />
          </label>
          <button type="button" class="primary" disabled={busy || show.length === 0} onClick={() => void create()}>
            Share…
          </button>
        </div>
      ) : write === false ? (
        <p class="hint">Read-only: this credential may not make share links.</p>
      ) : null}
      {made ? (
        <div class="secret-once" role="status">
          <p>
            <strong>The link</strong>: copy it now. It is shown this once; anyone with it sees what it shows, with no sign-in.
          </p>
          <code class="secret share-url" data-secret>
            {made}
          </code>{' '}
          <button type="button" onClick={() => void copy()}>
            {copied ? 'Copied' : 'Copy'}
          </button>{' '}
          <button type="button" onClick={() => setMade(null)}>
            Done
          </button>
        </div>
      ) : null}
      <ErrorLine error={error} />
      {!links ? (
        <p class="hint">Loading…</p>
      ) : links.length ? (
        <table class="grid compact share-list">
          <thead>
            <tr>
              <th>made</th>
              <th>shows</th>
              <th>until</th>
              <th>status</th>
              <th>uses</th>
              <th>note</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {links.map((l) => (
              <tr key={l.id} data-link={l.id} data-status={l.status}>
                <td>{time(l.whenCreated)}</td>
                <td>
                  {l.show.join(', ')}
                  {l.assetIds.length > 1 ? ` (${plural(l.assetIds.length, 'asset')})` : ''}
                </td>
                <td>{time(l.expiresAt)}</td>
                <td>
                  <span class={`badge ${l.status === 'active' ? 'ok' : 'bad'}`}>{l.status}</span>
                </td>
                <td title={l.lastUsedAt ? `last ${time(l.lastUsedAt)}` : 'never used'}>{l.uses}</td>
                <td>{l.note ?? ''}</td>
                <td>
                  {write && l.status === 'active' ? (
                    confirming === l.id ? (
                      <span class="confirm" role="alertdialog" aria-label="Confirm the revocation">
                        Revoke this link to {name}? Whoever has it sees nothing from then on.{' '}
                        <button type="button" class="primary confirm-revoke" onClick={() => void revoke(l)}>
                          Revoke
                        </button>{' '}
                        <button type="button" onClick={() => setConfirming(null)}>
                          Keep
                        </button>
                      </span>
                    ) : (
                      <button type="button" class="cancel revoke" onClick={() => setConfirming(l.id)}>
                        Revoke…
                      </button>
                    )
                  ) : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : (
        <p class="hint">Not shared.</p>
      )}
    </section>
  );
}
