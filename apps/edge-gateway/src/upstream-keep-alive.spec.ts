import { MemoryHealthStore, MemoryProviderQueue, RedisProviderQueue, type ProviderQueue } from '@iop/dispatch';
import { startRedis, uniquePrefix, waitUntil, type TestRedis } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream } from '@iop/fake-upstream';
import pino from 'pino';
import { answerWhole } from './testing/raw-answers';
import { startRawUpstream, writeAnswer, type RawUpstream } from './testing/raw-upstream';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';
import { errorOf, events, inFlight, post, requestBody, type Endpoint } from './testing/upstream-behaviour';

/**
 * README "Connections to an upstream": a server that closes a keep-alive socket as the gateway's
 * next request arrives (uvicorn, so vLLM, closes idle sockets after 5 s and sends no `Keep-Alive`
 * hint) never costs a client its request: the request, which the server never read, is sent once
 * more on a fresh connection, under the same lease, booked against nobody and not counted as a
 * failover; idle sockets close after the adapter's `keep_alive_timeout_ms`, sooner on a server's hint.
 */

/** Every HTTP adapter type on `${RAW}`, and a pool `pm` of `vl` and a sibling on `${GOOD}` (the fake upstream). */
const yaml = (rawKeepAlive = '') => `
version: 1
gateway: { request_timeout_ms: 5000, stream_idle_timeout_ms: 2000 }
health: { interval_ms: 60000, unhealthy_after: 1, healthy_after: 1, cooldown_ms: 60000 }
nodes:
  - id: n
    adapters:
      - { id: v, type: vllm, base_url: "\${RAW}"${rawKeepAlive} }
      - { id: o, type: ollama, base_url: "\${RAW}"${rawKeepAlive} }
      - { id: c, type: openai_compat, base_url: "\${RAW}/v1"${rawKeepAlive} }
      - { id: good, type: openai_compat, base_url: "\${GOOD}" }
    providers:
      - { id: vl, category: vllm, adapter: v, models: [vm, pm], max_concurrency: 1 }
      - { id: ol, category: ollama, adapter: o, models: [om], max_concurrency: 1 }
      - { id: co, category: openai_compat, adapter: c, models: [cm], max_concurrency: 1 }
      - { id: sib, category: openai_compat, adapter: good, models: [pm], max_concurrency: 1 }
`;

/** The queue backends: a lease held across the resend must hold on both. */
const backends: Array<[string, boolean]> = [
  ['memory backend', false],
  ['Redis backend', true],
];

describe.each(backends)('a keep-alive socket the upstream closes as the next request arrives (%s)', (_b, onRedis) => {
  let redis: TestRedis | undefined;
  let raw: RawUpstream;
  let good: FakeUpstream;
  let gateway: TestGateway;
  let health: MemoryHealthStore;
  /** How the raw upstream closes a reused socket: a reset (the request hit a closed socket) or a plain close. */
  let closeWith: 'reset' | 'fin' | 'every request' = 'reset';
  /** `in_flight` of the provider while each resent request was in the upstream. */
  let leaseDuringResend: number[] = [];
  let killed = 0;
  const providerOf: Record<string, string> = { vm: 'vl', pm: 'vl', om: 'ol', cm: 'co' };

  beforeAll(async () => {
    redis = onRedis ? await startRedis() : undefined;
    good = await startFakeUpstream({ name: 'good' });
    raw = await startRawUpstream(async (req, socket) => {
      if (req.onConnection > 1 || closeWith === 'every request') {
        // The server's idle close crosses the request: it is never read, never answered.
        killed++;
        if (closeWith === 'fin') socket.destroy();
        else socket.resetAndDestroy();
        return;
      }
      if (killed > 0) leaseDuringResend.push(await inFlight(gateway, providerOf[String(req.json.model)]));
      answerWhole(req, socket);
    });
    health = new MemoryHealthStore(() => ({ unhealthy_after: 1, healthy_after: 1, cooldown_ms: 60_000 }));
    const queue: ProviderQueue = redis
      ? new RedisProviderQueue({
          redisUrl: redis.url,
          prefix: uniquePrefix('keep-alive'),
          logger: pino({ level: 'silent' }),
        })
      : new MemoryProviderQueue();
    gateway = await startTestGateway(yaml(), { RAW: raw.origin, GOOD: good.url }, queue, { health });
  });
  afterEach(() => {
    closeWith = 'reset';
    leaseDuringResend = [];
    killed = 0;
    good.reset();
  });
  afterAll(async () => {
    await gateway?.close();
    await raw?.close();
    await good?.close();
    await redis?.stop();
  });

  it.each([
    ['chat, vLLM', 'chat', 'vm', false, 'reset'],
    ['chat stream, vLLM', 'chat', 'vm', true, 'fin'],
    ['chat stream, Ollama', 'chat', 'om', true, 'reset'],
    ['Responses passed through, vLLM', 'responses', 'vm', false, 'fin'],
    ['Responses stream passed through, OpenAI-compatible', 'responses', 'cm', true, 'reset'],
    ['Responses translated, Ollama', 'responses', 'om', false, 'reset'],
    ['Responses stream translated, Ollama', 'responses', 'om', true, 'fin'],
    ['embeddings, vLLM', 'embeddings', 'vm', false, 'reset'],
    ['embeddings, Ollama', 'embeddings', 'om', false, 'fin'],
    ['chat in a pool with a sibling', 'chat', 'pm', false, 'reset'],
  ] as const)(
    '%s: every request is answered; the unread one is sent again on a fresh connection under its lease, booked against nobody, no failover',
    async (_what, endpoint: Endpoint, model, stream, close) => {
      closeWith = close;
      const before = raw.requests.length;
      for (let i = 0; i < 4; i++) {
        const res = await post(gateway, endpoint, requestBody(endpoint, model, stream));
        expect([i, res.status, res.text.slice(0, 200)]).toEqual([i, 200, expect.any(String)]);
        expect(res.headers.get('x-iop-resource')).toBe(providerOf[model]);
        if (stream) expect(events(res.text).some((e) => e.event === 'error' || 'error' in Object(e.data))).toBe(false);
      }
      // The gateway reused a socket the upstream then closed at least once (else this test proves nothing).
      expect(killed).toBeGreaterThanOrEqual(1);
      const answered = raw.requests.slice(before).filter((r) => r.onConnection === 1);
      expect(answered).toHaveLength(4);
      expect(leaseDuringResend).toEqual(leaseDuringResend.map(() => 1));
      expect(await inFlight(gateway, providerOf[model])).toBe(0);
      expect(good.stats().total).toBe(0);
      expect(health.unhealthy().size).toBe(0);
    },
  );

  it('a request that fails on a fresh connection is not sent again: 502, booked', async () => {
    closeWith = 'every request';
    // Reuse first: an answered request leaves a pooled socket, which the next request finds closed.
    const res = await post(gateway, 'chat', requestBody('chat', 'cm', false));
    expect(res.status).toBe(502);
    expect(errorOf(res)).toMatchObject({ code: 'upstream_error' });
    // Sent at most twice: once on a pooled socket if there was one, once on a fresh one; never more.
    expect(killed).toBeLessThanOrEqual(2);
    expect(raw.requests.at(-1)?.onConnection).toBe(1);
    await waitUntil(() => health.unhealthy().has('co'), 1000, 'the failure on a fresh connection to be booked');
  });
});

describe('how long the gateway keeps an idle upstream socket (README "Connections to an upstream")', () => {
  let raw: RawUpstream;
  let gateway: TestGateway | undefined;
  let keepAliveHeader: string | undefined;

  beforeAll(async () => {
    raw = await startRawUpstream((_req, socket) => {
      // A server that never closes an idle socket itself, with or without a hint.
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (keepAliveHeader) headers['keep-alive'] = keepAliveHeader;
      writeAnswer(socket, 200, headers, JSON.stringify({ id: 'x', object: 'chat.completion', choices: [] }));
    });
  });
  afterEach(async () => {
    await gateway?.close();
    gateway = undefined;
    keepAliveHeader = undefined;
  });
  afterAll(async () => {
    await raw.close();
  });

  const idleCloseOfNextConnection = async (setting: string): Promise<number> => {
    gateway = await startTestGateway(yaml(setting), { RAW: raw.origin, GOOD: 'http://127.0.0.1:1' });
    const connection = raw.connections();
    expect((await post(gateway, 'chat', requestBody('chat', 'vm', false))).status).toBe(200);
    await waitUntil(() => raw.idleCloseMs[connection] !== undefined, 6000, 'the gateway to close the idle socket');
    return raw.idleCloseMs[connection] as number;
  };

  it('closes it after keep_alive_timeout_ms', async () => {
    const ms = await idleCloseOfNextConnection(', keep_alive_timeout_ms: 300');
    expect(ms).toBeGreaterThanOrEqual(250);
    expect(ms).toBeLessThan(1500);
  });

  it('closes it by default before 5 s, the idle timeout of uvicorn (vLLM) and Node servers', async () => {
    const ms = await idleCloseOfNextConnection('');
    expect(ms).toBeGreaterThanOrEqual(2500);
    expect(ms).toBeLessThan(5000);
  });

  it("closes it sooner when the server's Keep-Alive hint says so (timeout=3: after 1 s, undici keeps a 2 s margin)", async () => {
    keepAliveHeader = 'timeout=3';
    const ms = await idleCloseOfNextConnection(', keep_alive_timeout_ms: 60000');
    expect(ms).toBeGreaterThanOrEqual(800);
    expect(ms).toBeLessThan(2500);
  });

  it('never reuses a socket whose hint leaves no margin (timeout=1)', async () => {
    keepAliveHeader = 'timeout=1';
    gateway = await startTestGateway(yaml(', keep_alive_timeout_ms: 60000'), {
      RAW: raw.origin,
      GOOD: 'http://127.0.0.1:1',
    });
    const before = raw.requests.length;
    for (let i = 0; i < 3; i++)
      expect((await post(gateway, 'chat', requestBody('chat', 'vm', false))).status).toBe(200);
    expect(raw.requests.slice(before).map((r) => r.onConnection)).toEqual([1, 1, 1]);
  });
});
