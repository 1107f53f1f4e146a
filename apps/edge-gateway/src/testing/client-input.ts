import type { StatusSnapshot } from '@iop/status';
import { MAX_BODY_DEPTH } from '../http/request/json-depth';
import type { TestGateway } from './gateway-harness';

/** Arrays or objects nested `depth` levels deep, as JSON text (built as text: a test must not overflow either). */
export const nested = (shape: 'arrays' | 'objects', depth: number) =>
  shape === 'arrays' ? '['.repeat(depth) + ']'.repeat(depth) : '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);

/** The body: a chat or Responses request whose unknown field `extra` holds `deep` (JSON text). */
export function bodyWith(endpoint: 'chat' | 'responses', model: string, stream: boolean, deep: string): string {
  const head = endpoint === 'chat' ? `"messages":[{"role":"user","content":"x"}]` : `"input":"x"`;
  return `{"model":${JSON.stringify(model)},${head},"stream":${stream},"extra":${deep}}`;
}

/** The path of each completion endpoint. */
export const PATH = { chat: '/v1/chat/completions', responses: '/v1/responses' } as const;

/** POSTs `body` (JSON text, sent as it is) to `path` of `gateway`: its status and text. */
export async function post(
  gateway: TestGateway,
  path: string,
  body: string,
): Promise<{ status: number; text: string }> {
  const res = await fetch(`${gateway.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
  });
  return { status: res.status, text: await res.text() };
}

/** Asserts the OpenAI-shaped 400 of a body nested too deep, naming the top-level field that holds it. */
export function expectTooDeep(res: { status: number; text: string }, param: string): void {
  expect(res.status).toBe(400);
  const body = JSON.parse(res.text) as { error: Record<string, unknown> };
  expect(Object.keys(body)).toEqual(['error']);
  expect(body.error).toEqual({
    message: expect.stringContaining(`${MAX_BODY_DEPTH} levels`),
    type: 'invalid_request_error',
    param,
    code: 'invalid_request_error',
  });
  expect(body.error.message).not.toMatch(/\n\s+at |Maximum call stack/);
}

/** Every resource of the gateway's `/status` as `[id, state]`. */
export const states = async (gateway: TestGateway) =>
  ((await (await fetch(`${gateway.url}/status`)).json()) as StatusSnapshot).nodes.flatMap((n) =>
    n.resources.map((r) => [r.id, r.state]),
  );

/** Two providers of model `m` (vllm `first`, openai_compat `second`); one failure is enough to turn a provider unhealthy. */
export const twoProviders = () => `
version: 1
health: { interval_ms: 60000, unhealthy_after: 1, healthy_after: 2 }
nodes:
  - id: n
    adapters:
      - { id: a, type: vllm, base_url: "\${FIRST}" }
      - { id: b, type: openai_compat, base_url: "\${SECOND}" }
    providers:
      - { id: first, category: vllm, adapter: a, models: [m], max_concurrency: 1 }
      - { id: second, category: openai_compat, adapter: b, models: [m], max_concurrency: 1 }
`;
