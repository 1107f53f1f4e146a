/** Knobs of the `flow` scenario (`--flow-*` flags). */
export interface FlowOptions {
  /** Seconds of the mixed run. */
  seconds: number;
  /** Gateway replicas on the scenario's Redis. */
  replicas: number;
  /** How long the upstream holds each call, ms: with two providers of one slot, about 2000 / holdMs grants per second. */
  holdMs: number;
}

/**
 * The clients of the run, in `tag` order (a call's tag is its client's index, so the upstream's
 * journal tells who sent it): a higher band, two pairs in band 0 (equal weights, one keeping 10× the
 * other's requests outstanding; weights 3 and 1), all backlogged, and a sheddable band.
 * `lanes`: requests each keeps outstanding; `pauseMs`: the higher band's rest between two requests
 * of a lane, so that band comes and goes. Any lane rests {@link RETRY_PAUSE_MS} after an answer
 * other than 200 (batch's refusals; a gateway that stopped answering is not hammered).
 */
export const FLOW_BENCH_CLIENTS = [
  { id: 'hi', band: 5, weight: 1, lanes: 4, pauseMs: [50, 300] },
  { id: 'heavy', band: 0, weight: 1, lanes: 50 },
  { id: 'light', band: 0, weight: 1, lanes: 5 },
  { id: 'w3', band: 0, weight: 3, lanes: 20 },
  { id: 'w1', band: 0, weight: 1, lanes: 20 },
  { id: 'batch', band: -1, weight: 1, lanes: 6 },
] as const;

/** A lane's rest after an answer other than 200, ms. */
export const RETRY_PAUSE_MS = 100;

export type FlowClientId = (typeof FLOW_BENCH_CLIENTS)[number]['id'];

/** Places in line per provider: the band-0 and higher lanes fit in the two providers' lines, batch's do not. */
const MAX_QUEUED = 50;

/**
 * edge.yaml of the run: the {@link FLOW_BENCH_CLIENTS} (key `flow-<id>`), one pool `flow` of two
 * providers of one slot each on the journaling upstream (upstream models `up-p1`, `up-p2`, so the
 * journal names the provider), `max_queued` {@link MAX_QUEUED} each, and waits longer than the run.
 */
export function flowYaml(upstreamV1: string, seconds: number): string {
  const clients = FLOW_BENCH_CLIENTS.map(
    (c) => `    - { id: ${c.id}, keys: [flow-${c.id}], priority: ${c.band}, weight: ${c.weight} }`,
  ).join('\n');
  const waitMs = (seconds + 60) * 1000;
  const provider = (id: string) =>
    `      - { id: ${id}, category: openai_compat, adapter: up, models: [{ name: flow, upstream: up-${id} }], max_concurrency: 1 }`;
  return `version: 1
gateway:
  request_timeout_ms: ${waitMs + 30_000}
  clients:
${clients}
queue: { backend: redis, prefix: iop-bench-flow, max_wait_ms: ${waitMs}, max_queued: ${MAX_QUEUED} }
health: { interval_ms: 60000 }
nodes:
  - id: n
    adapters:
      - { id: up, type: openai_compat, base_url: ${JSON.stringify(upstreamV1)} }
    providers:
${provider('p1')}
${provider('p2')}
`;
}

/** What each client's requests got: HTTP status (0: no answer) → count, and `queue_full` refusals. */
export type FlowAnswers = Record<FlowClientId, { ok: number; queueFull: number; other: number }>;
