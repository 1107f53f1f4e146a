import type { AdmissionError } from '../admission-error';
import { budgetExceeded, budgetTooLarge } from '../admission-errors';
import { budgetWeight } from '../budget-weight';
import { DEFAULT_SHARD_TAG } from '../lease-keys';
import type { AdmitResult } from '../lease-replies';
import { LeaseStore } from '../lease-store';
import type { LeaseRequest, QueueClient } from '../provider-queue';
import type { RedisClient } from '../redis-connection';
import { budgetWindows, type ClientBudgetWindow } from '../token-budget';

/**
 * The tokens a request reserves in its client's token budget (`budgetWeight`), or 0 for a client
 * without one, whose admission then sends no budget and runs no budget command (docs/architecture.md,
 * "Token budgets").
 */
export function budgetWeightOf(request: LeaseRequest, client: QueueClient): number {
  return budgetWindows(client.tokenBudgets).length > 0 ? budgetWeight(request) : 0;
}

/**
 * The refusal of a request of `requested` tokens by its client's budget, as `admit.lua` decided it,
 * carrying the client's standing the script read in the same step (`AdmissionError.budget`).
 */
export function budgetRefusal(
  result: Extract<AdmitResult, { kind: 'budget' | 'budget_never' }>,
  client: string,
  requested: number,
): AdmissionError {
  const { window, limit, standing } = result;
  if (result.kind === 'budget_never') return budgetTooLarge(client, window, { limit, requested }, standing);
  return budgetExceeded(client, window, { ...result, requested }, standing);
}

/**
 * Every window of the budgeted clients among `clients` (`LeaseStore.budgets`, Redis time), summed over
 * `shardTags` (the configured ones; with a budget every provider shares one tag, docs/architecture.md
 * "Token budgets", so a sum only matters across a reload that moved the tag).
 * @throws the Redis error.
 */
export async function readClientBudgets(
  store: LeaseStore,
  shardTags: readonly string[],
  clients: readonly QueueClient[],
): Promise<ClientBudgetWindow[]> {
  const tags = shardTags.length > 0 ? shardTags : [DEFAULT_SHARD_TAG];
  const read = await Promise.all(tags.map((tag) => store.budgets(tag, clients)));
  return read[0].map((w, i): ClientBudgetWindow => {
    const reservedTokens = read.reduce((n, tag) => n + tag[i].reserved, 0);
    const usedTokens = read.reduce((n, tag) => n + tag[i].used, 0);
    return {
      clientId: w.clientId,
      window: w.window,
      limitTokens: w.limit,
      reservedTokens,
      usedTokens,
      remainingTokens: Math.max(0, w.limit - reservedTokens - usedTokens),
      resetMs: Math.max(...read.map((tag) => tag[i].resetMs)),
    };
  });
}

/**
 * {@link readClientBudgets} for a reader that holds no queue, such as the status exporter
 * (docs/architecture.md, "Status model"): the same `budgets.lua` on `redis`, under `prefix`
 * (`queue.prefix`), summed over `shardTags` (the tags the config gives its pool providers,
 * `leaseAddresses`; none: the default tag). One script call per tag, none when no client among
 * `clients` has a budget. The script only reads: the buckets that have left their window are taken out
 * of the numbers, not deleted (admissions delete them; docs/architecture.md, "Token budgets").
 * @throws the Redis error (connection lost, command timeout).
 */
export function readTokenBudgets(
  redis: RedisClient,
  prefix: string,
  shardTags: readonly string[],
  clients: readonly QueueClient[],
): Promise<ClientBudgetWindow[]> {
  // The lease TTL is not used by the budget script.
  return readClientBudgets(new LeaseStore(redis, prefix, 0), shardTags, clients);
}
