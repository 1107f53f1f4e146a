import { parseConfigText, type LoadResult } from './load-config';

/** A valid file with one CLI adapter (line 7) used by a provider and a legacy route; `gateway` is inserted at line 2. */
const file = (gateway: string, adapterExtra: string) => `version: 1
${gateway}
nodes:
  - id: n
    adapters:
      - { id: up, type: openai_compat, base_url: "http://127.0.0.1:1/v1" }
      - { id: cli, type: cli, command: ["my-llm"]${adapterExtra} }
    providers:
      - { id: c, category: cli, adapter: cli, models: [c] }
routes:
  - { model: legacy, node: n, adapter: cli }
`;

function problemsOf(result: LoadResult) {
  if (result.ok) throw new Error('expected problems, the config loaded');
  return result.problems;
}

describe('CLI adapter concurrency and the CLI sandbox (README "Configuration", "Security")', () => {
  it('defaults: 4 runs at once, 16 waiting, every program in the bwrap sandbox', () => {
    const result = parseConfigText(file('', ''), {});
    if (!result.ok) throw new Error(JSON.stringify(result.problems));
    expect(result.config.gateway.cli_sandbox).toBe('bwrap');
    expect(result.config.nodes[0].adapters[1]).toMatchObject({ max_concurrency: 4, max_waiting: 16 });
  });

  it('accepts max_concurrency 1, max_waiting 0 and cli_sandbox none', () => {
    const result = parseConfigText(file('gateway: { cli_sandbox: none }', ', max_concurrency: 1, max_waiting: 0'), {});
    if (!result.ok) throw new Error(JSON.stringify(result.problems));
    expect(result.config.gateway.cli_sandbox).toBe('none');
    expect(result.config.nodes[0].adapters[1]).toMatchObject({ max_concurrency: 1, max_waiting: 0 });
  });

  it.each([
    ['0', 'max_concurrency: 0', 'max_concurrency', /set max_concurrency to 1 or more/],
    ['negative', 'max_concurrency: -2', 'max_concurrency', /set max_concurrency to 1 or more/],
    ['fractional', 'max_concurrency: 1.5', 'max_concurrency', /whole number of runs, 1 or more/],
    ['string', 'max_concurrency: "4"', 'max_concurrency', /whole number of runs, 1 or more/],
    ['negative waiting', 'max_waiting: -1', 'max_waiting', /set max_waiting to 0/],
    ['fractional waiting', 'max_waiting: 0.5', 'max_waiting', /whole number of requests/],
  ])('refuses a %s value with its path, line and fix', (_what, setting, key, fix) => {
    const problems = problemsOf(parseConfigText(file('', `, ${setting}`), {}));
    expect(problems).toEqual([
      expect.objectContaining({ path: `nodes[0].adapters[1].${key}`, line: 7, fix: expect.stringMatching(fix) }),
    ]);
  });

  it('refuses an unknown sandbox with its path, line and the choices', () => {
    const problems = problemsOf(parseConfigText(file('gateway: { cli_sandbox: firejail }', ''), {}));
    expect(problems).toEqual([
      expect.objectContaining({ path: 'gateway.cli_sandbox', line: 2, fix: expect.stringMatching(/bwrap.*none/) }),
    ]);
  });
});

describe('a CLI bound belongs to the adapter, not the provider', () => {
  it('refuses max_concurrency on a cli provider, with a fix that points at the adapter', () => {
    const yaml = file('', '').replace('models: [c] }', 'models: [c], max_concurrency: 2 }');
    expect(problemsOf(parseConfigText(yaml, {}))).toEqual([
      expect.objectContaining({
        path: 'nodes[0].providers[0].max_concurrency',
        line: 9,
        fix: expect.stringContaining('set max_concurrency and max_waiting on the cli adapter'),
      }),
    ]);
  });
});
