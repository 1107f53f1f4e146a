import type { ProviderCounts } from '@iop/dispatch';
import { edgeConfigSchema, parseConfigText, type EdgeConfig, type EdgeConfigInput } from '@iop/validate';
import { adapterHealthKey, buildSnapshot, trackedProviderIds } from './build-snapshot';
import type { ResourceStatus, StatusSnapshot } from './snapshot';

/** Schema-parsed config (defaults applied) without the semantic checks, so broken references can be expressed. */
const cfg = (nodes: EdgeConfigInput['nodes'], routes: EdgeConfigInput['routes'] = []): EdgeConfig =>
  edgeConfigSchema.parse({ version: 1, nodes, routes });

const counts = (entries: Record<string, ProviderCounts>) => new Map(Object.entries(entries));
const NOW = new Date('2026-01-01T00:00:00.000Z');
const only = (s: StatusSnapshot, nodeId: string) => s.nodes.find((n) => n.node_id === nodeId)!;
const byId = (s: StatusSnapshot, id: string): ResourceStatus =>
  s.nodes.flatMap((n) => n.resources).find((r) => r.id === id)!;

const http = (id: string, type: 'vllm' | 'ollama' | 'openai_compat', enabled = true) => ({
  id,
  type,
  base_url: 'http://127.0.0.1:9/v1',
  enabled,
});
const cli = (id: string, enabled = true) => ({ id, type: 'cli' as const, command: ['my-llm'], enabled });

describe('buildSnapshot (resource-first)', () => {
  it('yields exactly the catalog entries, each once, for a node with a CLI adapter, an openai_compat adapter and a catalog', () => {
    const config = cfg([
      {
        id: 'gpu-a',
        adapters: [cli('echo'), http('compat-0', 'openai_compat')],
        providers: [
          { id: 'gpu-a-echo', category: 'cli', adapter: 'echo', models: ['echo'] },
          {
            id: 'gpu-a-compat',
            category: 'openai_compat',
            adapter: 'compat-0',
            models: [{ name: 'llama', upstream: 'meta/llama' }],
            max_concurrency: 4,
          },
        ],
      },
    ]);
    const snapshot = buildSnapshot(config, counts({ 'gpu-a-compat': { inFlight: 3, queued: 2 } }), { now: NOW });
    expect(snapshot).toEqual({
      generated_at: '2026-01-01T00:00:00.000Z',
      nodes: [
        {
          node_id: 'gpu-a',
          source: 'catalog',
          resources: [
            {
              id: 'gpu-a-echo',
              category: 'cli',
              adapter: 'echo',
              models: ['echo'],
              pool: false,
              enabled: true,
              state: 'ready',
              max_concurrency: null,
              in_flight: null,
              queued: null,
            },
            {
              id: 'gpu-a-compat',
              category: 'openai_compat',
              adapter: 'compat-0',
              models: ['llama'],
              pool: true,
              enabled: true,
              state: 'ready',
              max_concurrency: 4,
              in_flight: 3,
              queued: 2,
            },
          ],
        },
      ],
    });
    // Nothing shows twice: no adapter-level entry for compat-0 or echo.
    const ids = snapshot.nodes.flatMap((n) => n.resources.map((r) => r.id));
    expect(ids).toEqual(['gpu-a-echo', 'gpu-a-compat']);
  });

  it('falls back to adapter entries (source "adapters", pool false, counts null) for a legacy node without providers', () => {
    const config = cfg(
      [
        {
          id: 'laptop',
          adapters: [cli('codex-cli'), http('laptop-compat', 'openai_compat'), http('off', 'ollama', false)],
        },
      ],
      [
        { model: 'codex', node: 'laptop', adapter: 'codex-cli' },
        { model: 'legacy', node: 'laptop', adapter: 'laptop-compat', upstream: 'legacy-up' },
      ],
    );
    const node = only(
      buildSnapshot(config, counts({ 'laptop-compat': { inFlight: 7, queued: 7 } }), { now: NOW }),
      'laptop',
    );
    expect(node.source).toBe('adapters');
    expect(node.resources).toEqual([
      {
        id: 'codex-cli',
        category: 'cli',
        adapter: 'codex-cli',
        models: ['codex'],
        pool: false,
        enabled: true,
        state: 'ready',
        max_concurrency: null,
        in_flight: null,
        queued: null,
      },
      {
        id: 'laptop-compat',
        category: 'openai_compat',
        adapter: 'laptop-compat',
        models: ['legacy'],
        pool: false,
        enabled: true,
        state: 'ready',
        max_concurrency: null,
        in_flight: null,
        queued: null,
      },
      {
        id: 'off',
        category: 'ollama',
        adapter: 'off',
        models: [],
        pool: false,
        enabled: false,
        state: 'disabled',
        max_concurrency: null,
        in_flight: null,
        queued: null,
      },
    ]);
  });

  it('keeps the counts of two providers on the same node independent (joined by provider id)', () => {
    const config = cfg([
      {
        id: 'gpu-a',
        adapters: [http('vllm-0', 'vllm'), http('vllm-1', 'vllm')],
        providers: [
          { id: 'p1', category: 'vllm', adapter: 'vllm-0', models: ['m'], max_concurrency: 2 },
          { id: 'p2', category: 'vllm', adapter: 'vllm-1', models: ['m'], max_concurrency: 3 },
        ],
      },
    ]);
    const s = buildSnapshot(config, counts({ p2: { inFlight: 3, queued: 5 }, p1: { inFlight: 1, queued: 0 } }));
    expect([byId(s, 'p1').in_flight, byId(s, 'p1').queued, byId(s, 'p2').in_flight, byId(s, 'p2').queued]).toEqual([
      1, 0, 3, 5,
    ]);
  });

  describe('state and counts of a catalog entry', () => {
    const node = (
      provider: Record<string, unknown>,
      adapters: ReturnType<typeof http | typeof cli>[] = [http('vllm-0', 'vllm'), http('compat-0', 'openai_compat')],
    ) =>
      cfg([
        {
          id: 'n',
          adapters,
          providers: [
            { id: 'p', category: 'vllm', adapter: 'vllm-0', models: ['m'], max_concurrency: 2, ...provider } as never,
          ],
        },
      ]);
    const tracked = counts({ p: { inFlight: 1, queued: 1 } });

    it.each<[string, EdgeConfig, Partial<ResourceStatus>]>([
      [
        'ready: enabled, adapter resolves by id',
        node({}),
        { state: 'ready', adapter: 'vllm-0', in_flight: 1, queued: 1 },
      ],
      [
        'ready: adapter given as a type with one enabled adapter of it',
        node({ adapter: 'vllm' }),
        { state: 'ready', adapter: 'vllm-0' },
      ],
      ['disabled: the provider is disabled', node({ enabled: false }), { state: 'disabled', enabled: false }],
      [
        'disabled: the provider points at a disabled adapter',
        node({}, [http('vllm-0', 'vllm', false)]),
        { state: 'disabled', enabled: true, adapter: 'vllm-0' },
      ],
      [
        'disabled: a type name whose only adapter is disabled',
        node({ adapter: 'vllm' }, [http('vllm-0', 'vllm', false)]),
        { state: 'disabled' },
      ],
      ['invalid: the adapter is missing', node({ adapter: 'vllm-9' }), { state: 'invalid', adapter: 'vllm-9' }],
      [
        'invalid: a type name with two enabled adapters (ambiguous)',
        node({ adapter: 'vllm' }, [http('vllm-0', 'vllm'), http('vllm-1', 'vllm')]),
        { state: 'invalid', adapter: 'vllm' },
      ],
      [
        'invalid: the adapter is of another type than the category',
        node({ adapter: 'compat-0' }),
        { state: 'invalid', adapter: 'compat-0' },
      ],
    ])('%s', (_name, config, expected) => {
      expect(byId(buildSnapshot(config, tracked), 'p')).toMatchObject(expected);
    });

    it('is unhealthy when the health source says so, and disabled/invalid still win over unhealthy', () => {
      const health = new Map([['p', 'unhealthy' as const]]);
      expect(byId(buildSnapshot(node({}), tracked, { health }), 'p').state).toBe('unhealthy');
      expect(byId(buildSnapshot(node({ enabled: false }), tracked, { health }), 'p').state).toBe('disabled');
      expect(byId(buildSnapshot(node({ adapter: 'nope' }), tracked, { health }), 'p').state).toBe('invalid');
      expect(byId(buildSnapshot(node({}), tracked, { health: new Map([['p', 'healthy' as const]]) }), 'p').state).toBe(
        'ready',
      );
    });

    it('marks an adapter entry unhealthy by its node/adapter health key', () => {
      const config = cfg([{ id: 'laptop', adapters: [cli('codex-cli')] }]);
      const s = buildSnapshot(config, undefined, {
        health: new Map([[adapterHealthKey('laptop', 'codex-cli'), 'unhealthy' as const]]),
      });
      expect(byId(s, 'codex-cli').state).toBe('unhealthy');
    });

    it.each<[string, ReadonlyMap<string, { inFlight: number; queued: number }> | undefined, EdgeConfig, number | null]>(
      [
        ['no counts source: null, not 0', undefined, node({}), null],
        [
          'the counts source does not track the provider: null',
          counts({ other: { inFlight: 1, queued: 1 } }),
          node({}),
          null,
        ],
        ['a tracked provider with nothing going on: a real 0', counts({ p: { inFlight: 0, queued: 0 } }), node({}), 0],
      ],
    )('counts: %s', (_name, source, config, expected) => {
      const r = byId(buildSnapshot(config, source), 'p');
      expect([r.in_flight, r.queued]).toEqual([expected, expected]);
      expect(r.max_concurrency).toBe(2);
    });

    it('never attaches counts to a CLI provider, even when the source has its id', () => {
      const config = cfg([
        { id: 'n', adapters: [cli('echo')], providers: [{ id: 'p', category: 'cli', adapter: 'echo', models: ['e'] }] },
      ]);
      expect(byId(buildSnapshot(config, tracked), 'p')).toMatchObject({
        pool: false,
        max_concurrency: null,
        in_flight: null,
        queued: null,
      });
    });
  });

  it('copies config_hash and config_loaded_at when given, and lists nodes in config order with their own source', () => {
    const loaded = parseConfigText(
      `
version: 1
nodes:
  - id: gpu-a
    adapters: [{ id: v, type: vllm, base_url: "http://127.0.0.1:9/v1" }]
    providers: [{ id: pa, category: vllm, adapter: v, models: [m], max_concurrency: 1 }]
  - id: laptop
    adapters: [{ id: c, type: cli, command: [x] }]
routes: [{ model: x, node: laptop, adapter: c }]
`,
      {},
    );
    if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
    const s = buildSnapshot(loaded.config, undefined, { now: NOW, configHash: loaded.hash, configLoadedAt: NOW });
    expect(s.config_hash).toBe(loaded.hash);
    expect(s.config_loaded_at).toBe(NOW.toISOString());
    expect(s.nodes.map((n) => [n.node_id, n.source])).toEqual([
      ['gpu-a', 'catalog'],
      ['laptop', 'adapters'],
    ]);
    expect(trackedProviderIds(loaded.config)).toEqual(['pa']);
  });

  it("shows each pool provider's health record (state, reason, since, retry_at) and marks one out of health unhealthy", () => {
    const config = cfg([
      {
        id: 'n',
        adapters: [http('c', 'openai_compat'), cli('echo')],
        providers: [
          { id: 'a', category: 'openai_compat', adapter: 'c', models: ['m'], max_concurrency: 1 },
          { id: 'b', category: 'openai_compat', adapter: 'c', models: ['m'], max_concurrency: 1 },
          { id: 'c', category: 'openai_compat', adapter: 'c', models: ['m'], max_concurrency: 1 },
          { id: 'e', category: 'cli', adapter: 'echo', models: ['e'] },
        ],
      },
    ]);
    const healthDetails = new Map([
      [
        'a',
        {
          state: 'unhealthy' as const,
          reason: '3 requests failed: upstream_timeout',
          since: NOW.getTime(),
          retryAt: NOW.getTime() + 30_000,
        },
      ],
      ['b', { state: 'backoff' as const, reason: 'upstream 429', since: null, retryAt: NOW.getTime() + 7000 }],
      ['c', { state: 'healthy' as const, reason: null, since: null, retryAt: null }],
      ['e', { state: 'unhealthy' as const, reason: 'ignored: not a pool provider', since: null, retryAt: null }],
    ]);
    const snapshot = buildSnapshot(config, undefined, { now: NOW, healthDetails });
    expect(byId(snapshot, 'a')).toMatchObject({
      state: 'unhealthy',
      health: {
        state: 'unhealthy',
        reason: '3 requests failed: upstream_timeout',
        since: '2026-01-01T00:00:00.000Z',
        retry_at: '2026-01-01T00:00:30.000Z',
      },
    });
    expect(byId(snapshot, 'b')).toMatchObject({
      state: 'unhealthy',
      health: { state: 'backoff', reason: 'upstream 429', since: null, retry_at: '2026-01-01T00:00:07.000Z' },
    });
    expect(byId(snapshot, 'c')).toMatchObject({ state: 'ready', health: { state: 'healthy', reason: null } });
    expect(byId(snapshot, 'e').state).toBe('ready');
    expect(byId(snapshot, 'e').health).toBeUndefined();
  });

  it('tracks only enabled pool providers whose adapter resolves', () => {
    const config = cfg([
      {
        id: 'n',
        adapters: [http('vllm-0', 'vllm'), cli('echo'), http('off', 'vllm', false)],
        providers: [
          { id: 'ok', category: 'vllm', adapter: 'vllm-0', models: ['a'], max_concurrency: 1 },
          { id: 'cli', category: 'cli', adapter: 'echo', models: ['b'] },
          { id: 'disabled', category: 'vllm', adapter: 'vllm-0', models: ['c'], max_concurrency: 1, enabled: false },
          { id: 'bad', category: 'vllm', adapter: 'off', models: ['d'], max_concurrency: 1 },
        ],
      },
    ]);
    expect(trackedProviderIds(config)).toEqual(['ok']);
  });
});
