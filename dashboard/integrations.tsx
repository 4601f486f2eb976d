// The integrations, as a portal: every integration the credential sees, by channel, with its stats
// and health; a form to create one of each channel (its signing secret shown once); and one
// integration's page: its attempts live, enable and disable, rotate the signing secret, a test
// event, redelivery and delete, wherever the credential may manage it (the operator's all, a
// customer's its own: API guide 9). Names, never bare ids.
import { useCallback, useEffect, useState } from 'preact/hooks';
import { type Attempt, SHOWN_ROWS } from './attempts.js';
import { all, api, ms, time, usePolling } from './api.js';
import { useHashParam } from './router.js';
import { Badge, ErrorLine, SecretOnce } from './ui.js';

export interface Integration {
  id: string;
  name: string;
  channel: 'webhook' | 'mqtt' | 'kafka' | 'email';
  enabled: boolean;
  ownerIds: string[];
  objectTypes: string[];
  destination: string;
  managedBy: 'operator' | 'customer';
  health?: 'ok' | 'failing' | 'disabled';
  disabledReason?: string | null;
  healthLog?: { at: string; status: string; detail: string }[];
  webhook?: { signingSecret?: string; mode?: string; auth?: { type: string } | null };
  mqtt?: { url: string };
  kafka?: { brokers: string[] };
  stats?: {
    pending: number;
    delivered: { lastHour: number; lastDay: number };
    failed: { lastHour: number; lastDay: number };
    lastError: string | null;
    lastErrorAt: string | null;
    lastSuccessAt: string | null;
    pausedUntil: string | null;
    p50LatencyMs: number | null;
    p99LatencyMs: number | null;
  };
}

interface Owner {
  id: string;
  name: string;
}

const CHANNEL_TITLES: Record<string, string> = { webhook: 'Webhooks', mqtt: 'MQTT', kafka: 'Kafka', email: 'E-mail' };
const RECORD_TYPES = ['asset', 'location', 'sensorData', 'reeferData', 'gensetData', 'oemData'];
const MORE_TYPES = ['event', 'notification', 'command', 'integrationStatus'];

/** Whether this credential may change it: the operator any, a customer those customers made. */
const manageable = (i: Integration, admin: boolean) => admin || i.managedBy === 'customer';
const where = (i: Integration) =>
  i.channel === 'webhook' || i.channel === 'email'
    ? i.destination
    : `${i.channel === 'mqtt' ? i.mqtt?.url : i.kafka?.brokers.join(', ')} · ${i.destination}`;

/** A labelled control: `id` names the control inside (the label points at it). */
function Field({ label, id, children }: { label: string; id: string; children: preact.ComponentChildren }) {
  return (
    <div class="field">
      <label for={id}>{label}</label>
      {children}
    </div>
  );
}

const value = (e: Event) => (e.target as HTMLInputElement).value;

/** The form for a new integration of any channel; answers with what the API answered. */
function NewIntegration({ owners, onCreated, onCancel }: { owners: Owner[]; onCreated: (i: Integration) => void; onCancel: () => void }) {
  const [channel, setChannel] = useState<'webhook' | 'mqtt' | 'kafka' | 'email'>('webhook');
  // A chat format or e-mail tells people about alerts: events and notifications, one message each.
  const [format, setFormat] = useState<'standard' | 'slack' | 'teams'>('standard');
  const [mail, setMail] = useState({ to: '', cc: '', escalateTo: '', escalateAfterMinutes: '30', minIntervalMinutes: '15', timeZone: '' });
  const [name, setName] = useState('');
  const [ownerIds, setOwnerIds] = useState<string[]>(owners[0] ? [owners[0].id] : []);
  const [types, setTypes] = useState<string[]>(['location']);
  const [destination, setDestination] = useState('');
  const [mode, setMode] = useState('single');
  const [auth, setAuth] = useState<'none' | 'basic' | 'apiKey' | 'header'>('none');
  const [user, setUser] = useState('');
  const [secret, setSecret] = useState('');
  const [headerName, setHeaderName] = useState('');
  const [url, setUrl] = useState('');
  const [brokers, setBrokers] = useState('');
  const [tls, setTls] = useState(true);
  const [error, setError] = useState('');
  const toggle = (list: string[], v: string) => (list.includes(v) ? list.filter((x) => x !== v) : [...list, v]);
  const addresses = (text: string) =>
    text
      .split(/[\s,;]+/)
      .map((a) => a.trim())
      .filter(Boolean);
  const forPeople = channel === 'email' || (channel === 'webhook' && format !== 'standard');
  const submit = async (e: Event) => {
    e.preventDefault();
    setError('');
    // A message for people takes the service's defaults: events and notifications, one alert one message.
    const body: Record<string, unknown> = forPeople ? { name, channel, ownerIds } : { name, channel, ownerIds, objectTypes: types };
    if (channel !== 'email') body.destination = destination;
    if (channel === 'email') {
      const escalateTo = addresses(mail.escalateTo);
      body.email = {
        to: addresses(mail.to),
        cc: addresses(mail.cc),
        escalateTo,
        ...(escalateTo.length ? { escalateAfterMinutes: Number(mail.escalateAfterMinutes) } : {}),
        minIntervalMinutes: Number(mail.minIntervalMinutes),
        ...(mail.timeZone ? { timeZone: mail.timeZone } : {}),
      };
    } else if (channel === 'webhook') {
      const a =
        auth === 'basic'
          ? { type: 'basic', username: user, password: secret }
          : auth === 'apiKey'
            ? { type: 'apiKey', token: secret }
            : auth === 'header'
              ? { type: 'header', name: headerName, value: secret }
              : null;
      body.webhook = format === 'standard' ? { mode, auth: a } : { format, auth: a };
    } else if (channel === 'mqtt') {
      body.mqtt = { url, ...(user ? { username: user, password: secret } : {}) };
    } else {
      body.kafka = {
        brokers: brokers
          .split(',')
          .map((b) => b.trim())
          .filter(Boolean),
        ...(user ? { sasl: { mechanism: 'scram-sha-512', username: user, password: secret } } : {}),
        ssl: tls ? {} : null,
      };
    }
    try {
      onCreated(await api<Integration>('POST', '/integrations', body));
    } catch (x) {
      setError((x as Error).message);
    }
  };
  const credentials = channel !== 'email' && (channel !== 'webhook' || auth !== 'none');
  const mailField = (key: keyof typeof mail, label: string, attrs: Record<string, unknown> = {}) => (
    <Field id={`f-${key}`} label={label}>
      <input id={`f-${key}`} name={key} value={mail[key]} onInput={(e) => setMail({ ...mail, [key]: value(e) })} {...attrs} />
    </Field>
  );
  return (
    <form class="panel new-integration" onSubmit={submit}>
      <h3>New integration</h3>
      <Field id="f-name" label="Name">
        <input id="f-name" name="name" required value={name} onInput={(e) => setName(value(e))} />
      </Field>
      <Field id="f-channel" label="Channel">
        <select id="f-channel" name="channel" value={channel} onChange={(e) => setChannel(value(e) as typeof channel)}>
          <option value="webhook">Webhook (HTTPS)</option>
          <option value="mqtt">MQTT broker</option>
          <option value="kafka">Kafka cluster</option>
          <option value="email">E-mail (alerts to people)</option>
        </select>
      </Field>
      {channel === 'webhook' ? (
        <Field id="f-format" label="Format">
          <select id="f-format" name="format" value={format} onChange={(e) => setFormat(value(e) as typeof format)}>
            <option value="standard">the objects as JSON</option>
            <option value="slack">Slack message (alerts)</option>
            <option value="teams">Microsoft Teams card (alerts)</option>
          </select>
        </Field>
      ) : null}
      <fieldset>
        <legend>Owners whose data it sends</legend>
        {owners.map((o) => (
          <label key={o.id} class="check">
            <input type="checkbox" checked={ownerIds.includes(o.id)} onChange={() => setOwnerIds(toggle(ownerIds, o.id))} /> {o.name}
          </label>
        ))}
      </fieldset>
      {forPeople ? (
        <p class="hint">
          {channel === 'email'
            ? 'Sends alerts: one message per alert, from its notification (the filter over the API can add the events that end them).'
            : 'Sends alerts: one message per alert, from its notification, and one for each INFO event (an alert ending, a zone left).'}
        </p>
      ) : (
        <fieldset>
          <legend>What it sends</legend>
          {[...RECORD_TYPES, ...MORE_TYPES].map((t) => (
            <label key={t} class="check">
              <input type="checkbox" name={`type-${t}`} checked={types.includes(t)} onChange={() => setTypes(toggle(types, t))} /> {t}
            </label>
          ))}
        </fieldset>
      )}
      {channel === 'email' ? (
        <>
          {mailField('to', 'To (addresses, comma-separated)', { required: true, placeholder: 'ops@example.com' })}
          {mailField('cc', 'Cc (optional)')}
          {mailField('escalateTo', 'Escalate to (optional): if nobody acknowledges in time')}
          {mail.escalateTo.trim()
            ? mailField('escalateAfterMinutes', 'Escalate after (minutes)', { type: 'number', min: 1, required: true })
            : null}
          {mailField('minIntervalMinutes', 'At most one message per asset every (minutes)', { type: 'number', min: 0, required: true })}
          {mailField('timeZone', 'Time zone of the times in messages (optional)', { placeholder: 'Europe/Amsterdam' })}
          <p class="hint">Recipients of an integration you make confirm by a link mailed to them before they receive alerts.</p>
        </>
      ) : channel === 'webhook' ? (
        <>
          <Field id="f-endpoint" label="Endpoint URL">
            <input
              id="f-endpoint"
              name="destination"
              type="url"
              required
              placeholder="https://example.com/hooks"
              value={destination}
              onInput={(e) => setDestination(value(e))}
            />
          </Field>
          {format === 'standard' ? (
            <Field id="f-mode" label="Mode">
              <select id="f-mode" value={mode} onChange={(e) => setMode(value(e))}>
                <option value="single">one object per request</option>
                <option value="batch">batches (a JSON array)</option>
              </select>
            </Field>
          ) : null}
          <Field id="f-auth" label="Authentication">
            <select id="f-auth" name="auth" value={auth} onChange={(e) => setAuth(value(e) as typeof auth)}>
              <option value="none">none (the signature only)</option>
              <option value="basic">HTTP Basic</option>
              <option value="apiKey">bearer token</option>
              <option value="header">a header of yours</option>
            </select>
          </Field>
          {auth === 'header' ? (
            <Field id="f-headerName" label="Header name">
              <input id="f-headerName" name="headerName" required value={headerName} onInput={(e) => setHeaderName(value(e))} />
            </Field>
          ) : null}
        </>
      ) : (
        <>
          {channel === 'mqtt' ? (
            <Field id="f-url" label="Broker URL">
              <input
                id="f-url"
                name="url"
                required
                placeholder="mqtts://broker.example.com:8883"
                value={url}
                onInput={(e) => setUrl(value(e))}
              />
            </Field>
          ) : (
            <>
              <Field id="f-brokers" label="Brokers (host:port, comma-separated)">
                <input
                  id="f-brokers"
                  name="brokers"
                  required
                  placeholder="kafka1.example.com:9093"
                  value={brokers}
                  onInput={(e) => setBrokers(value(e))}
                />
              </Field>
              <label class="check">
                <input type="checkbox" checked={tls} onChange={() => setTls(!tls)} /> TLS
              </label>
            </>
          )}
          <Field id="f-destination" label="Topic prefix">
            <input
              id="f-destination"
              name="destination"
              required
              placeholder="tracking"
              value={destination}
              onInput={(e) => setDestination(value(e))}
            />
          </Field>
        </>
      )}
      {credentials ? (
        <>
          {auth !== 'apiKey' && auth !== 'header' ? (
            <Field id="f-username" label={channel === 'webhook' ? 'Username' : 'Username (optional)'}>
              <input
                id="f-username"
                name="username"
                autocomplete="off"
                required={channel === 'webhook'}
                value={user}
                onInput={(e) => setUser(value(e))}
              />
            </Field>
          ) : null}
          <Field id="f-secret" label={auth === 'apiKey' ? 'Token' : auth === 'header' ? 'Header value' : 'Password'}>
            <input
              id="f-secret"
              name="secret"
              type="password"
              autocomplete="new-password"
              value={secret}
              onInput={(e) => setSecret(value(e))}
            />
          </Field>
          <p class="hint">Stored encrypted and never shown again; it goes only to this destination.</p>
        </>
      ) : null}
      <div class="actions">
        <button type="submit" class="primary" disabled={!ownerIds.length || (!forPeople && !types.length)}>
          Create
        </button>
        <button type="button" onClick={onCancel}>
          Cancel
        </button>
      </div>
      <ErrorLine error={error} />
    </form>
  );
}

export function Integrations({ admin, attempts }: { admin: boolean; attempts: Attempt[] }) {
  const [list, setList] = useState<Integration[] | null>(null);
  const [owners, setOwners] = useState<Owner[]>([]);
  const [creating, setCreating] = useState(false);
  const [shown, setShown] = useState<{ name: string; secret: string } | null>(null);
  const [error, setError] = useState('');
  const load = useCallback(async () => {
    try {
      // One request for the list and every integration's stats.
      setList(await all<Integration>('/integrations?stats=true'));
    } catch (x) {
      setError((x as Error).message);
    }
  }, []);
  usePolling(load, 15_000);
  useEffect(() => {
    if (creating && !owners.length) all<Owner>('/owners').then(setOwners, (x: Error) => setError(x.message));
  }, [creating, owners.length]);
  const toggle = async (i: Integration) => {
    await api('PATCH', `/integrations/${i.id}`, { enabled: !i.enabled }).catch((x: Error) => setError(x.message));
    void load();
  };
  const created = (i: Integration) => {
    setCreating(false);
    if (i.webhook?.signingSecret) setShown({ name: i.name, secret: i.webhook.signingSecret });
    void load();
  };
  const live = (id: string) => attempts.filter((a) => a.integrationId === id).length;
  const byChannel = (ch: string) => (list ?? []).filter((i) => i.channel === ch);
  return (
    <section>
      <div class="toolbar">
        <h2>Integrations</h2>
        {creating ? null : (
          <button type="button" class="primary" onClick={() => setCreating(true)}>
            New integration
          </button>
        )}
      </div>
      <ErrorLine error={error} />
      {shown ? <SecretOnce label={`Signing secret of ${shown.name}`} value={shown.secret} onDone={() => setShown(null)} /> : null}
      {creating && owners.length ? <NewIntegration owners={owners} onCreated={created} onCancel={() => setCreating(false)} /> : null}
      {['webhook', 'mqtt', 'kafka', 'email'].map((ch) =>
        byChannel(ch).length ? (
          <div key={ch}>
            <h3>{CHANNEL_TITLES[ch]}</h3>
            <table class="grid">
              <thead>
                <tr>
                  <th>name</th>
                  <th>state</th>
                  <th>backlog</th>
                  <th>delivered 1 h / 24 h</th>
                  <th>failed 1 h / 24 h</th>
                  <th>p50 / p99</th>
                  <th>last error</th>
                  <th />
                </tr>
              </thead>
              <tbody>
                {byChannel(ch).map((i) => (
                  <tr key={i.id}>
                    <td>
                      <a href={`#/integrations/${i.id}`}>{i.name}</a>
                      <div class="hint">
                        {i.managedBy === 'operator' ? 'managed by the operator' : 'yours'} · {live(i.id)} attempts streamed
                      </div>
                    </td>
                    <td>
                      {i.stats?.pausedUntil && Date.parse(i.stats.pausedUntil) > Date.now() ? (
                        <Badge ok={false} text={`paused until ${time(i.stats.pausedUntil)}`} />
                      ) : (
                        <Badge ok={i.enabled} text={i.enabled ? 'enabled' : 'disabled'} />
                      )}
                      {i.health === 'failing' ? <Badge ok={false} text="failing" /> : null}
                    </td>
                    <td>{i.stats?.pending ?? '–'}</td>
                    <td>
                      {i.stats?.delivered.lastHour ?? '–'} / {i.stats?.delivered.lastDay ?? '–'}
                    </td>
                    <td>
                      {i.stats?.failed.lastHour ?? '–'} / {i.stats?.failed.lastDay ?? '–'}
                    </td>
                    <td>
                      {ms(i.stats?.p50LatencyMs)} / {ms(i.stats?.p99LatencyMs)}
                    </td>
                    <td class="text">{i.stats?.lastError ? `${time(i.stats.lastErrorAt)}: ${i.stats.lastError}` : '–'}</td>
                    <td>
                      {manageable(i, admin) ? (
                        <button type="button" onClick={() => toggle(i)}>
                          {i.enabled ? 'Disable' : 'Enable'}
                        </button>
                      ) : null}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        ) : null,
      )}
      {list?.length === 0 ? <p>No integrations yet.</p> : null}
    </section>
  );
}

export function IntegrationPage({ id, admin, attempts }: { id: string; admin: boolean; attempts: Attempt[] }) {
  const [integration, setIntegration] = useState<Integration | null>(null);
  // The filters are in the address (`#/integrations/<id>?status=failed&from=…&to=…`).
  const [statusParam, setStatusParam] = useHashParam('status');
  const status: 'all' | 'ok' | 'failed' = statusParam === 'ok' || statusParam === 'failed' ? statusParam : 'all';
  const setStatus = (s: typeof status) => setStatusParam(s === 'all' ? '' : s);
  const [from, setFrom] = useHashParam('from');
  const [to, setTo] = useHashParam('to');
  const [message, setMessage] = useState('');
  const [shownSecret, setShownSecret] = useState('');
  const reload = useCallback(
    () => api<Integration>('GET', `/integrations/${id}`).then(setIntegration, (x: Error) => setMessage(x.message)),
    [id],
  );
  useEffect(() => {
    void reload();
  }, [reload]);
  const may = integration !== null && manageable(integration, admin);
  const shown = attempts.filter(
    (a) =>
      a.integrationId === id &&
      (status === 'all' || (status === 'ok') === a.success) &&
      (!from || a.whenAttempted >= new Date(from).toISOString()) &&
      (!to || a.whenAttempted < new Date(to).toISOString()),
  );
  const act = async (what: string, fn: () => Promise<string>) => {
    try {
      setMessage(await fn());
    } catch (x) {
      setMessage(`${what} failed: ${(x as Error).message}`);
    }
  };
  const redeliver = (a: Attempt) =>
    act('Redeliver', async () => {
      await api('POST', `/integrations/${id}/deliveries/${a.deliveryId}/redeliver`);
      return `Delivery ${a.deliveryId} queued again.`;
    });
  const redeliverRange = () =>
    act('Redeliver', async () => {
      const f = from ? new Date(from) : new Date(Date.now() - 86400_000);
      const t = to ? new Date(to) : new Date(Date.now() + 60_000);
      const r = await api<{ count: number }>('POST', `/integrations/${id}/deliveries/redeliver`, {
        status: 'FAILED',
        from: f.toISOString(),
        to: t.toISOString(),
      });
      return `${r.count} failed deliveries queued again.`;
    });
  const test = () =>
    act('Test', async () => {
      const r = await api<{ success: boolean; status: number | null; responseTimeMs: number; error: string | null }>(
        'POST',
        '/webhooks/test',
        {
          url: integration!.destination,
          integrationId: id,
        },
      );
      return r.success ? `Test event delivered: ${r.status} in ${r.responseTimeMs} ms.` : `Test event failed: ${r.error ?? r.status}`;
    });
  const toggle = () =>
    act('Change', async () => {
      const next = await api<Integration>('PATCH', `/integrations/${id}`, { enabled: !integration!.enabled });
      await reload();
      return next.enabled ? 'Enabled: what is within its backlog window goes out now.' : 'Disabled: nothing is sent until enabled again.';
    });
  const rotate = () =>
    act('Rotation', async () => {
      const next = await api<Integration>('POST', `/integrations/${id}/rotate-signing-secret`, {});
      setShownSecret(next.webhook?.signingSecret ?? '');
      return 'A new signing secret signs from now on; the previous one keeps signing for 24 hours.';
    });
  const remove = () =>
    act('Delete', async () => {
      if (!window.confirm(`Delete ${integration!.name}? Its pending deliveries are cancelled.`)) return '';
      await api('DELETE', `/integrations/${id}`);
      location.hash = '#/integrations';
      return 'Deleted.';
    });
  return (
    <section>
      <h2>{integration?.name ?? 'Integration'}</h2>
      {integration ? (
        <p class="text">
          {integration.channel} to {where(integration)} · sends {integration.objectTypes.join(', ')} ·{' '}
          {integration.managedBy === 'operator' ? 'managed by the operator' : 'managed by you'} ·{' '}
          <Badge ok={integration.enabled} text={integration.enabled ? 'enabled' : 'disabled'} />
        </p>
      ) : null}
      {integration?.health && integration.health !== 'ok' ? (
        <p class={`health ${integration.health}`}>
          {integration.health === 'disabled'
            ? `Disabled: ${integration.disabledReason ?? ''}`
            : 'Failing: every attempt has failed for an hour or more'}
        </p>
      ) : null}
      {integration?.healthLog?.length ? (
        <details>
          <summary>Health changes</summary>
          <ul>
            {integration.healthLog.map((h) => (
              <li key={`${h.at}${h.status}`}>
                {time(h.at)} {h.status}: {h.detail}
              </li>
            ))}
          </ul>
        </details>
      ) : null}
      {shownSecret ? <SecretOnce label="New signing secret" value={shownSecret} onDone={() => setShownSecret('')} /> : null}
      {may ? (
        <div class="actions">
          <button type="button" onClick={toggle}>
            {integration.enabled ? 'Disable' : 'Enable'}
          </button>
          {integration.channel === 'webhook' ? (
            <>
              <button type="button" onClick={test}>
                Send test event
              </button>
              <button type="button" onClick={rotate}>
                Rotate signing secret
              </button>
            </>
          ) : null}
          <button type="button" class="danger" onClick={remove}>
            Delete
          </button>
        </div>
      ) : null}
      <div class="filters">
        <label>
          status{' '}
          <select value={status} onChange={(e) => setStatus(value(e) as typeof status)}>
            <option value="all">all</option>
            <option value="ok">succeeded</option>
            <option value="failed">failed</option>
          </select>
        </label>
        <label>
          from <input type="datetime-local" value={from} onInput={(e) => setFrom(value(e))} />
        </label>
        <label>
          to <input type="datetime-local" value={to} onInput={(e) => setTo(value(e))} />
        </label>
        {may ? (
          <button type="button" onClick={redeliverRange}>
            Redeliver failed in range
          </button>
        ) : null}
      </div>
      <p class="status" role="status">
        {message}
      </p>
      <table class="grid attempts">
        <thead>
          <tr>
            <th>time</th>
            <th>event</th>
            <th>attempt</th>
            <th>result</th>
            <th>response time</th>
            <th>receipt</th>
            <th>error / response</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {shown.slice(0, SHOWN_ROWS).map((a) => (
            <tr key={`${a.requestId ?? ''}${a.deliveryId}.${a.attempt}.${a.whenAttempted}`} class={a.success ? '' : 'failed'}>
              <td>{time(a.whenAttempted)}</td>
              <td>
                {a.objectType} {a.deliveryId}
              </td>
              <td>{a.attempt}</td>
              <td>
                <Badge ok={a.success} text={a.success ? `OK ${a.httpStatus ?? ''}` : `failed ${a.httpStatus ?? ''}`} />
              </td>
              <td>{ms(a.responseTimeMs)}</td>
              <td class="text">{a.receiptId ?? '–'}</td>
              <td class="text excerpt" title={[a.error, a.responseBody?.slice(0, 2000)].filter(Boolean).join('\n')}>
                {[a.error, a.responseBody?.slice(0, 300)].filter(Boolean).join(' · ') || '–'}
              </td>
              <td>
                {may ? (
                  <button type="button" onClick={() => redeliver(a)}>
                    Redeliver
                  </button>
                ) : null}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {shown.length === 0 ? <p>No attempts in this window yet; new ones appear as they happen.</p> : null}
    </section>
  );
}
