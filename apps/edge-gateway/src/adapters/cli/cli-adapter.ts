import type { CliAdapterConfig } from '@iop/validate';
import type { Adapter, ChatRequest, DispatchContext, ResponsesRequest, UpstreamResponse } from '../adapter';
import { newId, responsesViaChat } from '../responses-translation';
import { CliProcess } from './cli-process';
import { renderPrompt } from './prompt-rendering';

/** Rough token count of a text for `usage` (about 4 characters per token): a CLI reports none. */
export function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

/**
 * A command-line program wrapped as a model (DESIGN §1, §3 `type: cli`; always a direct route).
 * Each call runs `command[0]` with `command.slice(1)` as its argv — never through a shell, so
 * spaces and shell metacharacters reach the program literally — in its own process group, writes
 * the prompt ({@link renderPrompt}) to its stdin, closes stdin, and answers with its stdout as the
 * assistant's text:
 * - `stream: false` → one `chat.completion` JSON once the program exited 0: id `chatcmpl-…`,
 *   `model` the public name in `req.model`, `choices[0].message.content` the whole stdout,
 *   `finish_reason: "stop"`, `usage` estimated ({@link estimateTokens});
 * - `stream: true` → `chat.completion.chunk` SSE frames, one per stdout chunk as it arrives (the
 *   first carries `role: "assistant"`), a last chunk with `finish_reason: "stop"`, a usage chunk
 *   when `stream_options.include_usage` is set, then `data: [DONE]`.
 * The program inherits the gateway's environment and working directory.
 * Failures (DESIGN §6): a program that cannot start, exits non-zero or dies on a signal before any
 * output (any time, when not streaming) → UpstreamError 502 `upstream_error` naming the exit code
 * and quoting the end of stderr; `timeout_ms` passed → the process group is killed and 504
 * `upstream_timeout`; once streaming, both make the SSE iterator throw (no `[DONE]`). An aborted
 * `ctx.signal` (client disconnect) or a consumer that stops reading kills the group at once.
 * `responses()` is served through chat completions (`responses-translation`).
 */
export class CliAdapter implements Adapter {
  readonly type = 'cli' as const;
  private readonly live = new Set<CliProcess>();

  /** @throws Error when `config.command` is empty or `config.timeout_ms` is not a positive number. */
  constructor(readonly config: CliAdapterConfig) {
    if (config.command.length === 0 || config.command[0] === '') {
      throw new Error(`CLI adapter "${config.id}": command must name a program, e.g. ["my-llm", "--quiet"].`);
    }
    if (!(config.timeout_ms > 0)) throw new Error(`CLI adapter "${config.id}": timeout_ms must be a positive number of milliseconds.`);
  }

  /** @throws see the class docstring; ApiError 400 for non-text content ({@link renderPrompt}). */
  async chat(req: ChatRequest, ctx: DispatchContext): Promise<UpstreamResponse> {
    const prompt = renderPrompt(req.messages);
    if (ctx.signal.aborted) throw ctx.signal.reason;
    const run = new CliProcess({ command: this.config.command, stdin: prompt, timeoutMs: this.config.timeout_ms, signal: ctx.signal });
    this.live.add(run);
    void run.closed.then(() => this.live.delete(run));
    const id = newId('chatcmpl-');
    const created = Math.floor(Date.now() / 1000);

    if (req.stream !== true) {
      let text = '';
      for (let chunk = await run.read(); chunk !== null; chunk = await run.read()) text += chunk;
      const completion = {
        id,
        object: 'chat.completion',
        created,
        model: req.model,
        choices: [{ index: 0, message: { role: 'assistant', content: text, refusal: null }, logprobs: null, finish_reason: 'stop' }],
        usage: usage(prompt, text),
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
    const includeUsage = typeof options === 'object' && options !== null && (options as { include_usage?: unknown }).include_usage === true;
    return { kind: 'sse', status: 200, body: chunkFrames(run, first, { id, created, model: req.model, prompt, includeUsage }) };
  }

  responses(req: ResponsesRequest, ctx: DispatchContext): Promise<UpstreamResponse> {
    return responsesViaChat(req, ctx, (chatReq, chatCtx) => this.chat(chatReq, chatCtx));
  }

  /** Kills every program still running (its whole process group) and waits until each has exited. */
  async close(): Promise<void> {
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

/** The SSE body of a streamed run; stopping it early (client gone) kills the process group. */
async function* chunkFrames(run: CliProcess, first: string | null, meta: ChunkMeta): AsyncGenerator<string, void, undefined> {
  const frame = (choices: unknown[], extra: Record<string, unknown> = {}) =>
    `data: ${JSON.stringify({ id: meta.id, object: 'chat.completion.chunk', created: meta.created, model: meta.model, choices, ...extra })}\n\n`;
  const choice = (delta: Record<string, unknown>, finishReason: string | null = null) => ({ index: 0, delta, logprobs: null, finish_reason: finishReason });
  let text = first ?? '';
  try {
    yield frame([choice({ role: 'assistant', content: text })]);
    for (let chunk = first === null ? null : await run.read(); chunk !== null; chunk = await run.read()) {
      text += chunk;
      yield frame([choice({ content: chunk })]);
    }
    yield frame([choice({}, 'stop')]);
    if (meta.includeUsage) yield frame([], { usage: usage(meta.prompt, text) });
    yield 'data: [DONE]\n\n';
  } finally {
    run.kill();
  }
}

function usage(prompt: string, text: string): { prompt_tokens: number; completion_tokens: number; total_tokens: number } {
  const promptTokens = estimateTokens(prompt);
  const completionTokens = estimateTokens(text);
  return { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
}
