import { MemoryHealthStore } from '@iop/dispatch';
import { startFakeUpstream, type FakeUpstream, fleetYaml } from '@iop/fake-upstream';
import { brotliCompressSync, gzipSync } from 'node:zlib';
import { ARRAY_WEIGHT, MEMBER_WEIGHT, OBJECT_WEIGHT } from './http/request/json-values';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';

/** A JSON array of `n` zeros, as text. */
const zeros = (n: number) => `[${new Array<string>(n).fill('0').join(',')}]`;

/** A body of `endpoint` whose main array holds `items` (JSON text). */
function bodyOf(endpoint: 'chat' | 'responses' | 'embeddings', model: string, stream: boolean, items: string): string {
  const field = endpoint === 'chat' ? 'messages' : 'input';
  return `{"model":${JSON.stringify(model)},"stream":${stream},"${field}":${items}}`;
}

const PATHS = { chat: '/v1/chat/completions', responses: '/v1/responses', embeddings: '/v1/embeddings' } as const;

type Encoding = 'identity' | 'gzip' | 'br';
const encode = (text: string, encoding: Encoding) =>
  encoding === 'gzip' ? gzipSync(text) : encoding === 'br' ? brotliCompressSync(text) : Buffer.from(text);

async function send(gateway: TestGateway, path: string, text: string, encoding: Encoding) {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (encoding !== 'identity') headers['content-encoding'] = encoding;
  const res = await fetch(`${gateway.url}${path}`, { method: 'POST', headers, body: encode(text, encoding) });
  return { status: res.status, text: await res.text() };
}

describe('gateway.max_body_values: a body of too many JSON values is a 413 before it is parsed (README "Security")', () => {
  let upstream: FakeUpstream;
  let gateway: TestGateway;
  const health = new MemoryHealthStore(() => ({ unhealthy_after: 1, healthy_after: 1 }));

  beforeAll(async () => {
    upstream = await startFakeUpstream();
    gateway = await startTestGateway(fleetYaml(), { UPSTREAM: upstream.url, UPSTREAM_KEY: 'k' }, undefined, {
      health,
    });
  });
  afterAll(async () => {
    await gateway.close();
    await upstream.close();
  });

  const cases = (['chat', 'responses', 'embeddings'] as const).flatMap((endpoint) =>
    (['llama', 'qwen', 'echo'] as const).flatMap((model) =>
      [false, true].flatMap((stream) =>
        (['gzip', 'br', 'identity'] as const).map((enc) => [endpoint, model, stream, enc] as const),
      ),
    ),
  );

  it.each(cases)(
    '%s to %s, stream %s, %s: 1.3M zeros are refused naming the setting',
    async (endpoint, model, stream, enc) => {
      upstream.reset();
      const res = await send(gateway, PATHS[endpoint], bodyOf(endpoint, model, stream, zeros(1_300_000)), enc);
      expect(res.status).toBe(413);
      expect(JSON.parse(res.text)).toEqual({
        error: {
          message: expect.stringContaining('gateway.max_body_values'),
          type: 'invalid_request_error',
          param: null,
          code: 'request_too_large',
        },
      });
      expect(upstream.stats().total).toBe(0);
      expect([...health.unhealthy()]).toEqual([]);
    },
  );

  it.each(['chat', 'responses', 'embeddings'] as const)(
    '%s: an object of 300k keys (metadata) is refused: a member weighs MEMBER_WEIGHT values',
    async (endpoint) => {
      upstream.reset();
      const keys = `{${Array.from({ length: 300_000 }, (_, i) => `"k${i}":0`).join(',')}}`;
      const text = bodyOf(endpoint, 'llama', false, endpoint === 'chat' ? '[{"role":"user","content":"x"}]' : '"x"');
      const res = await send(gateway, PATHS[endpoint], `${text.slice(0, -1)},"metadata":${keys}}`, 'gzip');
      expect(res.status).toBe(413);
      expect(res.text).toContain('gateway.max_body_values');
      expect(upstream.stats().total).toBe(0);
    },
  );

  it('the default fits the largest embeddings request OpenAI accepts: 2048 inputs, 300k token ids; and 2048 × 200', async () => {
    for (const ids of [146, 200]) {
      const batch = `[${new Array<string>(2048).fill(zeros(ids)).join(',')}]`;
      const res = await send(gateway, PATHS.embeddings, bodyOf('embeddings', 'llama', false, batch), 'gzip');
      expect(res.status).toBe(200);
      expect((JSON.parse(res.text) as { data: unknown[] }).data).toHaveLength(2048);
    }
    const flat = await send(gateway, PATHS.embeddings, bodyOf('embeddings', 'llama', false, zeros(8192)), 'gzip');
    expect(flat.status).toBe(200);
  });

  it('embeddings of 450,000 one-letter inputs (1.8 KB of gzip) are a 400 naming the 2048-input limit, never forwarded', async () => {
    upstream.reset();
    const text = bodyOf('embeddings', 'llama', false, `[${new Array<string>(450_000).fill('"a"').join(',')}]`);
    const res = await send(gateway, PATHS.embeddings, text, 'gzip');
    expect(res.status).toBe(400);
    expect(JSON.parse(res.text)).toEqual({
      error: {
        message: expect.stringContaining('at most 2048 (OpenAI API reference'),
        type: 'invalid_request_error',
        param: 'input',
        code: 'invalid_request_error',
      },
    });
    expect(upstream.stats().total).toBe(0);
  });

  it('counts exactly at the bound: max_body_values values pass, one more is refused', async () => {
    const small = await startTestGateway(fleetYaml().replace('gateway:\n', 'gateway:\n  max_body_values: 1000\n'), {
      UPSTREAM: upstream.url,
      UPSTREAM_KEY: 'k',
    });
    try {
      // {"model":…,"stream":…,"input":[…]}: 1 + `{` + 2 commas + `[` + (n - 1) commas, and each of
      // the 3 members weighs MEMBER_WEIGHT (its `:` the rest of it).
      const n = 1000 - 2 - OBJECT_WEIGHT - ARRAY_WEIGHT - 3 * (MEMBER_WEIGHT - 1);
      const at = await send(small, PATHS.embeddings, bodyOf('embeddings', 'llama', false, zeros(n)), 'identity');
      expect(at.status).toBe(200);
      const over = await send(small, PATHS.embeddings, bodyOf('embeddings', 'llama', false, zeros(n + 1)), 'identity');
      expect(over.status).toBe(413);
      expect(over.text).toContain('more than 1000 JSON values');
    } finally {
      await small.close();
    }
  });
});
