import { startFakeUpstream, type FakeUpstream } from '@iop/fake-upstream';
import { parsePrometheusText, sampleValue, type PromSample } from '@iop/status/testing';
import pino from 'pino';
import { startTracing } from './observability/tracing';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';

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
async function complete(
  g: TestGateway,
  path: string,
  body: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<{ res: Response; usage?: Usage }> {
  const res = await fetch(`${g.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
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
    // A stream that did not ask for usage shows the client none, but the gateway asked the upstream for it
    // and counts it: the same counts as the same request that asked (README "Metrics, dashboard and traces").
    expect(
      (await complete(gateway, '/v1/chat/completions', { model: 'llama', messages, stream: true })).usage,
    ).toBeUndefined();
    seen.push(seen[1]);
    samples = parsePrometheusText(await (await fetch(`${gateway.url}/metrics`)).text());
  });
  afterAll(async () => {
    await gateway?.close();
    await upstream?.close();
  });

  it('counts the tokens the upstream reported in usage, by provider, model and type (chat and Responses, JSON and streamed)', () => {
    const sum = (f: (u: Usage) => number) => seen.reduce((n, u) => n + f(u), 0);
    expect(sum(input)).toBeGreaterThan(0);
    expect(sampleValue(samples, 'iop_edge_tokens_total', { provider: 'llama-a', model: 'llama', type: 'input' })).toBe(
      sum(input),
    );
    expect(sampleValue(samples, 'iop_edge_tokens_total', { provider: 'llama-a', model: 'llama', type: 'output' })).toBe(
      sum(output),
    );
  });

  it('exports the OpenTelemetry GenAI client metrics under their Prometheus names', () => {
    const genAi = {
      gen_ai_operation_name: 'chat',
      gen_ai_provider_name: 'vllm',
      gen_ai_request_model: 'llama',
      provider: 'llama-a',
    };
    expect(sampleValue(samples, 'gen_ai_client_token_usage_count', { ...genAi, gen_ai_token_type: 'input' })).toBe(
      seen.length,
    );
    expect(sampleValue(samples, 'gen_ai_client_token_usage_sum', { ...genAi, gen_ai_token_type: 'output' })).toBe(
      seen.reduce((n, u) => n + output(u), 0),
    );
    expect(sampleValue(samples, 'gen_ai_client_operation_duration_seconds_count', genAi)).toBe(5);
  });

  it('has queue-wait and time-to-first-byte histograms per provider', () => {
    expect(
      sampleValue(samples, 'iop_edge_provider_queue_wait_seconds_count', { provider: 'llama-a', model: 'llama' }),
    ).toBe(5);
    expect(
      sampleValue(samples, 'iop_edge_provider_time_to_first_byte_seconds_count', {
        provider: 'llama-a',
        model: 'llama',
      }),
    ).toBe(5);
  });

  it('answers every completion with an x-request-id, keeping a plain one the client sent', async () => {
    const mine = await complete(
      gateway,
      '/v1/chat/completions',
      { model: 'llama', messages: [{ role: 'user', content: 'x' }] },
      { 'x-request-id': 'client-req-42' },
    );
    expect(mine.res.headers.get('x-request-id')).toBe('client-req-42');
    const odd = await complete(
      gateway,
      '/v1/chat/completions',
      { model: 'llama', messages: [{ role: 'user', content: 'x' }] },
      { 'x-request-id': 'has spaces and "quotes"' },
    );
    expect(odd.res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe('OpenTelemetry traces over OTLP (off unless configured)', () => {
  it('is off without an OTLP endpoint: the SDK is not started', async () => {
    expect(await startTracing({}, pino({ level: 'silent' }))).toBeUndefined();
    expect(
      await startTracing(
        { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:1', OTEL_SDK_DISABLED: 'true' },
        pino({ level: 'silent' }),
      ),
    ).toBeUndefined();
  });
});
