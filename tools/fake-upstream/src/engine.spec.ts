import { EngineModel, KvCache, parseEngineFlags, promptBlocks, renderPrompt, type BatchSlot } from './engine';
import { startFakeUpstream, type FakeUpstream } from './index';

/** 16-token blocks (64 bytes) keep the prompts of these tests short; no waits unless a test sets them. */
const SMALL = { blockTokens: 16, overheadMs: 0, prefillMsPerToken: 0, decodeMsPerToken: 0 };

let up: FakeUpstream | undefined;
afterEach(async () => {
  await up?.close();
  up = undefined;
});

interface ChatAnswer {
  usage: { prompt_tokens: number; prompt_tokens_details?: { cached_tokens: number } };
}
interface ResponsesAnswer {
  usage: { input_tokens: number; input_tokens_details: { cached_tokens: number } };
}

async function chat(
  upstream: FakeUpstream,
  system: string,
  user: string,
  extra: object = {},
): Promise<{ res: Response; body: ChatAnswer }> {
  const res = await fetch(`${upstream.url}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'llama',
      messages: [
        { role: 'system', content: system },
        { role: 'user', content: user },
      ],
      ...extra,
    }),
  });
  return { res, body: (await res.json()) as ChatAnswer };
}

/** The modelled prompt tokens of a chat of one system and one user message. */
function tokensOf(system: string, user: string): number {
  return Math.ceil(Buffer.byteLength(`system\n${system}\nuser\n${user}\n`) / 4);
}

const SYSTEM = 'You are a careful assistant. '.repeat(11); // 319 bytes: "system\n" + it + "\n" = 327 bytes

describe('engine model: prompt blocks', () => {
  it('hashes whole blocks chained, so prompts share exactly their byte-identical leading blocks', () => {
    const a = promptBlocks('x'.repeat(64 * 3) + 'tail-a', 16);
    const b = promptBlocks('x'.repeat(64 * 2) + 'y'.repeat(64) + 'tail-b', 16);
    expect(a.blockHashes).toHaveLength(3); // the partial fourth block is not hashed
    expect(a.promptTokens).toBe(Math.ceil((192 + 6) / 4));
    expect(b.blockHashes.slice(0, 2)).toEqual(a.blockHashes.slice(0, 2));
    expect(b.blockHashes[2]).not.toBe(a.blockHashes[2]);
    // chained: the same third block after a different first block hashes differently
    const c = promptBlocks('z'.repeat(64) + 'x'.repeat(128), 16);
    expect(c.blockHashes[2]).not.toBe(a.blockHashes[2]);
    expect(promptBlocks('x'.repeat(64 * 3), 16).blockHashes).toEqual(a.blockHashes);
  });

  it('renders chat messages and Responses instructions + input the same way', () => {
    const messages = [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: [{ type: 'text', text: 'hi' }] },
    ];
    expect(renderPrompt('chat', { messages })).toBe('system\nbe brief\nuser\nhi\n');
    expect(renderPrompt('responses', { instructions: 'be brief', input: 'hi' })).toBe('system\nbe brief\nuser\nhi\n');
    expect(renderPrompt('responses', { instructions: 'be brief', input: [{ role: 'user', content: 'hi' }] })).toBe(
      'system\nbe brief\nuser\nhi\n',
    );
  });
});

describe('engine model: KV cache', () => {
  it('evicts the least recently used blocks, a prompt’s tail before its head', () => {
    const cache = new KvCache(3);
    cache.insert(['a1', 'a2']);
    cache.insert(['b1', 'b2']);
    expect(cache.used).toBe(3);
    expect(cache.evictions).toBe(1);
    expect(cache.cachedPrefix(['a1', 'a2'])).toBe(1); // a2 went first, a1 stays
    expect(cache.cachedPrefix(['b1', 'b2'])).toBe(2);
    cache.insert(['a1']); // touched: now b2 is the oldest
    cache.insert(['c1']);
    expect(cache.cachedPrefix(['b1', 'b2'])).toBe(1);
    expect(cache.cachedPrefix(['a1'])).toBe(1);
  });

  it('counts only the leading run of cached blocks', () => {
    const cache = new KvCache(8);
    cache.insert(['h1', 'h3']);
    expect(cache.cachedPrefix(['h1', 'h2', 'h3'])).toBe(1);
    expect(cache.cachedPrefix(['h0', 'h1'])).toBe(0);
  });
});

describe('engine model: batch and time to first token', () => {
  it('computes TTFT = overhead + uncached tokens × prefill ms × load factor, and caches after the prefill', () => {
    const engine = new EngineModel({ blockTokens: 16, overheadMs: 5, prefillMsPerToken: 0.5, maxBatch: 4 });
    const text = 'p'.repeat(64 * 4 + 12); // 4 whole blocks, 67 tokens
    void engine.admit(() => undefined);
    const cold = engine.plan(text);
    expect(cold).toMatchObject({ promptTokens: 67, cachedTokens: 0, loadFactor: 1 });
    expect(cold.ttftMs).toBeCloseTo(5 + 67 * 0.5);
    expect(engine.plan(text).cachedTokens).toBe(0); // not cached before commit
    engine.commit(cold);
    void engine.admit(() => undefined); // 2 running
    const warm = engine.plan(text);
    expect(warm).toMatchObject({ cachedTokens: 64, loadFactor: 1.25 });
    expect(warm.ttftMs).toBeCloseTo(5 + (67 - 64) * 0.5 * 1.25);
    expect(engine.snapshot()).toMatchObject({ queries: 67 * 3, hits: 64, blocksUsed: 4, running: 2, waiting: 0 });
  });

  it('always computes the last prompt token: a prompt of whole cached blocks hits one block less', () => {
    const engine = new EngineModel({ blockTokens: 16 });
    const text = 'q'.repeat(64 * 2);
    engine.commit(engine.plan(text));
    expect(engine.plan(text).cachedTokens).toBe(16);
    expect(engine.plan(text + 'more').cachedTokens).toBe(32);
  });

  it('holds requests beyond max batch waiting, first come first served', async () => {
    const engine = new EngineModel({ maxBatch: 1 });
    const first = await engine.admit(() => undefined);
    let leaveSecond: (() => void) | undefined;
    const order: string[] = [];
    void engine.admit((leave) => (leaveSecond = leave)).then(() => order.push('second'));
    const third = engine
      .admit(() => undefined)
      .then((slot: BatchSlot) => {
        order.push('third');
        return slot;
      });
    expect(engine.snapshot()).toMatchObject({ running: 1, waiting: 2 });
    leaveSecond?.(); // its client left while waiting
    expect(engine.snapshot().waiting).toBe(1);
    first.release();
    first.release(); // idempotent
    (await third).release();
    expect(order).toEqual(['third']);
    expect(engine.snapshot()).toMatchObject({ running: 0, waiting: 0 });
  });
});

describe('engine model: the fake upstream with `engine`', () => {
  it('reports the shared whole blocks as cached_tokens on a second request with the same prefix', async () => {
    up = await startFakeUpstream({ engine: SMALL });
    const first = await chat(up, SYSTEM, 'first question');
    expect(first.body.usage.prompt_tokens).toBe(tokensOf(SYSTEM, 'first question'));
    expect(first.body.usage.prompt_tokens_details).toEqual({ cached_tokens: 0 });
    const second = await chat(up, SYSTEM, 'another question');
    // 327 shared bytes = 5 whole 64-byte blocks (320 bytes); the 6th block holds the differing user text
    expect(second.body.usage.prompt_tokens_details).toEqual({ cached_tokens: 5 * 16 });
    expect(second.res.headers.get('x-fake-engine-cached-tokens')).toBe('80');
    expect(up.stats().engine).toMatchObject({
      hits: 80,
      queries: tokensOf(SYSTEM, 'first question') + tokensOf(SYSTEM, 'another question'),
      evictions: 0,
      running: 0,
      waiting: 0,
    });
  });

  it('reports 0 cached tokens when the first block differs', async () => {
    up = await startFakeUpstream({ engine: SMALL });
    await chat(up, SYSTEM, 'first question');
    const other = await chat(up, `Different. ${SYSTEM}`, 'first question');
    expect(other.body.usage.prompt_tokens_details).toEqual({ cached_tokens: 0 });
  });

  it('reports input_tokens_details.cached_tokens on the Responses API, streamed or not', async () => {
    up = await startFakeUpstream({ engine: SMALL });
    const post = async (input: string, stream: boolean) => {
      const res = await fetch(`${up?.url}/responses`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'qwen', instructions: SYSTEM, input, stream }),
      });
      if (!stream) return ((await res.json()) as ResponsesAnswer).usage;
      const completed = (await res.text()).split('\n').find((l) => l.includes('"response.completed"')) ?? '';
      return (JSON.parse(completed.slice('data: '.length)) as { response: ResponsesAnswer }).response.usage;
    };
    expect((await post('one', false)).input_tokens_details.cached_tokens).toBe(0);
    const again = await post('two', true);
    expect(again.input_tokens_details.cached_tokens).toBe(80);
    expect(again.input_tokens).toBe(tokensOf(SYSTEM, 'two'));
  });

  it('evicts least recently used blocks when the cache is full', async () => {
    up = await startFakeUpstream({ engine: { ...SMALL, cacheBlocks: 6 } });
    const other = 'Another persona entirely, verbose. '.repeat(10);
    await chat(up, SYSTEM, 'q');
    expect(up.stats().engine?.blocksUsed).toBe(5);
    await chat(up, other, 'q'); // 5 more blocks: 4 of the first prompt go, its tail first
    expect(up.stats().engine).toMatchObject({ blocksUsed: 6, evictions: 4 });
    const back = await chat(up, SYSTEM, 'question');
    expect(back.body.usage.prompt_tokens_details).toEqual({ cached_tokens: 16 }); // only its first block is left
    up.reset();
    expect(up.stats().engine).toMatchObject({ blocksUsed: 0, evictions: 0, hits: 0, queries: 0 });
  });

  it('gives a request with a cached prefix a lower modelled TTFT, and waits it', async () => {
    up = await startFakeUpstream({ engine: { blockTokens: 16, overheadMs: 1, prefillMsPerToken: 0.5 } });
    const ttft = (res: Response) => Number(res.headers.get('x-fake-engine-ttft-ms'));
    const tokens = tokensOf(SYSTEM, 'question');
    const started = Date.now();
    const cold = await chat(up, SYSTEM, 'question', { stream: false });
    const coldMs = Date.now() - started;
    expect(ttft(cold.res)).toBeCloseTo(1 + tokens * 0.5);
    const warm = await chat(up, SYSTEM, 'question!');
    expect(ttft(warm.res)).toBeCloseTo(1 + (tokensOf(SYSTEM, 'question!') - 80) * 0.5);
    expect(ttft(cold.res) - ttft(warm.res)).toBeGreaterThan(30);
    expect(coldMs).toBeGreaterThanOrEqual(Math.floor(ttft(cold.res)) - 2); // the delay was really waited
  });

  it('streams with decode time per chunk and reports cached tokens in the usage chunk', async () => {
    up = await startFakeUpstream({ engine: { ...SMALL, decodeMsPerToken: 1 } });
    await chat(up, SYSTEM, 'q');
    const res = await fetch(`${up.url}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'llama',
        stream: true,
        stream_options: { include_usage: true },
        messages: [
          { role: 'system', content: SYSTEM },
          { role: 'user', content: 'q2' },
        ],
      }),
    });
    const lines = (await res.text()).split('\n').filter((l) => l.startsWith('data: {'));
    const usage = (JSON.parse(lines[lines.length - 1].slice(6)) as ChatAnswer).usage;
    expect(usage.prompt_tokens_details).toEqual({ cached_tokens: 80 });
    expect(up.stats().engine?.running).toBe(0);
  });

  it('serves vLLM-style Prometheus text at GET /metrics with the exact names and a model_name label', async () => {
    up = await startFakeUpstream({ engine: { ...SMALL, cacheBlocks: 10 }, models: ['llama'] });
    await chat(up, SYSTEM, 'q');
    await chat(up, SYSTEM, 'q again');
    const res = await fetch(`${up.origin}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    const samples = new Map<string, number>();
    const types = new Map<string, string>();
    for (const line of text.split('\n')) {
      if (line === '') continue;
      const type = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge)$/.exec(line);
      if (type) {
        types.set(type[1], type[2]);
        continue;
      }
      if (/^# HELP [a-zA-Z_:][a-zA-Z0-9_:]* .+$/.test(line)) continue;
      const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)\{model_name="([^"\\]*)"\} (\S+)$/.exec(line);
      expect(sample).not.toBeNull(); // every line is a HELP, a TYPE or a labelled sample
      if (!sample) continue;
      expect(sample[2]).toBe('llama');
      expect(Number.isFinite(Number(sample[3]))).toBe(true);
      samples.set(sample[1], Number(sample[3]));
    }
    const tokens = tokensOf(SYSTEM, 'q') + tokensOf(SYSTEM, 'q again');
    expect(Object.fromEntries(samples)).toEqual({
      'vllm:num_requests_running': 0,
      'vllm:num_requests_waiting': 0,
      'vllm:kv_cache_usage_perc': 0.5, // both prompts are the same 5 whole blocks, of 10
      'vllm:prefix_cache_queries_total': tokens,
      'vllm:prefix_cache_hits_total': 80,
    });
    expect(types.get('vllm:prefix_cache_hits_total')).toBe('counter');
    expect(types.get('vllm:kv_cache_usage_perc')).toBe('gauge');
  });

  it('counts running and waiting requests beyond max batch in /metrics', async () => {
    up = await startFakeUpstream({ engine: { ...SMALL, maxBatch: 1 } });
    const slow = { stream: true, fake: { chunks: 2, chunk_gap_ms: 300 } };
    const a = chat(up, SYSTEM, 'a', slow).catch(() => undefined);
    const b = chat(up, SYSTEM, 'b', slow).catch(() => undefined);
    const deadline = Date.now() + 2000;
    let text = '';
    while (Date.now() < deadline) {
      text = await (await fetch(`${up.origin}/metrics`)).text();
      if (text.includes('vllm:num_requests_waiting{model_name="fake-model"} 1.0')) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(text).toContain('vllm:num_requests_running{model_name="fake-model"} 1.0');
    expect(text).toContain('vllm:num_requests_waiting{model_name="fake-model"} 1.0');
    await Promise.all([a, b]);
  });
});

describe('engine model: off by default', () => {
  it('has no /metrics, no engine stats and no cached-token details', async () => {
    up = await startFakeUpstream();
    expect((await fetch(`${up.origin}/metrics`)).status).toBe(404);
    const { res, body } = await chat(up, SYSTEM, 'q');
    expect(body.usage.prompt_tokens_details).toBeUndefined();
    expect(res.headers.get('x-fake-engine-ttft-ms')).toBeNull();
    expect('engine' in up.stats()).toBe(false);
  });
});

describe('--engine flags', () => {
  it('turns the engine on with --engine or any --engine-* flag, and reads numbers', () => {
    expect(parseEngineFlags(false, {})).toBeUndefined();
    expect(parseEngineFlags(true, {})).toEqual({});
    expect(parseEngineFlags(false, { 'engine-cache-blocks': '2048', 'engine-prefill-ms-per-token': '0.05' })).toEqual({
      cacheBlocks: 2048,
      prefillMsPerToken: 0.05,
    });
  });

  it.each([
    ['engine-cache-blocks', '0'],
    ['engine-max-batch', '1.5'],
    ['engine-overhead-ms', '-1'],
    ['engine-decode-ms-per-token', 'abc'],
    ['engine-block-tokens', ''],
  ] as const)('refuses --%s %p, naming the flag', (flag, value) => {
    expect(() => parseEngineFlags(false, { [flag]: value })).toThrow(`--${flag}`);
  });
});
