import { MAX_EMBEDDINGS_INPUTS, MAX_INPUT_TOKEN_IDS, parseEmbeddingsRequest } from './embeddings-request';
import { parseChatRequest, parseResponsesRequest } from './request-schemas';

/** The ApiError fields a refusal of `param` carries. */
const refused = (param: string, limit: number) =>
  expect.objectContaining({
    status: 400,
    param,
    message: expect.stringMatching(new RegExp(`at most ${limit} \\(OpenAI API reference: .*${limit}`)),
  });

const ids = (n: number) => new Array<number>(n).fill(50256);

describe("embeddings input: OpenAI's limits (2048 inputs, 8192 token ids each) hold before the schema walks it", () => {
  it('the limits are the OpenAI reference numbers', () => {
    expect([MAX_EMBEDDINGS_INPUTS, MAX_INPUT_TOKEN_IDS]).toEqual([2048, 8192]);
  });

  it.each([
    ['strings', (n: number) => new Array<string>(n).fill('a')],
    ['lists of token ids', (n: number) => Array.from({ length: n }, () => ids(3))],
  ])('2048 %s pass; 2049 are a 400 on `input` naming the limit', (_what, inputs) => {
    expect(parseEmbeddingsRequest({ model: 'm', input: inputs(2048) }).input).toHaveLength(2048);
    expect(() => parseEmbeddingsRequest({ model: 'm', input: inputs(2049) })).toThrow(refused('input', 2048));
  });

  it('450,000 one-letter strings (a 1.8 KB gzip body) are refused at once, never walked nor forwarded', () => {
    const input = new Array<string>(450_000).fill('a');
    const startedAt = performance.now();
    expect(() => parseEmbeddingsRequest({ model: 'm', input })).toThrow(refused('input', 2048));
    expect(performance.now() - startedAt).toBeLessThan(50);
  });

  it('one input of 8192 token ids passes; 8193 are a 400 on `input`', () => {
    expect(parseEmbeddingsRequest({ model: 'm', input: ids(8192) }).input).toHaveLength(8192);
    expect(() => parseEmbeddingsRequest({ model: 'm', input: ids(8193) })).toThrow(refused('input', 8192));
  });

  it('in a list of token-id inputs, the first one past 8192 ids is named', () => {
    expect(parseEmbeddingsRequest({ model: 'm', input: [ids(8192), ids(1)] }).input).toHaveLength(2);
    expect(() => parseEmbeddingsRequest({ model: 'm', input: [ids(2), ids(8193), ids(9000)] })).toThrow(
      refused('input[1]', 8192),
    );
  });

  it('a bad input within the limits still gets the schema’s message', () => {
    expect(() => parseEmbeddingsRequest({ model: 'm', input: [-1] })).toThrow(
      expect.objectContaining({ status: 400, param: 'input' }),
    );
    expect(() => parseEmbeddingsRequest({ model: 'm', input: [] })).toThrow(
      expect.objectContaining({ status: 400, param: 'input' }),
    );
  });

  it('chat and Responses are not held to the embeddings limits', () => {
    const messages = new Array<unknown>(3000).fill({ role: 'user', content: 'x' });
    expect(parseChatRequest({ model: 'm', messages }).messages).toHaveLength(3000);
    const input = new Array<unknown>(3000).fill({ role: 'user', content: 'x' });
    expect(parseResponsesRequest({ model: 'm', input }).input).toHaveLength(3000);
  });
});
