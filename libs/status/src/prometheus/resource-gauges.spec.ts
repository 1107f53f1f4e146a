import { Registry } from 'prom-client';
import { parsePrometheusText, sampleValue } from '../testing/prometheus-text';
import type { StatusSnapshot } from '../snapshot/snapshot';
import { renderPrometheus, ResourceGauges } from './resource-gauges';

const snapshot: StatusSnapshot = {
  generated_at: '2026-01-01T00:00:00.000Z',
  nodes: [
    {
      node_id: 'gpu-a',
      source: 'catalog',
      resources: [
        {
          id: 'gpu-a-llama',
          category: 'vllm',
          adapter: 'vllm-0',
          models: ['llama'],
          pool: true,
          enabled: true,
          state: 'ready',
          max_concurrency: 4,
          in_flight: 1,
          queued: 2,
        },
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
          id: 'gpu-a-off',
          category: 'vllm',
          adapter: 'vllm-0',
          models: ['x'],
          pool: true,
          enabled: false,
          state: 'disabled',
          max_concurrency: 2,
          in_flight: null,
          queued: null,
        },
      ],
    },
    {
      node_id: 'laptop',
      source: 'adapters',
      resources: [
        {
          id: 'codex',
          category: 'cli',
          adapter: 'codex',
          models: ['codex'],
          pool: false,
          enabled: true,
          state: 'ready',
          max_concurrency: null,
          in_flight: null,
          queued: null,
        },
      ],
    },
  ],
};

describe('renderPrometheus (metric names)', () => {
  it('renders the four resource gauges as valid Prometheus text, labelled node/resource/category', async () => {
    const samples = parsePrometheusText(await renderPrometheus(snapshot));
    const llama = { node: 'gpu-a', resource: 'gpu-a-llama', category: 'vllm' };
    expect(sampleValue(samples, 'iop_edge_resource_in_flight', llama)).toBe(1);
    expect(sampleValue(samples, 'iop_edge_resource_queued', llama)).toBe(2);
    expect(sampleValue(samples, 'iop_edge_resource_max_concurrency', llama)).toBe(4);
    expect(sampleValue(samples, 'iop_edge_resource_up', llama)).toBe(1);
    expect(sampleValue(samples, 'iop_edge_resource_up', { resource: 'gpu-a-off' })).toBe(0);
    expect(samples.every((s) => Object.keys(s.labels).sort().join() === 'category,node,resource')).toBe(true);
  });

  it('skips series whose value is null instead of reporting 0', async () => {
    const samples = parsePrometheusText(await renderPrometheus(snapshot));
    expect(sampleValue(samples, 'iop_edge_resource_in_flight', { resource: 'gpu-a-echo' })).toBeUndefined();
    expect(sampleValue(samples, 'iop_edge_resource_queued', { resource: 'codex' })).toBeUndefined();
    expect(sampleValue(samples, 'iop_edge_resource_in_flight', { resource: 'gpu-a-off' })).toBeUndefined();
    expect(sampleValue(samples, 'iop_edge_resource_max_concurrency', { resource: 'gpu-a-off' })).toBe(2);
    expect(sampleValue(samples, 'iop_edge_resource_up', { resource: 'codex', node: 'laptop' })).toBe(1);
  });

  it('drops the series of resources that left the snapshot on update', async () => {
    const registry = new Registry();
    const gauges = new ResourceGauges(registry);
    gauges.update(snapshot);
    gauges.update({ ...snapshot, nodes: [snapshot.nodes[1]] });
    const samples = parsePrometheusText(await registry.metrics());
    expect(samples.filter((s) => s.labels.node === 'gpu-a')).toEqual([]);
  });

  it('the strict parser rejects malformed lines', () => {
    expect(() => parsePrometheusText('# TYPE a gauge\na{b="c"} one\n')).toThrow(/line 2/);
    expect(() => parsePrometheusText('a 1\n')).toThrow(/no # TYPE/);
  });
});
