import type { AdapterConfig, AdapterType } from '@iop/validate';
import type { StreamBody } from './chunk-feed';

/**
 * A chat completion request body as the client sent it (OpenAI `POST /v1/chat/completions`),
 * already checked for `model` and `messages`. Unknown fields pass through untouched.
 */
export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  stream?: boolean;
  [field: string]: unknown;
}

/** One chat message; `content` is a string or an array of content parts (OpenAI API reference). */
export interface ChatMessage {
  role: string;
  content?: string | Array<{ type: string; text?: string; [k: string]: unknown }> | null;
  [field: string]: unknown;
}

/** A Responses API request body (OpenAI `POST /v1/responses`), checked for `model`. */
export interface ResponsesRequest {
  model: string;
  input?: string | Array<Record<string, unknown>>;
  instructions?: string | null;
  stream?: boolean;
  [field: string]: unknown;
}

/**
 * An embeddings request body (OpenAI `POST /v1/embeddings`), checked for `model` and `input`.
 * `encoding_format` is `float` or `base64` (the `openai` client asks for `base64` unless told otherwise).
 */
export interface EmbeddingsRequest {
  model: string;
  input: unknown;
  encoding_format?: 'float' | 'base64';
  [field: string]: unknown;
}

/** `gateway.max_response_bytes` when a caller gives none: 64 MiB. */
export const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024;

/** What the dispatcher tells an adapter about one call. */
export interface DispatchContext {
  /** The model name to send upstream (the public name unless the catalog renames it). */
  upstreamModel: string;
  /** Fires when the client disconnects or the time to first byte passes: the adapter stops the upstream call. */
  signal: AbortSignal;
  /**
   * Largest non-streamed answer the adapter reads, and largest stream event it holds, in decoded
   * bytes (`gateway.max_response_bytes`). @defaultValue {@link DEFAULT_MAX_RESPONSE_BYTES}
   */
  maxResponseBytes?: number;
  /**
   * Called when the request was sent again on a fresh connection because the upstream closed the
   * reused one as it arrived, unread (README "Connections to an upstream"); `detail` is for the log
   * only (it names the upstream).
   */
  onResent?(detail: string): void;
}

/**
 * An upstream's answer, before any byte reached the client.
 * - `json`: a whole body (already serialized bytes, passed through without re-encoding);
 * - `sse`: Server-Sent Events in the OpenAI wire format of the endpoint the client called, one
 *   or more whole frames per chunk (an empty chunk marks bytes that arrived inside the next frame).
 *   The iterator throws on a mid-stream failure, an unfinished last frame included; the gateway
 *   then ends the stream with an error event, never `[DONE]` (docs/architecture.md, "HTTP surface").
 *   The body may also offer the same chunks pushed ({@link StreamBody}'s `feed`), which the relay prefers.
 */
export type UpstreamResponse =
  { kind: 'json'; status: number; body: Uint8Array | string } | { kind: 'sse'; status: number; body: StreamBody };

/** Sends one OpenAI-shaped request to an upstream and streams the answer back. */
export interface Adapter {
  readonly type: AdapterType;
  /** @throws UpstreamError (status, code) before the first byte; mid-stream failures end the stream. */
  chat(req: ChatRequest, ctx: DispatchContext): Promise<UpstreamResponse>;
  /** @throws UpstreamError (status, code) before the first byte; mid-stream failures end the stream. */
  responses(req: ResponsesRequest, ctx: DispatchContext): Promise<UpstreamResponse>;
  /**
   * `POST /v1/embeddings`, answered as JSON in the OpenAI shape. Absent on adapters without
   * embeddings (CLI): the dispatcher answers 400 naming the endpoint.
   * @throws UpstreamError as `chat` does.
   */
  embeddings?(req: EmbeddingsRequest, ctx: DispatchContext): Promise<UpstreamResponse>;
  /**
   * What the upstream answers when it is up, under its server root (e.g. `/health`): each adapter
   * knows its own. Absent on adapters that cannot be probed (CLI).
   */
  readonly probePath?: string;
  /**
   * GET `{server root}{probePath}` for active health probes (docs/architecture.md, "Provider health");
   * resolves to the HTTP status. Absent on adapters that cannot be probed (CLI).
   * @throws on a connection error or when `signal` aborts.
   */
  probe?(signal: AbortSignal): Promise<number>;
  /** Frees sockets or child processes the adapter holds. */
  close(): Promise<void>;
}

/** Builds the adapter for one configured adapter instance (`nodes[].adapters[]`). */
export type AdapterFactory = (config: AdapterConfig) => Adapter;
