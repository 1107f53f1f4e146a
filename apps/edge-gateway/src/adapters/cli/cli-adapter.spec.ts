import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { CliAdapterConfig } from '@iop/validate';
import OpenAI from 'openai';
import type { ChatRequest, UpstreamResponse } from '../adapter';
import { cliConfig, cliHost, context, jsonBody, nodeScript, waitUntil } from '../../testing/cli-runs';
import { CliAdapter, cliEnvironment } from './cli-adapter';
import { RUN_MARKER } from './cli-process';
import { EscapedProcessSweeper } from './escaped-processes';
import { renderPrompt } from './prompt-rendering';

const NODE = process.execPath;
const ECHO_LLM = resolve(__dirname, '../../../../../examples/cli/echo-llm.mjs');

/** Writes its pid and a grandchild's pid to argv[1] as JSON, says "started" on stdout, then hangs. */
const HANGS_WITH_GRANDCHILD = `
const { spawn } = require('node:child_process');
const grandchild = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
require('node:fs').writeFileSync(process.argv[1], JSON.stringify([process.pid, grandchild.pid]));
if (process.argv[2] === 'talk') process.stdout.write('started');
setInterval(() => {}, 1000);
`;

/** Writes argv[2], waits until the file argv[1] exists, then writes argv[3] and exits with code argv[4]. */
const WAITS_FOR_FILE = `
const fs = require('node:fs');
const [file, before, after, code] = process.argv.slice(1);
process.stdout.write(before);
const timer = setInterval(() => {
  if (!fs.existsSync(file)) return;
  clearInterval(timer);
  process.stdout.write(after, () => process.exit(Number(code)));
}, 5);
`;

let adapters: CliAdapter[] = [];
let dir = '';
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'cli-adapter-'));
});
afterEach(async () => {
  await Promise.all(adapters.map((a) => a.close()));
  adapters = [];
  rmSync(dir, { recursive: true, force: true });
});

/**
 * An adapter that runs its program without a sandbox (`gateway.cli_sandbox: none`), so the pids a
 * program reports are host pids these tests can watch; the sandbox has its own spec.
 */
function cliAdapter(command: string[], timeoutMs = 10_000, settings: Partial<CliAdapterConfig> = {}): CliAdapter {
  const adapter = new CliAdapter(cliConfig(command, { timeout_ms: timeoutMs, ...settings }), cliHost('none'));
  adapters.push(adapter);
  return adapter;
}

const ask = (content: string, stream = false, extra: Partial<ChatRequest> = {}): ChatRequest => ({
  model: 'public-echo',
  messages: [{ role: 'user', content }],
  stream,
  ...extra,
});

function sseBody(res: UpstreamResponse): AsyncIterable<Uint8Array | string> {
  if (res.kind !== 'sse') throw new Error(`expected sse, got ${res.kind}`);
  return res.body;
}

async function readAll(body: AsyncIterable<Uint8Array | string>): Promise<{ frames: string[]; error?: unknown }> {
  const frames: string[] = [];
  try {
    for await (const frame of body) frames.push(String(frame));
  } catch (error) {
    return { frames, error };
  }
  return { frames };
}

/** The JSON payloads of `data:` frames, `[DONE]` kept as the string. */
const payloads = (frames: string[]) =>
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
function isGone(pid: number): boolean {
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

async function readPids(file: string): Promise<number[]> {
  await waitUntil(() => existsSync(file) && readFileSync(file, 'utf8') !== '', `${file} is written`);
  return JSON.parse(readFileSync(file, 'utf8')) as number[];
}

async function expectAllGone(pids: number[]): Promise<void> {
  expect(pids).toHaveLength(2);
  await waitUntil(() => pids.every(isGone), `processes ${pids.join(', ')} are gone`);
  // The program itself is our child: Node must have reaped it, not left a zombie.
  expect(() => process.kill(pids[0], 0)).toThrow(expect.objectContaining({ code: 'ESRCH' }));
}

describe('CliAdapter', () => {
  it('answers a non-streamed call with a chat.completion of the whole stdout', async () => {
    const res = await cliAdapter([NODE, ECHO_LLM]).chat(ask('hello world'), context());
    const body = jsonBody(res);
    expect(res.status).toBe(200);
    expect(body).toMatchObject({
      object: 'chat.completion',
      model: 'public-echo',
      choices: [{ index: 0, message: { role: 'assistant', content: 'echo: hello world' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 },
    });
    expect(body.id).toMatch(/^chatcmpl-/);
  });

  it('streams one chat.completion.chunk per stdout chunk, role first, then stop and [DONE]', async () => {
    const res = await cliAdapter([NODE, ECHO_LLM]).chat(
      ask('hello streaming world', true, { stream_options: { include_usage: true } }),
      context(),
    );
    const { frames, error } = await readAll(sseBody(res));
    expect(error).toBeUndefined();
    const data = payloads(frames);
    expect(data.at(-1)).toBe('[DONE]');
    const chunks = data.slice(0, -1) as Array<Exclude<(typeof data)[number], string>>;
    const contentChunks = chunks.filter((c) => c.choices[0]?.delta.content);
    expect(contentChunks.length).toBeGreaterThanOrEqual(2);
    expect(chunks[0].choices[0].delta.role).toBe('assistant');
    expect(chunks.slice(1).every((c) => c.choices[0]?.delta.role === undefined)).toBe(true);
    expect(contentChunks.map((c) => c.choices[0].delta.content).join('')).toBe('echo: hello streaming world');
    const stop = chunks.find((c) => c.choices[0]?.finish_reason === 'stop');
    expect(stop).toBeDefined();
    expect(chunks.at(-1)?.usage).toMatchObject({ completion_tokens: expect.any(Number) });
  });

  it('streams a stdout chunk while the program is still running', async () => {
    const gate = join(dir, 'go');
    const res = await cliAdapter(nodeScript(WAITS_FOR_FILE, gate, 'first', 'second', '0')).chat(
      ask('x', true),
      context(),
    );
    const iterator = sseBody(res)[Symbol.asyncIterator]();
    const first = payloads([String((await iterator.next()).value)])[0];
    expect(first).toMatchObject({ choices: [{ delta: { role: 'assistant', content: 'first' } }] });
    writeFileSync(gate, '');
    const rest: string[] = [];
    for (let r = await iterator.next(); !r.done; r = await iterator.next()) rest.push(String(r.value));
    expect(rest.join('')).toContain('"content":"second"');
    expect(rest.at(-1)).toBe('data: [DONE]\n\n');
  });

  it('writes the rendered prompt to stdin and closes it', async () => {
    const messages = [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hi' },
    ];
    const catStdin = nodeScript('process.stdin.pipe(process.stdout)');
    const body = jsonBody(await cliAdapter(catStdin).chat({ model: 'm', messages }, context()));
    expect(body).toMatchObject({ choices: [{ message: { content: renderPrompt(messages) } }] });
    expect(renderPrompt(messages)).toBe('System: Be brief.\n\nUser: Hi');
  });

  it('passes argv with spaces and shell metacharacters literally, never through a shell', async () => {
    const args = [
      'two words',
      '$(touch pwned)',
      '; echo injected',
      '`id`',
      '*',
      '"quoted"',
      "it's",
      '|',
      '&& ls',
      '>out',
      '$HOME',
    ];
    const command = nodeScript('process.stdout.write(JSON.stringify(process.argv.slice(1)))', ...args);
    const body = jsonBody(await cliAdapter(command).chat(ask('x'), context()));
    const content = (body.choices as Array<{ message: { content: string } }>)[0].message.content;
    expect(JSON.parse(content)).toEqual(args);
  });

  describe('a program that fails before any output', () => {
    const failing = () => ['/usr/bin/env', 'ECHO_LLM_FAIL=1', NODE, ECHO_LLM];
    it.each([false, true])('answers 502 naming the exit code and the end of stderr (stream: %s)', async (stream) => {
      await expect(cliAdapter(failing()).chat(ask('x', stream), context())).rejects.toMatchObject({
        status: 502,
        code: 'upstream_error',
        message: expect.stringMatching(/exited with code 3.*failing on purpose \(ECHO_LLM_FAIL=1\)/s),
      });
    });

    it('quotes only the end of a long stderr', async () => {
      const noisy = nodeScript(
        "process.stderr.write('x'.repeat(100) + '\\n'.repeat(1) + 'noise\\n'.repeat(2000) + 'LAST LINE\\n', () => process.exit(1))",
      );
      const err = await cliAdapter(noisy)
        .chat(ask('x'), context())
        .catch((e: unknown) => e);
      expect(err).toMatchObject({ status: 502, message: expect.stringContaining('exited with code 1') });
      const message = (err as Error).message;
      expect(message).toMatch(/noise\nLAST LINE\.$/);
      expect(message.length).toBeLessThan(2048 + 200);
    });

    it('answers 502 when the program does not exist', async () => {
      await expect(cliAdapter([join(dir, 'no-such-llm')]).chat(ask('x', true), context())).rejects.toMatchObject({
        status: 502,
        code: 'upstream_error',
        message: expect.stringContaining('ENOENT'),
      });
    });

    it('answers 502 on a non-zero exit even after output when not streaming', async () => {
      const gate = join(dir, 'go');
      writeFileSync(gate, '');
      await expect(
        cliAdapter(nodeScript(WAITS_FOR_FILE, gate, 'partial', '', '4')).chat(ask('x'), context()),
      ).rejects.toMatchObject({
        status: 502,
        message: expect.stringContaining('exited with code 4'),
      });
    });
  });

  it('ends the stream with an error, never [DONE], when the program fails after output started', async () => {
    const gate = join(dir, 'go');
    const res = await cliAdapter(nodeScript(WAITS_FOR_FILE, gate, 'partial', ' more', '4')).chat(
      ask('x', true),
      context(),
    );
    const iterator = sseBody(res)[Symbol.asyncIterator]();
    expect(String((await iterator.next()).value)).toContain('"content":"partial"');
    writeFileSync(gate, '');
    const rest: string[] = [];
    let error: unknown;
    try {
      for (let r = await iterator.next(); !r.done; r = await iterator.next()) rest.push(String(r.value));
    } catch (e) {
      error = e;
    }
    expect(error).toMatchObject({ status: 502, message: expect.stringContaining('exited with code 4') });
    expect(rest.join('')).not.toContain('[DONE]');
  });

  describe('timeout_ms', () => {
    it('kills the whole process group and answers 504', async () => {
      const pidFile = join(dir, 'pids');
      const started = Date.now();
      await expect(
        cliAdapter(nodeScript(HANGS_WITH_GRANDCHILD, pidFile), 1000).chat(ask('x'), context()),
      ).rejects.toMatchObject({
        status: 504,
        code: 'upstream_timeout',
      });
      expect(Date.now() - started).toBeGreaterThanOrEqual(990);
      await expectAllGone(await readPids(pidFile));
    });

    it('makes the stream throw a 504 when it passes mid-stream', async () => {
      const pidFile = join(dir, 'pids');
      const res = await cliAdapter(nodeScript(HANGS_WITH_GRANDCHILD, pidFile, 'talk'), 1000).chat(
        ask('x', true),
        context(),
      );
      const { frames, error } = await readAll(sseBody(res));
      expect(frames).toHaveLength(1);
      expect(error).toMatchObject({ status: 504, code: 'upstream_timeout' });
      await expectAllGone(await readPids(pidFile));
    });
  });

  describe('client disconnect', () => {
    it('kills the process group at once when the signal aborts mid-stream', async () => {
      const pidFile = join(dir, 'pids');
      const controller = new AbortController();
      const res = await cliAdapter(nodeScript(HANGS_WITH_GRANDCHILD, pidFile, 'talk')).chat(
        ask('x', true),
        context(controller.signal),
      );
      const iterator = sseBody(res)[Symbol.asyncIterator]();
      expect(String((await iterator.next()).value)).toContain('started');
      const pids = await readPids(pidFile);
      const reason = new Error('client went away');
      controller.abort(reason);
      await expect(iterator.next()).rejects.toBe(reason);
      await expectAllGone(pids);
    });

    it('kills the process group when the signal aborts before any output', async () => {
      const pidFile = join(dir, 'pids');
      const controller = new AbortController();
      const answer = cliAdapter(nodeScript(HANGS_WITH_GRANDCHILD, pidFile)).chat(ask('x'), context(controller.signal));
      const pids = await readPids(pidFile);
      const reason = new Error('client went away');
      controller.abort(reason);
      await expect(answer).rejects.toBe(reason);
      await expectAllGone(pids);
    });

    it('kills the process group when the consumer stops reading the stream', async () => {
      const pidFile = join(dir, 'pids');
      const res = await cliAdapter(nodeScript(HANGS_WITH_GRANDCHILD, pidFile, 'talk')).chat(ask('x', true), context());
      for await (const frame of sseBody(res)) {
        expect(String(frame)).toContain('started');
        break;
      }
      await expectAllGone(await readPids(pidFile));
    });

    it('does not start the program when the signal is already aborted', async () => {
      const marker = join(dir, 'ran');
      const controller = new AbortController();
      controller.abort(new Error('gone'));
      await expect(
        cliAdapter(nodeScript("require('node:fs').writeFileSync(process.argv[1], '')", marker)).chat(
          ask('x'),
          context(controller.signal),
        ),
      ).rejects.toThrow('gone');
      await new Promise((r) => setTimeout(r, 200));
      expect(existsSync(marker)).toBe(false);
    });
  });

  it('close() kills every live program and its group', async () => {
    const pidFile = join(dir, 'pids');
    const adapter = cliAdapter(nodeScript(HANGS_WITH_GRANDCHILD, pidFile));
    const answer = adapter.chat(ask('x'), context());
    const pids = await readPids(pidFile);
    const outcome = expect(answer).rejects.toMatchObject({
      status: 502,
      message: expect.stringContaining('stopped by the gateway'),
    });
    await adapter.close();
    await outcome;
    await expectAllGone(pids);
  });

  describe('responses()', () => {
    it('answers a Response whose output_text the openai client reads', async () => {
      const res = await cliAdapter([NODE, ECHO_LLM]).responses({ model: 'public-echo', input: 'hi there' }, context());
      const client = new OpenAI({
        apiKey: 'test',
        baseURL: 'http://gateway.test/v1',
        maxRetries: 0,
        fetch: async () =>
          new Response(JSON.stringify(jsonBody(res)), { headers: { 'content-type': 'application/json' } }),
      });
      const response = await client.responses.create({ model: 'public-echo', input: 'hi there' });
      expect(response.output_text).toBe('echo: hi there');
      expect(response.model).toBe('public-echo');
    });

    it('streams Responses events, one delta per stdout chunk', async () => {
      const res = await cliAdapter([NODE, ECHO_LLM]).responses(
        { model: 'public-echo', input: 'hi there', stream: true },
        context(),
      );
      const { frames, error } = await readAll(sseBody(res));
      expect(error).toBeUndefined();
      const events = frames.map((f) => /^event: (\S+)/.exec(f)?.[1]);
      expect(events.filter((e) => e === 'response.output_text.delta').length).toBeGreaterThanOrEqual(2);
      expect(events.at(-1)).toBe('response.completed');
      expect(frames.at(-1)).toContain('"text":"echo: hi there"');
    });

    it('answers 502 for a failing program before any Responses event', async () => {
      const failing = ['/usr/bin/env', 'ECHO_LLM_FAIL=1', NODE, ECHO_LLM];
      await expect(
        cliAdapter(failing).responses({ model: 'm', input: 'x', stream: true }, context()),
      ).rejects.toMatchObject({ status: 502 });
    });
  });

  describe('environment (README "Adapters": env over PATH, HOME, LANG, TZ; nothing else inherited)', () => {
    const printEnv = nodeScript('process.stdout.write(JSON.stringify(process.env))');

    it("passes the base and the adapter env only, never the gateway's secrets", async () => {
      process.env.UPSTREAM_SECRET_FOR_TEST = 'sk-upstream-secret';
      process.env.REDIS_URL_FOR_TEST = 'redis://:pw@h:6379';
      try {
        const body = jsonBody(
          await cliAdapter(printEnv, 10_000, { env: { MY_LLM_MODE: 'fast', HOME: '/srv/llm' } }).chat(
            ask('x'),
            context(),
          ),
        );
        const env = JSON.parse((body.choices as Array<{ message: { content: string } }>)[0].message.content) as Record<
          string,
          string
        >;
        const expected = Object.keys(cliEnvironment({ env: { MY_LLM_MODE: 'fast', HOME: '/srv/llm' } }));
        expect(Object.keys(env).sort()).toEqual([...expected, RUN_MARKER].sort());
        expect(env).toMatchObject({ MY_LLM_MODE: 'fast', HOME: '/srv/llm', PATH: process.env.PATH });
        expect(JSON.stringify(env)).not.toMatch(/sk-upstream-secret|redis:\/\//);
      } finally {
        delete process.env.UPSTREAM_SECRET_FOR_TEST;
        delete process.env.REDIS_URL_FOR_TEST;
      }
    });

    it('cliEnvironment takes only PATH, HOME, LANG and TZ from the gateway, when set', () => {
      expect(cliEnvironment({ env: { A: '1' } }, { PATH: '/bin', LANG: 'C.UTF-8', SECRET: 's', LC_ALL: 'C' })).toEqual({
        PATH: '/bin',
        LANG: 'C.UTF-8',
        A: '1',
      });
    });
  });

  describe('output size (README "Adapters": max_output_bytes)', () => {
    /** Writes argv[1] bytes of "x" in 64 KiB pieces, honouring backpressure, then exits 0 (or hangs with argv[2] = "hang"). */
    const WRITES = `
const total = Number(process.argv[1]);
const piece = 'x'.repeat(65536);
let sent = 0;
const more = () => {
  while (sent < total) {
    sent += piece.length;
    if (!process.stdout.write(piece)) return process.stdout.once('drain', more);
  }
  if (process.argv[2] === 'hang') setInterval(() => {}, 1000);
};
more();
`;

    it('answers 502 as soon as a non-streamed answer passes the cap, and kills the program', async () => {
      const pidFile = join(dir, 'pid');
      const writer = nodeScript(
        `require('node:fs').writeFileSync(${JSON.stringify(pidFile)}, String(process.pid));${WRITES}`,
        String(200 * 1024 * 1024),
        'hang',
      );
      const started = Date.now();
      const err = await cliAdapter(writer, 60_000, { max_output_bytes: 1024 * 1024 })
        .chat(ask('x'), context())
        .catch((e: unknown) => e);
      expect(err).toMatchObject({
        status: 502,
        code: 'upstream_error',
        message: expect.stringContaining('max_output_bytes'),
      });
      expect(Date.now() - started).toBeLessThan(5000);
      const pid = Number(readFileSync(pidFile, 'utf8'));
      await waitUntil(() => isGone(pid), 'the program is killed');
    });

    it("honours the dispatcher's cap on non-streamed answers when it is smaller", async () => {
      const ctx = { ...context(), maxResponseBytes: 100_000 };
      await expect(
        cliAdapter(nodeScript(WRITES, String(1024 * 1024)), 10_000).chat(ask('x'), ctx),
      ).rejects.toMatchObject({ status: 502 });
    });

    it('streams far more than the cap, keeping only the length for usage', async () => {
      const total = 64 * 1024 * 1024;
      const res = await cliAdapter(nodeScript(WRITES, String(total)), 60_000, { max_output_bytes: 1024 * 1024 }).chat(
        ask('x', true, { stream_options: { include_usage: true } }),
        context(),
      );
      let content = 0;
      let last = '';
      for await (const frame of sseBody(res)) {
        const text = String(frame);
        const match = /"content":"(x*)"/.exec(text);
        if (match) content += match[1].length;
        last = text;
        if (text.includes('"usage"')) expect(text).toContain(`"completion_tokens":${total / 4}`);
      }
      expect(content).toBe(total);
      expect(last).toBe('data: [DONE]\n\n');
    });
  });

  it("names the adapter's timeout_ms, not gateway.request_timeout_ms, when a run times out mid-stream", async () => {
    const pidFile = join(dir, 'pids');
    const res = await cliAdapter(nodeScript(HANGS_WITH_GRANDCHILD, pidFile, 'talk'), 700).chat(
      ask('x', true),
      context(),
    );
    const { error } = await readAll(sseBody(res));
    expect(error).toMatchObject({
      status: 504,
      code: 'upstream_timeout',
      message: expect.stringMatching(/timeout_ms \(700 ms, adapter "test-cli"\)/),
    });
    expect((error as Error).message).not.toContain('request_timeout_ms');
  });

  describe('a grandchild that left the process group with setsid and holds its output (README "Adapters")', () => {
    /**
     * Starts a grandchild in a session of its own (detached = setsid) that keeps the run's stdout,
     * writes [own pid, grandchild pid] to argv[1], then does argv[2]. Without a sandbox only such a
     * survivor (output still held after the exit) is swept for; in the sandbox none survives at all.
     */
    const ESCAPES = `
const { spawn } = require('node:child_process');
const grandchild = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: ['ignore', 'inherit', 'ignore'], detached: true });
grandchild.unref();
require('node:fs').writeFileSync(process.argv[1], JSON.stringify([process.pid, grandchild.pid]));
if (process.argv[2] === 'exit') process.stdout.write('done', () => process.exit(0));
else { process.stdout.write('started'); setInterval(() => {}, 1000); }
`;
    const sessionOf = (pid: number) => {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[3]);
    };

    it('is killed when the program exits normally', async () => {
      const pidFile = join(dir, 'pids');
      const body = jsonBody(await cliAdapter(nodeScript(ESCAPES, pidFile, 'exit')).chat(ask('x'), context()));
      expect(body).toMatchObject({ choices: [{ message: { content: 'done' } }] });
      const [program, grandchild] = await readPids(pidFile);
      expect(program).not.toBe(grandchild);
      await waitUntil(() => isGone(grandchild), `the setsid grandchild ${grandchild} is killed`, 3000);
    });

    it('is found by one sweep, after the program exited, and the answer does not wait for the sweep', async () => {
      const pidFile = join(dir, 'pids');
      // A sweep that waits 60 s for company: the answer must come long before it.
      const host = { ...cliHost('none'), sweeper: new EscapedProcessSweeper(RUN_MARKER, { batchMs: 60_000 }) };
      const adapter = new CliAdapter(cliConfig(nodeScript(ESCAPES, pidFile, 'exit')), host);
      adapters.push(adapter);
      const body = jsonBody(await adapter.chat(ask('x'), context()));
      expect(body).toMatchObject({ choices: [{ message: { content: 'done' } }] });
      expect(host.sweeper.sweeps).toBe(0);
      const [, grandchild] = await readPids(pidFile);
      expect(isGone(grandchild)).toBe(false);
      await host.sweeper.flush();
      await waitUntil(() => isGone(grandchild), `the setsid grandchild ${grandchild} is killed`, 3000);
      expect(host.sweeper.sweeps).toBe(1);
    });

    it('is killed when the client goes away', async () => {
      const pidFile = join(dir, 'pids');
      const controller = new AbortController();
      const res = await cliAdapter(nodeScript(ESCAPES, pidFile, 'stay')).chat(
        ask('x', true),
        context(controller.signal),
      );
      const iterator = sseBody(res)[Symbol.asyncIterator]();
      await iterator.next();
      const [program, grandchild] = await readPids(pidFile);
      expect(sessionOf(grandchild)).toBe(grandchild); // it really left: a session (and group) of its own
      controller.abort(new Error('client went away'));
      await iterator.next().catch(() => undefined);
      await waitUntil(() => isGone(program) && isGone(grandchild), 'both are killed', 3000);
    });
  });
});
