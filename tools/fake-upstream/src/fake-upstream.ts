import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ChatChunkFormat, chatCompletionJson, type ChatUsage } from './chat-completions';
import { openAIError } from './errors';
import { InFlightRequest } from './in-flight-request';
import { isObject, KnobError, readKnobs, type FakeKnobs, type KnobName } from './knobs';
import { echoReply, readChatPrompt, readResponsesPrompt, roughTokens, splitText, type Prompt } from './prompt';
import { chatReasoning, replyText } from './reasoning';
import { ResponsesEventFormat, responseObject, type ResponsesUsage } from './responses';
import { embeddingsJson, embeddingsTokens } from './embeddings';
import { reportingAtClose, writeEventStream } from './sse';
import { StatsRecorder, type FakeStats } from './stats';
import { CallJournal, type JournalCall, type JournalEntry } from './call-journal';
import { PROBES, probeAnswers, WorkGate } from './probes';
import { EngineModel, renderPrompt, type EngineOptions, type PrefillPlan } from './engine';

/** Options of {@link startFakeUpstream}. */
export interface FakeUpstreamOptions {
  /** TCP port; 0 picks a free one. @defaultValue 0 */
  port?: number;
  /** Interface to listen on. @defaultValue '127.0.0.1' */
  host?: string;
  /** Served-by name: sent as the `x-fake-upstream` header and inside every reply text. @defaultValue 'fake-upstream' */
  name?: string;
  /** Models listed by `GET /v1/models` and `GET /api/tags`; any model name is answered regardless. @defaultValue ['fake-model'] */
  models?: string[];
  /**
   * Knobs every inference request gets unless it sets its own (e.g. `{ reset_before_body: 1 }` for an
   * upstream that always misbehaves, while its sibling behaves). @defaultValue {}
   */
  knobs?: Partial<Record<KnobName, number>>;
  /** Keep a journal of every inference call (`calls()`): its model, `tag` knob, start and end. @defaultValue false */
  journal?: boolean;
  /**
   * Probes (`GET /health`, `/api/version`, `/api/tags`, `/v1/models`) that arrive while an inference
   * request is in flight are answered only once none is: a server busy with long completions whose
   * probe waits behind the work ({@link WorkGate}). @defaultValue false
   */
  probesWaitForWork?: boolean;
  /**
   * Model an inference engine (tools/fake-upstream/README, "Engine model"): a KV cache of `cacheBlocks` blocks of `blockTokens`
   * tokens with prefix caching, a batch of `maxBatch`, a time to first token from the uncached prompt tokens
   * and the load, decode time per output token, `cached_tokens` in usage, `GET /metrics` (vLLM names) and
   * `stats().engine`. Any object turns it on (`{}`: every default of {@link EngineOptions}). @defaultValue undefined (off)
   */
  engine?: Partial<EngineOptions>;
}

/** A running fake upstream. */
export interface FakeUpstream {
  /** OpenAI base URL including `/v1`, e.g. `http://127.0.0.1:43123/v1`. */
  readonly url: string;
  /** Origin without a path, e.g. `http://127.0.0.1:43123` (for `/health`, `/api/version`). */
  readonly origin: string;
  readonly port: number;
  readonly name: string;
  /** Counters and last requests (a copy; see {@link FakeStats}). Same document as `GET /__stats`. */
  stats(): FakeStats;
  /** The call journal, when started with `journal: true` (else empty); `reset` empties it. Same list as `GET /__calls`. */
  calls(): JournalCall[];
  /** Zeroes the counters (in-flight requests stay in `current`). Same as `POST /__reset`. */
  reset(): void;
  /** Stops listening and destroys every open connection, in-flight streams included. Idempotent. */
  close(): Promise<void>;
}

type Api = 'chat' | 'responses' | 'embeddings';

/**
 * Starts an OpenAI-compatible fake upstream that records concurrency (docs/architecture.md, "Layering").
 *
 * Routes: `GET /v1/models`, `POST /v1/chat/completions`, `POST /v1/responses` (stream and not),
 * `POST /v1/embeddings` (deterministic vectors, `encoding_format` float or base64),
 * `GET /health` (vLLM probe), `GET /api/version` and `GET /api/tags` (Ollama probes),
 * `GET /__stats`, `GET /__calls` (the call journal), `POST /__reset`; anything else is a 404 OpenAI error. Replies are
 * {@link echoReply} of the last user message, shaped per the knobs of {@link readKnobs}.
 * Invalid JSON, a missing `model` or a bad knob answer 400 `invalid_request_error`.
 */
export async function startFakeUpstream(opts: FakeUpstreamOptions = {}): Promise<FakeUpstream> {
  const name = opts.name ?? 'fake-upstream';
  const host = opts.host ?? '127.0.0.1';
  const models = opts.models ?? ['fake-model'];
  const recorder = new StatsRecorder();
  const journal = new CallJournal();
  const work = new WorkGate();
  const engine = opts.engine ? new EngineModel(opts.engine) : undefined;
  const jsonHeaders = { 'content-type': 'application/json', 'x-fake-upstream': name };
  const sseHeaders = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'x-fake-upstream': name };
  const fingerprint = `fake-upstream:${name}`;
  let nextId = 0;

  const fixed = probeAnswers(name, models);

  function send(res: ServerResponse, status: number, body: string | Buffer): void {
    res.writeHead(status, { ...jsonHeaders, 'content-length': Buffer.byteLength(body) });
    res.end(body);
  }

  function sendError(res: ServerResponse, status: number, message: string, code?: string, param?: string): void {
    send(res, status, JSON.stringify(openAIError(status, message, code, param)));
  }

  /** The stats, with the engine's counters when it is modelled. */
  function snapshot(): FakeStats {
    return engine ? { ...recorder.snapshot(), engine: engine.snapshot() } : recorder.snapshot();
  }

  /** `reset()` and `POST /__reset`: the counters, the journal and the engine (counters and cache). */
  function resetAll(): void {
    recorder.reset();
    journal.reset();
    engine?.reset();
  }

  /**
   * The engine's part of an answer: a place in its batch (held until the response closes), then the prefill
   * (`ttftMs` of the plan); `undefined` when the client left first.
   */
  async function prefill(flight: InFlightRequest, api: 'chat' | 'responses', body: Record<string, unknown>) {
    if (!engine) return undefined;
    const slot = await engine.admit((leave) => flight.res.once('close', leave));
    if (flight.closed) return void slot.release();
    flight.res.once('close', slot.release);
    const plan = engine.plan(renderPrompt(api, body));
    if (!(await flight.pause(plan.ttftMs))) return undefined;
    engine.commit(plan);
    flight.res.setHeader('x-fake-engine-ttft-ms', String(plan.ttftMs));
    flight.res.setHeader('x-fake-engine-cached-tokens', String(plan.cachedTokens));
    return plan;
  }

  /** Decode time before each streamed piece (the first token comes with the prefill), ms. */
  function pacing(pieces: readonly string[]): number[] | undefined {
    if (!engine) return undefined;
    return pieces.map((piece, i) => engine.decodeMs(roughTokens(piece.length) - (i === 0 ? 1 : 0)));
  }

  function route(req: IncomingMessage, res: ServerResponse): void {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    const method = req.method;
    if (method === 'POST' && path === '/v1/chat/completions') return inference(req, res, 'chat');
    if (method === 'POST' && path === '/v1/responses') return inference(req, res, 'responses');
    if (method === 'POST' && path === '/v1/embeddings') return inference(req, res, 'embeddings');
    if (method === 'GET') {
      const probe = PROBES[path];
      if (probe && opts.probesWaitForWork) {
        return void work.idle().then(() => {
          if (!res.destroyed) send(res, 200, fixed[probe]);
        });
      }
      if (probe) return send(res, 200, fixed[probe]);
      if (path === '/__stats') return send(res, 200, JSON.stringify(snapshot()));
      if (engine && path === '/metrics') {
        const text = engine.metricsText(models[0] ?? 'fake-model');
        res.writeHead(200, {
          'content-type': 'text/plain; version=0.0.4; charset=utf-8',
          'content-length': Buffer.byteLength(text),
          'x-fake-upstream': name,
        });
        return void res.end(text);
      }
      if (path === '/__calls') return send(res, 200, JSON.stringify(journal.snapshot()));
    }
    if (method === 'POST' && path === '/__reset') {
      resetAll();
      res.writeHead(204, { 'x-fake-upstream': name });
      return void res.end();
    }
    req.resume();
    sendError(res, 404, `fake-upstream: no route ${method} ${path}`, 'not_found');
  }

  function inference(req: IncomingMessage, res: ServerResponse, api: Api): void {
    const flight = new InFlightRequest(res, recorder.begin());
    work.enter(res);
    const arrivedAt = Date.now();
    const parts: Buffer[] = [];
    req.on('data', (part: Buffer) => parts.push(part));
    req.on('error', () => undefined); // a client gone mid-body is counted by the response's close
    req.on('end', () => {
      if (flight.closed) return;
      let body: unknown;
      try {
        body = JSON.parse((parts.length === 1 ? parts[0] : Buffer.concat(parts)).toString('utf8'));
      } catch {
        return sendError(res, 400, 'fake-upstream: request body is not valid JSON');
      }
      if (!isObject(body) || typeof body.model !== 'string' || body.model === '') {
        return sendError(
          res,
          400,
          'fake-upstream: `model` must be a non-empty string',
          'invalid_request_error',
          'model',
        );
      }
      flight.ticket.setModel(body.model, { method: 'POST', path: req.url ?? '/', headers: req.headers, body });
      let knobs: FakeKnobs;
      try {
        knobs = readKnobs(req.headers, body, opts.knobs);
      } catch (err) {
        if (err instanceof KnobError) return sendError(res, 400, err.message, 'invalid_request_error', err.param);
        throw err;
      }
      const entry = opts.journal ? journal.begin(body.model, knobs.tag, arrivedAt) : undefined;
      if (entry) res.once('close', entry.end);
      void answer(flight, api, body, body.model, knobs, entry);
    });
  }

  /** A 2xx JSON answer, shaped by `body_bytes` (padding) and `short_body` (a body cut short of its content-length). */
  function sendJson(flight: InFlightRequest, text: string, knobs: FakeKnobs): void {
    const { res } = flight;
    const padded =
      knobs.bodyBytes > text.length
        ? `${text.slice(0, -1)},"x_padding":"${'.'.repeat(knobs.bodyBytes - text.length)}"}`
        : text;
    if (knobs.shortBody === undefined) return send(res, 200, padded);
    const bytes = Buffer.from(padded);
    res.writeHead(200, { ...jsonHeaders, 'content-length': bytes.length + 1000 });
    res.write(bytes.subarray(0, knobs.shortBody));
    flight.cut();
  }

  async function answer(
    flight: InFlightRequest,
    api: Api,
    body: Record<string, unknown>,
    model: string,
    knobs: FakeKnobs,
    entry?: JournalEntry,
  ): Promise<void> {
    if (knobs.delayMs > 0 && !(await flight.pause(knobs.delayMs))) return;
    if (flight.closed) return;
    const { res, req } = { res: flight.res, req: flight.res.req };
    if (knobs.resetBeforeBody) {
      flight.cutByServer();
      return void res.socket?.resetAndDestroy();
    }
    if (knobs.redirect !== undefined) {
      res.writeHead(knobs.redirect, {
        location: 'http://internal-host.example:9999/v1/elsewhere',
        'x-fake-upstream': name,
      });
      return void res.end();
    }
    if (knobs.status !== undefined && knobs.status >= 400) {
      const status = knobs.status;
      const secrets = knobs.echoSecrets
        ? ` (you sent authorization=${String(req?.headers.authorization)} host=${String(req?.headers.host)})`
        : '';
      const error = openAIError(status, `fake-upstream: forced status ${status}${secrets}`);
      if (status === 429) error.error.type = 'rate_limit_error';
      let text = JSON.stringify(error);
      if (knobs.bodyBytes > text.length)
        text = `${text.slice(0, -1)},"x_padding":"${'.'.repeat(knobs.bodyBytes - text.length)}"}`;
      res.writeHead(status, {
        ...jsonHeaders,
        'content-length': Buffer.byteLength(text),
        ...(knobs.retryAfter !== undefined ? { 'retry-after': String(knobs.retryAfter) } : {}),
      });
      return void res.end(text);
    }
    if (api === 'embeddings') {
      // An embeddings answer reports prompt tokens only.
      if (knobs.shortBody === undefined) entry?.reported({ prompt: embeddingsTokens(body), completion: 0 });
      return sendJson(flight, embeddingsJson(body, model), knobs);
    }
    const prompt: Prompt = api === 'chat' ? readChatPrompt(body) : readResponsesPrompt(body);
    let plan: PrefillPlan | undefined;
    if (engine && !(plan = await prefill(flight, api, body))) return;
    const text = echoReply(prompt.lastUserText, model, name);
    const inputTokens = plan ? plan.promptTokens : roughTokens(prompt.inputChars);
    const outputTokens = roughTokens(text.length);
    const created = Math.floor(Date.now() / 1000);
    const n = ++nextId;
    const stream = body.stream === true;

    if (api === 'chat') {
      const who = { id: `chatcmpl-fake-${n}`, created, model, system_fingerprint: fingerprint };
      const reply = replyText(body, prompt.lastUserText, model, name);
      const reasoning = chatReasoning(knobs, prompt.lastUserText);
      const reasoningTokens = reasoning ? roughTokens(reasoning.text.length) : 0;
      const completionTokens = roughTokens(reply.length) + reasoningTokens;
      const usage: ChatUsage = {
        prompt_tokens: inputTokens,
        completion_tokens: completionTokens,
        total_tokens: inputTokens + completionTokens,
        ...(plan ? { prompt_tokens_details: { cached_tokens: plan.cachedTokens } } : {}),
        ...(reasoning ? { completion_tokens_details: { reasoning_tokens: reasoningTokens } } : {}),
      };
      const reported = { prompt: usage.prompt_tokens, completion: usage.completion_tokens };
      if (!stream) {
        if (engine && !(await flight.pause(engine.decodeMs(completionTokens - 1)))) return;
        if (knobs.shortBody === undefined) entry?.reported(reported);
        return sendJson(flight, chatCompletionJson(who, reply, usage, reasoning), knobs);
      }
      const includeUsage = isObject(body.stream_options) && body.stream_options.include_usage === true;
      const pieces = splitText(reply, knobs.chunks);
      const format = new ChatChunkFormat(who, includeUsage ? usage : undefined, reasoning);
      const all = reasoning ? [...splitText(reasoning.text, reasoning.chunks), ...pieces] : pieces;
      return writeEventStream(
        flight,
        sseHeaders,
        all,
        includeUsage && entry ? reportingAtClose(format, () => entry.reported(reported)) : format,
        knobs,
        pacing(all),
      );
    }
    const who = { id: `resp_fake_${n}`, messageId: `msg_fake_${n}`, created_at: created, model };
    const usage: ResponsesUsage = {
      input_tokens: inputTokens,
      input_tokens_details: { cached_tokens: plan ? plan.cachedTokens : 0 },
      output_tokens: outputTokens,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: inputTokens + outputTokens,
    };
    const reported = { prompt: inputTokens, completion: outputTokens };
    if (!stream) {
      if (engine && !(await flight.pause(engine.decodeMs(outputTokens - 1)))) return;
      if (knobs.shortBody === undefined) entry?.reported(reported);
      return sendJson(flight, JSON.stringify(responseObject(who, text, usage)), knobs);
    }
    const format = new ResponsesEventFormat(who, text, usage);
    const pieces = splitText(text, knobs.chunks);
    return writeEventStream(
      flight,
      sseHeaders,
      pieces,
      entry ? reportingAtClose(format, () => entry.reported(reported)) : format,
      knobs,
      pacing(pieces),
    );
  }

  const server = createServer({ keepAlive: true, noDelay: true, requestTimeout: 0 }, route);
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const origin = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  let closing: Promise<void> | undefined;

  return {
    url: `${origin}/v1`,
    origin,
    port,
    name,
    stats: snapshot,
    calls: () => journal.snapshot(),
    reset: resetAll,
    close: () =>
      (closing ??= new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      })),
  };
}
