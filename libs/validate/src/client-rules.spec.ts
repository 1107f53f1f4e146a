import { parseConfigText } from './load-config';

/** A file with one pool (two providers of 4 and 2 slots, max_queued 10 each) and the given gateway section. */
const file = (gateway: string) => `version: 1
gateway:
${gateway}
queue:
  max_queued: 10
nodes:
  - id: gpu
    adapters:
      - { id: v, type: vllm, base_url: "http://10.0.0.5:8000/v1" }
    providers:
      - { id: a, category: vllm, adapter: v, models: [llama], max_concurrency: 4 }
      - { id: b, category: vllm, adapter: v, models: [llama], max_concurrency: 2 }
`;

const problems = (gateway: string, env: Record<string, string> = {}) => {
  const result = parseConfigText(file(gateway), env);
  return result.ok
    ? []
    : result.problems.map(({ path, line, column, message, fix }) => ({ path, line, column, message, fix }));
};

describe('gateway.clients', () => {
  it('accepts clients with keys, bands, weights and caps next to flat api_keys, defaults filled in', () => {
    const result = parseConfigText(
      file(`  api_keys: ["\${LEGACY}"]
  clients:
    - { id: chat, keys: ["\${CHAT_KEY}"], priority: 10, weight: 3, max_in_flight: 6, max_queued: 20 }
    - { id: batch, keys: [k-batch-1, k-batch-2], priority: -1 }`),
      { LEGACY: 'k-legacy', CHAT_KEY: 'k-chat' },
    );
    expect(result.ok && result.config.gateway.clients).toEqual([
      { id: 'chat', keys: ['k-chat'], priority: 10, weight: 3, max_in_flight: 6, max_queued: 20 },
      { id: 'batch', keys: ['k-batch-1', 'k-batch-2'], priority: -1, weight: 1 },
    ]);
  });

  it('reports a duplicate client id with its line, column and a fix', () => {
    expect(
      problems(`  clients:
    - { id: chat, keys: [k1] }
    - { id: chat, keys: [k2] }`),
    ).toEqual([
      {
        path: 'gateway.clients[1].id',
        line: 5,
        column: 13,
        message: 'client id "chat" is already used by gateway.clients[0]',
        fix: 'give every client a unique id; to give one client several keys, list them under its keys.',
      },
    ]);
  });

  it('reports a key shared by two clients, or by a client and api_keys, without ever printing it', () => {
    const found = problems(
      `  api_keys: ["\${SAME}"]
  clients:
    - { id: chat, keys: ["\${SAME}"] }
    - { id: batch, keys: [other, "\${SAME}"] }`,
      { SAME: 'secret-key-123' },
    );
    expect(found.map((p) => [p.path, p.line, p.message])).toEqual([
      [
        'gateway.api_keys[0]',
        3,
        'this key is the same as gateway.clients[0].keys[0]: a key must identify exactly one client',
      ],
      [
        'gateway.clients[1].keys[1]',
        6,
        'this key is the same as gateway.clients[0].keys[0]: a key must identify exactly one client',
      ],
    ]);
    expect(JSON.stringify(found)).not.toContain('secret-key-123');
  });

  it.each([
    ['weight: 0', 'weight', 'must be at least 1', 'write weight as a whole number from 1 to 100.'],
    [
      'weight: 1.5',
      'weight',
      'expected an integer, got a fractional number',
      'write weight as a whole number from 1 to 100.',
    ],
    ['priority: 5000', 'priority', 'must be at most 1000', 'write priority as a whole number from -1000 to 1000.'],
    [
      'max_in_flight: 0',
      'max_in_flight',
      'must be at least 1',
      'set max_in_flight to 1 or more, or remove it for no cap.',
    ],
    [
      'max_queued: -1',
      'max_queued',
      'must be at least 0',
      'set max_queued to 0 or more, or remove it for the default (half of gateway.max_connections).',
    ],
    [
      'tokens_per_minute: 0',
      'tokens_per_minute',
      'must be at least 1',
      'write tokens_per_minute as a whole number of tokens, 1 or more (e.g. tokens_per_minute: 100000), or remove it for no budget.',
    ],
    [
      'tokens_per_day: 2.5',
      'tokens_per_day',
      'expected an integer, got a fractional number',
      'write tokens_per_day as a whole number of tokens, 1 or more (e.g. tokens_per_day: 100000), or remove it for no budget.',
    ],
    [
      'tokens_per_minute: .inf',
      'tokens_per_minute',
      'expected a number, got infinity (.inf)',
      'write tokens_per_minute as a whole number of tokens, 1 or more (e.g. tokens_per_minute: 100000), or remove it for no budget.',
    ],
    [
      'tokens_per_day: .nan',
      'tokens_per_day',
      'expected a number, got not a number (.nan)',
      'write tokens_per_day as a whole number of tokens, 1 or more (e.g. tokens_per_day: 100000), or remove it for no budget.',
    ],
    [
      'max_in_flight: -.inf',
      'max_in_flight',
      'expected a number, got minus infinity (-.inf)',
      'set max_in_flight to 1 or more, or remove it for no cap.',
    ],
    [
      'tokens_per_minute: "lots"',
      'tokens_per_minute',
      'expected a number, got a string',
      'write tokens_per_minute as a whole number of tokens, 1 or more (e.g. tokens_per_minute: 100000), or remove it for no budget.',
    ],
  ])('refuses %s with the range in the fix', (setting, key, message, fix) => {
    expect(problems(`  clients:\n    - { id: chat, keys: [k1], ${setting} }`)).toEqual([
      expect.objectContaining({ path: `gateway.clients[0].${key}`, line: 4, message, fix }),
    ]);
  });

  it('accepts token budgets per minute and per day on a client, on the memory backend too', () => {
    const result = parseConfigText(
      file(`  clients:
    - { id: chat, keys: [k1], tokens_per_minute: 10000, tokens_per_day: 1000000 }
    - { id: batch, keys: [k2], tokens_per_day: 5000 }`),
      {},
    );
    expect(result.ok && result.config.gateway.clients.map((c) => [c.tokens_per_minute, c.tokens_per_day])).toEqual([
      [10000, 1000000],
      [undefined, 5000],
    ]);
  });

  it('refuses a client without keys', () => {
    expect(problems(`  clients:\n    - { id: chat, keys: [] }`)).toEqual([
      expect.objectContaining({ path: 'gateway.clients[0].keys', line: 4, message: 'needs at least 1 item' }),
    ]);
  });

  it('refuses caps above the total of every pool, naming the largest pool and its total', () => {
    expect(
      problems(`  clients:
    - { id: chat, keys: [k1], max_in_flight: 6, max_queued: 20 }
    - { id: batch, keys: [k2], max_in_flight: 7 }
    - { id: bulk, keys: [k3], max_queued: 21 }`).map((p) => [p.path, p.message, p.fix]),
    ).toEqual([
      [
        'gateway.clients[1].max_in_flight',
        'max_in_flight 7 of client "batch" is above the total max_concurrency of every pool (the largest, pool.a, has 6), so it never limits anything',
        'lower max_in_flight to 6 or less, or remove it.',
      ],
      [
        'gateway.clients[2].max_queued',
        'max_queued 21 of client "bulk" is above the total max_queued of every pool (the largest, pool.a, has 20), so it never limits anything',
        'lower max_queued to 20 or less, or remove it.',
      ],
    ]);
  });

  it("accepts max_queued above the pools' queues for a client with max_in_flight: its parked requests wait in no provider's queue", () => {
    expect(problems(`  clients:\n    - { id: batch, keys: [k1], max_in_flight: 2, max_queued: 500 }`)).toEqual([]);
  });
});

/** A file with one pool: one provider of `slots` slots whose queue holds `queued`, and the given gateway section. */
const onePool = (gateway: string, slots: number, queued: number) => `version: 1
gateway:
${gateway}
nodes:
  - id: gpu
    adapters:
      - { id: v, type: vllm, base_url: "http://10.0.0.5:8000/v1" }
    providers:
      - { id: a, category: vllm, adapter: v, models: [llama], max_concurrency: ${slots}, max_queued: ${queued} }
`;

describe('a cap above every pool: the fix reads sensibly when the bound is the least value the cap allows', () => {
  it.each([
    [
      'max_in_flight over a pool of 1 slot',
      'max_in_flight: 2',
      [1, 0],
      'max_in_flight 2 of client "chat" is above the total max_concurrency of every pool (the largest, pool.a, has 1), so it never limits anything',
      'set max_in_flight to 1, or remove it.',
    ],
    [
      'max_queued over queues of 0',
      'max_queued: 1',
      [4, 0],
      'max_queued 1 of client "chat" is above the total max_queued of every pool (the largest, pool.a, has 0), so it never limits anything',
      'set max_queued to 0, or remove it.',
    ],
    [
      'max_in_flight over a pool of 2 slots',
      'max_in_flight: 3',
      [2, 0],
      'max_in_flight 3 of client "chat" is above the total max_concurrency of every pool (the largest, pool.a, has 2), so it never limits anything',
      'lower max_in_flight to 2 or less, or remove it.',
    ],
  ])('%s', (_case, setting, [slots, queued], message, fix) => {
    const result = parseConfigText(
      onePool(`  clients:\n    - { id: chat, keys: [k1], ${setting} }`, slots, queued),
      {},
    );
    expect(result.ok ? [] : result.problems).toEqual([
      { path: `gateway.clients[0].${setting.split(':')[0]}`, line: 4, column: expect.any(Number), message, fix },
    ]);
  });
});

describe('tokens_per_day is not below tokens_per_minute (README "Token budgets")', () => {
  it.each([
    [
      'a day below the minute',
      'tokens_per_minute: 5000, tokens_per_day: 1000',
      'tokens_per_day 1000 of client "chat" is below its tokens_per_minute 5000: every minute lies in a day, so tokens_per_minute would never limit anything',
      'raise tokens_per_day to 5000 or more, or lower tokens_per_minute to 1000 or less, or remove tokens_per_minute.',
    ],
    [
      'a day of 1 token',
      'tokens_per_minute: 2, tokens_per_day: 1',
      'tokens_per_day 1 of client "chat" is below its tokens_per_minute 2: every minute lies in a day, so tokens_per_minute would never limit anything',
      'raise tokens_per_day to 2 or more, or set tokens_per_minute to 1, or remove tokens_per_minute.',
    ],
    [
      'a minute of the largest budget',
      'tokens_per_minute: 9007199254740991, tokens_per_day: 5',
      'tokens_per_day 5 of client "chat" is below its tokens_per_minute 9007199254740991: every minute lies in a day, so tokens_per_minute would never limit anything',
      'set tokens_per_day to 9007199254740991, or lower tokens_per_minute to 5 or less, or remove tokens_per_minute.',
    ],
  ])('refuses %s with its path, line:col and a fix', (_case, budgets, message, fix) => {
    expect(problems(`  clients:\n    - { id: ok, keys: [k0] }\n    - { id: chat, keys: [k1], ${budgets} }`)).toEqual([
      {
        path: 'gateway.clients[1].tokens_per_day',
        line: 5,
        column:
          budgets.indexOf('tokens_per_day: ') + 'tokens_per_day: '.length + '    - { id: chat, keys: [k1], '.length + 1,
        message,
        fix,
      },
    ]);
  });

  it.each([
    ['equal budgets (a day that may be spent in one minute)', 'tokens_per_minute: 1000, tokens_per_day: 1000'],
    ['a day above the minute', 'tokens_per_minute: 1000, tokens_per_day: 1440000'],
    ['a day alone', 'tokens_per_day: 10'],
    ['a minute alone', 'tokens_per_minute: 10'],
  ])('accepts %s', (_case, budgets) => {
    expect(problems(`  clients:\n    - { id: chat, keys: [k1], ${budgets} }`)).toEqual([]);
  });
});

describe('a key opens one door: one client, and never both a client and the status pages (README "Security")', () => {
  const SECRET = 'sk-shared-secret-42';
  const repeated = (first: string, again: string) => `this key is the same as ${first}: ${again}`;
  it.each([
    [
      'a status key equal to a named client key (from the environment)',
      `  clients:\n    - { id: chat, keys: [other, "\${SHARED}"] }\nstatus:\n  api_keys: [status-only, "\${SHARED}"]`,
      'status.api_keys[1]',
      [6, 27],
      repeated('gateway.clients[0].keys[1]', 'one key would open both the completions API and the status pages'),
      'give the status pages keys of their own, different from every client key; remove the repeated key from one of the two places.',
    ],
    [
      'a status key equal to a flat api_keys key (written in the file)',
      `  api_keys: [${SECRET}]\nstatus:\n  api_keys: [${SECRET}]`,
      'status.api_keys[0]',
      [5, 14],
      repeated('gateway.api_keys[0]', 'one key would open both the completions API and the status pages'),
      'give the status pages keys of their own, different from every client key; remove the repeated key from one of the two places.',
    ],
    [
      'a key twice in gateway.api_keys',
      `  api_keys: [${SECRET}, other, ${SECRET}]`,
      'gateway.api_keys[2]',
      [3, 42],
      repeated('gateway.api_keys[0]', 'a key must identify exactly one client'),
      'give every client its own keys; remove the repeated key from one of the two places.',
    ],
    [
      'a key twice under one client',
      `  clients:\n    - { id: chat, keys: ["\${SHARED}", "\${SHARED}"] }`,
      'gateway.clients[0].keys[1]',
      [4, 39],
      repeated('gateway.clients[0].keys[0]', 'a key must identify exactly one client'),
      'give every client its own keys; remove the repeated key from one of the two places.',
    ],
  ])('refuses %s, never printing the key', (_case, gateway, path, [line, column], message, fix) => {
    const found = problems(gateway, { SHARED: SECRET });
    expect(found).toEqual([{ path, line, column, message, fix }]);
    expect(JSON.stringify(found)).not.toContain(SECRET);
  });

  it('accepts status keys apart from every client key', () => {
    expect(
      problems(`  api_keys: [flat]\n  clients:\n    - { id: chat, keys: [k1] }\nstatus:\n  api_keys: [s1, s2]`),
    ).toEqual([]);
  });
});
