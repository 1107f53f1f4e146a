import type { CliAdapterConfig } from '@iop/validate';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { ChatRequest, UpstreamResponse } from '../adapters/adapter';
import { CliAdapter } from '../adapters/cli/cli-adapter';
import { cliConfig, cliHost, waitUntil } from './cli-runs';

/** The CLI adapter's specs (`adapters/cli/cli-adapter*.spec.ts`): their programs, their adapters, their reads. */

export const NODE = process.execPath;
/** The CLI model shipped in the repository (`examples/cli/echo-llm.mjs`). */
export const ECHO_LLM = resolve(__dirname, '../../../../examples/cli/echo-llm.mjs');

/** Writes its pid and a grandchild's pid to argv[1] as JSON, says "started" on stdout, then hangs. */
export const HANGS_WITH_GRANDCHILD = `
const { spawn } = require('node:child_process');
const grandchild = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
require('node:fs').writeFileSync(process.argv[1], JSON.stringify([process.pid, grandchild.pid]));
if (process.argv[2] === 'talk') process.stdout.write('started');
setInterval(() => {}, 1000);
`;

/** Writes argv[2], waits until the file argv[1] exists, then writes argv[3] and exits with code argv[4]. */
export const WAITS_FOR_FILE = `
const fs = require('node:fs');
const [file, before, after, code] = process.argv.slice(1);
process.stdout.write(before);
const timer = setInterval(() => {
  if (!fs.existsSync(file)) return;
  clearInterval(timer);
  process.stdout.write(after, () => process.exit(Number(code)));
}, 5);
`;

/** The adapters the running test made; {@link useCliAdapterRuns} closes them after it. */
export const adapters: CliAdapter[] = [];
/** The running test's own temp directory, made fresh before each test by {@link useCliAdapterRuns}. */
export let dir = '';

/** Gives each test of the calling spec file its own temp `dir`, and closes its adapters and removes `dir` after it. */
export function useCliAdapterRuns(): void {
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'cli-adapter-'));
  });
  afterEach(async () => {
    await Promise.all(adapters.map((a) => a.close()));
    adapters.length = 0;
    rmSync(dir, { recursive: true, force: true });
  });
}

/**
 * An adapter that runs its program without a sandbox (`gateway.cli_sandbox: none`), so the pids a
 * program reports are host pids these tests can watch; the sandbox has its own spec.
 */
export function cliAdapter(
  command: string[],
  timeoutMs = 10_000,
  settings: Partial<CliAdapterConfig> = {},
): CliAdapter {
  const adapter = new CliAdapter(cliConfig(command, { timeout_ms: timeoutMs, ...settings }), cliHost('none'));
  adapters.push(adapter);
  return adapter;
}

/** A chat request for the model `public-echo` with one user message. */
export const ask = (content: string, stream = false, extra: Partial<ChatRequest> = {}): ChatRequest => ({
  model: 'public-echo',
  messages: [{ role: 'user', content }],
  stream,
  ...extra,
});

/** The body of an SSE answer. @throws Error when the answer is not SSE. */
export function sseBody(res: UpstreamResponse): AsyncIterable<Uint8Array | string> {
  if (res.kind !== 'sse') throw new Error(`expected sse, got ${res.kind}`);
  return res.body;
}

/** Every frame of `body`, and the error that ended it early, if any. */
export async function readAll(
  body: AsyncIterable<Uint8Array | string>,
): Promise<{ frames: string[]; error?: unknown }> {
  const frames: string[] = [];
  try {
    for await (const frame of body) frames.push(String(frame));
  } catch (error) {
    return { frames, error };
  }
  return { frames };
}

/** The JSON payloads of `data:` frames, `[DONE]` kept as the string. */
export const payloads = (frames: string[]) =>
  frames.map((frame) => {
    const data = /^data: (.*)\n\n$/s.exec(frame)?.[1];
    if (data === undefined) throw new Error(`not one data frame: ${JSON.stringify(frame)}`);
    return data === '[DONE]'
      ? data
      : (JSON.parse(data) as {
          choices: Array<{ delta: { role?: string; content?: string }; finish_reason: string | null }>;
          usage?: unknown;
        });
  });

/**
 * True once `pid` is dead. A killed grandchild is re-parented to PID 1, which reaps it; where PID 1
 * does not reap (some sandboxes), it stays a zombie: dead, holding nothing, and not ours to reap.
 * A zombie whose parent is this process would be a leak of ours, so that one counts as alive.
 */
export function isGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const [state, parent] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return state === 'Z' && Number(parent) !== process.pid;
  } catch {
    return true;
  }
}

/** The pids a program wrote to `file` as JSON, once it has written them. */
export async function readPids(file: string): Promise<number[]> {
  await waitUntil(() => existsSync(file) && readFileSync(file, 'utf8') !== '', `${file} is written`);
  return JSON.parse(readFileSync(file, 'utf8')) as number[];
}

/** Waits until the program (`pids[0]`) and its grandchild are gone, the program reaped by Node. */
export async function expectAllGone(pids: number[]): Promise<void> {
  expect(pids).toHaveLength(2);
  await waitUntil(() => pids.every(isGone), `processes ${pids.join(', ')} are gone`);
  // The program itself is our child: Node must have reaped it, not left a zombie.
  expect(() => process.kill(pids[0], 0)).toThrow(expect.objectContaining({ code: 'ESRCH' }));
}
