import type { HealthStore } from '@iop/dispatch';
import { waitUntil } from '@iop/dispatch/testing';
import type { FakeUpstream } from '@iop/fake-upstream';
import { connect } from 'node:net';
import OpenAI from 'openai';
import type { TestGateway } from './testing/gateway-harness';
import { requestBody, post, events, inFlight, upstreamBehaviourFixture } from './testing/upstream-behaviour';

/**
 * Upstreams and clients as they really behave on the memory backend (README "Streaming", "Errors", "Provider health"):
 * streams: an idle stream cut, a `[DONE]` without its newline, a Responses stream that fails mid-way. Shared setup:
 * `testing/upstream-behaviour.ts`.
 */

describe('upstreams and clients as they really behave (memory backend)', () => {
  let up: FakeUpstream;
  let gateway: TestGateway;
  let health: HealthStore;

  const fixture = upstreamBehaviourFixture(() => gateway);
  beforeAll(() => {
    ({ up } = fixture.upstreams());
  });
  const start = async (...args: Parameters<typeof fixture.start>) => {
    ({ gateway, health } = await fixture.start(...args));
  };

  describe('a stream where no byte moves for gateway.stream_idle_timeout_ms is cut', () => {
    it('a client that never reads a 20 MB stream loses it: upstream aborted, lease released, and the next request is served', async () => {
      await start({ idleMs: 500 });
      // A raw socket that sends the request and then reads nothing at all.
      const { port } = new URL(gateway.url);
      const socket = connect(Number(port), '127.0.0.1');
      await new Promise<void>((r) => socket.once('connect', () => r()));
      socket.pause();
      const body = JSON.stringify(requestBody('chat', 'cm', true, { chunks: 200, chunk_bytes: 100_000 }));
      socket.write(
        `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
      await waitUntil(async () => (await inFlight(gateway, 'co')) === 1, 2000, 'the stream to hold the slot');
      const cutAt = Date.now();
      await waitUntil(
        async () => (await inFlight(gateway, 'co')) === 0,
        3000,
        'the stalled stream to be cut and its lease released',
      );
      expect(Date.now() - cutAt).toBeLessThan(2500);
      await waitUntil(() => up.stats().aborted === 1, 2000, 'the upstream call to be aborted');
      const next = await post(gateway, 'chat', requestBody('chat', 'cm', false));
      expect(next.status).toBe(200);
      // A client that stops reading is not the provider's fault.
      expect(health.views().get('co')?.state ?? 'healthy').toBe('healthy');
      socket.destroy();
    });

    it.each([
      ['chat, vLLM', 'chat', 'vm', 'vl'],
      ['chat, Ollama', 'chat', 'om', 'ol'],
      ['Responses passed through (vLLM)', 'responses', 'vm', 'vl'],
      ['Responses translated (Ollama)', 'responses', 'om', 'ol'],
    ] as const)(
      'an upstream silent mid-stream (%s): the client gets the error event, the lease is released, the provider booked',
      async (_what, endpoint, model, provider) => {
        await start({ idleMs: 400 });
        const started = Date.now();
        const res = await post(gateway, endpoint, requestBody(endpoint, model, true, { chunks: 5, stall_after: 1 }));
        expect(Date.now() - started).toBeLessThan(3000);
        expect(res.status).toBe(200);
        const all = events(res.text);
        expect(res.text).not.toContain('[DONE]');
        if (endpoint === 'chat') {
          expect(all.at(-1)?.data).toMatchObject({
            error: { code: 'upstream_timeout', message: expect.stringContaining('gateway.stream_idle_timeout_ms') },
          });
        } else {
          expect(all.at(-1)).toMatchObject({ event: 'error', data: { type: 'error', code: 'upstream_timeout' } });
          expect(res.text).not.toContain('response.completed');
        }
        await waitUntil(
          async () => (await inFlight(gateway, provider)) === 0,
          1000,
          'the lease to be released once the upstream closed its side',
        );
        await waitUntil(() => up.stats().aborted === 1, 2000, 'the upstream call to be aborted');
        await waitUntil(() => health.unhealthy().has(provider), 1000, 'the stall to be booked against the provider');
      },
    );

    it('the openai client reports an idle cut of a chat stream as an error', async () => {
      await start({ idleMs: 400 });
      const client = new OpenAI({ baseURL: gateway.baseURL, apiKey: 'x', maxRetries: 0 });
      const stream = await client.chat.completions.create({
        model: 'cm',
        messages: [{ role: 'user', content: 'hi' }],
        stream: true,
        fake: { chunks: 4, stall_after: 1 },
      } as never);
      const seen: string[] = [];
      await expect(
        (async () => {
          for await (const chunk of stream as unknown as AsyncIterable<{
            choices: Array<{ delta: { content?: string } }>;
          }>)
            seen.push(chunk.choices[0]?.delta.content ?? '');
        })(),
      ).rejects.toThrow(/stream_idle_timeout_ms/);
      expect(seen.join('')).not.toBe('');
    });
  });

  describe('a stream whose last line is `data: [DONE]` with no newline before the close', () => {
    it('counts as done: a translated Responses stream completes (Ollama)', async () => {
      await start();
      const res = await post(
        gateway,
        'responses',
        requestBody('responses', 'om', true, { done_unterminated: 1, chunks: 2 }),
      );
      const all = events(res.text);
      expect(all.at(-1)?.event).toBe('response.completed');
      expect(all.filter((e) => e.event === 'response.output_text.delta')).toHaveLength(2);
      expect(res.text).not.toMatch(/event: error/);
    });

    it('a chat stream passed through reaches the client with its [DONE] terminated, and the openai client reads it whole', async () => {
      await start();
      const res = await post(gateway, 'chat', requestBody('chat', 'om', true, { done_unterminated: 1 }));
      expect(res.text.endsWith('data: [DONE]\n\n')).toBe(true);
      const client = new OpenAI({ baseURL: gateway.baseURL, apiKey: 'x', maxRetries: 0 });
      const stream = await client.chat.completions.create({
        model: 'vm',
        messages: [{ role: 'user', content: 'hi' }],
        stream: true,
        fake: { done_unterminated: 1 },
      } as never);
      let text = '';
      for await (const chunk of stream as unknown as AsyncIterable<{ choices: Array<{ delta: { content?: string } }> }>)
        text += chunk.choices[0]?.delta.content ?? '';
      expect(text).toContain('echo: hi');
    });

    it('a chat stream that ends with no [DONE] at all is an upstream failure: error event, booked', async () => {
      await start();
      const res = await post(gateway, 'chat', requestBody('chat', 'vm', true, { cut_after: 2, chunks: 4 }));
      expect(events(res.text).at(-1)?.data).toMatchObject({ error: { code: 'upstream_error' } });
      await waitUntil(() => health.unhealthy().has('vl'), 1000, 'the cut stream to be booked');
    });
  });

  describe('Responses streams end the Responses way', () => {
    it.each([
      ['passed through (vLLM)', 'vm'],
      ['translated (Ollama)', 'om'],
    ])(
      'a stream failing mid-way (%s) ends with response.failed and error, numbered on, never a chat-style error',
      async (_what, model) => {
        await start();
        const res = await post(
          gateway,
          'responses',
          requestBody('responses', model, true, { chunks: 4, cut_after: 2 }),
        );
        const all = events(res.text);
        const failed = all.at(-2)!;
        const error = all.at(-1)!;
        expect(failed).toMatchObject({
          event: 'response.failed',
          data: { type: 'response.failed', response: { status: 'failed', error: { code: 'upstream_error' } } },
        });
        expect(error).toMatchObject({ event: 'error', data: { type: 'error', code: 'upstream_error' } });
        const numbers = all.map((e) => (e.data as { sequence_number?: number }).sequence_number);
        expect(numbers).toEqual(numbers.map((_n, i) => numbers[0]! + i));
        expect((failed.data as { response: { id: string } }).response.id).toBe(
          (all[0].data as { response: { id: string } }).response.id,
        );
        expect(res.text).not.toMatch(/^data: \{"error"/m);
      },
    );

    it('the openai client sees the failure as events it can report', async () => {
      await start();
      const client = new OpenAI({ baseURL: gateway.baseURL, apiKey: 'x', maxRetries: 0 });
      const stream = await client.responses.create({
        model: 'om',
        input: 'hi',
        stream: true,
        fake: { chunks: 4, cut_after: 2 },
      } as never);
      const types: string[] = [];
      for await (const event of stream as unknown as AsyncIterable<{ type: string }>) types.push(event.type);
      expect(types.slice(-2)).toEqual(['response.failed', 'error']);
      expect(types).not.toContain('response.completed');
    });
  });
});
