import { budgetWindows, type ClientBudgetWindow, type QueueClient } from '@iop/dispatch';
import { configuredClients, type EdgeConfig, type FlowClient } from '@iop/validate';
import type { ClientTokenBudgetStatus } from './snapshot';

/**
 * The configured clients that have a token budget (`gateway.clients[].tokens_per_minute`,
 * `tokens_per_day`; README "Token budgets"), in config order, as `ProviderQueue.clientBudgets` and
 * `readTokenBudgets` take them. Empty when no client has one: then there is nothing to read. Pure.
 */
export function budgetedClients(config: Pick<EdgeConfig, 'gateway'>): QueueClient[] {
  return configuredClients(config.gateway)
    .map((c) => c.client)
    .filter((c) => c.tokenBudgets !== undefined)
    .map((c) => ({ id: c.id, band: c.priority, weight: c.weight, tokenBudgets: c.tokenBudgets }));
}

/**
 * The `token_budgets` of one client in `/status` (README "Status"): `undefined` (no field) for a
 * client without a budget; `null` when `windows` is undefined (they could not be read) or lacks one
 * of the client's windows (read under another config); else each window the client sets, minute
 * first, in snake_case. Pure.
 */
export function clientTokenBudgets(
  client: FlowClient,
  windows: readonly ClientBudgetWindow[] | undefined,
): ClientTokenBudgetStatus[] | null | undefined {
  if (client.tokenBudgets === undefined) return undefined;
  const out: ClientTokenBudgetStatus[] = [];
  for (const [window] of budgetWindows(client.tokenBudgets)) {
    const w = windows?.find((r) => r.clientId === client.id && r.window === window);
    if (!w) return null;
    out.push({
      window: w.window,
      limit: w.limitTokens,
      reserved: w.reservedTokens,
      used: w.usedTokens,
      remaining: w.remainingTokens,
      reset_ms: w.resetMs,
    });
  }
  return out;
}
