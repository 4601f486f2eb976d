// Chat formats of a webhook (API guide 9, `webhook.format`): an event or a notification as a
// message a person reads in Slack (an incoming webhook's `text` and blocks) or Microsoft Teams (an
// Adaptive Card in the envelope Teams' Workflows webhooks take). Built from the pushed object
// alone, so what a message shows is what the integration may already receive: its own owners'
// objects, never a secret. Names and subjects are the customer's text: escaped for each format and
// cut to the format's limits.
import type { KnownBlock } from '@slack/types';
import { type AlertText, alertText } from '../../../alerts/text.js';
import type { CHAT_FORMATS } from '../../integrations/schemas.js';

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
  format: (typeof CHAT_FORMATS)[number],
  objectType: 'event' | 'notification',
  payload: Record<string, unknown>,
  publicUrl: string,
): string {
  const a = alertText(objectType, payload, publicUrl);
  return JSON.stringify(format === 'slack' ? slackMessage(a) : teamsMessage(a));
}
