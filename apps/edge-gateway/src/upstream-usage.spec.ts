import type { QueueClient } from '@iop/dispatch';
import fc from 'fast-check';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
const MAX_REPORTED_TOKENS = 2 ** 24;
import {
  BUDGET_BACKENDS,
  budgetConfig,
  budgetedClient,
  clientTokensCounted,
  postAs,
  useBudgetGateway,
} from './testing/budget-gateway';

// README "Security" and "Token budgets: what a client sees": usage is read from its protocol position
// (a JSON answer's top-level `usage`; a chat chunk's `usage`; the final Responses event's
// `response.usage`) and every count is bounded before it is counted or charged. An upstream here answers
// with the usage each test scripts, and with decoy `usage` objects where the protocol puts none (as a
// Response echoing a client's `text.format` schema does): the process stays up, and counts and budgets
// are exact.

/** What the scripted upstream answers: the `usage` JSON text (written raw: `1e999`, duplicated keys) and decoys. */
interface Script {
  /** Raw JSON text of the answer's `usage` member. */
  usage: string;
  /** Raw JSON text of a `usage` object put where the protocol puts none (nested, after the real one). */
  decoy: string;
}

let script: Script = { usage: '{"prompt_tokens":5,"completion_tokens":7}', decoy: '{"prompt_tokens":0}' };

/** The answer text: a fixed word, so the estimate of a call without usage is the same every time. */
const TEXT = 'hello';

function chatJson(s: Script): string {
  return `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"${TEXT}"},"finish_reason":"stop"}],"usage":${s.usage},"meta":{"usage":${s.decoy}}}`;
}

function chatStream(s: Script): string {
  const chunk = (extra: string) =>
    `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m",${extra}}\n\n`;
  return (
    chunk(`"choices":[{"index":0,"delta":{"role":"assistant","content":"${TEXT}"},"finish_reason":null}]`) +
    chunk(`"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"meta":{"usage":${s.decoy}}`) +
    chunk(`"choices":[],"usage":${s.usage},"meta":{"usage":${s.decoy}}`) +
    'data: [DONE]\n\n'
  );
}

/** A Response object whose `text.format` echoes a schema holding a decoy usage after the real one. */
function responseJson(s: Script, status = 'completed'): string {
  return `{"id":"resp_1","object":"response","created_at":1,"status":"${status}","model":"m","output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"${TEXT}","annotations":[]}]}],"usage":${s.usage},"text":{"format":{"type":"json_schema","name":"x","schema":{"usage":${s.decoy}}}}}`;
}

function responsesStream(s: Script): string {
  const event = (type: string, data: string) => `event: ${type}\ndata: {"type":"${type}",${data}}\n\n`;
  return (
    event('response.created', `"response":${responseJson({ ...s, usage: 'null' }, 'in_progress')}`) +
    event('response.output_text.delta', `"item_id":"msg_1","output_index":0,"content_index":0,"delta":"${TEXT}"`) +
    event('response.output_text.done', `"item_id":"msg_1","output_index":0,"content_index":0,"text":"${TEXT}"`) +
    event('response.completed', `"response":${responseJson(s)}`)
  );
}

function embeddingsJson(s: Script): string {
  return `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,0.25]}],"model":"e","usage":${s.usage},"meta":{"usage":${s.decoy}}}`;
}

/** Answers each endpoint with {@link script}. */
function answer(req: IncomingMessage, res: ServerResponse, body: Record<string, unknown>): void {
  const stream = body.stream === true;
  const url = req.url ?? '';
  if (url.endsWith('/models')) {
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"object":"list","data":[]}');
    return;
  }
  if (url.endsWith('/embeddings')) {
    res.writeHead(200, { 'content-type': 'application/json' }).end(embeddingsJson(script));
    return;
  }
  const responses = url.endsWith('/responses');
  if (!stream) {
    res.writeHead(200, { 'content-type': 'application/json' }).end(responses ? responseJson(script) : chatJson(script));
    return;
  }
  res
    .writeHead(200, { 'content-type': 'text/event-stream' })
    .end(responses ? responsesStream(script) : chatStream(script));
}

/** Endpoint, adapter type (model) and stream flag of one call. */
type Call = {
  path: '/chat/completions' | '/responses' | '/embeddings';
  model: 'mv' | 'mc' | 'mo' | 'e';
  stream: boolean;
};

const CALLS: Call[] = [
  ...(['mv', 'mc', 'mo'] as const).flatMap((model) =>
    (['/chat/completions', '/responses'] as const).flatMap((path) =>
      [false, true].map((stream) => ({ path, model, stream })),
    ),
  ),
  { path: '/embeddings', model: 'e', stream: false },
];

const describeCall = (c: Call) =>
  `${c.path} ${{ mv: 'vllm', mc: 'openai_compat', mo: 'ollama', e: 'vllm' }[c.model]}${c.stream ? ' streamed' : ''}`;

/** The usage an upstream's counts mean, for the `usage` JSON text of {@link Script}, or undefined when they are no token counts. */
function expectedUsage(call: Call, usageText: string): { input: number; output: number } | 'none' | 'invalid' {
  const usage = JSON.parse(usageText) as unknown;
  if (typeof usage !== 'object' || usage === null || Array.isArray(usage)) return 'none';
  // Ollama's Responses are translated from chat: the gateway reads the chat usage the upstream sent.
  const responses = call.path === '/responses' && call.model !== 'mo';
  const u = usage as Record<string, unknown>;
  const input = responses ? u.input_tokens : u.prompt_tokens;
  const output = call.path === '/embeddings' ? undefined : responses ? u.output_tokens : u.completion_tokens;
  if (input === undefined && output === undefined) return 'none';
  const ok = (v: unknown) =>
    v === undefined || (typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= MAX_REPORTED_TOKENS);
  if (!ok(input) || !ok(output)) return 'invalid';
  // The translation of a chat usage keeps its counts only when both are numbers.
  if (call.model === 'mo' && call.path === '/responses' && (input === undefined || output === undefined)) return 'none';
  // `-0` counts as 0.
  return { input: ((input as number | undefined) ?? 0) + 0, output: ((output as number | undefined) ?? 0) + 0 };
}

const TEAM: QueueClient = budgetedClient('team', { perMinute: 1_000_000_000 });

describe.each(BUDGET_BACKENDS)('usage read from its protocol position, bounded (%s)', (_b, onRedis) => {
  let upstream: Server;
  const env: Record<string, string> = {};
  beforeAll(async () => {
    upstream = createServer((req, res) => {
      let raw = '';
      req.on('data', (c: Buffer) => (raw += c.toString()));
      req.on('end', () => answer(req, res, raw ? (JSON.parse(raw) as Record<string, unknown>) : {}));
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    env.HOSTILE = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/v1`;
  });
  afterAll(() => new Promise<void>((r) => upstream.close(() => r())));

  const ctx = useBudgetGateway({
    yaml: budgetConfig({
      clients: ['{ id: team, keys: ["k-team"], tokens_per_minute: 1000000000 }', '{ id: free, keys: ["k-free"] }'],
      adapters: [
        '{ id: v, type: vllm, base_url: "${HOSTILE}" }',
        '{ id: c, type: openai_compat, base_url: "${HOSTILE}" }',
        '{ id: o, type: ollama, base_url: "${HOSTILE}" }',
      ],
      providers: [
        '{ id: pv, category: vllm, adapter: v, models: [mv, e], max_concurrency: 4 }',
        '{ id: pc, category: openai_compat, adapter: c, models: [mc], max_concurrency: 4 }',
        '{ id: po, category: ollama, adapter: o, models: [mo], max_concurrency: 4 }',
      ],
    }),
    onRedis,
    prefix: 'upstream-usage',
    // The config reads ${HOSTILE}; a fake upstream under that name is replaced by the env below.
    upstreams: {},
    env: () => env,
  });

  const settledUse = async (): Promise<number> => {
    for (let i = 0; ; i++) {
      const windows = (await ctx.queue.clientBudgets([TEAM])).filter((w) => w.window === 'minute');
      if (windows.length === 1 && windows[0].reservedTokens === 0) return windows[0].usedTokens;
      if (i > 300) throw new Error(`budget never settled: ${JSON.stringify(windows)}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  };
  const counts = async (client: string) => ({
    prompt: await clientTokensCounted(ctx.gateway, client, 'prompt'),
    completion: await clientTokensCounted(ctx.gateway, client, 'completion'),
    estimated: await clientTokensCounted(ctx.gateway, client, 'estimated'),
  });
  const body = (call: Call) =>
    call.path === '/embeddings'
      ? { model: call.model, input: 'hi' }
      : call.path === '/responses'
        ? { model: call.model, input: 'hi', stream: call.stream }
        : { model: call.model, messages: [{ role: 'user', content: 'hi' }], stream: call.stream };

  /** Sends `call` as `team` with `s` scripted; checks what was counted and charged; the gateway must still answer. */
  async function checkCall(call: Call, s: Script): Promise<void> {
    script = s;
    const before = { counts: await counts('team'), used: await settledUse() };
    const res = await postAs(ctx.gateway, 'k-team', call.path, body(call));
    await res.text();
    expect(res.status).toBe(200);
    const used = (await settledUse()) - before.used;
    const after = await counts('team');
    const expected = expectedUsage(call, s.usage);
    if (typeof expected === 'object') {
      expect(used).toBe(expected.input + expected.output);
      expect(after.prompt - before.counts.prompt).toBe(expected.input);
      expect(after.completion - before.counts.completion).toBe(expected.output);
      expect(after.estimated).toBe(before.counts.estimated);
    } else {
      // No usage, or counts that are not counts: the estimate is charged and counted as one, nothing as reported.
      expect(used).toBeGreaterThan(0);
      expect(used).toBeLessThan(100);
      expect(after.estimated - before.counts.estimated).toBe(used);
      expect(after.prompt).toBe(before.counts.prompt);
      expect(after.completion).toBe(before.counts.completion);
    }
    // The process serves on.
    expect((await fetch(`${ctx.gateway.url}/healthz`)).status).toBe(200);
    const metrics = await (await fetch(`${ctx.gateway.url}/metrics`)).text();
    expect(metrics).not.toMatch(/iop_edge_(client_)?tokens_total\{[^}]*\} (?:-|\d+e\+|Inf|NaN)/);
  }

  const HOSTILE_USAGE: Array<[string, string]> = [
    ['negative counts', '{"prompt_tokens":-7,"completion_tokens":-1,"input_tokens":-7,"output_tokens":-1}'],
    [
      'counts past every number',
      '{"prompt_tokens":1e999,"completion_tokens":1,"input_tokens":1e999,"output_tokens":1}',
    ],
    ['huge counts', '{"prompt_tokens":1e300,"completion_tokens":1e300,"input_tokens":1e300,"output_tokens":1e300}'],
    ['fractions', '{"prompt_tokens":2.5,"completion_tokens":1,"input_tokens":2.5,"output_tokens":1}'],
    ['strings', '{"prompt_tokens":"12","completion_tokens":"3","input_tokens":"12","output_tokens":"3"}'],
    ['objects', '{"prompt_tokens":{"n":1},"completion_tokens":[1],"input_tokens":{"n":1},"output_tokens":[1]}'],
    [
      'duplicated keys, the last one negative',
      '{"prompt_tokens":5,"prompt_tokens":-5,"input_tokens":5,"input_tokens":-5}',
    ],
    ['not an object', '"12"'],
  ];

  describe.each(CALLS)('%#', (call) => {
    it(`${describeCall(call)}: counts and charges the real usage, never a decoy`, async () => {
      await checkCall(call, {
        usage: '{"prompt_tokens":5,"completion_tokens":7,"input_tokens":5,"output_tokens":7,"total_tokens":12}',
        decoy: '{"prompt_tokens":0,"completion_tokens":0,"input_tokens":-1,"output_tokens":0}',
      });
    });
    it.each(HOSTILE_USAGE)(
      `${describeCall(call)}: %s are not counted; the estimate is charged`,
      async (_what, usage) => {
        await checkCall(call, { usage, decoy: '{"prompt_tokens":-1,"input_tokens":-1}' });
      },
    );
  });

  it.each([
    ['{"input_tokens":-1}', false],
    ['{"input_tokens":-1}', true],
    ['{"input_tokens":0,"output_tokens":0}', false],
    ['{"input_tokens":0,"output_tokens":0}', true],
  ])(
    'a Responses request to an Ollama pool whose text.format schema holds "usage": %s (streamed: %s) is charged the upstream usage',
    async (decoy, stream) => {
      script = { usage: '{"prompt_tokens":5,"completion_tokens":7}', decoy: '{}' };
      const before = { counts: await counts('team'), used: await settledUse() };
      const res = await postAs(ctx.gateway, 'k-team', '/responses', {
        model: 'mo',
        input: 'hi',
        stream,
        text: { format: { type: 'json_schema', name: 'x', schema: JSON.parse(`{"type":"object","usage":${decoy}}`) } },
      });
      const text = await res.text();
      expect(res.status).toBe(200);
      // The Response echoes the schema after its own usage: the decoy is in the answer, and is not read.
      expect(text).toContain(`"usage":${decoy}`);
      expect((await settledUse()) - before.used).toBe(12);
      const after = await counts('team');
      expect(after.prompt - before.counts.prompt).toBe(5);
      expect(after.completion - before.counts.completion).toBe(7);
      expect((await fetch(`${ctx.gateway.url}/healthz`)).status).toBe(200);
    },
  );

  it.each([
    ['/chat/completions', { model: 'mv', messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 }],
    ['/chat/completions', { model: 'mc', messages: [{ role: 'user', content: 'hi' }], max_tokens: 5, stream: true }],
    ['/responses', { model: 'mv', input: 'hi', max_output_tokens: 5 }],
  ] as const)(
    '%s: a completion count past the allowance the request named is charged and counted as the allowance',
    async (path, request) => {
      script = {
        usage: '{"prompt_tokens":5,"completion_tokens":16777216,"input_tokens":5,"output_tokens":16777216}',
        decoy: '{}',
      };
      const before = { counts: await counts('team'), used: await settledUse() };
      const res = await postAs(ctx.gateway, 'k-team', path, request);
      await res.text();
      expect(res.status).toBe(200);
      expect((await settledUse()) - before.used).toBe(5 + 5);
      const after = await counts('team');
      expect(after.completion - before.counts.completion).toBe(5);
      expect(after.prompt - before.counts.prompt).toBe(5);
    },
  );

  it('hostile values anywhere in the usage and its decoys, every endpoint and adapter (property)', async () => {
    const count = fc.oneof(
      fc.integer({ min: -1_000_000, max: 1_000_000 }).map(String),
      fc.constantFrom(
        '1e999',
        '-1e999',
        '1e300',
        '2.5',
        '-0',
        '"7"',
        'null',
        'true',
        '{"a":1}',
        '[1,2]',
        String(MAX_REPORTED_TOKENS + 1),
      ),
    );
    const usageText = fc
      .record(
        { prompt_tokens: count, completion_tokens: count, input_tokens: count, output_tokens: count },
        { requiredKeys: [] },
      )
      .map(
        (fields) =>
          `{${Object.entries(fields)
            .map(([k, v]) => `"${k}":${v}`)
            .join(',')}}`,
      );
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...CALLS), usageText, usageText, async (call, usage, decoy) => {
        await checkCall(call, { usage, decoy });
      }),
      { numRuns: onRedis ? 40 : 80 },
    );
  });
});
