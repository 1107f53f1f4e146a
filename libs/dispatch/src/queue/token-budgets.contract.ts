import {
  budgetProvider as provider,
  budgetScenario,
  DAY_RESET,
  expectStanding,
  MINUTE_RESET,
  type BudgetContractOptions,
} from '../testing/budget-scenario';
import { estimateTokenWeight } from '../route/token-weight';
import { waitUntil } from '../testing/wait-until';
import type { AdmissionError } from './admission-error';
import type { ProviderQueue } from './provider-queue';

/**
 * The token-budget scenarios of the `ProviderQueue` contract (docs/architecture.md, "Token budgets"),
 * run by `describeProviderQueueContract` on every backend: a request reserves its weight in each
 * window of its client when it arrives (granted or queued), is refused `rate_limit_exceeded` when a
 * window cannot hold it (with the time until it can) or never could, either refusal with the client's
 * standing as it decided (`AdmissionError.budget`); release settles the reservation
 * with the tokens used; a waiter that leaves or is shed gives it back whole. The windows are a real
 * minute and day, so the scenarios judge numbers and the retry hint's bounds, not the passing of time.
 */
export function describeTokenBudgetsContract(queueOf: () => ProviderQueue, opts: BudgetContractOptions = {}): void {
  describe('token budgets', () => {
    const { client, acquire, start, refusal, windows, minute, queued } = budgetScenario(queueOf, opts);

    it('reserves the weight at the grant, shows the standing and refuses what the window cannot hold with the time until it can', async () => {
      const p = provider('p', 8);
      await queueOf().configure([p]);
      const c = client('metered', { perMinute: 1000 });
      const a = await acquire([p], c, { prompt: 100, completion: 200 });
      expectStanding(a.budget, { window: 'minute', limitTokens: 1000, remainingTokens: 700 }, MINUTE_RESET);
      expect(await windows(c)).toEqual([minute(c, 1000, 300, 0)]);
      const b = await acquire([p], c, { prompt: 600, completion: 100 });
      expect(b.budget?.remainingTokens).toBe(0);
      const refused = await refusal(acquire([p], c, { prompt: 1, completion: 0 }));
      expect(refused.code).toBe('rate_limit_exceeded');
      // The first reservation leaves the window 60 to 61 s after it was made, and the next one with it.
      expect(refused.retryAfterS).toBeGreaterThanOrEqual(59);
      expect(refused.retryAfterS).toBeLessThanOrEqual(61);
      expect(refused.message).toMatch(
        /^Rate limit reached for client "metered" on tokens per min \(TPM\): Limit 1000, Used 1000 \(reserved by requests in flight included\), Requested 1\. Please try again in (\d+(\.\d)?s|1m\d+s)\.$/,
      );
      // The refusal carries the standing it was decided on, and reserved nothing nor took a slot.
      expectStanding(refused.budget, { window: 'minute', limitTokens: 1000, remainingTokens: 0 }, MINUTE_RESET);
      expect(await windows(c)).toEqual([minute(c, 1000, 1000, 0)]);
      expect((await queueOf().counts(['p'])).get('p')?.inFlight).toBe(2);
      await a.release();
      await b.release();
    });

    it('settles at release: used below the reservation gives the difference back, above it charges more, none charges the reservation', async () => {
      const p = provider('p', 8);
      await queueOf().configure([p]);
      const c = client('metered', { perMinute: 10_000 });
      const a = await acquire([p], c, { prompt: 100, completion: 900 });
      const b = await acquire([p], c, { prompt: 100, completion: 100 });
      const d = await acquire([p], c, { prompt: 50, completion: 50 });
      expect(await windows(c)).toEqual([minute(c, 10_000, 1300, 0)]);
      await a.release({ tokens: 250, reported: true });
      expect(await windows(c)).toEqual([minute(c, 10_000, 300, 250)]);
      await b.release({ tokens: 700, reported: false });
      expect(await windows(c)).toEqual([minute(c, 10_000, 100, 950)]);
      await d.release();
      await d.release({ tokens: 5000, reported: true });
      expect(await windows(c)).toEqual([minute(c, 10_000, 0, 1050)]);
      // Released leases settle once: a second release changes nothing.
      await a.release({ tokens: 9000, reported: true });
      expect(await windows(c)).toEqual([minute(c, 10_000, 0, 1050)]);
    });

    it('reserves a waiting request at arrival and gives it back whole when it leaves (abort, max_wait_ms)', async () => {
      const p = provider('p', 1);
      await queueOf().configure([p]);
      const c = client('metered', { perMinute: 5000 });
      const holder = await acquire([p], c, { prompt: 100, completion: 100 });
      const abort = new AbortController();
      const aborted = start([p], c, { prompt: 1000, completion: 0 }, { signal: abort.signal });
      await waitUntil(async () => (await queued('p')) === 1, 5000, 'the request to wait');
      expect(await windows(c)).toEqual([minute(c, 5000, 1200, 0)]);
      abort.abort();
      await aborted.done;
      expect(aborted.state.error?.code).toBe('client_aborted');
      await waitUntil(async () => (await queued('p')) === 0, 5000, 'the aborted request to leave');
      expect(await windows(c)).toEqual([minute(c, 5000, 200, 0)]);
      const late = await refusal(acquire([p], c, { prompt: 2000, completion: 0 }, { maxWaitMs: 300 }));
      expect(late.code).toBe('queue_timeout');
      expect(await windows(c)).toEqual([minute(c, 5000, 200, 0)]);
      await holder.release({ tokens: 150, reported: true });
      expect(await windows(c)).toEqual([minute(c, 5000, 0, 150)]);
    });

    it('carries a queued request’s reservation to its grant, its standing the one at arrival', async () => {
      const p = provider('p', 1);
      await queueOf().configure([p]);
      const c = client('metered', { perMinute: 5000 });
      const holder = await acquire([p], c, { prompt: 1000, completion: 0 });
      const waiting = start([p], c, { prompt: 500, completion: 500 });
      await waitUntil(async () => (await queued('p')) === 1, 5000, 'the request to wait');
      await holder.release({ tokens: 1000, reported: true });
      await waiting.done;
      expect(waiting.state.lease?.budget?.remainingTokens).toBe(3000);
      expect(await windows(c)).toEqual([minute(c, 5000, 1000, 1000)]);
      await waiting.state.lease?.release({ tokens: 10, reported: true });
      expect(await windows(c)).toEqual([minute(c, 5000, 0, 1010)]);
    });

    it('gives a shed waiter’s reservation back whole', async () => {
      const p = provider('p', 1, { maxQueued: 1 });
      await queueOf().configure([p]);
      const batch = client('batch', { perMinute: 5000 }, { band: -1 });
      const chat = client('chat', undefined, { band: 5 });
      const holder = await acquire([p], chat, undefined);
      const shed = start([p], batch, { prompt: 700, completion: 0 });
      await waitUntil(async () => (await queued('p')) === 1, 5000, 'the batch request to wait');
      expect(await windows(batch)).toEqual([minute(batch, 5000, 700, 0)]);
      const newcomer = start([p], chat, undefined);
      await shed.done;
      expect(shed.state.error?.code).toBe('queue_full');
      await waitUntil(async () => (await windows(batch))[0].reservedTokens === 0, 5000, 'the shed reservation back');
      expect(await windows(batch)).toEqual([minute(batch, 5000, 0, 0)]);
      await holder.release();
      await newcomer.done;
    });

    it('refuses a request larger than the whole budget for good, with no retry hint', async () => {
      const p = provider('p', 8);
      await queueOf().configure([p]);
      const c = client('metered', { perMinute: 1000, perDay: 100_000 });
      const refused = await refusal(acquire([p], c, { prompt: 900, completion: 200 }));
      expect(refused.code).toBe('rate_limit_exceeded');
      expect(refused.retryAfterS).toBeUndefined();
      // Nothing charged yet: the whole budget remains, the minute (the smaller remaining) the tightest.
      expect(refused.budget).toEqual({ window: 'minute', limitTokens: 1000, remainingTokens: 1000, resetMs: 0 });
      expect(refused.message).toBe(
        'Request too large for client "metered" on tokens per min (TPM): Limit 1000, Requested 1100. The request alone is larger than the whole budget, so it can never be admitted: lower max_tokens (or shorten the input), or raise the client\'s tokens_per_minute.',
      );
      expect(await windows(c)).toEqual([minute(c, 1000, 0, 0), { ...minute(c, 100_000, 0, 0), window: 'day' }]);
      // With charges in the windows, the refusal's standing is read from them.
      const a = await acquire([p], c, { prompt: 300, completion: 0 });
      const again = await refusal(acquire([p], c, { prompt: 1001, completion: 0 }));
      expectStanding(again.budget, { window: 'minute', limitTokens: 1000, remainingTokens: 700 }, MINUTE_RESET);
      await a.release();
    });

    it('weighs an allowance past every number (1e21 tokens, an Infinity) more than any window: refused for good, nothing left behind', async () => {
      const p = provider('p', 8);
      await queueOf().configure([p]);
      const c = client('metered', { perMinute: 1000, perDay: 100_000 }, { maxInFlight: 1 });
      for (const tokens of [
        { prompt: 1e21, completion: 0 },
        { prompt: 10, completion: Number.POSITIVE_INFINITY },
        { prompt: 10, completion: 1e300 },
      ]) {
        const refused = await refusal(acquire([p], c, tokens));
        expect(refused.code).toBe('rate_limit_exceeded');
        expect(refused.retryAfterS).toBeUndefined();
        expect(refused.message).toContain(`Requested ${Number.MAX_SAFE_INTEGER}.`);
      }
      // No count, no reservation: the client's one slot still takes a request.
      expect((await queueOf().clientCounts()).filter((k) => k.clientId === 'metered' && k.inFlight > 0)).toEqual([]);
      expect(await windows(c)).toEqual([minute(c, 1000, 0, 0), { ...minute(c, 100_000, 0, 0), window: 'day' }]);
      const a = await acquire([p], c, { prompt: 100, completion: 0 });
      // Usage past every number is charged as the most a window can hold, not as nothing.
      await a.release({ tokens: 1e21, reported: true });
      expect((await windows(c))[0]).toEqual(minute(c, 1000, 0, Number.MAX_SAFE_INTEGER));
    });

    it('states a budget of 15 digits exactly in its refusal, and resets at once a window whose reservations were all given back', async () => {
      const p = provider('p', 1);
      await queueOf().configure([p]);
      const big = client('big', { perMinute: 123_456_789_012_345 });
      const refused = await refusal(acquire([p], big, { prompt: 123_456_789_012_346, completion: 0 }));
      expect(refused.message).toContain('Limit 123456789012345, Requested 123456789012346.');
      expect(refused.budget?.limitTokens).toBe(123_456_789_012_345);
      const c = client('metered', { perMinute: 5000 });
      const other = client('other', { perMinute: 5000 });
      const holder = await acquire([p], other, { prompt: 10, completion: 0 });
      const late = await refusal(acquire([p], c, { prompt: 100, completion: 0 }, { maxWaitMs: 300 }));
      expect(late.code).toBe('queue_timeout');
      const [w] = await queueOf().clientBudgets([c]);
      expect(w).toMatchObject({ reservedTokens: 0, usedTokens: 0, remainingTokens: 5000, resetMs: 0 });
      const next = await refusal(acquire([p], c, { prompt: 100, completion: 0 }, { maxWaitMs: 300 }));
      expect(next.code).toBe('queue_timeout');
      await holder.release();
    });

    it('keeps two clients apart, and a client without a budget costs nothing and shows none', async () => {
      const p = provider('p', 8);
      await queueOf().configure([p]);
      const one = client('one', { perMinute: 1000 });
      const two = client('two', { perMinute: 1000 });
      const free = client('free', undefined);
      const a = await acquire([p], one, { prompt: 1000, completion: 0 });
      const b = await acquire([p], two, { prompt: 400, completion: 0 });
      const f = await acquire([p], free, { prompt: 1_000_000, completion: 0 });
      expect(f.budget).toBeUndefined();
      expect((await refusal(acquire([p], one, { prompt: 1, completion: 0 }))).code).toBe('rate_limit_exceeded');
      expect(await windows(one, two, free)).toEqual([minute(one, 1000, 1000, 0), minute(two, 1000, 400, 0)]);
      await Promise.all([a.release(), b.release(), f.release()]);
    });

    it('counts an absent completion as the largest default of the candidates, and an absent weight as that alone', async () => {
      const p = provider('p', 8, { maxTokensInFlight: 100_000, defaultCompletionTokens: 300 });
      const q = provider('q', 8, { maxTokensInFlight: 100_000, defaultCompletionTokens: 500 });
      const r = provider('r', 8);
      await queueOf().configure([p, q, r]);
      const c = client('metered', { perMinute: 100_000 });
      const a = await acquire([p, q], c, { prompt: 40 });
      const b = await acquire([p, q], c, undefined);
      const d = await acquire([r], c, undefined);
      expect(await windows(c)).toEqual([minute(c, 100_000, 540 + 500 + 1024, 0)]);
      await Promise.all([a.release(), b.release(), d.release()]);
    });

    it("multiplies the default allowance by a chat request's n when it names no max_tokens", async () => {
      // The reported input: 25 concurrent chats of `n: 100` without max_tokens (prompt 6 tokens each)
      // from a client with 20,000 tokens a minute.
      const chat = estimateTokenWeight('chat', { model: 'llama', messages: [{ role: 'user', content: 'hi' }], n: 100 });
      const p = provider('p', 100, { defaultCompletionTokens: 40 });
      const q = provider('q', 100);
      await queueOf().configure([p, q]);
      const c = client('metered', { perMinute: 20_000 });
      const answers = await Promise.allSettled(Array.from({ length: 25 }, () => acquire([p], c, chat)));
      const granted = answers.flatMap((a) => (a.status === 'fulfilled' ? [a.value] : []));
      const refused = answers.flatMap((a) => (a.status === 'rejected' ? [a.reason as AdmissionError] : []));
      // 6 + 40 × 100 = 4006 each: four fit in 20,000.
      expect([granted.length, refused.length]).toEqual([4, 21]);
      expect(refused.map((e) => [e.code, e.retryAfterS !== undefined])).toEqual(
        Array.from({ length: 21 }, () => ['rate_limit_exceeded', true]),
      );
      expect(refused[0].message).toContain(
        'Limit 20000, Used 16024 (reserved by requests in flight included), Requested 4006.',
      );
      expect(await windows(c)).toEqual([minute(c, 20_000, 16_024, 0)]);
      await Promise.all(granted.map((l) => l.release({ tokens: 10, reported: true })));
      // The default default (1024) × 100 is over the whole budget: refused for good, nothing reserved.
      const big = await refusal(acquire([q], c, chat));
      expect(big.retryAfterS).toBeUndefined();
      expect(big.message).toContain('Limit 20000, Requested 102406.');
      // A hostile n (1e300) weighs the most a count holds.
      const hostile = estimateTokenWeight('chat', { model: 'llama', messages: [], n: 1e300 });
      expect((await refusal(acquire([p], c, hostile))).message).toContain(`Requested ${Number.MAX_SAFE_INTEGER}.`);
      expect(await windows(c)).toEqual([minute(c, 20_000, 0, 40)]);
    });

    it('holds with a token limit on the provider: both decide, each on its own count', async () => {
      const p = provider('p', 8, { maxTokensInFlight: 1000 });
      await queueOf().configure([p]);
      const c = client('metered', { perMinute: 2000 });
      const a = await acquire([p], c, { prompt: 500, completion: 200 });
      // Fits the budget (1400 of 2000) but not the provider's tokens (1400 of 1000): it waits, reserved.
      const b = start([p], c, { prompt: 600, completion: 100 });
      await waitUntil(async () => (await queued('p')) === 1, 5000, 'the second request to wait for tokens');
      expect(await windows(c)).toEqual([minute(c, 2000, 1400, 0)]);
      // Fits neither: the budget refuses it at once.
      expect((await refusal(acquire([p], c, { prompt: 700, completion: 0 }))).code).toBe('rate_limit_exceeded');
      await a.release({ tokens: 300, reported: true });
      await b.done;
      expect((await queueOf().counts(['p'])).get('p')).toEqual({ inFlight: 1, queued: 0, tokensInFlight: 700 });
      expect(await windows(c)).toEqual([minute(c, 2000, 700, 300)]);
      await b.state.lease?.release({ tokens: 700, reported: true });
      expect(await windows(c)).toEqual([minute(c, 2000, 0, 1000)]);
    });

    it('reserves in both windows when both are set; the tighter one is the standing and refuses', async () => {
      const p = provider('p', 8);
      await queueOf().configure([p]);
      const daily = client('daily', { perMinute: 10_000, perDay: 1500 });
      const a = await acquire([p], daily, { prompt: 1000, completion: 0 });
      expectStanding(a.budget, { window: 'day', limitTokens: 1500, remainingTokens: 500 }, DAY_RESET);
      const refused = await refusal(acquire([p], daily, { prompt: 600, completion: 0 }));
      expect(refused.message).toContain('on tokens per day (TPD): Limit 1500, Used 1000');
      expectStanding(refused.budget, { window: 'day', limitTokens: 1500, remainingTokens: 500 }, DAY_RESET);
      expect(refused.retryAfterS).toBeGreaterThan(86_400 - 2);
      expect(refused.retryAfterS).toBeLessThanOrEqual(86_460);
      // Both windows spent alike: the refusal shows the one that resets later, the day.
      const even = client('even', { perMinute: 500, perDay: 500 });
      const e = await acquire([p], even, { prompt: 500, completion: 0 });
      const spent = await refusal(acquire([p], even, { prompt: 1, completion: 0 }));
      expectStanding(spent.budget, { window: 'day', limitTokens: 500, remainingTokens: 0 }, DAY_RESET);
      await e.release();
      const perMinute = client('per-minute', { perMinute: 1000, perDay: 1_000_000 });
      const b = await acquire([p], perMinute, { prompt: 200, completion: 0 });
      expect(b.budget).toMatchObject({ window: 'minute', limitTokens: 1000, remainingTokens: 800 });
      await a.release({ tokens: 100, reported: true });
      expect(await windows(daily)).toEqual([
        minute(daily, 10_000, 0, 100),
        { ...minute(daily, 1500, 0, 100), window: 'day' },
      ]);
      await b.release();
    });
  });
}
