import { StreamTail } from './stream-tail';

/** A tail that has seen `chunks` (bytes, as upstreams send them). */
function tailOf(chunks: Array<string | Buffer>, endpoint: 'chat' | 'responses' = 'chat'): StreamTail {
  const tail = new StreamTail(endpoint);
  for (const chunk of chunks) tail.observe(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  return tail;
}

const EVENT = `data: {"choices":[{"delta":{"content":"${'é'.repeat(150)}"}}]}\n\n`;

describe('StreamTail', () => {
  it('reads the end of a chat stream cut into chunks of any size, one byte each included', () => {
    const stream = EVENT + 'data: [DONE]';
    const bytes = Buffer.from(stream);
    const oneByOne = tailOf([...bytes].map((b) => Buffer.from([b])));
    expect(oneByOne.finished()).toBe(true);
    expect(oneByOne.closing()).toBe('\n\n');
    const split = tailOf([EVENT.repeat(3), 'data: [DO', 'NE]\n']);
    expect(split.finished()).toBe(true);
    expect(split.closing()).toBe('\n');
    expect(tailOf([EVENT, 'data: [DONE]\n\n', ': keep-alive']).finished()).toBe(false);
    expect(tailOf([EVENT]).closing()).toBe('');
  });

  it("sees a chat stream's own error event as its last data line, whatever came after it", () => {
    expect(tailOf([EVENT, 'data: {"error": {"message": "overloaded"}}\n\n']).endedWithError()).toBe(true);
    expect(tailOf(['data: {"error": {"message": "x"}}\n\n', EVENT]).endedWithError()).toBe(false);
    expect(tailOf(['data: {"error": {}}\n\n', ': comment, no data line\n\n']).endedWithError()).toBe(true);
    expect(tailOf([]).endedWithError()).toBe(false);
  });

  it('takes text chunks (adapters that stream strings) as their UTF-8 bytes', () => {
    const tail = new StreamTail('chat');
    tail.observe(EVENT);
    tail.observe('data: [DONE]\n\n');
    expect(tail.finished()).toBe(true);
    expect(tail.closing()).toBe('');
  });
});
