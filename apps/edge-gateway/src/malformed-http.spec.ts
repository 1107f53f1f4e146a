import { rawExchange, waitUntil } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream } from '@iop/fake-upstream';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';

/**
 * README "Errors": requests Node's HTTP parser refuses before express runs (a bad request line, a
 * `Content-Length` one byte short followed by the extra byte, headers too large, a request that
 * does not arrive in time, an `Expect` other than `100-continue`) get an OpenAI-shaped JSON error with the right status (400, 431, 408, 417)
 * and an `x-request-id`, from the gateway's own HTTP server, on every route; never a bare
 * `400 Bad Request`, never a stack trace, and no upstream is called.
 */

const yaml = `
version: 1
gateway: { header_timeout_ms: 300, body_timeout_ms: 300 }
nodes:
  - id: n
    adapters:
      - { id: v, type: vllm, base_url: "\${UPSTREAM}" }
    providers:
      - { id: vl, category: vllm, adapter: v, models: [vm], max_concurrency: 2 }
`;

const chat = JSON.stringify({ model: 'vm', messages: [{ role: 'user', content: 'hi' }] });
const head = (path: string, length: number) =>
  `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;

describe("requests the gateway's HTTP parser refuses", () => {
  let upstream: FakeUpstream;
  let gateway: TestGateway;

  beforeAll(async () => {
    upstream = await startFakeUpstream();
    gateway = await startTestGateway(yaml, { UPSTREAM: upstream.url }, undefined, { gatewayServer: true });
  });
  afterAll(async () => {
    await gateway.close();
    await upstream.close();
  });

  it.each([
    ['a bad request line', ['GET /v1/models HTTP/1.1 extra\r\nHost: x\r\n\r\n'], 400, 'invalid_request_error'],
    [
      'a method with a bad character',
      ['PO{ST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n'],
      400,
      'invalid_request_error',
    ],
    [
      'a chat completion whose Content-Length is one byte short, then the extra byte',
      [head('/v1/chat/completions', Buffer.byteLength(chat) - 1) + chat],
      400,
      'invalid_request_error',
    ],
    [
      'a Responses request whose Content-Length is one byte short, then the extra byte',
      [head('/v1/responses', 29) + '{"model":"vm","input":"hello"}'],
      400,
      'invalid_request_error',
    ],
    [
      'headers larger than Node reads (16 KiB)',
      [`POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nX-Pad: ${'a'.repeat(20_000)}\r\n\r\n`],
      431,
      'request_header_fields_too_large',
    ],
    [
      'an Expect header other than 100-continue (before the body is sent)',
      [head('/v1/chat/completions', Buffer.byteLength(chat)).replace('Host: x\r\n', 'Host: x\r\nExpect: foo\r\n')],
      417,
      'expectation_failed',
    ],
    [
      'headers slower than gateway.header_timeout_ms',
      ['POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n'],
      408,
      'request_timeout',
    ],
    [
      'a body slower than gateway.body_timeout_ms',
      [head('/v1/chat/completions', Buffer.byteLength(chat)) + chat.slice(0, 10)],
      408,
      'request_timeout',
    ],
  ])(
    '%s: an OpenAI-shaped error with its status and a request id, the connection closed',
    async (_w, parts, status, code) => {
      upstream.reset();
      const answer = await rawExchange(gateway.url, parts);
      expect(answer.status).toBe(status);
      expect(answer.headers['content-type']).toBe('application/json; charset=utf-8');
      expect(answer.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
      expect(Number(answer.headers['content-length'])).toBe(Buffer.byteLength(answer.body));
      const body = JSON.parse(answer.body) as { error: { message: string } };
      expect(body).toEqual({
        error: { message: expect.any(String), type: 'invalid_request_error', param: null, code },
      });
      expect(body.error.message).not.toMatch(/\n\s+at |node:internal|\.js:\d/);
      // One answer, then the close.
      expect(answer.text.match(/HTTP\/1\.1 \d{3} /g)).toHaveLength(1);
      expect(upstream.stats().total).toBe(0);
    },
  );

  it("a 417 keeps the client's x-request-id and quotes at most 200 characters of the Expect header", async () => {
    const expect8k = `x-${'e'.repeat(8000)}`;
    const request = head('/v1/responses', 2).replace(
      'Host: x\r\n',
      `Host: x\r\nX-Request-Id: rid-417\r\nExpect: ${expect8k}\r\n`,
    );
    const answer = await rawExchange(gateway.url, [request]);
    expect(answer.status).toBe(417);
    expect(answer.headers['x-request-id']).toBe('rid-417');
    expect(answer.headers.connection).toBe('close');
    expect(Buffer.byteLength(answer.body)).toBeLessThan(1024);
    expect((JSON.parse(answer.body) as { error: { message: string } }).error.message).toContain(
      '(7802 more characters)',
    );
  });

  it('a well-formed request on the same server is still served', async () => {
    const request = head('/v1/chat/completions', Buffer.byteLength(chat)).replace(
      'Host: x\r\n',
      'Host: x\r\nConnection: close\r\n',
    );
    const answer = await rawExchange(gateway.url, [request + chat]);
    expect(answer.status).toBe(200);
    await waitUntil(() => upstream.stats().total === 1, 1000, 'the upstream to serve the request');
  });
});
