/**
 * Per-client token budgets (docs/architecture.md, "Token budgets"; README "Token budgets"): the
 * shapes both `ProviderQueue` backends share. A budget is a number of tokens per sliding window
 * (a minute, a day), fleet-wide; admission reserves a request's estimated weight in every window of
 * its client in the same atomic step as the lease, and release reconciles the reservation with the
 * tokens the call used. Windows run on Redis time (`TIME`) with the Redis backend, on the process
 * clock with the memory backend.
 */

/** The windows a client's budget can set: a sliding minute (60,000 ms) and a sliding day (86,400,000 ms). */
export type BudgetWindow = 'minute' | 'day';

/** Length of each window, ms. */
export const BUDGET_WINDOW_MS: Readonly<Record<BudgetWindow, number>> = { minute: 60_000, day: 86_400_000 };

/**
 * A client's token budgets (`gateway.clients[].tokens_per_minute`, `tokens_per_day`): whole numbers
 * ≥ 1 of tokens per window; an absent window is not limited. Both absent: the client has no budget,
 * and admission does no budget work for it.
 */
export interface TokenBudgets {
  readonly perMinute?: number;
  readonly perDay?: number;
}

/**
 * Where a client stands in its tightest window right after a decision, as the answer headers show it
 * (`x-ratelimit-limit-tokens`, `x-ratelimit-remaining-tokens`, `x-ratelimit-reset-tokens`, named as
 * the OpenAI API names them): `limitTokens` the window's budget, `remainingTokens` ≥ 0 what it can
 * still reserve, `resetMs` ≥ 0 the time until the window holds nothing of what is charged now.
 */
export interface BudgetStanding {
  readonly window: BudgetWindow;
  readonly limitTokens: number;
  readonly remainingTokens: number;
  readonly resetMs: number;
}

/**
 * The tokens a call used, as the gateway knows them when it releases the lease: `reported` true when
 * the upstream's `usage` gave them (prompt + completion), false when the gateway estimated them for a
 * call cut short (prompt estimate + what was relayed). Release charges this instead of the
 * reservation. Whole numbers ≥ 0.
 */
export interface UsedTokens {
  readonly tokens: number;
  readonly reported: boolean;
}

/**
 * One window of one client's budget, fleet-wide (`ProviderQueue.clientBudgets`): `reservedTokens`
 * held by requests not yet reconciled (waiting or in flight), `usedTokens` charged by finished ones,
 * `remainingTokens` = max(0, limit − reserved − used), `resetMs` as in {@link BudgetStanding}.
 */
export interface ClientBudgetWindow {
  readonly clientId: string;
  readonly window: BudgetWindow;
  readonly limitTokens: number;
  readonly reservedTokens: number;
  readonly usedTokens: number;
  readonly remainingTokens: number;
  readonly resetMs: number;
}

/**
 * Bucket length of each window, ms (docs/architecture.md, "Token budgets"): a window is kept as
 * buckets of charges (1 s for the minute, 1 min for the day); a bucket counts until it lies wholly
 * outside the window, so a charge counts for at least the window's length and at most one bucket
 * more. The Lua scripts use the same numbers (`includes/budget.lua`).
 */
export const BUDGET_BUCKET_MS: Readonly<Record<BudgetWindow, number>> = { minute: 1000, day: 60_000 };

/**
 * How many buckets, from the oldest, the `Retry-After` of a refusal looks at (docs/architecture.md,
 * "Token budgets"): the whole minute window; the first hour of the day window (past that, the hint
 * is the time until the last bucket looked at leaves: a lower bound).
 */
export const BUDGET_RETRY_SCAN = 61;

/** The windows a budget sets, in order (minute, then day), with their limits. */
export function budgetWindows(budgets: TokenBudgets | undefined): [BudgetWindow, number][] {
  const out: [BudgetWindow, number][] = [];
  if (budgets?.perMinute !== undefined) out.push(['minute', budgets.perMinute]);
  if (budgets?.perDay !== undefined) out.push(['day', budgets.perDay]);
  return out;
}
