import type { JournalCall } from '@iop/fake-upstream';
import { estimatedTokens, fleetChatBody, oneProviderYaml, postChat } from './fleet-chat';

/** The token limit of the provider `tok` in {@link tokenYaml} (estimated tokens, README "Token-aware provider limits"). */
export const TOKEN_LIMIT = 8000;

/**
 * A fleet file with one vLLM provider `tok` (pool model `tok`, upstream model `up-tok` on `${UPSTREAM}`,
 * prefix `${PREFIX}`): `max_concurrency` 32, which never binds here, and `max_tokens_in_flight` `limit`
 * ({@link TOKEN_LIMIT} by default; `null` leaves the limit out, only to see the judges fail). With
 * `cluster`, `queue.cluster: true`: the provider's keys are on one hash tag.
 */
export function tokenYaml(opts: { cluster?: boolean; limit?: number | null } = {}): string {
  const limit = opts.limit === undefined ? TOKEN_LIMIT : opts.limit;
  const extra = limit === null ? undefined : `max_tokens_in_flight: ${limit}`;
  return oneProviderYaml({
    provider: { id: 'tok', model: 'tok', upstream: 'up-tok', maxConcurrency: 32, extra },
    cluster: opts.cluster,
  });
}

/**
 * One kind of request: its `tag` (the fake upstream's marker, so the journal tells the kind of each call), the
 * text of its one message, its `max_tokens`, and the fake upstream's timing: `delayMs` before the first byte
 * (the prefill, during which the prompt's tokens are held), then `chunks` content chunks `gapMs` apart.
 */
export interface TokenKind {
  name: string;
  tag: number;
  text: string;
  maxTokens: number;
  delayMs: number;
  chunks: number;
  gapMs: number;
}

/** ~6,000 estimated tokens, 1.5 s of prefill: shorts fit beside it, a second one does not. */
export const LONG: TokenKind = {
  name: 'long',
  tag: 1,
  text: 'L'.repeat(17_400),
  maxTokens: 200,
  delayMs: 1500,
  chunks: 4,
  gapMs: 150,
};
/** ~200 estimated tokens, 100 ms of prefill. */
export const SHORT: TokenKind = {
  name: 'short',
  tag: 2,
  text: 'a short question? '.repeat(25),
  maxTokens: 40,
  delayMs: 100,
  chunks: 2,
  gapMs: 20,
};
/** ~12,000 estimated tokens, more than the whole limit: it may only run alone. */
export const HUGE: TokenKind = {
  name: 'huge',
  tag: 3,
  text: 'H'.repeat(35_700),
  maxTokens: 100,
  delayMs: 400,
  chunks: 3,
  gapMs: 50,
};
const KINDS = [LONG, SHORT, HUGE];

/** The streamed chat body of one request of `kind` to the pool model `tok`; `delayMs` overrides the kind's. */
export function tokenBody(kind: TokenKind, delayMs = kind.delayMs): Record<string, unknown> {
  const { tag, text, maxTokens, chunks, gapMs } = kind;
  return fleetChatBody({ model: 'tok', text, maxTokens, stream: true, tag, delayMs, chunks, gapMs });
}

/** The gateway's own estimate of a request of `kind` (`estimateTokenWeight`, `@iop/dispatch`), in tokens. */
export function weightOf(kind: TokenKind): { prompt: number; completion: number; total: number } {
  return estimatedTokens(tokenBody(kind));
}

/** The answer to one streamed request: HTTP status (0: no answer), the error code, and whether `[DONE]` came. */
export interface TokenAnswer {
  status: number;
  code?: string;
  /** The error's `type`, and the response's content type, for an error answer. */
  type?: string;
  contentType?: string | null;
  done: boolean;
}

/**
 * POSTs one request of `kind` to the gateway at `url` and reads its answer to the end. Never rejects: a
 * connection that fails (a replica killed under it, an abort) is status 0.
 */
export async function sendKind(
  url: string,
  kind: TokenKind,
  opts: { delayMs?: number; signal?: AbortSignal } = {},
): Promise<TokenAnswer> {
  const res = await postChat(url, tokenBody(kind, opts.delayMs), { signal: opts.signal });
  if (res.status === 200) return { status: 200, done: res.text.includes('data: [DONE]') };
  if (res.status === 0) return { status: 0, done: false };
  const { status, code, type } = res;
  return { status, code, type, contentType: res.headers.get('content-type'), done: false };
}

/** The kind of a journal call, by its tag. @throws Error for a call of no known kind. */
export function kindOfCall(call: JournalCall): TokenKind {
  const kind = KINDS.find((k) => k.tag === call.tag);
  if (!kind) throw new Error(`a call at the upstream of no known kind: ${JSON.stringify(call)}`);
  return kind;
}

/** Timer slack (ms): the fake upstream's `delay_ms` timer may fire this much early by `Date.now()`. */
const SLACK_MS = 5;

/**
 * The tokens the upstream holds at `t` (ms, `Date.now()` of this process, the journal's clock) by the gateway's
 * estimates, and the calls open then: each open call's completion allowance from its arrival to its end, and its
 * prompt until its first byte left the upstream (arrival + its `delay_ms`, less {@link SLACK_MS}). The gateway
 * holds each part at least that long (it reserves before the call arrives, gives the prompt back at the first
 * byte it reads and the rest after the call ended), so this view errs on the low side only by timer slack.
 */
export function heldAt(calls: readonly JournalCall[], t: number): { tokens: number; open: JournalCall[] } {
  const open = calls.filter((c) => c.startedAt <= t && (c.endedAt ?? Infinity) > t);
  const tokens = open.reduce((sum, c) => {
    const kind = kindOfCall(c);
    const w = weightOf(kind);
    return sum + w.completion + (t < c.startedAt + kind.delayMs - SLACK_MS ? w.prompt : 0);
  }, 0);
  return { tokens, open };
}

/**
 * The judge of `max_tokens_in_flight` at the upstream: the tokens held just after each call arrived (held tokens
 * only grow when a call arrives). `peak` is the most held beside others; `breaches` the arrivals past `limit`
 * unless one call of {@link HUGE} was alone at the upstream (a request larger than the limit runs alone).
 */
export function judgeTokens(
  calls: readonly JournalCall[],
  limit = TOKEN_LIMIT,
): { peak: number; breaches: { at: number; tokens: number; open: string[] }[] } {
  let peak = 0;
  const breaches: { at: number; tokens: number; open: string[] }[] = [];
  for (const c of calls) {
    const { tokens, open } = heldAt(calls, c.startedAt);
    const hugeAlone = open.length === 1 && open[0].tag === HUGE.tag;
    if (!hugeAlone) peak = Math.max(peak, tokens);
    if (tokens > limit && !hugeAlone)
      breaches.push({ at: c.startedAt, tokens, open: open.map((o) => kindOfCall(o).name) });
  }
  return { peak, breaches };
}

/** The calls of one kind, in order of arrival. */
export const callsOfKind = (calls: readonly JournalCall[], kind: TokenKind) =>
  calls.filter((c) => c.tag === kind.tag).sort((a, b) => a.startedAt - b.startedAt);
