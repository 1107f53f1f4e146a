import type { BudgetStanding, ClientBudgetWindow, ProviderQueue, QueueClient } from '@iop/dispatch';
import type { Response } from 'express';
import { setRateLimitHeaders } from '../http/answer/rate-limit-headers';

/** Longest a refusal's answer waits for the client's standing, ms; past it the 429 goes without the `x-ratelimit-*` headers. */
export const STANDING_WAIT_MS = 250;

/**
 * Puts a budgeted client's standing on the `429 rate_limit_exceeded` its budget earned (README
 * "Token budgets: what a client sees"): the queue's windows of the client right after the refusal
 * (`ProviderQueue.clientBudgets`, fleet-wide on Redis), shown as the tightest of them
 * ({@link tightestWindow}). One more queue call, on a refusal only; it never throws, and a queue that
 * does not answer within {@link STANDING_WAIT_MS} leaves the answer without the headers.
 */
export async function showRefusedBudget(res: Response, queue: ProviderQueue, client: QueueClient): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const windows = await Promise.race([
      queue.clientBudgets([client]),
      new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), STANDING_WAIT_MS))),
    ]);
    const standing = windows && tightestWindow(windows.filter((w) => w.clientId === client.id));
    if (standing) setRateLimitHeaders(res, standing);
  } catch {
    // The refusal is the answer; its headers are a courtesy.
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The window a client is tightest in: the least remaining tokens, and of equals the one that resets
 * last (it decides when the client can send again); undefined for none.
 */
export function tightestWindow(windows: readonly ClientBudgetWindow[]): BudgetStanding | undefined {
  let best: ClientBudgetWindow | undefined;
  for (const w of windows) {
    if (
      best === undefined ||
      w.remainingTokens < best.remainingTokens ||
      (w.remainingTokens === best.remainingTokens && w.resetMs > best.resetMs)
    )
      best = w;
  }
  return (
    best && {
      window: best.window,
      limitTokens: best.limitTokens,
      remainingTokens: best.remainingTokens,
      resetMs: best.resetMs,
    }
  );
}
