import type { HealthEvent } from '@iop/dispatch';
import { FirstByteTimeout, UpstreamError } from '../errors';
import type { SendResult } from '../http/answer/send-upstream';

/**
 * One attempt on a pool provider, at each point where its result may be booked:
 * - `first_byte`: the upstream's first byte is in hand;
 * - `ended`: the answer was written, whole or cut (`result`, from `sendUpstream`);
 * - `failed`: the attempt threw before any byte reached the client.
 * `trial` marks the trial request of a half-open provider (README "Provider health").
 */
export type AttemptOutcome =
  | { at: 'first_byte'; trial: boolean }
  | { at: 'ended'; trial: boolean; result: SendResult }
  | { at: 'failed'; error: unknown };

const SUCCESS: HealthEvent = Object.freeze({ kind: 'request', ok: true });

/** Longest failure reason kept in a health record, in characters. */
const MAX_REASON_CHARS = 200;

/**
 * What the upstream did, in a few words, for health records, `/status` and the transition log line
 * (README "Provider health"): its own HTTP status (`upstream answered 503`), a reset or refused
 * connection with its code, the timeout that ran out. Taken from the error's client-safe message
 * (`UpstreamError.messageIsPublic`: written for a client, so it names no URL, host or key), cut before
 * the advice that follows a `;`; never the gateway's own status (a 502 for all of them). An error
 * whose message is log-only gives its code alone.
 */
export function describeFailure(err: UpstreamError): string {
  if (!err.messageIsPublic) return err.code;
  const what = err.message.split('; ')[0].replace(/^The /, '').replace(/\.$/, '');
  if (what === '') return err.code;
  const short = what.length > MAX_REASON_CHARS ? `${what.slice(0, MAX_REASON_CHARS - 1)}…` : what;
  return short[0].toLowerCase() + short.slice(1);
}

/** The booking of an upstream's failure: a failed request, or a back-off for a 429's `Retry-After` (1 s when absent). */
function failureEvent(err: UpstreamError): HealthEvent | undefined {
  if (err.countsAgainstProvider) return { kind: 'request', ok: false, reason: describeFailure(err) };
  if (err.status === 429)
    return { kind: 'backoff', seconds: err.retryAfterS ?? 1, reason: `upstream 429${err.code ? ` ${err.code}` : ''}` };
  return undefined;
}

/** What a first-byte timeout is weighed against (README "Provider health"); times are `performance.now()` ms. */
export interface FirstByteEvidence {
  /** When the attempt's upstream call started. */
  attemptStartedAt: number;
  /**
   * Whether the request asked for a stream (chat or Responses with `stream: true`): its first byte
   * comes after prefill. A non-streamed request's first byte is its whole answer (embeddings are
   * never streamed).
   */
  streamed: boolean;
  /** The provider's latest first byte to any request (`FirstByteClock`), undefined when never. */
  lastFirstByteAt: number | undefined;
  /** Whether the provider's probe passes at the timeout (`ProbeClock.passing`: its latest probe, fresh, answered 2xx). */
  probePasses: boolean;
  /**
   * The request's size (`estimateTokenWeight`): its prompt tokens and its completion allowance
   * (`max_tokens`/`max_completion_tokens` × `n`, `max_output_tokens`; 0 for embeddings), or
   * undefined when it names none ({@link UNNAMED_COMPLETION_TOKENS} is assumed).
   */
  size: { prompt: number; completion: number | undefined };
}

/** A fast engine's time per generated token for one request, ms (200 tokens/s): a lower bound of a long answer's time. */
export const FAST_DECODE_MS_PER_TOKEN = 5;
/** A fast engine's time per prompt token, ms (4,000 tokens/s of prefill). */
export const FAST_PREFILL_MS_PER_TOKEN = 0.25;
/** The completion a request that names none is assumed to ask for, tokens (as `default_completion_tokens`). */
export const UNNAMED_COMPLETION_TOKENS = 1024;

/**
 * The least time a fast engine takes to answer a request of `size` whole, ms: what its own size
 * explains of a wait for a non-streamed answer ({@link weighFirstByteTimeout}).
 */
export function explainedMs(size: FirstByteEvidence['size']): number {
  const completion = size.completion ?? UNNAMED_COMPLETION_TOKENS;
  return completion * FAST_DECODE_MS_PER_TOKEN + size.prompt * FAST_PREFILL_MS_PER_TOKEN;
}

/**
 * Weighs a first-byte timeout (README "Provider health"; docs/architecture.md, "Provider health":
 * what a request's own size or length explains is not evidence). It counts against the provider
 * (booked, and failed over) only when the request cannot explain it:
 * - the provider sent a first byte to another request since this attempt started: it is alive, and
 *   the timeout is the request's own length (a long prompt's prefill, a long answer): never counts;
 * - a non-streamed request (`streamed: false`) whose provider's probe passes and whose size explains
 *   the wait: its first byte is its whole answer, as long as the completion it asks for (20,000
 *   tokens send nothing until done), so when a fast engine would need at least the timeout for it
 *   ({@link explainedMs}: 5 ms a completion token, 1,024 when it names none, 0.25 ms a prompt token),
 *   a provider that accepts connections and answers its probe is not down: does not count; a short
 *   answer (`max_tokens: 16`) that takes longer is what the provider did, and counts;
 * - otherwise it counts: a streamed request gets its first byte after prefill, whatever the length
 *   of its answer, so none in time is what the provider did (a server can answer its probe while
 *   its generation hangs); a non-streamed one counts when the probe does not pass either (refused,
 *   an error, a timeout, busy or not: a server that answers nothing), or none ran lately.
 * An error that does not count is returned with `counts: false`: neither booked nor retried on a
 * sibling, which would take as long.
 */
export function weighFirstByteTimeout(err: FirstByteTimeout, evidence: FirstByteEvidence): FirstByteTimeout {
  const { attemptStartedAt, lastFirstByteAt, streamed, probePasses, size } = evidence;
  const answeredMeanwhile = lastFirstByteAt !== undefined && lastFirstByteAt >= attemptStartedAt;
  const aliveForItsLength = !streamed && probePasses && explainedMs(size) >= err.ms;
  return answeredMeanwhile || aliveForItsLength ? new FirstByteTimeout(err.ms, false) : err;
}

/**
 * What an attempt books against its provider's health: the one rule every booking asks
 * (docs/architecture.md, "Request path"; README "Provider health"). Only what the upstream did
 * counts:
 * - a failure that counts against the provider (`UpstreamError.countsAgainstProvider`: unreachable,
 *   reset, 5xx, a stream gone silent or cut, no first byte in time unless the request explains it
 *   ({@link weighFirstByteTimeout}: the provider answered others meanwhile, or the request is not
 *   streamed and the provider's probe passes)) is a failed request, before the first byte or after it;
 * - an upstream 429 before the first byte backs the provider off for its `Retry-After`;
 * - an answer is a success: booked at its end, or at its first byte for a trial (so a half-open
 *   provider is back as soon as it answers); an upstream 4xx passed on before the first byte is the
 *   client's answer, so a success too;
 * - anything else books nothing: errors the gateway raised itself (a bug, the client leaving, the
 *   drain running out, a lease lost), the client's own 4xx, a mid-stream failure that does not count.
 * @returns the event for the health store, or undefined when nothing is booked.
 */
export function healthEventOf(attempt: AttemptOutcome): HealthEvent | undefined {
  switch (attempt.at) {
    case 'first_byte':
      return attempt.trial ? SUCCESS : undefined;
    case 'ended': {
      const { result } = attempt;
      if (result.outcome === 'upstream_failed') {
        const err = result.error;
        return err instanceof UpstreamError && err.countsAgainstProvider ? failureEvent(err) : undefined;
      }
      // A trial's success was booked at its first byte.
      return attempt.trial ? undefined : SUCCESS;
    }
    case 'failed': {
      const err = attempt.error;
      if (!(err instanceof UpstreamError)) return undefined;
      return failureEvent(err) ?? (err.status < 500 ? SUCCESS : undefined);
    }
  }
}
