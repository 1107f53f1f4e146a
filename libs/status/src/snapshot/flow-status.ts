import { queueProviders, type ClientBudgetWindow, type ClientCounts, type ProviderCounts } from '@iop/dispatch';
import { ANONYMOUS_CLIENT, configuredClients, soleClient, type EdgeConfig, type FlowClient } from '@iop/validate';
import { clientTokenBudgets } from './client-budgets';
import type { ClientStatus, PoolStatus } from './snapshot';

/**
 * The flow-control part of `/status` (docs/architecture.md, "Clients, priority and fair share"): per
 * pool its providers, their summed counts and each client's counts there, and per configured client
 * its band, weight, caps and counts summed over the pools. A pool's `queued` is its providers' (the
 * requests waiting for one of its slots); its `parked` is the requests its clients hold back at their
 * `max_in_flight` (the clients' `queued` there minus the pool's `queued`, never below 0; exact when
 * `counts` and `clientCounts` come from one snapshot, `ProviderQueue.snapshotCounts`). A client the config no longer names keeps showing in its pool,
 * as `band` 0, until its requests end. Counts not known (`undefined`) are `null`.
 * With flow control off (`soleClient`: one client in the fleet) the client's counts are its pools'
 * counts, whatever `clientCounts` says: the Redis backend keeps no counts for that client
 * (`QueueClient.solo`). A client with a token budget gets `token_budgets` from `budgets` (the windows
 * `ProviderQueue.clientBudgets` or `readTokenBudgets` read; `null` when they are undefined: not read
 * or failed; README "Token budgets"); a client without one has no such field. Pure; never throws.
 */
export function buildFlowStatus(
  config: EdgeConfig,
  counts: ReadonlyMap<string, ProviderCounts> | undefined,
  clientCounts: readonly ClientCounts[] | undefined,
  budgets?: readonly ClientBudgetWindow[],
): { pools: PoolStatus[]; clients: ClientStatus[] } {
  const configured = configuredClients(config.gateway).map((c) => c.client);
  const known: FlowClient[] = configured.length > 0 ? configured : [ANONYMOUS_CLIENT];
  const order = new Map(known.map((c, i) => [c.id, i]));
  const byPool = new Map<string, PoolStatus>();
  for (const p of queueProviders(config)) {
    const name = p.pool ?? 'pool';
    const pool = byPool.get(name) ?? { pool: name, providers: [], in_flight: 0, queued: 0, parked: 0, clients: [] };
    const c = counts?.get(p.providerId);
    pool.providers.push(p.providerId);
    pool.in_flight = c && pool.in_flight !== null ? pool.in_flight + c.inFlight : null;
    pool.queued = c && pool.queued !== null ? pool.queued + c.queued : null;
    byPool.set(name, pool);
  }
  if (soleClient(config.gateway)) clientCounts = poolCounts(known[0].id, [...byPool.values()], counts);
  const rank = (id: string) => order.get(id) ?? known.length;
  for (const c of [...(clientCounts ?? [])].sort((a, b) => rank(a.clientId) - rank(b.clientId))) {
    if (c.inFlight === 0 && c.queued === 0) continue;
    const band = known.find((k) => k.id === c.clientId)?.priority ?? 0;
    byPool.get(c.pool)?.clients.push({ client: c.clientId, band, in_flight: c.inFlight, queued: c.queued });
  }
  for (const pool of byPool.values()) {
    const waiting = pool.clients.reduce((n, c) => n + c.queued, 0);
    pool.parked = clientCounts && pool.queued !== null ? Math.max(0, waiting - pool.queued) : null;
  }
  const sum = (id: string, of: 'inFlight' | 'queued') =>
    clientCounts ? clientCounts.filter((c) => c.clientId === id).reduce((n, c) => n + c[of], 0) : null;
  const clients = known.map((c): ClientStatus => {
    const tokenBudgets = clientTokenBudgets(c, budgets);
    return {
      id: c.id,
      band: c.priority,
      weight: c.weight,
      max_in_flight: c.maxInFlight ?? null,
      max_queued: c.maxQueued ?? null,
      in_flight: sum(c.id, 'inFlight'),
      queued: sum(c.id, 'queued'),
      ...(tokenBudgets !== undefined ? { token_budgets: tokenBudgets } : {}),
    };
  });
  return { pools: [...byPool.values()], clients };
}

/** The counts of the fleet's only client: its pools' counts (undefined when the queue could not answer). */
function poolCounts(
  clientId: string,
  pools: readonly PoolStatus[],
  counts: ReadonlyMap<string, ProviderCounts> | undefined,
): ClientCounts[] | undefined {
  if (!counts) return undefined;
  return pools.flatMap((p) =>
    p.in_flight === null || p.queued === null
      ? []
      : [{ pool: p.pool, clientId, inFlight: p.in_flight, queued: p.queued }],
  );
}
