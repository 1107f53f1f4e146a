import { waitUntil } from '../testing/wait-until';
import { AdmissionError } from './admission-error';
import { describeClientTermsContract } from './client-terms.contract';
import { describeFlowControlContract } from './flow-control.contract';
import { describeTokenLimitsContract } from './token-limits.contract';
import { describeTokenBudgetsContract } from './token-budgets.contract';

export { waitUntil };
import type { Lease, LeaseRequest, ProviderQueue, QueueClient, QueueProvider } from './provider-queue';

/** Builds a fresh, isolated backend for one test (its own Redis prefix for bullmq). */
export type ProviderQueueFactory = () => Promise<ProviderQueue>;

const provider = (providerId: string, maxConcurrency: number, maxQueued = 100): QueueProvider => ({
  providerId,
  maxConcurrency,
  maxQueued,
});

/** How a run of the contract sends its requests. */
export interface ContractOptions {
  /**
   * The client of every request of the admission tests (default: none, the anonymous client); e.g. a
   * solo client (`QueueClient.solo`, flow control off). The flow-control scenarios are left out then:
   * they name their own clients.
   */
  client?: QueueClient;
}

/**
 * The contract every `ProviderQueue` backend passes (docs/architecture.md, "Admission", "Clients,
 * priority and fair share"): the memory backend and the Redis backend run exactly these tests, the
 * flow-control scenarios (`describeFlowControlContract`) included.
 */
export function describeProviderQueueContract(
  name: string,
  makeQueue: ProviderQueueFactory,
  opts: ContractOptions = {},
): void {
  describe(`ProviderQueue contract: ${name}`, () => {
    let queue: ProviderQueue;
    beforeEach(async () => {
      queue = await makeQueue();
    });
    afterEach(async () => {
      await queue.close();
    });
    if (!opts.client) describeFlowControlContract(() => queue);
    if (!opts.client) describeClientTermsContract(() => queue);
    describeTokenLimitsContract(() => queue, opts.client);
    describeTokenBudgetsContract(() => queue, { solo: opts.client?.solo === true });

    const request = (candidates: QueueProvider[], extra: Partial<LeaseRequest> = {}): LeaseRequest => ({
      modelGroupKey: 'llama',
      candidates,
      maxWaitMs: 10_000,
      ...(opts.client ? { client: opts.client } : {}),
      ...extra,
    });
    const counts = async (id: string) => (await queue.counts([id])).get(id);

    it('grants a lease at once while the provider has a free slot and counts it in flight', async () => {
      const a = provider('a', 2);
      await queue.configure([a]);
      const lease = await queue.acquireLease(request([a]));
      expect(lease.providerId).toBe('a');
      expect(await counts('a')).toEqual({ inFlight: 1, queued: 0 });
      await lease.release();
      await waitUntil(async () => (await counts('a'))?.inFlight === 0, 5000, 'in_flight back to 0');
    });

    it('makes a request wait at max_concurrency and grants it when a lease is released', async () => {
      const a = provider('a', 1);
      await queue.configure([a]);
      const first = await queue.acquireLease(request([a]));
      let granted: Lease | undefined;
      const second = queue.acquireLease(request([a])).then((l) => (granted = l));
      await waitUntil(async () => (await counts('a'))?.queued === 1, 5000, 'the second request to queue');
      expect(granted).toBeUndefined();
      await first.release();
      await second;
      expect(granted?.providerId).toBe('a');
      expect(await counts('a')).toEqual({ inFlight: 1, queued: 0 });
      await granted!.release();
    });

    it('grants waiting requests of one provider in FIFO order', async () => {
      const a = provider('a', 1);
      await queue.configure([a]);
      const holder = await queue.acquireLease(request([a]));
      const order: number[] = [];
      const waits: Promise<void>[] = [];
      for (let i = 0; i < 4; i++) {
        waits.push(
          queue.acquireLease(request([a])).then(async (lease) => {
            order.push(i);
            await lease.release();
          }),
        );
        await waitUntil(async () => (await counts('a'))?.queued === i + 1, 5000, `request ${i} to queue`);
      }
      await holder.release();
      await Promise.all(waits);
      expect(order).toEqual([0, 1, 2, 3]);
    });

    it('answers queue_full once max_queued requests wait', async () => {
      const a = provider('a', 1, 1);
      await queue.configure([a]);
      const holder = await queue.acquireLease(request([a]));
      const waiting = queue.acquireLease(request([a]));
      await waitUntil(async () => (await counts('a'))?.queued === 1, 5000, 'one waiting request');
      const error = await queue.acquireLease(request([a])).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(AdmissionError);
      expect((error as AdmissionError).code).toBe('queue_full');
      expect((error as AdmissionError).retryAfterS).toBeGreaterThan(0);
      await holder.release();
      await (await waiting).release();
    });

    it('answers queue_timeout after max_wait_ms and leaves nothing queued', async () => {
      const a = provider('a', 1);
      await queue.configure([a]);
      const holder = await queue.acquireLease(request([a]));
      const error = await queue.acquireLease(request([a], { maxWaitMs: 150 })).catch((e: unknown) => e);
      expect((error as AdmissionError).code).toBe('queue_timeout');
      await waitUntil(async () => (await counts('a'))?.queued === 0, 5000, 'the timed-out request to leave');
      await holder.release();
      await waitUntil(async () => (await counts('a'))?.inFlight === 0, 5000, 'in_flight back to 0');
    });

    it('removes a waiting request whose client aborts, without granting it a lease', async () => {
      const a = provider('a', 1);
      await queue.configure([a]);
      const holder = await queue.acquireLease(request([a]));
      const abort = new AbortController();
      const waiting = queue.acquireLease(request([a], { signal: abort.signal })).catch((e: unknown) => e);
      await waitUntil(async () => (await counts('a'))?.queued === 1, 5000, 'the request to queue');
      abort.abort();
      expect(((await waiting) as AdmissionError).code).toBe('client_aborted');
      await waitUntil(async () => (await counts('a'))?.queued === 0, 5000, 'the aborted request to leave');
      await holder.release();
      await waitUntil(async () => (await counts('a'))?.inFlight === 0, 5000, 'no lease granted to the aborted request');
    });

    it('releases a lease once however often release() is called', async () => {
      const a = provider('a', 2);
      await queue.configure([a]);
      const one = await queue.acquireLease(request([a]));
      const two = await queue.acquireLease(request([a]));
      await one.release();
      await one.release();
      await waitUntil(async () => (await counts('a'))?.inFlight === 1, 5000, 'one lease left');
      expect(await counts('a')).toEqual({ inFlight: 1, queued: 0 });
      await two.release();
    });

    it('keeps independent in_flight and queued for two providers', async () => {
      const a = provider('a', 1);
      const b = provider('b', 2);
      await queue.configure([a, b]);
      const la = await queue.acquireLease(request([a], { modelGroupKey: 'm-a' }));
      const waitingA = queue.acquireLease(request([a], { modelGroupKey: 'm-a' }));
      const lb1 = await queue.acquireLease(request([b], { modelGroupKey: 'm-b' }));
      const lb2 = await queue.acquireLease(request([b], { modelGroupKey: 'm-b' }));
      await waitUntil(async () => (await counts('a'))?.queued === 1, 5000, 'a queued request on a');
      const all = await queue.counts(['a', 'b']);
      expect(all.get('a')).toEqual({ inFlight: 1, queued: 1 });
      expect(all.get('b')).toEqual({ inFlight: 2, queued: 0 });
      await la.release();
      await (await waitingA).release();
      await lb1.release();
      await lb2.release();
    });

    it('chooses the candidate with the lowest (in_flight + queued) / max_concurrency', async () => {
      const a = provider('a', 2);
      const b = provider('b', 4);
      await queue.configure([a, b]);
      const leases: Lease[] = [];
      for (let i = 0; i < 6; i++) leases.push(await queue.acquireLease(request([a, b])));
      const byProvider = leases.reduce<Record<string, number>>(
        (acc, l) => ({ ...acc, [l.providerId]: (acc[l.providerId] ?? 0) + 1 }),
        {},
      );
      expect(byProvider).toEqual({ a: 2, b: 4 });
      await Promise.all(leases.map((l) => l.release()));
    });

    it('is work-conserving: a waiting request takes a sibling candidate that frees a slot', async () => {
      const a = provider('a', 1);
      const b = provider('b', 1);
      await queue.configure([a, b]);
      const first = await queue.acquireLease(request([a, b]));
      const second = await queue.acquireLease(request([a, b]));
      expect(new Set([first.providerId, second.providerId])).toEqual(new Set(['a', 'b']));
      const third = queue.acquireLease(request([a, b]));
      await waitUntil(
        async () => {
          const c = await queue.counts(['a', 'b']);
          return c.get('a')!.queued + c.get('b')!.queued === 1;
        },
        5000,
        'the third request to queue',
      );
      // Free the provider the third request is NOT queued on: it must move there.
      const c = await queue.counts(['a', 'b']);
      const other = c.get('a')!.queued === 1 ? 'b' : 'a';
      await [first, second].find((l) => l.providerId === other)!.release();
      const granted = await third;
      expect(granted.providerId).toBe(other);
      await granted.release();
      await [first, second].find((l) => l.providerId !== other)!.release();
    });

    it('grants waiting requests at once when max_concurrency is raised', async () => {
      const a = provider('a', 1);
      await queue.configure([a]);
      const holder = await queue.acquireLease(request([a]));
      const waiting = queue.acquireLease(request([a]));
      await waitUntil(async () => (await counts('a'))?.queued === 1, 5000, 'the request to queue');
      await queue.configure([provider('a', 2)]);
      const granted = await waiting;
      expect(await counts('a')).toEqual({ inFlight: 2, queued: 0 });
      await granted.release();
      await holder.release();
    });

    it('moves waiting requests of a removed provider to a sibling, or fails them with no_available_provider', async () => {
      const a = provider('a', 1);
      const b = provider('b', 1);
      await queue.configure([a, b]);
      const holdA = await queue.acquireLease(request([a], { modelGroupKey: 'only-a' }));
      const holdB = await queue.acquireLease(request([b], { modelGroupKey: 'b' }));
      const onlyA = queue.acquireLease(request([a], { modelGroupKey: 'only-a' })).catch((e: unknown) => e);
      const onlyB = queue.acquireLease(request([b], { modelGroupKey: 'b' }));
      await waitUntil(async () => (await counts('b'))?.queued === 1, 5000, 'one request queued on b');
      // Loads tie at 2/1, so this one queues on a, the first candidate.
      const either = queue.acquireLease(request([a, b]));
      await waitUntil(async () => (await counts('a'))?.queued === 2, 5000, 'two requests queued on a');
      await queue.configure([b]);
      expect(((await onlyA) as AdmissionError).code).toBe('no_available_provider');
      await holdB.release();
      await (await onlyB).release();
      const moved = await either;
      expect(moved.providerId).toBe('b');
      await moved.release();
      await holdA.release();
    });

    it('rejects a request whose candidates are all unknown with no_available_provider', async () => {
      await queue.configure([provider('a', 1)]);
      const error = await queue.acquireLease(request([provider('ghost', 1)])).catch((e: unknown) => e);
      expect((error as AdmissionError).code).toBe('no_available_provider');
    });
  });
}
