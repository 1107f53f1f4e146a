import type { UpstreamResponse } from '../adapters/adapter';
import type { DispatchBody } from './dispatcher-deps';
import { askStreamUsage, dropUsageChunks, withoutUsage } from './stream-usage';

// README "Token budgets: what a client sees": the gateway asks for a budgeted client's stream usage and
// takes the usage chunk back out when the client did not ask for it, every other byte as sent.

const chat = (extra: Record<string, unknown>) =>
  ({ model: 'm', messages: [{ role: 'user', content: 'hi' }], ...extra }) as unknown as DispatchBody;

const HEAD = '"id":"c1","object":"chat.completion.chunk","created":1,"model":"m"';
const content = (text: string, extra = '') =>
  `data: {${HEAD},"choices":[{"index":0,"delta":{"content":"${text}"},"finish_reason":null}]${extra}}\n\n`;
const stop = (extra = '') => `data: {${HEAD},"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]${extra}}\n\n`;
const usage = `data: {${HEAD},"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}\n\n`;
const DONE = 'data: [DONE]\n\n';

describe('askStreamUsage', () => {
  it('adds include_usage to a streamed chat completion that did not ask, keeping its other options', () => {
    const ask = askStreamUsage('chat', chat({ stream: true, stream_options: { obfuscation: false } }), 'vllm');
    expect(ask.dropUsage).toBe(true);
    expect(ask.body.stream_options).toEqual({ obfuscation: false, include_usage: true });
  });

  it('leaves out continuous_usage_stats, which did nothing without include_usage', () => {
    const ask = askStreamUsage(
      'chat',
      chat({ stream: true, stream_options: { include_usage: false, continuous_usage_stats: true } }),
      'openai_compat',
    );
    expect(ask).toMatchObject({ dropUsage: true, body: { stream_options: { include_usage: true } } });
    expect(ask.body.stream_options).not.toHaveProperty('continuous_usage_stats');
  });

  it('sends unchanged what asked already, what is not a chat stream, a CLI call and an options value that is not an object', () => {
    const cases: Array<[Parameters<typeof askStreamUsage>[0], DispatchBody, Parameters<typeof askStreamUsage>[2]]> = [
      ['chat', chat({ stream: true, stream_options: { include_usage: true } }), 'ollama'],
      ['chat', chat({}), 'vllm'],
      ['chat', chat({ stream: false }), 'vllm'],
      ['responses', { model: 'm', input: 'x', stream: true }, 'vllm'],
      ['chat', chat({ stream: true }), 'cli'],
      ['chat', chat({ stream: true, stream_options: 'yes' }), 'vllm'],
    ];
    for (const [endpoint, body, adapter] of cases) {
      const ask = askStreamUsage(endpoint, body, adapter);
      expect(ask.dropUsage).toBe(false);
      expect(ask.body).toBe(body);
    }
  });

  it('asks on Ollama too (its OpenAI-compatible API honours include_usage)', () => {
    expect(askStreamUsage('chat', chat({ stream: true, stream_options: null }), 'ollama')).toMatchObject({
      dropUsage: true,
      body: { stream_options: { include_usage: true } },
    });
  });
});

describe('dropUsageChunks', () => {
  const stream = (chunks: Array<string | Uint8Array>): UpstreamResponse => ({
    kind: 'sse',
    status: 200,
    body: (async function* () {
      yield* chunks;
    })(),
  });
  const relayed = async (chunks: Array<string | Uint8Array>) => {
    const out = dropUsageChunks(stream(chunks) as Extract<UpstreamResponse, { kind: 'sse' }>);
    const parts: string[] = [];
    for await (const c of out.body) parts.push(typeof c === 'string' ? c : Buffer.from(c).toString('utf8'));
    return parts;
  };

  it('drops the usage chunk, alone in its chunk or sharing it with [DONE], and nothing else', async () => {
    expect((await relayed([content('a'), stop(), usage, DONE])).join('')).toBe(content('a') + stop() + DONE);
    expect((await relayed([content('a'), Buffer.from(stop() + usage + DONE)])).join('')).toBe(
      content('a') + stop() + DONE,
    );
  });

  it('passes chunks without usage as the very same objects, undecoded', async () => {
    const bytes = Buffer.from(content('a'));
    const out = dropUsageChunks(stream([bytes, DONE]) as Extract<UpstreamResponse, { kind: 'sse' }>);
    const first = await out.body[Symbol.asyncIterator]().next();
    expect(first.value).toBe(bytes);
  });

  it('takes out the "usage":null members OpenAI adds to every other chunk', async () => {
    const asSent = [content('a', ',"usage":null'), stop(',"usage":null'), usage, DONE];
    expect((await relayed(asSent)).join('')).toBe(content('a') + stop() + DONE);
    expect(withoutUsage(`data: {"usage": null, ${HEAD},"choices":[]}\n\n`)).toBe(`data: {${HEAD},"choices":[]}\n\n`);
  });

  it('keeps CRLF framing and a content text that merely mentions "usage"', async () => {
    const crlf = (s: string) => s.replace(/\n/g, '\r\n');
    expect((await relayed([crlf(content('a') + usage + DONE)])).join('')).toBe(crlf(content('a') + DONE));
    const mentions = content('\\"usage\\":null and \\"usage\\"');
    expect(withoutUsage(mentions)).toBe(mentions);
  });

  it('keeps a chunk that has choices and a usage (only the choices:[] chunk is the one asked for)', () => {
    const both = `data: {${HEAD},"choices":[{"index":0,"delta":{}}],"usage":{"prompt_tokens":1}}\n\n`;
    expect(withoutUsage(both)).toBe(both);
  });
});
