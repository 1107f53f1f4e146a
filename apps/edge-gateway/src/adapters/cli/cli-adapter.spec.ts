import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI from 'openai';
import { context, jsonBody, nodeScript } from '../../testing/cli-runs';
import {
  NODE,
  ECHO_LLM,
  HANGS_WITH_GRANDCHILD,
  WAITS_FOR_FILE,
  dir,
  useCliAdapterRuns,
  cliAdapter,
  ask,
  sseBody,
  readAll,
  payloads,
  readPids,
  expectAllGone,
} from '../../testing/cli-adapter-runs';
import { renderPrompt } from './prompt-rendering';

useCliAdapterRuns();

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
});
