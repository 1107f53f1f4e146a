import type { HttpAdapterConfig } from '@iop/validate';
import { Agent, errors as undiciErrors, request, type Dispatcher } from 'undici';
import { ApiError, invalidRequest, UpstreamError, upstreamError } from '../../errors';
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
   * Serialises `body` (the gateway's own work: its failure is never the upstream's), then sends it.
   * Only what the upstream does becomes an UpstreamError (README "Provider health").
   * @throws ApiError 400 `invalid_request_error` when `body` cannot be serialised as JSON (a body
   *   past the depth limit that escaped the route's check); UpstreamError 502 when the upstream
   *   cannot be reached, answers 5xx or resets the connection before its answer is complete; an
   *   upstream 4xx is passed on with its status and OpenAI error body so clients see the real cause;
   *   the abort reason of `ctx.signal` when it fired.
   */
  private async post(path: string, body: unknown, ctx: DispatchContext): Promise<UpstreamResponse> {
    const payload = serializeBody(body);
    let res: Dispatcher.ResponseData;
    try {
      res = await this.dispatcher.request({
        origin: this.origin,
        path: this.basePath + path,
        method: 'POST',
        headers: this.headers,
        body: payload,
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
      return { kind: 'sse', status: res.statusCode, body: upstreamStream(res.body, ctx.signal) };
    }
    try {
      return { kind: 'json', status: res.statusCode, body: new Uint8Array(await res.body.arrayBuffer()) };
    } catch (err) {
      if (ctx.signal.aborted) throw ctx.signal.reason ?? err;
      throw upstreamError(`The upstream at ${this.baseUrl} closed the connection before its answer was complete (${describe(err)}).`);
    }
  }
}

/**
 * `JSON.stringify(body)`. Bodies come from JSON.parse and pass the route's depth check
 * (`MAX_BODY_DEPTH`), so this cannot fail for a client's body; if it ever does, it is the request's
 * fault, answered as such and never booked against the provider.
 * @throws ApiError 400 `invalid_request_error` when `body` cannot be serialised (too deep, cyclic).
 */
function serializeBody(body: unknown): string {
  try {
    return JSON.stringify(body);
  } catch {
    throw invalidRequest('The request body cannot be serialised as JSON (is it nested too deep?).');
  }
}

/**
 * The upstream's SSE body, chunks passed on as they come; a read that fails (reset, socket closed)
 * becomes an UpstreamError 502, or the abort reason when `signal` fired. Stopping early closes the body.
 */
async function* upstreamStream(body: AsyncIterable<Uint8Array>, signal: AbortSignal): AsyncGenerator<Uint8Array, void, undefined> {
  try {
    yield* body;
  } catch (err) {
    if (signal.aborted) throw signal.reason ?? err;
    throw upstreamError(`The upstream stream failed before it finished (${describe(err)}).`);
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
