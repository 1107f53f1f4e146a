import { MemoryProviderQueue, RedisProviderQueue, type ProviderQueue } from '@iop/dispatch';
import { startRedis, uniquePrefix, waitUntil, type TestRedis } from '@iop/dispatch/testing';
import type { Socket } from 'node:net';
import pino from 'pino';
import { answerWhole, streamEvents, wantsStream } from './testing/raw-answers';
import { startRawUpstream, type RawRequest, type RawUpstream } from './testing/raw-upstream';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';
import { inFlight, PATHS, requestBody, type Endpoint } from './testing/upstream-behaviour';

// docs/architecture.md "Invariants and their tests": a call holds its slot, as the model server sees it, from its
// request's arrival until the server has written its last byte or has seen the connection close. A server whose
// event loop is busy reads the gateway's close late; a call the gateway cuts keeps its lease until the server has
// closed its own side (the gateway closes by halves), so the next caller's request never reaches it first —
// however late, up to the adapter's close_wait_ms.

/** How long the upstream takes to read the gateway's close: longer than any fixed delay the gateway could guess. */
const LAG_MS = 400;
const CLOSE_WAIT_MS = 1200;

const yaml = (maxResponseBytes: number) => `
version: 1
gateway: { request_timeout_ms: 700, stream_idle_timeout_ms: 400, max_response_bytes: ${maxResponseBytes} }
nodes:
  - id: n
    adapters:
      - { id: v, type: vllm, base_url: "\${RAW}", close_wait_ms: ${CLOSE_WAIT_MS} }
      - { id: o, type: ollama, base_url: "\${RAW}", close_wait_ms: ${CLOSE_WAIT_MS} }
      - { id: c, type: openai_compat, base_url: "\${RAW}/v1", close_wait_ms: ${CLOSE_WAIT_MS} }
    providers:
      - { id: vl, category: vllm, adapter: v, models: [vm], max_concurrency: 1 }
      - { id: ol, category: ollama, adapter: o, models: [om], max_concurrency: 1 }
      - { id: co, category: openai_compat, adapter: c, models: [cm], max_concurrency: 1 }
`;

/** How the gateway cuts the first call. */
type Cut = 'client' | 'first byte' | 'idle' | 'cap';
/** How the upstream reacts to the gateway's close: late, never (it holds its side open), or with a reset. */
type CloseMode = 'late' | 'never' | 'reset';

const backends: Array<[string, boolean]> = [
  ['memory backend', false],
  ['Redis backend', true],
];

describe.each(backends)('a call the gateway cuts, on an upstream slow to read the close (%s)', (_b, onRedis) => {
  let redis: TestRedis | undefined;
  let raw: RawUpstream;
  let gateway: TestGateway | undefined;
  let closeMode: CloseMode = 'late';
  let cut: Cut = 'client';
  /** Calls open at the upstream as it sees them, the most at once, and when each call arrived or ended. */
  let open = 0;
  let maxOpen = 0;
  const arrivedAt: number[] = [];
  let closeReadAt = 0;
  let socketClosedAt = 0;

  beforeAll(async () => {
    redis = onRedis ? await startRedis() : undefined;
    raw = await startRawUpstream(
      (req, socket) => {
        arrivedAt.push(performance.now());
        maxOpen = Math.max(maxOpen, ++open);
        if (arrivedAt.length > 1) {
          answerWhole(req, socket);
          open--;
        } else holdUntilClosed(req, socket);
      },
      { allowHalfOpen: true },
    );
  });
  afterEach(async () => {
    await gateway?.close();
    gateway = undefined;
    open = maxOpen = closeReadAt = socketClosedAt = 0;
    arrivedAt.length = 0;
    raw.requests.length = 0;
  });
  afterAll(async () => {
    await raw?.close();
    await redis?.stop();
  });

  /** The first call: an answer the upstream keeps writing (or never starts) until it reads the gateway's close. */
  function holdUntilClosed(req: RawRequest, socket: Socket): void {
    const events = streamEvents(
      req,
      Array.from({ length: 400 }, (_, i) => `piece ${i} `.repeat(cut === 'cap' ? 40 : 1)),
    );
    let timer: NodeJS.Timeout | undefined;
    if (cut !== 'first byte' && wantsStream(req)) {
      socket.write('HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n');
      let next = 0;
      const writeEvent = () => {
        const event = Buffer.from(events[next++ % events.length]);
        socket.write(Buffer.concat([Buffer.from(`${event.length.toString(16)}\r\n`), event, Buffer.from('\r\n')]));
      };
      writeEvent();
      if (cut !== 'idle') timer = setInterval(writeEvent, 10);
    }
    let ended = false;
    const end = (stopWriting = true) => {
      if (stopWriting) clearInterval(timer);
      if (ended) return;
      ended = true;
      open--;
    };
    socket.once('end', () => {
      if (closeMode === 'reset') {
        end();
        socket.resetAndDestroy();
      } else if (closeMode === 'late')
        setTimeout(() => {
          closeReadAt = performance.now();
          end();
          socket.end();
        }, LAG_MS);
      else {
        // 'never': the server has read the close but goes on writing, its side left open, until the
        // gateway gives up waiting and destroys the socket.
        end(false);
      }
    });
    socket.once('close', () => {
      socketClosedAt = performance.now();
      end();
    });
  }

  async function startGateway(maxResponseBytes = 1_000_000): Promise<TestGateway> {
    const queue: ProviderQueue = redis
      ? new RedisProviderQueue({
          redisUrl: redis.url,
          prefix: uniquePrefix('cut-close'),
          logger: pino({ level: 'silent' }),
        })
      : new MemoryProviderQueue();
    return startTestGateway(yaml(maxResponseBytes), { RAW: raw.origin }, queue);
  }

  /** Sends the call to be cut, then a second one that queues behind it; returns when both are over. */
  async function cutThenQueue(endpoint: Endpoint, model: string, stream: boolean): Promise<number> {
    const client = new AbortController();
    const first = fetch(`${gateway!.url}${PATHS[endpoint]}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(requestBody(endpoint, model, stream)),
      signal: client.signal,
    }).then(async (res) => {
      const reader = res.body!.getReader();
      await reader.read();
      if (cut === 'client') client.abort();
      else while (!(await reader.read()).done);
    });
    await waitUntil(() => arrivedAt.length === 1, 3000, 'the first call to reach the upstream');
    const queued = fetch(`${gateway!.url}${PATHS[endpoint]}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(requestBody(endpoint, model, false)),
    });
    if (cut === 'client' && !stream) setTimeout(() => client.abort(), 100);
    await first.catch(() => undefined);
    const status = (await queued).status;
    await waitUntil(() => open === 0, CLOSE_WAIT_MS + 2000, 'the upstream to end every call');
    return status;
  }

  it.each([
    ['a client that leaves mid-stream (chat, vLLM)', 'chat', 'vm', true, 'client'],
    ['a client that leaves mid-stream (Responses translated, Ollama)', 'responses', 'om', true, 'client'],
    ['a client that leaves before the first byte (embeddings, OpenAI-compatible)', 'embeddings', 'cm', false, 'client'],
    ['a client that leaves before the first byte (chat, vLLM)', 'chat', 'vm', false, 'client'],
    [
      'no first byte within gateway.request_timeout_ms (Responses passed through, vLLM)',
      'responses',
      'vm',
      true,
      'first byte',
    ],
    ['a stream cut for gateway.stream_idle_timeout_ms (chat, Ollama)', 'chat', 'om', true, 'idle'],
    // The gateway stops reading a translated stream at its cap while the upstream still writes it.
    ['a stream cut at gateway.max_response_bytes (Responses translated, Ollama)', 'responses', 'om', true, 'cap'],
  ] as const)(
    '%s: the next call reaches the upstream only after it has read the close',
    async (_w, endpoint, model, stream, how) => {
      cut = how;
      closeMode = 'late';
      gateway = await startGateway(how === 'cap' ? 20_000 : undefined);
      expect(await cutThenQueue(endpoint, model, stream)).toBe(200);
      expect(arrivedAt).toHaveLength(2);
      expect(maxOpen).toBe(1);
      // The lease waited for the server's own close, however late it read the gateway's.
      expect(arrivedAt[1]).toBeGreaterThanOrEqual(closeReadAt);
      expect(await inFlight(gateway, { vm: 'vl', om: 'ol', cm: 'co' }[model])).toBe(0);
    },
  );

  it('an upstream that never closes its side holds the slot close_wait_ms, then the gateway closes the socket', async () => {
    cut = 'client';
    closeMode = 'never';
    gateway = await startGateway();
    const cutAt = performance.now();
    expect(await cutThenQueue('chat', 'vm', true)).toBe(200);
    expect(maxOpen).toBe(1);
    // The server writing on is what tells it, at last, that the gateway has let the socket go.
    await waitUntil(() => socketClosedAt > 0, 2000, 'the first socket to close');
    expect(socketClosedAt - cutAt).toBeGreaterThanOrEqual(CLOSE_WAIT_MS - 100);
    // The wait is bounded: the socket is destroyed once close_wait_ms has passed (less the time to the cut).
    expect(arrivedAt[1] - cutAt).toBeGreaterThanOrEqual(CLOSE_WAIT_MS - 100);
    expect(arrivedAt[1] - cutAt).toBeLessThan(CLOSE_WAIT_MS + 1500);
  });

  it('an upstream that resets the connection as it reads the close frees the slot at once', async () => {
    cut = 'client';
    closeMode = 'reset';
    gateway = await startGateway();
    const cutAt = performance.now();
    expect(await cutThenQueue('chat', 'om', true)).toBe(200);
    expect(maxOpen).toBe(1);
    expect(arrivedAt[1] - cutAt).toBeLessThan(CLOSE_WAIT_MS);
  });
});
