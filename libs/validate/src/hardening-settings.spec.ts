import { parseConfigText, type LoadResult } from './load-config';

/** A minimal valid file with `extra` YAML inserted under the top level (it must hold whole sections). */
const file = (sections: string) => `
version: 1
${sections}
nodes:
  - id: n
    adapters:
      - { id: up, type: openai_compat, base_url: "http://127.0.0.1:1/v1" }
      - { id: cli, type: cli, command: ["my-llm"] }
    providers:
      - { id: p, category: openai_compat, adapter: up, models: [m], max_concurrency: 1 }
      - { id: c, category: cli, adapter: cli, models: [c] }
`;

function problemsOf(result: LoadResult) {
  if (result.ok) throw new Error('expected problems, the config loaded');
  return result.problems;
}

describe('API keys that could never match are refused, with the reason (README "Security")', () => {
  it.each([
    ['a non-ASCII character', 'clé-secrète-1'],
    ['a leading space', ' sk-key-0001'],
    ['a trailing space', 'sk-key-0001 '],
    ['an inner space', 'sk key 0001'],
    ['a tab', 'sk-key\t0001'],
    ['an emoji', 'sk-🔑-0001'],
  ])('gateway.api_keys and status.api_keys with %s', (_what, key) => {
    const yaml = file(
      `gateway: { api_keys: [${JSON.stringify(key)}] }\nstatus: { api_keys: [${JSON.stringify(key)}] }`,
    );
    const problems = problemsOf(parseConfigText(yaml, {}));
    expect(problems.map((p) => p.path)).toEqual(['gateway.api_keys[0]', 'status.api_keys[0]']);
    for (const p of problems) {
      expect(`${p.message}: ${p.fix}`).toMatch(/printable ASCII without spaces.*could never match/);
      expect(p.line).toBeGreaterThan(0);
      // The key itself is never printed.
      expect(`${p.message} ${p.fix}`).not.toContain(key.trim());
    }
  });

  it('a key from the environment is checked the same way and never printed', () => {
    const problems = problemsOf(
      parseConfigText(file('gateway: { api_keys: ["${CLIENT_KEY}"] }'), { CLIENT_KEY: 'sk-ünïcode-key' }),
    );
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatchObject({ path: 'gateway.api_keys[0]', fix: expect.stringContaining('printable ASCII') });
    expect(JSON.stringify(problems)).not.toContain('ünïcode');
  });

  it('accepts printable ASCII keys, symbols included', () => {
    const result = parseConfigText(file('gateway: { api_keys: ["sk-A1_b2.c3~!#$%&*+/=?^|"] }'), {});
    expect(result.ok).toBe(true);
  });
});

describe('the hardening settings and their defaults', () => {
  it('defaults', () => {
    const result = parseConfigText(file(''), {});
    if (!result.ok) throw new Error(JSON.stringify(result.problems));
    expect(result.config.gateway).toMatchObject({
      max_connections: 4096,
      header_timeout_ms: 10_000,
      body_timeout_ms: 30_000,
      cors: { allowed_origins: [] },
      topology_headers: true,
    });
    expect(result.config.status.api_keys).toEqual([]);
    expect(result.config.nodes[0].adapters[1]).toMatchObject({
      env: {},
      max_output_bytes: 16 * 1024 * 1024,
      prompt_format: 'text',
    });
  });

  it('interpolates ${VAR} in a CLI adapter env value', () => {
    const yaml = file('').replace(
      'command: ["my-llm"]',
      'command: ["my-llm"], env: { MY_LLM_KEY: "${LLM_KEY}", MODE: fast }',
    );
    const result = parseConfigText(yaml, { LLM_KEY: 'sk-llm' });
    if (!result.ok) throw new Error(JSON.stringify(result.problems));
    expect(result.config.nodes[0].adapters[1]).toMatchObject({ env: { MY_LLM_KEY: 'sk-llm', MODE: 'fast' } });
  });

  it.each([
    [
      'an env name that is not a variable name',
      'command: ["my-llm"], env: { "BAD-NAME": x }',
      /nodes\[0\]\.adapters\[1\]\.env/,
    ],
    ['an unknown prompt format', 'command: ["my-llm"], prompt_format: xml', /nodes\[0\]\.adapters\[1\]\.prompt_format/],
    ['a zero output cap', 'command: ["my-llm"], max_output_bytes: 0', /nodes\[0\]\.adapters\[1\]\.max_output_bytes/],
  ])('refuses %s with its path', (_what, edit, path) => {
    const problems = problemsOf(parseConfigText(file('').replace('command: ["my-llm"]', edit), {}));
    expect(problems.map((p) => p.path).join(' ')).toMatch(path);
  });

  it.each([
    ['a path', 'https://chat.example.com/'],
    ['no scheme', 'chat.example.com'],
    ['a wildcard', '*'],
  ])('refuses a CORS origin with %s', (_what, origin) => {
    const problems = problemsOf(
      parseConfigText(file(`gateway: { cors: { allowed_origins: [${JSON.stringify(origin)}] } }`), {}),
    );
    expect(problems).toEqual([
      expect.objectContaining({
        path: 'gateway.cors.allowed_origins[0]',
        fix: expect.stringContaining('scheme://host[:port]'),
      }),
    ]);
  });

  it('accepts origins with ports and IPv6 hosts', () => {
    const result = parseConfigText(
      file(
        'gateway: { cors: { allowed_origins: ["https://chat.example.com", "http://localhost:3000", "http://[::1]:8080"] } }',
      ),
      {},
    );
    expect(result.ok).toBe(true);
  });
});

describe('max_connections_per_address is not above max_connections (README "Security")', () => {
  it.each([
    [
      'above the default max_connections',
      'gateway:\n  max_connections_per_address: 5000',
      'max_connections_per_address 5000 is above max_connections 4096: one address never holds more connections than the process, so it never limits anything',
      'lower max_connections_per_address to 4096 or less, or remove it for half of max_connections.',
    ],
    [
      'above a max_connections of 1',
      'gateway:\n  max_connections: 1\n  max_connections_per_address: 2',
      'max_connections_per_address 2 is above max_connections 1: one address never holds more connections than the process, so it never limits anything',
      'set max_connections_per_address to 1, or remove it for half of max_connections.',
    ],
  ])('refuses a share %s, with its line:col and a fix', (_what, gateway, message, fix) => {
    const line = 2 + gateway.split('\n').length;
    expect(problemsOf(parseConfigText(file(gateway), {}))).toEqual([
      { path: 'gateway.max_connections_per_address', line, column: 32, message, fix },
    ]);
  });

  it('accepts a share equal to max_connections (behind a load balancer) or below it', () => {
    for (const gateway of [
      'gateway: { max_connections: 100, max_connections_per_address: 100 }',
      'gateway: { max_connections: 100, max_connections_per_address: 10 }',
    ])
      expect(parseConfigText(file(gateway), {}).ok).toBe(true);
  });
});

describe('YAML aliases (found by the config fuzz)', () => {
  it('a cycle is a problem at the alias, not a stack overflow', () => {
    expect(problemsOf(parseConfigText('version: 1\nnodes: &n\n  - id: x\n    adapters: *n\n', {}))).toEqual([
      expect.objectContaining({ path: 'nodes[0].adapters', line: 4, message: expect.stringContaining('cycle') }),
    ]);
    expect(problemsOf(parseConfigText('&a [*a]', {}))[0].message).toContain('cycle');
  });

  it('an alias bomb is refused, not expanded', () => {
    const levels = [
      'a: &a [x,x,x,x,x,x,x,x,x,x]',
      ...'bcde'.split('').map((name, i) => `${name}: &${name} [${Array(10).fill(`*${'abcd'[i]}`).join(',')}]`),
    ];
    expect(problemsOf(parseConfigText(`${levels.join('\n')}\n`, {}))[0].message).toMatch(/alias count/);
  });

  it('an unknown key that is not a plain name is named quoted', () => {
    expect(problemsOf(parseConfigText(file('"": 1\n"a b": 2'), {})).map((p) => p.path)).toEqual(['[""]', '["a b"]']);
  });
});
