import type {
  ClientBudgetWindow,
  ClientCounts,
  HealthStore,
  ProviderCounts,
  ProviderQueue,
  QueueClient,
} from '@iop/dispatch';
import { budgetedClients, buildFlowStatus, buildSnapshot, trackedProviderIds, type StatusSnapshot } from '@iop/status';
import { configDigest, type EdgeConfig } from '@iop/validate';
import { Router, type RequestHandler } from 'express';
import type { Logger } from 'pino';
import { GatewayMetrics } from '../observability/gateway-metrics';
import { onlyGet } from './only-get';

/** What the status routes read; a subset of `AppDeps`. */
export interface StatusRouteDeps {
  config(): EdgeConfig;
  queue?: ProviderQueue;
  logger: Logger;
  /** Unhealthy providers show `state: "unhealthy"` (docs/architecture.md, "Status model"). */
  health?: HealthStore;
  /** When the config in force was loaded: with it `/status` carries `config_hash` (`configDigest`) and `config_loaded_at` (README "Operating a running fleet"). */
  configInfo?(): { hash: string; loadedAt: Date };
}

/**
 * This replica's status surface (docs/architecture.md, "Status model", "HTTP surface"):
 * - `GET /status`: the resource-first snapshot with this replica's view of the counts — the queue's
 *   `snapshotCounts()`, providers' and clients' counts read together (process-local for the memory
 *   backend, cluster-wide for redis, one instant per shard tag; `null` counts when there is no queue
 *   or it cannot answer now) — with `pools` and `clients` (`buildFlowStatus`: per pool and client
 *   in_flight, queued, band, and each pool's parked; docs/architecture.md, "Clients, priority and fair share"),
 *   and each budgeted client's `token_budgets` (`clientBudgets`, read beside the counts; `null` when it
 *   fails, without touching the counts; README "Token budgets");
 * - `GET /metrics`: the gateway's Prometheus registry (`GatewayMetrics`) plus the resource gauges.
 * Builds no I/O of its own: it only reads the queue when a request asks. `auth` runs first on both
 * (`statusKeyAuth`: `status.api_keys`, README "Security"); another method than GET or HEAD is then
 * `405 method_not_allowed` with `Allow: GET, HEAD`.
 */
export function statusRoutes(
  deps: StatusRouteDeps,
  metrics: GatewayMetrics,
  auth: RequestHandler = (_req, _res, next) => next(),
): Router {
  const router = Router();

  const snapshot = async (): Promise<StatusSnapshot> => {
    const config = deps.config();
    let counts: Map<string, ProviderCounts> | undefined;
    let clientCounts: ClientCounts[] | undefined;
    let budgets: ClientBudgetWindow[] | undefined;
    if (deps.queue) {
      const budgeted = budgetedClients(config);
      const reading = budgeted.length > 0 ? readBudgets(deps.queue, budgeted, deps.logger) : undefined;
      try {
        // One snapshot: a pool's counts and its clients' of one instant, so its `parked` is exact.
        ({ providers: counts, clients: clientCounts } = await deps.queue.snapshotCounts(trackedProviderIds(config)));
      } catch (err) {
        // Unknown counts are null, never a made-up 0 (docs/architecture.md, "Status model").
        deps.logger.warn({ err: (err as Error).message }, 'status: queue counts unavailable');
      }
      budgets = await reading;
    }
    const health = new Map([...(deps.health?.unhealthy() ?? [])].map((id) => [id, 'unhealthy' as const]));
    const info = deps.configInfo?.();
    const snapshot = buildSnapshot(config, counts, {
      health,
      healthDetails: deps.health?.views(),
      configHash: info && configDigest(config),
      configLoadedAt: info?.loadedAt,
    });
    return { ...snapshot, ...buildFlowStatus(config, counts, clientCounts, budgets) };
  };

  router.get('/status', auth, async (_req, res) => {
    res.setHeader('cache-control', 'no-store');
    res.json(await snapshot());
  });
  router.get('/metrics', auth, async (_req, res) => {
    const text = await metrics.render(await snapshot());
    res.setHeader('cache-control', 'no-store');
    res.type(metrics.contentType).send(text);
  });
  // Another method on a known path: 405 with Allow (README "Errors"), once the status key is checked.
  for (const path of ['/status', '/metrics']) router.all(path, auth, onlyGet(path));
  return router;
}

/** The budgeted clients' windows (`ProviderQueue.clientBudgets`), or undefined (shown as `null`) when the queue cannot read them. */
async function readBudgets(
  queue: ProviderQueue,
  clients: readonly QueueClient[],
  logger: Logger,
): Promise<ClientBudgetWindow[] | undefined> {
  try {
    return await queue.clientBudgets(clients);
  } catch (err) {
    logger.warn({ err: (err as Error).message }, 'status: token budgets unavailable');
    return undefined;
  }
}
