import { createParser, type EventSourceMessage } from 'eventsource-parser';
import fc from 'fast-check';
import { SseFramer } from './sse-framer';

/** The events eventsource-parser reads from `text`, with the fields that make them. */
function parsed(text: string): Array<Pick<EventSourceMessage, 'event' | 'data'>> {
  const events: Array<Pick<EventSourceMessage, 'event' | 'data'>> = [];
  createParser({ onEvent: (e) => events.push({ event: e.event, data: e.data }) }).feed(text);
  return events;
}

/** Feeds `text` to a framer in pieces cut at `cuts`; returns what it passed on and what it held. */
function frame(text: string, cuts: number[]): { passed: Buffer[]; rest: Buffer } {
  const bytes = Buffer.from(text);
  const framer = new SseFramer();
  const passed: Buffer[] = [];
  let from = 0;
  for (const at of [...new Set(cuts)].sort((a, b) => a - b).concat(bytes.length)) {
    if (at <= from || at > bytes.length) continue;
    const whole = framer.push(bytes.subarray(from, at));
    if (whole) passed.push(whole);
    from = at;
  }
  return { passed, rest: framer.rest() };
}

const EVENTS = [
  'data: {"a":1}\n\n',
  'event: response.output_text.delta\ndata: {"b":2}\n\n',
  ': keep-alive\n\n',
  'data: line one\ndata: line two\n\n',
  'id: 7\nretry: 100\ndata: x\n\n',
];
const ENDINGS = ['\n', '\r\n', '\r'];

describe('SseFramer: whole events only, bytes unchanged (README "Streaming")', () => {
  it.each(ENDINGS.map((e) => [JSON.stringify(e), e]))(
    'with %s line endings, any chunking passes every whole event and holds the unfinished one',
    (_name, ending) => {
      const events = EVENTS.map((e) => e.replace(/\n/g, ending));
      const whole = events.join('');
      const cutShort = events[1].slice(0, -ending.length - 3);
      expect(parsed(`${whole}\n`)).toHaveLength(4);
      fc.assert(
        fc.property(fc.array(fc.nat({ max: whole.length + cutShort.length }), { maxLength: 12 }), (cuts) => {
          const { passed, rest } = frame(whole + cutShort, cuts);
          const out = Buffer.concat(passed).toString();
          // Nothing changed, nothing lost: what passed and what is held are the stream.
          expect(out + rest.toString()).toBe(whole + cutShort);
          // Every piece passed on ends an event: an event after it stays an event of its own.
          for (const piece of passed)
            expect(parsed(`${piece.toString()}data: probe\n\n`).at(-1)).toEqual({ event: undefined, data: 'probe' });
          // (A CRLF may be split: the event ends at its CR, and its LF waits with the next event.)
          expect(parsed(`${out}\n`)).toEqual(parsed(`${whole}\n`));
          expect(rest.toString().replace(/^\n/, '')).toBe(cutShort);
        }),
        { numRuns: 200, seed: 7 },
      );
    },
  );

  it('passes a chunk of whole events as it is, without a copy', () => {
    const chunk = Buffer.from(EVENTS.join(''));
    expect(new SseFramer().push(chunk)).toBe(chunk);
  });

  it('keeps a CRLF split between two chunks one line ending: its LF goes on with the event it ended', () => {
    const framer = new SseFramer();
    expect(framer.push(Buffer.from('data: a\r\n\r'))?.toString()).toBe('data: a\r\n\r');
    expect(framer.push(Buffer.from('\ndata: b\r\n'))?.toString()).toBe('\n');
    expect(framer.push(Buffer.from('\r\n'))?.toString()).toBe('data: b\r\n\r\n');
    expect(framer.rest().length).toBe(0);
  });

  it('holds nothing back when the last LF of a CRLF stream comes in a read of its own', () => {
    const framer = new SseFramer();
    expect(framer.push(Buffer.from('data: [DONE]\r\n\r'))?.toString()).toBe('data: [DONE]\r\n\r');
    expect(framer.push(Buffer.from('\n'))?.toString()).toBe('\n');
    expect(framer.rest().length).toBe(0);
  });

  it('cuts a CR-only stream at its empty lines, one byte at a time too', () => {
    const stream = 'data: a\r\rdata: [DONE]\r\r';
    const framer = new SseFramer();
    const out = [...Buffer.from(stream)].map((b) => framer.push(Buffer.from([b]))?.toString() ?? '');
    expect(out.filter((o) => o !== '')).toEqual(['data: a\r\r', 'data: [DONE]\r\r']);
    expect(framer.rest().length).toBe(0);
  });
});
