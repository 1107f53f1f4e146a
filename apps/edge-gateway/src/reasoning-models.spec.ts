import type { FakeUpstream } from '@iop/fake-upstream';
import OpenAI from 'openai';
import type { Response, ResponseInputItem, ResponseStreamEvent } from 'openai/resources/responses/responses';
import type { TestGateway } from './testing/gateway-harness';
import { events, post, requestBody, upstreamBehaviourFixture, type Knobs } from './testing/upstream-behaviour';

/**
 * Reasoning models (README "Request fields per adapter"): a chat upstream sends the model's
 * reasoning in `reasoning` (Ollama's OpenAI-compatible API, vLLM 0.11 and later) or
 * `reasoning_content` (vLLM before 0.11). Through the Responses → chat translation it becomes a
 * `reasoning` item before the message, streamed as `response.reasoning_text.*` events (OpenAI API
 * reference, "Streaming events"); through chat it is passed on untouched. The openai client throughout.
 */

const REASONING = 'thinking about: hello';
const ANSWER = (model: string) => `echo: hello [model=${model} upstream=up]`;
/** The fake's reasoning token count: one token per 4 characters. */
const REASONING_TOKENS = Math.ceil(REASONING.length / 4);

const UPSTREAMS: Array<[string, Knobs]> = [
  ['`reasoning` (Ollama /v1, vLLM 0.11 and later)', { reasoning: 2 }],
  ['`reasoning_content` (vLLM before 0.11)', { reasoning_content: 2 }],
  ['both fields with the same text (a server in transition)', { reasoning: 2, reasoning_content: 2 }],
];

describe('reasoning models', () => {
  let up: FakeUpstream;
  let gateway: TestGateway;
  let client: OpenAI;
  const fixture = upstreamBehaviourFixture(() => gateway);
  beforeAll(() => {
    ({ up } = fixture.upstreams());
  });
  beforeEach(async () => {
    ({ gateway } = await fixture.start());
    client = new OpenAI({ baseURL: gateway.baseURL, apiKey: 'x', maxRetries: 0 });
  });
  const ask = (fake: Knobs, input: string | ResponseInputItem[] = 'hello') =>
    ({ model: 'om', input, fake }) as { model: string; input: string };

  const expectReasoningThenAnswer = (res: Response) => {
    expect(res.output).toHaveLength(2);
    expect(res.output[0]).toEqual({
      type: 'reasoning',
      id: expect.stringMatching(/^rs_/),
      status: 'completed',
      summary: [],
      content: [{ type: 'reasoning_text', text: REASONING }],
    });
    expect(res.output[1]).toMatchObject({ type: 'message', id: expect.stringMatching(/^msg_/), status: 'completed' });
    expect(res.output_text).toBe(ANSWER('om'));
    expect(res.usage?.output_tokens_details.reasoning_tokens).toBe(REASONING_TOKENS);
  };

  describe.each(UPSTREAMS)('translated to Responses (Ollama), upstream sending %s', (_what, fake) => {
    it('answers a reasoning item before the message; output_text is the answer only', async () => {
      expectReasoningThenAnswer(await client.responses.create(ask(fake)));
    });

    it('streams the reasoning item, then the message, with output_index and item ids consistent', async () => {
      const stream = client.responses.stream(ask(fake));
      const seen: ResponseStreamEvent[] = [];
      for await (const event of stream) seen.push(event);
      expect(seen.map((e) => e.type)).toEqual([
        'response.created',
        'response.in_progress',
        'response.output_item.added',
        'response.content_part.added',
        'response.reasoning_text.delta',
        'response.reasoning_text.delta',
        'response.reasoning_text.done',
        'response.content_part.done',
        'response.output_item.done',
        'response.output_item.added',
        'response.content_part.added',
        'response.output_text.delta',
        'response.output_text.delta',
        'response.output_text.delta',
        'response.output_text.done',
        'response.content_part.done',
        'response.output_item.done',
        'response.completed',
      ]);
      seen.forEach((e, i) => expect(e.sequence_number).toBe(i));
      const final = await stream.finalResponse();
      expectReasoningThenAnswer(final);
      // Every event of an item names it by its index in the final output and by its id.
      for (const e of seen) {
        if ('output_index' in e) {
          const item = final.output[e.output_index];
          if ('item_id' in e) expect(e.item_id).toBe(item.id);
          if ('item' in e) expect(e.item.id).toBe(item.id);
        }
      }
      const deltas = (type: string) => seen.flatMap((e) => (e.type === type && 'delta' in e ? [e.delta] : [])).join('');
      expect(deltas('response.reasoning_text.delta')).toBe(REASONING);
      expect(deltas('response.output_text.delta')).toBe(ANSWER('om'));
      expect(seen.find((e) => e.type === 'response.reasoning_text.done')).toMatchObject({ text: REASONING });
    });
  });

  it('takes a previous answer sent back as input, reasoning item and all: the reasoning is not sent to chat', async () => {
    const first = await client.responses.create(ask({ reasoning: 1 }));
    const next = await client.responses.create(
      ask({}, [
        { role: 'user', content: 'hello' },
        ...(first.output as ResponseInputItem[]),
        { role: 'user', content: 'again' },
      ]),
    );
    expect(next.output_text).toContain('echo: again');
    expect((up.stats().lastRequest.om.body as { messages: unknown }).messages).toEqual([
      { role: 'user', content: 'hello' },
      { role: 'assistant', content: ANSWER('om') },
      { role: 'user', content: 'again' },
    ]);
  });

  describe.each([
    ['vLLM', 'vm', { reasoning_content: 2 }, 'reasoning_content'],
    ['vLLM 0.11 and later', 'vm', { reasoning: 2 }, 'reasoning'],
    ['Ollama', 'om', { reasoning: 2 }, 'reasoning'],
    ['OpenAI-compatible', 'cm', { reasoning_content: 2 }, 'reasoning_content'],
  ] as const)('chat passed through (%s)', (_what, model, fake, field) => {
    it(`reaches the client untouched: ${field} in the message, usage with its reasoning tokens`, async () => {
      const res = await client.chat.completions.create({
        model,
        messages: [{ role: 'user', content: 'hello' }],
        fake,
      } as never as OpenAI.ChatCompletionCreateParamsNonStreaming);
      expect(res.choices[0].message).toMatchObject({ content: ANSWER(model), [field]: REASONING });
      expect(res.usage?.completion_tokens_details?.reasoning_tokens).toBe(REASONING_TOKENS);
    });

    it(`streamed: every chunk as the upstream sent it, ${field} deltas included`, async () => {
      const body = requestBody('chat', model, true, fake);
      const viaGateway = await post(gateway, 'chat', body);
      const direct = await fetch(`${up.url}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      // Only the fake's per-call id and clock differ between two calls.
      const same = (text: string) => text.replace(/chatcmpl-fake-\d+/g, 'ID').replace(/"created":\d+/g, '"created":0');
      expect(same(viaGateway.text)).toBe(same(await direct.text()));
      const deltas = events(viaGateway.text).flatMap((e) => {
        const choice = (e.data as { choices?: Array<{ delta: Record<string, string> }> }).choices?.[0];
        return choice?.delta[field] ? [choice.delta[field]] : [];
      });
      expect(deltas.join('')).toBe(REASONING);
    });
  });
});
