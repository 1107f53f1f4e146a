import type { UpstreamResponse } from '../adapters/adapter';
import { AttemptTokens } from './attempt-tokens';

// README "Token budgets: what a client sees": what an attempt is charged, reported or estimated.

const sse = (chunks: string[]): UpstreamResponse => ({
  kind: 'sse',
  status: 200,
  body: (async function* () {
    yield* chunks.map((c) => Buffer.from(c));
  })(),
});
const drain = async (upstream: UpstreamResponse) => {
  if (upstream.kind === 'sse') for await (const _ of upstream.body);
};
const chunk = (delta: Record<string, unknown>) =>
  `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', choices: [{ index: 0, delta }] })}\n\n`;

describe('AttemptTokens.used', () => {
  it('charges the reported usage, prompt + completion', () => {
    const meter = new AttemptTokens('chat');
    meter.report({ input: 120, output: 30 });
    expect(meter.used(() => 999, true)).toEqual({ tokens: 150, reported: true });
  });

  it('charges nothing for a call the upstream refused before answering', () => {
    expect(new AttemptTokens('chat').used(() => 500, false)).toEqual({ tokens: 0, reported: false });
  });

  it('charges the prompt estimate for a call the gateway cut before any answer', () => {
    expect(new AttemptTokens('chat').used(() => 500, true)).toEqual({ tokens: 500, reported: false });
  });

  it('charges the prompt estimate + relayed text bytes / 3 for a chat stream cut without usage', async () => {
    const meter = new AttemptTokens('chat');
    // 30 bytes of content, 9 of reasoning, 9 of tool arguments (as escaped in the stream: {\"a\":1} is 9 bytes).
    const watched = meter.watch(
      sse([
        chunk({ role: 'assistant', content: '' }),
        chunk({ reasoning_content: 'thinking.' }),
        chunk({ content: 'x'.repeat(30) }),
        chunk({ tool_calls: [{ index: 0, function: { name: 'f', arguments: '{"a":1}' } }] }),
      ]),
    );
    await drain(watched);
    expect(meter.used(() => 100, true)).toEqual({ tokens: 100 + Math.ceil((9 + 30 + 9) / 3), reported: false });
  });

  it('counts only the deltas of a Responses stream, not the closing events that repeat the text', async () => {
    const meter = new AttemptTokens('responses');
    const delta = (d: string) =>
      `event: response.output_text.delta\ndata: ${JSON.stringify({ type: 'response.output_text.delta', delta: d })}\n\n`;
    const done = `event: response.output_text.done\ndata: ${JSON.stringify({ type: 'response.output_text.done', text: 'abcdef' })}\n\n`;
    await drain(meter.watch(sse([delta('abc'), delta('def'), done])));
    expect(meter.used(() => 10, false)).toEqual({ tokens: 12, reported: false });
  });

  it('estimates a JSON answer without usage from its message text', () => {
    const meter = new AttemptTokens('chat');
    const body = JSON.stringify({ choices: [{ index: 0, message: { role: 'assistant', content: 'y'.repeat(60) } }] });
    meter.watch({ kind: 'json', status: 200, body });
    expect(meter.used(() => 7, false)).toEqual({ tokens: 27, reported: false });
  });

  it('charges an embeddings answer without usage its prompt estimate', () => {
    const meter = new AttemptTokens('embeddings');
    meter.watch({ kind: 'json', status: 200, body: '{"object":"list","data":[{"embedding":[0.1]}]}' });
    expect(meter.used(() => 42, false)).toEqual({ tokens: 42, reported: false });
  });
});
