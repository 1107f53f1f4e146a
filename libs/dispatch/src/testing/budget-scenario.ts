import { AdmissionError } from '../queue/admission-error';
import type { Lease, LeaseRequest, ProviderQueue, QueueClient, QueueProvider } from '../queue/provider-queue';
import type { BudgetStanding, ClientBudgetWindow, TokenBudgets } from '../queue/token-budget';
import type { TokenWeight } from '../queue/token-limit';

/** A pool provider of the budget scenarios: `maxQueued` 100 unless `extra` says otherwise. */
export const budgetProvider = (
  providerId: string,
  maxConcurrency: number,
  extra: Partial<QueueProvider> = {},
): QueueProvider => ({ providerId, maxConcurrency, maxQueued: 100, ...extra });

/**
 * The bounds of a fresh charge's `resetMs`, ms (lower exclusive, upper inclusive): it leaves its
 * window between a window and a bucket more after it was made (docs/architecture.md, "Token budgets"),
 * less the time a scenario takes (2 s at most).
 */
export const MINUTE_RESET: readonly [number, number] = [59_000, 61_000];
export const DAY_RESET: readonly [number, number] = [86_400_000 - 2000, 86_460_000];

/** Expects `standing` to be `expected` (window, limit, remaining: exactly) with a `resetMs` within `reset` ({@link MINUTE_RESET}). */
export function expectStanding(
  standing: BudgetStanding | undefined,
  expected: Omit<BudgetStanding, 'resetMs'>,
  reset: readonly [number, number],
): void {
  expect(standing).toEqual({ ...expected, resetMs: expect.any(Number) });
  expect(standing?.resetMs ?? -1).toBeGreaterThan(reset[0]);
  expect(standing?.resetMs ?? -1).toBeLessThanOrEqual(reset[1]);
}

/** How a run of the budget scenarios makes its clients. */
export interface BudgetContractOptions {
  /** Marks every client `solo` (flow control off, `QueueClient.solo`): the budget holds the same. */
  readonly solo?: boolean;
}

/**
 * What the token-budget scenarios of the `ProviderQueue` contract (`token-budgets.contract.ts`) send
 * and read on the queue `queueOf()` gives: clients, requests of a token weight, refusals, a client's
 * windows. Call it inside a `describe`: it registers an `afterEach` that releases every lease a
 * scenario left (a request started with `start`, a `refusal` that was granted after all).
 */
export function budgetScenario(queueOf: () => ProviderQueue, opts: BudgetContractOptions) {
  const pending: Promise<unknown>[] = [];
  afterEach(async () => {
    for (const r of await Promise.allSettled(pending.splice(0)))
      if (r.status === 'fulfilled' && r.value) await (r.value as Lease).release();
  });
  const client = (id: string, tokenBudgets: TokenBudgets | undefined, extra: Partial<QueueClient> = {}) => ({
    id,
    band: 0,
    weight: 1,
    ...(tokenBudgets ? { tokenBudgets } : {}),
    ...(opts.solo ? { solo: true } : {}),
    ...extra,
  });
  const request = (
    candidates: QueueProvider[],
    who: QueueClient,
    tokens: TokenWeight | undefined,
    extra: Partial<LeaseRequest> = {},
  ): LeaseRequest => ({
    modelGroupKey: 'llama',
    candidates,
    maxWaitMs: 20_000,
    client: who,
    ...(tokens ? { tokens } : {}),
    ...extra,
  });
  const acquire = (...args: Parameters<typeof request>) => queueOf().acquireLease(request(...args));
  /** Starts a request that may wait; its lease (if any) is released after the test. */
  const start = (...args: Parameters<typeof request>) => {
    const state: { lease?: Lease; error?: AdmissionError } = {};
    const done = acquire(...args).then(
      (lease) => (state.lease = lease),
      (e: AdmissionError) => void (state.error = e),
    );
    pending.push(done);
    return { state, done };
  };
  /** The AdmissionError `promise` rejects with (a lease it grants instead fails the test and is released). */
  const refusal = async (promise: Promise<Lease>): Promise<AdmissionError> => {
    const error = await promise.then(
      (lease) => {
        pending.push(Promise.resolve(lease));
        return undefined;
      },
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(AdmissionError);
    return error as AdmissionError;
  };
  /** The client's windows as `clientBudgets` reads them, without the reset times. */
  const windows = async (...who: QueueClient[]) =>
    (await queueOf().clientBudgets(who)).map(({ resetMs: _reset, ...w }) => w);
  /** A minute window of `c` as {@link windows} shows it (tokens). */
  const minute = (
    c: QueueClient,
    limit: number,
    reserved: number,
    used: number,
  ): Omit<ClientBudgetWindow, 'resetMs'> => ({
    clientId: c.id,
    window: 'minute',
    limitTokens: limit,
    reservedTokens: reserved,
    usedTokens: used,
    remainingTokens: Math.max(0, limit - reserved - used),
  });
  /** Requests waiting on provider `id`. */
  const queued = async (id: string) => (await queueOf().counts([id])).get(id)?.queued ?? 0;
  return { client, acquire, start, refusal, windows, minute, queued };
}
