import type { HttpAdapterConfig } from '@iop/validate';
import type {
  Adapter,
  ChatRequest,
  DispatchContext,
  EmbeddingsRequest,
  ResponsesRequest,
  UpstreamResponse,
} from '../adapter';
import { OpenAiCompatAdapter } from '../openai-compat/openai-compat-adapter';
import { responsesViaChat } from '../responses-translation';

/**
 * An Ollama server (README "Adapters", `type: ollama`, a pool category). Chat completions go through
 * Ollama's OpenAI-compatible API (`{base_url}/chat/completions`) by an {@link OpenAiCompatAdapter},
 * bytes passed through as they come. Ollama has no `/v1/responses`, so `responses()` is
 * translated to a chat completion and its answer back to a Response, streamed or not.
 * `base_url` is Ollama's `/v1` URL (`http://host:11434/v1`); a URL without the `/v1` suffix, as
 * Ollama's own docs write it (`http://host:11434`), gets it appended (`upstreamTarget`).
 * Embeddings go to Ollama's `/v1/embeddings`, asked as floats (older Ollama versions ignore
 * `encoding_format`) and encoded to base64 here when the client asked for it.
 * Which request fields reach Ollama, renamed or refused: `request-fields.ts` next to this file.
 * Errors: those of {@link OpenAiCompatAdapter} (502 unreachable or 5xx, an upstream 4xx passed on),
 * plus the translation's (400 for what chat completions cannot express, 502 for a mid-stream failure).
 */
export class OllamaAdapter implements Adapter {
  readonly type = 'ollama' as const;
  /** What Ollama answers when it is up (it has no `/health`). */
  readonly probePath = '/api/version';
  private readonly upstream: OpenAiCompatAdapter;

  /** @throws Error when `config.type` is not `ollama`. */
  constructor(readonly config: HttpAdapterConfig) {
    if (config.type !== 'ollama')
      throw new Error(`OllamaAdapter got an adapter of type "${config.type}" (adapter "${config.id}").`);
    this.upstream = new OpenAiCompatAdapter(config);
  }

  chat(req: ChatRequest, ctx: DispatchContext): Promise<UpstreamResponse> {
    return this.upstream.chat(req, ctx);
  }

  responses(req: ResponsesRequest, ctx: DispatchContext): Promise<UpstreamResponse> {
    return responsesViaChat(req, ctx, (chatReq, chatCtx) => this.upstream.chat(chatReq, chatCtx));
  }

  embeddings(req: EmbeddingsRequest, ctx: DispatchContext): Promise<UpstreamResponse> {
    return this.upstream.embeddings(req, ctx, { floatsUpstream: true });
  }

  /** GET `{server root}/api/version` for health probes; see {@link OpenAiCompatAdapter.probe}. */
  probe(signal: AbortSignal): Promise<number> {
    return this.upstream.probe(signal, this.probePath);
  }

  close(): Promise<void> {
    return this.upstream.close();
  }
}

/** `base_url` with a `/v1` suffix: `http://h:11434` and `http://h:11434/v1/` both give `http://h:11434/v1`. */
export function ollamaV1Url(baseUrl: string): string {
  const trimmed = baseUrl.replace(/\/+$/, '');
  return trimmed.endsWith('/v1') ? trimmed : `${trimmed}/v1`;
}
