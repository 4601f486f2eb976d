// The audit log (API guide 14): who changed what among the owners this credential sees, newest
// first, a page at a time, filtered by action and resource type. Secrets arrive masked.
import { useEffect, useState } from 'preact/hooks';
import { all, authorization, time } from './api.js';
import { ErrorLine } from './ui.js';

interface Entry {
  id: string;
  at: string;
  actor: { type: string; id: string | null };
  address: string | null;
  action: string;
  resource: { type: string; id: string | null };
  changes: Record<string, { from?: unknown; to?: unknown }> | null;
}

const show = (v: unknown) => (v === undefined ? '' : typeof v === 'string' ? v : JSON.stringify(v));

export function AuditLog() {
  const [entries, setEntries] = useState<Entry[]>([]);
  const [next, setNext] = useState('');
  const [action, setAction] = useState('');
  const [type, setType] = useState('');
  const [error, setError] = useState('');
  // Integrations by name, not id (the ones still there).
  const [names, setNames] = useState<Map<string, string>>(new Map());
  useEffect(() => {
    all<{ id: string; name: string }>('/integrations').then(
      (list) => setNames(new Map(list.map((i) => [i.id, i.name]))),
      () => undefined,
    );
  }, []);
  const load = async (url: string, append: boolean) => {
    try {
      const r = await fetch(url, { headers: authorization() });
      if (!r.ok) throw new Error(`${r.status}`);
      const page = (await r.json()) as Entry[];
      setEntries((cur) => (append ? [...cur, ...page] : page));
      const link = /<([^>]+)>;\s*rel="next"/.exec(r.headers.get('link') ?? '');
      setNext(link ? new URL(link[1]!).pathname + new URL(link[1]!).search : '');
    } catch (x) {
      setError(`The audit log could not be read: ${(x as Error).message}`);
    }
  };
  useEffect(() => {
    const q = new URLSearchParams({ limit: '50' });
    if (action) q.set('action', action);
    if (type) q.set('resourceType', type);
    void load(`/api/v1/audit?${q}`, false);
  }, [action, type]);
  return (
    <section>
      <h2>Audit log</h2>
      <div class="filters">
        <label>
          action{' '}
          <select value={action} onChange={(e) => setAction((e.target as HTMLSelectElement).value)}>
            <option value="">all</option>
            {['create', 'update', 'delete', 'enable', 'disable', 'rotate', 'redeliver', 'test', 'signIn', 'signInFailed', 'signOut'].map(
              (a) => (
                <option key={a} value={a}>
                  {a}
                </option>
              ),
            )}
          </select>
        </label>
        <label>
          resource{' '}
          <select value={type} onChange={(e) => setType((e.target as HTMLSelectElement).value)}>
            <option value="">all</option>
            {[
              'integration',
              'asset',
              'owner',
              'user',
              'apiKey',
              'client',
              'zone',
              'specification',
              'command',
              'bookingData',
              'delivery',
              'device',
            ].map((t) => (
              <option key={t} value={t}>
                {t}
              </option>
            ))}
          </select>
        </label>
      </div>
      <ErrorLine error={error} />
      <table class="grid audit">
        <thead>
          <tr>
            <th>when</th>
            <th>who</th>
            <th>from</th>
            <th>what</th>
            <th>changes</th>
          </tr>
        </thead>
        <tbody>
          {entries.map((e) => (
            <tr key={e.id}>
              <td>{time(e.at)}</td>
              <td class="text">
                {e.actor.type} {e.actor.id ?? ''}
              </td>
              <td>{e.address ?? '–'}</td>
              <td class="text">
                {e.action} {e.resource.type} {(e.resource.id && names.get(e.resource.id)) ?? e.resource.id ?? ''}
              </td>
              <td class="text excerpt">
                {e.changes
                  ? Object.entries(e.changes)
                      .map(([k, c]) => `${k}: ${'from' in c ? `${show(c.from)} → ` : ''}${show(c.to)}`)
                      .join('\n')
                  : '–'}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {next ? (
        <button type="button" onClick={() => load(next, true)}>
          Older entries
        </button>
      ) : null}
      {entries.length === 0 ? <p>No entries.</p> : null}
    </section>
  );
}
