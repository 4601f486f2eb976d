// The audit log (API guide 14): who changed what among the owners this credential sees, newest
// first, a page at a time, filtered by action and resource type. Secrets arrive masked. Users, API
// keys and integrations are shown by name (the ones still there, that the credential may list: an
// operator's users and keys, a customer's own keys and itself), else by id.
import { useEffect, useState } from 'preact/hooks';
import { all, authorization, me, time } from './api.js';
import { useHashParam } from './router.js';
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

/** Names by id from a list, or none when the credential may not read it. */
const namesOf = (path: string, name: (x: any) => string) =>
  all<any>(path).then(
    (list) => list.map((x): [string, string] => [x.id, name(x)]),
    () => [],
  );

export function AuditLog({ admin }: { admin: boolean }) {
  const [entries, setEntries] = useState<Entry[]>([]);
  const [next, setNext] = useState('');
  // The filters are in the address (`#/audit?action=…&resource=…`): a bookmark or a reload keeps them.
  const [action, setAction] = useHashParam('action');
  const [type, setType] = useHashParam('resource');
  const [error, setError] = useState('');
  // Integrations, users and API keys by name, not id (their ids are UUIDs: one map). Users are
  // the operator's to list; a customer knows itself from GET /me.
  const [names, setNames] = useState<Map<string, string>>(new Map());
  useEffect(() => {
    void Promise.all([
      namesOf('/integrations', (i) => i.name),
      namesOf('/api-keys', (k) => k.name),
      admin ? namesOf('/users', (u) => u.username) : Promise.resolve([]),
      me().then((m): [string, string][] => {
        const id = m?.actor.slice(m.actor.indexOf(':') + 1);
        return m?.name && id ? [[id, m.name]] : [];
      }),
    ]).then((lists) => setNames(new Map(lists.flat())));
  }, [admin]);
  const named = (id: string | null) => (id ? (names.get(id) ?? id) : '');
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
              <td class="text" title={e.actor.id ?? ''}>
                {e.actor.type} {named(e.actor.id)}
              </td>
              <td>{e.address ?? '–'}</td>
              <td class="text">
                {e.action} {e.resource.type} {named(e.resource.id)}
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
