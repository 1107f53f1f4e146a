import { parseConfigText, type LoadResult } from './load-config';
import { DEFAULT_UPSTREAM_CLOSE_WAIT_MS, DEFAULT_UPSTREAM_KEEP_ALIVE_MS } from './schema';

/** A valid file with one adapter of each HTTP type; `extra` goes into the vLLM adapter (line 6). */
const file = (extra: string) => `version: 1
nodes:
  - id: n
    adapters:
      - { id: o, type: ollama, base_url: "http://127.0.0.1:11434" }
      - { id: v, type: vllm, base_url: "http://127.0.0.1:8000"${extra} }
      - { id: c, type: openai_compat, base_url: "http://127.0.0.1:9000/v1" }
`;

function problemsOf(result: LoadResult) {
  if (result.ok) throw new Error('expected problems, the config loaded');
  return result.problems;
}

describe('keep_alive_timeout_ms of an HTTP adapter (README "Connections to an upstream")', () => {
  it('defaults to 3 s on every HTTP adapter type, below the 5 s idle timeout of uvicorn (vLLM) and Node servers', () => {
    const result = parseConfigText(file(''), {});
    if (!result.ok) throw new Error(JSON.stringify(result.problems));
    expect(DEFAULT_UPSTREAM_KEEP_ALIVE_MS).toBeLessThan(5000);
    expect(result.config.nodes[0].adapters.map((a) => 'keep_alive_timeout_ms' in a && a.keep_alive_timeout_ms)).toEqual(
      [3000, 3000, 3000],
    );
  });

  it('takes a value of the file', () => {
    const result = parseConfigText(file(', keep_alive_timeout_ms: 1500'), {});
    if (!result.ok) throw new Error(JSON.stringify(result.problems));
    expect(result.config.nodes[0].adapters[1]).toMatchObject({ keep_alive_timeout_ms: 1500 });
  });

  it.each([
    ['0', 'keep_alive_timeout_ms: 0'],
    ['negative', 'keep_alive_timeout_ms: -5'],
    ['fractional', 'keep_alive_timeout_ms: 2.5'],
    ['over 10 minutes', 'keep_alive_timeout_ms: 600001'],
    ['a string', 'keep_alive_timeout_ms: "3s"'],
  ])('refuses %s with its path, line and a fix', (_what, setting) => {
    expect(problemsOf(parseConfigText(file(`, ${setting}`), {}))).toEqual([
      expect.objectContaining({
        path: 'nodes[0].adapters[1].keep_alive_timeout_ms',
        line: 6,
        fix: expect.stringMatching(/whole number of milliseconds from 1 to 600000, below the upstream server/),
      }),
    ]);
  });

  it('is not a setting of a CLI adapter', () => {
    const yaml = `version: 1
nodes:
  - id: n
    adapters:
      - { id: cli, type: cli, command: ["x"], keep_alive_timeout_ms: 1000 }
`;
    expect(problemsOf(parseConfigText(yaml, {}))).toEqual([
      expect.objectContaining({ path: 'nodes[0].adapters[0].keep_alive_timeout_ms', line: 5 }),
    ]);
  });
});

describe('close_wait_ms of an HTTP adapter (README "Connections to an upstream")', () => {
  it('defaults to 2 s on every HTTP adapter type and takes a value of the file', () => {
    const result = parseConfigText(file(', close_wait_ms: 500'), {});
    if (!result.ok) throw new Error(JSON.stringify(result.problems));
    expect(result.config.nodes[0].adapters.map((a) => 'close_wait_ms' in a && a.close_wait_ms)).toEqual([
      DEFAULT_UPSTREAM_CLOSE_WAIT_MS,
      500,
      DEFAULT_UPSTREAM_CLOSE_WAIT_MS,
    ]);
    expect(DEFAULT_UPSTREAM_CLOSE_WAIT_MS).toBe(2000);
  });

  it.each([
    ['0', 'close_wait_ms: 0'],
    ['fractional', 'close_wait_ms: 2.5'],
    ['over a minute', 'close_wait_ms: 60001'],
    ['a string', 'close_wait_ms: "2s"'],
  ])('refuses %s with its path, line and a fix', (_what, setting) => {
    expect(problemsOf(parseConfigText(file(`, ${setting}`), {}))).toEqual([
      expect.objectContaining({
        path: 'nodes[0].adapters[1].close_wait_ms',
        line: 6,
        fix: expect.stringMatching(/whole number of milliseconds from 1 to 60000, e\.g\. close_wait_ms: 2000/),
      }),
    ]);
  });
});
