import { parseConfigText, type LoadResult } from './load-config';
import { usablePoolProvider } from './pool-provider';

/** A valid file with one vLLM provider (line 7) whose extra settings are `extra`, and a cli provider (line 8). */
const file = (extra: string, cliExtra = '') => `version: 1
nodes:
  - id: n
    adapters:
      - { id: v, type: vllm, base_url: "http://127.0.0.1:1" }
      - { id: cli, type: cli, command: ["my-llm"] }
    providers:
      - { id: p, category: vllm, adapter: v, models: [llama], max_concurrency: 4${extra} }
      - { id: c, category: cli, adapter: cli, models: [c]${cliExtra} }
`;

function problemsOf(result: LoadResult) {
  if (result.ok) throw new Error('expected problems, the config loaded');
  return result.problems;
}

describe('max_tokens_in_flight and default_completion_tokens (README "Token-aware provider limits")', () => {
  it('gives the queue the token limit and the default completion allowance (1024 unless set)', () => {
    for (const [extra, expected] of [
      [', max_tokens_in_flight: 8000', { maxTokensInFlight: 8000, defaultCompletionTokens: 1024 }],
      [
        ', max_tokens_in_flight: 8000, default_completion_tokens: 256',
        { maxTokensInFlight: 8000, defaultCompletionTokens: 256 },
      ],
    ] as const) {
      const result = parseConfigText(file(extra), {});
      if (!result.ok) throw new Error(JSON.stringify(result.problems));
      const node = result.config.nodes[0];
      expect(usablePoolProvider(node, node.providers[0])).toMatchObject(expected);
    }
  });

  it('leaves a provider without max_tokens_in_flight without a token limit', () => {
    const result = parseConfigText(file(''), {});
    if (!result.ok) throw new Error(JSON.stringify(result.problems));
    const node = result.config.nodes[0];
    const use = usablePoolProvider(node, node.providers[0]);
    expect(use).not.toHaveProperty('maxTokensInFlight');
    expect(use).not.toHaveProperty('defaultCompletionTokens');
  });

  it.each([
    ['0', 'max_tokens_in_flight: 0', 'max_tokens_in_flight', /set max_tokens_in_flight to 1 or more/],
    ['fractional', 'max_tokens_in_flight: 10.5', 'max_tokens_in_flight', /whole number of tokens, 1 or more/],
    ['string', 'max_tokens_in_flight: "8k"', 'max_tokens_in_flight', /whole number of tokens, 1 or more/],
    [
      'negative default',
      'max_tokens_in_flight: 10, default_completion_tokens: -1',
      'default_completion_tokens',
      /set default_completion_tokens to 0 or more/,
    ],
    [
      'default without a limit',
      'default_completion_tokens: 512',
      'default_completion_tokens',
      /add max_tokens_in_flight: N .* or remove default_completion_tokens/,
    ],
  ])('refuses a %s with its path, line and fix', (_what, setting, key, fix) => {
    const problems = problemsOf(parseConfigText(file(`, ${setting}`), {}));
    expect(problems).toEqual([
      expect.objectContaining({ path: `nodes[0].providers[0].${key}`, line: 8, fix: expect.stringMatching(fix) }),
    ]);
  });

  it('refuses a token limit on a cli provider, which is a direct route', () => {
    const problems = problemsOf(parseConfigText(file('', ', max_tokens_in_flight: 100'), {}));
    expect(problems).toEqual([
      expect.objectContaining({
        path: 'nodes[0].providers[1].max_tokens_in_flight',
        line: 9,
        fix: expect.stringContaining('remove max_tokens_in_flight'),
      }),
    ]);
  });
});
