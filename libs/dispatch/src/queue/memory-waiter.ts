import type { AdmissionError } from './admission-error';
import { clientAborted, queueTimeout } from './admission-errors';
import { orderScore } from './fair-order';
import type { MemoryWaiter } from './memory-pool';
import type { Lease, LeaseRequest } from './provider-queue';
import type { HeldTokens } from './token-limit';

/** What the memory backend does for one waiter: make its lease, take it out of line, add it, see it fail. */
export interface MemoryWaiterHooks {
  /** The lease of a grant on `providerId` holding `held` tokens; undefined if that provider is gone. */
  lease(providerId: string, held: HeldTokens, startedAt: number): Lease | undefined;
  /** Takes the waiter out of line (deadline, abort); a parked waiter of its client may take its room. */
  drop(waiter: MemoryWaiter): void;
  /** Runs once when the waiter fails, whatever the cause (its budget reservation comes back). */
  failed(): void;
}

/**
 * A request of the memory backend that has to wait (docs/architecture.md, "Admission"): the waiter in
 * its pool's order (`place`: its client, SFQ start tag, arrival `seq`, provider, parked or not),
 * resolved at its grant, failed at `maxWaitMs` (`queue_timeout`), on abort (`client_aborted`) or by the
 * queue (shed, dropped, closing). `add` puts it in line.
 */
export function waitForLease(
  request: LeaseRequest,
  place: Pick<MemoryWaiter, 'client' | 'start' | 'seq' | 'providerId' | 'parked'>,
  add: (waiter: MemoryWaiter) => void,
  hooks: MemoryWaiterHooks,
): Promise<Lease> {
  return new Promise<Lease>((resolve, reject) => {
    const startedAt = Date.now();
    const finish = () => {
      clearTimeout(timer);
      request.signal?.removeEventListener('abort', onAbort);
    };
    const waiter: MemoryWaiter = {
      ...place,
      modelGroupKey: request.modelGroupKey,
      candidateIds: request.candidates.map((c) => c.providerId),
      startedAt,
      score: orderScore(place.client.band, place.start),
      ...(request.tokens ? { tokens: request.tokens } : {}),
      grant: (granted, held) => {
        finish();
        const lease = hooks.lease(granted, held, startedAt);
        if (lease) resolve(lease);
      },
      fail: (error) => {
        finish();
        hooks.failed();
        reject(error);
      },
    };
    const leave = (error: AdmissionError) => {
      hooks.drop(waiter);
      waiter.fail(error);
    };
    const onAbort = () => leave(clientAborted());
    const timer = setTimeout(() => leave(queueTimeout(request.modelGroupKey, request.maxWaitMs)), request.maxWaitMs);
    request.signal?.addEventListener('abort', onAbort, { once: true });
    add(waiter);
  });
}
