import { MemoryHealthStore } from '@iop/dispatch';
import type { Socket } from 'node:net';
import OpenAI from 'openai';
import { streamEvents } from './testing/raw-answers';
import { chunkHead, startRawUpstream, type RawRequest, type RawUpstream } from './testing/raw-upstream';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';
import { post, requestBody } from './testing/upstream-behaviour';

/**
 * README "Streaming": an SSE line ends with CRLF, LF or CR (WHATWG HTML, "Server-sent events"), and
 * a stream ends at its end marker (`data: [DONE]`, `response.completed`) however its lines end and
 * however the network cuts its bytes; what follows the marker (a comment, a late event) changes
 * nothing. A finished stream is never failed nor booked against its provider, and a stream passed
 * through reaches the client byte for byte. Checked on chat and Responses, passed through (vLLM,
 * Ollama, OpenAI-compatible) and translated (Ollama).
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
    providers:
      - { id: vl, category: vllm, adapter: v, models: [vm], max_concurrency: 4 }
      - { id: ol, category: ollama, adapter: o, models: [om], max_concurrency: 4 }
      - { id: co, category: openai_compat, adapter: c, models: [cm], max_concurrency: 4 }
`;

/** The stream's events (LF line endings) as the writes of an upstream whose stream is shaped `how`. */
type Shape = (events: string[]) => string[];

const SHAPES: Array<[string, Shape]> = [
  [
    'CRLF, the last LF in a read of its own',
    (events) => {
      const crlf = events.map((e) => e.replaceAll('\n', '\r\n'));
      const last = crlf.pop() ?? '';
      return [...crlf, last.slice(0, -1), '\n'];
    },
  ],
  ['CR', (events) => events.map((e) => e.replaceAll('\n', '\r'))],
  [
    'CR, each event cut between the CRs of its blank line',
    (events) => events.flatMap((e) => [e.replaceAll('\n', '\r').slice(0, -1), '\r']),
  ],
  ['LF, a comment and a late event after the end marker', (events) => [...events, ': bye\n\n', 'data: {"late":1}\n\n']],
];

/** Writes `parts` as a chunked SSE answer, one chunk each, a few ms apart (so each is a read of its own). */
async function writePaced(socket: Socket, parts: string[]): Promise<void> {
  socket.setNoDelay(true);
  socket.write('HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n');
  for (const part of parts) {
    const bytes = Buffer.from(part);
    socket.write(Buffer.concat([chunkHead(bytes.length), bytes, Buffer.from('\r\n')]));
    await new Promise((r) => setTimeout(r, 4));
  }
  socket.write('0\r\n\r\n');
}

describe('a finished stream, whatever its line endings and whatever follows its end marker', () => {
  let raw: RawUpstream;
  let gateway: TestGateway;
  let health: MemoryHealthStore;
  let stream: (req: RawRequest, socket: Socket) => Promise<void> = async () => undefined;

  beforeAll(async () => {
    raw = await startRawUpstream((req, socket) => stream(req, socket));
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

  describe.each(SHAPES)('%s', (_how, shape) => {
    it.each([
      ['chat, vLLM', 'chat', 'vm', true],
      ['chat, Ollama', 'chat', 'om', true],
      ['chat, OpenAI-compatible', 'chat', 'cm', true],
      ['Responses passed through, vLLM', 'responses', 'vm', true],
      ['Responses passed through, OpenAI-compatible', 'responses', 'cm', true],
      ['Responses translated, Ollama', 'responses', 'om', false],
    ] as const)('%s: completes, nothing booked', async (_w, endpoint, model, passedThrough) => {
      let sent = '';
      stream = async (req, socket) => {
        const parts = shape(streamEvents(req, ['hel', 'lo']));
        sent = parts.join('');
        await writePaced(socket, parts);
      };
      const res = await post(gateway, endpoint, requestBody(endpoint, model, true));
      expect(res.status).toBe(200);
      if (passedThrough) expect(res.text).toBe(sent);
      if (endpoint === 'chat') expect(res.text).toMatch(/(^|[\r\n])data: \[DONE\][\r\n]/);
      else expect(res.text).toContain('response.completed');
      // No error event added: chat's `data: {"error": …}`, Responses' `error` and `response.failed`.
      expect(res.text).not.toMatch(/data: \{"error"|event: error|"type":"error"|response\.failed/);
      expect(health.unhealthy().size).toBe(0);
    });
  });

  it.each(['vm', 'om'])('the openai client reads a CR-only chat stream (%s) whole', async (model) => {
    stream = (req, socket) => writePaced(socket, SHAPES[1][1](streamEvents(req, ['hel', 'lo'])));
    const client = new OpenAI({ baseURL: gateway.baseURL, apiKey: 'x', maxRetries: 0 });
    let text = '';
    for await (const chunk of await client.chat.completions.create({
      model,
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
    }))
      text += chunk.choices[0]?.delta.content ?? '';
    expect(text).toBe('hello');
  });
});
