// Benchmark: an alert's way from store to a mailbox (API guide 9, "E-mail"). Reefer readings that
// raise an ALERT are stored one alert at a time, 2 a second, on the PostgreSQL service as `npm
// start` runs it; each alert is mailed by an e-mail integration to a real SMTP server (smtp-server,
// in this process) and, as the baseline from the same run, posted by a Slack-format webhook
// integration to a local HTTP receiver: the same alert, engine and claim, one channel apart.
// Latency: from the store's 201 to the message's DATA ending at the SMTP server (the webhook's
// request arriving). Target: e-mail under 5 s at p99 on this machine.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { SmtpSink } from '../test/smtp.js';
import { Api, freshDatabase, knob, percentile, startService } from './lib.js';

const ALERTS = knob('BENCH_EMAIL_ALERTS', 60);
const ASSETS = 20;
const GAP_MS = 500;

export interface EmailBenchRow {
  channel: string;
  alerts: number;
  delivered: number;
  p50Ms: number;
  p95Ms: number;
  p99Ms: number;
  maxMs: number;
}

export async function runEmailBench(): Promise<EmailBenchRow[]> {
  const smtp = await new SmtpSink().start();
  // The baseline's receiver: the time each Slack message arrives, with its text.
  const slack: { at: number; text: string }[] = [];
  const rx = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = Date.now();
      slack.push({ at, text: (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { text: string }).text });
      res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((r) => rx.listen(0, '127.0.0.1', r));
  const databaseUrl = await freshDatabase('tracking_bench_email');
  const svc = await startService({ DATABASE_URL: databaseUrl, SMTP_URL: smtp.url });
  const api = new Api(svc.base);
  try {
    await api.login();
    const owner = await api.call('POST', '/owners', { name: 'bench-email' });
    const assets: { id: string; name: string }[] = [];
    for (let i = 0; i < ASSETS; i++) {
      const name = `MAIL${String(i).padStart(7, '0')}`;
      const a = await api.call('POST', '/assets', { name, ownerId: owner.id });
      await api.call('POST', '/specifications', {
        assetId: a.id,
        type: 'REEFER',
        name: 'Frozen',
        ranges: { cargo: { sensors: { supplyAirTemperature: [-30, -10] } } },
      });
      assets.push({ id: a.id, name });
    }
    await api.call('POST', '/integrations', {
      name: 'bench e-mail',
      channel: 'email',
      ownerIds: [owner.id],
      email: { to: ['ops@bench.example'], minIntervalMinutes: 0, maxMessagesPerHour: 100_000 },
    });
    await api.call('POST', '/integrations', {
      name: 'bench slack',
      channel: 'webhook',
      ownerIds: [owner.id],
      destination: `http://127.0.0.1:${(rx.address() as AddressInfo).port}/slack`,
      webhook: { format: 'slack' },
    });
    // Each alert: the asset back in range, then out of it (one bulk), record times a second apart.
    const stored: { name: string; at: number; seq: number }[] = [];
    const t0 = Date.now() - 3600_000;
    for (let k = 0; k < ALERTS; k++) {
      const a = assets[k % ASSETS]!;
      const when = (s: number) => new Date(t0 + (k * 2 + s) * 1000).toISOString();
      const body = [
        { assetId: a.id, whenCreated: when(0), data: { supplyAirTemperature: -20 } },
        { assetId: a.id, whenCreated: when(1), data: { supplyAirTemperature: -5 + (k % 3) } },
      ];
      await api.call('POST', '/reefer-data', body);
      stored.push({ name: a.name, at: Date.now(), seq: Math.floor(k / ASSETS) });
      await new Promise((r) => setTimeout(r, GAP_MS));
    }
    // The n-th message naming an asset is its n-th alert.
    const deadline = Date.now() + 60_000;
    while ((smtp.messages.length < ALERTS || slack.length < ALERTS) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    const latencies = (arrivals: { at: number; title: string }[]) => {
      const out: number[] = [];
      for (const s of stored) {
        const mine = arrivals.filter((x) => x.title.includes(`${s.name}:`));
        const hit = mine[s.seq];
        if (hit) out.push(hit.at - s.at);
      }
      return out.sort((x, y) => x - y);
    };
    const row = (channel: string, l: number[]): EmailBenchRow => ({
      channel,
      alerts: ALERTS,
      delivered: l.length,
      p50Ms: Math.round(percentile(l, 50)),
      p95Ms: Math.round(percentile(l, 95)),
      p99Ms: Math.round(percentile(l, 99)),
      maxMs: l.at(-1) ?? Number.NaN,
    });
    return [
      row('e-mail (SMTP, store to mailbox)', latencies(smtp.messages.map((m) => ({ at: m.at, title: m.subject })))),
      row('baseline: Slack webhook (store to receiver)', latencies(slack.map((m) => ({ at: m.at, title: m.text })))),
    ];
  } finally {
    api.close();
    await svc.stop();
    await smtp.close();
    await new Promise((r) => rx.close(r));
  }
}
