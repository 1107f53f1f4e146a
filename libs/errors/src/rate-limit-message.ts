/**
 * The fields and message of `rate_limit_exceeded` (`ERROR_CATALOG`): an upstream's rate limit (a pool
 * backing off, `model` set; a lone upstream, none), a busy CLI adapter, or a client's token budget
 * (docs/architecture.md, "Token budgets"), worded as the OpenAI API words its own token limits
 * ("Rate limit reached for … on tokens per min (TPM): Limit 10000, Used 9800, Requested 300. Please
 * try again in 600ms.").
 */
export type RateLimitFields =
  | { readonly model?: string; readonly retryAfterS: number }
  | { readonly cliAdapter: string; readonly running: number; readonly waiting: number }
  | TokenBudgetFields;

/**
 * A request refused by its client's token budget: `window` the budget's window, `limit` its tokens,
 * `requested` the request's weight (estimated prompt + completion allowance), tokens. Either the
 * window cannot hold it now (`used`: tokens charged and reserved in the window, `retryMs`: ms until it
 * can), or the weight alone is over the whole budget (`tooLarge`: it can never fit).
 */
export type TokenBudgetFields =
  | {
      readonly budget: 'minute' | 'day';
      readonly client: string;
      readonly limit: number;
      readonly used: number;
      readonly requested: number;
      readonly retryMs: number;
    }
  | {
      readonly budget: 'minute' | 'day';
      readonly client: string;
      readonly limit: number;
      readonly requested: number;
      readonly tooLarge: true;
    };

const WINDOW_WORDS = { minute: 'tokens per min (TPM)', day: 'tokens per day (TPD)' } as const;
const SETTING = { minute: 'tokens_per_minute', day: 'tokens_per_day' } as const;

/** The message of `rate_limit_exceeded` for its fields. */
export function rateLimitMessage(f: RateLimitFields): string {
  if ('budget' in f) {
    const where = `client "${f.client}" on ${WINDOW_WORDS[f.budget]}`;
    if ('tooLarge' in f)
      return `Request too large for ${where}: Limit ${f.limit}, Requested ${f.requested}. The request alone is larger than the whole budget, so it can never be admitted: lower max_tokens (or shorten the input), or raise the client's ${SETTING[f.budget]}.`;
    return `Rate limit reached for ${where}: Limit ${f.limit}, Used ${f.used} (reserved by requests in flight included), Requested ${f.requested}. Please try again in ${delayWords(f.retryMs)}.`;
  }
  if ('cliAdapter' in f)
    return `The CLI model is busy: ${f.running} runs are going and ${f.waiting} requests wait (max_concurrency and max_waiting of adapter "${f.cliAdapter}"). Retry later.`;
  return f.model === undefined
    ? `The upstream is rate limiting requests; retry after ${f.retryAfterS} s.`
    : `Every provider of model "${f.model}" is rate limited by its upstream; retry after ${f.retryAfterS} s.`;
}

/** A delay as the OpenAI API words it: `600ms`, `1.5s`, `2m5s`, `3h0m12s`. */
export function delayWords(ms: number): string {
  const whole = Math.max(0, Math.ceil(ms));
  if (whole < 1000) return `${whole}ms`;
  if (whole < 60_000) return `${Math.ceil(whole / 100) / 10}s`;
  const s = Math.ceil(whole / 1000);
  const [h, m, sec] = [Math.floor(s / 3600), Math.floor((s % 3600) / 60), s % 60];
  return h > 0 ? `${h}h${m}m${sec}s` : `${m}m${sec}s`;
}
