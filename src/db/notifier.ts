// Wake-ups through the database (pg-boss's notifier is the model): a module subscribes to a
// channel and is called when any instance commits a pg_notify(channel), or when this process says
// it just committed something (wake: no round trip, and the only way on the embedded database,
// which is one process). On PostgreSQL one connection of its own LISTENs for every channel a
// subscriber named, and is dialled again with backoff when it breaks; polling stays the
// subscriber's fallback, so a lost notification delays, never loses, work.
import pg from 'pg';

export class Notifier {
  private readonly subscribers = new Map<string, Set<() => void>>();
  private client?: pg.Client;
  private running = false;
  private loop?: Promise<void>;
  private stopWaiting?: () => void;

  /** `url`: LISTEN on PostgreSQL; without one, wake-ups stay in this process. */
  constructor(private readonly url?: string) {}

  subscribe(channel: string, fn: () => void): () => void {
    if (!/^[a-z_][a-z0-9_]*$/.test(channel)) throw new Error(`not a channel name: ${channel}`);
    let set = this.subscribers.get(channel);
    if (!set) {
      set = new Set();
      this.subscribers.set(channel, set);
      this.client?.query(`LISTEN ${channel}`).catch(() => this.client?.end().catch(() => {}));
    }
    set.add(fn);
    if (this.url && !this.running) {
      this.running = true;
      this.loop = this.listen();
    }
    return () => {
      set.delete(fn);
    };
  }

  wake(channel: string): void {
    for (const fn of this.subscribers.get(channel) ?? []) fn();
  }

  async close(): Promise<void> {
    this.running = false;
    this.stopWaiting?.();
    await this.client?.end().catch(() => {});
    await this.loop;
  }

  private async listen(): Promise<void> {
    let backoff = 500;
    while (this.running) {
      const client = new pg.Client({ connectionString: this.url, connectionTimeoutMillis: 10_000 });
      const ended = new Promise<void>((resolve) => {
        client.on('error', () => resolve());
        client.on('end', () => resolve());
      });
      try {
        // A client ended while it is still connecting never settles its connect() (pg 8), so
        // close() ends only a connected one, and a close that came during the dial is seen here.
        await client.connect();
        for (const channel of this.subscribers.keys()) await client.query(`LISTEN ${channel}`);
        this.client = client;
        backoff = 500;
        client.on('notification', (n) => this.wake(n.channel));
        if (this.running) await ended;
      } catch {
        /* the database is away: subscribers poll meanwhile; dial again */
      } finally {
        this.client = undefined;
        await client.end().catch(() => {});
      }
      if (this.running) {
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, backoff);
          this.stopWaiting = () => {
            clearTimeout(t);
            resolve();
          };
        });
      }
      backoff = Math.min(backoff * 2, 10_000);
    }
  }
}
