import { JsonValueCounter, MEMBER_WEIGHT } from './json-values';

const M = MEMBER_WEIGHT - 1;

/** The count of `text` fed in pieces of `size` bytes (every split point of an escape is then met). */
function countOf(text: string, size = Infinity): number {
  const counter = new JsonValueCounter();
  const bytes = Buffer.from(text);
  for (let at = 0; at < bytes.length; at += size) counter.feed(bytes.subarray(at, at + size), Infinity);
  return counter.count;
}

describe('JsonValueCounter: an upper bound of a body’s values, counted on its bytes before JSON.parse', () => {
  it.each([
    ['a scalar', '5', 1],
    ['an empty object', '{}', 2],
    ['an array of three', '[1,2,3]', 4],
    ['an object of two members: each weighs MEMBER_WEIGHT', '{"a":1,"b":[1,2,3]}', 6 + 2 * M],
    ['commas, colons, brackets and braces inside strings do not count', '{"a":"[{,:,}]","b":"x"}', 3 + 2 * M],
    ['an escaped quote does not end a string', '{"a":"x\\",[:,","b":1}', 3 + 2 * M],
    ['an escaped backslash before the closing quote ends it', '{"a":"x\\\\","b":[1]}', 4 + 2 * M],
    ['unicode escapes and multi-byte text', '{"a":"\\u0022,é,😀","b":1}', 3 + 2 * M],
    ['a million zeros', `[${new Array(1_000_000).fill('0').join(',')}]`, 1_000_001],
  ])('%s', (_what, text, count) => {
    expect(countOf(text)).toBe(count);
    // Fed byte by byte, in threes and in sevens: the same count, escapes split across chunks included.
    for (const size of [1, 3, 7]) expect(countOf(text, size)).toBe(count);
  });

  it('never counts fewer than the array elements and weighted members JSON.parse finds', () => {
    const samples = [
      { model: 'm', messages: [{ role: 'user', content: 'a, [b] {c} "d" \\e' }], stop: ['', ',', '"'] },
      { input: [[1, 2, 3], [4]], nested: { a: { b: { c: [] } } }, empty: {} },
    ];
    const values = (v: unknown): number =>
      v === null || typeof v !== 'object'
        ? 1
        : 1 + Object.values(v).reduce((n: number, c) => n + values(c) + (Array.isArray(v) ? 0 : M), 0);
    for (const sample of samples) expect(countOf(JSON.stringify(sample))).toBeGreaterThanOrEqual(values(sample));
  });

  it('says false as soon as the count passes the limit', () => {
    const counter = new JsonValueCounter();
    expect(counter.feed(Buffer.from('[1,2,3'), 4)).toBe(true);
    expect(counter.feed(Buffer.from(',4,5,6]'), 4)).toBe(false);
    expect(counter.count).toBe(5);
  });
});
