import { estimatedTokens, fleetChatBody, oneProviderYaml, postChat } from './fleet-chat';

/** The minute budget of the client `hammer` in {@link budgetYaml} (tokens, README "Token budgets"). */
export const BUDGET = 10_000;
/** The minute budget of the client `probe`: three {@link QUESTION}s, not four. */
export const PROBE_BUDGET = 1000;
/** The API keys of the clients of {@link budgetYaml}. */
export const KEYS = { hammer: 'k-hammer', probe: 'k-probe', holder: 'k-holder' } as const;

/**
 * A fleet file (upstream `${UPSTREAM}`, queue prefix `${PREFIX}`) with one vLLM provider `pv` (pool model `chat`,
 * upstream model `up-chat`, `max_concurrency` 64: it never binds here) and three budgeted clients: `hammer`
 * (`tokens_per_minute` `perMinute`, {@link BUDGET} by default: a different figure only to see the judges fail),
 * `probe` ({@link PROBE_BUDGET}) and `holder` ({@link BUDGET}).
 */
export function budgetYaml(opts: { perMinute?: number } = {}): string {
  return oneProviderYaml({
    provider: { id: 'pv', model: 'chat', upstream: 'up-chat', maxConcurrency: 64 },
    clients: [
      `{ id: hammer, keys: ["${KEYS.hammer}"], tokens_per_minute: ${opts.perMinute ?? BUDGET} }`,
      `{ id: probe, keys: ["${KEYS.probe}"], tokens_per_minute: ${PROBE_BUDGET} }`,
      `{ id: holder, keys: ["${KEYS.holder}"], tokens_per_minute: ${BUDGET} }`,
    ],
  });
}

/**
 * The question every budget request asks: 480 bytes of English. The gateway estimates it at ⌈bytes / 3⌉ + 4
 * (~165 tokens); the fake upstream reports ⌈chars / 4⌉ (120) for the prompt and about as much for its echo, as
 * real tokenizers count English at about 4 bytes a token (README, the measured figures of the estimator).
 */
export const QUESTION = 'How many tokens does this question use? '.repeat(12);
/** The completion allowance of a budget request: just above the ~132 completion tokens the echo is reported at. */
export const MAX_TOKENS = 136;

/** One request's shape: `max_tokens`, streamed or not, and the fake upstream's `delay_ms` before its answer. */
export interface AskOptions {
  stream: boolean;
  maxTokens?: number;
  delayMs?: number;
}

/** The body of a chat request for the pool `chat` asking {@link QUESTION}, marked with the fake upstream's `tag`. */
export function askBody(tag: number, opts: AskOptions): Record<string, unknown> {
  const { stream, maxTokens = MAX_TOKENS, delayMs = 40 } = opts;
  return fleetChatBody({ model: 'chat', text: QUESTION, maxTokens, stream, tag, delayMs, chunks: 3, gapMs: 10 });
}

/** The gateway's estimate of a request (`estimateTokenWeight`, `@iop/dispatch`): prompt + completion allowance. */
export function estimateOf(opts: AskOptions): number {
  return estimatedTokens(askBody(0, opts)).total;
}

/** One answer of the gateway, as the client saw it. */
export interface Answer {
  tag: number;
  /** HTTP status; 0: no answer (the connection failed). */
  status: number;
  code?: string;
  type?: string;
  /** `Retry-After`, `x-ratelimit-limit-tokens`, `-remaining-tokens`, `-reset-tokens` as sent (null: absent). */
  retryAfter: string | null;
  limit: string | null;
  remaining: string | null;
  reset: string | null;
  /** A stream that ended with `data: [DONE]`, or a JSON completion. */
  done: boolean;
  /** The client got a `usage` member it did not ask for (a usage chunk, or `"usage":null` in a stream). */
  usageLeaked: boolean;
  /** `Date.now()` just before the request was sent and when its answer was read to the end, ms. */
  sentAt: number;
  answeredAt: number;
}

let nextTag = 1;

/**
 * POSTs one request of the client with `key` to the gateway at `url` and reads its answer to the end. Each
 * request gets a tag of its own, so the upstream's journal names it. Never rejects: a failed connection is status 0.
 */
export async function ask(url: string, key: string, opts: AskOptions, signal?: AbortSignal): Promise<Answer> {
  const tag = nextTag++;
  const sentAt = Date.now();
  const res = await postChat(url, askBody(tag, opts), { key, signal });
  const h = (name: string) => res.headers.get(name);
  const answer = {
    tag,
    status: res.status,
    retryAfter: h('retry-after'),
    limit: h('x-ratelimit-limit-tokens'),
    remaining: h('x-ratelimit-remaining-tokens'),
    reset: h('x-ratelimit-reset-tokens'),
    sentAt,
    answeredAt: Date.now(),
  };
  if (res.status !== 200) return { ...answer, code: res.code, type: res.type, done: false, usageLeaked: false };
  const { text } = res;
  const done = opts.stream ? text.trimEnd().endsWith('data: [DONE]') : text.includes('"chat.completion"');
  return { ...answer, done, usageLeaked: opts.stream && text.includes('"usage"') };
}

/** An admitted request: sent at `sentAt`, arrived at the upstream at `arrivedAt` (ms), reported `usage` tokens. */
export interface AdmittedCall {
  sentAt: number;
  arrivedAt: number;
  usage: number;
}

/**
 * The most usage reported by the calls admitted within any span of `spanMs`. A call's admission (Redis `TIME`,
 * the same system clock as `Date.now()` here) lies between its sending and its arrival at the upstream, so the
 * calls sent at or after a call's sending that arrived less than `spanMs` after it were admitted within less than
 * `spanMs`: every span that starts at a sending is judged, and only spans that start at a sending can hold more.
 */
export function maxSpanUsage(calls: readonly AdmittedCall[], spanMs: number): { tokens: number; calls: number } {
  let best = { tokens: 0, calls: 0 };
  for (const first of calls) {
    const inSpan = calls.filter((c) => c.sentAt >= first.sentAt && c.arrivedAt < first.sentAt + spanMs);
    const tokens = inSpan.reduce((n, c) => n + c.usage, 0);
    if (tokens > best.tokens) best = { tokens, calls: inSpan.length };
  }
  return best;
}

/** An admitted call as {@link AdmittedCall}, with the moment its answer was read to the end (ms). */
export interface FinishedCall extends AdmittedCall {
  answeredAt: number;
}

/** How {@link judgeRetryAfter} found one refusal: its hint, and when the client's next call arrived, from its sending (ms). */
export interface RetryJudgement {
  hintS: number;
  nextArrivalMs: number;
}

/**
 * `Retry-After` judged where it is exact (docs/architecture.md, "Token budgets", retry hint): a refusal while none of
 * the client's admitted calls was in flight or settling (none sent before the refusal's answer was read and answered
 * less than `settleMs` before it was sent). Nothing in the window can shrink then but by a bucket leaving it, so the
 * window cannot hold the request for the true wait W, (hint − 1) s < W ≤ hint s, and the first call sent after the
 * refusal cannot be admitted before it, nor arrive at the upstream. Once W has passed the window holds one
 * request, and the client's loops, which try again every ~100 ms, get one in: the first call sent after the refusal
 * arrives within `hint` s + `slackMs` of the refusal's answer. Only refusals whose hint + slack ends before
 * `untilMs` (the loops' end) are judged; `bad` lists the refusals that break either bound.
 */
export function judgeRetryAfter(
  refusals: readonly Answer[],
  calls: readonly FinishedCall[],
  opts: { untilMs: number; settleMs: number; slackMs: number },
): { judged: RetryJudgement[]; bad: { refusal: Answer; nextArrivalMs: number | null }[] } {
  const judged: RetryJudgement[] = [];
  const bad: { refusal: Answer; nextArrivalMs: number | null }[] = [];
  const byArrival = [...calls].sort((a, b) => a.arrivedAt - b.arrivedAt);
  for (const r of refusals) {
    const hintS = Number(r.retryAfter);
    if (r.answeredAt + hintS * 1000 + opts.slackMs >= opts.untilMs) continue;
    const busy = calls.some((c) => c.sentAt <= r.answeredAt && c.answeredAt + opts.settleMs >= r.sentAt);
    if (busy) continue;
    const next = byArrival.find((c) => c.sentAt > r.answeredAt);
    const nextArrivalMs = next ? next.arrivedAt - r.sentAt : null;
    const ok =
      next !== undefined &&
      next.arrivedAt - r.sentAt > (hintS - 1) * 1000 &&
      next.arrivedAt <= r.answeredAt + hintS * 1000 + opts.slackMs;
    if (ok && nextArrivalMs !== null) judged.push({ hintS, nextArrivalMs });
    else bad.push({ refusal: r, nextArrivalMs });
  }
  return { judged, bad };
}
