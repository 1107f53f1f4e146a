import type { CliAdapterConfig } from '@iop/validate';
import { upstreamError } from '../../errors';
import type { Adapter, ChatRequest, DispatchContext, ResponsesRequest, UpstreamResponse } from '../adapter';
import { newId, responsesViaChat } from '../responses-translation';
import { defaultCliHost, type CliHost } from './cli-host';
import { CliProcess } from './cli-process';
import { renderPromptInTurns } from './prompt-rendering';
import { RunLimit } from './run-limit';

/** Variables of the gateway's own environment every CLI program gets, when set (README "Adapters"). */
export const BASE_ENV = ['PATH', 'HOME', 'LANG', 'TZ'] as const;

/**
 * The environment of a CLI program: {@link BASE_ENV} from `gatewayEnv`, then the adapter's `env`
 * (which wins). Nothing else of the gateway's environment — upstream keys, the Redis URL — is
 * passed on.
 */
export function cliEnvironment(
  config: Pick<CliAdapterConfig, 'env'>,
  gatewayEnv: NodeJS.ProcessEnv = process.env,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of BASE_ENV) {
    const value = gatewayEnv[name];
    if (value !== undefined) env[name] = value;
  }
  return { ...env, ...config.env };
}

/** Rough token count of a text for `usage` (about 4 characters per token): a CLI reports none. */
export function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

/**
 * A command-line program wrapped as a model (`type: cli`, README "Pooled and direct routes"; always a direct route).
 * Each call waits for a run under the adapter's bound ({@link RunLimit}: `max_concurrency` runs at
 * once, `max_waiting` waiting, then 429; in this process only), then runs `command[0]` with
 * `command.slice(1)` as its argv — never through a shell, so spaces and shell metacharacters reach
 * the program literally — in the host's sandbox (`CliSandbox`, `gateway.cli_sandbox`) and its own
 * process group, writes the prompt ({@link renderPromptInTurns}) to its stdin, closes stdin, and answers
 * with its stdout as the assistant's text:
 * - `stream: false` → one `chat.completion` JSON once the program exited 0: id `chatcmpl-…`,
 *   `model` the public name in `req.model`, `choices[0].message.content` the whole stdout,
 *   `finish_reason: "stop"`, `usage` estimated ({@link estimateTokens});
 * - `stream: true` → `chat.completion.chunk` SSE frames, one per stdout chunk as it arrives (the
 *   first carries `role: "assistant"`), a last chunk with `finish_reason: "stop"`, a usage chunk
 *   when `stream_options.include_usage` is set, then `data: [DONE]`.
 * The program gets {@link cliEnvironment} (the adapter's `env` over `PATH`, `HOME`, `LANG`, `TZ`)
 * and the gateway's working directory. A non-streamed answer holds at most `max_output_bytes`
 * and `gateway.max_response_bytes` (`ctx.maxResponseBytes`), the smaller: more is a 502
 * and the process group is killed. A streamed answer is passed on chunk by chunk in constant
 * memory, whatever its length. A run holds its slot until the program and its output are gone.
 * Failures (README "Errors"): `max_waiting` requests already waiting → ApiError 429
 * `rate_limit_exceeded` with `Retry-After`; a sandbox that does not work on the host, a program that
 * cannot start, exits non-zero or dies on a signal before any output (any time, when not streaming)
 * → UpstreamError 502 `upstream_error` naming the exit code and quoting the end of stderr;
 * `timeout_ms` passed → the process group is killed and 504 `upstream_timeout`; once streaming,
 * both make the SSE iterator throw (no `[DONE]`). An aborted `ctx.signal` (client disconnect, the
 * time to first byte passed while waiting) ends the wait, or kills the group at once, as does a
 * consumer that stops reading. `responses()` is served through chat completions (`responses-translation`).
 */
export class CliAdapter implements Adapter {
  readonly type = 'cli' as const;
  private readonly live = new Set<CliProcess>();
  private readonly env: Record<string, string>;
  private readonly limit: RunLimit;

  /**
   * @param host the sandbox and sweeper shared by the gateway's CLI adapters ({@link defaultCliHost} when omitted).
   * @throws Error when `config.command` is empty, `config.timeout_ms` is not a positive number, or
   *   `max_concurrency`/`max_waiting` are out of range ({@link RunLimit}).
   */
  constructor(
    readonly config: CliAdapterConfig,
    private readonly host: CliHost = defaultCliHost(),
  ) {
    if (config.command.length === 0 || config.command[0] === '') {
      throw new Error(`CLI adapter "${config.id}": command must name a program, e.g. ["my-llm", "--quiet"].`);
    }
    if (!(config.timeout_ms > 0))
      throw new Error(`CLI adapter "${config.id}": timeout_ms must be a positive number of milliseconds.`);
    this.env = cliEnvironment(config);
    this.limit = new RunLimit(config.id, config.max_concurrency, config.max_waiting);
  }

  /** @throws see the class docstring; ApiError 400 for non-text content ({@link renderPromptInTurns}). */
  async chat(req: ChatRequest, ctx: DispatchContext): Promise<UpstreamResponse> {
    // A long text is escaped a slice per turn of the event loop: one body cannot hold it (docs/architecture.md, "Costly bodies").
    const prompt = await renderPromptInTurns(req.messages, this.config.prompt_format, ctx.signal);
    if (ctx.signal.aborted) throw ctx.signal.reason;
    const launch = await this.host.sandbox.launch(this.config.command, this.env);
    const release = await this.limit.acquire(ctx.signal);
    // Granted in the same turn as an abort: the slot goes back and no program starts.
    if (ctx.signal.aborted) {
      release();
      throw ctx.signal.reason;
    }
    let run: CliProcess;
    try {
      run = new CliProcess({
        launch,
        program: this.config.command[0],
        sweeper: this.host.sweeper,
        stdin: prompt,
        timeoutMs: this.config.timeout_ms,
        signal: ctx.signal,
        env: this.env,
        adapterId: this.config.id,
      });
    } catch (err) {
      release();
      throw err;
    }
    this.live.add(run);
    void run.closed.then(() => {
      this.live.delete(run);
      release();
    });
    const id = newId('chatcmpl-');
    const created = Math.floor(Date.now() / 1000);

    if (req.stream !== true) {
      const cap = Math.min(this.config.max_output_bytes, ctx.maxResponseBytes ?? Infinity);
      let text = '';
      let bytes = 0;
      for (let chunk = await run.read(); chunk !== null; chunk = await run.read()) {
        bytes += Buffer.byteLength(chunk);
        if (bytes > cap) {
          const message = `The CLI model wrote more than ${cap} bytes for a non-streamed answer (max_output_bytes of adapter "${this.config.id}", gateway.max_response_bytes); it was stopped. Ask with stream: true for longer answers.`;
          const tooLong = upstreamError(message, { detail: message });
          run.fail(tooLong);
          throw tooLong;
        }
        text += chunk;
      }
      const completion = {
        id,
        object: 'chat.completion',
        created,
        model: req.model,
        choices: [
          {
            index: 0,
            message: { role: 'assistant', content: text, refusal: null },
            logprobs: null,
            finish_reason: 'stop',
          },
        ],
        usage: usage(prompt.length, text.length),
      };
      return { kind: 'json', status: 200, body: JSON.stringify(completion) };
    }

    // The 502/504 of a run that fails before any output must be decided before the first frame.
    let first: string | null;
    try {
      first = await run.read();
    } catch (err) {
      run.kill();
      throw err;
    }
    const options = req.stream_options;
    const includeUsage =
      typeof options === 'object' &&
      options !== null &&
      (options as { include_usage?: unknown }).include_usage === true;
    return {
      kind: 'sse',
      status: 200,
      body: chunkFrames(run, first, { id, created, model: req.model, prompt, includeUsage }),
    };
  }

  responses(req: ResponsesRequest, ctx: DispatchContext): Promise<UpstreamResponse> {
    return responsesViaChat(req, ctx, (chatReq, chatCtx) => this.chat(chatReq, chatCtx));
  }

  /** Refuses every waiting request, kills every program still running (its whole process group) and waits until each has exited. */
  async close(): Promise<void> {
    this.limit.close(upstreamError('The CLI model was stopped by the gateway.'));
    const runs = [...this.live];
    for (const run of runs) run.kill();
    await Promise.all(runs.map((run) => run.closed));
  }
}

interface ChunkMeta {
  id: string;
  created: number;
  model: string;
  prompt: string;
  includeUsage: boolean;
}

/**
 * The SSE body of a streamed run; stopping it early (client gone) kills the process group. Only
 * the output's length is kept (for `usage`), never its text: memory stays flat however long the
 * program writes.
 */
async function* chunkFrames(
  run: CliProcess,
  first: string | null,
  meta: ChunkMeta,
): AsyncGenerator<string, void, undefined> {
  const frame = (choices: unknown[], extra: Record<string, unknown> = {}) =>
    `data: ${JSON.stringify({ id: meta.id, object: 'chat.completion.chunk', created: meta.created, model: meta.model, choices, ...extra })}\n\n`;
  const choice = (delta: Record<string, unknown>, finishReason: string | null = null) => ({
    index: 0,
    delta,
    logprobs: null,
    finish_reason: finishReason,
  });
  let length = first?.length ?? 0;
  try {
    yield frame([choice({ role: 'assistant', content: first ?? '' })]);
    for (let chunk = first === null ? null : await run.read(); chunk !== null; chunk = await run.read()) {
      length += chunk.length;
      yield frame([choice({ content: chunk })]);
    }
    yield frame([choice({}, 'stop')]);
    if (meta.includeUsage) yield frame([], { usage: usage(meta.prompt.length, length) });
    yield 'data: [DONE]\n\n';
  } finally {
    run.kill();
  }
}

/** Estimated usage from the prompt's and the answer's lengths in characters (see {@link estimateTokens}). */
function usage(
  promptChars: number,
  textChars: number,
): { prompt_tokens: number; completion_tokens: number; total_tokens: number } {
  const promptTokens = Math.ceil(promptChars / 4);
  const completionTokens = Math.ceil(textChars / 4);
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
  };
}
