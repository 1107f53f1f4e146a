import { MemoryHealthStore, type HealthStore } from '@iop/dispatch';
import { startFakeUpstream, type FakeUpstream, type KnobName, ECHO_LLM } from '@iop/fake-upstream';
import type { StatusSnapshot } from '@iop/status';
import { startTestGateway, type TestGateway } from './gateway-harness';

/**
 * What the `upstreams-as-they-behave.*.spec.ts` files share, one topic a file (README "Streaming", "Errors",
 * "Failover", "Provider health", "Request fields per adapter"): real sockets, scripted upstreams, the openai client
 * where a client is involved, on the memory backend. Here: the gateway's config, request bodies, a raw `fetch` of an
 * endpoint, SSE parsing, counts, and the upstreams each file starts. For tests only. The Redis backend and gateway
 * processes: `apps/edge-gateway-e2e/src/upstreams-as-they-behave.redis.spec.ts`.
 */

export type Knobs = Partial<Record<KnobName, number>>;

/**
 * One provider per adapter type on the upstream `${ORIGIN}` (vLLM and Ollama written without `/v1`,
 * as their docs write a server address), a CLI model, and a pool `pm` of `pa` (on `${BAD}`, an
 * upstream that misbehaves on every request) and `pb` (on `${GOOD}`).
 */
export const yaml = (
  opts: { idleMs?: number; maxResponseBytes?: number; requestTimeoutMs?: number; apiKeys?: string[] } = {},
) => `
version: 1
gateway:
  request_timeout_ms: ${opts.requestTimeoutMs ?? 5000}
  stream_idle_timeout_ms: ${opts.idleMs ?? 600}
  max_response_bytes: ${opts.maxResponseBytes ?? 1000000}
  api_keys: ${JSON.stringify(opts.apiKeys ?? [])}
health: { interval_ms: 60000, unhealthy_after: 1, healthy_after: 1, cooldown_ms: 60000 }
nodes:
  - id: n
    adapters:
      - { id: v, type: vllm, base_url: "\${ORIGIN}" }
      - { id: o, type: ollama, base_url: "\${ORIGIN}" }
      - { id: c, type: openai_compat, base_url: "\${ORIGIN}/v1" }
      - { id: bad, type: vllm, base_url: "\${BAD}" }
      - { id: good, type: openai_compat, base_url: "\${GOOD}" }
      - { id: echo, type: cli, command: ["node", ${JSON.stringify(ECHO_LLM)}], timeout_ms: 10000 }
    providers:
      - { id: vl, category: vllm, adapter: v, models: [vm], max_concurrency: 1 }
      - { id: ol, category: ollama, adapter: o, models: [om], max_concurrency: 1 }
      - { id: co, category: openai_compat, adapter: c, models: [cm], max_concurrency: 1 }
      - { id: pa, category: vllm, adapter: bad, models: [pm], max_concurrency: 2 }
      - { id: pb, category: openai_compat, adapter: good, models: [pm], max_concurrency: 2 }
      - { id: cli-p, category: cli, adapter: echo, models: [echo] }
`;

export const PATHS = {
  chat: '/v1/chat/completions',
  responses: '/v1/responses',
  embeddings: '/v1/embeddings',
} as const;
export type Endpoint = keyof typeof PATHS;

export function requestBody(
  endpoint: Endpoint,
  model: string,
  stream: boolean,
  fake: Knobs = {},
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  if (endpoint === 'embeddings') return { model, input: ['hello', 'world'], fake, ...extra };
  const head = endpoint === 'chat' ? { messages: [{ role: 'user', content: 'hello' }] } : { input: 'hello' };
  return { model, ...head, stream, fake, ...extra };
}

export async function post(
  gateway: TestGateway,
  endpoint: Endpoint,
  body: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; text: string; json: () => Record<string, unknown> }> {
  const res = await fetch(`${gateway.url}${PATHS[endpoint]}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: () => JSON.parse(text) as Record<string, unknown> };
}

export const errorOf = (r: { json: () => Record<string, unknown> }) =>
  r.json().error as { message: string; type: string; code: string; param: string | null };

/** SSE events of a body: `{event, data}`, data parsed when it is JSON. */
export function events(text: string): Array<{ event?: string; data: unknown }> {
  return text
    .split(/\n\n/)
    .filter((block) => block.trim() !== '')
    .map((block) => {
      const event = /^event: (.+)$/m.exec(block)?.[1];
      const raw = /^data: (.*)$/m.exec(block)?.[1] ?? '';
      let data: unknown = raw;
      try {
        data = JSON.parse(raw);
      } catch {
        // [DONE]
      }
      return { event, data };
    });
}

/**
 * `in_flight` of provider `id` in the gateway's queue.
 * @throws Error when the queue holds no such provider.
 */
export async function inFlight(gateway: TestGateway, id: string): Promise<number> {
  const counts = (await gateway.queue.counts([id])).get(id);
  if (counts === undefined) throw new Error(`the queue holds no provider ${id}`);
  return counts.inFlight;
}

/** Every resource of the gateway's `GET /status`, all nodes together. */
export const statusOf = async (gateway: TestGateway) =>
  ((await (await fetch(`${gateway.url}/status`)).json()) as StatusSnapshot).nodes.flatMap((n) => n.resources);

/** What `start` made for one test: the misbehaving upstream `${BAD}`, the gateway on `yaml`, its health store. */
export interface StartedGateway {
  bad: FakeUpstream;
  gateway: TestGateway;
  health: HealthStore;
}

/** The upstreams one spec file shares, and how a test starts its gateway on them. */
export interface UpstreamBehaviourFixture {
  /**
   * `${ORIGIN}` (`up`) and `${GOOD}` (`good`), started before the file's first test, reset after each.
   * @throws Error when called before the file's `beforeAll` ran.
   */
  upstreams(): { up: FakeUpstream; good: FakeUpstream };
  /** A new `${BAD}` upstream with `badKnobs` (the previous one closed) and a gateway on `yaml(opts)`. */
  start(opts?: Parameters<typeof yaml>[0], badKnobs?: Knobs): Promise<StartedGateway>;
}

/**
 * Registers, in the calling `describe`, the hooks that start the shared upstreams, close the test's
 * gateway (`current()`, whoever started it) and `${BAD}` after each test, and close the upstreams at
 * the end.
 */
export function upstreamBehaviourFixture(current: () => TestGateway | undefined): UpstreamBehaviourFixture {
  let up: FakeUpstream | undefined;
  let good: FakeUpstream | undefined;
  let bad: FakeUpstream | undefined;

  beforeAll(async () => {
    up = await startFakeUpstream({ name: 'up' });
    good = await startFakeUpstream({ name: 'good' });
  });
  afterEach(async () => {
    await current()?.close();
    await bad?.close();
    up?.reset();
    good?.reset();
  });
  afterAll(async () => {
    await up?.close();
    await good?.close();
  });

  const upstreams = () => {
    if (up === undefined || good === undefined) throw new Error('the shared upstreams start in beforeAll');
    return { up, good };
  };
  return {
    upstreams,
    async start(opts = {}, badKnobs = { reset_before_body: 1 }) {
      const { up, good } = upstreams();
      await bad?.close();
      bad = await startFakeUpstream({ name: 'bad', knobs: badKnobs });
      const health = new MemoryHealthStore(() => ({ unhealthy_after: 1, healthy_after: 1, cooldown_ms: 60_000 }));
      const gateway = await startTestGateway(
        yaml(opts),
        { ORIGIN: up.origin, BAD: bad.url, GOOD: good.url },
        undefined,
        {
          health,
        },
      );
      return { bad, gateway, health };
    },
  };
}
