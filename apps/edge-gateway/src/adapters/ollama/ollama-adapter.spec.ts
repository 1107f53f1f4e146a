import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import type { DispatchContext, UpstreamResponse } from '../adapter';
import { OllamaAdapter, ollamaV1Url } from './ollama-adapter';

/** What the fake Ollama answers to `POST /v1/chat/completions`, given the parsed request body. */
type Behaviour = (body: Record<string, unknown>, res: ServerResponse) => void;

interface FakeOllama {
  url: string;
  requests: Array<{ path: string; body: Record<string, unknown> }>;
  close(): Promise<void>;
}

async function startFakeOllama(behaviour: Behaviour): Promise<FakeOllama> {
  const requests: FakeOllama['requests'] = [];
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let raw = '';
    req.on('data', (piece: Buffer) => (raw += piece.toString('utf8')));
    req.on('end', () => {
      const body = JSON.parse(raw || '{}') as Record<string, unknown>;
      requests.push({ path: req.url ?? '', body });
      if (req.url !== '/v1/chat/completions') {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('404 page not found');
        return;
      }
      behaviour(body, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** Ollama's OpenAI-compatible answers, in its wire format. */
const ollamaCompletion = (model: string, content: string) => ({
  id: 'chatcmpl-42',
  object: 'chat.completion',
  created: 1_700_000_000,
  model,
  system_fingerprint: 'fp_ollama',
  choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 11, completion_tokens: 3, total_tokens: 14 },
});
const ollamaChunk = (model: string, delta: Record<string, unknown>, finishReason: string | null = null) =>
  `data: ${JSON.stringify({ id: 'chatcmpl-42', object: 'chat.completion.chunk', created: 1_700_000_000, model, choices: [{ index: 0, delta, finish_reason: finishReason }] })}\n\n`;

/** Streams the pieces with a short pause between them, as a model generating tokens does. */
function streamPieces(res: ServerResponse, pieces: string[]): void {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  let i = 0;
  const next = () => {
    if (i === pieces.length) return void res.end();
    res.write(pieces[i++]);
    setTimeout(next, 5);
  };
  next();
}

const answering: Behaviour = (body, res) => {
  const model = String(body.model);
  if (body.stream === true) {
    streamPieces(res, [
      ollamaChunk(model, { role: 'assistant', content: 'Hel' }),
      ollamaChunk(model, { content: 'lo' }),
      ollamaChunk(model, {}, 'stop'),
      `data: ${JSON.stringify({ id: 'chatcmpl-42', object: 'chat.completion.chunk', model, choices: [], usage: { prompt_tokens: 11, completion_tokens: 2, total_tokens: 13 } })}\n\n`,
      'data: [DONE]\n\n',
    ]);
    return;
  }
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(ollamaCompletion(model, 'Hello')));
};

let ollama: FakeOllama | undefined;
let adapter: OllamaAdapter | undefined;
afterEach(async () => {
  await adapter?.close();
  await ollama?.close();
  adapter = undefined;
  ollama = undefined;
});

async function setUp(
  behaviour: Behaviour,
  baseUrlSuffix = '/v1',
): Promise<{ adapter: OllamaAdapter; ollama: FakeOllama }> {
  ollama = await startFakeOllama(behaviour);
  adapter = new OllamaAdapter({
    id: 'ollama-0',
    type: 'ollama',
    base_url: ollama.url + baseUrlSuffix,
    enabled: true,
    keep_alive_timeout_ms: 3000,
    close_wait_ms: 2000,
  });
  return { adapter, ollama };
}

const ctx = (signal: AbortSignal = new AbortController().signal): DispatchContext => ({
  upstreamModel: 'llama3.2:1b',
  signal,
});

async function bodyText(res: UpstreamResponse): Promise<string> {
  if (res.kind === 'json') return typeof res.body === 'string' ? res.body : new TextDecoder().decode(res.body);
  let all = '';
  const decoder = new TextDecoder();
  for await (const piece of res.body)
    all += typeof piece === 'string' ? piece : decoder.decode(piece, { stream: true });
  return all;
}

/** An `openai` client that gets `body` for its request (the gateway's HTTP hop, without a socket). */
function clientReceiving(body: string, contentType: string): OpenAI {
  return new OpenAI({
    apiKey: 'test',
    baseURL: 'http://gateway.test/v1',
    maxRetries: 0,
    fetch: async () => new Response(body, { headers: { 'content-type': contentType } }),
  });
}

describe('ollamaV1Url', () => {
  it.each([
    ['http://h:11434', 'http://h:11434/v1'],
    ['http://h:11434/', 'http://h:11434/v1'],
    ['http://h:11434/v1', 'http://h:11434/v1'],
    ['http://h:11434/v1/', 'http://h:11434/v1'],
    ['https://proxy/ollama', 'https://proxy/ollama/v1'],
  ])('turns %s into %s', (input, expected) => {
    expect(ollamaV1Url(input)).toBe(expected);
  });
});

describe('OllamaAdapter', () => {
  it('passes chat completions through Ollama /v1 with the upstream model name', async () => {
    const { adapter, ollama } = await setUp(answering, '');
    const res = await adapter.chat({ model: 'llama', messages: [{ role: 'user', content: 'hi' }] }, ctx());
    expect(res.kind).toBe('json');
    expect(JSON.parse(await bodyText(res))).toEqual(ollamaCompletion('llama3.2:1b', 'Hello'));
    expect(ollama.requests).toEqual([
      { path: '/v1/chat/completions', body: { model: 'llama3.2:1b', messages: [{ role: 'user', content: 'hi' }] } },
    ]);
  });

  it('serves a non-streamed Responses call through chat, readable by the openai client', async () => {
    const { adapter, ollama } = await setUp(answering);
    const res = await adapter.responses(
      { model: 'llama', input: 'hi', instructions: 'Be brief.', max_output_tokens: 20 },
      ctx(),
    );
    expect(ollama.requests[0]).toEqual({
      path: '/v1/chat/completions',
      body: {
        model: 'llama3.2:1b',
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: 'hi' },
        ],
        max_tokens: 20,
      },
    });
    const response = await clientReceiving(await bodyText(res), 'application/json').responses.create({
      model: 'llama',
      input: 'hi',
    });
    expect(response).toMatchObject({ object: 'response', status: 'completed', model: 'llama', output_text: 'Hello' });
    expect(response.usage).toMatchObject({ input_tokens: 11, output_tokens: 3, total_tokens: 14 });
  });

  it('serves a streamed Responses call as Responses events, one delta per Ollama chunk', async () => {
    const { adapter, ollama } = await setUp(answering);
    const res = await adapter.responses({ model: 'llama', input: 'hi', stream: true }, ctx());
    expect(res.kind).toBe('sse');
    expect(ollama.requests[0].body).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    const text = await bodyText(res);
    const stream = clientReceiving(text, 'text/event-stream').responses.stream({ model: 'llama', input: 'hi' });
    const deltas: string[] = [];
    stream.on('response.output_text.delta', (event) => deltas.push(event.delta));
    const final = await stream.finalResponse();
    expect(deltas).toEqual(['Hel', 'lo']);
    expect(final.output_text).toBe('Hello');
    expect(final.usage).toMatchObject({ input_tokens: 11, output_tokens: 2 });
  });

  it('makes a streamed Responses call throw, without completion, when Ollama fails mid-stream', async () => {
    const { adapter } = await setUp((body, res) =>
      streamPieces(res, [
        ollamaChunk(String(body.model), { role: 'assistant', content: 'Hel' }),
        `data: ${JSON.stringify({ error: { message: 'model runner has unexpectedly stopped' } })}\n\n`,
      ]),
    );
    const res = await adapter.responses({ model: 'llama', input: 'hi', stream: true }, ctx());
    const seen: string[] = [];
    let error: unknown;
    try {
      if (res.kind !== 'sse') throw new Error('expected sse');
      for await (const frame of res.body) seen.push(String(frame));
    } catch (e) {
      error = e;
    }
    // The upstream's own text goes to the log (detail), never to the client (README "Errors").
    expect(error).toMatchObject({
      status: 502,
      detail: expect.stringContaining('model runner has unexpectedly stopped'),
    });
    expect((error as Error).message).not.toContain('model runner');
    expect(seen.join('')).toContain('"delta":"Hel"');
    expect(seen.join('')).not.toContain('response.completed');
  });

  it('makes a streamed Responses call throw when Ollama closes the stream before [DONE]', async () => {
    const { adapter } = await setUp((body, res) =>
      streamPieces(res, [ollamaChunk(String(body.model), { content: 'Hel' })]),
    );
    const res = await adapter.responses({ model: 'llama', input: 'hi', stream: true }, ctx());
    await expect(bodyText(res)).rejects.toMatchObject({ status: 502, detail: expect.stringContaining('[DONE]') });
  });

  it("answers an Ollama 404 (model not pulled) as the operator's problem: 502, its text in the log only, not booked, fails over", async () => {
    const { adapter } = await setUp((_body, res) => {
      res.writeHead(404, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          error: { message: 'model "llama3.2:1b" not found, try pulling it first', type: 'api_error' },
        }),
      );
    });
    await expect(adapter.responses({ model: 'llama', input: 'hi' }, ctx())).rejects.toMatchObject({
      status: 502,
      message: expect.stringContaining('does not serve this endpoint or model'),
      detail: expect.stringContaining('try pulling it first'),
      countsAgainstProvider: false,
      failsOver: true,
    });
  });

  it('rejects a Responses call chat completions cannot express with a 400 and sends nothing', async () => {
    const { adapter, ollama } = await setUp(answering);
    await expect(
      adapter.responses(
        { model: 'llama', input: [{ type: 'function_call_output', call_id: 'c', output: '1' }] },
        ctx(),
      ),
    ).rejects.toMatchObject({
      status: 400,
    });
    expect(ollama.requests).toHaveLength(0);
  });
});
