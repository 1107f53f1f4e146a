import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';

/**
 * README "Security", "Errors": an upstream's own 4xx about the request is passed on, and nothing a
 * client reads of it holds a secret the gateway sent that upstream, in any form, or where the
 * upstream is. The upstream here quotes the request it got in every form a framework might: its
 * URL, its `Host`, its `Authorization` as sent, JSON-escaped with `\/`, percent-encoded, lowercased,
 * uppercased, the Basic credential decoded, and all its headers as JSON; in a JSON error body (400
 * and 422, the quote in `message`, `param` and `code`), in a plain-text one, and inside a 200 answer (an
 * error event ending a stream, a JSON `{"error": …}`).
 */

const API_KEY = 'sk/SECRET+slash=key/0008';
const PASSWORD = 'SECRETpass0006';
const USER = 'rt@user';
/** The query of every base URL: one value plain, one percent-encoded as written. */
const QUERY = '?api-version=SECRETquery0007&k2=SECRET%2Fenc0009';
const BASIC = Buffer.from(`${USER}:${PASSWORD}`).toString('base64');

/** Everything the upstream says it got, as many frameworks would quote it. */
function quote(req: IncomingMessage): string {
  const auth = req.headers.authorization ?? '';
  const decoded = auth.startsWith('Basic ') ? Buffer.from(auth.slice(6), 'base64').toString() : '';
  return [
    `url=http://${req.headers.host}${req.url}`,
    `path=${req.url}`,
    `auth=${auth}`,
    `json_slash=${auth.replace(/\//g, '\\/')}`,
    `urlenc=${encodeURIComponent(auth)}`,
    `b64=${decoded}`,
    `lower=${auth.toLowerCase()}`,
    `upper=${auth.toUpperCase()}`,
    `hdrs=${JSON.stringify(req.headers)}`,
  ].join(' ');
}

/** An upstream that answers every POST with an error quoting the request: status from the model's suffix. */
function startEchoUpstream(): Promise<Server> {
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      if (req.method !== 'POST') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"data":[]}');
        return;
      }
      const asked = JSON.parse(body) as { model?: unknown; stream?: unknown };
      const model = String(asked.model);
      const said = quote(req);
      if (model.endsWith('-inband')) {
        answerInBand(res, req.url ?? '', asked.stream === true, said);
        return;
      }
      if (model.endsWith('-text')) {
        res.writeHead(400, { 'content-type': 'text/plain', 'x-echo-auth': req.headers.authorization ?? '' });
        res.end(said);
        return;
      }
      const status = model.endsWith('-422') ? 422 : 400;
      const error = { message: said, type: 'invalid_request_error', param: req.headers.authorization, code: said };
      res.writeHead(status, { 'content-type': 'application/json', location: `http://${req.headers.host}${req.url}` });
      res.end(JSON.stringify({ error }));
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

/**
 * A 200 answer that reports an error inside it, quoting the request: a stream whose last event is
 * the error (chat `{"error": …}` after a first chunk; Responses `error` after `response.created`),
 * or a JSON body `{"error": …}`.
 */
function answerInBand(res: ServerResponse, url: string, stream: boolean, said: string): void {
  const error = { message: said, type: 'invalid_request_error', param: null, code: 'bad_request' };
  if (!stream) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error }));
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  if (url.includes('/responses')) {
    const created = { type: 'response.created', response: { id: 'resp_1', object: 'response', status: 'in_progress' } };
    res.write(`event: response.created\ndata: ${JSON.stringify(created)}\n\n`);
    res.end(`event: error\ndata: ${JSON.stringify({ ...error, type: 'error' })}\n\n`);
    return;
  }
  const chunk = { id: 'c1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: 'x' } }] };
  res.write(`data: ${JSON.stringify(chunk)}\n\n`);
  res.end(`data: ${JSON.stringify({ error })}\n\n`);
}

const ADAPTERS = [
  { id: 'vk', type: 'vllm', auth: 'key' },
  { id: 'vb', type: 'vllm', auth: 'basic' },
  { id: 'ck', type: 'openai_compat', auth: 'key' },
  { id: 'cb', type: 'openai_compat', auth: 'basic' },
  { id: 'ok', type: 'ollama', auth: 'key' },
  { id: 'ob', type: 'ollama', auth: 'basic' },
] as const;
const KINDS = ['400', '422', 'text', 'inband'] as const;

function yaml(host: string): string {
  const adapters = ADAPTERS.map(({ id, type, auth }) => {
    const path = type === 'ollama' ? '' : '/v1';
    const userinfo = auth === 'basic' ? `${encodeURIComponent(USER)}:${PASSWORD}@` : '';
    const key = auth === 'key' ? `, api_key: "${API_KEY}"` : '';
    return `      - { id: ${id}, type: ${type}, base_url: "http://${userinfo}${host}${path}${QUERY}"${key} }`;
  });
  const providers = ADAPTERS.map(
    ({ id, type }) =>
      `      - { id: p${id}, category: ${type}, adapter: ${id}, max_concurrency: 4, models: [${KINDS.map((k) => `${id}-${k}`).join(', ')}] }`,
  );
  return `
version: 1
nodes:
  - id: n
    adapters:
${adapters.join('\n')}
    providers:
${providers.join('\n')}
`;
}

describe("an upstream's 4xx quoting the request: no secret and no upstream address reaches the client", () => {
  let upstream: Server;
  let gateway: TestGateway;
  let host: string;

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    host = `127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    gateway = await startTestGateway(yaml(host));
  });
  afterAll(async () => {
    await gateway?.close();
    await new Promise((r) => upstream?.close(r));
  });

  /** Every form of every secret, lowercased: the client's answer, lowercased, holds none. */
  const forbidden = () => {
    const secrets = [
      API_KEY,
      PASSWORD,
      'SECRETquery0007',
      'SECRET/enc0009',
      'SECRET%2Fenc0009',
      BASIC,
      `${USER}:${PASSWORD}`,
    ];
    const forms = secrets.flatMap((s) => {
      const json = JSON.stringify(s).slice(1, -1);
      return [s, encodeURIComponent(s), json, json.replace(/\//g, '\\/'), BASIC.replace(/=+$/, '')];
    });
    return [...new Set([...forms, 'secret', host, '127.0.0.1'].map((f) => f.toLowerCase()))];
  };

  const cases = ADAPTERS.flatMap(({ id, type, auth }) =>
    (['chat', 'responses'] as const).flatMap((endpoint) =>
      [false, true].flatMap((stream) => KINDS.map((kind) => [id, type, endpoint, stream, kind, auth] as const)),
    ),
  );

  it.each(cases)('%s (%s) %s stream=%s upstream %s', async (id, _type, endpoint, stream, kind, auth) => {
    const model = `${id}-${kind}`;
    const body =
      endpoint === 'chat'
        ? { model, stream, messages: [{ role: 'user', content: 'hi' }] }
        : { model, stream, input: 'hi' };
    const res = await fetch(`${gateway.url}/v1/${endpoint === 'chat' ? 'chat/completions' : 'responses'}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    const headers = [...res.headers].map(([k, v]) => `${k}: ${v}`).join('\n');
    const seen = `${headers}\n${text}`.toLowerCase();
    for (const form of forbidden()) expect({ form, seen: seen.includes(form) }).toEqual({ form, seen: false });
    // Passed on, not replaced by a generic message: the upstream's status (or a translated stream's error event) and its quote, redacted.
    expect([400, 422, 200]).toContain(res.status);
    if (res.status !== 200) expect(res.status).toBe(kind === '422' ? 422 : 400);
    expect(text).toContain(`auth=${auth === 'key' ? 'Bearer' : 'Basic'} ***`);
    expect(text).toContain(`[adapter ${id}]`);
  });
});
