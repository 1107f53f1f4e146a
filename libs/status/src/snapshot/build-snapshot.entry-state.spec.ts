import type { EdgeConfig } from '@iop/validate';
import { byId, cfg, cli, counts, http } from '../testing/snapshot-fixtures';
import { adapterHealthKey, buildSnapshot } from './build-snapshot';
import type { ResourceStatus } from './snapshot';

describe('buildSnapshot (resource-first)', () => {
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
});
