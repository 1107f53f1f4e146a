import type { UpstreamResponse } from '../adapters/adapter';
import { parseEvents } from '../adapters/openai-compat/stream-ends';
import type { CompletionEndpoint } from './dispatcher-deps';
import { watchChunks } from './watch-chunks';

/** Tokens an upstream reported in its `usage`: chat (`prompt_tokens`, `completion_tokens`) or Responses (`input_tokens`, `output_tokens`). */
export interface TokenUsage {
  /** Prompt tokens, a whole number in [0, {@link MAX_REPORTED_TOKENS}]. */
  input: number;
  /** Completion tokens, a whole number in [0, {@link MAX_REPORTED_TOKENS}]. */
  output: number;
}

/**
 * Largest token count one usage field may report: 2^24 = 16,777,216 tokens, above any model's
 * context window and output today. A count past it, negative, fractional or not a number is not a
 * count (README "Security": every value from an upstream is bounded before it is counted).
 */
export const MAX_REPORTED_TOKENS = 2 ** 24;

/** What the usage of an answer says, read from its protocol position. */
export type UsageReading =
  | { kind: 'usage'; usage: TokenUsage }
  /** A `usage` object whose counts are not token counts (negative, past the bound, not numbers). */
  | { kind: 'invalid'; value: unknown };

/** The usage fields of each endpoint's `usage` object (OpenAI API reference). */
const FIELDS: Record<CompletionEndpoint, readonly [input: string, output: string | undefined]> = {
  chat: ['prompt_tokens', 'completion_tokens'],
  responses: ['input_tokens', 'output_tokens'],
  embeddings: ['prompt_tokens', undefined],
};

/** Responses stream events whose `response` is the final Response object, with its `usage`. */
const FINAL_RESPONSE_EVENTS = new Set(['response.completed', 'response.incomplete', 'response.failed']);

/** What every usage object holds: answers and chunks without it are not decoded. */
const MARK_BYTES = Buffer.from('"usage"');

/**
 * A token count as the protocol allows it: a whole number in [0, {@link MAX_REPORTED_TOKENS}];
 * undefined for anything else (negative, fractional, NaN, ±Infinity, a string, an object).
 */
export function tokenCount(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= MAX_REPORTED_TOKENS
    ? value + 0 // -0 counts as 0
    : undefined;
}

/**
 * Reads one `usage` object of `endpoint` (OpenAI API reference: chat and embeddings `prompt_tokens`,
 * chat `completion_tokens`; Responses `input_tokens`, `output_tokens`). Undefined when it is not an
 * object or names neither count (the upstream reported nothing); `invalid` when a count it names is
 * not a token count ({@link tokenCount}), so the caller estimates instead of trusting it.
 */
export function readUsage(endpoint: CompletionEndpoint, usage: unknown): UsageReading | undefined {
  if (typeof usage !== 'object' || usage === null || Array.isArray(usage)) return undefined;
  const [inputField, outputField] = FIELDS[endpoint];
  const record = usage as Record<string, unknown>;
  const rawInput = record[inputField];
  const rawOutput = outputField === undefined ? undefined : record[outputField];
  if (rawInput === undefined && rawOutput === undefined) return undefined;
  const input = rawInput === undefined ? 0 : tokenCount(rawInput);
  const output = rawOutput === undefined ? 0 : tokenCount(rawOutput);
  if (input === undefined || output === undefined) return { kind: 'invalid', value: usage };
  return { kind: 'usage', usage: { input, output } };
}

/** `bytes` as a Buffer view, without a copy. */
function bufferOf(chunk: Uint8Array): Buffer {
  return Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
}

/** True when `chunk` holds `"usage"` (one native search; nothing is decoded). */
function mentionsUsage(chunk: Uint8Array | string): boolean {
  return typeof chunk === 'string' ? chunk.includes('"usage"') : bufferOf(chunk).includes(MARK_BYTES);
}

/** Longest JSON string (with its quotes) kept as it is when a large answer is read for its usage, in bytes. */
const KEPT_STRING_BYTES = 256;
/** Answers and chunks larger than this (bytes) are read with their long strings emptied, undecoded. */
const LARGE_BYTES = 65_536;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const EMPTY_STRING = Buffer.from('""');

/**
 * `bytes` as text to read usage from: a large one (a final Responses event repeats the whole answer)
 * has every JSON string longer than {@link KEPT_STRING_BYTES} emptied (`""`) before it is decoded, by
 * native searches for quotes, so its structure, keys and numbers are read and no copy of the
 * answer's text is made. JSON strings hold no raw newline, so SSE framing passes as it is; text that
 * is not JSON may come out garbled, and then holds no usage.
 */
function readableText(bytes: Buffer): string {
  if (bytes.length <= LARGE_BYTES) return bytes.toString('utf8');
  const parts: Buffer[] = [];
  let from = 0;
  let open = bytes.indexOf(QUOTE);
  while (open !== -1) {
    let close = bytes.indexOf(QUOTE, open + 1);
    while (close !== -1 && escaped(bytes, close)) close = bytes.indexOf(QUOTE, close + 1);
    if (close === -1) break;
    if (close - open + 1 > KEPT_STRING_BYTES) {
      parts.push(bytes.subarray(from, open), EMPTY_STRING);
      from = close + 1;
    }
    open = bytes.indexOf(QUOTE, close + 1);
  }
  parts.push(bytes.subarray(from));
  return Buffer.concat(parts).toString('utf8');
}

/** True when the byte at `at` follows an odd number of backslashes (an escaped quote). */
function escaped(bytes: Buffer, at: number): boolean {
  let n = 0;
  for (let i = at - 1; i >= 0 && bytes[i] === BACKSLASH; i--) n++;
  return n % 2 === 1;
}

/** `text` as JSON, or undefined when it is not JSON. */
function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** The `usage` of a whole answer: the top-level `usage` member of its JSON body. */
function answerUsage(endpoint: CompletionEndpoint, body: Uint8Array | string): UsageReading | undefined {
  if (!mentionsUsage(body)) return undefined;
  const answer = parseJson(typeof body === 'string' ? body : readableText(bufferOf(body)));
  if (typeof answer !== 'object' || answer === null) return undefined;
  return readUsage(endpoint, (answer as { usage?: unknown }).usage);
}

/**
 * The `usage` one stream event carries: a chat chunk's top-level `usage` (the usage chunk of
 * `stream_options.include_usage`, or vLLM's running counts), or the `response.usage` of a Responses
 * stream's final event (`response.completed`, `response.incomplete`, `response.failed`). Text
 * deltas, echoed request fields and every other place a `"usage"` may appear are never read.
 */
function eventUsage(
  endpoint: CompletionEndpoint,
  eventName: string | undefined,
  data: string,
): UsageReading | undefined {
  // A Responses event named by its `event:` line is parsed only when it is a final one.
  if (endpoint === 'responses' && eventName !== undefined && !FINAL_RESPONSE_EVENTS.has(eventName)) return undefined;
  const event = parseJson(data);
  if (typeof event !== 'object' || event === null) return undefined;
  const record = event as Record<string, unknown>;
  if (endpoint !== 'responses') return readUsage(endpoint, record.usage);
  const type = typeof record.type === 'string' ? record.type : eventName;
  if (type === undefined || !FINAL_RESPONSE_EVENTS.has(type)) return undefined;
  const response = record.response;
  return typeof response === 'object' && response !== null
    ? readUsage(endpoint, (response as { usage?: unknown }).usage)
    : undefined;
}

/**
 * Watches an upstream answer for the token counts it reports and reports the last one once the
 * answer is done, without changing a byte of what the client gets (README "Token budgets: what a
 * client sees"). Usage is read only from where the protocol puts it: the top-level `usage` of a
 * JSON answer; in a stream, a chat chunk's `usage` or the final Responses event's `response.usage`.
 * A usage whose counts are not token counts is passed to `invalid` instead (the caller estimates).
 * Answers without usage, and error answers, report nothing.
 * @param endpoint the endpoint whose `usage` fields are read (chat, responses, embeddings)
 */
export function watchUsage(
  upstream: UpstreamResponse,
  endpoint: CompletionEndpoint,
  report: (usage: TokenUsage) => void,
  invalid?: (value: unknown) => void,
): UpstreamResponse {
  const settle = (reading: UsageReading | undefined) => {
    if (reading?.kind === 'usage') report(reading.usage);
    else if (reading?.kind === 'invalid') invalid?.(reading.value);
  };
  if (upstream.kind === 'json') {
    if (upstream.status < 400) settle(answerUsage(endpoint, upstream.body));
    return upstream;
  }
  let last: UsageReading | undefined;
  return watchChunks(
    upstream,
    (chunk) => {
      if (!mentionsUsage(chunk)) return;
      // Chunks of a stream are whole events (`UpstreamResponse`): each is read on its own.
      const text = typeof chunk === 'string' ? chunk : readableText(bufferOf(chunk));
      for (const event of parseEvents(text)) last = eventUsage(endpoint, event.event, event.data) ?? last;
    },
    () => settle(last),
  );
}
