import OpenAI from 'openai';
import { echoReply, startFakeUpstream, type FakeStats, type FakeUpstream, type OpenAIErrorBody } from './index';

let up: FakeUpstream;
beforeEach(async () => {
  up = await startFakeUpstream({ name: 'up-a' });
});
afterEach(() => up.close());

function post(
  path: string,
  body: object,
  headers: Record<string, string> = {},
  signal?: AbortSignal,
): Promise<Response> {
  return fetch(`${up.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer sk-test', ...headers },
    body: JSON.stringify(body),
    signal,
  });
}

const chat = (extra: object = {}) => ({
  model: 'llama',
  messages: [
    { role: 'system', content: 'be brief' },
    { role: 'user', content: 'hi there' },
  ],
  ...extra,
});

/** Reads a body to its end or to its failure, keeping what arrived. */
async function readAll(res: Response): Promise<{ text: string; failed: boolean }> {
  if (!res.body) return { text: '', failed: false };
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let text = '';
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return { text, failed: false };
      text += decoder.decode(value, { stream: true });
    }
  } catch {
    return { text, failed: true };
  }
}

async function json<T>(res: Response): Promise<T> {
  return (await res.json()) as T;
}

interface SseEvent {
  event?: string;
  data: string;
}

function parseSse(text: string): SseEvent[] {
  return text
    .split('\n\n')
    .filter((block) => block.trim() !== '')
    .map((block) => {
      const e: SseEvent = { data: '' };
      for (const line of block.split('\n')) {
        if (line.startsWith('event: ')) e.event = line.slice(7);
        else if (line.startsWith('data: ')) e.data += line.slice(6);
      }
      return e;
    });
}

async function eventually(check: () => boolean, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline)
      throw new Error(`condition not met within ${timeoutMs} ms: ${JSON.stringify(up.stats())}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('fake upstream', () => {
  it('answers a non-stream chat completion with the echo, the model and its name', async () => {
    const res = await post('/chat/completions', chat());
    expect(res.status).toBe(200);
    expect(res.headers.get('x-fake-upstream')).toBe('up-a');
    const body = await json<OpenAI.ChatCompletion>(res);
    expect(body).toMatchObject({
      object: 'chat.completion',
      model: 'llama',
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content: echoReply('hi there', 'llama', 'up-a') },
          finish_reason: 'stop',
        },
      ],
    });
    expect(body.choices[0].message.content).toBe('echo: hi there [model=llama upstream=up-a]');
    const { prompt_tokens, completion_tokens, total_tokens } = body.usage ?? {
      prompt_tokens: 0,
      completion_tokens: 0,
      total_tokens: -1,
    };
    expect(total_tokens).toBe(prompt_tokens + completion_tokens);
    expect(completion_tokens).toBeGreaterThan(0);
    const last = up.stats().lastRequest.llama;
    expect(last.headers.authorization).toBe('Bearer sk-test');
    expect(last.path).toBe('/v1/chat/completions');
    expect(last.body).toMatchObject({ model: 'llama' });
  });

  it('streams exactly `chunks` content chunks, a stop chunk, usage on request, then [DONE]', async () => {
    const res = await post('/chat/completions', chat({ stream: true, stream_options: { include_usage: true } }), {
      'x-fake-chunks': '5',
    });
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const { text, failed } = await readAll(res);
    expect(failed).toBe(false);
    const events = parseSse(text);
    expect(events.at(-1)?.data).toBe('[DONE]');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e.data));
    const content = chunks.filter((c) => c.choices[0]?.delta.content !== undefined);
    expect(content).toHaveLength(5);
    expect(content[0].choices[0].delta.role).toBe('assistant');
    expect(content.map((c) => c.choices[0].delta.content).join('')).toBe(echoReply('hi there', 'llama', 'up-a'));
    expect(chunks.every((c) => c.object === 'chat.completion.chunk' && c.model === 'llama')).toBe(true);
    expect(chunks[5].choices[0].finish_reason).toBe('stop');
    expect(chunks[6]).toMatchObject({ choices: [], usage: { prompt_tokens: expect.any(Number) } });
  });

  it('streams Responses API events with event lines and no [DONE]', async () => {
    const res = await post('/responses', { model: 'qwen', input: 'hello', stream: true, fake: { chunks: 2 } });
    const events = parseSse((await readAll(res)).text);
    expect(events.map((e) => e.event)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    const data = events.map((e) => JSON.parse(e.data));
    data.forEach((d, i) => expect(d).toMatchObject({ type: events[i].event, sequence_number: i }));
    const expected = echoReply('hello', 'qwen', 'up-a');
    expect(data[4].delta + data[5].delta).toBe(expected);
    expect(data[6].text).toBe(expected);
    expect(data[9].response).toMatchObject({
      status: 'completed',
      model: 'qwen',
      output: [{ content: [{ type: 'output_text', text: expected }] }],
    });
    expect(data[9].response.usage.total_tokens).toBeGreaterThan(0);
  });

  it('answers a non-stream Responses API request from message items', async () => {
    const res = await post('/responses', {
      model: 'qwen',
      input: [{ role: 'user', content: [{ type: 'input_text', text: 'yo' }] }],
    });
    const body = await json<OpenAI.Responses.Response>(res);
    expect(body).toMatchObject({
      object: 'response',
      status: 'completed',
      model: 'qwen',
      output: [{ type: 'message', role: 'assistant' }],
    });
    expect(
      ((body.output[0] as OpenAI.Responses.ResponseOutputMessage).content[0] as OpenAI.Responses.ResponseOutputText)
        .text,
    ).toBe(echoReply('yo', 'qwen', 'up-a'));
  });

  it('fails with the `status` knob and an OpenAI-shaped error, the body winning over the header', async () => {
    const res = await post('/chat/completions', chat({ fake: { status: 503 } }), { 'x-fake-status': '429' });
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({
      error: { message: expect.any(String), type: 'server_error', param: null, code: 'service_unavailable' },
    });
    const viaHeader = await post('/chat/completions', chat({ stream: true }), { 'x-fake-status': '429' });
    expect(viaHeader.status).toBe(429);
    expect((await json<OpenAIErrorBody>(viaHeader)).error.code).toBe('rate_limit_exceeded');
  });

  it('cuts the connection after `cut_after` chunks: a premature end without [DONE], not counted as aborted', async () => {
    const res = await post('/chat/completions', chat({ stream: true, fake: { chunks: 4, cut_after: 2 } }));
    const { text, failed } = await readAll(res);
    expect(failed).toBe(true);
    const events = parseSse(text);
    expect(events).toHaveLength(2);
    expect(text).not.toContain('[DONE]');
    await eventually(() => up.stats().current === 0);
    expect(up.stats().aborted).toBe(0);
  });

  it('ends the stream with an in-band error event after `error_event_after` chunks', async () => {
    const res = await post('/chat/completions', chat({ stream: true, fake: { chunks: 3, error_event_after: 1 } }));
    const { text, failed } = await readAll(res);
    expect(failed).toBe(false);
    const events = parseSse(text);
    expect(events).toHaveLength(2);
    expect(JSON.parse(events[1].data)).toEqual({
      error: { message: expect.any(String), type: 'server_error', param: null, code: 'fake_stream_error' },
    });
    expect(text).not.toContain('[DONE]');

    const responses = parseSse(
      (
        await readAll(
          await post('/responses', { model: 'm', input: 'x', stream: true, fake: { error_event_after: 0 } }),
        )
      ).text,
    );
    const last = responses[responses.length - 1];
    expect(last.event).toBe('error');
    expect(JSON.parse(last.data)).toMatchObject({
      type: 'error',
      code: 'fake_stream_error',
      error: { code: 'fake_stream_error' },
    });
    expect(responses.map((e) => e.event)).not.toContain('response.completed');
  });

  it('records max = 5 under 5 concurrent delayed requests and current back to 0', async () => {
    const replies = await Promise.all(
      Array.from({ length: 5 }, (_, i) =>
        post('/chat/completions', chat({ stream: i % 2 === 0 }), { 'x-fake-delay-ms': '150' }).then(readAll),
      ),
    );
    expect(replies.every((r) => !r.failed)).toBe(true);
    await eventually(() => up.stats().current === 0);
    const stats = await json<FakeStats>(await fetch(`${up.origin}/__stats`));
    expect(stats).toMatchObject({
      total: 5,
      current: 0,
      max: 5,
      aborted: 0,
      byModel: { llama: { total: 5, current: 0, max: 5, aborted: 0 } },
    });
  });

  it('counts a client abort during the delay as aborted, exactly once', async () => {
    const ac = new AbortController();
    const pending = post('/chat/completions', chat({ fake: { delay_ms: 30_000 } }), {}, ac.signal).catch(
      (err: unknown) => err,
    );
    await eventually(() => up.stats().byModel.llama?.current === 1);
    ac.abort();
    await pending;
    await eventually(() => up.stats().aborted === 1 && up.stats().current === 0);
    expect(up.stats().byModel.llama).toEqual({ total: 1, current: 0, max: 1, aborted: 1 });
  });

  it('counts a client abort mid-stream as aborted', async () => {
    const ac = new AbortController();
    const res = await post(
      '/chat/completions',
      chat({ stream: true, fake: { chunks: 10, chunk_gap_ms: 1000 } }),
      {},
      ac.signal,
    );
    await res.body?.getReader().read();
    ac.abort();
    await eventually(() => up.stats().aborted === 1 && up.stats().current === 0);
  });

  it('reset zeroes counters and forgets requests; POST /__reset does the same', async () => {
    await (await post('/chat/completions', chat())).json();
    up.reset();
    expect(up.stats()).toEqual({ total: 0, current: 0, max: 0, aborted: 0, byModel: {}, lastRequest: {} });
    await (await post('/chat/completions', chat())).json();
    expect((await fetch(`${up.origin}/__reset`, { method: 'POST' })).status).toBe(204);
    expect(up.stats().total).toBe(0);
  });

  it('answers vLLM and Ollama probes and lists models; probes are not counted', async () => {
    expect((await fetch(`${up.origin}/health`)).status).toBe(200);
    expect(await (await fetch(`${up.origin}/api/version`)).json()).toEqual({ version: expect.any(String) });
    const models = await (await fetch(`${up.url}/models`)).json();
    expect(models).toEqual({
      object: 'list',
      data: [{ id: 'fake-model', object: 'model', created: 0, owned_by: 'up-a' }],
    });
    const missing = await fetch(`${up.origin}/nope`);
    expect(missing.status).toBe(404);
    expect((await json<OpenAIErrorBody>(missing)).error.code).toBe('not_found');
    expect(up.stats().total).toBe(0);
  });

  it('rejects a bad knob, invalid JSON and a missing model with 400', async () => {
    const bad = await post('/chat/completions', chat(), { 'x-fake-delay-ms': 'soon' });
    expect(bad.status).toBe(400);
    expect((await json<OpenAIErrorBody>(bad)).error.param).toBe('x-fake-delay-ms');
    const notJson = await fetch(`${up.url}/chat/completions`, { method: 'POST', body: '{' });
    expect(notJson.status).toBe(400);
    await notJson.arrayBuffer();
    const noModel = await post('/chat/completions', { messages: [] });
    expect((await json<OpenAIErrorBody>(noModel)).error.param).toBe('model');
  });

  it('speaks the wire format the openai SDK parses', async () => {
    const client = new OpenAI({ baseURL: up.url, apiKey: 'sk-sdk', maxRetries: 0 });
    const completion = await client.chat.completions.create({
      model: 'llama',
      messages: [{ role: 'user', content: 'sdk' }],
    });
    expect(completion.choices[0].message.content).toBe(echoReply('sdk', 'llama', 'up-a'));
    let streamed = '';
    for await (const chunk of await client.chat.completions.create({
      model: 'llama',
      messages: [{ role: 'user', content: 'sdk' }],
      stream: true,
    })) {
      streamed += chunk.choices[0]?.delta.content ?? '';
    }
    expect(streamed).toBe(echoReply('sdk', 'llama', 'up-a'));
    const response = await client.responses.stream({ model: 'qwen', input: 'sdk' }).finalResponse();
    expect(response.output_text).toBe(echoReply('sdk', 'qwen', 'up-a'));
    expect(up.stats().lastRequest.qwen.headers.authorization).toBe('Bearer sk-sdk');
  });

  it('answers embeddings deterministically, as floats or base64, and counts them', async () => {
    const floats = await json<{
      data: Array<{ embedding: number[]; index: number }>;
      usage: { prompt_tokens: number };
    }>(await post('/embeddings', { model: 'emb', input: ['a', 'b'], dimensions: 4 }));
    expect(floats.data.map((d) => [d.index, d.embedding.length])).toEqual([
      [0, 4],
      [1, 4],
    ]);
    const again = await json<{ data: Array<{ embedding: number[] }> }>(
      await post('/embeddings', { model: 'emb', input: 'a', dimensions: 4 }),
    );
    expect(again.data[0].embedding).toEqual(floats.data[0].embedding);
    const client = new OpenAI({ baseURL: up.url, apiKey: 'k', maxRetries: 0 });
    const viaClient = await client.embeddings.create({ model: 'emb', input: 'a', dimensions: 4 });
    expect(viaClient.data[0].embedding.map((x) => Math.round(x * 1e4))).toEqual(
      floats.data[0].embedding.map((x) => Math.round(x * 1e4)),
    );
    expect(up.stats().total).toBe(3);
  });

  it('misbehaves on request: reset before the body, a body short of its content-length, a redirect, a 429 with Retry-After', async () => {
    await expect(post('/chat/completions', chat({ fake: { reset_before_body: 1 } }))).rejects.toThrow();
    const short = await post('/chat/completions', chat({ fake: { short_body: 11 } }));
    expect(Number(short.headers.get('content-length'))).toBeGreaterThan(1000);
    expect((await readAll(short)).failed).toBe(true);
    const moved = await fetch(`${up.url}/chat/completions`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(chat({ fake: { redirect: 307 } })),
    });
    expect(moved.status).toBe(307);
    expect(moved.headers.get('location')).toContain('internal-host');
    const limited = await post('/chat/completions', chat({ fake: { status: 429, retry_after: 7, echo_secrets: 1 } }));
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('7');
    const body = await json<OpenAIErrorBody>(limited);
    expect(body.error.type).toBe('rate_limit_error');
    expect(body.error.message).toContain('Bearer sk-test');
  });

  it('stalls a stream after `stall_after` chunks, pads chunks to `chunk_bytes`, ends with an unterminated [DONE] on `done_unterminated`', async () => {
    const padded = await readAll(
      await post(
        '/chat/completions',
        chat({ stream: true, fake: { chunks: 2, chunk_bytes: 5000, done_unterminated: 1 } }),
      ),
    );
    expect(padded.text.length).toBeGreaterThan(10_000);
    expect(padded.text.endsWith('data: [DONE]')).toBe(true);
    const controller = new AbortController();
    const stalled = await post(
      '/chat/completions',
      chat({ stream: true, fake: { chunks: 3, stall_after: 1 } }),
      {},
      controller.signal,
    );
    const reader = stalled.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    expect(first).toContain('"content"');
    const next = await Promise.race([
      reader.read().then(() => 'more'),
      new Promise((r) => setTimeout(() => r('stalled'), 300)),
    ]);
    expect(next).toBe('stalled');
    controller.abort();
  });

  it('sends an in-band error about the request itself on `error_event_status` < 500', async () => {
    const { text } = await readAll(
      await post('/chat/completions', chat({ stream: true, fake: { error_event_after: 0, error_event_status: 400 } })),
    );
    expect(text).toContain('context_length_exceeded');
    expect(text).toContain('invalid_request_error');
  });

  it('closes with streams still open', async () => {
    const res = await post('/chat/completions', chat({ stream: true, fake: { chunks: 5, chunk_gap_ms: 10_000 } }));
    const reading = readAll(res);
    await eventually(() => up.stats().current === 1);
    await up.close();
    expect((await reading).failed).toBe(true);
  });
});
