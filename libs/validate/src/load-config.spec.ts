import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, formatProblems } from './config-problem';
import { loadConfigFile, parseConfigText, type LoadResult } from './load-config';

const example = readFileSync(join(__dirname, 'testing/design-example.yaml'), 'utf8');
const env = { EDGE_API_KEY: 'client-key-0001', VLLM_KEY: 'sk-vllm-secret-42' };

/** The design example with `from` (which must occur) replaced by `to`. */
function edit(from: string, to: string, text = example): string {
  expect(text).toContain(from);
  return text.replace(from, () => to);
}

function problemsOf(result: LoadResult) {
  if (result.ok) throw new Error('expected problems, the config loaded');
  return result.problems;
}

describe('parseConfigText', () => {
  it('accepts the full example (testing/design-example.yaml) with its variables set, applying defaults', () => {
    const result = parseConfigText(example, env);
    if (!result.ok) throw new Error(formatProblems('design-example.yaml', result.problems));
    expect(result.hash).toBe(createHash('sha256').update(example).digest('hex'));
    expect(result.config.gateway.api_keys).toEqual(['client-key-0001']);
    expect(result.config.nodes[0].adapters[0]).toMatchObject({
      id: 'vllm-0',
      api_key: 'sk-vllm-secret-42',
      enabled: true,
    });
    expect(result.config.nodes[1].providers).toEqual([]);
    expect(result.config.routes[0]).toEqual({
      model: 'codex',
      node: 'laptop',
      adapter: 'codex-cli',
      upstream: 'gpt-5-codex',
    });
  });

  it('reports an unset ${VAR} naming the variable and the place it is used', () => {
    expect(problemsOf(parseConfigText(example, { EDGE_API_KEY: 'k' }))).toEqual([
      {
        path: 'nodes[0].adapters[0].api_key',
        line: 28,
        column: 18,
        message: 'environment variable VLLM_KEY is not set',
        fix: expect.stringContaining('set VLLM_KEY'),
      },
    ]);
  });

  it('reports every unset variable, including one inside a flow sequence', () => {
    expect(problemsOf(parseConfigText(example, {})).map((p) => [p.path, p.line, p.column, p.message])).toEqual([
      ['gateway.api_keys[0]', 4, 14, 'environment variable EDGE_API_KEY is not set'],
      ['nodes[0].adapters[0].api_key', 28, 18, 'environment variable VLLM_KEY is not set'],
    ]);
  });

  it('keeps $${VAR} as a literal ${VAR} without reading the environment', () => {
    const result = parseConfigText(edit('"--quiet"]', '"--quiet", "$${HOME}"]'), env);
    expect(result.ok && result.config.nodes[0].adapters[1]).toMatchObject({
      command: ['/usr/local/bin/my-llm', '--quiet', '${HOME}'],
    });
  });

  it('rejects an unknown key (a typo) with its path, line, column and the allowed keys', () => {
    const [problem, ...rest] = problemsOf(parseConfigText(edit('max_concurrency: 4', 'max_concurency: 4'), env));
    expect(rest).toEqual([]);
    expect(problem).toMatchObject({
      path: 'nodes[0].providers[0].max_concurency',
      line: 39,
      column: 9,
      message: 'unknown key "max_concurency"',
    });
    expect(problem.fix).toBe(
      'did you mean "max_concurrency"? Allowed keys here: id, category, adapter, models, max_concurrency, max_queued, max_tokens_in_flight, default_completion_tokens, enabled.',
    );
  });

  it('lists the keys of the matching adapter type for an unknown key on an adapter', () => {
    const [problem] = problemsOf(
      parseConfigText(edit('timeout_ms: 120000\n    providers', 'timeout: 120000\n    providers'), env),
    );
    expect(problem).toMatchObject({ path: 'nodes[0].adapters[1].timeout', line: 33, column: 9 });
    expect(problem.fix).toBe(
      'did you mean "timeout_ms"? Allowed keys here: id, type, command, timeout_ms, enabled, env, max_output_bytes, prompt_format, max_concurrency, max_waiting.',
    );
  });

  it('reports a YAML syntax error with its line', () => {
    const problems = problemsOf(parseConfigText('version: 1\nnodes:\n  - id: a\n    adapters: [\n  - id: b\n', env));
    expect(problems.length).toBeGreaterThan(0);
    expect(problems[0]).toMatchObject({ path: '', line: 5, message: expect.stringMatching(/^YAML syntax error: /) });
  });

  it('reports a duplicate key as a YAML error at the second occurrence', () => {
    expect(
      problemsOf(parseConfigText(edit('  prefix: iop-edge\n', '  prefix: iop-edge\n  prefix: other\n'), env)),
    ).toEqual([
      expect.objectContaining({
        path: 'queue.prefix',
        line: 11,
        column: 3,
        fix: 'keep one of the two keys; a key may appear once per map.',
      }),
    ]);
  });

  it('rejects an empty file', () => {
    expect(problemsOf(parseConfigText('# nothing\n', env, 'my.yaml'))).toEqual([
      expect.objectContaining({ path: '', line: 1, column: 1, message: 'my.yaml is empty' }),
    ]);
  });

  it('returns every problem of a file, sorted by position, not just the first', () => {
    let text = edit('max_concurrency: 4', 'max_concurency: 4');
    text = edit('  interval_ms: 5000\n  timeout_ms', '  interval_ms: fast\n  timeout_ms', text);
    text = edit('type: vllm ', 'type: vlm  ', text);
    expect(
      problemsOf(parseConfigText(text, { VLLM_KEY: 'x' })).map((p) => [p.path, p.line, p.column, p.message]),
    ).toEqual([
      ['gateway.api_keys[0]', 4, 14, 'environment variable EDGE_API_KEY is not set'],
      ['health.interval_ms', 14, 16, 'expected a number, got a string'],
      ['nodes[0].adapters[0].type', 26, 15, 'is not one of the allowed values'],
      ['nodes[0].providers[0].max_concurency', 39, 9, 'unknown key "max_concurency"'],
    ]);
  });

  it('reports a missing required key at the map that should hold it', () => {
    expect(problemsOf(parseConfigText(edit('        base_url: http://10.0.0.5:8000/v1\n', ''), env))).toEqual([
      {
        path: 'nodes[0].adapters[0].base_url',
        line: 25,
        column: 9,
        message: 'required key "base_url" is missing',
        fix: 'add base_url (write a full http:// or https:// URL).',
      },
    ]);
  });

  it('uses the schema hint as the fix for a wrong adapter type', () => {
    const [problem] = problemsOf(parseConfigText(edit('type: vllm ', 'type: vlm  '), env));
    expect(problem.fix).toBe('type must be one of cli, ollama, vllm, openai_compat.');
  });

  it('reports the missing part of a {name, upstream} model entry', () => {
    expect(problemsOf(parseConfigText(edit('models: [llama-3.1-8b]', 'models: [{name: llama}]'), env))).toEqual([
      expect.objectContaining({
        path: 'nodes[0].providers[0].models[0].upstream',
        line: 38,
        column: 18,
        message: 'required key "upstream" is missing',
      }),
    ]);
  });

  it('positions a semantic problem at the offending value', () => {
    const problems = problemsOf(parseConfigText(edit('adapter: vllm-0 ', 'adapter: vllm-9 '), env));
    expect(formatProblems('edge.yaml', problems)).toBe(
      'edge.yaml:37:18 nodes[0].providers[0].adapter: adapter "vllm-9" is not defined on node "gpu-a". Fix: use one of: vllm-0, echo.',
    );
  });

  it('positions a semantic problem about a missing key at its parent map', () => {
    expect(problemsOf(parseConfigText(edit('        max_concurrency: 4 ', '        # no limit '), env))).toEqual([
      expect.objectContaining({ path: 'nodes[0].providers[0].max_concurrency', line: 35, column: 9 }),
    ]);
  });

  it('never puts an interpolated secret into problem text', () => {
    const secretEnv = {
      EDGE_API_KEY: 'client-secret-abc',
      VLLM_KEY: 'sk-vllm-secret-42',
      ADAPTER: 'sk-leaky-adapter-ref',
    };
    let text = edit('adapter: vllm-0 ', 'adapter: ${ADAPTER} ');
    text = edit('base_url: http://10.0.0.5:8000/v1', 'base_url: ${VLLM_KEY}', text);
    const problems = problemsOf(parseConfigText(text, secretEnv));
    expect(problems.map((p) => p.path)).toEqual(['nodes[0].adapters[0].base_url']);
    const printed = formatProblems('edge.yaml', problems) + JSON.stringify(problems);
    for (const secret of Object.values(secretEnv)) expect(printed).not.toContain(secret);

    const semantic = problemsOf(parseConfigText(edit('adapter: vllm-0 ', 'adapter: ${ADAPTER} '), secretEnv));
    expect(semantic).toEqual([
      expect.objectContaining({
        path: 'nodes[0].providers[0].adapter',
        message: 'adapter "***" is not defined on node "gpu-a"',
      }),
    ]);
  });
});

describe('loadConfigFile', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'validate-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('loads a file and hashes its text', () => {
    const file = join(dir, 'edge.yaml');
    writeFileSync(file, example);
    const result = loadConfigFile(file, env);
    expect(result.ok && result.hash).toBe(createHash('sha256').update(example).digest('hex'));
  });

  it('reports an unreadable file as one problem with an empty path', () => {
    expect(problemsOf(loadConfigFile(join(dir, 'missing.yaml'), env))).toEqual([
      {
        path: '',
        line: 1,
        column: 1,
        message: expect.stringContaining('(ENOENT)'),
        fix: 'check the path and that the file exists and is readable.',
      },
    ]);
  });
});

describe('ConfigError', () => {
  it('carries the file and problems and prints every problem in its message', () => {
    const problems = problemsOf(parseConfigText(example, {}));
    const error = new ConfigError('edge.yaml', problems);
    expect(error).toMatchObject({ name: 'ConfigError', file: 'edge.yaml', problems });
    expect(error.message).toContain('(2 problems)');
    expect(error.message).toContain(
      'edge.yaml:4:14 gateway.api_keys[0]: environment variable EDGE_API_KEY is not set. Fix: ',
    );
    expect(error.message).toContain('edge.yaml:28:18 nodes[0].adapters[0].api_key: ');
  });
});

describe('schema problem wording', () => {
  it.each([
    [
      'a positive number set to 0',
      ['  interval_ms: 5000\n  timeout_ms', '  interval_ms: 0\n  timeout_ms'],
      'health.interval_ms',
      'must be greater than 0',
    ],
    ['an empty model list', ['models: [echo]', 'models: []'], 'nodes[0].providers[1].models', 'needs at least 1 item'],
    ['a wrong version', ['version: 1', 'version: 2'], 'version', 'must be 1'],
    [
      'an unknown key with no close spelling',
      ['    upstream: gpt-5-codex', '    upstream: gpt-5-codex\n    colour: red'],
      'routes[0].colour',
      'unknown key "colour"',
    ],
  ])('explains %s', (_case, [from, to], path, message) => {
    expect(problemsOf(parseConfigText(edit(from, to), env))).toEqual([expect.objectContaining({ path, message })]);
  });
});

describe('generated fixes read sensibly at the edge of a range', () => {
  it.each([
    [
      'a count that may be 0, set below it',
      ['  max_queued: 100 ', '  max_queued: -1 '],
      'queue.max_queued',
      'must be at least 0',
      'use 0 or more.',
    ],
    [
      'a positive number set to 0',
      ['  interval_ms: 5000\n  timeout_ms', '  interval_ms: 0\n  timeout_ms'],
      'health.interval_ms',
      'must be greater than 0',
      'use a number greater than 0.',
    ],
    [
      'a CLI adapter that may not wait, set below 0',
      ['timeout_ms: 120000\n    providers', 'timeout_ms: 120000\n        max_waiting: -1\n    providers'],
      'nodes[0].adapters[1].max_waiting',
      'must be at least 0',
      'set max_waiting to 0 or more (0: no waiting, 429 at once).',
    ],
  ])('%s', (_case, [from, to], path, message, fix) => {
    expect(problemsOf(parseConfigText(edit(from, to), env))).toEqual([expect.objectContaining({ path, message, fix })]);
  });
});

describe('listen addresses and Redis URLs', () => {
  it('rejects a listen port above 65535 with its line', () => {
    const result = parseConfigText('version: 1\ngateway:\n  listen: 127.0.0.1:99999\nnodes:\n  - id: n\n', {});
    expect(result.ok).toBe(false);
    if (!result.ok)
      expect(result.problems).toEqual([
        expect.objectContaining({ path: 'gateway.listen', line: 3, fix: expect.stringContaining('65535') }),
      ]);
  });
});
