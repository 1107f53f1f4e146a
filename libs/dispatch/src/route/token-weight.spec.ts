import { estimateTokenWeight } from './token-weight';

const body = (fields: Record<string, unknown>) => ({ model: 'm', ...fields });
/** ⌈bytes / 3⌉ of a text, as the estimate counts it. */
const third = (text: string) => Math.ceil(Buffer.byteLength(text, 'utf8') / 3);

describe('estimateTokenWeight (README "Token-aware provider limits")', () => {
  it('chat: ⌈bytes/3⌉ of every string of the messages plus 4 per message, and max_tokens as the completion', () => {
    const messages = [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hello there, how are you?' },
    ];
    const strings = 'system' + 'Be brief.' + 'user' + 'Hello there, how are you?';
    expect(estimateTokenWeight('chat', body({ messages, max_tokens: 100 }))).toEqual({
      prompt: third(strings) + 8,
      completion: 100,
    });
  });

  it('chat: max_completion_tokens wins over max_tokens, times n choices; none leaves the completion to the provider', () => {
    const messages = [{ role: 'user', content: 'x' }];
    expect(
      estimateTokenWeight('chat', body({ messages, max_tokens: 50, max_completion_tokens: 70, n: 3 })),
    ).toMatchObject({
      completion: 210,
    });
    expect(estimateTokenWeight('chat', body({ messages }))).not.toHaveProperty('completion');
    expect(estimateTokenWeight('chat', body({ messages, max_tokens: -1 }))).not.toHaveProperty('completion');
    expect(estimateTokenWeight('chat', body({ messages, max_tokens: 'lots' }))).not.toHaveProperty('completion');
  });

  // README "Token-aware provider limits": `n` multiplies the allowance whether or not the request names
  // one; a request that names none carries its choices for the granting provider's default.
  it.each([
    ['100 (the reported input: 25 such requests overran a budget 4x)', 100, { choices: 100 }],
    ['2', 2, { choices: 2 }],
    ['1', 1, {}],
    ['0', 0, {}],
    ['-1', -1, {}],
    ['2.5', 2.5, {}],
    ['"3" (digits, as a lenient server reads them)', '3', { choices: 3 }],
    ['"3x"', '3x', {}],
    ['NaN', Number.NaN, {}],
    ['Infinity', Number.POSITIVE_INFINITY, {}],
    ['null', null, {}],
    ['1e300 (capped at 2^53 - 1)', 1e300, { choices: Number.MAX_SAFE_INTEGER }],
  ])('chat without max_tokens, n %s: the default allowance times %p', (_name, n, expected) => {
    const messages = [{ role: 'user', content: 'hi' }];
    expect(estimateTokenWeight('chat', body({ messages, n }))).toEqual({ prompt: 6, ...expected });
  });

  it('n with a completion limit multiplies it (capped at 2^53 - 1) and carries no choices; Responses and embeddings have no n', () => {
    const messages = [{ role: 'user', content: 'hi' }];
    expect(estimateTokenWeight('chat', body({ messages, max_tokens: 10, n: 100 }))).toEqual({
      prompt: 6,
      completion: 1000,
    });
    expect(estimateTokenWeight('chat', body({ messages, max_tokens: 10, n: 1e300 }))).toEqual({
      prompt: 6,
      completion: Number.MAX_SAFE_INTEGER,
    });
    expect(estimateTokenWeight('responses', body({ input: 'hi', n: 100 }))).toEqual({ prompt: 5 });
    expect(estimateTokenWeight('embeddings', body({ input: 'hi', n: 100 }))).toEqual({ prompt: 1, completion: 0 });
  });

  // The reading that weighs most wins where servers read a body differently (a budget must not be dodged).
  it.each([
    [
      'max_completion_tokens 0 beside max_tokens 100000: the larger',
      { max_completion_tokens: 0, max_tokens: 100000 },
      100000,
    ],
    ['max_tokens 5 beside max_completion_tokens 50: the larger', { max_completion_tokens: 50, max_tokens: 5 }, 50],
    ['max_tokens "100000" (digits): its number', { max_tokens: '100000' }, 100000],
    ['n "100" with max_tokens 10: 1000', { max_tokens: 10, n: '100' }, 1000],
    ['max_tokens "1e5" (not digits): absent', { max_tokens: '1e5' }, undefined],
  ])('chat, %s', (_what, fields, completion) => {
    const messages = [{ role: 'user', content: 'hi' }];
    expect(estimateTokenWeight('chat', body({ messages, ...fields })).completion).toBe(completion);
  });

  it('counts UTF-8 bytes, so CJK text (3 bytes a character) is about a token a character', () => {
    const text = '東京は日本の首都です';
    expect(estimateTokenWeight('embeddings', body({ input: text }))).toEqual({ prompt: text.length, completion: 0 });
  });

  it('counts text parts and tool calls but not image, audio or file parts', () => {
    const text = 'What is in this picture?';
    const messages = [
      {
        role: 'user',
        content: [
          { type: 'text', text },
          { type: 'image_url', image_url: { url: `data:image/png;base64,${'A'.repeat(300_000)}` } },
          { type: 'input_audio', input_audio: { data: 'B'.repeat(90_000), format: 'wav' } },
        ],
      },
    ];
    expect(estimateTokenWeight('chat', body({ messages })).prompt).toBe(third('user' + 'text' + text) + 4);
  });

  it('Responses: input items, instructions and tools (as JSON), and max_output_tokens', () => {
    const tools = [{ type: 'function', name: 'lookup', parameters: { type: 'object', properties: {} } }];
    const weight = estimateTokenWeight(
      'responses',
      body({ input: 'Find the weather', instructions: 'Use tools.', tools, max_output_tokens: 300 }),
    );
    expect(weight).toEqual({
      prompt: third('Find the weather' + 'Use tools.' + JSON.stringify(tools)) + 4,
      completion: 300,
    });
  });

  it('embeddings: a list of texts, or pre-tokenized input (one token a number), and no completion', () => {
    expect(estimateTokenWeight('embeddings', body({ input: ['abc', 'def'] }))).toEqual({ prompt: 2, completion: 0 });
    expect(
      estimateTokenWeight(
        'embeddings',
        body({
          input: [
            [1, 2, 3],
            [4, 5],
          ],
        }),
      ),
    ).toEqual({ prompt: 5, completion: 0 });
  });

  it('over-estimates English prose against its real token count (about 4 bytes a token)', () => {
    // 45 words of plain English: cl100k and Llama 3 tokenizers give about 55 to 60 tokens.
    const prose =
      'The quick brown fox jumps over the lazy dog while the farmer watches from the porch. ' +
      'Later that evening, the family gathers for dinner and talks about the harvest, the weather, ' +
      'and the long road to the market in town.';
    const { prompt } = estimateTokenWeight('embeddings', body({ input: prose }));
    expect(prompt).toBeGreaterThanOrEqual(60);
    expect(prompt).toBe(third(prose));
  });
});
