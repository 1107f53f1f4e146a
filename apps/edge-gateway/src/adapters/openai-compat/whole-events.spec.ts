import { UpstreamError } from '../../errors';
import {
  CHAT_EVENT as EVENT,
  chatReaderOptions as options,
  DONE_EVENT as DONE,
  handPushedBody as body,
} from '../../testing/sse-reader';
import { wholeEvents } from './whole-events';

/**
 * The reader of an upstream's SSE body on its own (docs/architecture.md, "HTTP surface": whole events only): how it
 * reads the body (not before the iteration, no further than the reader takes) and how each way a body
 * can stop becomes the end of the iteration. The adapters' tests cover the same rules through HTTP.
 */
/** Every chunk the iteration yields as text, and what it threw (undefined when it ended cleanly). */
async function drain(events: AsyncIterable<Uint8Array | string>): Promise<{ text: string; error?: unknown }> {
  let text = '';
  try {
    for await (const chunk of events) text += Buffer.from(chunk).toString('utf8');
  } catch (error) {
    return { text, error };
  }
  return { text };
}

describe('wholeEvents', () => {
  it('reads nothing before the iteration starts', async () => {
    const b = body();
    const events = wholeEvents(b, options());
    b.push(EVENT);
    await new Promise((r) => setImmediate(r));
    expect(b.readableFlowing).toBeNull();
    b.push(DONE);
    b.push(null);
    expect(await drain(events)).toEqual({ text: EVENT + DONE });
  });

  it('reads no further than one framed chunk ahead of its reader: the body is paused while one waits', async () => {
    const b = body();
    const it = wholeEvents(b, options())[Symbol.asyncIterator]();
    const first = it.next();
    for (let i = 0; i < 5; i++) b.push(EVENT);
    expect(await first).toEqual({ done: false, value: Buffer.from(EVENT) });
    await new Promise((r) => setImmediate(r));
    expect(b.isPaused()).toBe(true);
    expect(b.readableLength).toBe(3 * EVENT.length);
    for (let i = 0; i < 4; i++) expect(Buffer.from((await it.next()).value as Uint8Array).toString()).toBe(EVENT);
    b.push(DONE);
    b.push(null);
    expect(Buffer.from((await it.next()).value as Uint8Array).toString()).toBe(DONE);
    expect(await it.next()).toEqual({ done: true, value: undefined });
  });

  it('closes the body when its reader stops early', async () => {
    const b = body();
    b.push(EVENT);
    for await (const chunk of wholeEvents(b, options())) {
      expect(chunk.length).toBeGreaterThan(0);
      break;
    }
    expect(b.destroyed).toBe(true);
  });

  it('fails with a 502 when the body is closed before its end with no error of its own', async () => {
    const b = body();
    const done = drain(wholeEvents(b, options()));
    b.push(EVENT);
    await new Promise((r) => setImmediate(r));
    b.destroy();
    const { text, error } = await done;
    expect(text).toBe(EVENT);
    expect(error).toBeInstanceOf(UpstreamError);
    expect((error as UpstreamError).status).toBe(502);
    expect((error as UpstreamError).message).toContain('failed before it finished (ERR_STREAM_PREMATURE_CLOSE)');
  });

  it('fails with a 502 naming the read error, after the whole events before it', async () => {
    const b = body();
    const done = drain(wholeEvents(b, options()));
    b.push(EVENT + 'data: {"cho');
    await new Promise((r) => setImmediate(r));
    b.destroy(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }));
    const { text, error } = await done;
    expect(text).toBe(EVENT);
    expect((error as UpstreamError).message).toContain('(ECONNRESET)');
  });

  it('ends cleanly when a read fails after the end marker, and adds the blank line of a marker cut short', async () => {
    const after = body();
    const afterDone = drain(wholeEvents(after, options()));
    after.push(EVENT + DONE);
    await new Promise((r) => setImmediate(r));
    after.destroy(new Error('reset after [DONE]'));
    expect(await afterDone).toEqual({ text: EVENT + DONE });

    const cut = body();
    cut.push(EVENT + 'data: [DONE]');
    cut.push(null);
    expect(await drain(wholeEvents(cut, options()))).toEqual({ text: EVENT + 'data: [DONE]\n\n' });
  });

  it.each([
    ['CRLF, the last LF in a read of its own', ['data: a\r\n\r\n', 'data: [DONE]\r\n\r', '\n']],
    ['CR', ['data: a\r\r', 'data: [DONE]\r\r']],
    ['CR, one byte per read', [...'data: a\r\rdata: [DONE]\r\r']],
    ['CRLF, one byte per read', [...'data: a\r\n\r\ndata: [DONE]\r\n\r\n']],
  ])('finds the end marker of a stream with line endings %s, and passes every byte on', async (_how, parts) => {
    const b = body();
    const done = drain(wholeEvents(b, options()));
    for (const part of parts) {
      b.push(part);
      await new Promise((r) => setImmediate(r));
    }
    b.push(null);
    expect(await done).toEqual({ text: parts.join('') });
  });

  it('ends cleanly whatever follows its end marker: a comment, an event, or one cut short', async () => {
    const b = body();
    b.push(`${EVENT}${DONE}: keep-alive\n\ndata: {"late":1}\n\n: cut`);
    b.push(null);
    expect(await drain(wholeEvents(b, options()))).toEqual({
      text: `${EVENT}${DONE}: keep-alive\n\ndata: {"late":1}\n\n`,
    });
  });

  it("ends with the abort's reason when the call's signal fired", async () => {
    const attempt = new AbortController();
    const b = body();
    const done = drain(wholeEvents(b, options(attempt.signal)));
    b.push(EVENT);
    await new Promise((r) => setImmediate(r));
    const reason = new Error('client gone');
    attempt.abort(reason);
    b.destroy(new Error('aborted'));
    expect(await done).toEqual({ text: EVENT, error: reason });
  });

  it("ends cleanly when the call's signal fires after the end marker (an upstream that never ends its stream)", async () => {
    const attempt = new AbortController();
    const b = body();
    const done = drain(wholeEvents(b, options(attempt.signal)));
    b.push(EVENT + DONE);
    await new Promise((r) => setImmediate(r));
    attempt.abort(new Error('stream idle timeout'));
    b.destroy(new Error('aborted'));
    expect(await done).toEqual({ text: EVENT + DONE });
  });

  it('fails (and closes the body) when one event passes maxEventBytes, with the events before it passed on', async () => {
    const b = body();
    const done = drain(wholeEvents(b, options()));
    b.push(EVENT);
    b.push(`data: ${'x'.repeat(2000)}`);
    const { text, error } = await done;
    expect(text).toBe(EVENT);
    expect(error).toBeInstanceOf(UpstreamError);
    expect(b.destroyed).toBe(true);
  });
});
