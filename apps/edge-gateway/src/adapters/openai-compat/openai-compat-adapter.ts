import type { HttpAdapterConfig } from '@iop/validate';
import type { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { trackUpstreamAnswer } from '../upstream-answers';
import { invalidRequest, UpstreamError, upstreamError } from '../../errors';
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
import { discard, readBytes, readCapped } from './body-readers';
import { contentCodings, decodedBody, isDecodeError } from './content-decoding';
import { UpstreamConnections } from './upstream-connections';
import { clientSafeCode, ERROR_BODY_BYTES, messageOf, tooLarge, upstreamFailure } from './upstream-errors';
import { upstreamTarget, type UpstreamTarget } from './upstream-target';
import { wholeEvents } from './whole-events';

/**
 * HTTP pass-through to an OpenAI-compatible server (`vllm`, `openai_compat`; the base of `ollama`).
 * Sends `POST {base}/chat/completions`, `/responses` or `/embeddings` with the model renamed to the
 * catalog's `upstream` and the credentials of {@link upstreamTarget}, and passes the answer's bytes
 * through unchanged: a JSON body whole (at most `maxResponseBytes`), an SSE body as whole events as
 * the upstream sends them (`whole-events.ts`: a half event never reaches the client), either one
 * decoded first when the upstream sent a `Content-Encoding` (`content-decoding.ts`; the limit holds
 * for the decoded bytes). Which request fields reach the upstream is decided before the call, by the
 * adapter's field table (`request-fields.ts` next to this file).
 * Uses undici on one keep-alive pool per adapter (`upstream-connections.ts`: idle sockets closed
 * after the adapter's `keep_alive_timeout_ms`, a request the server never read on a reused socket
 * sent again on a fresh one): the hot path of every pooled call.
 *
 * What the upstream answers becomes (README "Errors"; messages never name the URL or host, the
 * error's `detail` does, for the log):
 * | upstream | client | counts against the provider | fails over |
 * |---|---|---|---|
 * | closed a reused socket as the request arrived (nothing answered) | sent again on a fresh connection, once | no | no |
 * | unreachable, reset, body cut short, a stream cut mid-event or without its end marker | 502 `upstream_error` | yes | yes |
 * | a `Content-Encoding` it cannot decode (unknown, corrupt) | 502 `upstream_error` | yes | yes |
 * | 5xx, 3xx, 1xx | 502 `upstream_error` (its text to the log) | yes | yes |
 * | 401, 403 | 502 `upstream_error` "refused the gateway's credentials" | yes | yes |
 * | 404, 405 | 502 `upstream_error` "does not serve this" | no | yes |
 * | 429 | 429 with its `Retry-After`, type and message | no (the provider backs off) | yes |
 * | other 4xx | passed on: status, message, type, code, param | no | no |
 * | 2xx JSON over `maxResponseBytes` (decoded), one stream event over it | 502 `upstream_error` | no | no |
 */
export class OpenAiCompatAdapter implements Adapter {
  readonly type: HttpAdapterConfig['type'];
  /** What the server answers when it is up: vLLM's `/health`, an OpenAI-compatible server's `/v1/models`. */
  readonly probePath: string;
  private readonly target: UpstreamTarget;
  private readonly headers: Record<string, string>;
  private readonly connections: UpstreamConnections;

  constructor(readonly config: HttpAdapterConfig) {
    this.type = config.type;
    this.probePath = config.type === 'vllm' ? '/health' : '/v1/models';
    this.target = upstreamTarget(config);
    this.connections = new UpstreamConnections(config.keep_alive_timeout_ms, config.close_wait_ms);
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
    const res = await this.connections.pooled.request({
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
    await this.connections.close();
  }

  /**
   * Serialises `body` (the gateway's own work: its failure is never the upstream's), sends it and
   * turns the answer into an {@link UpstreamResponse} or an error per the class's table.
   * @throws ApiError 400 when `body` cannot be serialised; UpstreamError per the table; the abort
   *   reason of `ctx.signal` when it fired.
   */
  private async post(path: string, body: unknown, ctx: DispatchContext): Promise<UpstreamResponse> {
    const payload = Buffer.from(serializeBody(body));
    const where = `POST ${this.target.logUrl(path)}`;
    let res: Dispatcher.ResponseData;
    try {
      res = await this.connections.post(
        {
          origin: this.target.origin,
          path: this.target.basePath + path + this.target.query,
          headers: this.headers,
          body: payload,
          signal: ctx.signal,
        },
        (first) => ctx.onResent?.(`${where}: ${messageOf(first)}`),
      );
    } catch (err) {
      if (ctx.signal.aborted) throw ctx.signal.reason ?? err;
      const why = clientSafeCode(err);
      throw upstreamError(`The upstream could not be reached (${why}).`, {
        detail: `${where}: ${messageOf(err)}`,
      });
    }
    trackUpstreamAnswer(ctx.signal, res.body);
    const status = res.statusCode;
    if (status < 200 || status >= 300) {
      const text = await errorText(res, where, ctx.signal);
      throw upstreamFailure(status, res.headers, text, where, this.target.redactForClient);
    }
    let codings: string[];
    try {
      codings = contentCodings(res.headers['content-encoding'], where);
    } catch (err) {
      discard(res.body);
      throw err;
    }
    const decoded = decodedBody(res.body, codings);
    const limit = ctx.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    const contentType = String(res.headers['content-type'] ?? '');
    if (contentType.includes('text/event-stream')) {
      const endpoint = path === '/responses' ? 'responses' : 'chat';
      const events = wholeEvents(decoded, {
        endpoint,
        signal: ctx.signal,
        where,
        maxEventBytes: limit,
        redact: this.target.redactForClient,
      });
      return { kind: 'sse', status, body: events };
    }
    // A declared length is the encoded one: it bounds the answer only when nothing is to be decoded.
    const declared = codings.length === 0 ? Number(res.headers['content-length']) : NaN;
    if (Number.isFinite(declared) && declared > limit) {
      discard(res.body);
      throw tooLarge(limit, where, `declared content-length ${declared}`);
    }
    try {
      const bytes = await readBytes(decoded, limit, where);
      // An error reported inside a 2xx answer is passed on or read as the call's error: fit for a client first.
      return { kind: 'json', status, body: redactErrorReport(bytes, this.target) };
    } catch (err) {
      if (ctx.signal.aborted) throw ctx.signal.reason ?? err;
      if (err instanceof UpstreamError) throw err;
      const why = clientSafeCode(err);
      const problem = isDecodeError(err)
        ? `The upstream's answer could not be decoded (its Content-Encoding ${codings.join(', ')}: ${why}).`
        : `The upstream closed the connection before its answer was complete (${why}).`;
      throw upstreamError(problem, { detail: `${where}: ${messageOf(err)}` });
    }
  }
}

/** What every JSON error report holds: an answer without it is passed on unread. */
const ERROR_KEY = '"error"';

/**
 * `bytes` (UTF-8 JSON) as they are when they hold no error report, else with what a client must
 * not read of `target` taken out (`redactForClient`: secrets the gateway sent, the upstream's address).
 */
function redactErrorReport(bytes: Uint8Array, target: UpstreamTarget): Uint8Array {
  const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return view.includes(ERROR_KEY) ? Buffer.from(target.redactForClient(view.toString('utf8'))) : bytes;
}

/**
 * The first {@link ERROR_BODY_BYTES} of an error answer's body as text, decoded from its
 * `Content-Encoding` when it has one the gateway reads ('' when it has another, or the read fails:
 * the status alone then decides the error). Never throws.
 */
async function errorText(res: Dispatcher.ResponseData, where: string, signal: AbortSignal): Promise<string> {
  let body: Readable = res.body;
  try {
    body = decodedBody(res.body, contentCodings(res.headers['content-encoding'], where));
    return await readCapped(body, ERROR_BODY_BYTES, signal);
  } catch {
    discard(body);
    discard(res.body);
    return '';
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
