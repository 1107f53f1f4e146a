import { usablePoolProvider, type UnusableReason } from './pool-provider';
import { edgeConfigSchema, type EdgeConfigInput } from './schema';
import { checkSemantics } from './semantic-rules';

type NodeInput = EdgeConfigInput['nodes'][number];
const vllm = (id: string, enabled = true) => ({
  id,
  type: 'vllm' as const,
  base_url: 'http://10.0.0.5:8000/v1',
  enabled,
});
const ollama = (id: string) => ({ id, type: 'ollama' as const, base_url: 'http://10.0.0.6:11434' });
const cli = (id: string) => ({ id, type: 'cli' as const, command: ['my-llm'] });

/** The first provider of a one-node file, read by the rule. */
function use(node: Omit<NodeInput, 'id'>, queue: { max_queued?: number } = {}) {
  const config = edgeConfigSchema.parse({ version: 1, nodes: [{ id: 'n', ...node }], queue });
  return { result: usablePoolProvider(config.nodes[0], config.nodes[0].providers[0], config.queue), config };
}

describe('usablePoolProvider (docs/architecture.md, "Usable pool providers")', () => {
  it('gives a usable pool provider with its adapter and limits', () => {
    const { result } = use(
      {
        adapters: [vllm('v')],
        providers: [{ id: 'p', category: 'vllm', adapter: 'v', models: ['m'], max_concurrency: 3 }],
      },
      { max_queued: 7 },
    );
    expect(result).toMatchObject({
      usable: true,
      provider: { id: 'p' },
      adapter: { id: 'v', type: 'vllm' },
      maxConcurrency: 3,
      maxQueued: 7,
    });
  });

  it("resolves a type name to the node's one enabled adapter of that type; the provider's own max_queued wins; max_concurrency is at least 1", () => {
    const { result } = use({
      adapters: [vllm('off', false), vllm('v')],
      providers: [{ id: 'p', category: 'vllm', adapter: 'vllm', models: ['m'], max_concurrency: 0, max_queued: 2 }],
    });
    expect(result).toMatchObject({ usable: true, adapter: { id: 'v' }, maxConcurrency: 1, maxQueued: 2 });
  });

  it('without a queue section, max_queued defaults as the schema does', () => {
    const { config } = use({
      adapters: [vllm('v')],
      providers: [{ id: 'p', category: 'vllm', adapter: 'v', models: ['m'], max_concurrency: 1 }],
    });
    expect(usablePoolProvider(config.nodes[0], config.nodes[0].providers[0])).toMatchObject({
      usable: true,
      maxQueued: config.queue.max_queued,
    });
  });

  const rows: Array<[reason: UnusableReason, node: Omit<NodeInput, 'id'>, adapterId: string | undefined]> = [
    [
      'provider_disabled',
      {
        adapters: [vllm('v')],
        providers: [{ id: 'p', category: 'vllm', adapter: 'v', models: ['m'], max_concurrency: 1, enabled: false }],
      },
      'v',
    ],
    [
      'adapter_missing',
      {
        adapters: [vllm('v')],
        providers: [{ id: 'p', category: 'vllm', adapter: 'nope', models: ['m'], max_concurrency: 1 }],
      },
      undefined,
    ],
    [
      'adapter_disabled',
      {
        adapters: [vllm('v', false)],
        providers: [{ id: 'p', category: 'vllm', adapter: 'v', models: ['m'], max_concurrency: 1 }],
      },
      'v',
    ],
    [
      'adapter_ambiguous',
      {
        adapters: [vllm('v1'), vllm('v2')],
        providers: [{ id: 'p', category: 'vllm', adapter: 'vllm', models: ['m'], max_concurrency: 1 }],
      },
      undefined,
    ],
    [
      'adapter_type_mismatch',
      {
        adapters: [ollama('o')],
        providers: [{ id: 'p', category: 'vllm', adapter: 'o', models: ['m'], max_concurrency: 1 }],
      },
      'o',
    ],
    ['not_pool', { adapters: [cli('c')], providers: [{ id: 'p', category: 'cli', adapter: 'c', models: ['m'] }] }, 'c'],
  ];

  it.each(rows)('%s', (reason, node, adapterId) => {
    const { result } = use(node);
    expect(result).toMatchObject({ usable: false, reason, provider: { id: 'p' } });
    expect(result.adapter?.id).toBe(adapterId);
  });

  it('a disabled provider reads provider_disabled before any adapter problem', () => {
    const { result } = use({
      adapters: [],
      providers: [{ id: 'p', category: 'vllm', adapter: 'nope', models: ['m'], max_concurrency: 1, enabled: false }],
    });
    expect(result).toMatchObject({ usable: false, reason: 'provider_disabled' });
  });

  it.each(rows.filter(([reason]) => reason !== 'provider_disabled' && reason !== 'not_pool'))(
    'validation reports %s as an error on the provider, so the file and the run time agree',
    (_reason, node) => {
      const config = edgeConfigSchema.parse({ version: 1, nodes: [{ id: 'n', ...node }] });
      expect(checkSemantics(config).map((p) => p.path)).toEqual(
        expect.arrayContaining([expect.stringMatching(/^nodes\[0\]\.providers\[0\]\.(adapter|category)$/)]),
      );
    },
  );
});
