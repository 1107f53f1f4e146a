import { DEFAULT_COMPLETION_TOKENS } from '@iop/validate';

/**
 * Token-aware provider limits (docs/architecture.md, "Token limits"; README "Token-aware provider
 * limits"): the pure rule both backends decide on. The Redis backend's scripts run the same
 * arithmetic (`includes/tokens.lua`, `grant.lua`, `prefill.lua`).
 */

/**
 * A request's token weight as admission reserves it (README "Token-aware provider limits", "Token
 * budgets"): `prompt` the estimated prompt tokens (released when the first byte of the answer
 * arrives: prefill is done), `completion` the completion allowance the request asked for, every
 * choice counted (`max_tokens`, `max_completion_tokens` × `n`, `max_output_tokens`; 0 for
 * embeddings). `completion` absent: the granting provider's `defaultCompletionTokens` times
 * `choices`, the number of choices the request asks for (chat `n`; absent, or not a whole number
 * ≥ 1: one; read through {@link wholeChoices}), since each choice may run to the default. `choices`
 * is ignored when `completion` is given. Whole numbers ≥ 0.
 */
export interface TokenWeight {
  readonly prompt: number;
  readonly completion?: number;
  readonly choices?: number;
}

/** The completion allowance of a provider that sets no `default_completion_tokens` (README "Token-aware provider limits"). */
export { DEFAULT_COMPLETION_TOKENS };

/** What a lease holds on a provider with a token limit: its prompt part (0 after prefill) and its completion part. */
export interface HeldTokens {
  prompt: number;
  completion: number;
}

/**
 * The tokens a request holds once granted on a provider with limit: its prompt estimate and its own
 * completion allowance, else the provider's default. A request without a weight holds none.
 */
export function heldTokens(
  weight: TokenWeight | undefined,
  provider: { readonly defaultCompletionTokens?: number },
): HeldTokens {
  if (!weight) return { prompt: 0, completion: 0 };
  const completion = weight.completion ?? defaultAllowance(provider.defaultCompletionTokens, weight);
  return { prompt: whole(weight.prompt), completion: whole(completion) };
}

/**
 * The completion allowance of a request that names none (README "Token-aware provider limits",
 * "Token budgets"): `defaultTokens` (a provider's `default_completion_tokens`, tokens; absent:
 * `DEFAULT_COMPLETION_TOKENS`) for each of the weight's choices (`wholeChoices`), as `wholeTokens`
 * counts it (at most `Number.MAX_SAFE_INTEGER`). The Redis scripts run the same arithmetic
 * (`includes/tokens.lua`, `completionOf`).
 */
export function defaultAllowance(defaultTokens: number | undefined, weight: Pick<TokenWeight, 'choices'>): number {
  return whole(whole(defaultTokens ?? DEFAULT_COMPLETION_TOKENS) * wholeChoices(weight.choices));
}

/**
 * The number of choices a request asks for (chat `n`; README "Token-aware provider limits"), as
 * admission counts them: a whole number ≥ 1 as it is, at most `Number.MAX_SAFE_INTEGER` (so it is
 * written in plain digits and its product with a default stays finite); anything else (absent, 0,
 * negative, fractional, a string that is not digits, NaN, Infinity) counts as absent: one choice; a
 * string of digits counts as its number, as lenient servers read it.
 */
export function wholeChoices(n: unknown): number {
  // A string of digits counts as its number: lenient servers read `"100"` as 100 choices.
  const value = typeof n === 'string' && /^\s*\d{1,16}\s*$/.test(n) ? Number(n) : n;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) return 1;
  return Math.min(value, Number.MAX_SAFE_INTEGER);
}

/**
 * True when a request of `weight` tokens fits a provider holding `inFlight` tokens under `limit`:
 * `inFlight + weight ≤ limit`, or the provider holds no tokens at all (a request larger than the
 * whole limit runs alone, never beside others past it). No limit (`undefined`): always.
 */
export function fitsTokens(inFlight: number, weight: number, limit: number | undefined): boolean {
  return limit === undefined || inFlight === 0 || inFlight + weight <= limit;
}

/**
 * A token count as admission weighs it, in both backends and in every script argument: rounded up,
 * at least 0 (NaN: 0), at most `Number.MAX_SAFE_INTEGER` (2^53 − 1), so that an allowance past any
 * limit (`max_tokens: 1e21`, or `max_tokens × n` that overflows to Infinity) weighs as much as the
 * largest window or limit a config can hold (2^53 − 1), more than any other, instead of nothing, and
 * is written as plain digits (`String(1e21)` is `1e+21`, which the scripts' patterns do not read).
 */
export function wholeTokens(n: number): number {
  if (!(n > 0)) return 0;
  return n >= Number.MAX_SAFE_INTEGER ? Number.MAX_SAFE_INTEGER : Math.ceil(n);
}

const whole = wholeTokens;
