// Chat formats of a webhook (API guide 9, `webhook.format`): an event or a notification as a
// message a person reads in Slack (an incoming webhook's `text` and blocks) or Microsoft Teams (an
// Adaptive Card in the envelope Teams' Workflows webhooks take). Built from the pushed object
// alone, so what a message shows is what the integration may already receive: its own owners'
// objects, never a secret. Names and subjects are the customer's text: escaped for each format and
// cut to the format's limits.
import type { KnownBlock } from '@slack/types';
import type { WebhookFormat } from '../../integrations/schemas.js';

/** What a person is told, whatever the chat: built once from the object. */
export interface AlertText {
  /** `[ALERT] MSKU1234565: supplyAirTemperature 9.5 above maximum 8` */
  title: string;
  severity: 'ALERT' | 'INFO';
  /** Label and value lines under the title (time, specification, reading, location). */
  facts: [string, string][];
  /** The asset's page on the dashboard (its map and latest data). */
  link: { title: string; url: string };
}

/** Cuts the customer's text (names up to 255, subjects) to `n` characters, before escaping lengthens it (Slack's limits: 3,000 a section, 2,000 a field). */
const cut = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);
const str = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);
const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);

/** An ISO time as people read it in a message: `2026-11-28 23:40:12 UTC`. */
export function readableTime(iso: unknown): string | null {
  const t = str(iso);
  if (!t) return null;
  const d = new Date(t);
  return Number.isNaN(d.getTime()) ? t : `${d.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/**
 * The text of an event or a notification (their push shapes, API guide 8). A notification is an
 * alert (ALERT, SILENT, DWELL) and names its asset; an event names only the asset's id.
 */
export function alertText(objectType: 'event' | 'notification', o: Record<string, unknown>, publicUrl: string): AlertText {
  const assetId = str(o.assetId) ?? '';
  const link = { title: 'Open the asset', url: `${publicUrl}/dashboard/#/assets/${encodeURIComponent(assetId)}` };
  const facts: [string, string][] = [];
  const add = (label: string, value: string | null) => {
    if (value) facts.push([label, cut(value, 300)]);
  };
  if (objectType === 'notification') {
    const asset = str(o.assetName) ?? assetId;
    add('When', readableTime(o.whenCreated));
    add('Specification', str(o.specificationName));
    const loc = (o.location ?? null) as Record<string, unknown> | null;
    const lat = num(loc?.latitude);
    const lon = num(loc?.longitude);
    if (lat !== null && lon !== null) {
      const zone = str(loc?.name);
      add(
        'Last location',
        `${lat.toFixed(5)}, ${lon.toFixed(5)}${zone ? ` (${zone})` : ''} at ${readableTime(loc?.whenCreated) ?? 'an unknown time'}`,
      );
    }
    return { title: cut(`[ALERT] ${asset}: ${str(o.subject) ?? String(o.type ?? 'alert')}`, 300), severity: 'ALERT', facts, link };
  }
  const severity = o.severity === 'ALERT' ? 'ALERT' : 'INFO';
  const current = (o.currentData ?? null) as Record<string, unknown> | null;
  const prev = (o.prevData ?? null) as Record<string, unknown> | null;
  add('When', readableTime(o.whenCreated));
  add('Reading', str(current?.value));
  add('Before', str(prev?.value));
  add('Asset', assetId);
  return { title: cut(`[${severity}] ${str(o.subject) ?? 'event'}`, 300), severity, facts, link };
}

/** Slack's mrkdwn: &, < and > are its only control characters (links and mentions). */
const slackEscape = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** A Slack incoming-webhook message: `text` (notifications, fallback) and blocks. */
export function slackMessage(a: AlertText): { text: string; blocks: KnownBlock[] } {
  const blocks: KnownBlock[] = [{ type: 'section', text: { type: 'mrkdwn', text: `*${slackEscape(a.title)}*` } }];
  if (a.facts.length) {
    blocks.push({ type: 'section', fields: a.facts.map(([k, v]) => ({ type: 'mrkdwn', text: `*${k}*\n${slackEscape(v)}` })) });
  }
  blocks.push({
    type: 'actions',
    elements: [{ type: 'button', text: { type: 'plain_text', text: a.link.title }, url: a.link.url, action_id: 'open-asset' }],
  });
  return { text: a.title, blocks };
}

/**
 * Teams renders a TextBlock's text as Markdown: a backslash before each character it could read
 * as markup keeps a name a name (no link, no emphasis).
 */
const teamsEscape = (s: string) => s.replace(/[\\`*_{}[\]()#+\-.!<>|~]/g, (c) => `\\${c}`);

/** An Adaptive Card (1.4) in the message envelope of Teams' Workflows webhooks. */
export function teamsMessage(a: AlertText): Record<string, unknown> {
  const card = {
    $schema: 'http://adaptivecards.io/schemas/adaptive-card.json',
    type: 'AdaptiveCard',
    version: '1.4',
    body: [
      {
        type: 'TextBlock',
        text: teamsEscape(a.title),
        weight: 'Bolder',
        size: 'Medium',
        wrap: true,
        color: a.severity === 'ALERT' ? 'Attention' : 'Default',
      },
      ...(a.facts.length ? [{ type: 'FactSet', facts: a.facts.map(([title, value]) => ({ title, value: teamsEscape(value) })) }] : []),
    ],
    actions: [{ type: 'Action.OpenUrl', title: a.link.title, url: a.link.url }],
  };
  return {
    type: 'message',
    attachments: [{ contentType: 'application/vnd.microsoft.card.adaptive', contentUrl: null, content: card }],
  };
}

/** The body of a chat-format webhook for one event or notification. */
export function chatBody(
  format: Exclude<WebhookFormat, 'standard'>,
  objectType: 'event' | 'notification',
  payload: Record<string, unknown>,
  publicUrl: string,
): string {
  const a = alertText(objectType, payload, publicUrl);
  return JSON.stringify(format === 'slack' ? slackMessage(a) : teamsMessage(a));
}
