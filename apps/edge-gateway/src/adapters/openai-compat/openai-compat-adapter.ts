import type { HttpAdapterConfig } from '@iop/validate';
import { Agent, errors as undiciErrors, request, type Dispatcher } from 'undici';
import { ApiError, UpstreamError, upstreamError } from '../../errors';
import type { Adapter, ChatRequest, DispatchContext, ResponsesRequest, UpstreamResponse } from '../adapter';

/**
 * HTTP pass-through to an OpenAI-compatible server (`vllm`, `openai_compat`; the base of `ollama`).
 * Sends `POST {base_url}/chat/completions` or `/responses` with the model renamed to the
 * catalog's `upstream`, bearer `api_key`, and passes the answer's bytes through unchanged:
 * a JSON body whole, an SSE body chunk by chunk as the upstream sends it.
 * Uses undici's `request` on one keep-alive pool per adapter: the hot path of every pooled call.
 */
export class OpenAiCompatAdapter implements Adapter {
  readonly type: HttpAdapterConfig['type'];
  private readonly baseUrl: string;
  /** `base_url` split once, so no request re-parses a URL string. */
  private readonly origin: string;
  private readonly basePath: string;
  private readonly headers: Record<string, string>;
  // No cap on connections: admission control is the provider queue's job, and a hidden cap here
  // would make requests wait uncounted (neither in_flight nor queued). Timeouts are the dispatcher's.
  private readonly dispatcher = new Agent({ keepAliveTimeout: 30_000, headersTimeout: 0, bodyTimeout: 0 });

  constructor(readonly config: HttpAdapterConfig) {
    this.type = config.type;
    this.baseUrl = config.base_url.replace(/\/+$/, '');
    const url = new URL(this.baseUrl);
    this.origin = url.origin;
    this.basePath = url.pathname === '/' ? '' : url.pathname;
    this.headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    if (config.api_key) this.headers.authorization = `Bearer ${config.api_key}`;
  }

  chat(req: ChatRequest, ctx: DispatchContext): Promise<UpstreamResponse> {
    return this.post('/chat/completions', { ...req, model: ctx.upstreamModel }, ctx);
  }

  responses(req: ResponsesRequest, ctx: DispatchContext): Promise<UpstreamResponse> {
    return this.post('/responses', { ...req, model: ctx.upstreamModel }, ctx);
  }

  /** GET `{base_url}{path}` for health probes; resolves to the HTTP status, throws on a connection error. */
  async probe(path: string, signal: AbortSignal): Promise<number> {
    const res = await request(this.baseUrl.replace(/\/v1$/, '') + path, { method: 'GET', signal, dispatcher: this.dispatcher, headers: this.headers });
    await res.body.dump();
    return res.statusCode;
  }

  async close(): Promise<void> {
    await this.dispatcher.close();
  }

  /**
   * @throws UpstreamError 502 when the upstream cannot be reached or answers 5xx; an upstream 4xx is
   *   passed on with its status and OpenAI error body so clients see the real cause.
   */
  private async post(path: string, body: unknown, ctx: DispatchContext): Promise<UpstreamResponse> {
    let res: Dispatcher.ResponseData;
    try {
      res = await this.dispatcher.request({
        origin: this.origin,
        path: this.basePath + path,
        method: 'POST',
        headers: this.headers,
        body: JSON.stringify(body),
        signal: ctx.signal,
      });
    } catch (err) {
      if (ctx.signal.aborted) throw ctx.signal.reason ?? err;
      throw upstreamError(`The upstream at ${this.baseUrl} could not be reached (${describe(err)}).`);
    }
    if (res.statusCode >= 400) {
      const text = await res.body.text().catch(() => '');
      throw upstreamFailure(res.statusCode, text, this.baseUrl);
    }
    const contentType = String(res.headers['content-type'] ?? '');
    if (contentType.includes('text/event-stream')) {
      return { kind: 'sse', status: res.statusCode, body: res.body };
    }
    return { kind: 'json', status: res.statusCode, body: new Uint8Array(await res.body.arrayBuffer()) };
  }
}

function upstreamFailure(status: number, text: string, baseUrl: string): ApiError {
  let message = text.slice(0, 500);
  let code = 'upstream_error';
  try {
    const parsed = JSON.parse(text) as { error?: { message?: string; code?: string } | string; message?: string };
    const error = parsed.error;
    message = (typeof error === 'string' ? error : error?.message) ?? parsed.message ?? message;
    if (typeof error === 'object' && typeof error.code === 'string') code = error.code;
  } catch {
    // not JSON: keep the text
  }
  if (status >= 500 || status === 401 || status === 403) {
    // The upstream's own auth or server failure is the gateway's problem, not the client's.
    return upstreamError(`The upstream at ${baseUrl} answered ${status}: ${message}`);
  }
  return new UpstreamError(status, code, message || `The upstream answered ${status}.`, 'invalid_request_error');
}

function describe(err: unknown): string {
  if (err instanceof undiciErrors.UndiciError || err instanceof Error) {
    const cause = (err as Error & { cause?: { code?: string } }).cause;
    return (err as { code?: string }).code ?? cause?.code ?? err.message;
  }
  return String(err);
}
