import { upstreamError } from '../../errors';
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
    expect(tailOf([EVENT]).closing()).toBe('');
    expect(tailOf([EVENT]).finished()).toBe(false);
  });

  it('ends a chat stream at its [DONE] line: a comment or an event after it is a trailer', () => {
    expect(tailOf([EVENT, 'data: [DONE]\n\n', ': keep-alive\n\n']).finished()).toBe(true);
    expect(tailOf([EVENT, 'data: [DONE]\n\n', ': keep-alive']).finished()).toBe(true);
    expect(tailOf([EVENT, 'data: [DONE]\n\ndata: {"late":true}\n\n']).finished()).toBe(true);
    // `[DONE]` inside a delta's text is not the marker.
    expect(tailOf(['data: {"choices":[{"delta":{"content":"data: [DONE]"}}]}\n\n']).finished()).toBe(false);
  });

  it('reads line endings of every kind: CRLF and CR streams are finished and need no blank line added', () => {
    for (const eol of ['\r\n', '\r']) {
      const tail = tailOf([EVENT.replaceAll('\n', eol), `data: [DONE]${eol}${eol}`]);
      expect(tail.finished()).toBe(true);
      expect(tail.closing()).toBe('');
    }
    expect(tailOf(['data: [DONE]\r\n\r', '\n']).closing()).toBe('');
    expect(tailOf(['data: [DONE]\r']).closing()).toBe('\n\n');
    expect(tailOf(['data: [DONE]\r\n']).closing()).toBe('\n');
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

  describe('a Responses stream (README "Streaming": its closing events carry the whole text)', () => {
    const created = `event: response.created\ndata: ${JSON.stringify({ type: 'response.created', sequence_number: 0, response: { id: 'resp_1', status: 'in_progress' } })}\n\n`;
    /** An event of `type` numbered `n` whose text is `text`. */
    const event = (type: string, n: number, text: string, end = '\n\n') =>
      `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: n, text })}${end}`;
    const big = 'é✓"'.repeat(200_000);

    it.each([
      ['bytes', (s: string): string | Buffer => Buffer.from(s)],
      ['text', (s: string): string | Buffer => s],
    ])('reads a long last event given as %s: its number, its type and its end', (_kind, as) => {
      const tail = new StreamTail('responses');
      tail.observe(as(created));
      tail.observe(as(event('response.output_text.done', 7, big)));
      expect(tail.endedWithError()).toBe(false);
      expect(tail.closing()).toBe('');
      expect(tail.errorEvents(upstreamError('cut'))).toContain('"type":"response.failed","sequence_number":8,');
      expect(tail.errorEvents(upstreamError('cut'))).toContain('"response":{"id":"resp_1","status":"failed"');

      const failed = new StreamTail('responses');
      failed.observe(as(created));
      failed.observe(as(event('response.output_text.done', 1, big) + event('response.failed', 2, big, '\n')));
      expect(failed.endedWithError()).toBe(true);
      expect(failed.closing()).toBe('\n');
    });
  });
});
