import { configDigest, parseConfigText, type EdgeConfig } from '@iop/validate';
import { Registry } from 'prom-client';
import { parsePrometheusText } from '../testing/prometheus-text';
import { CONFIG_INFO_METRIC, registerConfigInfoGauge } from './config-info-gauge';

const load = (maxConcurrency: number): EdgeConfig => {
  const loaded = parseConfigText(
    [
      'version: 1',
      'gateway: { api_keys: ["${EDGE_API_KEY}"] }',
      'nodes:',
      '  - id: n',
      '    adapters: [{ id: v, type: vllm, base_url: "http://127.0.0.1:9/v1" }]',
      `    providers: [{ id: p, category: vllm, adapter: v, models: [m], max_concurrency: ${maxConcurrency} }]`,
    ].join('\n'),
    { EDGE_API_KEY: 'client-key-secret' },
  );
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
  return loaded.config;
};

describe('iop_edge_config_info', () => {
  it('is 1 with the first 12 hex digits of the config digest, read at each scrape (a reload shows at once)', async () => {
    const registry = new Registry();
    let config = load(2);
    registerConfigInfoGauge(registry, () => config);
    const scrape = async () =>
      parsePrometheusText(await registry.metrics()).filter((s) => s.name === CONFIG_INFO_METRIC);
    expect(await scrape()).toEqual([
      { name: CONFIG_INFO_METRIC, labels: { hash: configDigest(config).slice(0, 12) }, value: 1 },
    ]);
    config = load(3);
    expect(await scrape()).toEqual([
      { name: CONFIG_INFO_METRIC, labels: { hash: configDigest(config).slice(0, 12) }, value: 1 },
    ]);
    expect(await registry.metrics()).not.toContain('client-key-secret');
  });

  it('registers once per registry: a second registration replaces the first', async () => {
    const registry = new Registry();
    registerConfigInfoGauge(registry, () => load(2));
    registerConfigInfoGauge(registry, () => load(5));
    const samples = parsePrometheusText(await registry.metrics());
    expect(samples.map((s) => s.labels['hash'])).toEqual([configDigest(load(5)).slice(0, 12)]);
  });
});
