// The webhook channel: single mode sends each event as one object (webhook-id = the event id);
// batch mode sends a JSON array of up to batchSize objects of one type under a batch id. A chat
// format (slack, teams: chat.ts) sends each event or notification as a chat message instead.
import type { AddressPolicy } from '../../address.js';
import type { WebhookIntegration } from '../../integrations/model.js';
import type { LogEvent } from '../../../eventlog/log.js';
import { type Channel, configOf, groupByType, type OutMessage, stableId } from '../channel.js';
import { chatBody } from './chat.js';
import { closeAgents, injectEventId, sendWebhook } from './webhook.js';

/**
 * The stored JSON text as sent, with the event id injected when the integration asks for it; for
 * a chat format, the message built from it (an integration of one only has events and notifications).
 */
function objectText(cfg: WebhookIntegration, e: LogEvent, publicUrl: string): string {
  const w = cfg.webhook;
  if (w.format !== 'standard' && (e.objectType === 'event' || e.objectType === 'notification')) {
    return chatBody(w.format, e.objectType, JSON.parse(e.payload), publicUrl);
  }
  if (!w.injectEventId) return e.payload;
  return JSON.stringify(injectEventId(JSON.parse(e.payload), e.eventId, w.injectEventIdPath));
}

/** `publicUrl`: the service's address (read at each message: known once it listens), for the links of chat messages. */
export function webhookChannel(policy: AddressPolicy, publicUrl: () => string): Channel {
  return {
    name: 'webhook',
    limits: (any) => {
      const w = configOf(any, 'webhook').webhook;
      return {
        batchSize: w.mode === 'batch' ? w.batchSize : 1,
        keepBatches: w.mode === 'batch',
        maxItemsPerMinute: w.maxItemsPerMinute,
        maxConcurrentRequests: w.maxConcurrentRequests,
        timeoutMs: w.timeoutMs,
      };
    },
    messages(any, events, seed): OutMessage[] {
      const cfg = configOf(any, 'webhook');
      if (cfg.webhook.mode === 'single') {
        return events.map((e) => ({ requestId: e.eventId, objectType: e.objectType, events: [e], body: objectText(cfg, e, publicUrl()) }));
      }
      return groupByType(events, cfg.webhook.batchSize).map((chunk) => ({
        requestId: stableId(`${cfg.id}/${seed}`, chunk),
        objectType: chunk[0]!.objectType,
        events: chunk,
        body: `[${chunk.map((e) => objectText(cfg, e, publicUrl())).join(',')}]`,
      }));
    },
    async send(any, msg) {
      const cfg = configOf(any, 'webhook');
      const url = cfg.destinations[msg.objectType] ?? cfg.destination;
      const r = await sendWebhook(cfg, { url, id: msg.requestId, objectType: msg.objectType, body: msg.body }, policy);
      return { ...r, topic: null, partition: null, qos: null };
    },
    async close() {
      closeAgents(policy);
    },
  };
}
