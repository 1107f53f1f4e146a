import type { JudgedCall } from '@iop/fake-upstream';

/**
 * The clients of the flow-control fleet (`flowYaml`), in tag order: a client's index is the `tag`
 * knob its calls carry to the fake upstream, so the upstream's journal tells who sent each call.
 */
export const FLOW_CLIENTS = [
  { id: 'hi', band: 5, settings: 'priority: 5' },
  { id: 'mid', band: 0, settings: '' },
  { id: 'lo', band: -3, settings: 'priority: -3' },
  { id: 'heavy', band: 0, settings: '' },
  { id: 'light', band: 0, settings: '' },
  { id: 'w3', band: 0, settings: 'weight: 3' },
  { id: 'w1', band: 0, settings: '' },
  { id: 'capped', band: 0, settings: 'max_in_flight: 2' },
  { id: 'batch', band: -1, settings: 'priority: -1' },
] as const;

export type FlowClientId = (typeof FLOW_CLIENTS)[number]['id'];

/**
 * A fleet file with the {@link FLOW_CLIENTS} (key `k-<id>`) and three pools on `${UPSTREAM}`, prefix
 * `${PREFIX}`; each provider has its own upstream model name, so the journal names the provider:
 * - `flow`: `p1`, `p2`, one slot each (upstream `up-p1`, `up-p2`): grants one at a time per provider;
 * - `wide`: `q1`, `q2`, two slots each (`up-q1`, `up-q2`): four slots, above `capped`'s two;
 * - `shed`: `s1`, one slot and two places in line (`up-s1`).
 * With `cluster`, `queue.cluster: true`: each pool on a hash tag of its own.
 */
export function flowYaml(opts: { cluster?: boolean } = {}): string {
  const clients = FLOW_CLIENTS.map(
    (c) => `    - { id: ${c.id}, keys: [k-${c.id}]${c.settings ? `, ${c.settings}` : ''} }`,
  ).join('\n');
  const provider = (id: string, model: string, mc: number, extra = '') =>
    `      - { id: ${id}, category: openai_compat, adapter: up, models: [{ name: ${model}, upstream: up-${id} }], max_concurrency: ${mc}${extra} }`;
  return `
version: 1
gateway:
  request_timeout_ms: 60000
  clients:
${clients}
queue: { prefix: "\${PREFIX}", max_wait_ms: 60000, max_queued: 200, cluster: ${opts.cluster ?? false} }
health: { interval_ms: 60000 }
nodes:
  - id: n
    adapters:
      - { id: up, type: openai_compat, base_url: "\${UPSTREAM}" }
    providers:
${provider('p1', 'flow', 1)}
${provider('p2', 'flow', 1)}
${provider('q1', 'wide', 2)}
${provider('q2', 'wide', 2)}
${provider('s1', 'shed', 1, ', max_queued: 2')}
`;
}

/** The answer of one request: HTTP status (0 when the connection failed) and the error code. */
export interface FlowAnswer {
  status: number;
  code?: string;
}

/**
 * One chat completion from `client` (its key, its tag) for `model` to the gateway at `url`, held
 * `holdMs` at the upstream. Never rejects: a failed connection is status 0.
 */
export async function sendAs(
  url: string,
  client: FlowClientId,
  model: string,
  holdMs: number,
  signal?: AbortSignal,
): Promise<FlowAnswer> {
  const tag = FLOW_CLIENTS.findIndex((c) => c.id === client);
  try {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer k-${client}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'x' }], fake: { delay_ms: holdMs, tag } }),
      signal,
    });
    const body = await res.text();
    if (res.status === 200) return { status: 200 };
    return { status: res.status, code: (JSON.parse(body) as { error?: { code?: string } }).error?.code };
  } catch {
    return { status: 0 };
  }
}

/**
 * Keeps `outstanding` requests of `client` in flight (each answered one replaced at once, the
 * replicas taken in turn) until `stop` aborts; resolves to the answers.
 */
export async function keepBacklogged(
  urls: readonly string[],
  client: FlowClientId,
  model: string,
  outstanding: number,
  holdMs: number,
  stop: AbortSignal,
): Promise<FlowAnswer[]> {
  const answers: FlowAnswer[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: outstanding }, async () => {
      while (!stop.aborted) answers.push(await sendAs(urls[next++ % urls.length], client, model, holdMs, stop));
    }),
  );
  return answers;
}

/** The calls of `clients` only. */
export const callsOf = (calls: readonly JudgedCall[], ...clients: FlowClientId[]) =>
  calls.filter((c) => (clients as string[]).includes(c.client));
