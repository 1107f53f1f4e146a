import type { AdapterConfig, AdapterType, EdgeConfig } from '@iop/validate';
import type { Logger } from 'pino';
import type { Adapter, AdapterFactory } from './adapter';
import { CliAdapter } from './cli/cli-adapter';
import { defaultCliHost, gatewayCliHost, type CliHost } from './cli/cli-host';
import { CLI_FIELDS } from './cli/request-fields';
import { OllamaAdapter } from './ollama/ollama-adapter';
import { OLLAMA_FIELDS } from './ollama/request-fields';
import { OpenAiCompatAdapter } from './openai-compat/openai-compat-adapter';
import { OPENAI_COMPAT_FIELDS, VLLM_FIELDS } from './openai-compat/request-fields';
import type { AdapterFieldTables } from './request-fields';

/**
 * How each adapter type carries request fields (README "Request fields per adapter"); each table
 * lives next to its adapter's code. The dispatcher applies it before the call.
 */
export const FIELD_TABLES: Record<AdapterType, AdapterFieldTables> = {
  vllm: VLLM_FIELDS,
  openai_compat: OPENAI_COMPAT_FIELDS,
  ollama: OLLAMA_FIELDS,
  cli: CLI_FIELDS,
};

/** How messages name an adapter type. */
export const ADAPTER_LABEL: Record<AdapterType, string> = {
  vllm: 'a vLLM server',
  openai_compat: 'an OpenAI-compatible server',
  ollama: 'an Ollama server',
  cli: 'a CLI program',
};

/**
 * Builds the adapters of configured adapter instances by their `type` (README "Adapters"); CLI
 * adapters share `cli` (their sandbox and the sweeper of escaped processes).
 */
export function adapterFactory(cli: CliHost): AdapterFactory {
  return (config) => createAdapter(config, cli);
}

/**
 * The gateway's adapter factory: CLI adapters run in the sandbox of `config.gateway.cli_sandbox`
 * with `configFile` hidden, and log to `logger` ({@link gatewayCliHost}).
 */
export function gatewayAdapterFactory(config: EdgeConfig, configFile: string, logger: Logger): AdapterFactory {
  return adapterFactory(gatewayCliHost(config, configFile, logger));
}

/**
 * Builds the adapter of a configured adapter instance by its `type` (README "Adapters"); a CLI
 * adapter gets `cli`, else the default host (the bwrap sandbox, hiding no file).
 */
export const createAdapter = (config: AdapterConfig, cli: CliHost = defaultCliHost()): Adapter => {
  switch (config.type) {
    case 'cli':
      return new CliAdapter(config, cli);
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
