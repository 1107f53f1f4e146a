import { Gauge, Registry } from 'prom-client';
import type { StatusSnapshot } from '../snapshot/snapshot';

/** Labels of every resource series (docs/architecture.md, "Status model"). Their values come from the config, so cardinality is bounded by it. */
export type ResourceLabel = 'node' | 'resource' | 'category';

/** Names of the resource gauges. */
export const RESOURCE_METRICS = {
  inFlight: 'iop_edge_resource_in_flight',
  queued: 'iop_edge_resource_queued',
  maxConcurrency: 'iop_edge_resource_max_concurrency',
  up: 'iop_edge_resource_up',
  clientInFlight: 'iop_edge_client_in_flight',
  clientQueued: 'iop_edge_client_queued',
  clientTokensLimit: 'iop_edge_client_tokens_limit',
  clientTokensReserved: 'iop_edge_client_tokens_reserved',
  clientTokensUsed: 'iop_edge_client_tokens_used',
  clientTokensRemaining: 'iop_edge_client_tokens_remaining',
} as const;

/** Labels of the client series: the pool and the client id, both from the config. */
export type ClientLabel = 'pool' | 'client';

/** Labels of the token budget series: the client id (from the config) and the window (`minute`, `day`). */
export type BudgetLabel = 'client' | 'window';

/**
 * The four resource gauges (docs/architecture.md, "Status model"), registered on one prom-client `Registry`:
 * - `iop_edge_resource_in_flight` (leases held), `iop_edge_resource_queued` (requests waiting),
 *   `iop_edge_resource_max_concurrency` (limit): only for resources whose value is not `null`;
 * - `iop_edge_resource_up`: 1 when `state` is `ready`, else 0; every resource.
 * Labels `node`, `resource`, `category`. Where the snapshot has `pools` (docs/architecture.md,
 * "Clients, priority and fair share"), per pool and client with anything held or waiting:
 * `iop_edge_client_in_flight` and `iop_edge_client_queued`, labelled `pool`, `client` (config ids
 * only). Per window of each client with a token budget whose windows were read (`token_budgets` not
 * `null`; README "Token budgets"): `iop_edge_client_tokens_limit`, `_reserved`, `_used` and
 * `_remaining`, labelled `client`, `window` (tokens; no series while the windows cannot be read).
 * `update` replaces every series, so resources and clients gone disappear from the next scrape.
 */
export class ResourceGauges {
  private readonly inFlight: Gauge<ResourceLabel>;
  private readonly queued: Gauge<ResourceLabel>;
  private readonly maxConcurrency: Gauge<ResourceLabel>;
  private readonly up: Gauge<ResourceLabel>;
  private readonly clientInFlight: Gauge<ClientLabel>;
  private readonly clientQueued: Gauge<ClientLabel>;
  private readonly budget: Record<'limit' | 'reserved' | 'used' | 'remaining', Gauge<BudgetLabel>>;

  constructor(registry: Registry) {
    const labelNames: ResourceLabel[] = ['node', 'resource', 'category'];
    const gauge = (name: string, help: string) =>
      new Gauge<ResourceLabel>({ name, help, labelNames, registers: [registry] });
    this.inFlight = gauge(
      RESOURCE_METRICS.inFlight,
      'Leases held on the resource now (requests being served), across the replicas the counts cover.',
    );
    this.queued = gauge(RESOURCE_METRICS.queued, 'Requests waiting for a lease on the resource now.');
    this.maxConcurrency = gauge(
      RESOURCE_METRICS.maxConcurrency,
      'Leases the resource allows at once (provider max_concurrency).',
    );
    this.up = gauge(RESOURCE_METRICS.up, '1 when the resource is ready, 0 when it is disabled, invalid or unhealthy.');
    const clientGauge = (name: string, help: string) =>
      new Gauge<ClientLabel>({ name, help, labelNames: ['pool', 'client'], registers: [registry] });
    this.clientInFlight = clientGauge(RESOURCE_METRICS.clientInFlight, 'Leases the client holds in the pool now.');
    this.clientQueued = clientGauge(
      RESOURCE_METRICS.clientQueued,
      'Requests of the client waiting in the pool now (parked at max_in_flight included).',
    );
    const budgetGauge = (name: string, help: string) =>
      new Gauge<BudgetLabel>({ name, help, labelNames: ['client', 'window'], registers: [registry] });
    this.budget = {
      limit: budgetGauge(RESOURCE_METRICS.clientTokensLimit, "The client's token budget in the window."),
      reserved: budgetGauge(
        RESOURCE_METRICS.clientTokensReserved,
        'Tokens of the client reserved in the window by requests waiting or in flight.',
      ),
      used: budgetGauge(
        RESOURCE_METRICS.clientTokensUsed,
        'Tokens the finished requests of the client used in the window.',
      ),
      remaining: budgetGauge(
        RESOURCE_METRICS.clientTokensRemaining,
        'Tokens the client can still reserve in the window: limit - reserved - used, at least 0.',
      ),
    };
  }

  /** Replaces every series with the values of `snapshot`; `null` values get no series. */
  update(snapshot: StatusSnapshot): void {
    for (const g of [this.inFlight, this.queued, this.maxConcurrency, this.up]) g.reset();
    for (const g of [this.clientInFlight, this.clientQueued]) g.reset();
    for (const g of Object.values(this.budget)) g.reset();
    for (const c of snapshot.clients ?? []) {
      for (const w of c.token_budgets ?? []) {
        const labels = { client: c.id, window: w.window };
        this.budget.limit.set(labels, w.limit);
        this.budget.reserved.set(labels, w.reserved);
        this.budget.used.set(labels, w.used);
        this.budget.remaining.set(labels, w.remaining);
      }
    }
    for (const pool of snapshot.pools ?? []) {
      for (const c of pool.clients) {
        const labels = { pool: pool.pool, client: c.client };
        this.clientInFlight.set(labels, c.in_flight);
        this.clientQueued.set(labels, c.queued);
      }
    }
    for (const node of snapshot.nodes) {
      for (const r of node.resources) {
        const labels = { node: node.node_id, resource: r.id, category: r.category };
        if (r.in_flight !== null) this.inFlight.set(labels, r.in_flight);
        if (r.queued !== null) this.queued.set(labels, r.queued);
        if (r.max_concurrency !== null) this.maxConcurrency.set(labels, r.max_concurrency);
        this.up.set(labels, r.state === 'ready' ? 1 : 0);
      }
    }
  }
}

/** A fresh `Registry` holding only the resource gauges of `snapshot`. */
export function buildStatusRegistry(snapshot: StatusSnapshot): Registry {
  const registry = new Registry();
  new ResourceGauges(registry).update(snapshot);
  return registry;
}

/**
 * Renders the resource gauges of `snapshot` as Prometheus text exposition format 0.0.4
 * (content type: `Registry.PROMETHEUS_CONTENT_TYPE` of prom-client).
 */
export function renderPrometheus(snapshot: StatusSnapshot): Promise<string> {
  return buildStatusRegistry(snapshot).metrics();
}
