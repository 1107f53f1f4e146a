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
 * One live adapter per configured adapter instance, keyed by node and adapter id, created on first
 * use (no I/O at construction, so `createApp` stays free of it). A changed adapter config (e.g. a
 * rotated api_key) gets a fresh adapter; the old one is closed once it is no longer current.
 */
export class AdapterRegistry {
  private readonly live = new Map<string, { config: AdapterConfig; adapter: Adapter }>();

  constructor(private readonly factory: AdapterFactory = createAdapter) {}

  /** The adapter for `config` on node `nodeId`. */
  get(nodeId: string, config: AdapterConfig): Adapter {
    const key = `${nodeId}/${config.id}`;
    const entry = this.live.get(key);
    if (entry && entry.config === config) return entry.adapter;
    if (entry) void entry.adapter.close().catch(() => undefined);
    const adapter = this.factory(config);
    this.live.set(key, { config, adapter });
    return adapter;
  }

  /** Closes every adapter (sockets, child processes). */
  async close(): Promise<void> {
    await Promise.all([...this.live.values()].map((e) => e.adapter.close().catch(() => undefined)));
    this.live.clear();
  }
}
