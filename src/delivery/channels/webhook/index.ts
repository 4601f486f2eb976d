// The webhook channel: single mode sends each event as one object (webhook-id = the event id);
// batch mode sends a JSON array of up to batchSize objects of one type under a batch id.
import type { AddressPolicy } from '../../address.js';
import type { WebhookIntegration } from '../../integrations/model.js';
import type { LogEvent } from '../../../eventlog/log.js';
import { type Channel, configOf, groupByType, type OutMessage, stableId } from '../channel.js';
import { closeAgents, injectEventId, sendWebhook } from './webhook.js';

/** The stored JSON text as sent, with the event id injected when the integration asks for it. */
function objectText(cfg: WebhookIntegration, e: LogEvent): string {
  const w = cfg.webhook;
  if (!w.injectEventId) return e.payload;
  return JSON.stringify(injectEventId(JSON.parse(e.payload), e.eventId, w.injectEventIdPath));
}

export function webhookChannel(policy: AddressPolicy): Channel {
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
        return events.map((e) => ({ requestId: e.eventId, objectType: e.objectType, events: [e], body: objectText(cfg, e) }));
      }
      return groupByType(events, cfg.webhook.batchSize).map((chunk) => ({
        requestId: stableId(`${cfg.id}/${seed}`, chunk),
        objectType: chunk[0]!.objectType,
        events: chunk,
        body: `[${chunk.map((e) => objectText(cfg, e)).join(',')}]`,
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
