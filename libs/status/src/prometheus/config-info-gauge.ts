import { configDigest, type EdgeConfig } from '@iop/validate';
import { Gauge, type Registry } from 'prom-client';

/** Name of the gauge {@link registerConfigInfoGauge} registers. */
export const CONFIG_INFO_METRIC = 'iop_edge_config_info';

/** Hex digits of the config digest the `hash` label carries (as `config_hash` of `/status` starts). */
export const CONFIG_HASH_LABEL_LENGTH = 12;

/**
 * Registers `iop_edge_config_info{hash="<first 12 hex digits of configDigest>"} 1` on `registry`
 * (README "Metrics, dashboard and traces"): read from `config()` at each scrape, so a reload shows at once; every replica
 * and the status exporter that run the same file with the same environment show the same hash, and
 * no secret goes into it (`configDigest`). Replaces a gauge of the same name already there.
 */
export function registerConfigInfoGauge(registry: Registry, config: () => EdgeConfig): void {
  registry.removeSingleMetric(CONFIG_INFO_METRIC);
  new Gauge({
    name: CONFIG_INFO_METRIC,
    help: 'Always 1; hash is the start of the sha256 of the config as loaded (after ${VAR} interpolation; keys and passwords left out).',
    labelNames: ['hash'] as const,
    registers: [registry],
    collect() {
      this.reset();
      this.set({ hash: configDigest(config()).slice(0, CONFIG_HASH_LABEL_LENGTH) }, 1);
    },
  });
}
