import type { AdapterType } from '@iop/validate';
import type { UpstreamResponse } from '../adapters/adapter';
import type { CompletionEndpoint, DispatchBody } from './dispatcher-deps';

/** A streamed upstream answer. */
type StreamedAnswer = Extract<UpstreamResponse, { kind: 'sse' }>;

/** The body to send and whether the usage chunk the gateway asked for must be kept from the client. */
export interface StreamUsageAsk {
  body: DispatchBody;
  /** True when the gateway added `include_usage`: the client did not ask for the usage chunk and must not get it. */
  dropUsage: boolean;
}

/**
 * Asks an OpenAI-compatible upstream (`vllm`, `openai_compat`, `ollama`) for the token usage of a
 * streamed chat completion, for every client (README "Token budgets: what a client sees"; the usage
 * is counted in `iop_edge_client_tokens_total`): `stream_options.include_usage:
 * true` (OpenAI API reference, "Create chat completion": one more chunk before `data: [DONE]`, with
 * `choices: []` and the request's `usage`). A body that asks already, a body that is not a streamed
 * chat completion, a `cli` adapter (its stream's usage is the gateway's own estimate) and a `stream_options` that is not an
 * object (the upstream judges it) are sent unchanged. When the gateway adds it, the client's other
 * `stream_options` are kept but `continuous_usage_stats` (vLLM: usage in every chunk, only ever
 * honoured with `include_usage`, so it did nothing as sent) is left out, so the stream differs from
 * the one the client asked for by the usage chunk alone, which {@link dropUsageChunks} takes out.
 */
export function askStreamUsage(endpoint: CompletionEndpoint, body: DispatchBody, adapter: AdapterType): StreamUsageAsk {
  if (endpoint !== 'chat' || body.stream !== true || adapter === 'cli') return { body, dropUsage: false };
  const options = body.stream_options;
  if (options !== undefined && options !== null && (typeof options !== 'object' || Array.isArray(options)))
    return { body, dropUsage: false };
  const asked = { ...(options as Record<string, unknown> | null | undefined) };
  if (asked.include_usage === true) return { body, dropUsage: false };
  delete asked.continuous_usage_stats;
  return { body: { ...body, stream_options: { ...asked, include_usage: true } }, dropUsage: true };
}

/** What every usage chunk holds: chunks without it pass on undecoded. */
const MARK = '"usage"';
/** One whole event and the blank line that ends it (WHATWG "Server-sent events": lines end with CRLF, LF or CR). */
const EVENT = /([^]*?)((?:\r\n|\r(?!\n)|\n)(?:\r\n|\r(?!\n)|\n))/g;
/** A `"usage": null` member, as OpenAI writes it in every other chunk of a stream that asked for usage. */
const NULL_USAGE = /,\s*"usage"\s*:\s*null(?=\s*[,}])|"usage"\s*:\s*null\s*,\s*/g;

/**
 * A streamed chat completion without what `include_usage` added to it (see {@link askStreamUsage}):
 * the usage chunk (a chunk with `choices: []` and a `usage` object) is dropped, and the
 * `"usage": null` members OpenAI adds to every other chunk are taken out; every other byte passes as
 * the upstream sent it. Only a chunk that holds `"usage"` is decoded (one native search for the
 * others); the watchers before this one (`watchUsage`) have read the usage already. A chunk left
 * empty passes as an empty chunk (bytes moved, nothing to write: the idle timer sees them).
 */
export function dropUsageChunks(upstream: StreamedAnswer): StreamedAnswer {
  const source = upstream.body;
  return {
    ...upstream,
    body: (async function* () {
      for await (const chunk of source) yield withoutUsage(chunk);
    })(),
  };
}

/** `chunk` (whole events) without usage chunks and `"usage": null` members; `chunk` itself when it has none. */
export function withoutUsage(chunk: Uint8Array | string): Uint8Array | string {
  const text = typeof chunk === 'string' ? chunk : markedText(chunk);
  if (text === undefined || !text.includes(MARK)) return chunk;
  let out = '';
  let end = 0;
  for (const m of text.matchAll(EVENT)) {
    end = (m.index ?? 0) + m[0].length;
    const event = m[1];
    if (!event.includes(MARK)) out += m[0];
    else if (!isUsageChunk(event)) out += event.replace(NULL_USAGE, '') + m[2];
  }
  // Whole events only reach here; anything after the last blank line passes as it came.
  out += text.slice(end);
  return typeof chunk === 'string' ? out : Buffer.from(out, 'utf8');
}

/** `chunk` decoded when it holds {@link MARK}, else undefined (one native search, no decoding). */
function markedText(chunk: Uint8Array): string | undefined {
  const bytes = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  return bytes.includes(MARK) ? bytes.toString('utf8') : undefined;
}

/** True for the event of a chat stream's usage chunk: JSON data with an empty `choices` and a `usage` object. */
function isUsageChunk(event: string): boolean {
  const data = event
    .split(/\r\n|\r|\n/)
    .filter((line) => line.startsWith('data:'))
    .map((line) => line.slice(line.startsWith('data: ') ? 6 : 5))
    .join('\n');
  try {
    const chunk = JSON.parse(data) as { choices?: unknown; usage?: unknown };
    return (
      Array.isArray(chunk.choices) &&
      chunk.choices.length === 0 &&
      typeof chunk.usage === 'object' &&
      chunk.usage !== null
    );
  } catch {
    return false;
  }
}
