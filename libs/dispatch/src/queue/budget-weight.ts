import type { LeaseRequest } from './provider-queue';
import { defaultAllowance, wholeTokens } from './token-limit';

/**
 * The tokens a request reserves in its client's budget windows (docs/architecture.md, "Token
 * budgets"; README "Token budgets"): its prompt estimate plus its completion allowance
 * (`LeaseRequest.tokens`); a completion it does not name counts as the largest
 * `defaultCompletionTokens` of its candidates, else `DEFAULT_COMPLETION_TOKENS`, times its
 * `choices` (chat `n`: `defaultAllowance`); a request without a weight counts that default once. A
 * whole number ≥ 0, at most `Number.MAX_SAFE_INTEGER` (`wholeTokens`: an unbounded allowance weighs
 * as much as the largest window a config can hold).
 */
export function budgetWeight(request: Pick<LeaseRequest, 'tokens' | 'candidates'>): number {
  let completion = request.tokens?.completion;
  if (completion === undefined) {
    const defaults = request.candidates.map((c) => c.defaultCompletionTokens ?? -1);
    const largest = Math.max(-1, ...defaults);
    completion = defaultAllowance(largest >= 0 ? largest : undefined, request.tokens ?? {});
  }
  return wholeTokens(wholeTokens(request.tokens?.prompt ?? 0) + wholeTokens(completion));
}
