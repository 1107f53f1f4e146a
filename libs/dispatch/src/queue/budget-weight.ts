import type { LeaseRequest } from './provider-queue';
import { DEFAULT_COMPLETION_TOKENS, wholeTokens } from './token-limit';

/**
 * The tokens a request reserves in its client's budget windows (docs/architecture.md, "Token
 * budgets"): its prompt estimate plus its completion allowance (`LeaseRequest.tokens`); a completion
 * it does not name counts as the largest `defaultCompletionTokens` of its candidates, else
 * `DEFAULT_COMPLETION_TOKENS`; a request without a weight counts that completion alone. A whole
 * number ≥ 0, at most `Number.MAX_SAFE_INTEGER` (`wholeTokens`: an unbounded allowance weighs as much
 * as the largest window a config can hold).
 */
export function budgetWeight(request: Pick<LeaseRequest, 'tokens' | 'candidates'>): number {
  let completion = request.tokens?.completion;
  if (completion === undefined) {
    const defaults = request.candidates.map((c) => c.defaultCompletionTokens ?? -1);
    const largest = Math.max(-1, ...defaults);
    completion = largest >= 0 ? largest : DEFAULT_COMPLETION_TOKENS;
  }
  return wholeTokens(wholeTokens(request.tokens?.prompt ?? 0) + wholeTokens(completion));
}
