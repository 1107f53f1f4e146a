import { chatStreamToResponsesFrames, chatStreamToResponsesStream } from './chat-stream-to-responses-stream';

/**
 * README "Streaming": a translated Responses stream holds its text once and writes each closing
 * event's copy of it as bytes, one frame at a time; the bytes are those `JSON.stringify` gives for
 * the whole event, whatever the text and however the upstream cut it.
 */
const chunk = (delta: Record<string, unknown>, finishReason: string | null = null) =>
  `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finishReason }] })}\n\n`;
const DONE = 'data: [DONE]\n\n';

async function* upstream(pieces: string[]): AsyncGenerator<string> {
  for (const piece of pieces) yield piece;
}

/** The frames of a stream whose upstream sends these content and reasoning deltas, then stops. */
async function framesOf(deltas: Array<{ content?: string; reasoning?: string }>): Promise<Array<string | Buffer>> {
  const frames: Array<string | Buffer> = [];
  const pieces = [...deltas.map((delta) => chunk(delta)), chunk({}, 'stop'), DONE];
  for await (const frame of chatStreamToResponsesFrames(upstream(pieces), 'm')) frames.push(frame);
  return frames;
}

/** A frame's text and the frame `JSON.stringify` writes for its event (what the translation wrote before it held its text). */
function reserialized(frame: string | Buffer): { text: string; expected: string; data: Record<string, unknown> } {
  const text = typeof frame === 'string' ? frame : frame.toString('utf8');
  const match = /^event: (.+)\ndata: (.+)\n\n$/s.exec(text);
  if (!match) throw new Error(`not one SSE frame: ${text.slice(0, 200)}`);
  const data = JSON.parse(match[2]) as Record<string, unknown>;
  return { text, expected: `event: ${match[1]}\ndata: ${JSON.stringify(data)}\n\n`, data };
}

const TEXT_EVENTS = [
  'response.output_text.done',
  'response.reasoning_text.done',
  'response.content_part.done',
  'response.output_item.done',
  'response.completed',
];

describe('chatStreamToResponsesFrames (README "Streaming": the text held once)', () => {
  it.each([
    ['quotes, backslashes and control characters', ['say "hi"\\', '\n\t\u0000\u001f', 'é✓ \u2028\u2029 \u007f']],
    ['a surrogate pair cut between two deltas', ['emoji: \ud83d', '\ude00 done']],
    ['a surrogate pair cut where a held piece ends', ['x'.repeat(65_535) + '\ud83d', '\ude00 after']],
    ['lone surrogates', ['a\ud800', 'b\udc00c', '\udbff']],
    ['many small deltas (more than are held one by one)', Array.from({ length: 2500 }, (_, i) => `t${i}"\\ `)],
    ['deltas longer than a held piece', ['x'.repeat(70_000), '"'.repeat(70_000), '\ud83d'.repeat(3) + '\ude00']],
  ])('writes the closing events as JSON.stringify writes them: %s', async (_name, deltas) => {
    const frames = await framesOf(deltas.map((content) => ({ content })));
    const whole = deltas.join('');
    for (const frame of frames) {
      const { text, expected, data } = reserialized(frame);
      expect(text).toBe(expected);
      if (TEXT_EVENTS.includes(String(data.type))) expect(Buffer.isBuffer(frame)).toBe(true);
    }
    const completed = reserialized(frames[frames.length - 1]).data as {
      response: { output: Array<{ content: Array<{ text: string }> }> };
    };
    expect(completed.response.output[0].content[0].text).toBe(whole);
  });

  it('holds the reasoning and the answer apart and writes both in the final Response', async () => {
    const frames = await framesOf([{ reasoning: 'think "' }, { reasoning: 'hard' }, { content: 'an\nswer' }]);
    for (const frame of frames) expect(reserialized(frame).text).toBe(reserialized(frame).expected);
    const { response } = reserialized(frames[frames.length - 1]).data as {
      response: { output: Array<{ type: string; content: Array<{ text: string }> }> };
    };
    expect(response.output.map((item) => [item.type, item.content[0].text])).toEqual([
      ['reasoning', 'think "hard'],
      ['message', 'an\nswer'],
    ]);
  });

  it('gives chatStreamToResponsesStream the same frames, as strings', async () => {
    const deltas = ['a "b"', '\ud83d', '\ude00'];
    const pieces = [...deltas.map((content) => chunk({ content })), chunk({}, 'stop'), DONE];
    const strings: string[] = [];
    for await (const frame of chatStreamToResponsesStream(upstream(pieces), 'm')) strings.push(frame);
    const bytes = await framesOf(deltas.map((content) => ({ content })));
    const normalize = (frame: string) =>
      frame.replace(/(resp|msg)_[0-9a-f]{48}/g, 'id').replace(/"created_at":\d+/, '');
    expect(strings.map(normalize)).toEqual(
      bytes.map((frame) => normalize(typeof frame === 'string' ? frame : frame.toString('utf8'))),
    );
  });
});
