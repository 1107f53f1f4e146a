import { fleetYaml } from '@iop/fake-upstream';
import { startTestGateway, type TestGateway } from '../testing/gateway-harness';

const STATUS_KEY = 'status-key-1';

/**
 * README "Errors": a known path with the wrong method is `405 method_not_allowed` with `Allow`,
 * OpenAI-shaped, never a 404. The status pages check the status key first (README "Security"), as
 * the `/v1` paths check the client key first.
 */
describe("the gateway's GET paths answer another method with 405 and Allow", () => {
  let gateway: TestGateway;
  beforeAll(async () => {
    const yaml = `${fleetYaml()}status:\n  api_keys: ["${STATUS_KEY}"]\n`;
    gateway = await startTestGateway(yaml, { UPSTREAM: 'http://127.0.0.1:9/v1', UPSTREAM_KEY: 'k' });
  });
  afterAll(async () => {
    await gateway.close();
  });
  const auth = { authorization: `Bearer ${STATUS_KEY}` };

  it.each([
    ['/status', 'POST'],
    ['/status', 'PUT'],
    ['/metrics', 'DELETE'],
    ['/healthz', 'POST'],
    ['/readyz', 'PATCH'],
  ])('%s %s', async (path, method) => {
    const res = await fetch(`${gateway.url}${path}`, { method, headers: auth });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('GET, HEAD');
    expect(await res.json()).toEqual({
      error: {
        message: `${method} is not allowed on ${path}; use GET, HEAD.`,
        type: 'invalid_request_error',
        param: null,
        code: 'method_not_allowed',
      },
    });
  });

  it.each(['/status', '/metrics', '/healthz', '/readyz'])('GET and HEAD %s still answer 200', async (path) => {
    for (const method of ['GET', 'HEAD']) {
      expect((await fetch(`${gateway.url}${path}`, { method, headers: auth })).status).toBe(200);
    }
  });

  it('asks for the status key before it says the method is wrong', async () => {
    const res = await fetch(`${gateway.url}/status`, { method: 'POST' });
    expect(res.status).toBe(401);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('invalid_api_key');
  });

  it('still answers an unknown path 404', async () => {
    expect((await fetch(`${gateway.url}/statusx`, { method: 'POST' })).status).toBe(404);
  });
});
