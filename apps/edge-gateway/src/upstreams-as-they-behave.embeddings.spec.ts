import { waitUntil } from '@iop/dispatch/testing';
import type { FakeUpstream } from '@iop/fake-upstream';
import OpenAI from 'openai';
import type { TestGateway } from './testing/gateway-harness';
import { requestBody, post, errorOf, inFlight, statusOf, upstreamBehaviourFixture } from './testing/upstream-behaviour';

/**
 * Upstreams and clients as they really behave on the memory backend (README "Embeddings", "Errors"): `/v1/embeddings`,
 * pooled like chat. Shared setup: `testing/upstream-behaviour.ts`.
 */

describe('upstreams and clients as they really behave (memory backend)', () => {
  let up: FakeUpstream;
  let gateway: TestGateway;

  const fixture = upstreamBehaviourFixture(() => gateway);
  beforeAll(() => {
    ({ up } = fixture.upstreams());
  });
  const start = async (...args: Parameters<typeof fixture.start>) => {
    ({ gateway } = await fixture.start(...args));
  };

  describe('/v1/embeddings, pooled like chat', () => {
    it('works with the openai client (base64 by default) through vLLM, Ollama (floats upstream, encoded by the gateway) and OpenAI-compatible providers', async () => {
      await start();
      const client = new OpenAI({ baseURL: gateway.baseURL, apiKey: 'x', maxRetries: 0 });
      const vectors: number[][] = [];
      for (const model of ['vm', 'om', 'cm']) {
        const res = await client.embeddings.create({ model, input: ['hello', 'world'] });
        expect(res.object).toBe('list');
        expect(res.data.map((d) => d.index)).toEqual([0, 1]);
        expect(res.data[0].embedding).toHaveLength(8);
        expect(res.usage.prompt_tokens).toBeGreaterThan(0);
        vectors.push(res.data[0].embedding);
        const floats = await client.embeddings.create({
          model,
          input: 'hello',
          encoding_format: 'float',
          dimensions: 4,
        });
        expect(floats.data[0].embedding).toHaveLength(4);
      }
      // The same text gives the same vector whatever the adapter (float32 precision).
      for (const v of vectors)
        expect(v.map((x) => Math.round(x * 1e4))).toEqual(vectors[0].map((x) => Math.round(x * 1e4)));
      expect(up.stats().lastRequest.om.body).toMatchObject({ encoding_format: 'float' });
    });

    it('takes a lease and queues like chat, fails over, and counts in /status', async () => {
      await start();
      const slow = post(gateway, 'embeddings', requestBody('embeddings', 'cm', false, { delay_ms: 400 }));
      await waitUntil(
        async () => (await inFlight(gateway, 'co')) === 1,
        2000,
        'the first embeddings request to hold the slot',
      );
      const queued = post(gateway, 'embeddings', requestBody('embeddings', 'cm', false));
      await waitUntil(
        async () => (await statusOf(gateway)).find((r) => r.id === 'co')?.queued === 1,
        2000,
        'the second to queue',
      );
      const [a, b] = await Promise.all([slow, queued]);
      expect([a.status, b.status]).toEqual([200, 200]);
      expect(Number(b.headers.get('x-iop-queue-wait-ms'))).toBeGreaterThan(100);
      const pooled = await post(gateway, 'embeddings', requestBody('embeddings', 'pm', false));
      expect(pooled.status).toBe(200);
      expect(pooled.headers.get('x-iop-resource')).toBe('pb');
      expect(await inFlight(gateway, 'co')).toBe(0);
    });

    it('answers 400 naming the endpoint for a CLI model', async () => {
      await start();
      const res = await post(gateway, 'embeddings', { model: 'echo', input: 'x' });
      expect(res.status).toBe(400);
      expect(errorOf(res).message).toContain('/v1/embeddings');
      const bad = await post(gateway, 'embeddings', { model: 'vm' });
      expect(bad.status).toBe(400);
      expect(errorOf(bad).param).toBe('input');
    });
  });
});
