import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { configDigest } from './config-digest';
import { parseConfigText, type LoadOptions } from './load-config';
import { GATEWAY_ONLY_SECRETS } from './secret-settings';

const example = readFileSync(join(__dirname, 'testing/design-example.yaml'), 'utf8');
const env = { EDGE_API_KEY: 'client-key-0001', VLLM_KEY: 'sk-vllm-secret-42' };

/** The digest of `text` loaded with `vars`; throws on a problem. */
function digestOf(text: string, vars: Record<string, string | undefined> = env, options: LoadOptions = {}): string {
  const loaded = parseConfigText(text, vars, 'edge.yaml', options);
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
  return configDigest(loaded.config);
}

/** The design example with `from` (which must occur) replaced by `to`. */
function edit(from: string, to: string): string {
  expect(example).toContain(from);
  return example.replace(from, () => to);
}

describe('configDigest (iop_edge_config_info, config_hash)', () => {
  const base = digestOf(example);

  it('is a sha256 in hex', () => {
    expect(base).toMatch(/^[0-9a-f]{64}$/);
  });

  it.each([
    ['a comment', edit('# --listen overrides', '# another comment')],
    ['the order of keys', edit('  interval_ms: 5000\n  timeout_ms: 2000', '  timeout_ms: 2000\n  interval_ms: 5000')],
    ['a default written out', edit('  healthy_after: 2 ', '  healthy_after: 2\n  cooldown_ms: 30000 #')],
  ])('ignores %s', (_what, text) => {
    expect(digestOf(text)).toBe(base);
  });

  it.each([
    ['a limit', edit('max_concurrency: 4', 'max_concurrency: 5')],
    ['a base URL', edit('http://10.0.0.5:8000/v1', 'http://10.0.0.6:8000/v1')],
    ['the Redis host', edit('redis://127.0.0.1:6379', 'redis://10.0.0.9:6379')],
    ["a provider's max_queued", edit('        max_queued: 50            # optional override\n', '')],
  ])('changes with %s', (_what, text) => {
    expect(digestOf(text)).not.toBe(base);
  });

  it('reflects ${VAR} interpolation in settings that are not secrets', () => {
    const text = edit('http://10.0.0.5:8000/v1', '${VLLM_URL}');
    expect(digestOf(text, { ...env, VLLM_URL: 'http://10.0.0.5:8000/v1' })).toBe(base);
    expect(digestOf(text, { ...env, VLLM_URL: 'http://10.0.0.7:8000/v1' })).not.toBe(base);
  });

  it.each([
    ['the client key', { ...env, EDGE_API_KEY: 'another-client-key' }],
    ['the upstream key', { ...env, VLLM_KEY: 'sk-another' }],
  ])('does not depend on %s, so no key can be tested against it', (_what, vars) => {
    expect(digestOf(example, vars)).toBe(base);
  });

  it('does not depend on passwords, users or query values in URLs', () => {
    const withPassword = edit('redis://127.0.0.1:6379', 'redis://edge:${REDIS_PASSWORD}@127.0.0.1:6379');
    expect(digestOf(withPassword, { ...env, REDIS_PASSWORD: 'one' })).toBe(
      digestOf(withPassword, { ...env, REDIS_PASSWORD: 'two' }),
    );
    const withCliEnv = edit(
      'timeout_ms: 120000\n    providers',
      'timeout_ms: 120000\n        env: { TOKEN: "${VLLM_KEY}" }\n    providers',
    );
    expect(digestOf(withCliEnv, { ...env, VLLM_KEY: 'a' })).toBe(digestOf(withCliEnv, { ...env, VLLM_KEY: 'b' }));
  });

  it('is the same for the status exporter, which loads the file without the gateway-only secrets', () => {
    expect(digestOf(example, {}, { unsetAllowedAt: GATEWAY_ONLY_SECRETS })).toBe(base);
  });
});

describe('loading with unsetAllowedAt (the status exporter, README "Kubernetes")', () => {
  it('keeps an unset ${VAR} as written in the settings named, and still refuses one anywhere else', () => {
    const loaded = parseConfigText(example, {}, 'edge.yaml', { unsetAllowedAt: GATEWAY_ONLY_SECRETS });
    if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
    expect(loaded.config.gateway.api_keys).toEqual(['${EDGE_API_KEY}']);
    expect(loaded.config.nodes[0].adapters[0]).toMatchObject({ api_key: '${VLLM_KEY}' });

    const elsewhere = parseConfigText(edit('http://10.0.0.5:8000/v1', '${VLLM_URL}'), {}, 'edge.yaml', {
      unsetAllowedAt: GATEWAY_ONLY_SECRETS,
    });
    expect(elsewhere.ok ? [] : elsewhere.problems.map((p) => `${p.path}: ${p.message}`)).toContain(
      'nodes[0].adapters[0].base_url: environment variable VLLM_URL is not set',
    );
    const statusKey = parseConfigText(
      edit('  interval_ms: 5000\nnodes', '  interval_ms: 5000\n  api_keys: ["${STATUS_KEY}"]\nnodes'),
      {},
      'edge.yaml',
      { unsetAllowedAt: GATEWAY_ONLY_SECRETS },
    );
    expect(statusKey.ok ? [] : statusKey.problems.map((p) => p.path)).toEqual(['status.api_keys[0]']);
  });

  it('without it, every unset ${VAR} is a problem (the gateway)', () => {
    const loaded = parseConfigText(example, {}, 'edge.yaml');
    expect(loaded.ok ? [] : loaded.problems.map((p) => p.path)).toEqual([
      'gateway.api_keys[0]',
      'nodes[0].adapters[0].api_key',
    ]);
  });
});
