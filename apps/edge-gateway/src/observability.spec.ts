import { waitUntil } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream } from '@iop/fake-upstream';
import { parsePrometheusText, sampleValue, type PromSample } from '@iop/status/testing';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { startTracing } from './http/tracing';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';
import { spawnGateway, writeTempConfig, type GatewayProcess } from './testing/gateway-process';

const yaml = `
version: 1
nodes:
  - id: gpu
    adapters:
      - { id: vllm, type: vllm, base_url: "\${UPSTREAM}" }
    providers:
      - { id: llama-a, category: vllm, adapter: vllm, models: [llama], max_concurrency: 4 }
`;

type Usage = { prompt_tokens?: number; completion_tokens?: number; input_tokens?: number; output_tokens?: number };

/** POSTs to the gateway; for a stream, returns the usage of its usage chunk or `response.completed` event. */
async function complete(g: TestGateway, path: string, body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<{ res: Response; usage?: Usage }> {
  const res = await fetch(`${g.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const text = await res.text();
  if (!body['stream']) return { res, usage: (JSON.parse(text) as { usage?: Usage }).usage };
  let usage: Usage | undefined;
  for (const line of text.split('\n')) {
    if (!line.startsWith('data: {')) continue;
    const event = JSON.parse(line.slice(6)) as { usage?: Usage; response?: { usage?: Usage } };
    usage = event.usage ?? event.response?.usage ?? usage;
  }
  return { res, usage };
}

const input = (u: Usage | undefined) => u?.prompt_tokens ?? u?.input_tokens ?? 0;
const output = (u: Usage | undefined) => u?.completion_tokens ?? u?.output_tokens ?? 0;

describe('token usage and per-provider metrics (README "Running a fleet": metrics, dashboards and traces)', () => {
  let upstream: FakeUpstream;
  let gateway: TestGateway;
  let samples: PromSample[];
  const seen: Usage[] = [];

  beforeAll(async () => {
    upstream = await startFakeUpstream();
    gateway = await startTestGateway(yaml, { UPSTREAM: upstream.url });
    const messages = [{ role: 'user', content: 'count my tokens please' }];
    const calls: Array<[string, Record<string, unknown>]> = [
      ['/v1/chat/completions', { model: 'llama', messages }],
      ['/v1/chat/completions', { model: 'llama', messages, stream: true, stream_options: { include_usage: true } }],
      ['/v1/responses', { model: 'llama', input: 'count these too' }],
      ['/v1/responses', { model: 'llama', input: 'and these, streamed', stream: true }],
    ];
    for (const [path, body] of calls) {
      const { res, usage } = await complete(gateway, path, body);
      expect(res.status).toBe(200);
      expect(usage).toBeDefined();
      seen.push(usage!);
    }
    // A stream that did not ask for usage reports none: nothing is counted for it.
    expect((await complete(gateway, '/v1/chat/completions', { model: 'llama', messages, stream: true })).usage).toBeUndefined();
    samples = parsePrometheusText(await (await fetch(`${gateway.url}/metrics`)).text());
  });
  afterAll(async () => {
    await gateway?.close();
    await upstream?.close();
  });

  it('counts the tokens the upstream reported in usage, by provider, model and type (chat and Responses, JSON and streamed)', () => {
    const sum = (f: (u: Usage) => number) => seen.reduce((n, u) => n + f(u), 0);
    expect(sum(input)).toBeGreaterThan(0);
    expect(sampleValue(samples, 'iop_edge_tokens_total', { provider: 'llama-a', model: 'llama', type: 'input' })).toBe(sum(input));
    expect(sampleValue(samples, 'iop_edge_tokens_total', { provider: 'llama-a', model: 'llama', type: 'output' })).toBe(sum(output));
  });

  it('exports the OpenTelemetry GenAI client metrics under their Prometheus names', () => {
    const genAi = { gen_ai_operation_name: 'chat', gen_ai_provider_name: 'vllm', gen_ai_request_model: 'llama', provider: 'llama-a' };
    expect(sampleValue(samples, 'gen_ai_client_token_usage_count', { ...genAi, gen_ai_token_type: 'input' })).toBe(4);
    expect(sampleValue(samples, 'gen_ai_client_token_usage_sum', { ...genAi, gen_ai_token_type: 'output' })).toBe(seen.reduce((n, u) => n + output(u), 0));
    expect(sampleValue(samples, 'gen_ai_client_operation_duration_seconds_count', genAi)).toBe(5);
  });

  it('has queue-wait and time-to-first-byte histograms per provider', () => {
    expect(sampleValue(samples, 'iop_edge_provider_queue_wait_seconds_count', { provider: 'llama-a', model: 'llama' })).toBe(5);
    expect(sampleValue(samples, 'iop_edge_provider_time_to_first_byte_seconds_count', { provider: 'llama-a', model: 'llama' })).toBe(5);
  });

  it('answers every completion with an x-request-id, keeping a plain one the client sent', async () => {
    const mine = await complete(gateway, '/v1/chat/completions', { model: 'llama', messages: [{ role: 'user', content: 'x' }] }, { 'x-request-id': 'client-req-42' });
    expect(mine.res.headers.get('x-request-id')).toBe('client-req-42');
    const odd = await complete(gateway, '/v1/chat/completions', { model: 'llama', messages: [{ role: 'user', content: 'x' }] }, { 'x-request-id': 'has spaces and "quotes"' });
    expect(odd.res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });
});

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: { key: string; value: { stringValue?: string; intValue?: string | number; arrayValue?: unknown } }[];
}

const attr = (span: OtlpSpan, key: string) => {
  const v = span.attributes.find((a) => a.key === key)?.value;
  return v?.stringValue ?? (v?.intValue !== undefined ? Number(v.intValue) : undefined);
};

describe('OpenTelemetry traces over OTLP (off unless configured)', () => {
  let upstream: FakeUpstream;
  let receiver: Server;
  let gateway: GatewayProcess | undefined;
  const spans: OtlpSpan[] = [];

  beforeAll(async () => {
    upstream = await startFakeUpstream();
    // A stand-in OTLP/HTTP collector on loopback: collects the JSON the exporter POSTs to /v1/traces.
    receiver = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c));
      req.on('end', () => {
        if (req.url === '/v1/traces') {
          const doc = JSON.parse(body) as { resourceSpans: { scopeSpans: { spans: OtlpSpan[] }[] }[] };
          for (const rs of doc.resourceSpans) for (const ss of rs.scopeSpans) spans.push(...ss.spans);
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
  });
  afterAll(async () => {
    await gateway?.stop();
    await upstream?.close();
    await new Promise((r) => receiver.close(r));
  });

  it('is off without an OTLP endpoint: the SDK is not started', async () => {
    expect(await startTracing({}, pino({ level: 'silent' }))).toBeUndefined();
    expect(await startTracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:1', OTEL_SDK_DISABLED: 'true' }, pino({ level: 'silent' }))).toBeUndefined();
  });

  it('exports one span per request with child spans for the queue wait and the upstream call, carrying the request id, provider and token usage', async () => {
    const { port } = receiver.address() as AddressInfo;
    const config = writeTempConfig(yaml.replace('${UPSTREAM}', upstream.url));
    gateway = await spawnGateway(config, { env: { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`, OTEL_BSP_SCHEDULE_DELAY: '50', OTEL_SERVICE_NAME: 'edge-test', LOG_LEVEL: 'info' } });
    const res = await fetch(`${gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': 'trace-me-1' },
      body: JSON.stringify({ model: 'llama', messages: [{ role: 'user', content: 'trace this' }] }),
    });
    const usage = ((await res.json()) as { usage: Usage }).usage;
    await waitUntil(() => spans.some((s) => attr(s, 'iop.request_id') === 'trace-me-1' && s.name.startsWith('chat')), 10_000, 'the spans at the OTLP receiver');

    const mine = spans.filter((s) => attr(s, 'iop.request_id') === 'trace-me-1');
    const root = mine.find((s) => !s.parentSpanId)!;
    expect(root).toMatchObject({ name: 'POST /v1/chat/completions', kind: 2 });
    expect(attr(root, 'http.response.status_code')).toBe(200);
    expect(attr(root, 'iop.provider')).toBe('llama-a');
    const children = mine.filter((s) => s.parentSpanId === root.spanId);
    expect(children.map((s) => s.name).sort()).toEqual(['chat llama', 'queue wait']);
    for (const child of children) {
      expect(child.traceId).toBe(root.traceId);
      expect(BigInt(child.startTimeUnixNano)).toBeGreaterThanOrEqual(BigInt(root.startTimeUnixNano));
      expect(BigInt(child.endTimeUnixNano)).toBeLessThanOrEqual(BigInt(root.endTimeUnixNano));
    }
    const call = children.find((s) => s.name === 'chat llama')!;
    expect(call.kind).toBe(3);
    expect(attr(call, 'gen_ai.provider.name')).toBe('vllm');
    expect(attr(call, 'gen_ai.usage.input_tokens')).toBe(usage.prompt_tokens);
    expect(attr(call, 'gen_ai.usage.output_tokens')).toBe(usage.completion_tokens);
    expect(attr(call, 'iop.provider')).toBe('llama-a');
    expect(gateway.output()).toContain('tracing: exporting spans over OTLP/HTTP');
  });
});
