import { waitUntil } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream } from '@iop/fake-upstream';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
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

describe('OpenTelemetry traces over OTLP from the built gateway', () => {
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

  it('exports one span per request with child spans for the queue wait and the upstream call, carrying the request id, provider and token usage', async () => {
    const { port } = receiver.address() as AddressInfo;
    const config = writeTempConfig(yaml.replace('${UPSTREAM}', upstream.url));
    gateway = await spawnGateway(config, {
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
        OTEL_BSP_SCHEDULE_DELAY: '50',
        OTEL_SERVICE_NAME: 'edge-test',
        LOG_LEVEL: 'info',
      },
    });
    const res = await fetch(`${gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': 'trace-me-1' },
      body: JSON.stringify({ model: 'llama', messages: [{ role: 'user', content: 'trace this' }] }),
    });
    const usage = ((await res.json()) as { usage: Usage }).usage;
    await waitUntil(
      () => spans.some((s) => attr(s, 'iop.request_id') === 'trace-me-1' && s.name.startsWith('chat')),
      10_000,
      'the spans at the OTLP receiver',
    );

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
    await gateway.waitForOutput('tracing: exporting spans over OTLP/HTTP');
  });
});
