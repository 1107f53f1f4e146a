import type { AdapterConfig } from '@iop/validate';
import type { Adapter, AdapterFactory } from './adapter';
import { CliAdapter } from './cli/cli-adapter';
import { OllamaAdapter } from './ollama/ollama-adapter';
import { OpenAiCompatAdapter } from './openai-compat/openai-compat-adapter';

/** Builds the adapter of a configured adapter instance by its `type` (DESIGN §1). */
export const createAdapter: AdapterFactory = (config: AdapterConfig): Adapter => {
  switch (config.type) {
    case 'cli':
      return new CliAdapter(config);
    case 'ollama':
      return new OllamaAdapter(config);
    case 'vllm':
    case 'openai_compat':
      return new OpenAiCompatAdapter(config);
  }
};

/**
 * One live adapter per configured adapter instance, created on first use (no I/O at construction,
 * so `createApp` stays free of it). Adapters are keyed by node, id and settings, so a config
 * refresh that leaves an adapter unchanged keeps its sockets, and one that changes it (a rotated
 * `api_key`) gets a fresh adapter while requests already running finish on the old one. Replaced
 * adapters are closed by `close()` at shutdown, never under a running request.
 */
export class AdapterRegistry {
  private readonly byConfig = new WeakMap<AdapterConfig, Adapter>();
  private readonly byKey = new Map<string, Adapter>();

  constructor(private readonly factory: AdapterFactory = createAdapter) {}

  /** The adapter for `config` on node `nodeId`. */
  get(nodeId: string, config: AdapterConfig): Adapter {
    const known = this.byConfig.get(config);
    if (known) return known;
    const key = `${nodeId}\u0000${JSON.stringify(config)}`;
    let adapter = this.byKey.get(key);
    if (!adapter) {
      adapter = this.factory(config);
      this.byKey.set(key, adapter);
    }
    this.byConfig.set(config, adapter);
    return adapter;
  }

  /** Closes every adapter (sockets, child processes). */
  async close(): Promise<void> {
    await Promise.all([...this.byKey.values()].map((a) => a.close().catch(() => undefined)));
    this.byKey.clear();
  }
}
