// What one instance counts once, whatever its number of HTTP processes (HTTP_WORKERS): the
// coordinator holds the counts and answers over the link (link.ts); an HTTP process holds proxies
// with the interfaces the modules already take (a Limiter, a SharedWrites, a share taker), so no
// module knows how many processes there are. docs/OPERATIONS.md lists which limits hold per
// instance and which per process.
//
// Every slot an HTTP process takes is a lease in the coordinator: when that process exits, however
// it ends, its leases are given back (a crashed process's requests and streams stop counting).
import type { SignInFailures } from '../audit/unknown-sign-ins.js';
import type { Admission, Limiter, TakeShare } from '../http/limits.js';
import type { SharedWrites } from '../replica/writes.js';
import type { Hub, InstanceLink } from './link.js';

/** What the coordinator counts for the instance. */
export interface InstanceCounts {
  /** The request limits (API guide 7) and the devices' limits, by name, as the coordinator holds them. */
  limiters: Record<string, Limiter>;
  /** Weighted shares per key, by name: a credential's large bodies in flight (bytes), an owner's open result streams (1 each). */
  shares: Record<string, TakeShare>;
  /** Failed sign-ins naming nobody: one audit entry per address, kind and window. */
  signIns: SignInFailures;
  /** The ingest error log's budgets: whether one more row may be written. */
  logBudget(known: boolean, address: string): boolean;
}

type WireAdmission = Exclude<Admission, { ok: true }> | (Omit<Extract<Admission, { ok: true }>, 'release'> & { lease: number });

/** The coordinator's side: answers the HTTP processes' calls; `gone(slot)` gives back a dead process's leases. */
export function serveCounts(hub: Hub, counts: InstanceCounts): { gone(slot: number): void } {
  let next = 1;
  const leases = new Map<number, { slot: number; release: () => void }>();
  const lease = (slot: number, release: () => void) => {
    const id = next++;
    leases.set(id, { slot, release });
    return id;
  };
  hub.handle('limit.admit', async ([name, credential], from): Promise<WireAdmission> => {
    const limiter = counts.limiters[String(name)];
    if (!limiter) throw new Error(`no limiter ${String(name)}`);
    const a = await limiter.admit(String(credential));
    if (!a.ok) return a;
    const { release, ...rest } = a;
    return { ...rest, lease: lease(from, release) };
  });
  hub.handle('share.take', async ([name, key, weight, max], from) => {
    const take = counts.shares[String(name)];
    if (!take) throw new Error(`no shares ${String(name)}`);
    const release = await take(String(key), Number(weight), Number(max));
    return release ? lease(from, release) : null;
  });
  hub.handle('signin.failed', ([kind, address, name, reason]) =>
    counts.signIns.failed(kind === 'client' ? 'client' : 'user', address === null ? null : String(address), String(name), String(reason)),
  );
  hub.handle('lease.release', ([id]) => {
    const l = leases.get(Number(id));
    leases.delete(Number(id));
    l?.release();
  });
  hub.handle('log.budget', ([known, address]) => counts.logBudget(known === true, String(address)));
  // Read after write across the instance's processes (the replica; without Redis): credential -> until (epoch ms).
  const writes = new Map<string, number>();
  hub.handle('writes.note', ([credential, ms]) => {
    const now = Date.now();
    if (writes.size > 100_000) for (const [k, until] of writes) if (until <= now) writes.delete(k);
    writes.set(String(credential), now + Number(ms));
  });
  hub.handle('writes.recent', ([credential]) => (writes.get(String(credential)) ?? 0) > Date.now());
  return {
    gone(slot) {
      for (const [id, l] of leases) {
        if (l.slot !== slot) continue;
        leases.delete(id);
        l.release();
      }
    },
  };
}

const release = (link: InstanceLink, id: number) => {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    link.call('lease.release', id).catch(() => {});
  };
};

/**
 * An HTTP process's limiter: the coordinator's, over the link. When the coordinator cannot answer
 * (it is stopping or gone, and this process with it) the request is admitted and the failure
 * reported, as with Redis away.
 */
export function linkedLimiter(link: InstanceLink, name: string, onError: (e: unknown) => void): Limiter {
  return {
    async admit(credential) {
      let a: WireAdmission;
      try {
        a = await link.call<WireAdmission>('limit.admit', name, credential);
      } catch (e) {
        onError(e);
        return { ok: true, remaining: 0, resetSeconds: 1, release: () => {} };
      }
      if (!a.ok) return a;
      const { lease, ...rest } = a;
      return { ...rest, release: release(link, lease) };
    },
    async close() {},
  };
}

/** An HTTP process's shares of the coordinator's `name`; when the coordinator cannot answer, the share is given. */
export function linkedShares(link: InstanceLink, name: string, onError: (e: unknown) => void): TakeShare {
  return async (key, weight, max) => {
    let id: number | null;
    try {
      id = await link.call<number | null>('share.take', name, key, weight, max);
    } catch (e) {
      onError(e);
      return () => {};
    }
    return id === null ? null : release(link, id);
  };
}

/** Failed sign-ins naming nobody, noted by the coordinator. */
export function linkedSignIns(link: InstanceLink): SignInFailures {
  return {
    failed: async (kind, address, name, reason) => {
      await link.call('signin.failed', kind, address, name, reason);
    },
  };
}

/** The ingest error log's budgets, counted by the coordinator; a row is written when it cannot answer. */
export function linkedLogBudget(link: InstanceLink): (known: boolean, address: string) => Promise<boolean> {
  return (known, address) => link.call<boolean>('log.budget', known, address).catch(() => true);
}

/** Read after write (the replica) across the instance's processes, noted in the coordinator. */
export function linkedWrites(link: InstanceLink): SharedWrites {
  return {
    wrote: async (credential, ms) => {
      await link.call('writes.note', credential, ms);
    },
    recent: (credential) => link.call<boolean>('writes.recent', credential),
    close: async () => {},
  };
}
