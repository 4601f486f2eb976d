// Server-sent events read from a fetch body: the dashboard's streams send the bearer token in a
// header, which EventSource cannot. Feed it the text as it comes; it answers the messages that
// text completed (a message ends at a blank line), so a caller renders once per chunk.

export interface SseMessage {
  /** The `event:` line, if any. */
  event?: string;
  /** The `id:` line, if any (what a reconnect sends back as Last-Event-ID). */
  id?: string;
  /** The `data:` lines joined by newlines ('' when none: a comment or `retry:` only). */
  data: string;
}

export class SseParser {
  private buf = '';

  push(text: string): SseMessage[] {
    this.buf += text;
    const out: SseMessage[] = [];
    let end = this.buf.indexOf('\n\n');
    while (end >= 0) {
      const block = this.buf.slice(0, end);
      this.buf = this.buf.slice(end + 2);
      const m: SseMessage = { data: '' };
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('data: ')) data.push(line.slice(6));
        else if (line.startsWith('event: ')) m.event = line.slice(7);
        else if (line.startsWith('id: ')) m.id = line.slice(4);
      }
      m.data = data.join('\n');
      out.push(m);
      end = this.buf.indexOf('\n\n');
    }
    return out;
  }
}
