import { MemoryHealthStore } from '@iop/dispatch';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { brotliCompressSync, deflateRawSync, deflateSync, gzipSync } from 'node:zlib';
import OpenAI from 'openai';
import { answerWhole, streamEvents } from './testing/raw-answers';
import { startRawUpstream, writeAnswer, type RawRequest, type RawUpstream } from './testing/raw-upstream';
import type { Socket } from 'node:net';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';
import { events, requestBody, PATHS, type Endpoint } from './testing/upstream-behaviour';

/**
 * README "Errors" (errors an upstream causes): an upstream answer with a `Content-Encoding` (gzip,
 * deflate, br), asked for or not, reaches the client decoded, with headers that match its bytes (no
 * `Content-Encoding`, a `Content-Length` of what is sent), on every endpoint, streamed or not, passed
 * through or translated; `gateway.max_response_bytes` bounds the decoded size (a compression bomb is
 * a 502, not booked); an encoding the gateway cannot undo is a 502, booked.
 */

const yaml = `
version: 1
gateway: { request_timeout_ms: 5000, stream_idle_timeout_ms: 2000, max_response_bytes: 1000000 }
health: { interval_ms: 60000, unhealthy_after: 1, healthy_after: 1, cooldown_ms: 60000 }
nodes:
  - id: n
    adapters:
      - { id: v, type: vllm, base_url: "\${RAW}" }
      - { id: o, type: ollama, base_url: "\${RAW}" }
      - { id: c, type: openai_compat, base_url: "\${RAW}/v1" }
    providers:
      - { id: vl, category: vllm, adapter: v, models: [vm], max_concurrency: 4 }
      - { id: ol, category: ollama, adapter: o, models: [om], max_concurrency: 4 }
      - { id: co, category: openai_compat, adapter: c, models: [cm], max_concurrency: 4 }
`;

const ENCODINGS: Record<string, (b: Buffer) => Buffer> = {
  gzip: (b) => gzipSync(b),
  deflate: (b) => deflateSync(b),
  'deflate (raw, as some servers send it)': (b) => deflateRawSync(b),
  br: (b) => brotliCompressSync(b),
  'gzip, br': (b) => brotliCompressSync(gzipSync(b)),
};
const headerOf = (name: string) => name.replace(/ \(.*\)$/, '');

/** A POST read raw (node:http decodes nothing): status, headers and bytes exactly as the gateway sent them. */
function rawPost(
  gateway: TestGateway,
  endpoint: Endpoint,
  body: object,
): Promise<{ status: number; headers: IncomingHttpHeaders; bytes: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      `${gateway.url}${PATHS[endpoint]}`,
      { method: 'POST', headers: { 'content-type': 'application/json', 'accept-encoding': 'gzip, deflate, br' } },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (p: Buffer) => parts.push(p));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, bytes: Buffer.concat(parts) }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

describe('an upstream answer with a Content-Encoding', () => {
  let raw: RawUpstream;
  let gateway: TestGateway;
  let health: MemoryHealthStore;
  let answer: (req: RawRequest, socket: Socket) => void = () => undefined;

  beforeAll(async () => {
    raw = await startRawUpstream((req, socket) => answer(req, socket));
  });
  beforeEach(async () => {
    health = new MemoryHealthStore(() => ({ unhealthy_after: 1, healthy_after: 1, cooldown_ms: 60_000 }));
    gateway = await startTestGateway(yaml, { RAW: raw.origin }, undefined, { health });
  });
  afterEach(async () => {
    await gateway.close();
  });
  afterAll(async () => {
    await raw.close();
  });

  const rows = [
    ['chat, vLLM', 'chat', 'vm', false],
    ['chat stream, vLLM', 'chat', 'vm', true],
    ['chat stream, Ollama', 'chat', 'om', true],
    ['Responses passed through, vLLM', 'responses', 'vm', false],
    ['Responses stream passed through, OpenAI-compatible', 'responses', 'cm', true],
    ['Responses translated, Ollama', 'responses', 'om', false],
    ['Responses stream translated, Ollama', 'responses', 'om', true],
    ['embeddings, vLLM', 'embeddings', 'vm', false],
    ['embeddings, Ollama', 'embeddings', 'om', false],
  ] as const;

  describe.each(Object.keys(ENCODINGS))('%s', (encoding) => {
    it.each(rows)(
      '%s: the client reads the decoded answer, with headers that match its bytes',
      async (_w, endpoint, model, stream) => {
        answer = (req, socket) =>
          answerWhole(req, socket, { encode: { name: headerOf(encoding), apply: ENCODINGS[encoding] } });
        const res = await rawPost(gateway, endpoint, requestBody(endpoint, model, stream));
        expect(res.status).toBe(200);
        expect(res.headers['content-encoding']).toBeUndefined();
        const text = res.bytes.toString('utf8');
        if (!stream) {
          expect(Number(res.headers['content-length'])).toBe(res.bytes.length);
          const json = JSON.parse(text) as Record<string, unknown>;
          expect(json.object).toBe(
            endpoint === 'chat' ? 'chat.completion' : endpoint === 'responses' ? 'response' : 'list',
          );
          if (endpoint !== 'embeddings') expect(text).toContain('hello world');
        } else {
          const all = events(text);
          expect(all.some((e) => e.event === 'error' || 'error' in Object(e.data))).toBe(false);
          expect(text).toContain('hello');
          expect(endpoint === 'chat' ? all.at(-1)?.data : all.at(-1)?.event).toBe(
            endpoint === 'chat' ? '[DONE]' : 'response.completed',
          );
        }
        expect(health.unhealthy().size).toBe(0);
      },
    );
  });

  it('an error answer gzip-encoded is read: the upstream 400 passed on with its message', async () => {
    answer = (_req, socket) =>
      writeAnswer(
        socket,
        400,
        { 'content-type': 'application/json', 'content-encoding': 'gzip' },
        gzipSync(
          JSON.stringify({
            error: {
              message: 'maximum context length is 8 tokens',
              type: 'invalid_request_error',
              code: 'context_length_exceeded',
            },
          }),
        ),
      );
    const res = await rawPost(gateway, 'chat', requestBody('chat', 'vm', false));
    expect(res.status).toBe(400);
    expect(JSON.parse(res.bytes.toString())).toMatchObject({
      error: { code: 'context_length_exceeded', message: 'maximum context length is 8 tokens' },
    });
  });

  it('the openai client reads gzip-encoded chat and Responses answers, streamed and not', async () => {
    answer = (req, socket) => answerWhole(req, socket, { encode: { name: 'gzip', apply: (b) => gzipSync(b) } });
    const client = new OpenAI({ baseURL: gateway.baseURL, apiKey: 'x', maxRetries: 0 });
    const chat = await client.chat.completions.create({ model: 'vm', messages: [{ role: 'user', content: 'hi' }] });
    expect(chat.choices[0].message.content).toBe('hello world');
    const translated = await client.responses.create({ model: 'om', input: 'hi' });
    expect(translated.output_text).toBe('hello world');
    const stream = client.responses.stream({ model: 'cm', input: 'hi' });
    expect((await stream.finalResponse()).output_text).toBe('hello world');
  });

  describe('a compression bomb: the decoded size is held to gateway.max_response_bytes (1 MB here)', () => {
    const bomb = (req: RawRequest, socket: Socket, stream: boolean) => {
      // 20 MB decoded from about 20 KB sent.
      const inside = `{"pad":"${'0'.repeat(20_000_000)}"}`;
      const body = stream ? `${streamEvents(req, ['hi'])[0]}data: ${inside}\n\n` : inside;
      writeAnswer(
        socket,
        200,
        { 'content-type': stream ? 'text/event-stream' : 'application/json', 'content-encoding': 'gzip' },
        gzipSync(body),
      );
    };

    it.each([
      ['chat, vLLM', 'chat', 'vm'],
      ['Responses translated, Ollama', 'responses', 'om'],
      ['embeddings, Ollama', 'embeddings', 'om'],
    ] as const)('%s: a 502 naming the setting, not booked', async (_w, endpoint, model) => {
      answer = (req, socket) => bomb(req, socket, false);
      const res = await rawPost(gateway, endpoint, requestBody(endpoint, model, false));
      expect(res.status).toBe(502);
      expect(JSON.parse(res.bytes.toString()).error.message).toContain('gateway.max_response_bytes');
      expect(health.unhealthy().size).toBe(0);
    });

    it.each([
      ['chat stream, vLLM', 'chat', 'vm'],
      ['Responses stream passed through, OpenAI-compatible', 'responses', 'cm'],
      ['Responses stream translated, Ollama', 'responses', 'om'],
    ] as const)(
      '%s: one event decoding past the limit ends the stream with the error, not booked',
      async (_w, endpoint, model) => {
        answer = (req, socket) => bomb(req, socket, true);
        const res = await rawPost(gateway, endpoint, requestBody(endpoint, model, true));
        const text = res.bytes.toString();
        expect(text.length).toBeLessThan(100_000);
        if (res.status === 200) expect(events(text).at(-1)?.event ?? events(text).at(-1)?.data).toBeDefined();
        expect(text).toContain('gateway.max_response_bytes');
        expect(text).not.toMatch(/\[DONE\]|response\.completed/);
        expect(health.unhealthy().size).toBe(0);
      },
    );
  });

  it.each([
    ['an encoding the gateway does not decode (zstd)', 'zstd', (b: Buffer) => b, /cannot decode \(zstd\)/],
    [
      'corrupt gzip',
      'gzip',
      (b: Buffer) => Buffer.concat([Buffer.from([0x1f, 0x8b, 8, 0]), b]),
      /could not be decoded/,
    ],
    ['gzip cut short', 'gzip', (b: Buffer) => gzipSync(b).subarray(0, 30), /could not be decoded/],
  ])('%s: a 502 that says so, booked', async (_w, name, apply, message) => {
    for (const stream of [false, true]) {
      answer = (req, socket) => answerWhole(req, socket, { encode: { name, apply } });
      const res = await rawPost(gateway, 'chat', requestBody('chat', 'vm', stream));
      const text = res.bytes.toString();
      expect(res.status).toBe(502);
      expect(text).toMatch(message);
      expect(health.unhealthy().has('vl')).toBe(true);
      await gateway.close();
      health = new MemoryHealthStore(() => ({ unhealthy_after: 1, healthy_after: 1, cooldown_ms: 60_000 }));
      gateway = await startTestGateway(yaml, { RAW: raw.origin }, undefined, { health });
    }
  });
});
