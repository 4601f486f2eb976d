// The messages the e-mail channel sends (API guide 9, "E-mail"), as plain text and HTML: an alert,
// a digest of the alerts held back by an asset's interval, an escalation, and a recipient's
// confirmation request. Built from the pushed objects (alerts/text.ts), so a message shows only
// what its integration may receive; every text of the customer's is escaped in the HTML.
import { type AlertText, alertText, readableTime } from '../alerts/text.js';

export interface Mail {
  subject: string;
  text: string;
  html: string;
}

/** An alert as the channel holds it for a digest: enough to list it. */
export interface HeldAlert {
  assetId: string;
  assetName: string;
  title: string;
  at: string;
}

const esc = (s: string) => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** A subject line is one line: a name with a line break would otherwise add headers' look-alikes. */
const oneLine = (s: string) => s.replace(/[\r\n\t]+/g, ' ').slice(0, 250);

const page = (body: string) =>
  `<!doctype html><html><body style="font-family: system-ui, sans-serif; font-size: 14px; color: #1b1f24">${body}</body></html>`;

const button = (url: string, label: string) =>
  `<a href="${esc(url)}" style="display: inline-block; padding: 8px 14px; margin: 4px 8px 4px 0; background: #1f6feb; color: #fff; text-decoration: none; border-radius: 4px">${esc(label)}</a>`;

/** The summary of alerts held back since the last message: the first 20 listed, the rest counted. */
function heldSection(held: HeldAlert[], timeZone: string, heading = true): { text: string; html: string } {
  if (held.length === 0) return { text: '', html: '' };
  const shown = held.slice(0, 20);
  const rest = held.slice(shown.length);
  const restAssets = new Set(rest.map((h) => h.assetId)).size;
  const more = rest.length
    ? `and ${rest.length} more alert${rest.length === 1 ? '' : 's'} for ${restAssets} asset${restAssets === 1 ? '' : 's'}`
    : '';
  const line = (h: HeldAlert) => `${readableTime(h.at, timeZone) ?? h.at}  ${h.title}`;
  return {
    text: `\n${heading ? `Also since the last message (${held.length}):\n` : ''}${shown.map((h) => `  - ${line(h)}`).join('\n')}${more ? `\n  ${more}` : ''}\n`,
    html: `${heading ? `<h3 style="margin: 16px 0 4px">Also since the last message (${held.length})</h3>` : ''}<ul>${shown
      .map((h) => `<li>${esc(line(h))}</li>`)
      .join('')}</ul>${more ? `<p>${esc(more)}</p>` : ''}`,
  };
}

function factsOf(a: AlertText, extra: [string, string][]): { text: string; html: string } {
  const facts = [...a.facts, ...extra];
  return {
    text: facts.map(([k, v]) => `${k}: ${v}`).join('\n'),
    html: `<table style="border-collapse: collapse">${facts
      .map(([k, v]) => `<tr><td style="padding: 2px 12px 2px 0; color: #57606a">${esc(k)}</td><td>${esc(v)}</td></tr>`)
      .join('')}</table>`,
  };
}

/**
 * One alert (a notification, or an event when the integration takes no notifications), with the
 * reading behind it, a link to the asset's page and, when given, the link that acknowledges it;
 * `held`: the alerts held back since the asset's last message, told here.
 */
export function alertMail(
  objectType: 'event' | 'notification',
  object: Record<string, unknown>,
  opts: {
    publicUrl: string;
    timeZone: string;
    reading: { current: string | null; before: string | null } | null;
    ackUrl: string | null;
    held: HeldAlert[];
    escalation?: { minutes: number };
  },
): Mail {
  const a = alertText(objectType, object, opts.publicUrl, opts.timeZone);
  const extra: [string, string][] = [];
  if (opts.reading?.current) extra.push(['Reading', opts.reading.current]);
  if (opts.reading?.before) extra.push(['Before', opts.reading.before]);
  const facts = factsOf(a, extra);
  const held = heldSection(opts.held, opts.timeZone);
  const lead = opts.escalation ? `Not acknowledged or cleared within ${opts.escalation.minutes} minutes: escalated to you.` : null;
  const subject = oneLine(`${opts.escalation ? '[ESCALATED] ' : ''}${a.title}`);
  const text = [
    a.title,
    lead ? `\n${lead}` : '',
    '',
    facts.text,
    '',
    `${a.link.title} (map and latest data): ${a.link.url}`,
    opts.ackUrl ? `Acknowledge: ${opts.ackUrl}` : '',
    held.text,
    '--',
    'You receive this as a recipient of an e-mail integration of the asset tracking service.',
  ]
    .filter((l, i, all) => l !== '' || all[i - 1] !== '')
    .join('\n');
  const html = page(
    `<h2 style="margin: 0 0 8px; color: ${a.severity === 'ALERT' ? '#cf222e' : '#1b1f24'}">${esc(a.title)}</h2>${
      lead ? `<p><strong>${esc(lead)}</strong></p>` : ''
    }${facts.html}<p>${button(a.link.url, a.link.title)}${opts.ackUrl ? button(opts.ackUrl, 'Acknowledge') : ''}</p>${held.html}` +
      '<p style="color: #57606a; font-size: 12px">You receive this as a recipient of an e-mail integration of the asset tracking service.</p>',
  );
  return { subject, text, html };
}

/** The alerts held back whose assets' intervals have ended with no newer alert: one message. */
export function digestMail(held: HeldAlert[], opts: { publicUrl: string; timeZone: string; integrationName: string }): Mail {
  const assets = new Set(held.map((h) => h.assetId)).size;
  const count = `${held.length} alert${held.length === 1 ? '' : 's'} for ${assets} asset${assets === 1 ? '' : 's'}`;
  const s = heldSection(held, opts.timeZone, false);
  const link = `${opts.publicUrl}/dashboard/`;
  const subject = oneLine(`[ALERT] Digest: ${count}`);
  const intro = `${count} arrived after each asset's last message (${opts.integrationName}).`;
  return {
    subject,
    text: `${intro}\n${s.text}\nThe dashboard: ${link}\n`,
    html: page(`<h2 style="margin: 0 0 8px">${esc(count)}</h2><p>${esc(intro)}</p>${s.html}<p>${button(link, 'Open the dashboard')}</p>`),
  };
}

/** Asks a recipient to confirm before alerts are mailed to them (customer-made integrations). */
export function confirmationMail(opts: { integrationName: string; ownerName: string; confirmUrl: string; hours: number }): Mail {
  const what = `the alerts of "${opts.integrationName}" (${opts.ownerName})`;
  return {
    subject: oneLine(`Confirm to receive alerts: ${opts.integrationName}`),
    text: `Someone asked the asset tracking service to mail ${what} to this address.\n\nTo receive them, confirm within ${opts.hours} hours: ${opts.confirmUrl}\n\nIf you did not expect this, ignore it: nothing is mailed to you without your confirmation.\n`,
    html: page(
      `<p>Someone asked the asset tracking service to mail ${esc(what)} to this address.</p><p>${button(opts.confirmUrl, 'Confirm')}</p><p>The link works for ${opts.hours} hours. If you did not expect this, ignore it: nothing is mailed to you without your confirmation.</p>`,
    ),
  };
}
