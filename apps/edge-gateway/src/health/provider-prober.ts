import { queueProviders, type HealthStore } from '@iop/dispatch';
import { usablePoolProvider, type AdapterConfig, type EdgeConfig } from '@iop/validate';
import type { Logger } from 'pino';
import type { AdapterRegistry } from '../adapters/adapter-registry';

/**
 * Active health probes (docs/architecture.md, "Provider health"): every `health.interval_ms`, the
 * adapter of each usable pool provider (`usablePoolProvider`, the rule routing applies) is probed
 * (the adapter's own `probePath`, `health.timeout_ms`); a 2xx is a success, anything
 * else a failure (with its reason), recorded in the shared `HealthStore`, whose cache is then
 * refreshed. A passing probe never brings back a provider that failing requests took out (that takes
 * a trial request). One probe per adapter per round, whatever the number of providers on it.
 * Timers are unref'd and stopped by `stop()`.
 */
export class ProviderProber {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private stopped = false;

  constructor(
    private readonly deps: { config(): EdgeConfig; adapters: AdapterRegistry; health: HealthStore; logger: Logger },
  ) {}

  start(): void {
    this.stopped = false;
    this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** One probe round; exposed for tests. Never throws. */
  async probeOnce(): Promise<void> {
    const config = this.deps.config();
    const { timeout_ms } = config.health;
    const byAdapter = new Map<string, { nodeId: string; adapter: AdapterConfig; providers: string[] }>();
    for (const node of config.nodes) {
      for (const provider of node.providers) {
        const use = usablePoolProvider(node, provider, config.queue);
        if (!use.usable) continue;
        const key = `${node.id}/${use.adapter.id}`;
        const entry = byAdapter.get(key) ?? { nodeId: node.id, adapter: use.adapter, providers: [] };
        entry.providers.push(provider.id);
        byAdapter.set(key, entry);
      }
    }
    await Promise.all(
      [...byAdapter.values()].map(async ({ nodeId, adapter, providers }) => {
        const live = this.deps.adapters.get(nodeId, adapter);
        const path = live.probePath;
        if (!path || !live.probe) return;
        let ok = false;
        let reason: string | undefined;
        try {
          const status = await live.probe(AbortSignal.timeout(timeout_ms));
          ok = status >= 200 && status < 300;
          if (!ok) reason = `GET ${path} answered ${status}`;
        } catch (err) {
          ok = false;
          const e = err as { name?: string; code?: string; cause?: { code?: string } };
          reason = `GET ${path} ${e.name === 'TimeoutError' ? `timed out after ${timeout_ms} ms` : `failed (${e.code ?? e.cause?.code ?? 'connection error'})`}`;
        }
        await Promise.all(providers.map((id) => this.deps.health.record(id, ok, reason)));
      }),
    );
    await this.deps.health.refresh(queueProviders(config).map((p) => p.providerId));
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.probeOnce()
        .catch((err: unknown) => this.deps.logger.warn({ err: (err as Error).message }, 'health probe round failed'))
        .finally(() => this.schedule(this.deps.config().health.interval_ms));
    }, delayMs);
    this.timer.unref();
  }
}
