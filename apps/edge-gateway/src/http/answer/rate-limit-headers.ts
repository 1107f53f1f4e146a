import type { BudgetStanding } from '@iop/dispatch';
import type { GatewayResponse } from '../gateway-handler';

/** The answer headers of a client's token budget, named as the OpenAI API names them (guide "Rate limits", "Rate limits in headers"). */
export const RATE_LIMIT_HEADERS = {
  limit: 'x-ratelimit-limit-tokens',
  remaining: 'x-ratelimit-remaining-tokens',
  reset: 'x-ratelimit-reset-tokens',
} as const;

const MS_PER_S = 1000;
const MS_PER_MIN = 60 * MS_PER_S;
const MS_PER_H = 60 * MS_PER_MIN;

/**
 * A duration in the format of OpenAI's `x-ratelimit-reset-*` headers (guide "Rate limits": `1s`,
 * `6m0s`, `20ms`), which is Go's `time.Duration` text at millisecond precision: under a second,
 * whole milliseconds (`20ms`, `0s` for none); from a second on, hours, minutes and seconds with the
 * milliseconds as a decimal fraction without trailing zeros, each larger unit only once it is
 * reached (`1s`, `1.5s`, `6m0s`, `1h0m0.25s`, `23h59m59s`).
 * @param ms the time until the window resets, ms; negative or not finite counts as 0, a fraction is rounded up
 */
export function resetDuration(ms: number): string {
  const total = Number.isFinite(ms) && ms > 0 ? Math.ceil(ms) : 0;
  if (total === 0) return '0s';
  if (total < MS_PER_S) return `${total}ms`;
  const h = Math.floor(total / MS_PER_H);
  const m = Math.floor((total % MS_PER_H) / MS_PER_MIN);
  const wholeS = Math.floor((total % MS_PER_MIN) / MS_PER_S);
  const frac = total % MS_PER_S;
  const s = frac === 0 ? `${wholeS}` : `${wholeS}.${String(frac).padStart(3, '0').replace(/0+$/, '')}`;
  if (h > 0) return `${h}h${m}m${s}s`;
  if (m > 0) return `${m}m${s}s`;
  return `${s}s`;
}

/**
 * Writes a budgeted client's standing on the answer (README "Token budgets: what a client sees"):
 * `x-ratelimit-limit-tokens` (the tightest window's budget, tokens), `x-ratelimit-remaining-tokens`
 * (what the client can still reserve in it, tokens), `x-ratelimit-reset-tokens` ({@link resetDuration}).
 * A later call replaces the values (a failover's second lease). No-op once the headers are sent.
 */
export function setRateLimitHeaders(res: GatewayResponse, standing: BudgetStanding): void {
  if (res.headersSent) return;
  res.setHeader(RATE_LIMIT_HEADERS.limit, String(standing.limitTokens));
  res.setHeader(RATE_LIMIT_HEADERS.remaining, String(Math.max(0, standing.remainingTokens)));
  res.setHeader(RATE_LIMIT_HEADERS.reset, resetDuration(standing.resetMs));
}
