import type { CliAdapterConfig, CliSandboxMode } from '@iop/validate';
import { readdirSync, readFileSync } from 'node:fs';
import type { DispatchContext, UpstreamResponse } from '../adapters/adapter';
import type { CliHost } from '../adapters/cli/cli-host';
import { RUN_MARKER } from '../adapters/cli/cli-process';
import { CliSandbox } from '../adapters/cli/cli-sandbox';
import { EscapedProcessSweeper } from '../adapters/cli/escaped-processes';

/** A node program given inline, as an argv (no shell involved). */
export const nodeScript = (source: string, ...args: string[]) => [process.execPath, '-e', source, ...args];

/** A CLI adapter's settings as the schema fills them in, `settings` on top. */
export function cliConfig(command: string[], settings: Partial<CliAdapterConfig> = {}): CliAdapterConfig {
  return {
    id: 'test-cli',
    type: 'cli',
    command,
    timeout_ms: 10_000,
    enabled: true,
    env: {},
    max_output_bytes: 16 * 1024 * 1024,
    prompt_format: 'text',
    max_concurrency: 4,
    max_waiting: 16,
    ...settings,
  };
}

/** A host of its own (sandbox `mode`, a sweeper batching over 20 ms), so a test can count its sweeps. */
export function cliHost(mode: CliSandboxMode, hidden: string[] = []): CliHost {
  return { sandbox: new CliSandbox(mode, { hidden }), sweeper: new EscapedProcessSweeper(RUN_MARKER, { batchMs: 20 }) };
}

export function context(signal: AbortSignal = new AbortController().signal): DispatchContext {
  return { upstreamModel: 'upstream-name', signal };
}

export function jsonBody(res: UpstreamResponse): Record<string, unknown> {
  if (res.kind !== 'json') throw new Error(`expected json, got ${res.kind}`);
  return JSON.parse(typeof res.body === 'string' ? res.body : new TextDecoder().decode(res.body));
}

/** `choices[0].message.content` of a non-streamed chat answer. */
export const contentOf = (res: UpstreamResponse) =>
  (jsonBody(res).choices as Array<{ message: { content: string } }>)[0].message.content;

/** Every frame of an SSE answer, joined. */
export async function sseText(res: UpstreamResponse): Promise<string> {
  if (res.kind !== 'sse') throw new Error(`expected sse, got ${res.kind}`);
  let text = '';
  for await (const frame of res.body) text += String(frame);
  return text;
}

/** Host pids of live (not zombie) processes whose command line holds `token`. */
export function processesWith(token: string): number[] {
  return readdirSync('/proc')
    .map(Number)
    .filter((pid) => Number.isInteger(pid) && pid !== process.pid)
    .filter((pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) return false;
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(token);
      } catch {
        return false;
      }
    });
}

/** Polls `check` every 10 ms until it holds. @throws Error naming `what` after `timeoutMs`. */
export async function waitUntil(check: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
