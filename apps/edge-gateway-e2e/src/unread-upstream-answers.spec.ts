import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { spawnGateway, writeTempConfig, type GatewayProcess } from './testing/gateway-process';

/**
 * An upstream answer the gateway never reads (README "Errors"): the wrong kind of answer for the
 * endpoint (a stream for embeddings), or one whose client leaves before it is read. Its body is
 * closed at the attempt's end, and whatever the upstream does next the gateway process stays up, the
 * client gets a clean error and the slot comes back. A real process: an error event nobody listens
 * to ends a process, which an in-process test cannot show. Checked for every HTTP adapter, with a
 * stream that ends and one the upstream holds open, and for chat asked without streaming.
 */

/** How the upstream's stream goes on after its first events. */
type Tail = 'ends' | 'held open';

const yaml = (upstream: string) => `
version: 1
gateway: { request_timeout_ms: 3000, stream_idle_timeout_ms: 2000 }
health: { interval_ms: 60000, unhealthy_after: 100, healthy_after: 1, cooldown_ms: 1000 }
nodes:
  - id: n
    adapters:
      - { id: v, type: vllm, base_url: "${upstream}" }
      - { id: o, type: ollama, base_url: "${upstream}" }
      - { id: c, type: openai_compat, base_url: "${upstream}/v1" }
    providers:
      - { id: vl, category: vllm, adapter: v, models: [vm], max_concurrency: 2 }
      - { id: ol, category: ollama, adapter: o, models: [om], max_concurrency: 2 }
      - { id: co, category: openai_compat, adapter: c, models: [cm], max_concurrency: 2 }
`;

describe('an upstream answer the gateway never reads (a real gateway process)', () => {
  let upstream: Server;
  let gateway: GatewayProcess;
  let tail: Tail = 'ends';
  const held = new Set<ServerResponse>();

  beforeAll(async () => {
    upstream = createServer((req, res) => {
      if (req.method !== 'POST') {
        res.setHeader('content-type', 'application/json');
        res.end('{"data":[]}');
        return;
      }
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('data: {"garbage\n\n');
        res.write('data: {"choices":"x"}\n\n');
        if (tail === 'ends') res.end('data: [DONE]\n\n');
        else held.add(res);
      });
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const { port } = upstream.address() as AddressInfo;
    gateway = await spawnGateway(writeTempConfig(yaml(`http://127.0.0.1:${port}`)));
  });
  afterEach(() => {
    for (const res of held) res.destroy();
    held.clear();
  });
  afterAll(async () => {
    await gateway?.kill();
    upstream.closeAllConnections();
    await new Promise((r) => upstream.close(r));
  });

  const post = (path: string, body: unknown, signal?: AbortSignal) =>
    fetch(`${gateway.url}/v1/${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal,
    });

  const inFlight = async (id: string): Promise<number | undefined> => {
    const status = (await (await fetch(`${gateway.url}/status`)).json()) as {
      nodes: Array<{ resources: Array<{ id: string; in_flight: number }> }>;
    };
    return status.nodes.flatMap((n) => n.resources).find((r) => r.id === id)?.in_flight;
  };

  const alive = () => gateway.child.exitCode === null && gateway.child.signalCode === null;

  describe.each(['ends', 'held open'] as const)('a stream that %s', (how) => {
    it.each([
      ['vLLM', 'vm', 'vl'],
      ['Ollama', 'om', 'ol'],
      ['OpenAI-compatible', 'cm', 'co'],
    ])('embeddings answered with it through %s: 502, the slot back, the process up', async (_w, model, provider) => {
      tail = how;
      const answers = await Promise.all([1, 2, 3].map(() => post('embeddings', { model, input: 'hello' })));
      for (const res of answers) {
        expect(res.status).toBe(502);
        expect(((await res.json()) as { error: { code: string } }).error.code).toBe('upstream_error');
      }
      // The bodies are closed at the attempts' ends; a crash would follow within a tick or two.
      await new Promise((r) => setTimeout(r, 300));
      expect(alive()).toBe(true);
      expect(await inFlight(provider)).toBe(0);
    });
  });

  it.each([
    ['vLLM', 'vm', 'vl'],
    ['OpenAI-compatible', 'cm', 'co'],
  ])(
    'chat asked without streaming, answered with a stream held open through %s, and the client leaves: the slot back, the process up',
    async (_w, model, provider) => {
      tail = 'held open';
      const controller = new AbortController();
      const leaving = post(
        'chat/completions',
        { model, messages: [{ role: 'user', content: 'hi' }] },
        controller.signal,
      )
        .then((res) => res.text())
        .catch(() => 'left');
      await new Promise((r) => setTimeout(r, 300));
      controller.abort();
      await leaving;
      await new Promise((r) => setTimeout(r, 300));
      expect(alive()).toBe(true);
      expect(await inFlight(provider)).toBe(0);
    },
  );
});
