import { RedisProviderQueue } from '@iop/dispatch';
import { startRedis, uniquePrefix, type TestRedis } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream, fleetYaml } from '@iop/fake-upstream';
import pino from 'pino';
import { catalogMessage } from '@iop/errors';

const QUEUE_UNAVAILABLE_MESSAGE = catalogMessage('queue_unavailable', { why: 'client' });
import { startTestGateway, type TestGateway } from './testing/gateway-harness';

/**
 * README "Errors": a `queue_unavailable` answer is one fixed sentence; what Redis said (its error
 * text, its host and port) stays in the gateway's log, never reaches a client. Checked with a real
 * redis-server that is killed under a running gateway, on every pooled endpoint.
 */
describe('queue_unavailable never carries the queue backend’s own text to a client', () => {
  let redis: TestRedis;
  let upstream: FakeUpstream;
  let gateway: TestGateway;

  beforeAll(async () => {
    [redis, upstream] = await Promise.all([startRedis({ forceOwn: true }), startFakeUpstream()]);
    const queue = new RedisProviderQueue({
      redisUrl: redis.url,
      prefix: uniquePrefix('edge-errors'),
      logger: pino({ level: 'silent' }),
    });
    gateway = await startTestGateway(fleetYaml(), { UPSTREAM: upstream.url, UPSTREAM_KEY: 'k' }, queue);
  });
  afterAll(async () => {
    await gateway.close();
    await Promise.all([redis.stop(), upstream.close()]);
  });

  const bodies = [
    ['/v1/chat/completions', { model: 'llama', messages: [{ role: 'user', content: 'x' }] }],
    ['/v1/chat/completions', { model: 'qwen', stream: true, messages: [{ role: 'user', content: 'x' }] }],
    ['/v1/responses', { model: 'llama', input: 'x' }],
    ['/v1/responses', { model: 'qwen', stream: true, input: 'x' }],
    ['/v1/embeddings', { model: 'small', input: 'x' }],
  ] as const;
  const post = async (path: string, body: object) => {
    const res = await fetch(`${gateway.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, text: await res.text() };
  };

  it('serves while Redis is up, then answers the fixed sentence once it is gone', async () => {
    for (const [path, body] of bodies) expect((await post(path, body)).status).toBe(200);
    await redis.kill();
    const port = new URL(redis.url).port;
    for (const [path, body] of bodies) {
      const res = await post(path, body);
      expect(res.status).toBe(503);
      expect(JSON.parse(res.text)).toEqual({
        error: { message: QUEUE_UNAVAILABLE_MESSAGE, type: expect.any(String), param: null, code: 'queue_unavailable' },
      });
      expect(res.text).not.toMatch(/ECONNREFUSED|Connection is closed|127\.0\.0\.1|Stream isn't writeable|CROSSSLOT/);
      expect(res.text).not.toContain(port);
    }
    // A direct (CLI) route keeps serving.
    expect(
      (await post('/v1/chat/completions', { model: 'echo', messages: [{ role: 'user', content: 'x' }] })).status,
    ).toBe(200);
  });
});
