import type { FakeUpstream } from '@iop/fake-upstream';
import OpenAI from 'openai';
import { zodTextFormat } from 'openai/helpers/zod';
import type { Response, ResponseStreamEvent, ResponseTextConfig } from 'openai/resources/responses/responses';
import { z } from 'zod';
import type { TestGateway } from './testing/gateway-harness';
import { errorOf, post, upstreamBehaviourFixture } from './testing/upstream-behaviour';

/**
 * Structured outputs through the Responses → chat translation (README "Request fields per
 * adapter"): `text.format` reaches the upstream as `response_format`, and the Response echoes what
 * was asked (OpenAI API reference, `Response.text`), in the JSON answer and in the stream's
 * `response.created`, `response.in_progress` and `response.completed`. The openai client throughout;
 * the fake upstream answers a JSON document `{echo, model, upstream}` when held to a JSON format.
 */

const schema = {
  type: 'object',
  properties: { echo: { type: 'string' }, model: { type: 'string' }, upstream: { type: 'string' } },
  required: ['echo', 'model', 'upstream'],
  additionalProperties: false,
};
const Echo = z.object({ echo: z.string(), model: z.string(), upstream: z.string() });

/** Each format a client may ask, and the `response_format` the chat upstream must get for it. */
const FORMATS: Array<[string, ResponseTextConfig['format'], Record<string, unknown> | undefined]> = [
  [
    'json_schema with name, schema, strict and description',
    { type: 'json_schema', name: 'echo_reply', schema, strict: true, description: 'What the fake echoes' },
    {
      type: 'json_schema',
      json_schema: { name: 'echo_reply', schema, strict: true, description: 'What the fake echoes' },
    },
  ],
  [
    'json_schema with name and schema only',
    { type: 'json_schema', name: 'echo_reply', schema },
    { type: 'json_schema', json_schema: { name: 'echo_reply', schema } },
  ],
  ['json_object', { type: 'json_object' }, { type: 'json_object' }],
  ['text', { type: 'text' }, undefined],
];

describe('text.format through the Responses → chat translation (Ollama)', () => {
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
  const sentFormat = () => (up.stats().lastRequest.om.body as Record<string, unknown>).response_format;

  it.each(FORMATS)('%s: reaches the upstream and is echoed in the answer', async (_what, format, responseFormat) => {
    const res = await client.responses.create({ model: 'om', input: 'hello', text: { format } });
    expect(res.text).toEqual({ format });
    expect(sentFormat()).toEqual(responseFormat);
    if (format?.type !== 'text')
      expect(JSON.parse(res.output_text)).toEqual({ echo: 'hello', model: 'om', upstream: 'up' });
  });

  it.each(FORMATS)('%s, streamed: echoed in response.created, .in_progress and .completed', async (_w, format) => {
    const stream = client.responses.stream({ model: 'om', input: 'hello', text: { format } });
    const seen: ResponseStreamEvent[] = [];
    for await (const event of stream) seen.push(event);
    const lifecycle = seen.filter(
      (e): e is Extract<ResponseStreamEvent, { response: Response }> =>
        e.type === 'response.created' || e.type === 'response.in_progress' || e.type === 'response.completed',
    );
    expect(lifecycle.map((e) => e.type)).toEqual(['response.created', 'response.in_progress', 'response.completed']);
    for (const event of lifecycle) expect(event.response.text).toEqual({ format });
    expect((await stream.finalResponse()).text).toEqual({ format });
  });

  it.each([
    ['Ollama', 'om', false],
    ['Ollama', 'om', true],
    ['a CLI program', 'echo', false],
    ['a CLI program', 'echo', true],
  ] as const)(
    'no text asked (%s, model %s, stream %s): the plain text default is echoed',
    async (_w, model, stream) => {
      const res = stream
        ? await client.responses.stream({ model, input: 'hello' }).finalResponse()
        : await client.responses.create({ model, input: 'hello' });
      expect(res.text).toEqual({ format: { type: 'text' } });
      expect(res.output_text).toContain('hello');
    },
  );

  it('responses.parse with a zod format: the answer is parsed, the format echoed as sent (strict)', async () => {
    const format = zodTextFormat(Echo, 'echo_reply');
    const res = await client.responses.parse({ model: 'om', input: 'hello', text: { format } });
    expect(res.output_parsed).toEqual({ echo: 'hello', model: 'om', upstream: 'up' });
    expect(res.text?.format).toEqual({ type: 'json_schema', name: 'echo_reply', strict: true, schema: format.schema });
    const streamed = await client.responses.stream({ model: 'om', input: 'again', text: { format } }).finalResponse();
    expect(streamed.output_parsed).toEqual({ echo: 'again', model: 'om', upstream: 'up' });
    expect(streamed.text?.format).toMatchObject({ type: 'json_schema', name: 'echo_reply', strict: true });
  });

  it('echoes the other settings it carries: instructions, max_output_tokens, temperature, top_p, reasoning', async () => {
    const asked = {
      instructions: 'Be brief.',
      max_output_tokens: 64,
      temperature: 0.2,
      top_p: 0.9,
      reasoning: { effort: 'low' as const },
    };
    const res = await client.responses.create({ model: 'om', input: 'hello', ...asked });
    expect(res).toMatchObject({ ...asked, reasoning: { effort: 'low', summary: null }, parallel_tool_calls: true });
    const streamed = await client.responses.stream({ model: 'om', input: 'hello', ...asked }).finalResponse();
    expect(streamed).toMatchObject({ ...asked, reasoning: { effort: 'low', summary: null } });
    // Nothing asked: null, not a made-up default (the upstream's own applies).
    const plain = await client.responses.create({ model: 'om', input: 'hello' });
    expect(plain).toMatchObject({ instructions: null, max_output_tokens: null, temperature: null, top_p: null });
  });

  it.each([
    ['a json_schema without a name', { format: { type: 'json_schema', schema } }, 'text.format.name'],
    ['a json_schema without a schema', { format: { type: 'json_schema', name: 'n' } }, 'text.format.schema'],
    [
      'a json_schema whose strict is not a boolean',
      { format: { type: 'json_schema', name: 'n', schema, strict: 'yes' } },
      'text.format.strict',
    ],
    ['an unknown format type', { format: { type: 'xml' } }, 'text.format.type'],
    ['a verbosity chat cannot carry', { format: { type: 'text' }, verbosity: 'low' }, 'text.verbosity'],
  ])('refuses %s with a 400 naming it, before any upstream call', async (_what, text, param) => {
    for (const stream of [false, true]) {
      const res = await post(gateway, 'responses', { model: 'om', input: 'hello', stream, text });
      expect(res.status).toBe(400);
      expect(errorOf(res)).toMatchObject({ type: 'invalid_request_error', param });
    }
    expect(up.stats().total).toBe(0);
  });

  it('passed through to vLLM: text.format reaches its /v1/responses unchanged (vLLM answers for itself)', async () => {
    const format = FORMATS[0][1];
    await client.responses.create({ model: 'vm', input: 'hello', text: { format } });
    expect((up.stats().lastRequest.vm.body as Record<string, unknown>).text).toEqual({ format });
  });
});
