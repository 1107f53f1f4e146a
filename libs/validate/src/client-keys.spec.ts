import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ANONYMOUS_CLIENT, ClientKeys, anyTokenBudget, configuredClients, soleClient } from './client-keys';
import { parseConfigText } from './load-config';

/** 4096 connections: a client without its own max_queued may keep 2048 requests waiting per pool. */
const gateway = {
  max_connections: 4096,
  api_keys: ['flat-1', 'flat-2'],
  clients: [
    { id: 'chat', keys: ['chat-a', 'chat-b'], priority: 10, weight: 3, max_in_flight: 4 },
    { id: 'batch', keys: ['batch-a'], priority: -1, weight: 1, max_queued: 50 },
    { id: 'metered', keys: ['metered-a'], priority: 0, weight: 1, tokens_per_minute: 1000, tokens_per_day: 50000 },
    { id: 'daily', keys: ['daily-a'], priority: 0, weight: 1, tokens_per_day: 7000 },
  ],
};

describe('ClientKeys', () => {
  const keys = new ClientKeys(gateway);

  it('resolves every key of a client to that client, with its band, weight and caps', () => {
    expect(keys.resolve('chat-a')).toEqual({ id: 'chat', priority: 10, weight: 3, maxInFlight: 4, maxQueued: 2048 });
    expect(keys.resolve('chat-b')).toBe(keys.resolve('chat-a'));
    expect(keys.resolve('batch-a')).toEqual({ id: 'batch', priority: -1, weight: 1, maxQueued: 50 });
  });

  it('maps tokens_per_minute and tokens_per_day to tokenBudgets, only the windows that are set', () => {
    expect(keys.resolve('metered-a')).toEqual({
      id: 'metered',
      priority: 0,
      weight: 1,
      maxQueued: 2048,
      tokenBudgets: { perMinute: 1000, perDay: 50000 },
    });
    expect(keys.resolve('daily-a')?.tokenBudgets).toEqual({ perDay: 7000 });
    expect(keys.resolve('chat-a')?.tokenBudgets).toBeUndefined();
    expect(anyTokenBudget(gateway)).toBe(true);
    expect(anyTokenBudget({ clients: gateway.clients.slice(0, 2) })).toBe(false);
  });

  it('makes each flat api_keys entry a client of default settings named by its place in the list', () => {
    expect(keys.resolve('flat-1')).toEqual({ id: 'api_keys[0]', priority: 0, weight: 1, maxQueued: 2048 });
    expect(keys.resolve('flat-2')).toEqual({ id: 'api_keys[1]', priority: 0, weight: 1, maxQueued: 2048 });
  });

  it('resolves no client for an unknown, absent or prefix key', () => {
    expect(keys.resolve('nope')).toBeUndefined();
    expect(keys.resolve(undefined)).toBeUndefined();
    expect(keys.resolve('chat-')).toBeUndefined();
    expect(keys.resolve('')).toBeUndefined();
  });

  it('lists the configured clients, named ones first', () => {
    expect(keys.clients.map((c) => c.id)).toEqual(['chat', 'batch', 'metered', 'daily', 'api_keys[0]', 'api_keys[1]']);
    expect(keys.open).toBe(false);
  });

  it('makes every request the anonymous client when no key is configured', () => {
    const open = new ClientKeys({ max_connections: 4096, api_keys: [], clients: [] });
    expect(open.open).toBe(true);
    expect(open.resolve(undefined)).toBe(ANONYMOUS_CLIENT);
    expect(open.resolve('anything')).toBe(ANONYMOUS_CLIENT);
    expect(open.clients).toEqual([ANONYMOUS_CLIENT]);
  });

  it('says flow control is off only with no named client and at most one flat key', () => {
    const chat = gateway.clients.slice(0, 1);
    expect(soleClient({ api_keys: [], clients: [] })).toBe(true);
    expect(soleClient({ api_keys: ['only'], clients: [] })).toBe(true);
    expect(soleClient({ api_keys: ['a', 'b'], clients: [] })).toBe(false);
    expect(soleClient({ api_keys: [], clients: chat })).toBe(false);
    expect(new ClientKeys({ max_connections: 4096, api_keys: ['only'], clients: [] }).sole).toBe(true);
    expect(keys.sole).toBe(false);
  });
});

describe('max_queued by default: half of gateway.max_connections (README "Clients, priority and fair share")', () => {
  const named = (extra: object = {}) => ({ id: 'c', keys: ['k-c'], priority: 0, weight: 1, ...extra });
  it.each([
    ['a named client without max_queued', 4096, [named({ max_in_flight: 6 })], [], [2048]],
    ['rounded up', 9, [named()], [], [5]],
    ['at the least max_connections', 1, [named()], [], [1]],
    [
      'its own max_queued, above the default or 0',
      10,
      [named({ max_queued: 400 }), named({ id: 'z', max_queued: 0 })],
      [],
      [400, 0],
    ],
    ['flat keys beside a named client', 100, [named()], ['flat'], [50, 50]],
    ['two flat keys', 100, [], ['a', 'b'], [50, 50]],
    ['none for the sole flat key (flow control off)', 100, [], ['only'], [undefined]],
  ])('%s', (_case, maxConnections, clients, apiKeys, expected) => {
    const made = configuredClients({ max_connections: maxConnections, clients, api_keys: apiKeys });
    expect(made.map((c) => c.client.maxQueued)).toEqual(expected);
  });

  it("applies to the README's example: a client with max_in_flight and no max_queued can no longer park without bound", () => {
    const text = readFileSync(join(__dirname, '..', '..', '..', 'examples', 'clients.yaml'), 'utf8');
    const env = { CHAT_UI_KEY: 'k1', ANALYTICS_KEY: 'k2', RESEARCH_KEY: 'k3', BATCH_KEY: 'k4' };
    const shrunk = parseConfigText(text.replace('  listen: 127.0.0.1:8080', '  max_connections: 64'), env);
    if (!shrunk.ok) throw new Error(JSON.stringify(shrunk.problems));
    expect(
      configuredClients(shrunk.config.gateway).map(({ client }) => [client.id, client.maxInFlight, client.maxQueued]),
    ).toEqual([
      ['chat-ui', undefined, 32],
      ['analytics', 6, 32],
      ['research', undefined, 20],
      ['nightly-batch', 4, 32],
    ]);
  });
});
