import OpenAI from 'openai';
import { chatStreamToResponsesStream } from './chat-stream-to-responses-stream';

const encoder = new TextEncoder();
const chunk = (content: string, extra: Record<string, unknown> = {}) =>
  `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content }, finish_reason: null }], ...extra })}\n\n`;
const stop = (reason = 'stop') =>
  `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: {}, finish_reason: reason }] })}\n\n`;
const usageChunk = `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', choices: [], usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } })}\n\n`;
const DONE = 'data: [DONE]\n\n';
const roleChunk = `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] })}\n\n`;

/** An upstream body made of these pieces; an Error piece makes the iterator throw there. */
async function* upstream(pieces: Array<string | Uint8Array | Error>): AsyncGenerator<string | Uint8Array> {
  for (const piece of pieces) {
    if (piece instanceof Error) throw piece;
    yield piece;
  }
}

interface Frame {
  event: string;
  data: { type: string; sequence_number: number; [k: string]: unknown };
}

function parseFrame(frame: string): Frame {
  const match = /^event: (.+)\ndata: (.+)\n\n$/.exec(frame);
  if (!match) throw new Error(`not one SSE frame: ${JSON.stringify(frame)}`);
  return { event: match[1], data: JSON.parse(match[2]) };
}

async function translate(pieces: Array<string | Uint8Array | Error>): Promise<{ frames: Frame[]; error?: unknown }> {
  const frames: Frame[] = [];
  try {
    for await (const frame of chatStreamToResponsesStream(upstream(pieces), 'public-name'))
      frames.push(parseFrame(frame));
  } catch (error) {
    return { frames, error };
  }
  return { frames };
}

describe('chatStreamToResponsesStream', () => {
  it('emits the Responses event sequence with increasing sequence numbers', async () => {
    const { frames, error } = await translate([roleChunk, chunk('Hel'), chunk('lo'), stop(), usageChunk, DONE]);
    expect(error).toBeUndefined();
    expect(frames.map((f) => f.event)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    frames.forEach((f, i) => {
      expect(f.data.type).toBe(f.event);
      expect(f.data.sequence_number).toBe(i);
    });
    expect(frames.filter((f) => f.event === 'response.output_text.delta').map((f) => f.data.delta)).toEqual([
      'Hel',
      'lo',
    ]);
    expect(frames[6].data).toMatchObject({ text: 'Hello', output_index: 0, content_index: 0 });
    const completed = frames[9].data.response as Record<string, unknown>;
    expect(completed).toMatchObject({
      object: 'response',
      status: 'completed',
      model: 'public-name',
      output: [
        {
          type: 'message',
          role: 'assistant',
          status: 'completed',
          content: [{ type: 'output_text', text: 'Hello', annotations: [] }],
        },
      ],
      usage: { input_tokens: 3, output_tokens: 2, total_tokens: 5 },
    });
    expect(completed.id).toBe((frames[0].data.response as { id: string }).id);
  });

  it('parses frames split anywhere, across UTF-8 byte boundaries too', async () => {
    const text = chunk('héllo ✓') + chunk('!') + stop() + DONE;
    const bytes = encoder.encode(text);
    const pieces = Array.from({ length: bytes.length }, (_, i) => bytes.subarray(i, i + 1));
    const { frames, error } = await translate(pieces);
    expect(error).toBeUndefined();
    expect(frames.filter((f) => f.event === 'response.output_text.delta').map((f) => f.data.delta)).toEqual([
      'héllo ✓',
      '!',
    ]);
  });

  it('emits each delta as soon as its chunk arrives, without coalescing', async () => {
    // The upstream holds its second chunk until the first delta came out of the translation.
    let release = (): void => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    async function* slowUpstream(): AsyncGenerator<string> {
      yield chunk('a');
      await gate;
      yield chunk('b') + DONE;
    }
    const iterator = chatStreamToResponsesStream(slowUpstream(), 'm')[Symbol.asyncIterator]();
    let first: Frame | undefined;
    while (first?.event !== 'response.output_text.delta') first = parseFrame((await iterator.next()).value as string);
    expect(first.data.delta).toBe('a');
    release();
    const rest: string[] = [];
    for (let r = await iterator.next(); !r.done; r = await iterator.next()) rest.push(parseFrame(r.value).event);
    expect(rest[0]).toBe('response.output_text.delta');
    expect(rest.at(-1)).toBe('response.completed');
  });

  it('reports a response cut by the token limit as response.incomplete', async () => {
    const { frames } = await translate([chunk('x'), stop('length'), DONE]);
    const last = frames.at(-1) as Frame;
    expect(last.event).toBe('response.incomplete');
    expect(last.data.response).toMatchObject({
      status: 'incomplete',
      incomplete_details: { reason: 'max_output_tokens' },
    });
  });

  it('completes an empty answer', async () => {
    const { frames, error } = await translate([DONE]);
    expect(error).toBeUndefined();
    expect(frames.map((f) => f.event)).toContain('response.completed');
    expect(frames.find((f) => f.event === 'response.output_text.done')?.data.text).toBe('');
  });

  const failures: Array<[string, Array<string | Error>, number]> = [
    [
      'an in-band {"error"} payload mid-stream',
      [chunk('a'), `data: ${JSON.stringify({ error: { message: 'model crashed' } })}\n\n`, DONE],
      5,
    ],
    ['an error event', [chunk('a'), `event: error\ndata: ${JSON.stringify({ message: 'boom' })}\n\n`], 5],
    ['an upstream iterator that throws', [chunk('a'), new Error('socket reset')], 5],
    ['a stream that ends without [DONE]', [chunk('a'), stop()], 5],
    ['data that is not JSON', [chunk('a'), 'data: {oops\n\n'], 5],
    ['an error before any event', [`data: ${JSON.stringify({ error: 'overloaded' })}\n\n`], 0],
  ];
  it.each(failures)('throws on %s and never completes', async (_name, pieces, framesBefore) => {
    const { frames, error } = await translate(pieces);
    expect(error).toBeInstanceOf(Error);
    expect(frames).toHaveLength(framesBefore);
    expect(frames.map((f) => f.event)).not.toContain('response.completed');
  });

  it('keeps the upstream error message for the log (detail), not for the client', async () => {
    const { error } = await translate([
      chunk('a'),
      `data: ${JSON.stringify({ error: { message: 'model crashed' } })}\n\n`,
    ]);
    expect(error).toMatchObject({
      status: 502,
      code: 'upstream_error',
      detail: expect.stringContaining('model crashed'),
      countsAgainstProvider: true,
    });
    expect((error as Error).message).not.toContain('model crashed');
  });

  it('counts a stream whose [DONE] is ended by the end of the stream, not a blank line, as finished', async () => {
    const { frames, error } = await translate([chunk('Hel'), chunk('lo'), stop(), 'data: [DONE]']);
    expect(error).toBeUndefined();
    expect(frames.at(-1)?.event).toBe('response.completed');
    expect(
      (frames.at(-1)?.data.response as { output: Array<{ content: Array<{ text: string }> }> }).output[0].content[0]
        .text,
    ).toBe('Hello');
  });

  it.each([
    [
      'an OpenAI invalid_request_error',
      { error: { message: 'context length exceeded', type: 'invalid_request_error', code: 'context_length_exceeded' } },
      400,
      'context_length_exceeded',
    ],
    [
      'a vLLM error with a numeric code',
      {
        error: { object: 'error', message: 'context length exceeded', type: 'BadRequestError', param: null, code: 400 },
      },
      400,
      'invalid_request_error',
    ],
  ])(
    "passes %s as its first event on as the client's 4xx, not counted against the provider",
    async (_name, payload, status, code) => {
      const { frames, error } = await translate([`data: ${JSON.stringify(payload)}\n\n`]);
      expect(frames).toHaveLength(0);
      expect(error).toMatchObject({
        status,
        code,
        message: 'context length exceeded',
        countsAgainstProvider: false,
        failsOver: false,
      });
    },
  );

  it('fails with a 502 not booked once the text passes maxTextBytes, and stops reading the upstream', async () => {
    let pulled = 0;
    async function* endless(): AsyncGenerator<string> {
      for (;;) {
        pulled++;
        yield chunk('é'.repeat(100)); // 200 bytes of UTF-8
      }
    }
    const frames: string[] = [];
    let error: unknown;
    try {
      for await (const frame of chatStreamToResponsesStream(endless(), 'public-name', 1000)) frames.push(frame);
    } catch (err) {
      error = err;
    }
    expect(error).toMatchObject({
      status: 502,
      code: 'upstream_error',
      countsAgainstProvider: false,
      failsOver: false,
    });
    expect((error as Error).message).toContain('gateway.max_response_bytes');
    // Five deltas of 200 bytes fit, the sixth passes 1000: no closing frame follows.
    expect(frames.filter((f) => f.includes('response.output_text.delta'))).toHaveLength(5);
    expect(frames.some((f) => f.includes('response.completed'))).toBe(false);
    expect(pulled).toBe(6);
  });

  it('stops reading the upstream when its consumer stops', async () => {
    let finished = false;
    async function* endless(): AsyncGenerator<string> {
      try {
        for (;;) yield chunk('x');
      } finally {
        finished = true;
      }
    }
    for await (const frame of chatStreamToResponsesStream(endless(), 'm')) {
      if (frame.includes('output_text.delta')) break;
    }
    expect(finished).toBe(true);
  });

  it('is read by the openai client stream helper into the whole text', async () => {
    const frames: string[] = [];
    for await (const frame of chatStreamToResponsesStream(
      upstream([roleChunk, chunk('Hello, '), chunk('world'), stop(), DONE]),
      'public-name',
    ))
      frames.push(frame);
    const client = new OpenAI({
      apiKey: 'test',
      baseURL: 'http://gateway.test/v1',
      maxRetries: 0,
      fetch: async () =>
        new Response(frames.join(''), { status: 200, headers: { 'content-type': 'text/event-stream' } }),
    });
    const deltas: string[] = [];
    const stream = client.responses.stream({ model: 'public-name', input: 'hi' });
    stream.on('response.output_text.delta', (event) => deltas.push(event.delta));
    const final = await stream.finalResponse();
    expect(deltas).toEqual(['Hello, ', 'world']);
    expect(final.output_text).toBe('Hello, world');
    expect(final.status).toBe('completed');
  });
});
