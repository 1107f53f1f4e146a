import { upstreamError } from '../../errors';
import type { ChatRequest, DispatchContext, UpstreamResponse } from '../adapter';
import { responsesViaChat } from './responses-via-chat';

const ctx: DispatchContext = { upstreamModel: 'up', signal: new AbortController().signal };

async function text(body: AsyncIterable<Uint8Array | string>): Promise<string> {
  let all = '';
  for await (const piece of body) all += typeof piece === 'string' ? piece : new TextDecoder().decode(piece);
  return all;
}

describe('responsesViaChat', () => {
  it('round-trips a non-streamed call: Responses request → chat → Response JSON', async () => {
    let sent: ChatRequest | undefined;
    const answer = await responsesViaChat({ model: 'pub', input: 'hi', instructions: 'sys' }, ctx, async (req) => {
      sent = req;
      const completion = {
        object: 'chat.completion',
        choices: [{ message: { role: 'assistant', content: 'yo' }, finish_reason: 'stop' }],
      };
      return { kind: 'json', status: 200, body: new TextEncoder().encode(JSON.stringify(completion)) };
    });
    expect(sent?.messages).toEqual([
      { role: 'system', content: 'sys' },
      { role: 'user', content: 'hi' },
    ]);
    expect(answer.kind).toBe('json');
    const body = JSON.parse(String((answer as Extract<UpstreamResponse, { kind: 'json' }>).body));
    expect(body).toMatchObject({ object: 'response', model: 'pub', output: [{ content: [{ text: 'yo' }] }] });
  });

  it('round-trips a streamed call into Responses events', async () => {
    const answer = await responsesViaChat({ model: 'pub', input: 'hi', stream: true }, ctx, async (req) => {
      expect(req.stream).toBe(true);
      async function* body() {
        yield `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: 'yo' } }] })}\n\n`;
        yield 'data: [DONE]\n\n';
      }
      return { kind: 'sse', status: 200, body: body() };
    });
    expect(answer.kind).toBe('sse');
    const all = await text((answer as Extract<UpstreamResponse, { kind: 'sse' }>).body);
    expect(all).toContain('event: response.output_text.delta');
    expect(all).toContain('"delta":"yo"');
    expect(all).toMatch(/event: response\.completed\n/);
  });

  it('passes an error of the chat call on unchanged', async () => {
    const failure = upstreamError('down');
    await expect(
      responsesViaChat({ model: 'pub', input: 'hi' }, ctx, async () => Promise.reject(failure)),
    ).rejects.toBe(failure);
  });

  it('answers 502 when the chat answer is not JSON', async () => {
    await expect(
      responsesViaChat({ model: 'pub', input: 'hi' }, ctx, async () => ({ kind: 'json', status: 200, body: '<html>' })),
    ).rejects.toMatchObject({
      status: 502,
    });
  });
});
