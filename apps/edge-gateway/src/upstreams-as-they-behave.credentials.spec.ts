import type { FakeUpstream } from '@iop/fake-upstream';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';
import { requestBody, post, errorOf, upstreamBehaviourFixture } from './testing/upstream-behaviour';

/**
 * Upstreams and clients as they really behave on the memory backend (README "Security", "Errors"): keys: an upstream's
 * answer never leaks the gateway's key or the upstream's host, a 401 names its scheme. Shared setup:
 * `testing/upstream-behaviour.ts`.
 */

describe('upstreams and clients as they really behave (memory backend)', () => {
  let up: FakeUpstream;
  let gateway: TestGateway;

  const fixture = upstreamBehaviourFixture(() => gateway);
  beforeAll(() => {
    ({ up } = fixture.upstreams());
  });
  const start = async (...args: Parameters<typeof fixture.start>) => {
    ({ gateway } = await fixture.start(...args));
  };

  describe("issue-9: an upstream's answer never leaks the gateway's key or the upstream's host", () => {
    const KEY = 'sk-gateway-upstream-key-123';
    const keyed = () => `
version: 1
nodes:
  - id: n
    adapters:
      - { id: k, type: vllm, base_url: "\${ORIGIN}", api_key: "${KEY}" }
      - { id: echo, type: cli, command: ["node", "-e", "process.stderr.write('token=${KEY} at db.internal:5432\\\\n'); process.exit(7)"] }
    providers:
      - { id: kp, category: vllm, adapter: k, models: [km], max_concurrency: 1 }
      - { id: cp, category: cli, adapter: echo, models: [failing-cli] }
`;

    it.each([401, 403])(
      "an upstream %i is a 502 saying the provider refused the gateway's credentials",
      async (status) => {
        gateway = await startTestGateway(keyed(), { ORIGIN: up.origin });
        for (const stream of [false, true]) {
          const res = await post(gateway, 'chat', requestBody('chat', 'km', stream, { status, echo_secrets: 1 }));
          expect(res.status).toBe(502);
          expect(errorOf(res)).toMatchObject({
            code: 'upstream_error',
            message: expect.stringContaining("refused the gateway's credentials"),
          });
          expect(res.text).not.toContain(KEY);
          expect(res.text).not.toContain('127.0.0.1');
        }
      },
    );

    it('an upstream 5xx echoing the key and host: a generic 502 with the request id', async () => {
      gateway = await startTestGateway(keyed(), { ORIGIN: up.origin });
      for (const endpoint of ['chat', 'responses', 'embeddings'] as const) {
        const res = await post(gateway, endpoint, requestBody(endpoint, 'km', false, { status: 500, echo_secrets: 1 }));
        expect(res.status).toBe(502);
        expect(res.text).not.toContain(KEY);
        expect(res.text).not.toContain('127.0.0.1');
        expect(errorOf(res).message).toContain(res.headers.get('x-request-id') ?? 'request id');
      }
    });

    it.each([400, 422])(
      "an upstream %i about the request is passed on, its quote of the gateway's key redacted",
      async (status) => {
        gateway = await startTestGateway(keyed(), { ORIGIN: up.origin });
        for (const endpoint of ['chat', 'responses', 'embeddings'] as const) {
          const res = await post(gateway, endpoint, requestBody(endpoint, 'km', false, { status, echo_secrets: 1 }));
          expect(res.status).toBe(status);
          expect(errorOf(res).message).toContain('authorization=Bearer ***');
          expect(res.text).not.toContain(KEY);
        }
      },
    );

    it('a CLI that exits 7 after printing a secret on stderr: a generic 502 with the request id', async () => {
      gateway = await startTestGateway(keyed(), { ORIGIN: up.origin });
      for (const stream of [false, true]) {
        const res = await post(gateway, 'chat', { ...requestBody('chat', 'failing-cli', stream), fake: undefined });
        expect(res.status).toBe(502);
        expect(res.text).not.toContain(KEY);
        expect(res.text).not.toContain('db.internal');
        expect(errorOf(res).message).toMatch(/request id/);
      }
    });

    it('an upstream 4xx about the request itself is still passed on with its message', async () => {
      gateway = await startTestGateway(keyed(), { ORIGIN: up.origin });
      const res = await post(gateway, 'chat', requestBody('chat', 'km', false, { status: 400 }));
      expect(res.status).toBe(400);
      expect(errorOf(res).message).toContain('forced status 400');
    });
  });

  describe('a 401', () => {
    it('carries WWW-Authenticate: Bearer', async () => {
      await start({ apiKeys: ['client-key'] });
      for (const endpoint of ['chat', 'responses', 'embeddings'] as const) {
        const res = await post(gateway, endpoint, requestBody(endpoint, 'vm', false));
        expect(res.status).toBe(401);
        expect(res.headers.get('www-authenticate')).toBe('Bearer');
      }
      const ok = await post(gateway, 'chat', requestBody('chat', 'vm', false), { authorization: 'Bearer client-key' });
      expect(ok.status).toBe(200);
    });
  });
});
