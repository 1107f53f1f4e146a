/**
 * The clients of the flow-control chaos run ({@link flowChaosYaml}), in `tag` order: a client's index is
 * the fake upstream's `tag` knob its calls carry, so the upstream's call journal tells who sent each
 * call. All in band 0 with weight 1 (README "Clients, priority and fair share").
 */
export const FLOW_CLIENTS = ['flooder', 'polite', 'capped', 'budgeted'] as const;

/** One of {@link FLOW_CLIENTS}. */
export type FlowClient = (typeof FLOW_CLIENTS)[number];

/**
 * The pool providers of the flow-control chaos run: public model, upstream model (one per provider,
 * so the meter's and the journal's counts per model are the provider's), `max_concurrency` and its
 * own `max_queued` (places in line; the queue's default when absent).
 */
export const FLOW_PROVIDERS = [
  // `storm`: 2 slots and 4 places in line, 6 places in all: full at once under a retry storm.
  { id: 'st', model: 'storm', upstream: 'up-st', limit: 2, maxQueued: 4 },
  // `wide`: 8 slots, above every cap `capped` is given (validate refuses a cap above every pool's total).
  { id: 'w1', model: 'wide', upstream: 'up-w1', limit: 4 },
  { id: 'w2', model: 'wide', upstream: 'up-w2', limit: 4 },
  // `metered`: where `budgeted` spends its tokens.
  { id: 'm1', model: 'metered', upstream: 'up-m1', limit: 4 },
] as const;

/** The terms a reload changes: `capped`'s `max_in_flight` (none when absent) and `budgeted`'s `tokens_per_minute`. */
export interface FlowTerms {
  cap?: number;
  tokensPerMinute: number;
}

/**
 * The config of every replica of the flow-control chaos run (key of client `x`: `k-x`);
 * `${PREFIX}` and `${UPSTREAM}` come from the environment. `queue.max_wait_ms` 15 s: no request of
 * the run waits that long unless a cap or a share is broken.
 */
export const flowChaosYaml = (terms: FlowTerms): string => `
version: 1
gateway:
  request_timeout_ms: 20000
  clients:
    - { id: flooder, keys: [k-flooder] }
    - { id: polite, keys: [k-polite] }
    - { id: capped, keys: [k-capped]${terms.cap === undefined ? '' : `, max_in_flight: ${terms.cap}`} }
    - { id: budgeted, keys: [k-budgeted], tokens_per_minute: ${terms.tokensPerMinute} }
queue: { prefix: "\${PREFIX}", max_wait_ms: 15000, max_queued: 200 }
health: { interval_ms: 60000, unhealthy_after: 1000 }
nodes:
  - id: n
    adapters:
      - { id: up, type: openai_compat, base_url: "\${UPSTREAM}" }
    providers:
${FLOW_PROVIDERS.map((p) => `      - { id: ${p.id}, category: openai_compat, adapter: up, models: [{ name: ${p.model}, upstream: ${p.upstream} }], max_concurrency: ${p.limit}${'maxQueued' in p ? `, max_queued: ${p.maxQueued}` : ''} }`).join('\n')}
`;
