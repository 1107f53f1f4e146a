import type { LeaseRequest, ProviderQueue } from '../queue/provider-queue';

/** What a `startLeaseLoad` run saw. */
export interface LeaseLoad {
  /** `Date.now()` of every grant so far. */
  readonly grantedAt: readonly number[];
  /** Stops the workers and resolves the most leases held at once and the codes of failed admissions. */
  stop(): Promise<{ peak: number; failures: string[] }>;
}

/**
 * `workers` loops spread over `queues`, each taking a lease with `request`, holding it `holdMs`
 * (the upstream call), releasing it, and again: the leases held at once are what an upstream would
 * count. A failed admission is recorded by its code and retried after `holdMs`.
 */
export function startLeaseLoad(
  queues: readonly ProviderQueue[],
  request: LeaseRequest,
  workers = 6,
  holdMs = 20,
): LeaseLoad {
  const grantedAt: number[] = [];
  const failures: string[] = [];
  let inUse = 0;
  let peak = 0;
  let running = true;
  const pause = () => new Promise((r) => setTimeout(r, holdMs));
  const worker = async (queue: ProviderQueue) => {
    while (running) {
      try {
        const lease = await queue.acquireLease(request);
        grantedAt.push(Date.now());
        peak = Math.max(peak, ++inUse);
        await pause();
        inUse--;
        await lease.release();
      } catch (e) {
        failures.push((e as { code?: string }).code ?? String(e));
        await pause();
      }
    }
  };
  const all = Array.from({ length: workers }, (_, i) => worker(queues[i % queues.length]));
  return {
    grantedAt,
    stop: async () => {
      running = false;
      await Promise.all(all);
      return { peak, failures };
    },
  };
}
