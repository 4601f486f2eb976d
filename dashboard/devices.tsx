// Devices (API guide 15): the trackers that send their data themselves, with their asset, when
// each was last seen and the last thing it sent that could not be stored. A form registers one;
// an OsmAnd device's generated uniqueId is its credential, shown with the server URL the Traccar
// Client app needs. Enable and disable in place.
import { useEffect, useState } from 'preact/hooks';
import { all, api, time } from './api.js';
import { Badge, ErrorLine } from './ui.js';

interface Device {
  id: string;
  uniqueId: string;
  assetId: string;
  protocol: 'osmand' | 'traccar' | 'mqtt';
  disabled: boolean;
  lastSeenAt: string | null;
  lastError: string | null;
  lastErrorAt: string | null;
}

export function Devices({ admin }: { admin: boolean }) {
  const [devices, setDevices] = useState<Device[]>([]);
  const [assets, setAssets] = useState<Map<string, string>>(new Map());
  const [error, setError] = useState('');
  const [made, setMade] = useState<Device | null>(null);
  const [assetId, setAssetId] = useState('');
  const [protocol, setProtocol] = useState<Device['protocol']>('osmand');
  const [uniqueId, setUniqueId] = useState('');
  const load = async () => {
    try {
      const [d, a] = await Promise.all([all<Device>('/devices'), all<{ id: string; name: string }>('/assets')]);
      setDevices(d);
      setAssets(new Map(a.map((x) => [x.id, x.name])));
      setError('');
    } catch (x) {
      setError(`The devices could not be read: ${(x as Error).message}`);
    }
  };
  useEffect(() => {
    void load();
  }, []);
  const register = async (e: Event) => {
    e.preventDefault();
    try {
      const body: Record<string, unknown> = { assetId, protocol };
      if (admin && uniqueId) body.uniqueId = uniqueId;
      setMade(await api<Device>('POST', '/devices', body));
      setUniqueId('');
      await load();
    } catch (x) {
      setError(`The device could not be registered: ${(x as Error).message}`);
    }
  };
  const toggle = async (d: Device) => {
    try {
      await api('PATCH', `/devices/${d.id}`, { disabled: !d.disabled });
      await load();
    } catch (x) {
      setError(`The device could not be changed: ${(x as Error).message}`);
    }
  };
  const osmandUrl = `${location.origin}/ingest/osmand`;
  return (
    <section>
      <h2>Devices</h2>
      <form class="new-device" onSubmit={register}>
        <label>
          asset{' '}
          <select id="d-asset" value={assetId} required onChange={(e) => setAssetId((e.target as HTMLSelectElement).value)}>
            <option value="">choose…</option>
            {[...assets].map(([id, name]) => (
              <option key={id} value={id}>
                {name}
              </option>
            ))}
          </select>
        </label>
        <label>
          protocol{' '}
          <select
            id="d-protocol"
            value={protocol}
            onChange={(e) => setProtocol((e.target as HTMLSelectElement).value as Device['protocol'])}
          >
            <option value="osmand">OsmAnd (Traccar Client)</option>
            <option value="traccar">Traccar forwarding</option>
            <option value="mqtt">MQTT</option>
          </select>
        </label>
        {admin ? (
          <label>
            uniqueId{' '}
            <input
              id="d-unique"
              value={uniqueId}
              placeholder="generated when empty"
              onInput={(e) => setUniqueId((e.target as HTMLInputElement).value)}
            />
          </label>
        ) : null}
        <button type="submit">Register device</button>
      </form>
      {made ? (
        <div class="secret-once" role="alert">
          <p>
            <strong>{made.protocol === 'osmand' ? 'The device’s id, its only credential' : 'The device’s id'}</strong>:{' '}
            <code class="secret" data-unique>
              {made.uniqueId}
            </code>
          </p>
          {made.protocol === 'osmand' ? (
            <p>
              In the Traccar Client app, set the server URL to <code>{osmandUrl}</code> and the device identifier to this id.
            </p>
          ) : made.protocol === 'mqtt' ? (
            <p>
              The device publishes records to <code>devices/{made.uniqueId}/location</code> (or <code>sensordata</code>,{' '}
              <code>reeferdata</code>, <code>gensetdata</code>, <code>oemdata</code>) on the ingest broker; the operator may have set
              another prefix than <code>devices</code> (INGEST_MQTT_TOPIC_PREFIX).
            </p>
          ) : null}
          <button type="button" onClick={() => setMade(null)}>
            Done
          </button>
        </div>
      ) : null}
      <ErrorLine error={error} />
      <p>
        <button type="button" onClick={() => void load()}>
          Refresh
        </button>
      </p>
      <table class="grid devices">
        <thead>
          <tr>
            <th>asset</th>
            <th>protocol</th>
            <th>uniqueId</th>
            <th>state</th>
            <th>last seen</th>
            <th>last error</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {devices.map((d) => (
            <tr key={d.id} data-device={d.id}>
              <td class="text">{assets.get(d.assetId) ?? d.assetId}</td>
              <td>{d.protocol}</td>
              <td class="text">
                <code>{d.uniqueId}</code>
              </td>
              <td>
                <Badge ok={!d.disabled} text={d.disabled ? 'disabled' : 'enabled'} />
              </td>
              <td>{time(d.lastSeenAt)}</td>
              <td class="text excerpt">{d.lastError ? `${time(d.lastErrorAt)}: ${d.lastError}` : '–'}</td>
              <td>
                <button type="button" onClick={() => void toggle(d)}>
                  {d.disabled ? 'Enable' : 'Disable'}
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {devices.length === 0 ? <p>No devices yet.</p> : null}
    </section>
  );
}
