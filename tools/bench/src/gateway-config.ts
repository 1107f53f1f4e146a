/** Public model name every scenario asks for. */
export const BENCH_MODEL = 'bench-model';

/**
 * `max_concurrency` of the benchmark's one provider: far above any load the bench applies (64
 * connections, 1,000 open streams), so a request never waits for a lease and the figures show the
 * cost of admission, not queueing.
 */
export const BENCH_MAX_CONCURRENCY = 2000;

/** What differs between the gateway variants of the benchmark. */
export interface BenchGatewayConfig {
  /** The fake upstream's OpenAI base URL, e.g. `http://127.0.0.1:PORT/v1`. */
  upstreamUrl: string;
  /** Queue backend (README "Queue backend"): `memory` (one process) or `redis` (exact across replicas). */
  backend: 'memory' | 'redis';
  /** Redis key prefix, so gateway groups on one redis-server do not share queues. @defaultValue 'iop-bench' */
  prefix?: string;
  /**
   * The provider's `max_concurrency`: small for the contended Redis-cost run, where most requests
   * queue. @defaultValue BENCH_MAX_CONCURRENCY
   */
  maxConcurrency?: number;
  /**
   * Configure `gateway.clients` (flow control on: docs/architecture.md, "Clients, priority and fair
   * share"): the {@link BENCH_CLIENTS}, each with a band, a weight and both caps. @defaultValue false
   */
  clients?: boolean;
  /**
   * With `clients`: each client also has `tokens_per_minute` and `tokens_per_day` ({@link BENCH_BUDGETS}),
   * far above what the bench sends, so every request reserves and reconciles tokens and none is refused
   * (docs/architecture.md, "Token budgets"). @defaultValue false
   */
  budgets?: boolean;
}

/** Token budgets of each bench client when `budgets` is on: never reached by a bench run. */
export const BENCH_BUDGETS = { tokensPerMinute: 1_000_000_000, tokensPerDay: 100_000_000_000 } as const;

/**
 * The clients of a gateway with flow control on: two in band 1 whose weights are 3 and 1, one in band
 * 0 of weight 2, each with `max_in_flight` (the provider's `max_concurrency`: the most a cap may be) and
 * `max_queued`. A load sends their keys in turn, one request after the other (`clientHeaders`).
 */
export const BENCH_CLIENTS = [
  { id: 'bench-a', key: 'bench-a-key', priority: 1, weight: 3 },
  { id: 'bench-b', key: 'bench-b-key', priority: 1, weight: 1 },
  { id: 'bench-c', key: 'bench-c-key', priority: 0, weight: 2 },
] as const;

/** One `authorization` header per client of {@link BENCH_CLIENTS}, for `FixedLoadSpec.rotatingHeaders`. */
export function clientHeaders(): Record<string, string>[] {
  return BENCH_CLIENTS.map((c) => ({ authorization: `Bearer ${c.key}` }));
}

/**
 * edge.yaml of a gateway under test: one node, one `openai_compat` adapter on the fake upstream,
 * and one pool provider serving `bench-model`. Pooled on purpose: the request takes
 * a lease, which is the path the targets are about.
 */
export function benchGatewayYaml(cfg: BenchGatewayConfig): string {
  const mc = cfg.maxConcurrency ?? BENCH_MAX_CONCURRENCY;
  const budgets = cfg.budgets
    ? `, tokens_per_minute: ${BENCH_BUDGETS.tokensPerMinute}, tokens_per_day: ${BENCH_BUDGETS.tokensPerDay}`
    : '';
  const clients = cfg.clients
    ? `  clients:\n${BENCH_CLIENTS.map(
        (c) =>
          `    - { id: ${c.id}, keys: [${c.key}], priority: ${c.priority}, weight: ${c.weight}, max_in_flight: ${mc}, max_queued: ${BENCH_MAX_CONCURRENCY}${budgets} }\n`,
      ).join('')}`
    : '';
  return `version: 1
gateway:
  request_timeout_ms: 30000
${clients}queue:
  backend: ${cfg.backend}
  prefix: ${cfg.prefix ?? 'iop-bench'}
  max_wait_ms: 30000
  max_queued: ${BENCH_MAX_CONCURRENCY}
nodes:
  - id: bench-node
    adapters:
      - { id: upstream, type: openai_compat, base_url: ${JSON.stringify(cfg.upstreamUrl)} }
    providers:
      - { id: bench-pool, category: openai_compat, adapter: upstream, models: [${BENCH_MODEL}], max_concurrency: ${mc} }
`;
}
