import { MemoryHealthStore } from '@iop/dispatch';
import { startFakeUpstream, type FakeUpstream } from '@iop/fake-upstream';
import type { Socket } from 'node:net';
import OpenAI from 'openai';
import { streamEvents } from './testing/raw-answers';
import { ENDINGS, startRawUpstream, writeStream, type RawRequest, type RawUpstream } from './testing/raw-upstream';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';
import { events, post, requestBody } from './testing/upstream-behaviour';

/**
 * README "Streaming": a client only ever receives whole events. An upstream stream that breaks, or
 * ends, in the middle of an event (whatever its framing: chunked, close-delimited, Content-Length)
 * has that half event dropped and ends with the error events; one that ends without its end marker
 * (`data: [DONE]`, `response.completed`) fails too; an end marker cut short by the close counts.
 * Checked on chat and Responses, passed through (vLLM, Ollama, OpenAI-compatible) and translated
 * (Ollama), and with the official `openai` client, which must see an error, never a parse failure.
 */

const yaml = `
version: 1
gateway: { request_timeout_ms: 5000, stream_idle_timeout_ms: 3000 }
health: { interval_ms: 60000, unhealthy_after: 1, healthy_after: 1, cooldown_ms: 60000 }
nodes:
  - id: n
    adapters:
      - { id: v, type: vllm, base_url: "\${RAW}" }
      - { id: o, type: ollama, base_url: "\${RAW}" }
      - { id: c, type: openai_compat, base_url: "\${RAW}/v1" }
      - { id: good, type: openai_compat, base_url: "\${GOOD}" }
    providers:
      - { id: vl, category: vllm, adapter: v, models: [vm, pm], max_concurrency: 4 }
      - { id: ol, category: ollama, adapter: o, models: [om], max_concurrency: 4 }
      - { id: co, category: openai_compat, adapter: c, models: [cm], max_concurrency: 4 }
      - { id: sib, category: openai_compat, adapter: good, models: [pm], max_concurrency: 4 }
`;

/** An event cut short: all but its last 16 bytes (its end, and its blank line). */
const half = (text: string) => text.slice(0, -16);
/** Bytes of the event {@link cutAfter} cuts that are in no other event: chat's third delta, Responses' second. */
const cutMark = (req: RawRequest) => (req.path.endsWith('/responses') ? '"delta":"lo"' : '" wor"');

describe('a stream that ends in the middle of an event', () => {
  let raw: RawUpstream;
  let good: FakeUpstream;
  let gateway: TestGateway;
  let health: MemoryHealthStore;
  let stream: (req: RawRequest, socket: Socket) => void = () => undefined;

  beforeAll(async () => {
    raw = await startRawUpstream((req, socket) => stream(req, socket));
    good = await startFakeUpstream({ name: 'good' });
  });
  beforeEach(async () => {
    health = new MemoryHealthStore(() => ({ unhealthy_after: 1, healthy_after: 1, cooldown_ms: 60_000 }));
    gateway = await startTestGateway(yaml, { RAW: raw.origin, GOOD: good.url }, undefined, { health });
  });
  afterEach(async () => {
    await gateway.close();
    good.reset();
  });
  afterAll(async () => {
    await raw.close();
    await good.close();
  });

  /**
   * The stream's events, the whole ones sent and the one cut short after them: chat, two deltas
   * (`hel`, `lo`) then the third; Responses, its four opening events and a delta (`hel`) then the
   * second delta.
   */
  const cutAfter = (req: RawRequest) => {
    const all = streamEvents(req, ['hel', 'lo', ' wor', 'ld']);
    const whole = req.path.endsWith('/responses') ? 5 : 2;
    return { sent: all.slice(0, whole), cut: all[whole] };
  };

  describe.each(ENDINGS)('%s', (ending) => {
    it.each([
      ['chat, vLLM', 'chat', 'vm', 'vl'],
      ['chat, Ollama', 'chat', 'om', 'ol'],
      ['chat, OpenAI-compatible', 'chat', 'cm', 'co'],
      ['Responses passed through, vLLM', 'responses', 'vm', 'vl'],
      ['Responses passed through, OpenAI-compatible', 'responses', 'cm', 'co'],
      ['Responses translated, Ollama', 'responses', 'om', 'ol'],
    ] as const)(
      '%s: the half event is dropped, the stream ends with the error events, the provider is booked',
      async (_w, endpoint, model, provider) => {
        let mark = '';
        stream = (req, socket) => {
          const events = cutAfter(req);
          mark = cutMark(req);
          expect(half(events.cut)).toContain(mark);
          writeStream(socket, [...events.sent, half(events.cut)], ending);
        };
        const res = await post(gateway, endpoint, requestBody(endpoint, model, true));
        expect(res.status).toBe(200);
        // Whole events only: every block parses, and no byte of the half event reached the client.
        const blocks = res.text.split('\n\n');
        expect(blocks.at(-1)).toBe('');
        for (const block of blocks.slice(0, -1)) expect(block).toMatch(/^(event: [\w.]+\n)?data: (\{.*\}|\[DONE\])$/);
        expect(res.text).not.toContain(mark);
        const all = events(res.text);
        if (endpoint === 'chat') {
          expect(all.at(-1)?.data).toMatchObject({ error: { code: 'upstream_error', type: 'server_error' } });
          expect(res.text).not.toContain('[DONE]');
        } else {
          expect(all.slice(-2).map((e) => e.event)).toEqual(['response.failed', 'error']);
          expect(all.at(-1)?.data).toMatchObject({ type: 'error', code: 'upstream_error' });
          expect(res.text).not.toContain('response.completed');
        }
        expect(health.unhealthy().has(provider)).toBe(true);
      },
    );

    it('a first event cut in half is a failure before the first byte: the pool fails over to the sibling', async () => {
      stream = (req, socket) => writeStream(socket, [half(streamEvents(req, ['hello'])[0])], ending);
      const res = await post(gateway, 'chat', requestBody('chat', 'pm', true));
      expect(res.status).toBe(200);
      expect(res.headers.get('x-iop-resource')).toBe('sib');
      expect(events(res.text).at(-1)?.data).toBe('[DONE]');
      expect(health.unhealthy().has('vl')).toBe(true);
    });

    it.each([
      ['chat, vLLM', 'chat', 'vm'],
      ['Responses passed through, OpenAI-compatible', 'responses', 'cm'],
      ['Responses translated, Ollama', 'responses', 'om'],
    ] as const)(
      '%s: an end marker cut short by the close counts: the stream completes',
      async (_w, endpoint, model) => {
        stream = (req, socket) => {
          const all = streamEvents(req, ['hello']);
          const marker = all.pop() ?? '';
          writeStream(socket, [...all, marker.replace(/\n+$/, '')], ending);
        };
        const res = await post(gateway, endpoint, requestBody(endpoint, model, true));
        const all = events(res.text);
        expect(res.text.endsWith('\n\n')).toBe(true);
        expect(endpoint === 'chat' ? all.at(-1)?.data : all.at(-1)?.event).toBe(
          endpoint === 'chat' ? '[DONE]' : 'response.completed',
        );
        expect(health.unhealthy().size).toBe(0);
      },
    );
  });

  it.each([
    ['chat, vLLM', 'chat', 'vm'],
    ['Responses passed through, vLLM', 'responses', 'vm'],
    ['Responses translated, Ollama', 'responses', 'om'],
  ] as const)('%s: whole events but no end marker is a failure too', async (_w, endpoint, model) => {
    stream = (req, socket) => writeStream(socket, streamEvents(req, ['hello']).slice(0, -1), 'close-delimited');
    const res = await post(gateway, endpoint, requestBody(endpoint, model, true));
    const last = events(res.text).at(-1);
    expect(endpoint === 'chat' ? last?.data : last?.event).toEqual(
      endpoint === 'chat'
        ? expect.objectContaining({ error: expect.objectContaining({ code: 'upstream_error' }) })
        : 'error',
    );
    expect(health.unhealthy().size).toBe(1);
  });

  it("a Responses stream passed through that ends with the upstream's own error event gets nothing added; a 4xx is not booked", async () => {
    const error = {
      type: 'error',
      sequence_number: 6,
      code: 'context_length_exceeded',
      message: 'too long',
      param: null,
      status: 400,
    };
    stream = (req, socket) =>
      writeStream(
        socket,
        [...cutAfter(req).sent, `event: error\ndata: ${JSON.stringify(error)}\n\n`],
        'close-delimited',
      );
    const res = await post(gateway, 'responses', requestBody('responses', 'vm', true));
    expect(events(res.text).at(-1)).toEqual({ event: 'error', data: error });
    expect(res.text.match(/event: error/g)).toHaveLength(1);
    expect(health.unhealthy().size).toBe(0);
  });

  describe('the official openai client sees an error, never a parse failure', () => {
    beforeEach(() => {
      stream = (req, socket) => {
        const events = cutAfter(req);
        writeStream(socket, [...events.sent, half(events.cut)], 'chunked, connection cut');
      };
    });

    it.each(['vm', 'om'])('chat stream (%s): iterating throws the APIError of the error event', async (model) => {
      const client = new OpenAI({ baseURL: gateway.baseURL, apiKey: 'x', maxRetries: 0 });
      const chunks = await client.chat.completions.create({
        model,
        messages: [{ role: 'user', content: 'hi' }],
        stream: true,
      });
      const seen: string[] = [];
      const failure = await (async () => {
        for await (const chunk of chunks) seen.push(chunk.choices[0]?.delta.content ?? '');
      })().then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(failure).toBeInstanceOf(OpenAI.APIError);
      expect(failure).not.toBeInstanceOf(SyntaxError);
      expect((failure as InstanceType<typeof OpenAI.APIError>).code).toBe('upstream_error');
      expect(seen.join('')).toBe('hello');
    });

    it.each(['vm', 'cm', 'om'])(
      'Responses stream (%s): the events end with response.failed and error',
      async (model) => {
        const client = new OpenAI({ baseURL: gateway.baseURL, apiKey: 'x', maxRetries: 0 });
        const types: string[] = [];
        for await (const event of await client.responses.create({ model, input: 'hi', stream: true }))
          types.push(event.type);
        expect(types.slice(-2)).toEqual(['response.failed', 'error']);
      },
    );

    it.each(['vm', 'cm', 'om'])(
      'Responses stream helper (%s): finalResponse rejects with the error event',
      async (model) => {
        const client = new OpenAI({ baseURL: gateway.baseURL, apiKey: 'x', maxRetries: 0 });
        const failure = await client.responses
          .stream({ model, input: 'hi' })
          .finalResponse()
          .then(
            () => undefined,
            (err: unknown) => err,
          );
        expect(failure).not.toBeInstanceOf(SyntaxError);
        expect(failure).toMatchObject({
          type: 'error',
          code: 'upstream_error',
          message: expect.stringContaining('request id'),
        });
      },
    );
  });
});
