import { checkSemantics, edgeConfigSchema, type EdgeConfig } from '@iop/validate';
import { MemoryProviderQueue } from '../queue/memory-queue';
import { entersQueue } from './admission';
import { listModels, poolShardTags, queueProviders, resolveRoute } from './resolve-route';

/** A config parsed by the schema only, so semantically invalid files can reach run-time resolution. */
function fleet(providerAdapter: string, adapters: Array<Record<string, unknown>>): EdgeConfig {
  return edgeConfigSchema.parse({
    version: 1,
    nodes: [
      {
        id: 'gpu-a',
        adapters,
        providers: [
          { id: 'p', category: 'openai_compat', adapter: providerAdapter, models: ['m'], max_concurrency: 2 },
        ],
      },
    ],
  });
}

const compat = (id: string, enabled = true) => ({
  id,
  type: 'openai_compat',
  base_url: 'http://127.0.0.1:1/v1',
  enabled,
});

describe('provider candidates: validation and run-time resolution apply one rule', () => {
  it.each([
    ['a missing adapter', fleet('nope', [compat('c1')]), /not defined/, []],
    ['a disabled adapter', fleet('c1', [compat('c1', false)]), /disabled/, []],
    [
      'an ambiguous openai_compat type route',
      fleet('openai_compat', [compat('c1'), compat('c2')]),
      /c1.*c2|ambiguous|two or more/i,
      [],
    ],
    ['a valid named adapter', fleet('c2', [compat('c1'), compat('c2')]), undefined, ['c2']],
    [
      'a type route with one enabled adapter',
      fleet('openai_compat', [compat('c1'), compat('c2', false)]),
      undefined,
      ['c1'],
    ],
  ])('%s', (_what, config, validationError, candidateAdapters) => {
    const problems = checkSemantics(config).filter((p) => p.path === 'nodes[0].providers[0].adapter');
    if (validationError) expect(problems.map((p) => p.message).join(' ')).toMatch(validationError);
    else expect(problems).toEqual([]);
    const route = resolveRoute(config, 'm');
    expect(route?.providerPool).toBe(true);
    const candidates = route?.providerPool ? route.candidates : [];
    expect(candidates.map((c) => c.adapter.id)).toEqual(candidateAdapters);
    expect(queueProviders(config).map((p) => p.providerId)).toEqual(candidateAdapters.length ? ['p'] : []);
  });
});

describe('resolveRoute', () => {
  const config = edgeConfigSchema.parse({
    version: 1,
    nodes: [
      {
        id: 'n',
        adapters: [compat('c1'), { id: 'cli', type: 'cli', command: ['x'] }],
        providers: [
          {
            id: 'pool-1',
            category: 'openai_compat',
            adapter: 'c1',
            models: [{ name: 'm', upstream: 'm-up' }],
            max_concurrency: 3,
            max_queued: 7,
          },
          { id: 'pool-2', category: 'openai_compat', adapter: 'c1', models: ['m'], max_concurrency: 1 },
          { id: 'off', category: 'openai_compat', adapter: 'c1', models: ['m'], max_concurrency: 1, enabled: false },
          { id: 'cli-p', category: 'cli', adapter: 'cli', models: ['cli-model'] },
        ],
      },
      { id: 'legacy', adapters: [compat('old')] },
    ],
    routes: [{ model: 'legacy-model', node: 'legacy', adapter: 'old', upstream: 'old-up' }],
  });

  it('resolves a pool model to its enabled providers with limits and upstream names', () => {
    const route = resolveRoute(config, 'm');
    expect(route).toMatchObject({ providerPool: true, modelGroupKey: 'm' });
    const candidates = route?.providerPool ? route.candidates : [];
    expect(candidates.map((c) => [c.providerId, c.upstreamModel, c.maxConcurrency, c.maxQueued])).toEqual([
      ['pool-1', 'm-up', 3, 7],
      ['pool-2', 'm', 1, 100],
    ]);
  });

  it('leaves excluded (unhealthy) providers out of the candidates', () => {
    const route = resolveRoute(config, 'm', { exclude: new Set(['pool-1']) });
    expect(route?.providerPool && route.candidates.map((c) => c.providerId)).toEqual(['pool-2']);
  });

  it('resolves a CLI provider and a legacy route to direct targets that carry the model group key', () => {
    expect(resolveRoute(config, 'cli-model')).toMatchObject({
      providerPool: false,
      modelGroupKey: 'cli-model',
      target: { nodeId: 'n', providerId: 'cli-p' },
    });
    expect(resolveRoute(config, 'legacy-model')).toMatchObject({
      providerPool: false,
      modelGroupKey: 'legacy-model',
      target: { nodeId: 'legacy', upstreamModel: 'old-up' },
    });
  });

  it('returns undefined for an unknown model (404 model_not_found)', () => {
    expect(resolveRoute(config, 'nope')).toBeUndefined();
  });

  it('lists every served model once', () => {
    expect(listModels(config)).toEqual(['m', 'cli-model', 'legacy-model']);
  });

  it('resolves a model whose every entry is disabled as unavailable (503), never unknown (404), and keeps it listed', () => {
    const off = edgeConfigSchema.parse({
      version: 1,
      nodes: [
        {
          id: 'n',
          adapters: [compat('c1'), { id: 'cli', type: 'cli', command: ['x'] }],
          providers: [
            { id: 'p1', category: 'openai_compat', adapter: 'c1', models: ['m'], max_concurrency: 1, enabled: false },
            { id: 'p2', category: 'openai_compat', adapter: 'c1', models: ['m'], max_concurrency: 1, enabled: false },
            { id: 'cli-p', category: 'cli', adapter: 'cli', models: ['cli-model'], enabled: false },
          ],
        },
        { id: 'legacy', adapters: [compat('old', false)] },
      ],
      routes: [{ model: 'legacy-model', node: 'legacy', adapter: 'old' }],
    });
    expect(resolveRoute(off, 'm')).toEqual({ providerPool: true, modelGroupKey: 'm', candidates: [] });
    expect(resolveRoute(off, 'cli-model')).toEqual({
      providerPool: false,
      modelGroupKey: 'cli-model',
      target: undefined,
    });
    expect(resolveRoute(off, 'legacy-model')).toEqual({
      providerPool: false,
      modelGroupKey: 'legacy-model',
      target: undefined,
    });
    expect(resolveRoute(off, 'nope')).toBeUndefined();
    expect(listModels(off)).toEqual(['m', 'cli-model', 'legacy-model']);
  });
});

describe('entersQueue (the admission rule)', () => {
  const queue = new MemoryProviderQueue();
  const pool = { providerPool: true as const, modelGroupKey: 'm', candidates: [] };
  const direct = {
    providerPool: false as const,
    modelGroupKey: 'm',
    target: { nodeId: 'n', adapter: compat('c') as never, upstreamModel: 'm' },
  };
  it.each([
    ['a pool route with a model group and a queue', pool, queue, true],
    ['a pool route without a queue', pool, undefined, false],
    ['a pool route with an empty model group key', { ...pool, modelGroupKey: '' }, queue, false],
    ['a direct route even with a modelGroupKey', direct, queue, false],
  ])('%s → %s', (_what, route, q, expected) => {
    expect(entersQueue(route, q)).toBe(expected);
  });
});

describe('poolShardTags: Redis Cluster hash tags of provider pools', () => {
  const cfg = (cluster: boolean, budgets = false) =>
    edgeConfigSchema.parse({
      version: 1,
      queue: { cluster },
      ...(budgets ? { gateway: { clients: [{ id: 'metered', keys: ['k'], tokens_per_minute: 1000 }] } } : {}),
      nodes: [
        {
          id: 'n',
          adapters: [compat('c1')],
          providers: [
            { id: 'zeta', category: 'openai_compat', adapter: 'c1', models: ['llama'], max_concurrency: 1 },
            { id: 'beta', category: 'openai_compat', adapter: 'c1', models: ['qwen', 'llama'], max_concurrency: 1 },
            {
              id: 'gamma',
              category: 'openai_compat',
              adapter: 'c1',
              models: [{ name: 'qwen', upstream: 'Qwen/Qwen2' }],
              max_concurrency: 1,
            },
            { id: 'solo', category: 'openai_compat', adapter: 'c1', models: ['embed'], max_concurrency: 1 },
          ],
        },
      ],
    });

  it('gives providers linked by a shared model, even through a sibling, one tag, and an unrelated pool its own', () => {
    expect(Object.fromEntries(poolShardTags(cfg(true)))).toEqual({
      zeta: 'pool.beta',
      beta: 'pool.beta',
      gamma: 'pool.beta',
      solo: 'pool.solo',
    });
  });

  it('tags queue providers only with queue.cluster on (one tag for a single Redis)', () => {
    expect(queueProviders(cfg(true)).map((p) => p.shardTag)).toEqual([
      'pool.beta',
      'pool.beta',
      'pool.beta',
      'pool.solo',
    ]);
    expect(queueProviders(cfg(false)).map((p) => p.shardTag)).toEqual([undefined, undefined, undefined, undefined]);
  });

  it('gives every pool provider one tag when a client has a token budget, keeping its pool', () => {
    expect(Object.fromEntries(poolShardTags(cfg(true, true)))).toEqual({
      zeta: 'pools',
      beta: 'pools',
      gamma: 'pools',
      solo: 'pools',
    });
    expect(queueProviders(cfg(true, true)).map((p) => [p.shardTag, p.pool])).toEqual([
      ['pools', 'pool.beta'],
      ['pools', 'pool.beta'],
      ['pools', 'pool.beta'],
      ['pools', 'pool.solo'],
    ]);
    expect(queueProviders(cfg(false, true)).map((p) => p.shardTag)).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
  });

  it('names every queue provider its pool, with or without a cluster (fair share and client caps are per pool)', () => {
    const pools = ['pool.beta', 'pool.beta', 'pool.beta', 'pool.solo'];
    expect(queueProviders(cfg(false)).map((p) => p.pool)).toEqual(pools);
    expect(queueProviders(cfg(true)).map((p) => p.pool)).toEqual(pools);
  });
});
