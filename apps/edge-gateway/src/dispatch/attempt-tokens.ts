import { BYTES_PER_TOKEN, type UsedTokens } from '@iop/dispatch';
import type { UpstreamResponse } from '../adapters/adapter';
import type { CompletionEndpoint } from './dispatcher-deps';
import type { TokenUsage } from './token-usage';
import { watchChunks } from './watch-chunks';

/** A JSON string's escaped text, unrolled so a long string costs one pass and no backtracking. */
const STRING = '"([^"\\\\]*(?:\\\\.[^"\\\\]*)*)"';
/** The generated text of a chat completion, streamed (deltas) or not (the message): content, reasoning, refusal, tool arguments. */
const CHAT_TEXT = new RegExp(`"(?:content|reasoning_content|reasoning|refusal|arguments)"\\s*:\\s*${STRING}`, 'g');
/** The generated text of a Responses stream: every `*.delta` event's `delta` (text, reasoning, tool arguments). */
const RESPONSES_STREAM_TEXT = new RegExp(`"delta"\\s*:\\s*${STRING}`, 'g');
/** The generated text of a Response object: its output items' `text` parts and tool call `arguments`. */
const RESPONSES_TEXT = new RegExp(`"(?:text|arguments)"\\s*:\\s*${STRING}`, 'g');

/**
 * What one attempt used: a budgeted client's pooled attempt is charged it when its lease is
 * released (README "Token budgets: what a client sees"; `Lease.release`). It holds the usage the
 * upstream reported ({@link report}) and watches what the answer relays ({@link watch}) so that an
 * attempt cut short or answered without usage can be estimated. Every attempt has one, so that `iop_edge_client_tokens_total` counts every client's tokens: the
 * reported usage as `callUpstream` sees it, else this estimate (`countUsed`).
 */
export class AttemptTokens {
  /** The usage the upstream reported for this attempt, once its answer is done. */
  reported?: TokenUsage;
  private answered = false;
  private relayedBytes = 0;
  private json?: Uint8Array | string;

  constructor(private readonly endpoint: CompletionEndpoint) {}

  /** Records the usage the upstream reported (`watchUsage`). */
  report(usage: TokenUsage): void {
    this.reported = usage;
  }

  /**
   * Watches the answer the client gets (after the usage chunk was dropped): whether any of it came,
   * and the UTF-8 bytes of the generated text it relays, as JSON-escaped in the answer (chat:
   * `content`, `reasoning_content`, `reasoning`, `refusal`, tool call `arguments`; Responses streams:
   * each event's `delta`; a JSON answer is read only if {@link used} needs it). Unchanged bytes.
   */
  watch(upstream: UpstreamResponse): UpstreamResponse {
    if (upstream.kind === 'json') {
      this.answered = true;
      this.json = upstream.body;
      return upstream;
    }
    const responses = this.endpoint === 'responses';
    const pattern = responses ? RESPONSES_STREAM_TEXT : CHAT_TEXT;
    return watchChunks(upstream, (chunk) => {
      if (chunk.length === 0) return;
      this.answered = true;
      // A Responses chunk without a `"delta"` member (the closing events, which repeat the whole text)
      // relays no new text: it is not decoded (one native search).
      if (responses && !holds(chunk, DELTA)) return;
      this.relayedBytes += textBytes(chunk, pattern);
    });
  }

  /**
   * The tokens this attempt used (README "Token budgets: what a client sees"):
   * - the upstream reported usage: its prompt + completion tokens (`reported: true`);
   * - no answer came and the gateway did not cut the call (the upstream refused it, failed, or could
   *   not be reached): 0, the upstream generated nothing;
   * - otherwise (cut short by the client leaving, a timeout, a fence, a cap or the drain; failed
   *   mid-stream; answered without usage): `promptTokens` + ⌈relayed text bytes / 3⌉, the bytes/3
   *   rule of `estimateTokenWeight` over the text the client got (`reported: false`).
   * @param promptTokens the request's prompt estimate (`estimateTokenWeight`), tokens; asked only when needed
   * @param cut true when the gateway aborted the attempt (its signal fired)
   */
  used(promptTokens: () => number, cut: boolean): UsedTokens {
    // Reported counts are bounded token counts (`tokenCount`).
    if (this.reported) return { tokens: this.reported.input + this.reported.output, reported: true };
    if (!this.answered && !cut) return { tokens: 0, reported: false };
    return { tokens: whole(promptTokens()) + this.completionEstimate(), reported: false };
  }

  /** ⌈relayed text bytes / 3⌉, tokens. */
  private completionEstimate(): number {
    const bytes = this.json === undefined ? this.relayedBytes : textBytes(this.json, jsonPattern(this.endpoint));
    return Math.ceil(bytes / BYTES_PER_TOKEN);
  }
}

/** The member every Responses `*.delta` event holds, as bytes (searched as it is). */
const DELTA = Buffer.from('"delta"');

/** True when `chunk` holds `needle` (one native search; nothing is decoded). */
function holds(chunk: Uint8Array | string, needle: Buffer): boolean {
  if (typeof chunk === 'string') return chunk.includes(needle.toString());
  return Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).includes(needle);
}

/** The text fields of a whole (non-streamed) answer of `endpoint`; embeddings have none. */
function jsonPattern(endpoint: CompletionEndpoint): RegExp | undefined {
  if (endpoint === 'embeddings') return undefined;
  return endpoint === 'responses' ? RESPONSES_TEXT : CHAT_TEXT;
}

/** UTF-8 bytes of the strings `pattern` finds in `chunk` (its first group). */
function textBytes(chunk: Uint8Array | string, pattern: RegExp | undefined): number {
  if (pattern === undefined) return 0;
  const text =
    typeof chunk === 'string' ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString('utf8');
  let bytes = 0;
  for (const m of text.matchAll(pattern)) bytes += Buffer.byteLength(m[1], 'utf8');
  return bytes;
}

/** An estimate as a whole number ≥ 0. */
function whole(n: number): number {
  return Number.isFinite(n) && n > 0 ? Math.round(n) : 0;
}
