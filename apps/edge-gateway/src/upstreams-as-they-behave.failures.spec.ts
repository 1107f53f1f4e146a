import type { HealthStore } from '@iop/dispatch';
import type { FakeUpstream } from '@iop/fake-upstream';
import OpenAI from 'openai';
import type { TestGateway } from './testing/gateway-harness';
import { requestBody, post, errorOf, statusOf, upstreamBehaviourFixture } from './testing/upstream-behaviour';

/**
 * Upstreams and clients as they really behave on the memory backend (README "Errors", "Failover", "Provider health"):
 * an upstream that fails: a reset, a short body or a redirect, a 429, a client error it reports, an answer over the
 * cap. Shared setup: `testing/upstream-behaviour.ts`.
 */

describe('upstreams and clients as they really behave (memory backend)', () => {
  let bad: FakeUpstream;
  let good: FakeUpstream;
  let gateway: TestGateway;
  let health: HealthStore;

  const fixture = upstreamBehaviourFixture(() => gateway);
  beforeAll(() => {
    ({ good } = fixture.upstreams());
  });
  const start = async (...args: Parameters<typeof fixture.start>) => {
    ({ bad, gateway, health } = await fixture.start(...args));
  };

  describe('an upstream that resets the connection before its first byte', () => {
    it.each([
      ['chat stream', 'chat', true],
      ['chat JSON', 'chat', false],
      ['Responses stream, passed through', 'responses', true],
      ['Responses JSON, passed through', 'responses', false],
      ['embeddings', 'embeddings', false],
    ] as const)('%s to a single provider: 502 upstream_error, booked', async (_what, endpoint, stream) => {
      await start();
      const res = await post(gateway, endpoint, requestBody(endpoint, 'vm', stream, { reset_before_body: 1 }));
      expect(res.status).toBe(502);
      expect(errorOf(res)).toMatchObject({ code: 'upstream_error', type: 'server_error' });
      expect(errorOf(res).message).toMatch(/request id [0-9a-f-]{36}/);
      expect(health.unhealthy().has('vl')).toBe(true);
    });

    it.each([
      ['Responses stream, translated (Ollama)', 'responses', true],
      ['Responses JSON, translated (Ollama)', 'responses', false],
      ['embeddings (Ollama)', 'embeddings', false],
    ] as const)('%s: 502 upstream_error, booked', async (_what, endpoint, stream) => {
      await start();
      const res = await post(gateway, endpoint, requestBody(endpoint, 'om', stream, { reset_before_body: 1 }));
      expect(res.status).toBe(502);
      expect(errorOf(res).code).toBe('upstream_error');
      expect(health.unhealthy().has('ol')).toBe(true);
    });

    it.each([
      ['chat stream', 'chat', true],
      ['chat JSON', 'chat', false],
      ['Responses', 'responses', true],
      ['embeddings', 'embeddings', false],
    ] as const)(
      'in a pool (%s): fails over to the sibling, which answers; the resetting provider is booked',
      async (_what, endpoint, stream) => {
        await start();
        const res = await post(gateway, endpoint, requestBody(endpoint, 'pm', stream));
        expect(res.status).toBe(200);
        expect(res.headers.get('x-iop-resource')).toBe('pb');
        expect(bad.stats().total).toBe(1);
        expect(health.unhealthy().has('pa')).toBe(true);
        // The reason names what the upstream did, never the gateway's own 502.
        const reason = health.views().get('pa')?.reason;
        expect(reason).toMatch(
          /^1 request failed: upstream (could not be reached|closed the connection|stream failed)/,
        );
        expect(reason).not.toContain('502');
      },
    );
  });

  describe('issue-9 faults of an upstream answer: a body short of its Content-Length, a redirect', () => {
    it.each([
      ['Content-Length 1000, 11 bytes sent', { short_body: 11 }],
      ['302', { redirect: 302 }],
      ['307', { redirect: 307 }],
    ] as const)(
      '%s: 502 upstream_error counted against the provider, never a 500 or the 3xx itself; in a pool, failover',
      async (_what, knobs) => {
        await start({}, knobs);
        for (const model of ['vm', 'om', 'cm']) {
          const res = await post(gateway, 'chat', requestBody('chat', model, false, knobs));
          expect(res.status).toBe(502);
          expect(errorOf(res).code).toBe('upstream_error');
          expect(res.text).not.toContain('internal-host');
        }
        expect([...health.unhealthy()].sort()).toEqual(['co', 'ol', 'vl']);
        const pooled = await post(gateway, 'chat', requestBody('chat', 'pm', false));
        expect(pooled.status).toBe(200);
        expect(pooled.headers.get('x-iop-resource')).toBe('pb');
        expect(health.unhealthy().has('pa')).toBe(true);
      },
    );
  });

  describe('a provider\'s health names what its upstream did (README "Provider health")', () => {
    it.each([
      ['503, chat JSON', 'chat', false, 503],
      ['500, chat stream', 'chat', true, 500],
      ['503, embeddings', 'embeddings', false, 503],
    ] as const)(
      "%s: /status's reason is the upstream's status, not the gateway's 502",
      async (_what, endpoint, stream, status) => {
        await start();
        const res = await post(gateway, endpoint, requestBody(endpoint, 'vm', stream, { status }));
        expect(res.status).toBe(502);
        const vl = (await statusOf(gateway)).find((r) => r.id === 'vl');
        expect(vl?.health).toMatchObject({
          state: 'unhealthy',
          reason: `1 request failed: upstream answered ${status}`,
        });
        expect(Date.parse(vl?.health?.since ?? '')).toBeLessThanOrEqual(Date.now());
      },
    );

    it('a back-off shows since when it began, kept while a later 429 extends it', async () => {
      await start({}, { status: 429, retry_after: 30 });
      const before = Date.now();
      expect((await post(gateway, 'chat', requestBody('chat', 'pm', false))).status).toBe(200);
      const first = (await statusOf(gateway)).find((r) => r.id === 'pa')?.health;
      expect(first).toMatchObject({ state: 'backoff', reason: 'upstream 429 rate_limit_exceeded' });
      const since = Date.parse(first?.since ?? '');
      expect(since).toBeGreaterThanOrEqual(before - 5);
      expect(since).toBeLessThanOrEqual(Date.now());
      await health.backOff('pa', 60, 'upstream 429');
      const extended = (await statusOf(gateway)).find((r) => r.id === 'pa')?.health;
      expect(Date.parse(extended?.retry_at ?? '')).toBeGreaterThan(Date.parse(first?.retry_at ?? ''));
      expect(extended?.since).toBe(first?.since);
    });
  });

  describe('an upstream 429', () => {
    it("reaches the client with the upstream's Retry-After and error type (openai client: RateLimitError), not booked as a failure", async () => {
      await start();
      const res = await post(gateway, 'chat', requestBody('chat', 'vm', false, { status: 429, retry_after: 7 }));
      expect(res.status).toBe(429);
      expect(res.headers.get('retry-after')).toBe('7');
      expect(errorOf(res).type).toBe('rate_limit_error');
      const client = new OpenAI({ baseURL: gateway.baseURL, apiKey: 'x', maxRetries: 0 });
      const err = await client.chat.completions
        .create({
          model: 'cm',
          messages: [{ role: 'user', content: 'x' }],
          fake: { status: 429, retry_after: 7 },
        } as never)
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.RateLimitError);
      expect((err as InstanceType<typeof OpenAI.RateLimitError>).headers?.get('retry-after')).toBe('7');
      expect(health.views().get('vl')).toMatchObject({ state: 'backoff', reason: expect.stringContaining('429') });
    });

    it('in a pool fails over to the sibling and backs the provider off for its Retry-After: 5 requests, the 429 provider called once', async () => {
      await start({}, { status: 429, retry_after: 7 });
      for (let i = 0; i < 5; i++) {
        const res = await post(gateway, 'chat', requestBody('chat', 'pm', false));
        expect(res.status).toBe(200);
        expect(res.headers.get('x-iop-resource')).toBe('pb');
      }
      expect(bad.stats().total).toBe(1);
      expect(good.stats().total).toBe(5);
      const pa = (await statusOf(gateway)).find((r) => r.id === 'pa');
      expect(pa).toMatchObject({
        state: 'unhealthy',
        health: { state: 'backoff', reason: expect.stringContaining('429') },
      });
      const retryAt = Date.parse(pa!.health!.retry_at!);
      expect(retryAt - Date.now()).toBeGreaterThan(5000);
      expect(retryAt - Date.now()).toBeLessThanOrEqual(7000);
    });

    it('answers 429 with the soonest Retry-After when every provider of the model backs off', async () => {
      await start({}, { status: 429, retry_after: 7 });
      await health.backOff('pa', 7, 'upstream 429');
      await health.backOff('pb', 3, 'upstream 429');
      const res = await post(gateway, 'chat', requestBody('chat', 'pm', false));
      expect(res.status).toBe(429);
      expect(Number(res.headers.get('retry-after'))).toBeLessThanOrEqual(3);
    });
  });

  describe("a client's own mistake reported by an upstream never counts against it", () => {
    it('a translated Responses stream whose first event is a context-too-long error: 400 passed on, provider healthy', async () => {
      await start();
      for (const stream of [true, false]) {
        const res = await post(
          gateway,
          'responses',
          requestBody('responses', 'om', stream, { error_event_after: 0, error_event_status: 400 }),
        );
        if (stream) {
          expect(res.status).toBe(400);
          expect(errorOf(res)).toMatchObject({
            code: 'context_length_exceeded',
            message: expect.stringContaining('maximum context length'),
          });
        }
      }
      const again = await post(
        gateway,
        'responses',
        requestBody('responses', 'om', true, { error_event_after: 0, error_event_status: 400 }),
      );
      expect(again.status).toBe(400);
      expect(health.unhealthy().has('ol')).toBe(false);
      expect((await post(gateway, 'chat', requestBody('chat', 'om', false, { status: 400 }))).status).toBe(400);
      expect(health.unhealthy().has('ol')).toBe(false);
    });
  });

  describe('issue-9: a capped answer (gateway.max_response_bytes) and error bodies read to a few KB', () => {
    it('a non-streamed answer over the cap is a 502, not booked; a stream of the same size passes', async () => {
      await start({ maxResponseBytes: 200_000 });
      for (const [endpoint, model] of [
        ['chat', 'vm'],
        ['responses', 'vm'],
        ['responses', 'om'],
        ['embeddings', 'vm'],
      ] as const) {
        const res = await post(gateway, endpoint, requestBody(endpoint, model, false, { body_bytes: 3_000_000 }));
        expect([endpoint, model, res.status]).toEqual([endpoint, model, 502]);
        expect(errorOf(res).message).toContain('gateway.max_response_bytes');
      }
      expect(health.unhealthy().size).toBe(0);
      const stream = await post(gateway, 'chat', requestBody('chat', 'vm', true, { chunks: 30, chunk_bytes: 100_000 }));
      expect(stream.text.length).toBeGreaterThan(3_000_000);
      expect(stream.text.trimEnd().endsWith('data: [DONE]')).toBe(true);
    });

    it('a 500 with a 30 MB body is answered at once from its first KB', async () => {
      await start();
      const started = Date.now();
      const res = await post(
        gateway,
        'chat',
        requestBody('chat', 'vm', false, { status: 500, body_bytes: 30_000_000 }),
      );
      expect(res.status).toBe(502);
      expect(Date.now() - started).toBeLessThan(2000);
    });
  });
});
