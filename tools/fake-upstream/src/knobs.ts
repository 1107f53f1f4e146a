import type { IncomingHttpHeaders } from 'node:http';

/**
 * Per-request behaviour of the fake upstream. Every knob is optional and read from the request
 * header `x-fake-<name>` (`x-fake-delay-ms` or `x-fake-delay_ms`) and from the body field
 * `fake: { <name>: number }`; the body wins.
 */
export interface FakeKnobs {
  /** `delay_ms`: wait this long before the status line and headers, in ms. @defaultValue 0 */
  delayMs: number;
  /** `chunks`: content chunks in a stream (the text is split across them), ≥ 1. @defaultValue 3 */
  chunks: number;
  /** `chunk_gap_ms`: wait between two stream chunks, in ms. @defaultValue 0 */
  chunkGapMs: number;
  /** `status`: answer with this HTTP status (≥ 400) and an OpenAI-shaped error body, after `delay_ms`. */
  status?: number;
  /** `cut_after`: stream only: destroy the socket after this many content chunks (no end event, no `[DONE]`). */
  cutAfter?: number;
  /** `error_event_after`: stream only: after this many content chunks send an in-band error event and end. */
  errorEventAfter?: number;
  /**
   * `error_event_status`: the status class of that in-band error: below 500 it is about the request
   * (`invalid_request_error`, code `context_length_exceeded`), else a server error. @defaultValue 500
   */
  errorEventStatus: number;
  /** `retry_after`: with `status` (e.g. 429), send `Retry-After: <n>` and, for 429, the error type `rate_limit_error`. */
  retryAfter?: number;
  /** `reset_before_body` (1): read the request, then reset the TCP connection before sending any byte. */
  resetBeforeBody: boolean;
  /** `short_body`: non-stream only: declare a `content-length` 1000 bytes larger, send this many bytes of the body, close. */
  shortBody?: number;
  /** `redirect`: answer this 3xx status with a `Location` header and no body. */
  redirect?: number;
  /** `chunk_bytes`: pad every stream content chunk to at least this many characters (a stream of `chunks × chunk_bytes`). */
  chunkBytes: number;
  /** `body_bytes`: pad a non-stream answer (or the error body of `status`) to at least this many bytes. */
  bodyBytes: number;
  /** `stall_after`: stream only: after this many content chunks send nothing more, keeping the connection open. */
  stallAfter?: number;
  /** `done_unterminated` (1): stream only: end with `data: [DONE]` and no newline, then close. */
  doneUnterminated: boolean;
  /** `echo_secrets` (1): an error body (`status`) quotes the request's `authorization` and `host` headers. */
  echoSecrets: boolean;
  /** `tag`: no effect on the answer; recorded in the call journal (e.g. which client sent the call). */
  tag?: number;
  /**
   * `reasoning`: chat only: the answer carries the model's reasoning in the field `reasoning` (vLLM 0.11
   * and later, Ollama's OpenAI-compatible API), streamed in this many chunks before the content. @defaultValue 0
   */
  reasoning: number;
  /** `reasoning_content`: the same in the field `reasoning_content` (vLLM before 0.11); with `reasoning`, both fields. @defaultValue 0 */
  reasoningContent: number;
}

/** Wire names of the knobs, as used in headers (`x-fake-<name>`) and in the body's `fake` object. */
export const KNOB_NAMES = [
  'delay_ms',
  'chunks',
  'chunk_gap_ms',
  'status',
  'cut_after',
  'error_event_after',
  'error_event_status',
  'retry_after',
  'reset_before_body',
  'short_body',
  'redirect',
  'chunk_bytes',
  'body_bytes',
  'stall_after',
  'done_unterminated',
  'echo_secrets',
  'tag',
  'reasoning',
  'reasoning_content',
] as const;
export type KnobName = (typeof KNOB_NAMES)[number];

const HEADER_NAMES = KNOB_NAMES.map((n) => [n, `x-fake-${n.replace(/_/g, '-')}`, `x-fake-${n}`] as const);

/** A knob value that is not a non-negative integer (the message names the knob and where it came from). */
export class KnobError extends Error {
  constructor(
    readonly param: string,
    value: unknown,
  ) {
    super(`fake-upstream: ${param} must be a non-negative integer, got ${JSON.stringify(value)}`);
  }
}

/**
 * Reads the knobs of one request (the server's `defaults`, then headers, then `body.fake`, which wins).
 * @throws KnobError when a given value is not a non-negative integer.
 */
export function readKnobs(
  headers: IncomingHttpHeaders,
  body: unknown,
  defaults: Partial<Record<KnobName, number>> = {},
): FakeKnobs {
  const fake = isObject(body) && isObject(body.fake) ? body.fake : undefined;
  const raw: Partial<Record<KnobName, number>> = { ...defaults };
  for (const [name, dashed, underscored] of HEADER_NAMES) {
    const fromBody = fake?.[name];
    if (fromBody !== undefined && fromBody !== null) {
      raw[name] = toCount(fromBody, `fake.${name}`);
      continue;
    }
    const fromHeader = headers[dashed] ?? headers[underscored];
    if (fromHeader !== undefined) raw[name] = toCount(fromHeader, dashed);
  }
  return {
    delayMs: raw.delay_ms ?? 0,
    chunks: Math.max(1, raw.chunks ?? 3),
    chunkGapMs: raw.chunk_gap_ms ?? 0,
    status: raw.status,
    cutAfter: raw.cut_after,
    errorEventAfter: raw.error_event_after,
    errorEventStatus: raw.error_event_status ?? 500,
    retryAfter: raw.retry_after,
    resetBeforeBody: (raw.reset_before_body ?? 0) > 0,
    shortBody: raw.short_body,
    redirect: raw.redirect,
    chunkBytes: raw.chunk_bytes ?? 0,
    bodyBytes: raw.body_bytes ?? 0,
    stallAfter: raw.stall_after,
    doneUnterminated: (raw.done_unterminated ?? 0) > 0,
    echoSecrets: (raw.echo_secrets ?? 0) > 0,
    tag: raw.tag,
    reasoning: raw.reasoning ?? 0,
    reasoningContent: raw.reasoning_content ?? 0,
  };
}

function toCount(value: unknown, param: string): number {
  const n = typeof value === 'number' ? value : typeof value === 'string' && value.trim() !== '' ? Number(value) : NaN;
  if (!Number.isInteger(n) || n < 0) throw new KnobError(param, value);
  return n;
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * The `--knob name=value` flags as default knobs: `name` one of {@link KNOB_NAMES}, `value` a whole
 * number ≥ 0 (as a request's knob).
 * @throws Error naming the flag and the knobs there are, for an unknown name or a bad value.
 */
export function parseKnobFlags(flags: readonly string[]): Partial<Record<KnobName, number>> {
  const knobs: Partial<Record<KnobName, number>> = {};
  for (const flag of flags) {
    const [name, value] = flag.split('=', 2);
    if (!(KNOB_NAMES as readonly string[]).includes(name))
      throw new Error(`--knob ${flag}: unknown knob "${name}"; knobs are ${KNOB_NAMES.join(', ')}`);
    const n = value === undefined || value.trim() === '' ? NaN : Number(value);
    if (!Number.isInteger(n) || n < 0) throw new Error(`--knob ${flag}: the value must be a whole number ≥ 0`);
    knobs[name as KnobName] = n;
  }
  return knobs;
}
