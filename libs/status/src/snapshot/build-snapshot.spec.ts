import { parseConfigText } from '@iop/validate';
import { byId, cfg, cli, counts, http, NOW, only } from '../testing/snapshot-fixtures';
import { buildSnapshot, trackedProviderIds } from './build-snapshot';

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

  it('shows max_tokens_in_flight and tokens_in_flight only for a provider with a token limit (null when not read)', () => {
    const config = cfg([
      {
        id: 'gpu-a',
        adapters: [http('vllm-0', 'vllm'), http('vllm-1', 'vllm')],
        providers: [
          {
            id: 'p1',
            category: 'vllm',
            adapter: 'vllm-0',
            models: ['m'],
            max_concurrency: 2,
            max_tokens_in_flight: 8000,
          },
          { id: 'p2', category: 'vllm', adapter: 'vllm-1', models: ['m'], max_concurrency: 3 },
        ],
      },
    ]);
    const s = buildSnapshot(
      config,
      counts({ p1: { inFlight: 1, queued: 0, tokensInFlight: 1200 }, p2: { inFlight: 0, queued: 0 } }),
    );
    expect(byId(s, 'p1')).toMatchObject({ max_tokens_in_flight: 8000, tokens_in_flight: 1200 });
    expect(byId(s, 'p2')).not.toHaveProperty('max_tokens_in_flight');
    expect(byId(s, 'p2')).not.toHaveProperty('tokens_in_flight');
    const unread = buildSnapshot(config, counts({ p1: { inFlight: 1, queued: 0 } }));
    expect(byId(unread, 'p1')).toMatchObject({ max_tokens_in_flight: 8000, tokens_in_flight: null });
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
