import { MemoryProviderQueue, MemoryResponseAffinity, queueProviders } from '@iop/dispatch';
import { startFakeUpstream, type FakeUpstream } from '@iop/fake-upstream';
import { parseConfigText } from '@iop/validate';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import pino from 'pino';
import { AdapterRegistry, createAdapter } from './adapters/adapter-registry';
import { createApp } from './app';
import { MAX_REQUEST_ID_CHARS, requestIdFrom } from './http/request/request-id';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Two providers of model `m`: `first` (chosen first when idle) answers 500, `second` is a fake upstream. */
const yaml = `
version: 1
nodes:
  - id: n
    adapters:
      - { id: a, type: openai_compat, base_url: "\${FIRST}" }
      - { id: b, type: openai_compat, base_url: "\${SECOND}" }
    providers:
      - { id: first, category: openai_compat, adapter: a, models: [m], max_concurrency: 4 }
      - { id: second, category: openai_compat, adapter: b, models: [m], max_concurrency: 4 }
`;

type LogLine = { level: number; msg: string; request_id?: string; [k: string]: unknown };

describe('request ids (README "Errors": x-request-id on every answer, in the log under the same id)', () => {
  let good: FakeUpstream;
  let bad: Server;
  let gateway: Server;
  let url: string;
  const lines: LogLine[] = [];
  const rawLines: string[] = [];
  let closeAll: () => Promise<void>;

  beforeAll(async () => {
    good = await startFakeUpstream({ name: 'good' });
    bad = createServer((_req, res) =>
      res
        .writeHead(500, { 'content-type': 'application/json' })
        .end('{"error":{"message":"boom","type":"server_error"}}'),
    );
    await new Promise<void>((r) => bad.listen(0, '127.0.0.1', r));
    const loaded = parseConfigText(
      yaml,
      { FIRST: `http://127.0.0.1:${(bad.address() as AddressInfo).port}/v1`, SECOND: good.url },
      'test.yaml',
    );
    if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
    const config = loaded.config;
    const queue = new MemoryProviderQueue();
    await queue.configure(queueProviders(config));
    const adapters = new AdapterRegistry(createAdapter);
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString('utf8').split('\n'))
          if (line.trim()) {
            rawLines.push(line);
            lines.push(JSON.parse(line) as LogLine);
          }
        done();
      },
    });
    const logger = pino({ level: 'info' }, sink);
    const app = createApp({ config: () => config, queue, adapters, logger, affinity: new MemoryResponseAffinity() });
    gateway = await new Promise((resolve) => {
      const s = createServer(app).listen(0, '127.0.0.1', () => resolve(s));
    });
    url = `http://127.0.0.1:${(gateway.address() as AddressInfo).port}`;
    closeAll = async () => {
      gateway.closeAllConnections();
      await new Promise<void>((r) => gateway.close(() => r()));
      await queue.close();
      await adapters.close();
      await new Promise<void>((r) => bad.close(() => r()));
      await good.close();
    };
  });
  afterAll(async () => {
    await closeAll?.();
  });

  const chat = (headers: Record<string, string> = {}, model = 'm') =>
    fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
    });

  it('echoes a plain id the client sent, on a success and on an error', async () => {
    const ok = await chat({ 'x-request-id': 'client.req-42:a_b' });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('x-request-id')).toBe('client.req-42:a_b');
    const missing = await chat({ 'x-request-id': 'err-1' }, 'no-such-model');
    expect(missing.status).toBe(404);
    expect(missing.headers.get('x-request-id')).toBe('err-1');
  });

  it('replaces an id with unsafe characters or longer than the limit with a generated one', async () => {
    const odd = await chat({ 'x-request-id': 'has spaces and "quotes"' });
    expect(odd.headers.get('x-request-id')).toMatch(UUID);
    const long = await chat({ 'x-request-id': 'a'.repeat(MAX_REQUEST_ID_CHARS + 1) });
    expect(long.headers.get('x-request-id')).toMatch(UUID);
    const atLimit = await chat({ 'x-request-id': 'b'.repeat(MAX_REQUEST_ID_CHARS) });
    expect(atLimit.headers.get('x-request-id')).toBe('b'.repeat(MAX_REQUEST_ID_CHARS));
  });

  it('generates an id when none is sent, on every answer: completions, unknown paths, /healthz, invalid JSON', async () => {
    expect((await chat()).headers.get('x-request-id')).toMatch(UUID);
    expect((await fetch(`${url}/nowhere`)).headers.get('x-request-id')).toMatch(UUID);
    expect((await fetch(`${url}/healthz`)).headers.get('x-request-id')).toMatch(UUID);
    const badJson = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{',
    });
    expect(badJson.status).toBe(400);
    expect(badJson.headers.get('x-request-id')).toMatch(UUID);
  });

  it('logs the failover warning and the access line of one request under the same request_id', async () => {
    lines.length = 0;
    rawLines.length = 0;
    const res = await chat({ 'x-request-id': 'failover-1' });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-iop-resource')).toBe('second');
    await new Promise((r) => setTimeout(r, 50));
    const mine = lines.filter((l) => l.request_id === 'failover-1');
    const warn = mine.find((l) => l.msg.includes('retrying on another provider'));
    const access = mine.find((l) => l.msg === 'request');
    expect(warn).toMatchObject({ level: 40, provider: 'first' });
    expect(access).toMatchObject({ level: 30, status: 200 });
    // Each line names its request once (a child logger, no second request_id field).
    for (const raw of rawLines.filter((l) => l.includes('failover-1')))
      expect(raw.split('"request_id"')).toHaveLength(2);
  });
});

describe('requestIdFrom', () => {
  it('keeps a safe token of 1 to 128 characters and replaces everything else', () => {
    expect(requestIdFrom('abc-1')).toBe('abc-1');
    expect(requestIdFrom(undefined)).toMatch(UUID);
    expect(requestIdFrom('')).toMatch(UUID);
    expect(requestIdFrom(['a', 'b'])).toMatch(UUID);
    expect(requestIdFrom('x'.repeat(129))).toMatch(UUID);
    expect(requestIdFrom('bad\nline')).toMatch(UUID);
    expect(requestIdFrom('é')).toMatch(UUID);
  });
});
