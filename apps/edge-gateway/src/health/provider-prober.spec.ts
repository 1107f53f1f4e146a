import type { HealthStore } from '@iop/dispatch';
import { edgeConfigSchema, type AdapterConfig, type HttpAdapterConfig } from '@iop/validate';
import pino from 'pino';
import type { Adapter } from '../adapters/adapter';
import { AdapterRegistry } from '../adapters/adapter-registry';
import { OllamaAdapter } from '../adapters/ollama/ollama-adapter';
import { OpenAiCompatAdapter } from '../adapters/openai-compat/openai-compat-adapter';
import { ProbeClock } from './probe-clock';
import { ProviderProber } from './provider-prober';

/** A health store that only records what the prober booked. */
function recordingStore(): HealthStore & { booked: string[] } {
  const booked: string[] = [];
  return {
    booked,
    record: async (id: string) => void booked.push(id),
    recordRequest: async () => undefined,
    backOff: async () => undefined,
    claimTrial: async () => false,
    releaseTrial: async () => undefined,
    unhealthy: () => new Set<string>(),
    trialsDue: () => new Set<string>(),
    views: () => new Map(),
    refresh: async () => undefined,
    now: () => Date.now(),
  };
}

describe('ProviderProber', () => {
  it('probes only the providers routing would use: never one whose adapter type does not match its category', async () => {
    // Schema-valid only: validation refuses the mismatch, but the prober must apply the routing rule on its own.
    const config = edgeConfigSchema.parse({
      version: 1,
      nodes: [
        {
          id: 'n',
          adapters: [
            { id: 'v', type: 'vllm', base_url: 'http://127.0.0.1:1/v1' },
            { id: 'o', type: 'ollama', base_url: 'http://127.0.0.1:2' },
          ],
          providers: [
            { id: 'good', category: 'vllm', adapter: 'v', models: ['m'], max_concurrency: 1 },
            { id: 'mistyped', category: 'vllm', adapter: 'o', models: ['m'], max_concurrency: 1 },
          ],
        },
      ],
    });
    const probed: string[] = [];
    const fake = (adapter: AdapterConfig): Adapter =>
      ({
        type: adapter.type,
        probePath: `/probe-of-${adapter.id}`,
        probe: async () => {
          probed.push(adapter.id);
          return 200;
        },
        close: async () => undefined,
      }) as unknown as Adapter;
    const health = recordingStore();
    const prober = new ProviderProber({
      config: () => config,
      adapters: new AdapterRegistry(fake),
      health,
      logger: pino({ level: 'silent' }),
    });
    await prober.probeOnce();
    expect(probed).toEqual(['v']);
    expect(health.booked).toEqual(['good']);
  });

  it('notes every probe as it came out in its ProbeClock, a busy provider\'s timeout too (README "Provider health")', async () => {
    const config = edgeConfigSchema.parse({
      version: 1,
      health: { interval_ms: 1000, timeout_ms: 50 },
      nodes: [
        {
          id: 'n',
          adapters: [
            { id: 'up', type: 'vllm', base_url: 'http://127.0.0.1:1/v1' },
            { id: 'late', type: 'vllm', base_url: 'http://127.0.0.1:2/v1' },
          ],
          providers: [
            { id: 'passes', category: 'vllm', adapter: 'up', models: ['m'], max_concurrency: 1 },
            { id: 'busy', category: 'vllm', adapter: 'late', models: ['m'], max_concurrency: 1 },
          ],
        },
      ],
    });
    const fake = (adapter: AdapterConfig): Adapter =>
      ({
        type: adapter.type,
        probePath: '/health',
        probe: async (signal: AbortSignal) => {
          if (adapter.id === 'up') return 200;
          await new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
          return 200;
        },
        close: async () => undefined,
      }) as unknown as Adapter;
    const probes = new ProbeClock();
    const prober = new ProviderProber({
      config: () => config,
      adapters: new AdapterRegistry(fake),
      health: recordingStore(),
      logger: pino({ level: 'silent' }),
      // `busy` has a request in flight: the store's rule ignores its timeout, the clock does not.
      queue: {
        counts: async (ids = []) => new Map(ids.map((id) => [id, { inFlight: id === 'busy' ? 1 : 0, queued: 0 }])),
      },
      probes,
    });
    // Its probe passed before the load: the late one replaces that.
    probes.note('busy', true);
    await prober.probeOnce();
    expect(probes.passing('passes', config.health)).toBe(true);
    expect(probes.passing('busy', config.health)).toBe(false);
  });

  it('asks each adapter for its probe path: vLLM /health, OpenAI-compatible /v1/models, Ollama /api/version', async () => {
    const http = (type: HttpAdapterConfig['type']) =>
      ({ id: type, type, base_url: 'http://127.0.0.1:1/v1', enabled: true }) as HttpAdapterConfig;
    const adapters = [
      new OpenAiCompatAdapter(http('vllm')),
      new OpenAiCompatAdapter(http('openai_compat')),
      new OllamaAdapter(http('ollama')),
    ];
    expect(adapters.map((a) => a.probePath)).toEqual(['/health', '/v1/models', '/api/version']);
    await Promise.all(adapters.map((a) => a.close()));
  });
});
