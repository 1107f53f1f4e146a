import { queueProviders, type HealthStore, type ProviderQueue } from '@iop/dispatch';
import { usablePoolProvider, type AdapterConfig, type EdgeConfig } from '@iop/validate';
import type { Logger } from 'pino';
import type { AdapterRegistry } from '../adapters/adapter-registry';
import type { ProbeClock } from './probe-clock';

/**
 * Active health probes (docs/architecture.md, "Provider health"): every `health.interval_ms`, the
 * adapter of each usable pool provider (`usablePoolProvider`, the rule routing applies) is probed
 * (the adapter's own `probePath`, `health.timeout_ms`); a 2xx is a success, anything
 * else a failure (with its reason), recorded in the shared `HealthStore`, whose cache is then
 * refreshed. A passing probe never brings back a provider that failing requests took out (that takes
 * a trial request). One probe per adapter per round, whatever the number of providers on it.
 * A probe that times out is recorded with whether its provider was busy meanwhile: requests in
 * flight (`queue.counts`, fleet-wide on the Redis backend) when the round started or when the probe
 * gave up; the store's rule does not count such a timeout (README "Provider health"). Without a
 * queue, or when it cannot answer within `health.timeout_ms`, a provider is not known to be busy.
 * Every probe is also noted as it came out, busy or not, in `probes` (`ProbeClock`), which weighs a
 * non-streamed request's first-byte timeout (README "Provider health").
 * Timers are unref'd and stopped by `stop()`.
 */
export class ProviderProber {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private stopped = false;

  constructor(
    private readonly deps: {
      config(): EdgeConfig;
      adapters: AdapterRegistry;
      health: HealthStore;
      logger: Logger;
      /** Where the requests in flight on each provider are counted (the gateway's queue). */
      queue?: Pick<ProviderQueue, 'counts'>;
      /** Where each provider's latest probe is noted as it came out, for the dispatch (`ProbeClock`). */
      probes?: ProbeClock;
    },
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
    const busyAtStart = await this.busy(
      [...byAdapter.values()].flatMap((e) => e.providers),
      timeout_ms,
    );
    await Promise.all(
      [...byAdapter.values()].map(async ({ nodeId, adapter, providers }) => {
        const live = this.deps.adapters.get(nodeId, adapter);
        const path = live.probePath;
        if (!path || !live.probe) return;
        let ok = false;
        let reason: string | undefined;
        let timedOut = false;
        try {
          const status = await live.probe(AbortSignal.timeout(timeout_ms));
          ok = status >= 200 && status < 300;
          if (!ok) reason = `GET ${path} answered ${status}`;
        } catch (err) {
          ok = false;
          const e = err as { name?: string; code?: string; cause?: { code?: string } };
          timedOut = e.name === 'TimeoutError';
          reason = `GET ${path} ${timedOut ? `timed out after ${timeout_ms} ms` : `failed (${e.code ?? e.cause?.code ?? 'connection error'})`}`;
        }
        for (const id of providers) this.deps.probes?.note(id, ok);
        const busyAtEnd = timedOut ? await this.busy(providers, timeout_ms) : new Set<string>();
        await Promise.all(
          providers.map((id) => {
            const busy = busyAtStart.has(id) || busyAtEnd.has(id);
            if (timedOut && busy) this.deps.logger.debug({ provider: id, reason }, 'probe timed out while busy');
            return this.deps.health.record(id, ok, reason, timedOut ? { timedOut, busy } : undefined);
          }),
        );
      }),
    );
    await this.deps.health.refresh(queueProviders(config).map((p) => p.providerId));
  }

  /** The providers among `ids` with requests in flight; none known when the queue cannot say within `waitMs`. */
  private async busy(ids: readonly string[], waitMs: number): Promise<Set<string>> {
    const queue = this.deps.queue;
    if (!queue || ids.length === 0) return new Set();
    let timer: NodeJS.Timeout | undefined;
    const gaveUp = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), waitMs)));
    try {
      const counts = await Promise.race([queue.counts(ids), gaveUp]);
      return new Set([...(counts ?? new Map()).entries()].filter(([, c]) => c.inFlight > 0).map(([id]) => id));
    } catch {
      return new Set();
    } finally {
      clearTimeout(timer);
    }
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
