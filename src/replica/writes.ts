// Read after write across instances: with REDIS_URL, a credential's last write is noted in Redis
// (a key that expires after READ_AFTER_WRITE_SECONDS), so a read that a load balancer sends to
// another instance still goes to the primary. Without Redis each instance knows its own writes.
import type { Redis } from 'ioredis';

export interface SharedWrites {
  /** Notes a write of `credential` for `ms`. */
  wrote(credential: string, ms: number): Promise<void>;
  /** Whether `credential` wrote within its window, on any instance. */
  recent(credential: string): Promise<boolean>;
  close(): Promise<void>;
}

const KEY = 'tracking:wrote:';

/** Connects first, so a wrong REDIS_URL stops the start with a clear error. Loaded only with REDIS_URL. */
export async function redisWrites(url: string): Promise<SharedWrites> {
  const { Redis } = await import('ioredis');
  const redis: Redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, commandTimeout: 1000, connectTimeout: 3000 });
  redis.on('error', () => {}); // each call reports its own
  await redis.connect();
  return {
    wrote: async (credential, ms) => {
      await redis.set(KEY + credential, '1', 'PX', ms);
    },
    recent: async (credential) => (await redis.exists(KEY + credential)) === 1,
    close: async () => {
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}
