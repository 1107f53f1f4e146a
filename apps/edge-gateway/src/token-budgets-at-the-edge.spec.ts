import { estimateTokenWeight, type QueueClient } from '@iop/dispatch';
import OpenAI from 'openai';
import type { DispatchBody } from './dispatch/dispatcher-deps';
import {
  BUDGET_BACKENDS,
  RESET_DURATION as RESET,
  budgetConfig,
  budgetedClient,
  clientTokensCounted,
  postAs,
  useBudgetGateway,
} from './testing/budget-gateway';

// README "Token budgets: what a client sees", end to end: a real gateway, the fake upstream reporting usage, the
// budget read back from the queue itself (what release charged), on the memory and the Redis backend.

const yaml = budgetConfig({
  clients: [
    '{ id: team, keys: ["k-team"], tokens_per_minute: 1000000 }',
    '{ id: tiny, keys: ["k-tiny"], tokens_per_minute: 300 }',
    '{ id: wide, keys: ["k-wide"], tokens_per_minute: 20000 }',
    '{ id: free, keys: ["k-free"] }',
  ],
  adapters: [
    '{ id: v, type: vllm, base_url: "${UP}" }',
    '{ id: o, type: ollama, base_url: "${UP}" }',
    '{ id: bad, type: vllm, base_url: "${BAD}" }',
  ],
  providers: [
    '{ id: pbad, category: vllm, adapter: bad, models: [f], max_concurrency: 4 }',
    '{ id: pv, category: vllm, adapter: v, models: [m, emb, f], max_concurrency: 4 }',
    '{ id: po, category: ollama, adapter: o, models: [q], max_concurrency: 4 }',
  ],
});

const TEAM = budgetedClient('team', { perMinute: 1_000_000 });

describe.each(BUDGET_BACKENDS)('token budgets at the edge (%s)', (_b, onRedis) => {
  const ctx = useBudgetGateway({
    yaml,
    onRedis,
    prefix: 'budgets-edge',
    upstreams: {
      UP: { models: ['m', 'q', 'emb', 'f'] },
      // Answers every call 500: a request for `f` that reaches it first (pbad is listed first) fails over to pv.
      BAD: { models: ['f'], knobs: { status: 500 } },
    },
  });

  /** The team's charged tokens once nothing is reserved any more (release runs after the answer's last byte). */
  const settledUse = async (client: QueueClient = TEAM): Promise<number> => {
    for (let i = 0; ; i++) {
      const windows = (await ctx.queue.clientBudgets([client])).filter((w) => w.window === 'minute');
      if (windows.length === 1 && windows[0].reservedTokens === 0) return windows[0].usedTokens;
      if (i > 200) throw new Error(`budget never settled: ${JSON.stringify(windows)}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  };
  /** What one call adds to the team's charged tokens. */
  const charged = async <T>(call: () => Promise<T>): Promise<{ result: T; tokens: number }> => {
    const before = await settledUse();
    const result = await call();
    return { result, tokens: (await settledUse()) - before };
  };
  const counted = (client: string, kind: string) => clientTokensCounted(ctx.gateway, client, kind);
  const post = (path: string, key: string, body: object, signal?: AbortSignal) =>
    postAs(ctx.gateway, key, path, body, signal);
  const dataEvents = (text: string) =>
    text
      .split('\n\n')
      .filter((e) => e.startsWith('data: {'))
      .map((e) => JSON.parse(e.slice(6)) as Record<string, unknown>);
  /** The content a chat stream relayed, as JSON-escaped in its chunks. */
  const relayedText = (text: string) =>
    dataEvents(text)
      .map((e) => (e.choices as Array<{ delta?: { content?: string } }> | undefined)?.[0]?.delta?.content ?? '')
      .map((c) => JSON.stringify(c).slice(1, -1))
      .join('');
  /** A stream's text with the per-call ids and times of the fake upstream made equal. */
  const normalized = (text: string) =>
    text.replace(/chatcmpl-fake-\d+/g, 'ID').replace(/"created":\d+/g, '"created":0');
  const chat = (extra: object = {}) => ({
    model: 'm',
    messages: [{ role: 'user' as const, content: 'how many tokens is this?' }],
    ...extra,
  });

  it('a streamed chat completion that did not ask for usage: the stream of a client without budget, charged the usage', async () => {
    const body = chat({ stream: true, fake: { chunks: 4 } });
    const { result, tokens } = await charged(async () => {
      const res = await post('/chat/completions', 'k-team', body);
      return { res, text: await res.text() };
    });
    expect(result.res.status).toBe(200);
    expect(ctx.upstreams.UP.stats().lastRequest['m'].body).toMatchObject({ stream_options: { include_usage: true } });
    const free = await post('/chat/completions', 'k-free', body);
    expect(free.headers.get('x-ratelimit-limit-tokens')).toBeNull();
    const unbudgeted = await free.text();
    // Asked for every client (its tokens are counted), and taken out of the stream all the same.
    expect(ctx.upstreams.UP.stats().lastRequest['m'].body).toMatchObject({ stream_options: { include_usage: true } });
    expect(normalized(result.text)).toBe(normalized(unbudgeted));
    expect(result.text).not.toContain('usage');
    // What the upstream reported for the same request, when asked.
    const asked = await (
      await post('/chat/completions', 'k-free', { ...body, stream_options: { include_usage: true } })
    ).text();
    const usage = dataEvents(asked).at(-1)?.usage as { prompt_tokens: number; completion_tokens: number };
    expect(tokens).toBe(usage.prompt_tokens + usage.completion_tokens);
  });

  it('a client that asked for usage gets the usage chunk unchanged (the official openai client)', async () => {
    const client = new OpenAI({ baseURL: ctx.gateway.baseURL, apiKey: 'k-team', maxRetries: 0 });
    const { result, tokens } = await charged(async () => {
      const { data: stream, response } = await client.chat.completions
        .create({ ...chat(), stream: true, stream_options: { include_usage: true } })
        .withResponse();
      const chunks = [];
      for await (const c of stream) chunks.push(c);
      return { chunks, headers: response.headers };
    });
    const last = result.chunks.at(-1);
    expect(last?.choices).toEqual([]);
    expect(tokens).toBe((last?.usage?.prompt_tokens ?? -1) + (last?.usage?.completion_tokens ?? -1));
    expect(result.headers.get('x-ratelimit-limit-tokens')).toBe('1000000');
    expect(Number(result.headers.get('x-ratelimit-remaining-tokens'))).toBeLessThan(1_000_000);
    expect(result.headers.get('x-ratelimit-reset-tokens')).toMatch(RESET);
  });

  it('the official openai client streaming without usage sees no usage chunk, and the headers', async () => {
    const client = new OpenAI({ baseURL: ctx.gateway.baseURL, apiKey: 'k-team', maxRetries: 0 });
    const { data: stream, response } = await client.chat.completions.create({ ...chat(), stream: true }).withResponse();
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    expect(chunks.length).toBeGreaterThan(1);
    for (const c of chunks) {
      expect(c.choices.length).toBe(1);
      expect(c.usage).toBeUndefined();
    }
    expect(response.headers.get('x-ratelimit-limit-tokens')).toBe('1000000');
    expect(response.headers.get('x-ratelimit-remaining-tokens')).toMatch(/^\d+$/);
    expect(response.headers.get('x-ratelimit-reset-tokens')).toMatch(RESET);
  });

  it('non-streamed chat, Responses (native and translated on Ollama, streamed or not) and embeddings charge the usage', async () => {
    const cases: Array<[string, object, (text: string) => number]> = [
      ['/chat/completions', chat(), (t) => JSON.parse(t).usage.total_tokens],
      ['/responses', { model: 'm', input: 'hello there' }, (t) => JSON.parse(t).usage.total_tokens],
      ['/responses', { model: 'q', input: 'hello there' }, (t) => JSON.parse(t).usage.total_tokens],
      ['/responses', { model: 'm', input: 'hello there', stream: true }, completedUsage],
      ['/responses', { model: 'q', input: 'hello there', stream: true }, completedUsage],
      ['/embeddings', { model: 'emb', input: ['one', 'two'] }, (t) => JSON.parse(t).usage.prompt_tokens],
    ];
    for (const [path, body, reportedOf] of cases) {
      const { result, tokens } = await charged(async () => {
        const res = await post(path, 'k-team', body);
        return { res, text: await res.text() };
      });
      expect([path, result.res.status]).toEqual([path, 200]);
      expect(result.res.headers.get('x-ratelimit-limit-tokens')).toBe('1000000');
      const reported = reportedOf(result.text);
      expect(reported).toBeGreaterThan(0);
      expect([path, body, tokens]).toEqual([path, body, reported]);
    }
  });

  it('a stream cut short without usage is charged the prompt estimate + relayed text / 3', async () => {
    const body = chat({ stream: true, fake: { chunks: 6, cut_after: 3 } });
    const { result, tokens } = await charged(async () => {
      const res = await post('/chat/completions', 'k-team', body);
      return await res.text();
    });
    const relayed = relayedText(result);
    expect(relayed.length).toBeGreaterThan(0);
    const prompt = estimateTokenWeight('chat', body as unknown as DispatchBody).prompt;
    expect(tokens).toBe(prompt + Math.ceil(Buffer.byteLength(relayed) / 3));
  });

  it('a stream the client leaves is charged the prompt estimate + what it was sent / 3', async () => {
    const body = chat({ stream: true, fake: { chunks: 6, stall_after: 2 } });
    const { result, tokens } = await charged(async () => {
      const aborter = new AbortController();
      const res = await post('/chat/completions', 'k-team', body, aborter.signal);
      const reader = (res.body as ReadableStream<Uint8Array>).getReader();
      let text = '';
      while (dataEvents(text).length < 2) text += new TextDecoder().decode((await reader.read()).value);
      aborter.abort();
      return text;
    });
    const prompt = estimateTokenWeight('chat', body as unknown as DispatchBody).prompt;
    expect(tokens).toBe(prompt + Math.ceil(Buffer.byteLength(relayedText(result)) / 3));
  });

  it('a failover charges each attempt its own use: the refused one nothing, the answered one its usage', async () => {
    let failedOver = 0;
    for (let i = 0; i < 6; i++) {
      const before = ctx.upstreams.BAD.stats().total;
      const { result, tokens } = await charged(async () => {
        const res = await post('/chat/completions', 'k-team', { ...chat(), model: 'f' });
        return { res, body: (await res.json()) as { usage: { total_tokens: number } } };
      });
      expect(result.res.status).toBe(200);
      expect(tokens).toBe(result.body.usage.total_tokens);
      if (ctx.upstreams.BAD.stats().total > before) failedOver++;
    }
    expect(failedOver).toBeGreaterThan(0);
  });

  it('a client without a budget: no meter, its answers’ usage counted once, a failover’s refused attempt nothing', async () => {
    let failedOver = 0;
    for (let i = 0; i < 6; i++) {
      const [prompt, completion, failedBefore] = [
        await counted('free', 'prompt'),
        await counted('free', 'completion'),
        ctx.upstreams.BAD.stats().total,
      ];
      const res = await post('/chat/completions', 'k-free', { ...chat(), model: 'f' });
      const { usage } = (await res.json()) as { usage: { prompt_tokens: number; completion_tokens: number } };
      expect(res.status).toBe(200);
      expect(res.headers.get('x-ratelimit-limit-tokens')).toBeNull();
      expect(await counted('free', 'prompt')).toBe(prompt + usage.prompt_tokens);
      expect(await counted('free', 'completion')).toBe(completion + usage.completion_tokens);
      if (ctx.upstreams.BAD.stats().total > failedBefore) failedOver++;
    }
    expect(failedOver).toBeGreaterThan(0);
    expect(await counted('free', 'estimated')).toBe(0);
  });

  it('a spent budget is a 429 rate_limit_exceeded with Retry-After and the client standing', async () => {
    // About 280 tokens reserved; charged the reported prompt and at most the 10 completion tokens it
    // named (the fake upstream reports more): what is left of the window of 300 cannot hold another.
    const big = { model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'x'.repeat(800) }] };
    const first = await post('/chat/completions', 'k-tiny', big);
    expect(first.status).toBe(200);
    const { usage } = (await first.json()) as { usage: { prompt_tokens: number; completion_tokens: number } };
    const left = String(300 - usage.prompt_tokens - Math.min(usage.completion_tokens, 10));
    const refused = await post('/chat/completions', 'k-tiny', big);
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as { error: unknown }).error).toMatchObject({
      code: 'rate_limit_exceeded',
      type: 'rate_limit_error',
    });
    expect(refused.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
    expect(refused.headers.get('x-ratelimit-limit-tokens')).toBe('300');
    expect(refused.headers.get('x-ratelimit-remaining-tokens')).toBe(left);
    expect(refused.headers.get('x-ratelimit-reset-tokens')).toMatch(RESET);
  });

  it('a request over the whole budget is a 429 that says how to fix it, without a Retry-After that cannot help', async () => {
    const huge = { model: 'm', max_tokens: 1000, messages: [{ role: 'user', content: 'hi' }] };
    const refused = await post('/chat/completions', 'k-tiny', huge);
    expect(refused.status).toBe(429);
    const { error } = (await refused.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe('rate_limit_exceeded');
    expect(error.message).toMatch(/too large/i);
    expect(error.message).toMatch(/max_tokens/);
    expect(refused.headers.get('retry-after')).toBeNull();
    // The standing the refusing step read: what the test before left of the window.
    expect(refused.headers.get('x-ratelimit-limit-tokens')).toBe('300');
    expect(Number(refused.headers.get('x-ratelimit-remaining-tokens'))).toBeLessThan(300);
    expect(refused.headers.get('x-ratelimit-reset-tokens')).toMatch(RESET);
  });

  it('an allowance past every number (1e21, max_tokens × n past Infinity) is a 429 too large on every endpoint, and leaves no count', async () => {
    const hi = [{ role: 'user', content: 'hi' }];
    for (const [path, body] of [
      ['/chat/completions', { model: 'm', max_tokens: 1e21, messages: hi }],
      ['/chat/completions', { model: 'm', max_completion_tokens: 1e300, n: 1e10, messages: hi, stream: true }],
      ['/responses', { model: 'm', max_output_tokens: 1e21, input: 'hi' }],
      ['/responses', { model: 'q', max_output_tokens: 1e21, input: 'hi', stream: true }],
    ] as const) {
      const refused = await post(path, 'k-team', body);
      expect([path, refused.status]).toEqual([path, 429]);
      const { error } = (await refused.json()) as { error: { code: string; message: string } };
      expect(error.code).toBe('rate_limit_exceeded');
      expect(error.message).toContain(`Requested ${Number.MAX_SAFE_INTEGER}.`);
    }
    expect((await ctx.queue.clientCounts()).filter((c) => c.clientId === 'team' && c.inFlight > 0)).toEqual([]);
    const ok = await post('/chat/completions', 'k-team', chat());
    expect(ok.status).toBe(200);
    await ok.text();
  });

  it('a chat’s n multiplies the default allowance when it names no max_tokens: 25 of n 100 against 20,000 a minute are each too large', async () => {
    // The reported input: each reserved the default (1024) once, and 19 of 25 were admitted.
    const body = { model: 'm', n: 100, messages: [{ role: 'user', content: 'hi' }] };
    const { prompt } = estimateTokenWeight('chat', body);
    const answers = await Promise.all(
      Array.from({ length: 25 }, async () => {
        const res = await post('/chat/completions', 'k-wide', body);
        const { error } = (await res.json()) as { error?: { message: string } };
        return { status: res.status, retryAfter: res.headers.get('retry-after'), message: error?.message };
      }),
    );
    const tooLarge = {
      status: 429,
      retryAfter: null,
      message: expect.stringContaining(`Limit 20000, Requested ${prompt + 100 * 1024}.`),
    };
    expect(answers).toEqual(Array.from({ length: 25 }, () => tooLarge));
    // n: 3 reserves the default three times: what remains says so.
    const three = await post('/chat/completions', 'k-wide', { ...body, n: 3 });
    expect(three.status).toBe(200);
    expect(three.headers.get('x-ratelimit-remaining-tokens')).toBe(String(20_000 - prompt - 3 * 1024));
    await three.text();
  });

  it('counts each client’s tokens in iop_edge_client_tokens_total', async () => {
    expect(await counted('team', 'prompt')).toBeGreaterThan(0);
    expect(await counted('team', 'completion')).toBeGreaterThan(0);
    expect(await counted('team', 'estimated')).toBeGreaterThan(0);
    // A client without budget: its reported usage is counted too (it asked for it in the first test).
    expect(await counted('free', 'prompt')).toBeGreaterThan(0);
    expect(await (await fetch(`${ctx.gateway.url}/metrics`)).text()).not.toMatch(
      /client_tokens_total\{client="free",kind="estimated"\}/,
    );
  });
});

/** The usage of a Responses stream's `response.completed` event. */
function completedUsage(text: string): number {
  const completed = text.split('\n\n').find((e) => e.startsWith('event: response.completed'));
  const data = completed?.split('\n').find((l) => l.startsWith('data: '));
  return (
    (JSON.parse(data?.slice(6) ?? '{}') as { response?: { usage?: { total_tokens: number } } }).response?.usage
      ?.total_tokens ?? -1
  );
}
