import { chatStreamToResponsesStream } from './chat-stream-to-responses-stream';
import { echoOf } from './request-echo';

/** README "Request fields per adapter": a chat stream's reasoning becomes a reasoning item of the Responses stream. */

const delta = (fields: Record<string, unknown>, finishReason: string | null = null) =>
  `data: ${JSON.stringify({ object: 'chat.completion.chunk', choices: [{ index: 0, delta: fields, finish_reason: finishReason }] })}\n\n`;
const DONE = 'data: [DONE]\n\n';

async function* upstream(pieces: string[]): AsyncGenerator<string> {
  yield* pieces;
}

interface Frame {
  type: string;
  sequence_number: number;
  output_index?: number;
  item_id?: string;
  item?: { id: string; type: string; status: string; content: Array<{ type: string; text: string }> };
  response?: { status: string; output: Array<{ type: string; status: string }>; text: unknown };
  [k: string]: unknown;
}

async function translate(pieces: string[], maxTextBytes = Infinity, echo = echoOf({ model: 'm' })) {
  const frames: Frame[] = [];
  let error: unknown;
  try {
    for await (const frame of chatStreamToResponsesStream(upstream(pieces), 'm', maxTextBytes, echo))
      frames.push(JSON.parse(/^data: (.+)$/m.exec(frame)?.[1] ?? 'null') as Frame);
  } catch (err) {
    error = err;
  }
  return { frames, error, types: frames.map((f) => f.type) };
}

describe('chatStreamToResponsesStream with reasoning', () => {
  it('reasoning cut by the token limit before any answer: the reasoning item and an empty message are incomplete', async () => {
    const { frames, types } = await translate([
      delta({ role: 'assistant', reasoning: 'Let me ' }),
      delta({ reasoning: 'think' }, 'length'),
      DONE,
    ]);
    expect(types.at(-1)).toBe('response.incomplete');
    const done = frames.filter((f) => f.type === 'response.output_item.done').map((f) => f.item);
    expect(done.map((item) => [item?.type, item?.status, item?.content[0].text])).toEqual([
      ['reasoning', 'incomplete', 'Let me think'],
      ['message', 'incomplete', ''],
    ]);
    expect(frames.at(-1)?.response?.output.map((item) => item.type)).toEqual(['reasoning', 'message']);
  });

  it('takes reasoning_content when reasoning is absent or null, and one of them when both come', async () => {
    const { frames } = await translate([
      delta({ reasoning: null, reasoning_content: 'a' }),
      delta({ reasoning: 'b', reasoning_content: 'b' }),
      delta({ content: 'answer' }),
      DONE,
    ]);
    const reasoning = frames.filter((f) => f.type === 'response.reasoning_text.delta').map((f) => f.delta);
    expect(reasoning).toEqual(['a', 'b']);
    expect(frames.find((f) => f.type === 'response.reasoning_text.done')).toMatchObject({ text: 'ab' });
  });

  it('reasoning that comes back after the answer started opens a new item: output in the order it was sent', async () => {
    const { frames } = await translate([
      delta({ reasoning: 'r1' }),
      delta({ content: 'c1' }),
      delta({ reasoning: 'r2', content: 'c2' }),
      DONE,
    ]);
    const added = frames.filter((f) => f.type === 'response.output_item.added');
    expect(added.map((f) => [f.output_index, f.item?.type])).toEqual([
      [0, 'reasoning'],
      [1, 'message'],
      [2, 'reasoning'],
      [3, 'message'],
    ]);
    // Every item is closed before the next one opens.
    const opened = frames.filter((f) => /output_item\.(added|done)/.test(f.type)).map((f) => f.type.split('.')[2]);
    expect(opened).toEqual(['added', 'done', 'added', 'done', 'added', 'done', 'added', 'done']);
  });

  it('counts the reasoning toward maxTextBytes', async () => {
    const { error, types } = await translate(
      [delta({ reasoning: 'x'.repeat(600) }), delta({ content: 'y'.repeat(600) }), DONE],
      1000,
    );
    expect(error).toMatchObject({ status: 502, countsAgainstProvider: false });
    expect(types).not.toContain('response.completed');
  });

  it('echoes the request settings in response.created, .in_progress and the final response', async () => {
    const format = { type: 'json_schema', name: 'n', schema: { type: 'object' }, strict: false };
    const { frames } = await translate(
      [delta({ content: '{}' }), DONE],
      Infinity,
      echoOf({ model: 'm', text: { format } }),
    );
    const lifecycle = frames.filter((f) => f.response !== undefined);
    expect(lifecycle.map((f) => f.type)).toEqual(['response.created', 'response.in_progress', 'response.completed']);
    for (const f of lifecycle) expect(f.response?.text).toEqual({ format });
  });
});
