import { startFakeUpstream, type FakeUpstream, fleetYaml } from '@iop/fake-upstream';
import { waitUntil } from '@iop/dispatch/testing';
import OpenAI from 'openai';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';

describe('OpenAI surface end to end with the official openai client', () => {
  let upstream: FakeUpstream;
  let gateway: TestGateway;
  let client: OpenAI;

  beforeAll(async () => {
    upstream = await startFakeUpstream({ name: 'up-1' });
    gateway = await startTestGateway(fleetYaml(), { UPSTREAM: upstream.url, UPSTREAM_KEY: 'sk-upstream-secret' });
    client = new OpenAI({ baseURL: gateway.baseURL, apiKey: 'unused', maxRetries: 0 });
  });
  afterAll(async () => {
    await gateway.close();
    await upstream.close();
  });

  it('lists every public model once with models.list', async () => {
    const ids: string[] = [];
    for await (const model of client.models.list()) ids.push(model.id);
    expect(ids.sort()).toEqual(['echo', 'legacy', 'llama', 'qwen', 'small']);
  });

  it('retrieves one model with models.retrieve, and 404s an unknown one', async () => {
    expect(await client.models.retrieve('llama')).toMatchObject({ id: 'llama', object: 'model', owned_by: 'iop-edge' });
    await expect(client.models.retrieve('nope')).rejects.toMatchObject({ status: 404, code: 'model_not_found' });
  });

  it('answers a pooled chat completion, renaming the model upstream and sending the bearer key', async () => {
    const raw = await client.chat.completions
      .create({ model: 'llama', messages: [{ role: 'user', content: 'hello pool' }] })
      .withResponse();
    expect(raw.data.choices[0].message.content).toContain('echo: hello pool');
    expect(raw.response.headers.get('x-iop-node')).toBe('gpu-a');
    expect(['pool-a', 'pool-b']).toContain(raw.response.headers.get('x-iop-resource'));
    expect(raw.response.headers.get('x-iop-queue-wait-ms')).toMatch(/^\d+$/);
    if (raw.response.headers.get('x-iop-resource') === 'pool-a') {
      const seen = upstream.stats().lastRequest['meta/llama-up'];
      expect(seen.headers.authorization).toBe('Bearer sk-upstream-secret');
    }
  });

  it('streams a pooled chat completion chunk by chunk and ends with the finish reason', async () => {
    const stream = await client.chat.completions.create({
      model: 'llama',
      messages: [{ role: 'user', content: 'stream me' }],
      stream: true,
      fake: { chunks: 5 },
    } as OpenAI.ChatCompletionCreateParamsStreaming);
    let text = '';
    let chunks = 0;
    let finish: string | null = null;
    for await (const chunk of stream) {
      chunks++;
      text += chunk.choices[0]?.delta?.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(chunks).toBeGreaterThanOrEqual(5);
    expect(text).toContain('echo: stream me');
    expect(finish).toBe('stop');
  });

  it('passes /v1/responses through to an OpenAI-compatible upstream, stream and not', async () => {
    const response = await client.responses.create({ model: 'small', input: 'hi responses' });
    expect(response.output_text).toContain('echo: hi responses');
    const events: string[] = [];
    const stream = await client.responses.create({ model: 'small', input: 'hi stream', stream: true });
    for await (const event of stream) events.push(event.type);
    expect(events[0]).toBe('response.created');
    expect(events).toContain('response.output_text.delta');
    expect(events.at(-1)).toBe('response.completed');
    // Leases are released on every endpoint, not only chat (docs/architecture.md, "Request path", step 5).
    await waitUntil(
      async () => (await gateway.queue.counts(['solo'])).get('solo')!.inFlight === 0,
      1000,
      'the responses lease released',
    );
  });

  it('translates /v1/responses to chat for an Ollama provider, stream and not', async () => {
    const response = await client.responses.create({ model: 'qwen', input: 'hi ollama' });
    expect(response.output_text).toContain('echo: hi ollama');
    expect(upstream.stats().lastRequest['qwen'].path).toBe('/v1/chat/completions');
    const events: string[] = [];
    let text = '';
    const stream = await client.responses.create({ model: 'qwen', input: 'stream ollama', stream: true });
    for await (const event of stream) {
      events.push(event.type);
      if (event.type === 'response.output_text.delta') text += event.delta;
    }
    expect(text).toContain('echo: stream ollama');
    expect(events.at(-1)).toBe('response.completed');
  });

  it('serves a CLI model directly: chat and responses, stream and not', async () => {
    const chat = await client.chat.completions.create({
      model: 'echo',
      messages: [{ role: 'user', content: 'from cli' }],
    });
    expect(chat.choices[0].message.content).toContain('from cli');
    let streamed = '';
    const chatStream = await client.chat.completions.create({
      model: 'echo',
      messages: [{ role: 'user', content: 'cli stream' }],
      stream: true,
    });
    for await (const chunk of chatStream) streamed += chunk.choices[0]?.delta?.content ?? '';
    expect(streamed).toContain('cli stream');
    const response = await client.responses.create({ model: 'echo', input: 'cli responses' });
    expect(response.output_text).toContain('cli responses');
    let deltas = '';
    const responseStream = await client.responses.create({
      model: 'echo',
      input: 'cli responses stream',
      stream: true,
    });
    for await (const event of responseStream) if (event.type === 'response.output_text.delta') deltas += event.delta;
    expect(deltas).toContain('cli responses stream');
  });

  it('serves a legacy routes[] entry directly with its upstream model name', async () => {
    const raw = await client.chat.completions
      .create({ model: 'legacy', messages: [{ role: 'user', content: 'old' }] })
      .withResponse();
    expect(raw.data.choices[0].message.content).toContain('echo: old');
    expect(raw.response.headers.get('x-iop-node')).toBe('laptop');
    expect(raw.response.headers.get('x-iop-resource')).toBe('laptop-compat');
    expect(raw.response.headers.get('x-iop-queue-wait-ms')).toBeNull();
    expect(upstream.stats().lastRequest['legacy-up']).toBeDefined();
  });
});
