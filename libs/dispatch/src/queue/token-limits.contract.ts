import { waitUntil } from '../testing/wait-until';
import type { Lease, LeaseRequest, ProviderQueue, QueueClient, QueueProvider } from './provider-queue';
import { estimateTokenWeight } from '../route/token-weight';
import type { TokenWeight } from './token-limit';

const limited = (providerId: string, maxTokensInFlight: number | undefined, maxConcurrency = 8): QueueProvider => ({
  providerId,
  maxConcurrency,
  maxQueued: 100,
  ...(maxTokensInFlight === undefined ? {} : { maxTokensInFlight }),
});

/**
 * The token-limit scenarios of the `ProviderQueue` contract (docs/architecture.md, "Token limits"),
 * run by `describeProviderQueueContract` on every backend: a request is admitted only while both
 * `max_concurrency` and `max_tokens_in_flight` hold, one larger than the whole limit runs alone when
 * the provider holds no tokens, `prefillDone` gives the prompt part back, release the rest, and a
 * provider without a token limit decides as before.
 */
export function describeTokenLimitsContract(queueOf: () => ProviderQueue, client?: QueueClient): void {
  describe('token limits', () => {
    const pending: Promise<Lease>[] = [];
    afterEach(async () => {
      // Release is idempotent: whatever a test left granted is given back before the queue closes.
      for (const r of await Promise.allSettled(pending.splice(0)))
        if (r.status === 'fulfilled') await r.value.release();
    });
    const request = (candidates: QueueProvider[], tokens?: TokenWeight): LeaseRequest => ({
      modelGroupKey: 'llama',
      candidates,
      maxWaitMs: 20_000,
      ...(client ? { client } : {}),
      ...(tokens ? { tokens } : {}),
    });
    const counts = async (id: string) => (await queueOf().counts([id])).get(id);
    /** Starts a request and tracks whether it was granted (a wait that outlives the test is released at its end). */
    const start = (candidates: QueueProvider[], tokens?: TokenWeight) => {
      const state: { lease?: Lease } = {};
      const granted = queueOf()
        .acquireLease(request(candidates, tokens))
        .then((lease) => (state.lease = lease));
      pending.push(granted);
      return { state, granted };
    };

    it('admits while both the slots and the tokens hold, and makes the next request wait when its tokens do not fit', async () => {
      const p = limited('p', 1000);
      await queueOf().configure([p]);
      const a = await queueOf().acquireLease(request([p], { prompt: 300, completion: 100 }));
      const b = await queueOf().acquireLease(request([p], { prompt: 400, completion: 100 }));
      expect(await counts('p')).toEqual({ inFlight: 2, queued: 0, tokensInFlight: 900 });
      const c = start([p], { prompt: 100, completion: 50 });
      await waitUntil(async () => (await counts('p'))?.queued === 1, 5000, 'the third request to wait for tokens');
      expect(c.state.lease).toBeUndefined();
      await b.release();
      await c.granted;
      expect(c.state.lease?.providerId).toBe('p');
      expect(await counts('p')).toEqual({ inFlight: 2, queued: 0, tokensInFlight: 550 });
      await a.release();
      await c.state.lease!.release();
      await waitUntil(async () => (await counts('p'))?.tokensInFlight === 0, 5000, 'every token back');
    });

    it('runs a request larger than the whole limit alone when the provider holds no tokens, never beside others', async () => {
      const p = limited('p', 1000);
      await queueOf().configure([p]);
      const small = await queueOf().acquireLease(request([p], { prompt: 10, completion: 10 }));
      const big = start([p], { prompt: 1400, completion: 100 });
      await waitUntil(async () => (await counts('p'))?.queued === 1, 5000, 'the large request to wait');
      // A small newcomer that would fit does not pass the large request waiting ahead of it.
      const later = start([p], { prompt: 10, completion: 10 });
      await waitUntil(async () => (await counts('p'))?.queued === 2, 5000, 'the newcomer to queue behind it');
      expect(big.state.lease).toBeUndefined();
      await small.release();
      await big.granted;
      expect(await counts('p')).toEqual({ inFlight: 1, queued: 1, tokensInFlight: 1500 });
      expect(later.state.lease).toBeUndefined();
      await big.state.lease!.release();
      await later.granted;
      expect(await counts('p')).toEqual({ inFlight: 1, queued: 0, tokensInFlight: 20 });
      await later.state.lease!.release();
    });

    it('runs an allowance past every number (1e21, Infinity) alone as the largest weight, and takes every token back', async () => {
      const p = limited('p', 1000);
      await queueOf().configure([p]);
      for (const completion of [1e21, Number.POSITIVE_INFINITY]) {
        const huge = await queueOf().acquireLease(request([p], { prompt: 10, completion }));
        expect((await counts('p'))?.tokensInFlight).toBeGreaterThanOrEqual(Number.MAX_SAFE_INTEGER);
        const small = start([p], { prompt: 10, completion: 10 });
        await waitUntil(async () => (await counts('p'))?.queued === 1, 5000, 'a small request to wait beside it');
        await huge.release();
        await small.granted;
        expect(await counts('p')).toEqual({ inFlight: 1, queued: 0, tokensInFlight: 20 });
        await small.state.lease!.release();
        await waitUntil(async () => (await counts('p'))?.tokensInFlight === 0, 5000, 'every token back');
      }
    });

    it('gives the prompt part back at prefillDone (idempotent), admitting a waiter; release returns the rest', async () => {
      const p = limited('p', 1000);
      await queueOf().configure([p]);
      const a = await queueOf().acquireLease(request([p], { prompt: 600, completion: 200 }));
      const b = start([p], { prompt: 300, completion: 100 });
      await waitUntil(async () => (await counts('p'))?.queued === 1, 5000, 'the second request to wait');
      await a.prefillDone();
      await b.granted;
      expect(await counts('p')).toEqual({ inFlight: 2, queued: 0, tokensInFlight: 600 });
      await a.prefillDone();
      expect((await counts('p'))?.tokensInFlight).toBe(600);
      await a.release();
      await a.prefillDone();
      expect(await counts('p')).toEqual({ inFlight: 1, queued: 0, tokensInFlight: 400 });
      await b.state.lease!.release();
      expect(await counts('p')).toEqual({ inFlight: 0, queued: 0, tokensInFlight: 0 });
    });

    it("reserves the provider's default completion allowance for a request that names none", async () => {
      const p = { ...limited('p', 1000), defaultCompletionTokens: 250 };
      await queueOf().configure([p]);
      const a = await queueOf().acquireLease(request([p], { prompt: 100 }));
      expect((await counts('p'))?.tokensInFlight).toBe(350);
      await a.release();
    });

    it("multiplies the provider's default allowance by a chat request's n when it names no max_tokens", async () => {
      // The reported input: 25 concurrent chats of `n: 100` without max_tokens (prompt 6 tokens each).
      const chat = estimateTokenWeight('chat', { model: 'llama', messages: [{ role: 'user', content: 'hi' }], n: 100 });
      const p = { ...limited('p', 20_000, 100), defaultCompletionTokens: 40 };
      await queueOf().configure([p]);
      const runs = Array.from({ length: 25 }, () => start([p], chat));
      // 6 + 40 × 100 = 4006 each: four fit in 20,000, the others wait for tokens.
      await waitUntil(async () => (await counts('p'))?.queued === 21, 5000, 'the others to wait for tokens');
      expect(await counts('p')).toEqual({ inFlight: 4, queued: 21, tokensInFlight: 4 * 4006 });
      const released = new Set<Lease>();
      while (released.size < runs.length) {
        await waitUntil(async () => runs.some((r) => r.state.lease && !released.has(r.state.lease)), 5000, 'a grant');
        // Waiters granted on a release hold 4006 each too: never more than four at once.
        const now = await counts('p');
        expect(now?.inFlight).toBeLessThanOrEqual(4);
        expect(now?.tokensInFlight).toBe((now?.inFlight ?? -1) * 4006);
        for (const { state } of runs)
          if (state.lease && !released.has(state.lease)) {
            released.add(state.lease);
            await state.lease.release();
          }
      }
      await waitUntil(async () => (await counts('p'))?.tokensInFlight === 0, 5000, 'every token back');
      // The default default (1024) × 100 is over the whole limit: such a request runs alone.
      const q = limited('q', 20_000, 100);
      await queueOf().configure([p, q]);
      const alone = await queueOf().acquireLease(request([q], chat));
      expect((await counts('q'))?.tokensInFlight).toBe(6 + 102_400);
      const beside = start([q], chat);
      await waitUntil(async () => (await counts('q'))?.queued === 1, 5000, 'the next one to wait');
      await alone.release();
      await beside.granted;
      await beside.state.lease?.release();
      // A hostile n (1e300) weighs the most a count holds, and its tokens all come back.
      const hostile = estimateTokenWeight('chat', { model: 'llama', messages: [], n: 1e300 });
      const huge = await queueOf().acquireLease(request([p], hostile));
      expect((await counts('p'))?.tokensInFlight).toBe(Number.MAX_SAFE_INTEGER);
      await huge.release();
      expect((await counts('p'))?.tokensInFlight).toBe(0);
    });

    it('grants at once on a sibling whose tokens fit when the least-loaded candidate has a slot but not the tokens', async () => {
      const p = limited('p', 1000, 8);
      const q = limited('q', 1000, 2);
      await queueOf().configure([p, q]);
      const a = await queueOf().acquireLease(request([p], { prompt: 900, completion: 0 }));
      const onQ = await queueOf().acquireLease(request([q], { prompt: 10, completion: 0 }));
      // p is the least loaded (1/8 against 1/2) but holds 900 of its 1000 tokens.
      const b = await queueOf().acquireLease(request([p, q], { prompt: 500, completion: 0 }));
      expect(b.providerId).toBe('q');
      expect((await counts('q'))?.tokensInFlight).toBe(510);
      await Promise.all([a.release(), b.release(), onQ.release()]);
    });

    it('decides as before on a provider without a token limit, whatever the weight', async () => {
      const p = limited('p', undefined, 2);
      await queueOf().configure([p]);
      const a = await queueOf().acquireLease(request([p], { prompt: 10_000_000, completion: 10_000_000 }));
      const b = await queueOf().acquireLease(request([p], { prompt: 10_000_000 }));
      expect(await counts('p')).toEqual({ inFlight: 2, queued: 0 });
      await a.prefillDone();
      const c = start([p], { prompt: 1 });
      await waitUntil(async () => (await counts('p'))?.queued === 1, 5000, 'the third request to wait for a slot');
      await a.release();
      await c.granted;
      await Promise.all([b.release(), c.state.lease!.release()]);
      expect(await counts('p')).toEqual({ inFlight: 0, queued: 0 });
    });
  });
}
