import type { UpstreamResponse } from '../adapters/adapter';
import { watchChunks } from './watch-chunks';

/** Tokens an upstream reported in its `usage`: chat (`prompt_tokens`, `completion_tokens`) or Responses (`input_tokens`, `output_tokens`). */
export interface TokenUsage {
  input: number;
  output: number;
}

/** A `"usage": {...}` object (one level of nesting, e.g. `prompt_tokens_details`); the last one wins. */
const USAGE = /"usage"\s*:\s*(\{(?:[^{}]|\{[^{}]*\})*\})/g;
const MARK = '"usage"';
/** {@link MARK} as bytes: a Buffer needle is searched as it is, where a string one is encoded again on every search. */
const MARK_BYTES = Buffer.from(MARK);

/** The last usage object in `text`, or undefined. Never throws. */
function lastUsage(text: string): TokenUsage | undefined {
  let found: TokenUsage | undefined;
  for (const m of text.matchAll(USAGE)) {
    try {
      const u = JSON.parse(m[1]) as Record<string, unknown>;
      const input = u['prompt_tokens'] ?? u['input_tokens'];
      const output = u['completion_tokens'] ?? u['output_tokens'];
      if (typeof input === 'number' || typeof output === 'number')
        found = { input: typeof input === 'number' ? input : 0, output: typeof output === 'number' ? output : 0 };
    } catch {
      // Not JSON after all: not a usage object.
    }
  }
  return found;
}

/** `chunk` as text when it mentions "usage", without decoding the chunks that do not. */
function textWithUsage(chunk: Uint8Array | string): string | undefined {
  if (typeof chunk === 'string') return chunk.includes(MARK) ? chunk : undefined;
  // A Buffer (every HTTP adapter's chunk) is searched as it is: no view made per chunk.
  const bytes = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  // Every usage object starts at a mark: decoding from the first one finds the same objects (a mark is ASCII, a character boundary).
  const at = bytes.indexOf(MARK_BYTES);
  return at === -1 ? undefined : bytes.toString('utf8', at);
}

/**
 * Watches an upstream answer for the token counts it reports (`usage` of a chat completion or a
 * Responses object; in a stream, the usage chunk of `stream_options.include_usage` or the
 * `response.completed` event) and reports the last one once the answer is done, without changing
 * a byte of what the client gets. Answers without usage (or error answers) report nothing.
 */
export function watchUsage(upstream: UpstreamResponse, report: (usage: TokenUsage) => void): UpstreamResponse {
  if (upstream.kind === 'json') {
    const text = upstream.status < 400 ? textWithUsage(upstream.body) : undefined;
    const usage = text === undefined ? undefined : lastUsage(text);
    if (usage) report(usage);
    return upstream;
  }
  let usage: TokenUsage | undefined;
  return watchChunks(
    upstream,
    (chunk) => {
      const text = textWithUsage(chunk);
      if (text !== undefined) usage = lastUsage(text) ?? usage;
    },
    () => {
      if (usage) report(usage);
    },
  );
}
