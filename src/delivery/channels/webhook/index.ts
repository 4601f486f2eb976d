// The webhook channel: single mode sends each event as one object (webhook-id = the event id);
// batch mode sends a JSON array of up to batchSize objects of one type under a batch id. A chat
// format (slack, teams: chat.ts) sends each event or notification as a chat message instead. The
// dcsa-tnt-3 format sends the request's records as DCSA events, `{"events": [...]}`, made when the
// request is first sent (src/dcsa/push.ts, handed in as `DcsaRender`): a batch's body is then kept
// and retried byte for byte like any other.
import type { AddressPolicy } from '../../address.js';
import type { WebhookIntegration } from '../../integrations/model.js';
import type { LogEvent } from '../../../eventlog/log.js';
import { type AttemptRecord, type Channel, configOf, groupByType, type OutMessage, stableId } from '../channel.js';
import { chatBody } from './chat.js';
import { closeAgents, injectEventId, sendWebhook } from './webhook.js';

/**
 * The stored JSON text as sent, with the event id injected when the integration asks for it; for
 * a chat format, the message built from it (an integration of one only has events and notifications).
 */
function objectText(cfg: WebhookIntegration, e: LogEvent, publicUrl: string): string {
  const w = cfg.webhook;
  if ((w.format === 'slack' || w.format === 'teams') && (e.objectType === 'event' || e.objectType === 'notification')) {
    return chatBody(w.format, e.objectType, JSON.parse(e.payload), publicUrl);
  }
  if (!w.injectEventId) return e.payload;
  return JSON.stringify(injectEventId(JSON.parse(e.payload), e.eventId, w.injectEventIdPath));
}

/**
 * The dcsa-tnt-3 format's bodies (src/dcsa/push.ts): `render` makes the DCSA events of a request's
 * records, or null when none of them makes one (an asset without equipment identity, a location
 * thinned out, a sensor other than a door, a command other than an acknowledged set point);
 * `headers` go with every request (API-Version).
 */
export interface DcsaRender {
  headers: Record<string, string>;
  render(events: LogEvent[]): Promise<string | null>;
}

/** What an attempt says when a dcsa-tnt-3 request's records make no DCSA event: nothing is sent. */
const NO_DCSA_EVENT = 'not sent: these records make no DCSA event (API guide 18)';

/** `publicUrl`: the service's address (read at each message: known once it listens), for the links of chat messages. */
export function webhookChannel(policy: AddressPolicy, publicUrl: () => string, dcsa?: DcsaRender): Channel {
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
      // dcsa-tnt-3: the body is made at the first send (it reads the records' assets); '' until then.
      const dcsaFormat = cfg.webhook.format === 'dcsa-tnt-3';
      if (cfg.webhook.mode === 'single') {
        return events.map((e) => ({
          requestId: e.eventId,
          objectType: e.objectType,
          events: [e],
          body: dcsaFormat ? '' : objectText(cfg, e, publicUrl()),
        }));
      }
      return groupByType(events, cfg.webhook.batchSize).map((chunk) => ({
        requestId: stableId(`${cfg.id}/${seed}`, chunk),
        objectType: chunk[0]!.objectType,
        events: chunk,
        body: dcsaFormat ? '' : `[${chunk.map((e) => objectText(cfg, e, publicUrl())).join(',')}]`,
      }));
    },
    async send(any, msg) {
      const cfg = configOf(any, 'webhook');
      const url = cfg.destinations[msg.objectType] ?? cfg.destination;
      let headers: Record<string, string> | undefined;
      if (cfg.webhook.format === 'dcsa-tnt-3') {
        if (!dcsa) throw new Error('the dcsa-tnt-3 format needs the DCSA renderer');
        // Made at the first send; a failed batch is stored with these bytes and retried with them.
        if (!msg.body) {
          const body = await dcsa.render(msg.events);
          if (body === null) return nothingToSend();
          msg.body = body;
        }
        headers = dcsa.headers;
      }
      const r = await sendWebhook(cfg, { url, id: msg.requestId, objectType: msg.objectType, body: msg.body, headers }, policy);
      return { ...r, topic: null, partition: null, qos: null };
    },
    async close() {
      closeAgents(policy);
    },
  };
}

/** An attempt that sent nothing because nothing was to be sent: a success, saying why. */
function nothingToSend(): AttemptRecord {
  return {
    outcome: 'success',
    httpStatus: null,
    responseTimeMs: 0,
    receiptId: null,
    topic: null,
    partition: null,
    qos: null,
    error: NO_DCSA_EVENT,
    responseHeaders: null,
    responseBody: null,
    responseBodyBytes: null,
    truncated: false,
    retryAfterSeconds: null,
  };
}
