/** The lease scripts' answers as `LeaseStore` decodes them (docs/architecture.md, "Lease protocol"). */
import type { BudgetStanding, BudgetWindow } from './token-budget';

/**
 * What one admission script decided: granted at once, queued (or parked at the client's cap) on a
 * provider (`standing`: the client's tightest token budget window after its reservation, for a client
 * with a budget), refused because every candidate's queue is full (`queued`: their waiting jobs) or the
 * client's `max_queued` is reached (`queued`: its waiting jobs in the pool), or a candidate has no
 * limits in Redis; or refused by the client's token budget (docs/architecture.md, "Token budgets"):
 * `budget` a window that holds `used` tokens cannot hold the request for `retryMs`, `budget_never`
 * the request is larger than the window's whole `limit`; both with `standing`, the client's tightest
 * window as the script read it (nothing reserved).
 */
export type AdmitResult =
  | { kind: 'granted'; providerId: string; standing?: BudgetStanding }
  | { kind: 'queued'; providerId: string; standing?: BudgetStanding }
  | { kind: 'full'; queued: number }
  | { kind: 'client_full'; queued: number }
  | { kind: 'unconfigured'; providerId: string }
  | { kind: 'budget'; window: BudgetWindow; limit: number; used: number; retryMs: number; standing: BudgetStanding }
  | { kind: 'budget_never'; window: BudgetWindow; limit: number; standing: BudgetStanding };

/** A budget window as the scripts name it: 'm' the minute, 'd' the day. */
export function budgetWindowOf(name: string): BudgetWindow {
  return name === 'd' ? 'day' : 'minute';
}

/**
 * Decodes `admit.lua`'s reply (its status and values); `providerOf` turns a queue name into its
 * provider id.
 */
export function decodeAdmit(
  status: AdmitResult['kind'],
  values: readonly string[],
  providerOf: (q: string) => string,
): AdmitResult {
  const n = values.map(Number);
  switch (status) {
    case 'full':
    case 'client_full':
      return { kind: status, queued: n[0] };
    case 'budget': {
      const standing = standingAt(values, 4);
      return { kind: status, window: budgetWindowOf(values[0]), limit: n[1], used: n[2], retryMs: n[3], standing };
    }
    case 'budget_never':
      return { kind: status, window: budgetWindowOf(values[0]), limit: n[1], standing: standingAt(values, 2) };
    case 'unconfigured':
      return { kind: status, providerId: providerOf(values[0]) };
    default: {
      const providerId = providerOf(values[0]);
      if (values.length < 5) return { kind: status, providerId };
      return { kind: status, providerId, standing: standingAt(values, 1) };
    }
  }
}

/** The standing a script replies as four values from `values[at]`: window, limit, remaining, resetMs. */
function standingAt(values: readonly string[], at: number): BudgetStanding {
  const [window, limit, remaining, reset] = values.slice(at, at + 4);
  return {
    window: budgetWindowOf(window),
    limitTokens: Number(limit),
    remainingTokens: Number(remaining),
    resetMs: Number(reset),
  };
}

/**
 * What a waiter's job became: granted (on which provider), still waiting, evicted for a higher band
 * (`shed`: docs/architecture.md, "Clients, priority and fair share"), or gone with Redis state.
 */
export type WaiterState =
  { kind: 'granted'; providerId: string } | { kind: 'waiting' } | { kind: 'shed' } | { kind: 'gone' };
