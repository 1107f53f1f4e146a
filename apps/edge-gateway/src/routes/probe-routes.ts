import type { ProviderQueue } from '@iop/dispatch';
import { Router } from 'express';
import { Gauge, type Registry } from 'prom-client';
import { onlyGet } from './only-get';

/** Longest `/readyz` and a scrape wait for the queue backend to answer, in ms; a slower backend counts as unreachable. */
export const QUEUE_REACHABLE_TIMEOUT_MS = 250;

/** What `GET /readyz` answers (README "Load balancer settings that matter"). */
export interface Readiness {
  /** This process can answer requests: its config is loaded and it listens (on SIGTERM the listener closes, so a draining replica is not asked). */
  ready: true;
  /** The queue backend as the config names it, and whether it answered now; `null` without a queue. */
  queue: { backend: ProviderQueue['backend']; reachable: boolean } | null;
}

/**
 * Whether `queue`'s backend answers now (Redis `PING` for redis; always for memory), within
 * `timeoutMs`: a paused Redis must not hold a probe or a scrape. Never rejects.
 */
export async function queueReachable(
  queue: ProviderQueue,
  timeoutMs: number = QUEUE_REACHABLE_TIMEOUT_MS,
): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)));
  try {
    return await Promise.race([queue.isReady().catch(() => false), late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The probes (docs/architecture.md, "HTTP surface"):
 * - `GET /healthz`: `{"status":"ok"}` while the process serves;
 * - `GET /readyz`: 200 {@link Readiness} whenever this process can answer. The queue backend's
 *   state is in the body, never in the status: Redis is shared by every replica, so a 503 here
 *   would take every replica out of the load balancer at once, and the load balancer would then
 *   refuse direct (CLI, legacy) routes the replicas still serve, and pooled requests their
 *   `503 queue_unavailable` with `Retry-After` (README "Errors").
 * Another method than GET or HEAD on either is `405 method_not_allowed` with `Allow: GET, HEAD`.
 */
export function probeRoutes(queue: ProviderQueue | undefined): Router {
  const router = Router();
  router.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  router.get('/readyz', async (_req, res) => {
    const readiness: Readiness = {
      ready: true,
      queue: queue ? { backend: queue.backend, reachable: await queueReachable(queue) } : null,
    };
    res.setHeader('cache-control', 'no-store');
    res.json(readiness);
  });
  for (const path of ['/healthz', '/readyz']) router.all(path, onlyGet(path));
  return router;
}

/** Name of the gauge {@link registerQueueReachableGauge} registers. */
export const QUEUE_REACHABLE_METRIC = 'iop_edge_queue_reachable';

/**
 * Registers `iop_edge_queue_reachable{backend}` on `registry`: 1 when the queue backend answered
 * at this scrape ({@link queueReachable}), else 0; no series without a queue. Replaces a gauge of
 * the same name already there (one app per registry).
 */
export function registerQueueReachableGauge(registry: Registry, queue: ProviderQueue | undefined): void {
  registry.removeSingleMetric(QUEUE_REACHABLE_METRIC);
  new Gauge({
    name: QUEUE_REACHABLE_METRIC,
    help: '1 when the queue backend (Redis) answered at this scrape, else 0. Readiness does not depend on it.',
    labelNames: ['backend'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      if (queue) this.set({ backend: queue.backend }, (await queueReachable(queue)) ? 1 : 0);
    },
  });
}
