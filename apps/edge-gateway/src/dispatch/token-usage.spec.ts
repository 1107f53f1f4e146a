import fc from 'fast-check';
import type { UpstreamResponse } from '../adapters/adapter';
import { watchUsage, type TokenUsage } from './token-usage';

/** The usage `watchUsage` reports for a stream of `events` (whole SSE events as text). */
async function streamUsage(endpoint: 'chat' | 'responses', events: string[]): Promise<TokenUsage | undefined> {
  let reported: TokenUsage | undefined;
  const upstream: UpstreamResponse = {
    kind: 'sse',
    status: 200,
    body: (async function* () {
      for (const e of events) yield Buffer.from(e);
    })(),
  };
  const watched = watchUsage(upstream, endpoint, (u) => (reported = u));
  if (watched.kind !== 'sse') throw new Error('a stream stays a stream');
  for await (const chunk of watched.body) void chunk;
  return reported;
}

/** A final Responses event whose response holds `text` and, after its usage, `echo` (a client's schema). */
const completed = (text: string, usage: string, echo: string) =>
  `event: response.completed\ndata: {"type":"response.completed","response":{"id":"r","output":[{"type":"message","content":[{"type":"output_text","text":${JSON.stringify(text)}}]}],"usage":${usage},"text":{"format":{"schema":${echo}}}}}\n\n`;

describe('watchUsage reads usage from its protocol position (README "Token budgets: what a client sees")', () => {
  it('reads the final event of a Responses stream holding megabytes of text, and never a usage inside a string or after it', async () => {
    const text = `${'x'.repeat(3_000_000)}"usage":{"input_tokens":0,"output_tokens":0}`;
    const usage = await streamUsage('responses', [
      completed(text, '{"input_tokens":11,"output_tokens":13}', '{"usage":{"input_tokens":-1}}'),
    ]);
    expect(usage).toEqual({ input: 11, output: 13 });
  });

  it('skips a Responses event that is not final, whatever it holds', async () => {
    const delta =
      'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","response":{"usage":{"input_tokens":5,"output_tokens":5}}}\n\n';
    expect(await streamUsage('responses', [delta])).toBeUndefined();
  });

  it('reads the same usage from a large event as from a small one, whatever the strings around it (property)', async () => {
    const str = fc.oneof(fc.string(), fc.string({ unit: 'grapheme', minLength: 300, maxLength: 2000 }));
    await fc.assert(
      fc.asyncProperty(
        str,
        str,
        fc.nat(1_000_000),
        fc.nat(1_000_000),
        fc.boolean(),
        async (a, b, input, output, large) => {
          const text = large ? a + 'y'.repeat(70_000) + b : a + b;
          const usage = await streamUsage('responses', [
            completed(
              text,
              JSON.stringify({ input_tokens: input, output_tokens: output, note: b }),
              JSON.stringify({ k: a }),
            ),
          ]);
          expect(usage).toEqual({ input, output });
        },
      ),
      { numRuns: 60 },
    );
  });
});
