import { MemoryProviderQueue } from '@iop/dispatch';
import { waitUntil } from '@iop/dispatch/testing';
import type { Socket } from 'node:net';
import { answerWhole, streamEvents, wantsStream } from './testing/raw-answers';
import { startRawUpstream, type RawRequest, type RawUpstream } from './testing/raw-upstream';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';
import { PATHS, requestBody, type Endpoint } from './testing/upstream-behaviour';

// docs/architecture.md "Invariants and their tests": a call the gateway cuts is closed by halves, and its socket
// waits for the server's own close. That socket has sent its FIN: no other call of the adapter may be written on it.
// The adapter's other calls, on free slots of the same provider or on other providers of the adapter, take
// another connection at once and never fail for it (a write after the FIN would fail before the server saw a
// byte, and be booked as an upstream the gateway could not reach).

/** Longer than the test: the server holds its side open, so the cut socket closes by halves for all of it. */
const CLOSE_WAIT_MS = 5000;

const yaml = `
version: 1
nodes:
  - id: n
    adapters:
      - { id: v, type: vllm, base_url: "\${RAW}", close_wait_ms: ${CLOSE_WAIT_MS} }
      - { id: o, type: ollama, base_url: "\${RAW}", close_wait_ms: ${CLOSE_WAIT_MS} }
      - { id: c, type: openai_compat, base_url: "\${RAW}/v1", close_wait_ms: ${CLOSE_WAIT_MS} }
    providers:
      - { id: vl, category: vllm, adapter: v, models: [vm], max_concurrency: 8 }
      - { id: vl2, category: vllm, adapter: v, models: [vm2], max_concurrency: 8 }
      - { id: ol, category: ollama, adapter: o, models: [om], max_concurrency: 8 }
      - { id: co, category: openai_compat, adapter: c, models: [cm], max_concurrency: 8 }
`;

describe('a socket closing by halves after a cut call is never written on again', () => {
  let raw: RawUpstream;
  let gateway: TestGateway;
  /** The connection of the call to be cut; 0 until it arrived. */
  let cutConnection = 0;
  /** Sockets the server holds open after reading the gateway's close (destroyed after each test). */
  const held: Socket[] = [];

  beforeAll(async () => {
    raw = await startRawUpstream(
      (req: RawRequest, socket: Socket) => {
        if (req.json.hold !== true) return answerWhole(req, socket);
        cutConnection = req.connection;
        // The call to be cut: a stream that goes on until the gateway closes; the server never closes its side.
        if (wantsStream(req))
          socket.write('HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n');
        const event = Buffer.from(streamEvents(req, ['piece '])[0]);
        const chunk = Buffer.concat([Buffer.from(`${event.length.toString(16)}\r\n`), event, Buffer.from('\r\n')]);
        if (wantsStream(req)) socket.write(chunk);
        held.push(socket);
      },
      { allowHalfOpen: true },
    );
    gateway = await startTestGateway(yaml, { RAW: raw.origin }, new MemoryProviderQueue());
  });
  afterEach(() => {
    for (const socket of held.splice(0)) socket.destroy();
    cutConnection = 0;
  });
  afterAll(async () => {
    await gateway.close();
    await raw.close();
  });

  const post = (endpoint: Endpoint, model: string, stream: boolean, extra: object = {}, signal?: AbortSignal) =>
    fetch(`${gateway.url}${PATHS[endpoint]}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...requestBody(endpoint, model, stream), ...extra }),
      signal,
    });

  it.each([
    [
      'a stream the client leaves (chat, vLLM); then chat, streamed chat and another provider of the adapter',
      'chat',
      'vm',
      true,
    ],
    ['a stream the client leaves (Responses translated, Ollama)', 'responses', 'om', true],
    ['a call the client leaves before its first byte (embeddings, OpenAI-compatible)', 'embeddings', 'cm', false],
  ] as const)('%s', async (_what, endpoint, model, stream) => {
    const client = new AbortController();
    const cut = post(endpoint, model, stream, { hold: true }, client.signal).then(async (res) => {
      await res.body!.getReader().read();
    });
    await waitUntil(() => cutConnection > 0, 3000, 'the call to be cut to reach the upstream');
    if (stream) await cut;
    client.abort();
    await cut.catch(() => undefined);
    const before = raw.requests.length;
    // While the cut call's socket waits for the server's close: the adapter's next calls, one after the other
    // (so each finds the adapter's connections idle, the closing one among them) and then several at once.
    const followUps: Array<[Endpoint, string, boolean]> =
      model === 'vm'
        ? [
            ['chat', 'vm', false],
            ['chat', 'vm', true],
            ['responses', 'vm2', false],
          ]
        : [[endpoint, model, false]];
    const statuses: number[] = [];
    for (const [e, m, s] of followUps) {
      const res = await post(e, m, s);
      await res.text();
      statuses.push(res.status);
    }
    const together = await Promise.all(
      followUps.map(async ([e, m, s]) => {
        const res = await post(e, m, s);
        await res.text();
        return res.status;
      }),
    );
    expect([...statuses, ...together]).toEqual(Array(followUps.length * 2).fill(200));
    // Every follow-up reached the server, none on the connection being closed.
    const after = raw.requests.slice(before);
    expect(after).toHaveLength(followUps.length * 2);
    expect(after.filter((r) => r.connection === cutConnection)).toEqual([]);
    // The cut socket is still closing by halves: the server never closed its side.
    expect(held.some((s) => !s.destroyed)).toBe(true);
  });
});
