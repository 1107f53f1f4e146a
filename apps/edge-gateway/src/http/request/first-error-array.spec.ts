import { parseEmbeddingsRequest } from './embeddings-request';
import { parseChatRequest, parseResponsesRequest } from './request-schemas';

/** `items` behind a proxy that counts the elements read: what a check of the array cost. */
function counted<T>(items: T[]): { array: T[]; reads: () => number } {
  let reads = 0;
  const array = new Proxy(items, {
    get(target, key, receiver) {
      if (typeof key === 'string' && /^\d+$/.test(key)) reads++;
      return Reflect.get(target, key, receiver) as unknown;
    },
  });
  return { array, reads: () => reads };
}

const MANY = 200_000;
/** The one pass of the depth check (`findTooDeep`, before the schema) reads every element once. */
const DEPTH_CHECK = MANY;

describe('request arrays are checked up to their first bad element, never walked to collect every issue', () => {
  it.each([
    ['chat messages of zeros', (a: unknown[]) => parseChatRequest({ model: 'm', messages: a }), 0, 'messages[0]'],
    ['chat messages of {}', (a: unknown[]) => parseChatRequest({ model: 'm', messages: a }), {}, 'messages[0].role'],
    [
      'chat content parts',
      (a: unknown[]) => parseChatRequest({ model: 'm', messages: [{ role: 'user', content: a }] }),
      0,
      'messages[0].content',
    ],
    [
      'Responses input items',
      (a: unknown[]) => parseResponsesRequest({ model: 'm', input: a }),
      { role: 'x' },
      'input',
    ],
    ['embeddings input', (a: unknown[]) => parseEmbeddingsRequest({ model: 'm', input: a }), -1, 'input'],
  ] as const)(
    '%s: a bad first element is found after a handful of reads past the depth check',
    (_what, parse, bad, param) => {
      const { array, reads } = counted(new Array<unknown>(MANY).fill(bad));
      expect(() => parse(array)).toThrow(
        expect.objectContaining({ status: 400, param: expect.stringContaining(param) }),
      );
      expect(reads()).toBeLessThan(DEPTH_CHECK + 10);
    },
  );

  it('a bad element deep in the array costs reads up to it, and the error names it', () => {
    const messages = new Array<unknown>(MANY).fill({ role: 'user', content: 'x' });
    messages[1000] = { role: 'robot' };
    const { array, reads } = counted(messages);
    expect(() => parseChatRequest({ model: 'm', messages: array })).toThrow(
      expect.objectContaining({ param: 'messages[1000].role' }),
    );
    expect(reads()).toBeLessThan(DEPTH_CHECK + 1010);
  });

  it('valid token-id inputs pass up to the OpenAI limits (8192 ids each, 2048 inputs)', () => {
    const input = new Array<number>(8192).fill(1234);
    expect(parseEmbeddingsRequest({ model: 'm', input }).input).toHaveLength(8192);
    const batch = Array.from({ length: 2048 }, () => new Array<number>(146).fill(7));
    expect(parseEmbeddingsRequest({ model: 'm', input: batch }).input).toHaveLength(2048);
  });
});
