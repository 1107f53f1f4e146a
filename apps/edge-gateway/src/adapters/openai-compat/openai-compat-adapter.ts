import { ERROR_CATALOG, catalogMessage } from '@iop/errors';
import { redactUrl, type HttpAdapterConfig } from '@iop/validate';
import { Agent, type Dispatcher } from 'undici';
import { invalidRequest, responseTooLarge, UpstreamError, upstreamError } from '../../errors';
import type {
  Adapter,
  ChatRequest,
  DispatchContext,
  EmbeddingsRequest,
  ResponsesRequest,
  UpstreamResponse,
} from '../adapter';
import { DEFAULT_MAX_RESPONSE_BYTES } from '../adapter';
import { normalizeEmbeddings } from '../embeddings';

/** How much of an upstream's error body is read (README "Errors": limits on an answer); the rest is dropped. */
export const ERROR_BODY_BYTES = 4096;

/** Longest back-off an upstream's `Retry-After` may ask for, in seconds (a guard against a typo upstream). */
export const MAX_RETRY_AFTER_S = 600;

/** `Retry-After` of a 429 that sent none, in seconds (the catalog's default for `rate_limit_exceeded`). */
export const DEFAULT_RETRY_AFTER_S = ERROR_CATALOG.rate_limit_exceeded.retryAfterS;

/**
 * Where an HTTP adapter sends requests, from `base_url` (README "Adapters"):
 * - the OpenAI base path: the URL's path as written, or `/v1` when it has none (`http://host:8000`
 *   as vLLM's docs write a server address); `ollama` always gets the `/v1` suffix;
 * - userinfo (`http://user:pass@host/v1`) is sent as HTTP Basic auth and never in the URL (an
 *   `api_key`, sent as a bearer token, wins over it);
 * - a query string (`?api-version=…`) is sent with every request.
 */
export interface UpstreamTarget {
  /** `http://host:port`, no userinfo. */
  origin: string;
  /** The OpenAI base path, e.g. `/v1`, `/openai/v1`; never ends with `/`. */
  basePath: string;
  /** `?a=b` or ''. */
  query: string;
  /** The server root's path (`basePath` without a final `/v1`), for health probes. */
  rootPath: string;
  /** `Authorization` header value, if any. */
  authorization?: string;
  /** `base_url` with any password redacted, for the log only. */
  forLog: string;
}

/** Parses `config.base_url` per {@link UpstreamTarget}. @throws TypeError on a URL `validate` would refuse. */
export function upstreamTarget(config: Pick<HttpAdapterConfig, 'type' | 'base_url' | 'api_key'>): UpstreamTarget {
  const url = new URL(config.base_url);
  let basePath = url.pathname.replace(/\/+$/, '');
  if (basePath === '' || (config.type === 'ollama' && !basePath.endsWith('/v1'))) basePath += '/v1';
  let authorization: string | undefined;
  if (config.api_key) authorization = `Bearer ${config.api_key}`;
  else if (url.username || url.password) {
    const user = decodeURIComponent(url.username);
    const password = decodeURIComponent(url.password);
    authorization = `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
  }
  return {
    origin: url.origin,
    basePath,
    query: url.search,
    rootPath: basePath.replace(/\/v1$/, ''),
    authorization,
    forLog: redactUrl(config.base_url),
  };
}

/**
 * HTTP pass-through to an OpenAI-compatible server (`vllm`, `openai_compat`; the base of `ollama`).
 * Sends `POST {base}/chat/completions`, `/responses` or `/embeddings` with the model renamed to the
 * catalog's `upstream` and the credentials of {@link upstreamTarget}, and passes the answer's bytes
 * through unchanged: a JSON body whole (at most `maxResponseBytes`), an SSE body chunk by chunk as
 * the upstream sends it. Which request fields reach the upstream is decided before the call, by the
 * adapter's field table (`request-fields.ts` next to this file).
 * Uses undici on one keep-alive pool per adapter: the hot path of every pooled call.
 *
 * What the upstream answers becomes (README "Errors"; messages never name the URL or host, the
 * error's `detail` does, for the log):
 * | upstream | client | counts against the provider | fails over |
 * |---|---|---|---|
 * | unreachable, reset, body cut short | 502 `upstream_error` | yes | yes |
 * | 5xx, 3xx, 1xx | 502 `upstream_error` (its text to the log) | yes | yes |
 * | 401, 403 | 502 `upstream_error` "refused the gateway's credentials" | yes | yes |
 * | 404, 405 | 502 `upstream_error` "does not serve this" | no | yes |
 * | 429 | 429 with its `Retry-After`, type and message | no (the provider backs off) | yes |
 * | other 4xx | passed on: status, message, type, code, param | no | no |
 * | 2xx JSON over `maxResponseBytes` | 502 `upstream_error` | no | no |
 */
export class OpenAiCompatAdapter implements Adapter {
  readonly type: HttpAdapterConfig['type'];
  /** What the server answers when it is up: vLLM's `/health`, an OpenAI-compatible server's `/v1/models`. */
  readonly probePath: string;
  private readonly target: UpstreamTarget;
  private readonly headers: Record<string, string>;
  // No cap on connections: admission control is the provider queue's job, and a hidden cap here
  // would make requests wait uncounted (neither in_flight nor queued). Timeouts are the dispatcher's.
  private readonly dispatcher = new Agent({ keepAliveTimeout: 30_000, headersTimeout: 0, bodyTimeout: 0 });

  constructor(readonly config: HttpAdapterConfig) {
    this.type = config.type;
    this.probePath = config.type === 'vllm' ? '/health' : '/v1/models';
    this.target = upstreamTarget(config);
    this.headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    if (this.target.authorization) this.headers.authorization = this.target.authorization;
  }

  chat(req: ChatRequest, ctx: DispatchContext): Promise<UpstreamResponse> {
    return this.post('/chat/completions', { ...req, model: ctx.upstreamModel }, ctx);
  }

  responses(req: ResponsesRequest, ctx: DispatchContext): Promise<UpstreamResponse> {
    return this.post('/responses', { ...req, model: ctx.upstreamModel }, ctx);
  }

  /**
   * `POST {base}/embeddings`; the answer in the OpenAI shape ({@link normalizeEmbeddings}): base64
   * vectors when the client asked for them and the upstream sent floats.
   * `opts.floatsUpstream` asks the upstream for floats whatever the client asked (Ollama).
   */
  async embeddings(
    req: EmbeddingsRequest,
    ctx: DispatchContext,
    opts: { floatsUpstream?: boolean } = {},
  ): Promise<UpstreamResponse> {
    const body = { ...req, model: ctx.upstreamModel, ...(opts.floatsUpstream ? { encoding_format: 'float' } : {}) };
    const answer = await this.post('/embeddings', body, ctx);
    if (answer.kind !== 'json')
      throw upstreamError('The upstream answered embeddings with a stream.', {
        detail: `${this.target.forLog}: embeddings answered as SSE`,
      });
    return { ...answer, body: normalizeEmbeddings(answer.body, req) };
  }

  /** GET `{server root}{path}` (default {@link probePath}) for health probes; resolves to the HTTP status, throws on a connection error. */
  async probe(signal: AbortSignal, path = this.probePath): Promise<number> {
    const res = await this.dispatcher.request({
      origin: this.target.origin,
      path: this.target.rootPath + path,
      method: 'GET',
      signal,
      headers: this.headers,
    });
    await res.body.dump();
    return res.statusCode;
  }

  async close(): Promise<void> {
    await this.dispatcher.close();
  }

  /**
   * Serialises `body` (the gateway's own work: its failure is never the upstream's), sends it and
   * turns the answer into an {@link UpstreamResponse} or an error per the class's table.
   * @throws ApiError 400 when `body` cannot be serialised; UpstreamError per the table; the abort
   *   reason of `ctx.signal` when it fired.
   */
  private async post(path: string, body: unknown, ctx: DispatchContext): Promise<UpstreamResponse> {
    const payload = serializeBody(body);
    const where = `POST ${this.target.forLog}${path}`;
    let res: Dispatcher.ResponseData;
    try {
      res = await this.dispatcher.request({
        origin: this.target.origin,
        path: this.target.basePath + path + this.target.query,
        method: 'POST',
        headers: this.headers,
        body: payload,
        signal: ctx.signal,
      });
    } catch (err) {
      if (ctx.signal.aborted) throw ctx.signal.reason ?? err;
      const why = describe(err);
      throw upstreamError(`The upstream could not be reached (${why}).`, {
        detail: `${where}: ${messageOf(err)}`,
      });
    }
    const status = res.statusCode;
    if (status < 200 || status >= 300) {
      const text = await readCapped(res.body, ERROR_BODY_BYTES, ctx.signal).catch(() => '');
      throw upstreamFailure(status, res.headers, text, where);
    }
    const contentType = String(res.headers['content-type'] ?? '');
    if (contentType.includes('text/event-stream')) {
      return { kind: 'sse', status, body: upstreamStream(res.body, ctx.signal, where) };
    }
    const limit = ctx.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    const declared = Number(res.headers['content-length']);
    if (Number.isFinite(declared) && declared > limit) {
      res.body.destroy();
      throw tooLarge(limit, where, `declared content-length ${declared}`);
    }
    try {
      return { kind: 'json', status, body: await readBytes(res.body, limit, where) };
    } catch (err) {
      if (ctx.signal.aborted) throw ctx.signal.reason ?? err;
      if (err instanceof UpstreamError) throw err;
      const why = describe(err);
      throw upstreamError(`The upstream closed the connection before its answer was complete (${why}).`, {
        detail: `${where}: ${messageOf(err)}`,
      });
    }
  }
}

const tooLarge = (limit: number, where: string, what: string) =>
  responseTooLarge(limit, `${where}: ${what}, over gateway.max_response_bytes ${limit}`);

/**
 * The whole body, at most `limit` bytes. @throws UpstreamError 502 (not booked) past `limit`, the
 * body stream's error on a reset or a body shorter than its `content-length`.
 */
function readBytes(body: Dispatcher.ResponseData['body'], limit: number, where: string): Promise<Uint8Array> {
  // Plain 'data'/'end' listeners: an async iterator costs a promise per chunk on the hot path (tools/bench).
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let size = 0;
    const onData = (part: Buffer) => {
      size += part.length;
      if (size > limit) {
        body.off('data', onData);
        body.destroy();
        reject(tooLarge(limit, where, `more than ${limit} bytes`));
        return;
      }
      parts.push(part);
    };
    body.on('data', onData);
    body.once('error', reject);
    let ended = false;
    body.once('end', () => {
      ended = true;
      resolve(parts.length === 1 ? parts[0] : Buffer.concat(parts, size));
    });
    // Closed without an end or an error: cut short, as an iterator would report it.
    body.once('close', () => {
      if (!ended) reject(Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' }));
    });
  });
}

/** At most `limit` bytes of `body` as text; the rest is discarded and the body closed. */
async function readCapped(body: Dispatcher.ResponseData['body'], limit: number, signal: AbortSignal): Promise<string> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const part of body as AsyncIterable<Buffer>) {
    if (signal.aborted) break;
    parts.push(part);
    size += part.length;
    if (size >= limit) break;
  }
  body.destroy();
  return Buffer.concat(parts).subarray(0, limit).toString('utf8');
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
async function* upstreamStream(
  body: AsyncIterable<Uint8Array>,
  signal: AbortSignal,
  where: string,
): AsyncGenerator<Uint8Array, void, undefined> {
  try {
    yield* body;
  } catch (err) {
    if (signal.aborted) throw signal.reason ?? err;
    const why = describe(err);
    throw upstreamError(`The upstream stream failed before it finished (${why}).`, {
      detail: `${where}: stream failed: ${messageOf(err)}`,
    });
  }
}

/** The OpenAI error fields of an upstream's error body, when it is one (`{"error": {...}}` or `{"error": "..."}`). */
export function parseErrorBody(text: string): {
  message?: string;
  type?: string;
  code?: string;
  param?: string | null;
} {
  try {
    const parsed = JSON.parse(text) as { error?: unknown; message?: unknown };
    const error = parsed?.error;
    if (typeof error === 'string') return { message: error };
    if (typeof error === 'object' && error !== null) {
      const e = error as Record<string, unknown>;
      return {
        message: typeof e.message === 'string' ? e.message : undefined,
        type: typeof e.type === 'string' ? e.type : undefined,
        code: typeof e.code === 'string' ? e.code : undefined,
        param: typeof e.param === 'string' ? e.param : null,
      };
    }
    if (typeof parsed?.message === 'string') return { message: parsed.message };
  } catch {
    // not JSON
  }
  return {};
}

/**
 * Seconds of a `Retry-After` header (delta-seconds or an HTTP date), capped at
 * {@link MAX_RETRY_AFTER_S}; `undefined` when absent or unreadable.
 */
export function parseRetryAfter(value: unknown, now = Date.now()): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (typeof text !== 'string' || text.trim() === '') return undefined;
  const seconds = /^\s*\d+(\.\d+)?\s*$/.test(text) ? Number(text) : (Date.parse(text) - now) / 1000;
  if (!Number.isFinite(seconds)) return undefined;
  return Math.min(MAX_RETRY_AFTER_S, Math.max(0, Math.ceil(seconds)));
}

/** The error for a non-2xx answer, per the table of {@link OpenAiCompatAdapter}. */
function upstreamFailure(
  status: number,
  headers: Dispatcher.ResponseData['headers'],
  text: string,
  where: string,
): UpstreamError {
  const parsed = parseErrorBody(text);
  const detail = `${where} answered ${status}: ${text.slice(0, ERROR_BODY_BYTES)}`;
  if (status === 429) {
    const retryAfterS = parseRetryAfter(headers['retry-after']) ?? DEFAULT_RETRY_AFTER_S;
    // The upstream's own code, type and message when it sent them (README "Errors"); else the catalog's `rate_limit_exceeded`.
    const { status: limited, type } = ERROR_CATALOG.rate_limit_exceeded;
    const message = parsed.message ?? catalogMessage('rate_limit_exceeded', { retryAfterS });
    const code = parsed.code ?? 'rate_limit_exceeded';
    const passedOn = { status: limited, code, type: parsed.type ?? type, message, retryAfterS, param: parsed.param };
    return new UpstreamError(passedOn, { detail });
  }
  if (status === 401 || status === 403) {
    return upstreamError(
      `The provider refused the gateway's credentials (upstream ${status}); an operator must fix its api_key.`,
      { detail },
    );
  }
  if (status === 404 || status === 405) {
    return upstreamError(
      `The provider does not serve this endpoint or model (upstream ${status}); an operator must check its base_url and model names.`,
      {
        detail,
        counts: false,
        failover: true,
      },
    );
  }
  if (status >= 400 && status < 500) {
    // A 4xx about the request itself (context length, a bad field): the client's answer, passed on.
    const message = parsed.message ?? (text.trim().slice(0, 500) || `The upstream answered ${status}.`);
    const code = parsed.code ?? 'invalid_request_error';
    const passedOn = { status, code, type: parsed.type ?? ERROR_CATALOG.invalid_request_error.type, message };
    return new UpstreamError({ ...passedOn, param: parsed.param }, { detail });
  }
  const what =
    status >= 300 && status < 400
      ? `a redirect (${status})`
      : status >= 500
        ? String(status)
        : `an unexpected status (${status})`;
  return upstreamError(`The upstream answered ${what}.`, {
    detail: status >= 300 && status < 400 ? `${detail} location=${String(headers.location ?? '')}` : detail,
  });
}

/** An error code fit for a client's eyes (`ECONNREFUSED`, `UND_ERR_SOCKET`): never the message, which may name a host. */
function describe(err: unknown): string {
  // Duck-typed: errors of node's own modules are not `instanceof Error` in every realm (jest's vm).
  const e = (typeof err === 'object' && err !== null ? err : {}) as {
    code?: unknown;
    cause?: { code?: unknown };
    errors?: Array<{ code?: unknown }>;
  };
  const code = [e.code, e.cause?.code, e.errors?.[0]?.code].find(
    (c) => typeof c === 'string' && /^[A-Z][A-Z0-9_]*$/.test(c),
  );
  return (code as string | undefined) ?? 'connection error';
}

/** The error's whole account, for the log. */
const messageOf = (err: unknown): string => `${describe(err)} ${(err as Error)?.message ?? String(err)}`;
